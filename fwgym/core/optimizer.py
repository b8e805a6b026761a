"""The one capacity optimizer: expected cost tables and an exact ramp-constrained DP (numba).

DESIGN §4 / FWBench protocol §4. A predictive distribution per target hour is given as values with
weights (``K`` equal-weight samples, or the 9 quantiles 0.1..0.9 with masses
``[0.15, 0.10 x 7, 0.15]``). Values are clipped at 0 and divided by the contract scale. Then

    C[h, g] = sum_k w[h, k] * ( ALPHA * (G_g - y[h, k])_+ + s_h * (y[h, k] - G_g)_+ )

(``s_h`` the shortage weight of hour ``h``), a block's cost is the sum of its 3 hourly rows, and
an exact DP over the 8 blocks with state = grid index and transitions of at most ``MAX_RAMP_STEPS``
grid steps gives the plan of least expected cost.

Tie-break (DESIGN §4), defined exactly: among the optimal ramp-feasible plans, the lexicographically
smallest vector of grid indices (block 0 first) wins, i.e. the lowest capacity on every plateau. The
optimal set is closed under element-wise minimum (separable costs; ``min`` of two feasible plans is
feasible, and ``cost(min(p, q)) + cost(max(p, q)) = cost(p) + cost(q)``), so this plan is also the
element-wise minimum of all optimal plans. The DP runs backward (cost-to-go ``V[b, j]`` of blocks
``b..7`` from index ``j``); the plan is rebuilt forward, each block taking the smallest index of its
ramp window whose cost-to-go is within :data:`TIE_RTOL` (relative) of the window's minimum. A
forward DP with argmin parents would let float rounding pick among exactly flat costs.

Why ``TIE_RTOL = 1e-12``: every cost is a sum of non-negative terms, so the rounding error of a
cost-to-go is at most about (terms summed) x 1.1e-16 of its value: ~1e-15 for 9 quantiles or 14
samples, ~1e-13 worst case for 1,000 samples (typical errors grow like the square root). Genuine
differences are far larger: with integer data (MW, trip counts) and a scale that is a mean of 336
integers, ``|y/s - G_g|`` is 0 or >= 1/(20 * sum of the history) (~1e-9 for the largest
balancing authority), and plateau costs are O(0.01..1). Costs within the tolerance are exact ties
in rational arithmetic (``tests/test_optimizer.py`` checks the optimizer against brute force in
:class:`fractions.Fraction` arithmetic on deliberately flat instances).

The scorer's realised loss of a plan within ``TIE_RTOL`` of the perfect-demand floor (a tie with
the floor plan) is reported as the floor itself, so ``loss >= floor`` holds exactly and such a plan
has ``R = 0``.

This module is used by the plan tools, every baseline and oracle, the perfect-demand floor and the
scorer: there is no second copy of the formula in fwgym.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from fwgym.core.contract import (
    ALPHA,
    BLOCK_HOURS,
    GRID,
    INVALID_PENALTY,
    MAX_RAMP_STEPS,
    N_BLOCKS,
    TARGET_HOURS,
    Plan,
    safe_repr,
)
from fwgym.validation import is_number

#: Quantile levels of every quantile forecast in fwgym.
QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Probability masses given to the 9 quantiles when a quantile forecast is planned on (protocol §3.2).
QUANTILE_MASSES: np.ndarray = np.array([0.15] + [0.10] * 7 + [0.15])
QUANTILE_MASSES.flags.writeable = False
#: Relative tolerance under which two plan costs are a tie (see the module docstring).
TIE_RTOL = 1e-12


# The protocol constants (GRID, ALPHA, BLOCK_HOURS, MAX_RAMP_STEPS) are passed to the kernels as
# arguments, not read as globals: numba freezes globals into the compiled code, and its on-disk cache
# (keyed on this file) would not notice a change made in fwgym.core.contract. Passing them costs ~0.1 us.
_GRID = np.array(GRID, dtype=np.float64)  # writeable (a read-only array would compile another specialisation)

# status codes of the compiled input checks (the Python wrappers turn them into ValueError)
_OK, _BAD_VALUES, _BAD_SHORTAGE, _OVERFLOW = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _check_inputs(values, shortage):  # pragma: no cover - compiled
    for x in values.flat:
        if not np.isfinite(x):
            return _BAD_VALUES
    for x in shortage.flat:
        if not (np.isfinite(x) and x >= 0.0):
            return _BAD_SHORTAGE
    return _OK


@njit(cache=True, nogil=True)
def _cost_table(values, weights, scale, shortage, grid, alpha):  # pragma: no cover - compiled
    # literal formula, summed over k in input order for every (h, g): cost[h, g] = ((0 + t_0) + t_1) + ...
    # The loop over levels is innermost (independent lanes, SIMD-friendly, no branches).
    n_hours, n_samples = values.shape
    n_levels = grid.shape[0]
    out = np.zeros((n_hours, n_levels))
    inv = 1.0 / scale
    per_hour = weights.shape[0] > 1  # weights (24, K) or one row (1, K) shared by every hour
    for h in range(n_hours):
        s_h = shortage[h]
        wr = h if per_hour else 0
        row = out[h]
        for k in range(n_samples):
            y = values[h, k]
            z = (y if y > 0.0 else 0.0) * inv
            w_k = weights[wr, k]
            for g in range(n_levels):
                d = grid[g] - z
                row[g] += w_k * (alpha * max(d, 0.0) + s_h * max(-d, 0.0))
    return out


@njit(cache=True, nogil=True)
def _solve_blocks(block_cost, max_step, rtol):  # noqa: C901  (one numba kernel: the DP and its reconstruction share arrays)  # pragma: no cover - compiled
    # Backward DP: togo[b, j] = least cost of blocks b..B-1 when block b takes index j (cost-to-go).
    # The minimum over the ramp window [j - max_step, j + max_step] of the next block's cost-to-go
    # uses the van Herk / Gil-Werman running-minimum scheme (prefix and suffix minima over segments
    # of the window width: O(L) per block instead of O(L * width)).
    # Forward reconstruction: block 0 takes the smallest index whose cost-to-go is within rtol of the
    # minimum, each later block the smallest index in the ramp window of its predecessor within rtol of
    # that window's minimum. That is the lexicographically smallest optimal path (block 0 first): an
    # optimal completion exists from index i of block b iff togo[b, i] equals the window minimum.
    n_blocks, n_levels = block_cost.shape
    width = 2 * max_step + 1
    togo = np.empty((n_blocks, n_levels))
    pre = np.empty(n_levels)
    suf = np.empty(n_levels)
    for j in range(n_levels):
        togo[n_blocks - 1, j] = block_cost[n_blocks - 1, j]
    for b in range(n_blocks - 2, -1, -1):
        nxt = togo[b + 1]
        for start in range(0, n_levels, width):
            end = min(start + width, n_levels)
            best = nxt[start]
            for i in range(start, end):
                if nxt[i] < best:
                    best = nxt[i]
                pre[i] = best
            best = nxt[end - 1]
            for i in range(end - 1, start - 1, -1):
                if nxt[i] < best:
                    best = nxt[i]
                suf[i] = best
        for j in range(n_levels):
            lo = max(j - max_step, 0)
            hi = min(j + max_step, n_levels - 1)
            if lo // width == hi // width:  # window inside one segment: starts at its start or ends at its (clipped) end
                best = pre[hi] if lo % width == 0 else suf[lo]
            else:
                best = min(suf[lo], pre[hi])
            togo[b, j] = block_cost[b, j] + best
    path = np.empty(n_blocks, dtype=np.int64)
    lo, hi = 0, n_levels - 1
    for b in range(n_blocks):
        row = togo[b]
        best = row[lo]
        for i in range(lo + 1, hi + 1):
            if row[i] < best:
                best = row[i]
        limit = best + rtol * abs(best)
        pick = lo
        for i in range(lo, hi + 1):
            if row[i] <= limit:
                pick = i
                break
        path[b] = pick
        lo = max(pick - max_step, 0)
        hi = min(pick + max_step, n_levels - 1)
    # the path's total, summed block 0 first as _path_total sums a plan (so both agree bit for bit)
    total = 0.0
    for b in range(n_blocks):
        total = total + block_cost[b, path[b]]
    return path, total


@njit(cache=True, nogil=True)
def _block_costs(cost, block_hours):  # pragma: no cover - compiled
    n_hours, n_levels = cost.shape
    out = np.zeros((n_hours // block_hours, n_levels))
    for h in range(n_hours):
        b = h // block_hours
        for g in range(n_levels):
            out[b, g] += cost[h, g]
    return out


@njit(cache=True, nogil=True)
def _optimum(values, weights, scale, shortage, grid, alpha, block_hours, max_step, rtol):  # pragma: no cover - compiled
    """Checks, cost table, block sums and DP: ``(status, path, DP total, cost table)``."""
    n_blocks = values.shape[0] // block_hours
    status = _check_inputs(values, shortage)
    if status != _OK:
        return status, np.zeros(n_blocks, dtype=np.int64), 0.0, np.zeros((0, grid.shape[0]))
    cost = _cost_table(values, weights, scale, shortage, grid, alpha)
    block = _block_costs(cost, block_hours)
    for x in block.flat:  # sums of non-negative terms: an inf or NaN hourly cost shows in its block
        if not np.isfinite(x):
            return _OVERFLOW, np.zeros(n_blocks, dtype=np.int64), 0.0, cost
    path, total = _solve_blocks(block, max_step, rtol)
    if not np.isfinite(total):
        return _OVERFLOW, np.zeros(n_blocks, dtype=np.int64), 0.0, cost
    return _OK, path, total, cost


@njit(cache=True, nogil=True)
def _plan_kernel(values, weights, scale, shortage, grid, alpha, block_hours, max_step, rtol):  # pragma: no cover - compiled
    """:func:`_optimum` plus the plan's levels/values and its expected loss, in one compiled call."""
    status, path, total, cost = _optimum(values, weights, scale, shortage, grid, alpha, block_hours, max_step, rtol)
    n_blocks = path.shape[0]
    levels = np.zeros(n_blocks)
    physical = np.zeros(n_blocks)
    if status != _OK:
        return status, path, levels, physical, 0.0, cost
    for b in range(n_blocks):
        levels[b] = grid[path[b]]
        physical[b] = levels[b] * scale
    return status, path, levels, physical, total / values.shape[0], cost


