"""The capacity contract of FWBench (DESIGN §3; FWBench protocol §1.4, §1.7, §5.1).

A plan is 8 capacities ``b00..b07``, one per 3-hour block of the 24-hour target window. Capacities
are physical (MW or departures/hour) and must equal ``scale * G[g]`` for a level of the normalised
grid ``G = {0.40, 0.45, ..., 2.00}`` (33 levels); adjacent blocks may differ by at most ``RAMP = 0.30``
in normalised units (6 grid steps).

Hourly loss with ``z_h = y_h / scale`` and ``a_h`` the capacity of the block containing hour ``h``::

    loss(a, z) = (1/24) * sum_h [ ALPHA * (a_h - z_h)_+ + w_h * (z_h - a_h)_+ ],   ALPHA = 0.3

with the weekday-rotated shortage weights ``w_h`` of :func:`shortage_weights`. The cost tables and
the optimal plan are computed by :mod:`fwgym.core.optimizer` (the only implementation of the formula).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from fwgym.errors import CodedError
from fwgym.validation import check_int, is_mapping, is_number

__all__ = ["GRID", "GRID_STEP", "ALPHA", "RAMP", "MAX_RAMP_STEPS", "BLOCK_HOURS", "N_BLOCKS", "TARGET_HOURS",
           "DECISION_IDS", "PRIORITY_PATTERN", "VALUE_ABS_TOL", "VALUE_REL_TOL", "INVALID_PENALTY", "shortage_weights",
           "safe_repr", "names_text", "PlanError", "Plan", "plan_from_indices", "capacity_grid", "GRID_LEVELS", "LEVEL_LABELS",
           "decision_values", "validate_decisions", "validate_levels", "MAX_FORECAST_SAMPLES", "MAX_FORECAST_MAGNITUDE",
           "ForecastSubmission", "validate_forecast"]

#: Normalised capacity grid, 33 levels 0.40..2.00 step 0.05 (float64, shape (33,)).
GRID: np.ndarray = np.round(0.40 + 0.05 * np.arange(33), 10)
GRID.flags.writeable = False
#: GRID as JSON numbers at full precision (0.4, 0.45, 0.5, 0.55, 0.6000000000000001, ...): capacities are level x scale
GRID_LEVELS: tuple[float, ...] = tuple(float(g) for g in GRID)
#: GRID as agents read and write it (0.4, 0.45, ..., 2.0): each level rounded to 2 decimals (the catalog's
#: ``normalised_grid``, a plan's ``levels``)
LEVEL_LABELS: tuple[float, ...] = tuple(round(float(g), 2) for g in GRID)
#: spacing of GRID (normalised units)
GRID_STEP = 0.05
ALPHA = 0.3  #: surplus (reservation) price per normalised unit-hour
RAMP = 0.30  #: max |a_b - a_{b-1}| in normalised units
MAX_RAMP_STEPS = 6  #: RAMP expressed in grid steps (0.30 / 0.05)
BLOCK_HOURS = 3
N_BLOCKS = 8
TARGET_HOURS = 24
DECISION_IDS: tuple[str, ...] = tuple(f"b{i:02d}" for i in range(N_BLOCKS))
PRIORITY_PATTERN: tuple[float, ...] = (1.0, 1.0, 2.0, 1.5)
#: A submitted capacity ``v`` matches grid value ``g`` when ``|v - g| <= VALUE_ABS_TOL + VALUE_REL_TOL * |g|``
#: (the original FWBench grader's rule; ``numpy.isclose(v, g, rtol=VALUE_REL_TOL, atol=VALUE_ABS_TOL)``).
VALUE_ABS_TOL = 1e-6
VALUE_REL_TOL = 1e-9
#: Added to the worst feasible hourly cost for an invalid plan (protocol §5.1).
INVALID_PENALTY = 1.0


def shortage_weights(target_weekday: int) -> np.ndarray:
    """Hourly shortage weights ``w_h`` of a target day (protocol §1.4).

    The pattern ``[1, 1, 2, 1.5]`` is rotated right by ``target_weekday mod 4`` (Monday = 0) and
    each element is repeated 6 times, indexed from the target start.

    Args:
        target_weekday: weekday of the target date, Monday = 0 ... Sunday = 6.

    Returns:
        float64 array of shape (24,). Monday: ``[1]*12 + [2]*6 + [1.5]*6``;
        Tuesday: ``[1.5]*6 + [1]*12 + [2]*6``.

    Raises:
        ValueError: ``target_weekday`` not an integer in 0..6.
    """
    shift = check_int("target_weekday (Monday = 0)", target_weekday, minimum=0, maximum=6) % 4
    pattern = PRIORITY_PATTERN[-shift:] + PRIORITY_PATTERN[:-shift] if shift else PRIORITY_PATTERN
    return np.repeat(np.asarray(pattern, dtype=np.float64), 6)


def safe_repr(x: Any, limit: int = 100) -> str:
    """``repr(x)`` cut to ``limit`` characters, for error messages about agent-supplied values; never
    raises (e.g. an integer of more than 4,300 digits, whose ``repr`` raises ValueError)."""
    try:
        r = repr(x)
    except Exception:
        r = f"<{type(x).__name__} value that cannot be displayed>"
    return r[:limit]


def names_text(names, limit: int = 5, width: int = 40) -> str:
    """Agent-supplied names (e.g. unknown keys) for an error message: at most ``limit`` of them, each
    cut to ``width`` characters (sorted by their text), so that a message stays short whatever the
    agent sent."""
    shown = sorted(safe_repr(n, width) for n in names)
    more = len(shown) - limit
    return "[" + ", ".join(shown[:limit]) + (f", ... {more} more" if more > 0 else "") + "]"


class PlanError(CodedError, ValueError):
    """A submitted plan is invalid. ``code`` is a stable machine-readable reason."""


@dataclass(frozen=True)
class Plan:
    """A validated plan.

    Attributes:
        indices: int64 grid indices, shape (8,).
        levels: normalised levels ``GRID[indices]``, shape (8,).
        values: physical capacities ``scale * levels``, shape (8,).
    """

    indices: np.ndarray
    levels: np.ndarray
    values: np.ndarray

    def decisions(self) -> list[dict[str, Any]]:
        """Canonical decision records ``[{"decision_id": "b00", "value": ...}, ...]``."""
        return [{"decision_id": d, "value": float(v)} for d, v in zip(DECISION_IDS, self.values)]


def plan_from_indices(indices: Sequence[int] | np.ndarray, scale: float) -> Plan:
    """Build a :class:`Plan` from grid indices (no ramp check; optimizer output is feasible)."""
    idx = np.asarray(indices, dtype=np.int64)
    levels = GRID[idx]
    return Plan(indices=idx, levels=levels, values=levels * float(scale))


def capacity_grid(scale: float) -> list[float]:
    """The 33 physical grid values ``GRID[k] * scale`` as Python floats, exactly the values the
    validator compares submissions with (``repr`` of each gives it at full precision)."""
    s = float(scale)
    return [g * s for g in GRID_LEVELS]


_DECISION_SET = frozenset(DECISION_IDS)


def decision_values(decisions: Any) -> list[Any]:
    """The 8 raw values of a decisions payload, in b00..b07 order (structure only: the values are not
    checked). The one reader of decision containers, shared by the env (:func:`validate_decisions`) and
    the LLM answer parser (:func:`fwgym.agents.chat.parsing.normalise_decisions`).

    Args:
        decisions: a list (or tuple) of ``{"decision_id": "b00".."b07", "value": ...}`` records (extra
            record keys ignored) or a mapping keyed exactly ``b00..b07``.

    Raises:
        PlanError: code ``bad_format`` (not a list/mapping, a record that is not an object or lacks
            ``decision_id``/``value``), ``unknown_decision_id``, ``duplicate_decision`` or
            ``missing_decision``.
    """
    if type(decisions) is list and len(decisions) == N_BLOCKS:  # one pass for a well-formed list of records
        found: dict[str, Any] = {}
        for rec in decisions:
            if type(rec) is not dict:
                break
            did = rec.get("decision_id")
            if type(did) is not str or did not in _DECISION_SET or did in found or "value" not in rec:
                break
            found[did] = rec["value"]
        else:
            return [found[d] for d in DECISION_IDS]
    if is_mapping(decisions):
        keys = list(decisions.keys())
        unknown = [k for k in keys if not (isinstance(k, str) and k in DECISION_IDS)]
        if unknown:
            raise PlanError("unknown_decision_id", f"unknown decision ids {names_text(unknown)}; expected exactly {list(DECISION_IDS)}")
        missing = [d for d in DECISION_IDS if d not in decisions]
        if missing:
            raise PlanError("missing_decision", f"missing decisions {missing}; expected exactly {list(DECISION_IDS)}")
        return [decisions[d] for d in DECISION_IDS]
    if not isinstance(decisions, (list, tuple)):
        raise PlanError(
            "bad_format",
            "decisions must be a list of {\"decision_id\": \"b00\", \"value\": <number>} records "
            f"or an object keyed b00..b07; got {type(decisions).__name__}",
        )
    found = {}
    for i, rec in enumerate(decisions):
        if not is_mapping(rec):
            raise PlanError("bad_format", f"decision #{i} is a {type(rec).__name__}, expected an object with decision_id and value")
        if "decision_id" not in rec or "value" not in rec:
            raise PlanError("bad_format", f"decision #{i} must have keys 'decision_id' and 'value'")
        did = rec["decision_id"]
        if not isinstance(did, str) or did not in DECISION_IDS:
            raise PlanError("unknown_decision_id", f"decision #{i} has unknown decision_id {safe_repr(did, 60)}; expected one of {list(DECISION_IDS)}")
        if did in found:
            raise PlanError("duplicate_decision", f"decision_id {did} appears more than once")
        found[did] = rec["value"]
    missing = [d for d in DECISION_IDS if d not in found]
    if missing:
        raise PlanError("missing_decision", f"missing decisions {missing}; exactly 8 decisions b00..b07 are required")
    return [found[d] for d in DECISION_IDS]


_LAST = len(GRID_LEVELS) - 1


def _nearest(x: float, scale: float) -> tuple[int, float, bool]:
    """``(k, scale * GRID[k], on_grid)``: the grid index nearest to ``x / scale`` (values beyond the
    grid snap to its ends) and whether ``x`` equals that grid value within the tolerances."""
    pos = (x / scale - GRID_LEVELS[0]) / GRID_STEP
    k = 0 if pos <= 0 else _LAST if pos >= _LAST else int(round(pos))
    target = GRID_LEVELS[k] * scale
    return k, target, abs(x - target) <= VALUE_ABS_TOL + VALUE_REL_TOL * abs(target)


def _snap_exact(values: list[Any], scale: float, unit_label: str) -> list[int]:
    """Grid indices of physical ``values``: ``v`` matches grid value ``g = GRID[k] * scale`` when
    ``|v - g| <= VALUE_ABS_TOL + VALUE_REL_TOL * |g|`` (the original grader's rule, as
    ``numpy.isclose(v, g, rtol=1e-9, atol=1e-6)``). Plain Python: 8 values. A well-formed
    plan takes one pass; any problem re-runs the checks in order (numbers, finiteness, grid) so the
    error is the first rule broken."""
    idx = []
    try:
        for v in values:
            t = type(v)
            if t is not float and t is not int:
                break
            x = float(v)
            if x - x != 0.0:  # inf or nan
                break
            k, _, ok = _nearest(x, scale)
            if not ok:
                break
            idx.append(k)
        else:
            return idx
    except (OverflowError, ValueError):  # a huge int, or inf / nan
        pass
    for b, v in enumerate(values):
        if not is_number(v):
            raise PlanError("not_a_number", f"{DECISION_IDS[b]}: value {safe_repr(v, 60)} is not a JSON number")
    try:
        xs = [float(v) for v in values]
    except OverflowError:
        raise PlanError("non_finite", "a value is too large to be a capacity") from None
    for b, x in enumerate(xs):
        if not math.isfinite(x):
            raise PlanError("non_finite", f"{DECISION_IDS[b]}: value {x} is not finite")
    idx = []
    for b, x in enumerate(xs):
        k, target, ok = _nearest(x, scale)
        if not ok:
            grid0, grid1 = GRID_LEVELS[0] * scale, GRID_LEVELS[-1] * scale
            raise PlanError(
                "off_grid",
                f"{DECISION_IDS[b]}: value {x!r} is not on the capacity grid (nearest grid value {target!r}; "
                f"grid = scale x {{0.40, 0.45, ..., 2.00}} with scale {scale!r} = {grid0!r}..{grid1!r} {unit_label}; "
                f"a value matches grid value g when |value - g| <= {VALUE_ABS_TOL:g} + {VALUE_REL_TOL:g} x |g|)",
            )
        idx.append(k)
    return idx


def _check_ramp(idx: list[int]) -> None:
    """Adjacent blocks may differ by at most ``MAX_RAMP_STEPS`` grid steps (= ``RAMP``; the grid is uniform)."""
    for b in range(1, len(idx)):
        if abs(idx[b] - idx[b - 1]) > MAX_RAMP_STEPS:
            step = abs(GRID_LEVELS[idx[b]] - GRID_LEVELS[idx[b - 1]])
            raise PlanError(
                "ramp_violation",
                f"ramp violated between {DECISION_IDS[b - 1]} and {DECISION_IDS[b]}: normalised change "
                f"{step:.2f} > {RAMP:.2f} (at most {MAX_RAMP_STEPS} grid steps between adjacent blocks)",
            )


def validate_decisions(decisions: Any, scale: float, unit: str = "") -> Plan:
    """Validate physical decisions against the grid and the ramp (protocol §1.7, §5.1).

    Args:
        decisions: a list of ``{"decision_id": "b00".."b07", "value": number}`` records (extra keys
            such as ``forecast_id`` are ignored) or an object keyed exactly ``b00..b07``.
        scale: contract scale (mean of the visible history), > 0.
        unit: unit label used in error messages.

    Returns:
        The validated :class:`Plan`.

    Raises:
        PlanError: with ``code`` one of ``bad_format``, ``unknown_decision_id``, ``duplicate_decision``,
            ``missing_decision``, ``not_a_number``, ``non_finite``, ``off_grid``, ``ramp_violation``.
    """
    try:
        s = float(scale) if is_number(scale) else math.nan
    except OverflowError:  # an int beyond float range
        s = math.inf
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"scale must be a finite number > 0, got {safe_repr(scale, 60)}")
    values = decision_values(decisions)
    idx = _snap_exact(values, s, unit)
    _check_ramp(idx)
    return plan_from_indices(idx, scale)


def validate_levels(levels: Any, scale: float) -> Plan:
    """Validate 8 *normalised* levels (each must be a grid value of ``GRID``) and the ramp.

    Same rules and error codes as :func:`validate_decisions`, with the grid unscaled.
    """
    if (not isinstance(levels, (list, tuple, np.ndarray)) or (isinstance(levels, np.ndarray) and levels.ndim != 1)
            or len(levels) != N_BLOCKS):
        raise PlanError("bad_format", f"levels must be a list of 8 normalised grid levels (0.40..2.00), got {safe_repr(levels, 200)}")
    idx = _snap_exact(list(levels), 1.0, "(normalised)")
    _check_ramp(idx)
    return plan_from_indices(idx, scale)


MAX_FORECAST_SAMPLES = 10_000
#: Largest accepted magnitude of a forecast value, in multiples of the case's scale (history mean):
#: 1e12 x scale is far beyond any demand (the data peak at ~10 x scale), and keeps every CRPS sum
#: (up to 10,000 samples x 24 steps) finite in float64.
MAX_FORECAST_MAGNITUDE = 1e12


@dataclass(frozen=True)
class ForecastSubmission:
    """A validated probabilistic forecast of the 24 target hours.

    Attributes:
        kind: ``"quantiles"`` (values (24, 9) at levels 0.1..0.9) or ``"samples"`` (values (n, 24)).
        values: float64 array.
    """

    kind: str
    values: np.ndarray


def validate_forecast(args: Mapping, scale: float) -> ForecastSubmission:
    """Validate a forecast submission ``{"quantiles": 24 rows of 9}`` or ``{"samples": n >= 2 rows of 24}``.

    Args:
        args: the submit arguments (agent input).
        scale: the case's scale (> 0, raw units): values must satisfy
            ``|v| <= MAX_FORECAST_MAGNITUDE * scale``.

    Raises:
        PlanError: code ``bad_format`` (shape, type, both or neither given), ``non_finite``,
            ``not_a_number``, ``too_large`` (a value beyond ``MAX_FORECAST_MAGNITUDE * scale``) or
            ``non_monotone`` (quantiles decreasing along the levels).
        ValueError: ``scale`` is not a finite number > 0 (a programmer error, not agent input).
    """
    try:
        s = float(scale) if is_number(scale) else math.nan
    except OverflowError:
        s = math.inf
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"scale must be a finite number > 0, got {safe_repr(scale, 60)}")
    has_q, has_s = "quantiles" in args, "samples" in args
    if has_q == has_s:
        raise PlanError("bad_format", "give exactly one of 'quantiles' (24 rows of 9 values at levels 0.1..0.9) "
                                      "or 'samples' (at least 2 rows of 24 values)")
    kind = "quantiles" if has_q else "samples"
    raw = args[kind]
    if not isinstance(raw, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in raw):
        raise PlanError("bad_format", f"{kind} must be a list of rows (lists of numbers)")
    if kind == "quantiles" and (len(raw) != TARGET_HOURS or any(len(r) != 9 for r in raw)):
        raise PlanError("bad_format", "quantiles must be 24 rows (target hours) of 9 values (levels 0.1..0.9)")
    if kind == "samples" and (not 2 <= len(raw) <= MAX_FORECAST_SAMPLES or any(len(r) != TARGET_HOURS for r in raw)):
        raise PlanError("bad_format", f"samples must be 2..{MAX_FORECAST_SAMPLES} rows of 24 values (one per target hour)")
    for r in raw:
        for v in r:
            if not is_number(v):
                raise PlanError("not_a_number", f"{kind}: {safe_repr(v, 40)} is not a JSON number")
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except OverflowError:
        raise PlanError("non_finite", f"{kind}: a value is too large") from None
    if not np.all(np.isfinite(arr)):
        raise PlanError("non_finite", f"{kind}: values must be finite")
    limit = MAX_FORECAST_MAGNITUDE * s
    big = np.abs(arr) > limit
    if big.any():
        pos = np.argwhere(big)[0]
        raise PlanError("too_large", f"{kind}: value {float(arr[tuple(pos)])!r} at row {int(pos[0])}, column {int(pos[1])} "
                                     f"exceeds {MAX_FORECAST_MAGNITUDE:g} x scale = {limit!r} in magnitude")
    if kind == "quantiles" and np.any(np.diff(arr, axis=1) < 0):
        h = int(np.flatnonzero(np.any(np.diff(arr, axis=1) < 0, axis=1))[0])
        raise PlanError("non_monotone", f"quantiles of target hour {h} decrease with the level; they must be non-decreasing")
    arr.flags.writeable = False
    return ForecastSubmission(kind, arr)
