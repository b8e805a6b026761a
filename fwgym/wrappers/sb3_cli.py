"""Agent kind ``sb3`` for ``fwgym evaluate --agent sb3 --model-path FILE [--algo PPO|MaskablePPO]``.

Implements the interface of :mod:`fwgym.agents.registry` (``KIND``, ``HELP``, ``add_arguments``,
``build``); heavy imports (torch, stable-baselines3) happen only when an agent is created.
"""
from __future__ import annotations

import functools
import importlib.util

KIND = "sb3"
HELP = ("a stable-baselines3 macro policy trained on the fwgym RL wrappers (a PPO / MaskablePPO zip, "
        "e.g. from examples/train_ppo.py), given by --model-path")


def add_arguments(group) -> None:
    """Add ``--model-path`` and ``--algo`` to an argparse argument group."""
    group.add_argument("--model-path", default=None, metavar="FILE",
                       help="SB3 model zip saved by fwgym.wrappers.sb3_agent.save_policy or model.save")
    group.add_argument("--algo", default="auto", choices=["auto", "PPO", "MaskablePPO"],
                       help="algorithm to load the model with (auto: the one recorded in the zip, else PPO)")


def build(args):
    """A picklable factory (``functools.partial`` of :class:`~fwgym.wrappers.sb3_agent.SB3Agent`).

    Raises:
        ValueError: no ``--model-path``, or stable-baselines3 (sb3-contrib for MaskablePPO) missing.
        FileNotFoundError: the model file does not exist.
    """
    if not getattr(args, "model_path", None):
        raise ValueError("--agent sb3 needs --model-path FILE (an SB3 model zip)")
    from fwgym.wrappers.sb3_agent import SB3Agent, resolve_model_path

    path = resolve_model_path(args.model_path)
    algo = getattr(args, "algo", "auto") or "auto"
    if importlib.util.find_spec("stable_baselines3") is None:
        raise ValueError("--agent sb3 needs stable-baselines3: pip install 'fwgym[rl]'")
    if algo == "MaskablePPO" and importlib.util.find_spec("sb3_contrib") is None:
        raise ValueError("--algo MaskablePPO needs sb3-contrib: pip install 'fwgym[rl]'")
    return functools.partial(SB3Agent, str(path.resolve()), algo=algo)
