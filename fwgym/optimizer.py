"""The one capacity optimizer: expected cost tables and an exact ramp-constrained DP (numba).

DESIGN §4 / FWBench protocol §4. A predictive distribution per target hour is given as values with
weights (``K`` equal-weight samples, or the 9 quantiles 0.1..0.9 with masses
``[0.15, 0.10 x 7, 0.15]``). Values are clipped at 0 and divided by the contract scale. Then

    C[h, g] = sum_k w[h, k] * ( ALPHA * (G_g - y[h, k])_+ + s_h * (y[h, k] - G_g)_+ )

(``s_h`` the shortage weight of hour ``h``), a block's cost is the sum of its 3 hourly rows, and
a forward DP over the 8 blocks with state = previous grid index and transitions of at most
``MAX_RAMP_STEPS`` grid steps gives the plan of least expected cost. Ties go to the lowest grid
index (forward parents and the final state), which favours lower capacity on plateaus.

This module is used by the plan tools, every baseline and oracle, the perfect-demand floor and the
scorer: there is no second copy of the formula in fwgym.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from fwgym.contract import (
    ALPHA,
    BLOCK_HOURS,
    GRID,
    INVALID_PENALTY,
    MAX_RAMP_STEPS,
    N_BLOCKS,
    TARGET_HOURS,
    Plan,
    plan_from_indices,
)

#: Quantile levels of every quantile forecast in fwgym.
QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Probability masses given to the 9 quantiles when a quantile forecast is planned on (protocol §3.2).
QUANTILE_MASSES: np.ndarray = np.array([0.15] + [0.10] * 7 + [0.15])
QUANTILE_MASSES.flags.writeable = False


@njit(cache=True, nogil=True)
def _cost_table(values, weights, scale, shortage, grid, alpha):  # pragma: no cover - compiled
    # literal summation of the formula (branch-free), O(G * K) per hour
    n_hours, n_samples = values.shape
    n_levels = grid.shape[0]
    out = np.empty((n_hours, n_levels))
    inv = 1.0 / scale
    per_hour = weights.shape[0] > 1  # weights (24, K) or one row (1, K) shared by every hour
    z = np.empty(n_samples)
    for h in range(n_hours):
        s_h = shortage[h]
        wr = h if per_hour else 0
        for k in range(n_samples):
            y = values[h, k]
            z[k] = (y if y > 0.0 else 0.0) * inv
        for g in range(n_levels):
            level = grid[g]
            acc = 0.0
            for k in range(n_samples):
                d = level - z[k]
                acc += weights[wr, k] * (alpha * max(d, 0.0) + s_h * max(-d, 0.0))
            out[h, g] = acc
    return out


@njit(cache=True, nogil=True)
def _solve_blocks(block_cost, max_step):  # pragma: no cover - compiled
    n_blocks, n_levels = block_cost.shape
    value = np.empty((n_blocks, n_levels))
    parent = np.zeros((n_blocks, n_levels), dtype=np.int64)
    for j in range(n_levels):
        value[0, j] = block_cost[0, j]
    for b in range(1, n_blocks):
        for j in range(n_levels):
            lo = j - max_step
            if lo < 0:
                lo = 0
            hi = j + max_step
            if hi > n_levels - 1:
                hi = n_levels - 1
            best = value[b - 1, lo]
            arg = lo
            for i in range(lo + 1, hi + 1):
                if value[b - 1, i] < best:
                    best = value[b - 1, i]
                    arg = i
            value[b, j] = best + block_cost[b, j]
            parent[b, j] = arg
    last = 0
    best = value[n_blocks - 1, 0]
    for j in range(1, n_levels):
        if value[n_blocks - 1, j] < best:
            best = value[n_blocks - 1, j]
            last = j
    path = np.empty(n_blocks, dtype=np.int64)
    path[n_blocks - 1] = last
    for b in range(n_blocks - 1, 0, -1):
        path[b - 1] = parent[b, path[b]]
    return path, best


@njit(cache=True, nogil=True)
def _block_costs(cost, block_hours):  # pragma: no cover - compiled
    n_hours, n_levels = cost.shape
    n_blocks = n_hours // block_hours
    out = np.zeros((n_blocks, n_levels))
    for h in range(n_hours):
        b = h // block_hours
        for g in range(n_levels):
            out[b, g] += cost[h, g]
    return out


@njit(cache=True, nogil=True)
def _plan_kernel(values, weights, scale, shortage, grid, alpha, block_hours, max_step):  # pragma: no cover
    cost = _cost_table(values, weights, scale, shortage, grid, alpha)
    path, total = _solve_blocks(_block_costs(cost, block_hours), max_step)
    return path, total / values.shape[0], cost


_QUANTILE_ROW = QUANTILE_MASSES.reshape(1, -1).copy()


def _as_distribution(values, weights) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(values (24, K), weights (24, K) or (1, K))`` as contiguous float64 arrays."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = np.broadcast_to(v, (TARGET_HOURS, v.shape[0]))
    if v.ndim != 2 or v.shape[0] != TARGET_HOURS or v.shape[1] == 0:
        raise ValueError(f"values must have shape (24, K) or (K,) with K >= 1, got {np.shape(values)}")
    if not _all_finite(v):
        raise ValueError("values must be finite")
    if weights is None:
        w = np.full((1, v.shape[1]), 1.0 / v.shape[1])
    elif weights is QUANTILE_MASSES:
        if v.shape[1] != 9:
            raise ValueError(f"QUANTILE_MASSES needs 9 values per hour, got {v.shape[1]}")
        w = _QUANTILE_ROW
    else:
        w = np.asarray(weights, dtype=np.float64)
        w = w.reshape(1, -1) if w.ndim == 1 else w
        if w.ndim != 2 or w.shape[1] != v.shape[1] or w.shape[0] not in (1, TARGET_HOURS):
            raise ValueError(f"weights shape {np.shape(weights)} does not match values shape {v.shape}")
        if not np.isfinite(w).all() or w.min() < 0 or np.abs(w.sum(axis=1) - 1.0).max() > 1e-9:
            raise ValueError("weights must be finite, >= 0 and sum to 1 for every hour")
    # contiguous and writeable: read-only arrays would make numba compile a second specialisation
    if not (v.flags.c_contiguous and v.flags.writeable):
        v = np.array(v, order="C")
    if not (w.flags.c_contiguous and w.flags.writeable):
        w = np.array(w, order="C")
    return v, w


@njit(cache=True, nogil=True)
def _all_finite(a):  # pragma: no cover - compiled
    for x in a.flat:
        if not np.isfinite(x):
            return False
    return True


@njit(cache=True, nogil=True)
def _nonneg_finite(a):  # pragma: no cover - compiled
    for x in a.flat:
        if not (np.isfinite(x) and x >= 0.0):
            return False
    return True


def _check_scale_shortage(scale: float, shortage: np.ndarray) -> np.ndarray:
    scale = float(scale)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be finite and > 0, got {scale!r}")
    s = shortage if type(shortage) is np.ndarray and shortage.dtype == np.float64 else np.asarray(shortage, dtype=np.float64)
    if not s.flags.writeable:
        s = s.copy()
    if s.shape != (TARGET_HOURS,):
        raise ValueError(f"shortage weights must have shape (24,), got {s.shape}")
    if not _nonneg_finite(s):
        raise ValueError("shortage weights must be finite and >= 0")
    return s


@dataclass(frozen=True)
class PlanResult:
    """Output of the optimizer.

    Attributes:
        plan: the optimal feasible :class:`~fwgym.contract.Plan`.
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
        shortage: shortage weights, shape (24,) (:func:`fwgym.contract.shortage_weights`).
        weights: None (equal weights), shape (K,) or (24, K); non-negative, summing to 1 per hour.

    Raises:
        ValueError: wrong shapes, non-finite values, bad weights or scale.
    """
    v, w = _as_distribution(values, weights)
    s = _check_scale_shortage(scale, shortage)
    return _cost_table(v, w, float(scale), s, GRID, ALPHA)


def solve_blocks(block_cost: np.ndarray, max_step: int = MAX_RAMP_STEPS) -> tuple[np.ndarray, float]:
    """Exact DP over blocks: minimise ``sum_b block_cost[b, i_b]`` s.t. ``|i_b - i_{b-1}| <= max_step``.

    Args:
        block_cost: float64 array (B, L), B >= 1 blocks, L >= 1 levels (any grid, e.g. a small one in tests).
        max_step: largest allowed index change between adjacent blocks (>= 0).

    Returns:
        ``(path, total)``: int64 indices of shape (B,) and the minimal total cost. Ties go to the
        lowest index (forward parents and final state).

    Raises:
        ValueError: wrong shape, non-finite costs or negative ``max_step``.
    """
    c = np.array(block_cost, dtype=np.float64, order="C")
    if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] < 1:
        raise ValueError(f"block_cost must have shape (B, L) with B, L >= 1, got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("block_cost must be finite")
    if int(max_step) != max_step or max_step < 0:
        raise ValueError(f"max_step must be a non-negative integer, got {max_step!r}")
    path, total = _solve_blocks(c, int(max_step))
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
    s = _check_scale_shortage(scale, shortage)
    path, loss, cost = _plan_kernel(v, w, float(scale), s, GRID, ALPHA, BLOCK_HOURS, MAX_RAMP_STEPS)
    return PlanResult(plan=plan_from_indices(path, scale), expected_loss=float(loss), cost=cost)


@njit(cache=True, nogil=True)
def _path_total(cost, indices, block_hours):  # pragma: no cover - compiled
    # the same additions, in the same order, as _block_costs + _solve_blocks, so that the DP optimum
    # (e.g. the floor F) is <= the value of every plan exactly, not just up to rounding
    total = 0.0
    for b in range(indices.shape[0]):
        block = 0.0
        for h in range(b * block_hours, (b + 1) * block_hours):
            block += cost[h, indices[b]]
        total = total + block
    return total


def plan_loss(cost: np.ndarray, indices: np.ndarray) -> float:
    """Mean hourly cost of a plan (grid indices, shape (8,)) under a cost table (24, 33), summed in the
    DP's order (so ``plan_loss(C, optimal) <= plan_loss(C, any plan)`` holds exactly)."""
    idx = np.array(indices, dtype=np.int64)
    return float(_path_total(np.asarray(cost, dtype=np.float64), idx, BLOCK_HOURS) / TARGET_HOURS)


def invalid_loss(cost: np.ndarray) -> float:
    """Loss of an invalid plan: ``mean_h max_g C[h, g] + 1`` (protocol §5.1), worse than any feasible plan."""
    return float(cost.max(axis=1).mean() + INVALID_PENALTY)


def perfect_demand_plan(actual: np.ndarray, scale: float, shortage: np.ndarray) -> PlanResult:
    """Optimal plan on the realised demand (one sample, weight 1): ``expected_loss`` is the floor F."""
    a = np.array(actual, dtype=np.float64).reshape(TARGET_HOURS, 1)
    return optimal_plan(a, scale, shortage)


__all__ = [
    "QUANTILE_LEVELS",
    "QUANTILE_MASSES",
    "PlanResult",
    "cost_table",
    "solve_blocks",
    "optimal_plan",
    "plan_loss",
    "invalid_loss",
    "perfect_demand_plan",
    "N_BLOCKS",
]