@njit(cache=True, nogil=True)
def _realised_kernel(actual, weights, scale, shortage, grid, alpha, block_hours, max_step, rtol, indices):  # pragma: no cover - compiled
    """``(status, floor, plan total)`` on a one-sample distribution: the perfect-demand DP and the
    plan's summed cost (:func:`_path_total`, NaN for a bad index) without building any array for Python.
    A plan total within ``rtol`` of the floor's total (or below it, which only a tie can be) is a tie
    with the perfect-demand plan and gets the floor's total, so that ``floor <= loss`` holds exactly."""
    status, path, total, cost = _optimum(actual, weights, scale, shortage, grid, alpha, block_hours, max_step, rtol)
    if status != _OK:
        return status, 0.0, 0.0
    plan_total = _path_total(cost, indices, block_hours)
    if plan_total <= total + rtol * total:  # NaN (a bad index) compares False and stays NaN
        plan_total = total
    return status, total / actual.shape[0], plan_total / actual.shape[0]


_QUANTILE_ROW = QUANTILE_MASSES.reshape(1, -1).copy()
#: equal weights (1, K) per sample count K (private: the kernel only reads them; writeable so that
#: numba does not compile a read-only specialisation)
_UNIFORM: dict[int, np.ndarray] = {}


def _uniform_weights(k: int) -> np.ndarray:
    """Equal weights (1, k), cached per k (bounded)."""
    w = _UNIFORM.get(k)
    if w is None:
        w = np.full((1, k), 1.0 / k)
        if len(_UNIFORM) < 4096:
            _UNIFORM[k] = w
    return w


