"""Argument checks shared by every module: "an integer, not a bool", "a real number, not a bool" and "a mapping".

``bool`` is a subclass of ``int`` in Python, so ``isinstance(True, int)`` holds; every count, size, seed
and index argument of fwgym refuses ``True``/``False`` through these helpers, with one message form:
``"<name> must be <a positive integer | a non-negative integer | an integer >= m | an integer in m..n>,
got <repr>"``. Python and NumPy integers are accepted (and returned as ``int``); floats are not, even
integral ones (agent-facing tool arguments, which JSON may spell ``3.0``, are checked by
:func:`fwgym.tools.actions.int_arg` instead).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["is_int", "is_number", "is_mapping", "int_description", "check_int"]


def is_int(value: Any) -> bool:
    """``True`` for a Python or NumPy integer, ``False`` for ``bool``/``numpy.bool_`` and anything else."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """``True`` for a real number (``int``, ``float`` or a NumPy integer/float scalar), ``False`` for
    ``bool``/``numpy.bool_``, ``None`` and anything else. NaN and infinities are numbers (test
    ``math.isfinite`` separately)."""
    t = type(value)
    if t is float or t is int:  # the hot path (plan and forecast validation)
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def is_mapping(x: Any) -> bool:
    """True for a dict or any other :class:`~collections.abc.Mapping` (the dict check first: it is the hot path)."""
    return type(x) is dict or isinstance(x, Mapping)


def int_description(minimum: int | None = None, maximum: int | None = None) -> str:
    """The words for an integer in ``[minimum, maximum]`` (either bound may be open): ``"a positive
    integer"`` (minimum 1), ``"a non-negative integer"`` (minimum 0), ``"an integer >= m"``,
    ``"an integer <= n"``, ``"an integer in m..n"`` or ``"an integer"``."""
    if minimum is not None and maximum is not None:
        return f"an integer in {minimum}..{maximum}"
    if minimum is not None:
        return {1: "a positive integer", 0: "a non-negative integer"}.get(minimum, f"an integer >= {minimum}")
    if maximum is not None:
        return f"an integer <= {maximum}"
    return "an integer"


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              error: type[Exception] = ValueError) -> int:
    """``value`` as an ``int`` when it is an integer (not a bool) in ``[minimum, maximum]``.

    Args:
        name: the argument's name as the message shows it (e.g. ``"budget"`` or ``"model-x: horizon"``).
        minimum, maximum: inclusive bounds; ``None`` leaves that side open.
        error: the exception class raised (``ValueError`` unless a module has its own, e.g. ``StoreError``).

    Returns:
        ``int(value)``.

    Raises:
        ``error``: ``"<name> must be <int_description(minimum, maximum)>, got <value!r>"``.
    """
    if (not is_int(value) or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)):
        raise error(f"{name} must be {int_description(minimum, maximum)}, got {value!r}")
    return int(value)
