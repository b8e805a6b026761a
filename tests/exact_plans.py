"""Exact rational reference for the capacity optimizer (test helper, not a test module).

Everything here is computed in :class:`fractions.Fraction` arithmetic from the protocol's exact
numbers: grid levels ``(8 + g) / 20`` (0.40, 0.45, ..., 2.00), surplus price ``3/10``, masses
``15/100`` and ``10/100`` for quantile forecasts or ``1/K`` for K equal-weight samples. Inputs are
exact rationals (integers, or ``Fraction(sum, 336)`` for a real scale), so two plans tie here only
when their costs are equal, and differ by an amount that no float rounding can reach otherwise.

The protocol's tie-break: among the optimal ramp-feasible plans the lexicographically smallest
vector of grid indices (block 0 first) wins.
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Sequence

ALPHA = Fraction(3, 10)
GRID = [Fraction(8 + g, 20) for g in range(33)]
QUANTILE_MASSES = [Fraction(15, 100)] + [Fraction(10, 100)] * 7 + [Fraction(15, 100)]


def exact(x) -> Fraction:
    """``x`` as a Fraction (ints and Fractions as they are; a float by its exact binary value)."""
    return x if isinstance(x, Fraction) else Fraction(x)


def cost_table(values: Sequence[Sequence], scale, shortage: Sequence, weights: Sequence | None = None) -> list[list[Fraction]]:
    """Exact hourly cost table ``C[h][g] = sum_k w_k (ALPHA (G_g - z_k)_+ + s_h (z_k - G_g)_+)``,
    ``z_k = max(y_k, 0) / scale``, for 24 rows of K values (prefix sums over the sorted samples)."""
    s = exact(scale)
    table = []
    cache: dict = {}
    for h, row_values in enumerate(values):
        k = len(row_values)
        w = [Fraction(1, k)] * k if weights is None else [exact(x) for x in weights]
        sh = exact(shortage[h])
        key = (tuple(row_values), sh, tuple(w))
        if key in cache:
            table.append(cache[key])
            continue
        zs = sorted((max(exact(y), Fraction(0)) / s, wk) for y, wk in zip(row_values, w))
        w_total = sum((wk for _, wk in zs), Fraction(0))
        zw_total = sum((z * wk for z, wk in zs), Fraction(0))
        row, i, w_below, zw_below = [], 0, Fraction(0), Fraction(0)
        for g in GRID:
            while i < k and zs[i][0] <= g:
                w_below += zs[i][1]
                zw_below += zs[i][0] * zs[i][1]
                i += 1
            row.append(ALPHA * (g * w_below - zw_below) + sh * ((zw_total - zw_below) - g * (w_total - w_below)))
        cache[key] = row
        table.append(row)
    return table


def block_costs(table: list[list[Fraction]], block_hours: int = 3) -> list[list[Fraction]]:
    """Sum of each block's hourly rows (8 x 33 for the protocol)."""
    n_levels = len(table[0])
    return [[sum((table[h][g] for h in range(b, b + block_hours)), Fraction(0)) for g in range(n_levels)]
            for b in range(0, len(table), block_hours)]


def brute_force(block_cost: list[list[Fraction]], max_step: int) -> tuple[Fraction, list[int], list[tuple[int, ...]]]:
    """``(optimum, lexicographically smallest optimal path, all optimal paths)`` by enumerating every
    ramp-feasible path (small instances only)."""
    n_blocks, n_levels = len(block_cost), len(block_cost[0])
    best, paths = None, []
    for path in itertools.product(range(n_levels), repeat=n_blocks):
        if any(abs(path[i] - path[i - 1]) > max_step for i in range(1, n_blocks)):
            continue
        total = sum((block_cost[b][j] for b, j in enumerate(path)), Fraction(0))
        if best is None or total < best:
            best, paths = total, [path]
        elif total == best:
            paths.append(path)
    return best, list(min(paths)), paths


def dp(block_cost: list[list[Fraction]], max_step: int) -> tuple[Fraction, list[int]]:
    """``(optimum, lexicographically smallest optimal path)`` by an exact backward DP (cost-to-go) and
    a forward pass taking the smallest index whose cost-to-go equals its window's minimum (equal to
    :func:`brute_force` on small instances: tests/test_optimizer.py checks it)."""
    n_blocks, n_levels = len(block_cost), len(block_cost[0])
    togo: list[list[Fraction]] = [list(block_cost[-1])]
    for b in range(n_blocks - 2, -1, -1):
        nxt = togo[0]
        togo.insert(0, [block_cost[b][j] + min(nxt[max(0, j - max_step): j + max_step + 1]) for j in range(n_levels)])
    path, window = [], range(n_levels)
    for b in range(n_blocks):
        best = min(togo[b][i] for i in window)
        pick = next(i for i in window if togo[b][i] == best)
        path.append(pick)
        window = range(max(0, pick - max_step), min(n_levels, pick + max_step + 1))
    return min(togo[0]), path


def optimal_plan(values, scale, shortage, weights=None, max_step: int = 6) -> tuple[Fraction, list[int]]:
    """Exact ``(optimal total cost, lexicographically smallest optimal plan)`` of a predictive
    distribution (24 rows of K values; ``weights`` None for equal weights or 9 quantile masses)."""
    return dp(block_costs(cost_table(values, scale, shortage, weights)), max_step)
