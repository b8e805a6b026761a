"""Warnings said at the user's line: :func:`warn_user`.

A fixed ``stacklevel`` points at a different frame for every path into fwgym: ``make_rl_env(split="test")`` from a
script, ``gym.make("FWBench-RL-Macro-v0", split="test")`` (Gymnasium's ``make`` in between) and
``gym.make_vec(...)`` (Gymnasium, then :class:`fwgym.rl.vector.MacroVectorEnv`) reach the same ``warnings.warn`` at
three depths. :func:`warn_user` names the first frame on the stack that is the user's: not a frame of the libraries
(fwgym, Gymnasium and the RL libraries that build envs for their users: stable-baselines3, sb3-contrib, rl_zoo3), nor
of Python's own modules (threading, concurrent.futures, multiprocessing, runpy, importlib), nor a console script or
``python -m`` of a library (the ``fwgym`` command). Python's default warning filter then says a warning once per
user line. With no such frame (the ``fwgym`` command, a thread or a worker process started on library code) the
warning names the line of fwgym that warns.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from types import FrameType

__all__ = ["LIBRARY_MODULES", "user_stacklevel", "warn_user"]

#: top-level modules whose frames a warning skips: the user's line is the first frame outside them
LIBRARY_MODULES = ("fwgym", "gymnasium", "stable_baselines3", "sb3_contrib", "rl_zoo3")
_STDLIB = tuple(sorted({os.path.normcase(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}))
_SCRIPTS = os.path.normcase(sysconfig.get_paths()["scripts"])


def _is_library(module: str) -> bool:
    return module.partition(".")[0] in LIBRARY_MODULES


def _is_internal(frame: FrameType) -> bool:
    """A frame ``warnings.warn`` does not count in a ``stacklevel`` (importlib's bootstrap, as Python's own test)."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _is_users(frame: FrameType) -> bool:
    """Whether ``frame`` runs the user's code: not a library's module (:data:`LIBRARY_MODULES`), not Python's own
    (a standard-library module, a frozen one), not a console script or ``python -m`` of a library."""
    g = frame.f_globals
    module = g.get("__name__")
    module = module if isinstance(module, str) else ""
    if _is_library(module):
        return False
    path = os.path.normcase(frame.f_code.co_filename)
    if path.startswith("<frozen "):
        return False
    if module.partition(".")[0] in sys.stdlib_module_names and path.startswith(_STDLIB):
        return False
    if module == "__main__":
        spec = g.get("__spec__")
        if spec is not None and _is_library(getattr(spec, "name", "") or ""):
            return False  # python -m fwgym
        if os.path.dirname(path) == _SCRIPTS and frame.f_back is None:
            return False  # a console script (bin/fwgym: sys.exit(main()))
    return True


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the function that calls this one, naming the first frame
    that is the user's (see the module docstring; a frame's module is its globals' ``__name__``, a script run as
    ``__main__`` is the user's). When no frame is the user's, 2: the line of the function that warns. Frames that
    ``warnings.warn`` does not count (importlib's bootstrap) are not counted."""
    frame: FrameType | None = sys._getframe(1)  # the frame that calls warnings.warn: stacklevel 1
    level = 1
    while frame is not None:
        if _is_users(frame):
            return level
        frame = frame.f_back
        while frame is not None and _is_internal(frame):
            frame = frame.f_back
        level += 1
    return 2


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` at the user's line (see :func:`user_stacklevel`)."""
    warnings.warn(message, category, stacklevel=user_stacklevel())
