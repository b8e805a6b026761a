"""Agent kind ``sb3``: ``fwgym evaluate --agent sb3 --model-path FILE [--algo auto|PPO|MaskablePPO]``.

A stable-baselines3 PPO / MaskablePPO zip trained on the fwgym macro wrappers, played on the raw env
by :class:`fwgym.agents.sb3.SB3Agent`. The algorithm is read from the zip (``--algo auto``, the
default; :func:`fwgym.agents.sb3.saved_algo`), for files of ``save_policy`` and of plain
``model.save`` alike, without unpickling anything.

The zip is loaded (which unpickles it) **only in an isolated worker process** by default: the
evaluating process computes the features and tool calls and asks the worker for one menu index per
decision (:mod:`fwgym.agents.isolation`), sandboxed where the kernel allows it (docs/isolation.md).
``--in-process`` loads it here instead (files you trust); the records are identical. The shared
isolation options (``--agent-timeout``, ``--agent-start-timeout``, ``--agent-worker-command``,
``--agent-sandbox``, ``--agent-memory``, ``--in-process``) are in :mod:`fwgym.cli.agent_kinds.isolation`.
Heavy imports (torch, stable-baselines3) happen only when an agent is created.
"""
from __future__ import annotations

import importlib.util

from fwgym.cli.agent_kinds.isolation import add_isolation_arguments, in_process, isolation_kwargs, report_isolation
from fwgym.cli.args import add_arguments_once

#: ``--agent-name``, shared with the other kinds that take it (added once)
AGENT_NAME = (("--agent-name",), {"default": None, "dest": "agent_name",
                                  "help": "policy name of the agent in results (default: from the model file; rl_zoo3 "
                                          "zips: <algo>-<env id>-run<N>)"})

KIND = "sb3"
HELP = ("a stable-baselines3 macro policy trained on the fwgym RL wrappers (a PPO / MaskablePPO zip, "
        "e.g. from examples/train_ppo.py), given by --model-path; loaded and run in an isolated worker process")


def add_arguments(group) -> None:
    """Add ``--model-path``, ``--algo``, ``--agent-name`` and the isolation options to an argparse argument group."""
    from fwgym.agents.sb3 import ALGOS

    group.add_argument("--model-path", default=None, metavar="FILE",
                       help="SB3 model zip saved by fwgym.agents.sb3.save_policy or model.save")
    group.add_argument("--algo", default="auto", choices=ALGOS,
                       help="algorithm to load the model with (auto, the default: the one the zip's policy class "
                            "belongs to)")
    add_arguments_once(group, [AGENT_NAME])
    add_isolation_arguments(group)


def build(args):
    """A picklable, JSON-serialisable :class:`~fwgym.agents.sb3.SB3AgentFactory` with the algorithm resolved
    from the zip, isolated unless ``--in-process``, and the zip's ``source`` (``{"file", "sha256"}``: what
    ``--resume`` checks the model file against); one agent is built now to check the model (its worker is
    then reused by the run).

    Raises:
        ValueError: no ``--model-path``; not an SB3 zip, or one of another algorithm, or ``--algo``
            disagrees with it, or its spaces do not match the fwgym menus; stable-baselines3 (sb3-contrib
            for MaskablePPO) missing; the worker cannot load it.
        FileNotFoundError: the model file does not exist.
    """
    if not getattr(args, "model_path", None):
        raise ValueError("--agent sb3 needs --model-path FILE (an SB3 model zip)")
    from fwgym.agents.sb3 import SB3AgentFactory, resolve_algo, resolve_model_path

    path = resolve_model_path(args.model_path)
    algo = resolve_algo(path, getattr(args, "algo", "auto") or "auto")
    if importlib.util.find_spec("stable_baselines3") is None:
        raise ValueError("--agent sb3 needs stable-baselines3: pip install 'fwgym[rl]'")
    if algo == "MaskablePPO" and importlib.util.find_spec("sb3_contrib") is None:
        raise ValueError("the model is a MaskablePPO policy, which needs sb3-contrib: pip install 'fwgym[rl]'")
    from fwgym.evaluation.manifest import file_sha256

    isolated = not in_process(args)
    # the zip's sha256 is in the agent's description (the run manifest): --resume refuses a changed model file
    source = {"file": str(path.resolve()), "sha256": file_sha256(path)}
    options = isolation_kwargs(args) if isolated else {}
    name = {"name": args.agent_name} if getattr(args, "agent_name", None) else {}
    factory = SB3AgentFactory(model_path=str(path.resolve()), algo=algo, isolated=isolated, source=source, **name,
                              **options)
    from fwgym.agents.isolation import AgentFailure, isolation_status

    if isolated:  # how the policy's worker is isolated, in the agent's description (the run manifest)
        status = isolation_status(options["sandbox"], options["worker_command"])
        factory["isolation"] = status["isolation"]
        if status["isolation"] != "sandbox":
            factory["isolation_note"] = status["reason"]
    try:
        factory()  # checks the model now: a clear error before any case runs
    except AgentFailure as exc:
        raise ValueError(f"--agent sb3 --model-path {path}: {exc}") from None
    report_isolation(factory, f"the SB3 policy {path.name}")
    return factory


__all__ = ["KIND", "HELP", "add_arguments", "build"]
