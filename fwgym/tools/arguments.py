"""Argument checks shared by the tool handlers; each raises :class:`~fwgym.errors.ToolError`
(``invalid_arguments``) with a message that names the argument and what it must be."""
from __future__ import annotations


from fwgym.core.cases import Case
from fwgym.core.contract import GRID, Plan, names_text, safe_repr, validate_decisions, validate_levels
from fwgym.errors import ToolError
from fwgym.core.series import iso_to_hour
from fwgym.validation import is_number

__all__ = ["LEVEL_LABELS", "check_keys", "int_arg", "time_arg", "plan_from_args"]

#: GRID as agents read and write it (0.4, 0.45, ..., 2.0)
LEVEL_LABELS: tuple[float, ...] = tuple(round(float(g), 2) for g in GRID)


def check_keys(args: dict, allowed: set[str], tool: str) -> None:
    """Refuse argument names outside ``allowed``."""
    extra = [k for k in args if k not in allowed]
    if extra:
        raise ToolError("invalid_arguments", f"{tool}: unknown argument(s) {names_text(extra)}; allowed: {sorted(allowed)}")


def int_arg(args: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    """``args[key]`` as an int in ``lo..hi`` (an integral float is accepted, a bool is not); ``default``
    when absent (``None``: the argument is required)."""
    if key not in args:
        if default is None:
            raise ToolError("invalid_arguments", f"missing required argument {key!r}")
        return default
    v = args[key]
    if not is_number(v) or (isinstance(v, float) and not v.is_integer()):
        raise ToolError("invalid_arguments", f"{key!r} must be an integer, got {safe_repr(v, 100)}")
    v = int(v)
    if not lo <= v <= hi:
        raise ToolError("invalid_arguments", f"{key!r} must be in {lo}..{hi}, got {safe_repr(v, 60)}")
    return v


def time_arg(args: dict, key: str) -> int:
    """``args[key]``, a time-zone-aware ISO 8601 hour, as an epoch hour (UTC)."""
    v = args[key]
    if not isinstance(v, str):
        raise ToolError("invalid_arguments", f"{key!r} must be an ISO 8601 timestamp string, got {safe_repr(v, 100)}")
    try:
        return iso_to_hour(v)
    except (ValueError, OverflowError) as exc:
        raise ToolError(
            "invalid_arguments",
            f"{key!r}: {safe_repr(v, 60)} is not a time-zone-aware ISO 8601 hour such as '2024-07-20T13:00:00Z' ({exc})",
        ) from None


def plan_from_args(case: Case, args: dict, tool: str) -> Plan:
    """The plan given by exactly one of ``decisions`` (physical capacities) or ``levels`` (normalised);
    raises :class:`~fwgym.core.contract.PlanError` when it is not a valid plan."""
    has_d, has_l = "decisions" in args, "levels" in args
    if has_d == has_l:
        raise ToolError("invalid_arguments", f"{tool}: give exactly one of 'decisions' (physical capacities) or 'levels' (normalised grid levels)")
    if has_d:
        return validate_decisions(args["decisions"], case.scale, case.series.unit)
    return validate_levels(args["levels"], case.scale)
