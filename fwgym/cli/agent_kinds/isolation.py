"""Options shared by the agent kinds whose agents are code and run isolated (``--agent sb3``,
``--agent MODULE:FACTORY``): deadlines, the worker's command, the variables passed to its scrubbed
environment (``--agent-env NAME``), its sandbox (``--agent-sandbox``, ``--agent-read``, ``--agent-write``),
whether it keeps memory between episodes (``--agent-memory``), and the in-process opt-out.

The options are added once by whichever of those kinds registers first (:func:`add_isolation_arguments`
is idempotent). See :mod:`fwgym.agents.isolation`, docs/isolation.md and SECURITY.md.
"""
from __future__ import annotations

import sys

from fwgym.cli.args import add_arguments_once, positive_float
from fwgym.core.cases import SEALED_SPLIT

#: (flags, argparse kwargs) of the shared options
ISOLATION_OPTIONS: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("--agent-timeout",), {"type": positive_float, "default": None, "dest": "agent_timeout", "metavar": "SECONDS",
                            "help": "seconds an isolated agent has to answer each call (default 60); an agent that "
                                    "takes longer is killed and the episode is its failure"}),
    (("--agent-start-timeout",), {"type": positive_float, "default": None, "dest": "agent_start_timeout", "metavar": "SECONDS",
                                  "help": "seconds an isolated agent's worker has to start and build the agent "
                                          "(default 300)"}),
    (("--agent-worker-command",), {"default": None, "dest": "agent_worker_command", "metavar": "CMD",
                                   "help": "command that starts an isolated agent's worker (default: this Python on "
                                           "fwgym/isolation/worker.py), e.g. as another user or in a container "
                                           "that cannot read fwgym's data (SECURITY.md)"}),
    (("--agent-env",), {"action": "append", "default": None, "dest": "agent_env", "metavar": "NAME",
                        "help": "pass environment variable NAME (its value here) to an isolated agent's worker, whose "
                                "environment is otherwise only PATH, HOME, locale, TMPDIR, PYTHONPATH, VIRTUAL_ENV, "
                                "thread counts and the like (fwgym.agents.isolation.WORKER_ENV): no API keys or "
                                "tokens unless named here; repeatable"}),
    (("--agent-sandbox",), {"choices": ("auto", "require", "off"), "default": "auto", "dest": "agent_sandbox",
                            "help": "the isolated agent's sandbox (Landlock: it cannot read fwgym's data, the run "
                                    "directory or the evaluator, nor signal it): auto (default: where the kernel "
                                    "allows it, else a separate process only, said on stderr and in the manifest), "
                                    "require (refuse to run without it) or off (docs/isolation.md)"}),
    (("--agent-memory",), {"choices": ("worker", "none"), "default": None, "dest": "agent_memory",
                           "help": "none: a fresh worker process for every episode (no memory across cases; the "
                                   "default on the sealed split); worker: a worker plays episode after episode "
                                   "(the default on the other splits)"}),
    (("--agent-read",), {"action": "append", "default": None, "dest": "agent_read", "metavar": "PATH",
                         "help": "let the sandboxed agent read PATH (e.g. its weights; besides the Python "
                                 "installation and the code on sys.path); never fwgym's data or the run "
                                 "directory; repeatable"}),
    (("--agent-write",), {"action": "append", "default": None, "dest": "agent_write", "metavar": "PATH",
                          "help": "let the sandboxed agent write PATH (besides its private temporary directory, "
                                  "removed with its worker); repeatable"}),
    (("--in-process",), {"action": "store_true", "dest": "in_process",
                         "help": "run a code agent (SB3 zip, MODULE:FACTORY) inside the evaluating process instead of "
                                 "an isolated worker: only for code you trust (it could read the answers and patch "
                                 "the scorer)"}),
)


def add_isolation_arguments(group) -> None:
    """Add :data:`ISOLATION_OPTIONS` to ``group`` unless another kind already did."""
    add_arguments_once(group, ISOLATION_OPTIONS)


def agent_memory(args) -> str:
    """``--agent-memory``, or its default: ``"none"`` on the sealed split, ``"worker"`` elsewhere."""
    memory = getattr(args, "agent_memory", None)
    if memory is None:
        return "none" if getattr(args, "split", None) == SEALED_SPLIT else "worker"
    return memory