def _real_array(x, what: str) -> np.ndarray:
    """``x`` as a float64 array; only integer and float data are accepted (no bools, complex numbers,
    strings, objects or masked arrays, which a float conversion would silently change)."""
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError(f"{what}: masked arrays are not supported (fill or drop the masked entries first)")
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{what} must be real numbers (integer or float), got an array of dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def _as_distribution(values, weights) -> tuple[np.ndarray, np.ndarray]:
    """``(values (24, K), weights (24, K) or (1, K))`` as contiguous writeable float64 arrays
    (shape and weight checks; finiteness of ``values`` is checked in the compiled kernel)."""
    if type(values) is np.ndarray and values.dtype == np.float64:
        v = values
    else:
        v = _real_array(values, "values")
    if v.ndim == 1:
        v = np.broadcast_to(v, (TARGET_HOURS, v.shape[0]))
    if v.ndim != 2 or v.shape[0] != TARGET_HOURS or v.shape[1] == 0:
        raise ValueError(f"values must have shape (24, K) or (K,) with K >= 1, got {np.shape(values)}")
    if weights is None:
        w = _uniform_weights(v.shape[1])
    elif weights is QUANTILE_MASSES:
        if v.shape[1] != 9:
            raise ValueError(f"QUANTILE_MASSES needs 9 values per hour, got {v.shape[1]}")
        w = _QUANTILE_ROW
    else:
        w = _real_array(weights, "weights")
        w = w.reshape(1, -1) if w.ndim == 1 else w
        if w.ndim != 2 or w.shape[1] != v.shape[1] or w.shape[0] not in (1, TARGET_HOURS):
            raise ValueError(f"weights shape {np.shape(weights)} does not match values shape {v.shape}")
        if not np.isfinite(w).all() or w.min() < 0 or np.abs(w.sum(axis=1) - 1.0).max() > 1e-9:
            raise ValueError("weights must be finite, >= 0 and sum to 1 for every hour")
    # contiguous and writeable: read-only arrays would make numba compile a second specialisation
    flags = v.flags
    if not (flags.c_contiguous and flags.writeable):
        v = np.array(v, order="C")
    if not (w.flags.c_contiguous and w.flags.writeable):
        w = np.array(w, order="C")
    return v, w


