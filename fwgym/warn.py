"""Warnings said at the user's line: :func:`warn_user`.

A fixed ``stacklevel`` points at a different frame for every path into fwgym: ``make_rl_env(split="test")`` from a
script, ``gym.make("FWBench-RL-Macro-v0", split="test")`` (Gymnasium's ``make`` in between) and
``gym.make_vec(...)`` (Gymnasium, then :class:`fwgym.rl.vector.MacroVectorEnv`) reach the same ``warnings.warn`` at
three depths. :func:`warn_user` names the first frame outside the libraries on the stack (fwgym, Gymnasium and the RL
libraries that build envs for their users: stable-baselines3, sb3-contrib, rl_zoo3), what Python 3.12's
``skip_file_prefixes`` does by file path. Python's default warning filter then says a warning once per user line.
"""
from __future__ import annotations

import sys
import warnings
from types import FrameType

__all__ = ["LIBRARY_MODULES", "user_stacklevel", "warn_user"]

#: top-level modules whose frames a warning skips: the user's line is the first frame outside them
LIBRARY_MODULES = ("fwgym", "gymnasium", "stable_baselines3", "sb3_contrib", "rl_zoo3")


def _is_library(module: str) -> bool:
    return module.partition(".")[0] in LIBRARY_MODULES


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the function that calls this one, naming the first frame
    outside :data:`LIBRARY_MODULES` (a frame's module is its globals' ``__name__``; a script run as ``__main__`` is
    the user's). When every frame is a library's (a command-line entry point, a thread), 2: the caller of the
    warning function."""
    frame: FrameType | None = sys._getframe(1)  # the frame that calls warnings.warn: stacklevel 1
    level = 1
    while frame is not None and _is_library(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    return level if frame is not None else 2


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` at the first line of the stack outside :data:`LIBRARY_MODULES` (see
    :func:`user_stacklevel`)."""
    warnings.warn(message, category, stacklevel=user_stacklevel())
