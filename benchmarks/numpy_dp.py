"""NumPy references of :func:`fwgym.core.optimizer.optimal_plan` (benchmark baselines only).

These are *not* part of fwgym (DESIGN §4 keeps one optimizer there); they exist so the benchmarks
can report speed ratios against NumPy implementations and cross-check the numba DP.

Two DPs, same cost table:

* :func:`optimal_plan_loops` - the straightforward NumPy DP: the textbook recurrence
  ``V_b[j] = C_b[j] + min_{|i - j| <= 6} V_{b-1}[i]`` written as Python loops over blocks and
  states, each state's window minimum taken with ``np.argmin`` on a slice of the previous values;
* :func:`optimal_plan` - a vectorised DP: one fancy-indexed (33, 13) window matrix and one
  ``np.argmin(axis=1)`` per block, no per-state Python loop.

Same formula as fwgym (not the same tie-break: fwgym takes the lexicographically smallest plan
within a 1e-12 tolerance, these DPs take float argmins):

* values clipped at 0, multiplied by ``1/scale`` (as the numba kernel does);
* ``C[h, g] = sum_k w[h, k] * (ALPHA * (G_g - y)_+ + s_h * (y - G_g)_+)`` (broadcast over a
  (K, 24, 33) array, summed over the samples in index order);
* block costs = sums of 3 consecutive hourly rows (summed in hour order);
* exact forward DP over the 8 blocks, transitions of at most ``MAX_RAMP_STEPS`` grid steps,
  ties to the lowest index (``np.argmin`` returns the first minimum), then backtracking;
* expected loss = minimal total / 24.

Agreement: the numba kernel sums the same terms in the same order but groups the products as
``w * (ALPHA * d)`` where NumPy computes ``(w * ALPHA) * d``, so tables and expected losses agree
to ~1e-15 relative, and an exact tie between plans of equal loss (values on the grid, or 9
quantiles with shortage weight 1.5) may be broken differently by rounding.
``bench_optimizer.py --check`` checks all of this.
"""
from __future__ import annotations

import numpy as np

from fwgym.core.contract import ALPHA, BLOCK_HOURS, GRID, MAX_RAMP_STEPS, N_BLOCKS, TARGET_HOURS

_N_LEVELS = GRID.shape[0]
#: _WINDOW[j] = the previous-block grid indices reachable from level j, clipped to the grid.
#: Clipping repeats the edge index; repeats have equal values and non-decreasing indices, so the
#: first minimum along a row is still the lowest reachable index with the minimal value.
_WINDOW = np.clip(np.arange(_N_LEVELS)[:, None] + np.arange(-MAX_RAMP_STEPS, MAX_RAMP_STEPS + 1)[None, :], 0, _N_LEVELS - 1)
_ROWS = np.arange(_N_LEVELS)


def cost_table(values, scale: float, shortage, weights=None) -> np.ndarray:
    """Expected hourly cost table (24, 33); same conventions as :func:`fwgym.core.optimizer.cost_table`
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


def solve_blocks_loops(block_cost: np.ndarray, max_step: int = MAX_RAMP_STEPS) -> tuple[np.ndarray, float]:
    """The same DP as :func:`solve_blocks`, written as loops over blocks and states (textbook form)."""
    n_blocks, n_levels = block_cost.shape
    value = block_cost[0].copy()
    parent = np.zeros((n_blocks, n_levels), dtype=np.int64)
    for b in range(1, n_blocks):
        new = np.empty(n_levels)
        for j in range(n_levels):
            lo, hi = max(j - max_step, 0), min(j + max_step, n_levels - 1)
            i = lo + int(np.argmin(value[lo:hi + 1]))
            parent[b, j] = i
            new[j] = value[i] + block_cost[b, j]
        value = new
    path = np.empty(n_blocks, dtype=np.int64)
    path[-1] = int(np.argmin(value))
    for b in range(n_blocks - 1, 0, -1):
        path[b - 1] = parent[b, path[b]]
    return path, float(value[path[-1]])


def optimal_plan_loops(values, scale: float, shortage, weights=None) -> tuple[np.ndarray, float, np.ndarray]:
    """Straightforward NumPy DP (:func:`solve_blocks_loops`): ``(indices (8,), expected_loss, cost (24, 33))``."""
    cost = cost_table(values, scale, shortage, weights)
    block = cost.reshape(N_BLOCKS, BLOCK_HOURS, _N_LEVELS).sum(axis=1)
    path, total = solve_blocks_loops(block)
    return path, total / TARGET_HOURS, cost


def optimal_plan(values, scale: float, shortage, weights=None) -> tuple[np.ndarray, float, np.ndarray]:
    """Vectorised NumPy DP: ``(indices (8,), expected_loss, cost table (24, 33))``."""
    cost = cost_table(values, scale, shortage, weights)
    block = cost.reshape(N_BLOCKS, BLOCK_HOURS, _N_LEVELS).sum(axis=1)
    path, total = solve_blocks(block)
    return path, total / TARGET_HOURS, cost


__all__ = ["cost_table", "solve_blocks", "solve_blocks_loops", "optimal_plan", "optimal_plan_loops"]
