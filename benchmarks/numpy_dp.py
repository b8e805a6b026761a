"""Vectorised NumPy reference of :func:`fwgym.optimizer.optimal_plan` (benchmark baseline only).

This is *not* part of fwgym (DESIGN §4 keeps one optimizer there); it exists so the benchmarks can
report a speed ratio against a straightforward NumPy implementation and cross-check the numba DP.

Same formula and tie-breaking as fwgym:

* values clipped at 0, multiplied by ``1/scale`` (as the numba kernel does);
* ``C[h, g] = sum_k w[h, k] * (ALPHA * (G_g - y)_+ + s_h * (y - G_g)_+)``;
* block costs = sums of 3 consecutive hourly rows (summed in hour order);
* exact forward DP over the 8 blocks, transitions of at most ``MAX_RAMP_STEPS`` grid steps,
  ties to the lowest index (``np.argmin`` returns the first minimum), then backtracking;
* expected loss = minimal total / 24.

Agreement: the cost table follows the formula literally (samples summed in index order, hours in
block order). Up to fwgym commit 4790688 the numba kernel did exactly the same arithmetic and the
two agreed bit for bit; since 9f12247 fwgym uses a sorted sweep (``alpha*(W*G - M) + s*(...)``), so
tables and expected losses agree to ~1e-14 and an exact tie between plans of equal loss (these do
occur, e.g. values on the grid, or 9 quantiles with shortage weight 1.5) may be broken differently
by rounding. ``bench_optimizer.py --check`` checks this.
"""
from __future__ import annotations

import numpy as np

from fwgym.contract import ALPHA, BLOCK_HOURS, GRID, MAX_RAMP_STEPS, N_BLOCKS, TARGET_HOURS

_N_LEVELS = GRID.shape[0]
#: _WINDOW[j] = the previous-block grid indices reachable from level j, clipped to the grid.
#: Clipping repeats the edge index; repeats have equal values and non-decreasing indices, so the
#: first minimum along a row is still the lowest reachable index with the minimal value.
_WINDOW = np.clip(np.arange(_N_LEVELS)[:, None] + np.arange(-MAX_RAMP_STEPS, MAX_RAMP_STEPS + 1)[None, :], 0, _N_LEVELS - 1)
_ROWS = np.arange(_N_LEVELS)


def cost_table(values, scale: float, shortage, weights=None) -> np.ndarray:
    """Expected hourly cost table (24, 33); same conventions as :func:`fwgym.optimizer.cost_table`
    (no input validation)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = np.broadcast_to(v, (TARGET_HOURS, v.shape[0]))
    if weights is None:
        w = np.full(v.shape, 1.0 / v.shape[1])
    else:
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), v.shape)
    # Layout (K, 24, 33): summing over axis 0 adds the K slices one after the other (sample order),
    # with the products (w * price) * d of the literal formula.
    y = np.maximum(v, 0.0).T * (1.0 / float(scale))                     # (K, 24)
    wt = w.T                                                            # (K, 24)
    d = GRID[None, None, :] - y[:, :, None]                             # (K, 24, 33): level - demand
    s = np.asarray(shortage, dtype=np.float64)[None, :]                 # (1, 24)
    surplus = (wt * ALPHA)[:, :, None] * d
    shortfall = (wt * s)[:, :, None] * d
    pen = np.where(d > 0.0, surplus, -shortfall)
    return pen.sum(axis=0)


def solve_blocks(block_cost: np.ndarray, max_step: int = MAX_RAMP_STEPS) -> tuple[np.ndarray, float]:
    """Exact ramp-constrained DP over blocks on the 33-level grid; ties to the lowest index."""
    window = _WINDOW if max_step == MAX_RAMP_STEPS else np.clip(
        _ROWS[:, None] + np.arange(-max_step, max_step + 1)[None, :], 0, _N_LEVELS - 1)
    n_blocks = block_cost.shape[0]
    parent = np.zeros((n_blocks, _N_LEVELS), dtype=np.int64)
    value = block_cost[0].copy()
    for b in range(1, n_blocks):
        cand = value[window]                                            # (33, 2*max_step+1)
        arg = np.argmin(cand, axis=1)
        parent[b] = window[_ROWS, arg]
        value = cand[_ROWS, arg] + block_cost[b]
    last = int(np.argmin(value))
    path = np.empty(n_blocks, dtype=np.int64)
    path[-1] = last
    for b in range(n_blocks - 1, 0, -1):
        path[b - 1] = parent[b, path[b]]
    return path, float(value[last])


def optimal_plan(values, scale: float, shortage, weights=None) -> tuple[np.ndarray, float, np.ndarray]:
    """Optimal plan: ``(indices (8,), expected_loss, cost table (24, 33))``."""
    cost = cost_table(values, scale, shortage, weights)
    block = cost.reshape(N_BLOCKS, BLOCK_HOURS, _N_LEVELS).sum(axis=1)
    path, total = solve_blocks(block)
    return path, total / TARGET_HOURS, cost


__all__ = ["cost_table", "solve_blocks", "optimal_plan"]
