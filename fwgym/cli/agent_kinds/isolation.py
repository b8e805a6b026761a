"""Options shared by the agent kinds whose agents are code and run isolated (``--agent sb3``,
``--agent MODULE:FACTORY``): deadlines, the worker's command, the variables passed to its scrubbed
environment (``--agent-env NAME``), and the in-process opt-out.

The options are added once by whichever of those kinds registers first (:func:`add_isolation_arguments`
is idempotent). See :mod:`fwgym.agents.isolation` and SECURITY.md ("Code agents run isolated").
"""
from __future__ import annotations


from fwgym.cli.args import add_arguments_once, positive_float

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
                                           "fwgym/agents/isolation_worker.py), e.g. as another user or in a container "
                                           "that cannot read fwgym's data (SECURITY.md)"}),
    (("--agent-env",), {"action": "append", "default": None, "dest": "agent_env", "metavar": "NAME",
                        "help": "pass environment variable NAME (its value here) to an isolated agent's worker, whose "
                                "environment is otherwise only PATH, HOME, locale, TMPDIR, PYTHONPATH, VIRTUAL_ENV, "
                                "thread counts and the like (fwgym.agents.isolation.WORKER_ENV): no API keys or "
                                "tokens unless named here; repeatable"}),
    (("--in-process",), {"action": "store_true", "dest": "in_process",
                         "help": "run a code agent (SB3 zip, MODULE:FACTORY) inside the evaluating process instead of "
                                 "an isolated worker: only for code you trust (it could read the answers and patch "
                                 "the scorer)"}),
)


def add_isolation_arguments(group) -> None:
    """Add :data:`ISOLATION_OPTIONS` to ``group`` unless another kind already did."""
    add_arguments_once(group, ISOLATION_OPTIONS)


def isolation_kwargs(args) -> dict:
    """``call_timeout``, ``start_timeout``, ``worker_command`` and, when given, ``worker_env`` (the names
    of ``--agent-env``) from the options (the defaults of :mod:`fwgym.agents.isolation` where not given).

    Raises:
        ValueError: a deadline that is not > 0; an ``--agent-env`` name that is not set here.
    """
    from fwgym.agents.isolation import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT

    call = getattr(args, "agent_timeout", None)
    start = getattr(args, "agent_start_timeout", None)
    call = DEFAULT_CALL_TIMEOUT if call is None else float(call)
    start = DEFAULT_START_TIMEOUT if start is None else float(start)
    if call <= 0 or start <= 0:
        raise ValueError("--agent-timeout and --agent-start-timeout must be > 0 seconds")
    from fwgym.agents.isolation import worker_environ

    names = list(getattr(args, "agent_env", None) or ())
    try:
        worker_environ(extra=names)  # refused here, before any worker starts
    except ValueError as exc:
        raise ValueError(f"--agent-env: {exc}") from None
    out = {"call_timeout": call, "start_timeout": start, "worker_command": getattr(args, "agent_worker_command", None)}
    if names:  # only when given: the agent's description (in the run manifest) is otherwise what it was
        out["worker_env"] = names
    return out


def in_process(args) -> bool:
    """Whether ``--in-process`` was given."""
    return bool(getattr(args, "in_process", False))


__all__ = ["ISOLATION_OPTIONS", "add_isolation_arguments", "isolation_kwargs", "in_process"]
