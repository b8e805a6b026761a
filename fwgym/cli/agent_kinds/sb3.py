"""Agent kind ``sb3``: ``fwgym evaluate --agent sb3 --model-path FILE [--algo auto|PPO|MaskablePPO]``.

A stable-baselines3 PPO / MaskablePPO zip trained on the fwgym macro wrappers, played on the raw env
by :class:`fwgym.agents.sb3.SB3Agent`. The algorithm is read from the zip (``--algo auto``, the
default; :func:`fwgym.agents.sb3.saved_algo`), for files of ``save_policy`` and of plain
``model.save`` alike. Heavy imports (torch, stable-baselines3) happen only when an agent is created.
"""
from __future__ import annotations

import functools
import importlib.util

KIND = "sb3"
HELP = ("a stable-baselines3 macro policy trained on the fwgym RL wrappers (a PPO / MaskablePPO zip, "
        "e.g. from examples/train_ppo.py), given by --model-path")


def add_arguments(group) -> None:
    """Add ``--model-path`` and ``--algo`` to an argparse argument group."""
    from fwgym.agents.sb3 import ALGOS

    group.add_argument("--model-path", default=None, metavar="FILE",
                       help="SB3 model zip saved by fwgym.agents.sb3.save_policy or model.save")
    group.add_argument("--algo", default="auto", choices=ALGOS,
                       help="algorithm to load the model with (auto, the default: the one the zip's policy class "
                            "belongs to)")


def build(args):
    """A picklable factory (``functools.partial`` of :class:`~fwgym.agents.sb3.SB3Agent`) with the algorithm
    resolved from the zip.

    Raises:
        ValueError: no ``--model-path``; not an SB3 zip, or one of another algorithm, or ``--algo``
            disagrees with it; stable-baselines3 (sb3-contrib for MaskablePPO) missing.
        FileNotFoundError: the model file does not exist.
    """
    if not getattr(args, "model_path", None):
        raise ValueError("--agent sb3 needs --model-path FILE (an SB3 model zip)")
    from fwgym.agents.sb3 import resolve_algo, resolve_model_path

    path = resolve_model_path(args.model_path)
    algo = resolve_algo(path, getattr(args, "algo", "auto") or "auto")
    if importlib.util.find_spec("stable_baselines3") is None:
        raise ValueError("--agent sb3 needs stable-baselines3: pip install 'fwgym[rl]'")
    if algo == "MaskablePPO" and importlib.util.find_spec("sb3_contrib") is None:
        raise ValueError("the model is a MaskablePPO policy, which needs sb3-contrib: pip install 'fwgym[rl]'")
    from fwgym.agents.sb3 import SB3Agent

    return functools.partial(SB3Agent, str(path.resolve()), algo=algo)


__all__ = ["KIND", "HELP", "add_arguments", "build"]