def _check_scale_shortage(scale, shortage) -> tuple[float, np.ndarray]:
    """``(scale, shortage)`` as float and contiguous writeable float64 (24,) (finiteness and sign of
    ``shortage`` are checked in the compiled kernel)."""
    if not is_number(scale):
        raise ValueError(f"scale must be a real number, got {safe_repr(scale, 60)}")
    try:
        scale = float(scale)
    except OverflowError:
        raise ValueError(f"scale must be finite and > 0, got {safe_repr(scale, 60)}") from None
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be finite and > 0, got {scale!r}")
    s = shortage if type(shortage) is np.ndarray and shortage.dtype == np.float64 else _real_array(shortage, "shortage weights")
    if s.shape != (TARGET_HOURS,):
        raise ValueError(f"shortage weights must have shape (24,), got {s.shape}")
    flags = s.flags
    if not (flags.c_contiguous and flags.writeable):
        s = np.array(s, order="C")
    return scale, s


def _raise_for_status(status: int) -> None:
    if status == _BAD_VALUES:
        raise ValueError("values must be finite")
    if status == _BAD_SHORTAGE:
        raise ValueError("shortage weights must be finite and >= 0")
    if status == _OVERFLOW:
        raise ValueError("the expected costs overflow float64: values / scale are too large (e.g. 1e300 with scale 1e-10)")


@dataclass(frozen=True)
class PlanResult:
    """Output of the optimizer.

    Attributes:
        plan: the optimal feasible :class:`~fwgym.core.contract.Plan`.
        expected_loss: mean hourly expected cost of ``plan`` under the input distribution
            (normalised units, same scale as the decision loss).
        cost: the hourly expected cost table ``C`` of shape (24, 33).
    """

    plan: Plan
    expected_loss: float
    cost: np.ndarray


def cost_table(values, scale: float, shortage: np.ndarray, weights=None) -> np.ndarray:
    """Expected hourly cost table ``C`` (24, 33) of a predictive distribution (see module doc).

    Args:
        values: physical values, shape (24, K) (per-hour samples or quantiles) or (K,) (one set for
            every hour); negative values are clipped to 0.
        scale: contract scale, > 0.
        shortage: shortage weights, shape (24,) (:func:`fwgym.core.contract.shortage_weights`).
        weights: None (equal weights), shape (K,) or (24, K); non-negative, summing to 1 per hour.

    Raises:
        ValueError: wrong shapes; values, weights or shortage weights that are not real numbers
            (bool, complex, string, object or masked arrays) or not finite; weights that are
            negative or do not sum to 1; a scale that is not a finite real number > 0; expected
            costs that overflow float64 (values / scale beyond ~1e300).
    """
    v, w = _as_distribution(values, weights)
    scale, s = _check_scale_shortage(scale, shortage)
    _raise_for_status(_check_inputs(v, s))
    cost = _cost_table(v, w, scale, s, _GRID, ALPHA)
    if not np.isfinite(cost).all():
        _raise_for_status(_OVERFLOW)
    return cost


