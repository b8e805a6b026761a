"""Agent kind ``router``: ``fwgym evaluate --agent router --router-path FILE.json``.

A learned router over the free classical methods (:class:`fwgym.agents.router.RouterAgent`, trained by
``examples/train_router.py``), played on the raw env: catalog, every method's free plan, then the plan of the
method the model scores best. The router file is JSON data (weights and their input names; nothing in it is code),
so it runs in the evaluating process; its sha256 is in the run manifest (``--resume`` refuses a changed file).
"""
from __future__ import annotations

KIND = "router"
HELP = "a learned router over the free classical methods (a JSON model from examples/train_router.py), --router-path"


def add_arguments(group) -> None:
    """Add ``--router-path`` (and ``--agent-name``, shared) to an argparse argument group."""
    from fwgym.cli.agent_kinds.sb3 import AGENT_NAME
    from fwgym.cli.args import add_arguments_once

    add_arguments_once(group, [AGENT_NAME])
    group.add_argument("--router-path", default=None, metavar="FILE",
                       help="router model file (JSON) written by fwgym.rl.router.RouterModel.save / examples/train_router.py")


def build(args):
    """A :class:`~fwgym.agents.router.RouterAgentFactory` with the file's ``source``; one agent is built now to check it.

    Raises:
        ValueError: no ``--router-path``, or not a router file for this fwgym. FileNotFoundError: no such file.
    """
    if not getattr(args, "router_path", None):
        raise ValueError("--agent router needs --router-path FILE (a router model, JSON)")
    from pathlib import Path

    from fwgym.agents.router import RouterAgentFactory
    from fwgym.evaluation.manifest import file_sha256

    path = Path(args.router_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no router model file at {path}")
    name = {"name": args.agent_name} if getattr(args, "agent_name", None) else {}
    factory = RouterAgentFactory(model_path=str(path), source={"file": str(path), "sha256": file_sha256(path)}, **name)
    factory()  # a clear error before any case runs
    return factory


__all__ = ["KIND", "HELP", "add_arguments", "build"]