def isolation_kwargs(args) -> dict:
    """``call_timeout``, ``start_timeout``, ``worker_command``, ``sandbox``, ``memory`` and, when given,
    ``worker_env`` (the names of ``--agent-env``), ``read_paths`` and ``write_paths``, from the
    options (the defaults of :mod:`fwgym.agents.isolation` where not given).

    Raises:
        ValueError: a deadline that is not > 0; an ``--agent-env`` name that is not set here; ``--agent-sandbox
            require`` where the kernel cannot sandbox a worker; a path of ``--agent-read`` / ``--agent-write``
            that does not exist.
    """
    from fwgym.agents.isolation import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, isolation_status, worker_environ

    call = getattr(args, "agent_timeout", None)
    start = getattr(args, "agent_start_timeout", None)
    call = DEFAULT_CALL_TIMEOUT if call is None else float(call)
    start = DEFAULT_START_TIMEOUT if start is None else float(start)
    if call <= 0 or start <= 0:
        raise ValueError("--agent-timeout and --agent-start-timeout must be > 0 seconds")
    names = list(getattr(args, "agent_env", None) or ())
    try:
        worker_environ(extra=names)  # refused here, before any worker starts
    except ValueError as exc:
        raise ValueError(f"--agent-env: {exc}") from None
    mode = getattr(args, "agent_sandbox", None) or "auto"
    isolation_status(mode, getattr(args, "agent_worker_command", None))  # --agent-sandbox require: refused now
    out = {"call_timeout": call, "start_timeout": start, "worker_command": getattr(args, "agent_worker_command", None),
           "sandbox": mode, "memory": agent_memory(args)}
    if names:  # only when given: the agent's description (in the run manifest) is otherwise what it was
        out["worker_env"] = names
    for option, key in (("agent_read", "read_paths"), ("agent_write", "write_paths")):
        given = _checked_paths(f"--{option.replace('_', '-')}", getattr(args, option, None) or ())
        if given:
            out[key] = given
    return out


def _checked_paths(option: str, paths) -> list[str]:
    """``paths`` made absolute, refused when one does not exist or holds (or lies in) a protected path."""
    import os

    from fwgym.isolation.remote import sandbox_protected

    out = []
    for p in paths:
        real = os.path.realpath(p)
        if not os.path.exists(real):
            raise ValueError(f"{option}: no such path {p}")
        clash = [q for q in sandbox_protected() if q == real or q.startswith(real.rstrip(os.sep) + os.sep)
                 or real.startswith(q.rstrip(os.sep) + os.sep)]
        if clash:
            raise ValueError(f"{option} {p}: it holds or lies in {clash[0]}, which no agent may read or write "
                             "(fwgym's data, the run directory, the forecast store); name a folder beside it")
        out.append(os.path.abspath(p))
    return out


def report_isolation(description: dict, what: str) -> None:
    """Say on stderr when an isolated agent runs without the sandbox (``description["isolation"]`` is not
    ``"sandbox"``), and why; its row is marked ``isolation: process`` in the manifest."""
    if description.get("isolation") not in (None, "sandbox"):
        print(f"warning: {what} runs in a separate process WITHOUT a sandbox: {description.get('isolation_note')}; "
              "it can read fwgym's data files and signal the evaluator, so its row is marked isolation: process "
              "(docs/isolation.md)", file=sys.stderr)


def protect_run_paths(args) -> None:
    """Keep the run directory (``--out`` / ``--resume``) and the forecast store (``--forecast-store``) from
    every sandboxed worker of this process (:func:`fwgym.isolation.sandbox.protect`), before any is started:
    a worker may not read the run's records nor write forged ones, whatever ``--agent-read`` /
    ``--agent-write`` allow."""
    from fwgym.isolation.sandbox import protect

    paths = [p for p in (getattr(args, "out", None), getattr(args, "resume", None),
                         getattr(args, "forecast_store", None)) if p]
    if paths:
        protect(*paths)


def in_process(args) -> bool:
    """Whether ``--in-process`` was given."""
    return bool(getattr(args, "in_process", False))


__all__ = ["ISOLATION_OPTIONS", "add_isolation_arguments", "agent_memory", "isolation_kwargs",
           "report_isolation", "protect_run_paths", "in_process"]