def solve_blocks(block_cost: np.ndarray, max_step: int = MAX_RAMP_STEPS) -> tuple[np.ndarray, float]:
    """Exact DP over blocks: minimise ``sum_b block_cost[b, i_b]`` s.t. ``|i_b - i_{b-1}| <= max_step``.

    Args:
        block_cost: float64 array (B, L), B >= 1 blocks, L >= 1 levels (any grid, e.g. a small one in tests).
        max_step: largest allowed index change between adjacent blocks (>= 0).

    Returns:
        ``(path, total)``: int64 indices of shape (B,) and the path's total cost (summed block 0
        first). Among the optimal paths (totals within :data:`TIE_RTOL` relative of the minimum:
        ties), the lexicographically smallest index vector (block 0 first) wins. For costs of mixed
        sign the tolerance is relative to ``|minimum|`` of each ramp window's cost-to-go.

    Raises:
        ValueError: wrong shape, non-real or non-finite costs, ``max_step`` not a non-negative
            integer (bools and floats refused), or a total that overflows float64.
    """
    c = np.array(_real_array(block_cost, "block_cost"), dtype=np.float64, order="C")
    if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] < 1:
        raise ValueError(f"block_cost must have shape (B, L) with B, L >= 1, got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("block_cost must be finite")
    if isinstance(max_step, (bool, np.bool_)) or not isinstance(max_step, (int, np.integer)) or max_step < 0:
        raise ValueError(f"max_step must be a non-negative integer, got {safe_repr(max_step, 60)}")
    path, total = _solve_blocks(c, min(int(max_step), c.shape[1]), TIE_RTOL)  # a step beyond the grid allows any move
    if not math.isfinite(total):
        raise ValueError("the total cost overflows float64 (block costs too large)")
    return path, float(total)


def optimal_plan(values, scale: float, shortage: np.ndarray, weights=None) -> PlanResult:
    """Plan of least expected cost for a predictive distribution (the single DP of fwgym).

    Args: as :func:`cost_table`. ``weights=QUANTILE_MASSES`` plans on a 9-quantile forecast of
    shape (24, 9).

    Returns:
        :class:`PlanResult` with the plan, its expected loss and the cost table.

    Raises:
        ValueError: as :func:`cost_table`.
    """
    v, w = _as_distribution(values, weights)
    scale, s = _check_scale_shortage(scale, shortage)
    status, path, levels, physical, loss, cost = _plan_kernel(v, w, scale, s, _GRID, ALPHA, BLOCK_HOURS, MAX_RAMP_STEPS, TIE_RTOL)
    if status:
        _raise_for_status(status)
    return PlanResult(plan=Plan(indices=path, levels=levels, values=physical), expected_loss=loss, cost=cost)


@njit(cache=True, nogil=True)
def _path_total(cost, indices, block_hours):  # pragma: no cover - compiled
    # the same additions, in the same order, as _block_costs + the total of _solve_blocks, so that the
    # value of the DP's own plan is its DP total bit for bit.
    # NaN for an index outside the table or a non-finite table (the wrapper raises).
    for x in cost.flat:
        if not np.isfinite(x):
            return np.nan
    for b in range(indices.shape[0]):
        if indices[b] < 0 or indices[b] >= cost.shape[1]:
            return np.nan
    total = 0.0
    for b in range(indices.shape[0]):
        block = 0.0
        for h in range(b * block_hours, (b + 1) * block_hours):
            block += cost[h, indices[b]]
        total = total + block
    return total


def _plan_indices(indices) -> np.ndarray:
    """8 integer grid indices as a fresh int64 array (the range is checked in the compiled code)."""
    if isinstance(indices, np.ma.MaskedArray):
        raise ValueError("indices: masked arrays are not supported")
    idx = np.asarray(indices)
    if idx.shape != (N_BLOCKS,) or idx.dtype.kind not in "iu":
        raise ValueError(f"indices must be {N_BLOCKS} integer grid indices in 0..{_GRID.shape[0] - 1}, got {safe_repr(indices, 80)}")
    return np.array(idx, dtype=np.int64)


def plan_loss(cost: np.ndarray, indices: np.ndarray) -> float:
    """Mean hourly cost of a plan under a cost table, summed in the DP's order (so
    ``plan_loss(C, optimal)`` is the optimizer's ``expected_loss`` bit for bit; another plan can be
    cheaper only within :data:`TIE_RTOL`, i.e. a tie).

    Args:
        cost: float (24, 33) cost table (:func:`cost_table`, :attr:`PlanResult.cost`).
        indices: 8 integer grid indices in 0..32 (no ramp check).

    Raises:
        ValueError: wrong shapes, non-integer or out-of-range indices, non-finite costs.
    """
    c = cost if type(cost) is np.ndarray and cost.dtype == np.float64 else _real_array(cost, "cost")
    if not (c.flags.c_contiguous and c.flags.writeable):
        c = np.array(c, order="C")  # read-only arrays would make numba compile another specialisation
    if c.shape != (TARGET_HOURS, _GRID.shape[0]):
        raise ValueError(f"cost must be a (24, 33) table, got shape {c.shape}")
    idx = _plan_indices(indices)
    total = _path_total(c, idx, BLOCK_HOURS)
    if not math.isfinite(total):
        raise ValueError(f"cost must be finite and indices in 0..{c.shape[1] - 1}, got indices {safe_repr(indices, 80)}")
    return float(total / TARGET_HOURS)


def invalid_loss(cost: np.ndarray) -> float:
    """Loss of an invalid plan: ``mean_h max_g C[h, g] + 1`` (protocol §5.1), worse than any feasible plan.

    Raises:
        ValueError: ``cost`` is not a finite (24, 33) table.
    """
    c = _real_array(cost, "cost")
    if c.shape != (TARGET_HOURS, _GRID.shape[0]) or not np.isfinite(c).all():
        raise ValueError(f"cost must be a finite (24, 33) table, got shape {c.shape}")
    return float(c.max(axis=1).mean() + INVALID_PENALTY)


def _actual_column(actual) -> np.ndarray:
    """Realised values (24,) as a fresh contiguous float64 (24, 1) array (one sample per hour).

    Raises:
        ValueError: not 24 real numbers (see :func:`_real_array`; finiteness is checked in the kernel).
    """
    a = _real_array(actual, "actual")
    if a.shape != (TARGET_HOURS,):
        raise ValueError(f"actual must have shape (24,), got {a.shape}")
    return np.array(a, dtype=np.float64).reshape(TARGET_HOURS, 1)


def perfect_demand_plan(actual: np.ndarray, scale: float, shortage: np.ndarray) -> PlanResult:
    """Optimal plan on the realised demand (one sample, weight 1): ``expected_loss`` is the floor F."""
    return optimal_plan(_actual_column(actual), scale, shortage)


def realised_loss(actual: np.ndarray, scale: float, shortage: np.ndarray, indices) -> tuple[float, float]:
    """``(loss, floor)`` of a plan on realised demand: the scorer's two numbers (protocol §5.1), in one
    compiled call that builds no table or plan for Python.

    ``floor == perfect_demand_plan(actual, scale, shortage).expected_loss`` and ``loss ==
    plan_loss(C, indices)`` bit for bit (``C`` the one-sample cost table of ``actual``; same terms,
    same order), except that a plan whose total is within :data:`TIE_RTOL` of the floor's (a tie
    with the perfect-demand plan) gets ``loss == floor``: ``floor <= loss`` holds exactly for every
    plan and a tie has ``R = 0``.

    Args:
        actual: realised values (24,), raw units, finite.
        scale: contract scale (> 0); shortage: weights (24,), finite and >= 0.
        indices: the plan's 8 integer grid indices in 0..32 (no ramp check).

    Raises:
        ValueError: as :func:`perfect_demand_plan` and :func:`plan_loss`.
    """
    v = _actual_column(actual)
    scale, s = _check_scale_shortage(scale, shortage)
    idx = _plan_indices(indices)
    status, floor, loss = _realised_kernel(v, _uniform_weights(1), scale, s, _GRID, ALPHA, BLOCK_HOURS, MAX_RAMP_STEPS,
                                           TIE_RTOL, idx)
    if status:
        _raise_for_status(status)
    if not math.isfinite(loss):  # as plan_loss: an index outside the table, or the plan's cost overflows
        raise ValueError(f"cost must be finite and indices in 0..{_GRID.shape[0] - 1}, got indices {safe_repr(indices, 80)}")
    return float(loss), float(floor)


__all__ = [
    "QUANTILE_LEVELS",
    "QUANTILE_MASSES",
    "TIE_RTOL",
    "PlanResult",
    "cost_table",
    "solve_blocks",
    "optimal_plan",
    "plan_loss",
    "invalid_loss",
    "perfect_demand_plan",
    "realised_loss",
    "N_BLOCKS",
]
