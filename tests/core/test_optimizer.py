"""Tests for fwgym/core/optimizer.py: cost tables, the ramp-constrained DP, floors and invalid losses.

Expected values are computed by hand, by a NumPy restatement of the formula, or by brute-force
enumeration / an independent pure-Python DP written here.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exact_plans
from fwgym.testing import feasible_index_paths

from fwgym.core.optimizer import (
    QUANTILE_MASSES,
    TIE_RTOL,
    cost_table,
    invalid_loss,
    optimal_plan,
    perfect_demand_plan,
    realised_loss,
    plan_loss,
    solve_blocks,
)

ALPHA = 0.3
HAND_GRID = np.array([round(0.40 + 0.05 * i, 2) for i in range(33)])
MONDAY = np.array([1.0] * 12 + [2.0] * 6 + [1.5] * 6)
TUESDAY = np.array([1.5] * 6 + [1.0] * 12 + [2.0] * 6)
THURSDAY = np.array([1.0] * 6 + [2.0] * 6 + [1.5] * 6 + [1.0] * 6)


def idx_of(level: float) -> int:
    return int(round((level - 0.40) / 0.05))


def numpy_cost(values, scale, shortage, weights=None):
    """C[h, g] = sum_k w[h,k] (ALPHA (G_g - y)_+ + s_h (y - G_g)_+), y = max(v, 0)/scale (independent)."""
    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = np.tile(v, (24, 1))
    if weights is None:
        w = np.full(v.shape, 1.0 / v.shape[1])
    else:
        w = np.asarray(weights, dtype=float)
        if w.ndim == 1:
            w = np.tile(w, (24, 1))
    y = np.maximum(v, 0.0) / scale  # (24, K)
    d = HAND_GRID[None, None, :] - y[:, :, None]  # (24, K, 33)
    per = ALPHA * np.maximum(d, 0.0) + np.asarray(shortage)[:, None, None] * np.maximum(-d, 0.0)
    return (w[:, :, None] * per).sum(axis=1)


def hand_plan_loss(cost, indices):
    return sum(cost[h, indices[h // 3]] for h in range(24)) / 24.0


def python_dp(block_cost, max_step):
    """Independent pure-Python min over ramp-feasible paths (value only)."""
    n_blocks, n_levels = block_cost.shape
    best = [float(block_cost[0, j]) for j in range(n_levels)]
    for b in range(1, n_blocks):
        best = [
            min(best[i] for i in range(max(0, j - max_step), min(n_levels, j + max_step + 1))) + float(block_cost[b, j])
            for j in range(n_levels)
        ]
    return min(best)


def block_costs(cost):
    return cost.reshape(8, 3, -1).sum(axis=1)


def is_ramp_feasible(indices, max_step=6):
    return all(abs(int(a) - int(b)) <= max_step for a, b in zip(indices[1:], indices[:-1]))


# ------------------------------------------------------------------------------------------------
# hand-computed losses


def test_plan_at_demand_has_zero_loss():
    scale = 500.0
    actual = np.full(24, scale * 1.0)
    cost = cost_table(actual.reshape(24, 1), scale, MONDAY)
    assert plan_loss(cost, [12] * 8) == 0.0
    res = optimal_plan(actual.reshape(24, 1), scale, MONDAY)
    assert res.plan.indices.tolist() == [12] * 8
    assert res.expected_loss == 0.0
    floor = perfect_demand_plan(actual, scale, MONDAY)
    assert floor.expected_loss == 0.0
    np.testing.assert_allclose(floor.plan.values, [scale] * 8)


def test_surplus_only_loss_is_alpha_times_gap():
    scale = 80.0
    cost = cost_table(np.full((24, 1), scale), scale, MONDAY)
    # all 1.2 vs z = 1.0: 0.3 * 0.2 = 0.06 every hour
    assert plan_loss(cost, [idx_of(1.2)] * 8) == pytest.approx(0.06, abs=1e-12)
    # the shortage weights do not matter for surplus
    cost_tue = cost_table(np.full((24, 1), scale), scale, TUESDAY)
    assert plan_loss(cost_tue, [idx_of(1.2)] * 8) == pytest.approx(0.06, abs=1e-12)


def test_shortage_only_loss_uses_weekday_weights():
    scale = 10.0
    # all 0.4 vs z = 1.0, Monday: 0.6 * (12*1 + 6*2 + 6*1.5) / 24 = 0.6 * 33 / 24 = 0.825
    cost = cost_table(np.full((24, 1), scale), scale, MONDAY)
    assert plan_loss(cost, [0] * 8) == pytest.approx(0.825, abs=1e-12)


def test_mixed_plan_by_hand_tuesday():
    scale = 1000.0
    # Tuesday weights [1.5]*6 + [1]*12 + [2]*6, z = 1 every hour,
    # plan 0.8 0.8 1.0 1.0 1.2 1.2 1.0 1.0:
    #   hours 0-5 shortage 0.2 * 1.5 = 0.3 each -> 1.8
    #   hours 12-17 surplus 0.2 * 0.3 = 0.06 each -> 0.36
    #   total 2.16 / 24 = 0.09
    cost = cost_table(np.full((24, 1), scale), scale, TUESDAY)
    plan = [idx_of(x) for x in (0.8, 0.8, 1.0, 1.0, 1.2, 1.2, 1.0, 1.0)]
    assert plan == [8, 8, 12, 12, 16, 16, 12, 12]
    assert plan_loss(cost, plan) == pytest.approx(0.09, abs=1e-12)


def test_hourly_varying_demand_by_hand_thursday():
    scale = 100.0
    # z_h = 1.1 for hours 0-11, 0.9 for hours 12-23; plan all 1.0; Thursday weights
    # hours 0-5 (w=1): 0.1*1 = 0.1 each -> 0.6; hours 6-11 (w=2): 0.2 each -> 1.2
    # hours 12-23 surplus 0.1*0.3 = 0.03 each -> 0.36; total 2.16/24 = 0.09
    z = np.array([1.1] * 12 + [0.9] * 12)
    cost = cost_table((z * scale).reshape(24, 1), scale, THURSDAY)
    assert plan_loss(cost, [12] * 8) == pytest.approx(0.09, abs=1e-12)


def test_two_sample_expected_cost_by_hand():
    scale = 40.0
    # samples {0.5, 1.5} x scale with equal weight, level 1.0:
    # 0.5 * 0.3 * 0.5 + 0.5 * w_h * 0.5 = 0.075 + 0.25 w_h; Monday mean w = 33/24 = 1.375
    values = np.tile([0.5 * scale, 1.5 * scale], (24, 1))
    cost = cost_table(values, scale, MONDAY)
    np.testing.assert_allclose(cost[:, 12], 0.075 + 0.25 * MONDAY, atol=1e-12)
    assert plan_loss(cost, [12] * 8) == pytest.approx(0.075 + 0.25 * 1.375, abs=1e-12)


def test_negative_values_clipped_to_zero():
    scale = 5.0
    # y = -3 -> 0; level 0.4 costs 0.3 * 0.4 = 0.12, level 2.0 costs 0.6
    cost = cost_table(np.full((24, 1), -3.0), scale, MONDAY)
    np.testing.assert_allclose(cost[:, 0], 0.12, atol=1e-12)
    np.testing.assert_allclose(cost[:, 32], 0.6, atol=1e-12)
    res = optimal_plan(np.full((24, 1), -3.0), scale, MONDAY)
    assert res.plan.indices.tolist() == [0] * 8
    assert res.expected_loss == pytest.approx(0.12, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# cost table vs an independent NumPy formula


@pytest.mark.parametrize("seed", range(8))
def test_cost_table_matches_numpy_formula(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 12))
    scale = float(rng.uniform(0.5, 5000))
    values = rng.normal(scale, scale * 0.6, size=(24, k))  # includes negatives
    weights = rng.uniform(0, 1, size=(24, k))
    weights /= weights.sum(axis=1, keepdims=True)
    shortage = rng.uniform(0.5, 3.0, size=24)
    got = cost_table(values, scale, shortage, weights)
    assert got.shape == (24, 33)
    np.testing.assert_allclose(got, numpy_cost(values, scale, shortage, weights), rtol=1e-12, atol=1e-12)
    # equal weights by default
    np.testing.assert_allclose(cost_table(values, scale, shortage), numpy_cost(values, scale, shortage), rtol=1e-12, atol=1e-12)


def test_cost_table_one_dimensional_values_and_weights():
    rng = np.random.default_rng(11)
    scale = 3.0
    values = rng.uniform(0, 7, size=5)
    weights = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    got = cost_table(values, scale, MONDAY, weights)
    np.testing.assert_allclose(got, numpy_cost(values, scale, MONDAY, weights), rtol=1e-12, atol=1e-12)
    # identical rows apart from the shortage weight (hours 0 and 11 share w = 1)
    np.testing.assert_array_equal(got[0], got[11])


def test_cost_table_quantile_masses():
    rng = np.random.default_rng(5)
    scale = 1200.0
    q = np.sort(rng.normal(scale, 300, size=(24, 9)), axis=1)
    masses = [0.15] + [0.10] * 7 + [0.15]
    np.testing.assert_allclose(QUANTILE_MASSES, masses, atol=1e-15)
    assert QUANTILE_MASSES.sum() == pytest.approx(1.0, abs=1e-12)
    got = cost_table(q, scale, TUESDAY, QUANTILE_MASSES)
    np.testing.assert_allclose(got, numpy_cost(q, scale, TUESDAY, masses), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# solve_blocks vs brute force


def brute_force(block_cost, max_step):
    """All ramp-feasible paths; optimum value and the protocol's tie-break: among all optimal paths,
    the lexicographically smallest index vector (block 0 first). Float sums: use costs whose sums are
    exact in float64 (small integers); :func:`exact_brute_force` handles rational costs."""
    n_blocks, n_levels = block_cost.shape
    best_val, best_paths = None, []
    for path in itertools.product(range(n_levels), repeat=n_blocks):
        if any(abs(path[i] - path[i - 1]) > max_step for i in range(1, n_blocks)):
            continue
        total = 0.0
        for b, j in enumerate(path):
            total += float(block_cost[b, j])
        if best_val is None or total < best_val:
            best_val, best_paths = total, [path]
        elif total == best_val:
            best_paths.append(path)
    chosen = min(best_paths)
    return best_val, list(chosen), best_paths


@pytest.mark.parametrize("seed", range(60))
def test_solve_blocks_matches_brute_force_integer_costs(seed):
    # small integer costs produce many exact ties; sums of small integers are exact in float64
    rng = np.random.default_rng(1000 + seed)
    n_blocks = int(rng.integers(1, 5)) if seed % 5 == 0 else 4
    n_levels = int(rng.integers(1, 6)) if seed % 7 == 0 else 5
    max_step = int(rng.integers(0, 3))
    c = rng.integers(0, 4, size=(n_blocks, n_levels)).astype(float)
    val, path, paths = brute_force(c, max_step)
    got_path, got_val = solve_blocks(c, max_step)
    assert got_val == val
    assert got_path.dtype == np.int64
    assert got_path.tolist() == path
    # the optimal set is closed under element-wise min (separable costs, |i - j| <= k constraints),
    # so "lowest index" is unambiguous: the chosen path is element-wise <= every optimal path
    assert all(all(a <= b for a, b in zip(path, p)) for p in paths)


@pytest.mark.parametrize("seed", range(40))
def test_solve_blocks_matches_brute_force_float_costs(seed):
    rng = np.random.default_rng(seed)
    max_step = 1 + seed % 2
    c = rng.uniform(0, 10, size=(4, 5))
    val, path, paths = brute_force(c, max_step)
    got_path, got_val = solve_blocks(c, max_step)
    assert got_val == pytest.approx(val, rel=1e-12, abs=1e-12)
    assert len(paths) == 1  # generic costs: unique optimum
    assert got_path.tolist() == path


@pytest.mark.parametrize("seed", range(40))
def test_solve_blocks_matches_brute_force_multi_segment_windows(seed):
    # the window minima run over segments of width 2*max_step+1; grids wider than one segment
    # (and not a multiple of it) exercise windows that straddle two segments and the clipped edges
    rng = np.random.default_rng(5000 + seed)
    n_blocks = 3 + seed % 2
    n_levels = int(rng.integers(7, 12))
    max_step = seed % 4
    c = rng.integers(0, 3, size=(n_blocks, n_levels)).astype(float)
    val, path, _ = brute_force(c, max_step)
    got_path, got_val = solve_blocks(c, max_step)
    assert got_val == val
    assert got_path.tolist() == path


def _reference_dp(c, max_step):
    """Plain forward DP (window minimum by scanning, lowest index on ties) for grids too large to brute-force."""
    n_blocks, n_levels = c.shape
    value, parents = list(c[0]), []
    for b in range(1, n_blocks):
        new, par = [], []
        for j in range(n_levels):
            lo, hi = max(0, j - max_step), min(n_levels - 1, j + max_step)
            i = min(range(lo, hi + 1), key=lambda k: (value[k], k))
            new.append(value[i] + c[b, j])
            par.append(i)
        value, parents = new, parents + [par]
    last = min(range(n_levels), key=lambda k: (value[k], k))
    path = [last]
    for par in reversed(parents):
        path.append(par[path[-1]])
    return value[last], path[::-1]


@pytest.mark.parametrize("seed", range(30))
def test_solve_blocks_matches_reference_dp_on_the_protocol_grid(seed):
    rng = np.random.default_rng(7000 + seed)
    c = rng.integers(0, 4 if seed % 2 else 1000, size=(8, 33)).astype(float)
    val, path = _reference_dp(c, 6)
    got_path, got_val = solve_blocks(c, 6)
    assert got_val == val and got_path.tolist() == path


def test_solve_blocks_all_zero_cost_gives_all_zero_path():
    for shape, step in [((4, 5), 1), ((8, 33), 6), ((3, 2), 0), ((1, 7), 2)]:
        path, val = solve_blocks(np.zeros(shape), step)
        assert path.tolist() == [0] * shape[0]
        assert val == 0.0


def test_solve_blocks_constructed_ties():
    # every level of the last block ties -> lowest final index; earlier block prefers 2, which ramp
    # step 1 allows from final 1 only; both (2, 1) and (2, 2), (2, 3) cost 0 -> final index 1
    c = np.array([[5.0, 5.0, 0.0, 5.0, 5.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    path, val = solve_blocks(c, 1)
    assert val == 0.0 and path.tolist() == [2, 1]
    # two optimal predecessors 1 and 3 of final index 2: lower one wins
    c = np.array([[9.0, 1.0, 9.0, 1.0, 9.0], [9.0, 9.0, 0.0, 9.0, 9.0]])
    path, val = solve_blocks(c, 1)
    assert val == 1.0 and path.tolist() == [1, 2]
    # a plateau in the middle of the grid: lowest capacity on the plateau
    c = np.array([[3.0, 1.0, 1.0, 1.0, 3.0]] * 3)
    path, val = solve_blocks(c, 2)
    assert val == 3.0 and path.tolist() == [1, 1, 1]


def test_solve_blocks_respects_ramp():
    # block 0 wants level 0, block 1 wants level 4; max_step 1 forbids the jump
    c = np.array([[0.0, 10, 10, 10, 10], [10.0, 10, 10, 10, 0]])
    path, val = solve_blocks(c, 1)
    assert abs(path[1] - path[0]) <= 1
    assert val == 10.0
    assert path.tolist() == [0, 0]  # ties (0,0),(0,1),(3,4) all cost 10; lowest final index 0
    path4, val4 = solve_blocks(c, 4)
    assert path4.tolist() == [0, 4] and val4 == 0.0


@pytest.mark.parametrize(
    "bad, step",
    [
        (np.zeros(5), 1),
        (np.zeros((0, 5)), 1),
        (np.zeros((3, 0)), 1),
        (np.zeros((2, 2, 2)), 1),
        (np.array([[0.0, np.nan]]), 1),
        (np.array([[0.0, np.inf]]), 1),
        (np.zeros((2, 3)), -1),
        (np.zeros((2, 3)), 1.5),
        (np.zeros((2, 3)), 6.0),
        (np.zeros((2, 3)), float("inf")),
        (np.zeros((2, 3)), None),
        (np.zeros((2, 3)), True),
        (np.zeros((2, 3), dtype=complex), 1),
        (np.full((8, 3), 1e308), 2),        # finite costs whose total overflows
    ],
)
def test_solve_blocks_bad_input(bad, step):
    with pytest.raises(ValueError):
        solve_blocks(bad, step)


def test_solve_blocks_step_beyond_the_grid_allows_any_move():
    c = np.array([[0.0, 5.0, 5.0, 5.0], [5.0, 5.0, 5.0, 0.0]])
    for step in (3, 10**30, np.int64(2**62)):
        path, total = solve_blocks(c, step)
        assert path.tolist() == [0, 3] and total == 0.0


# ------------------------------------------------------------------------------------------------
# exact tie-break: brute force and an exact DP in rational arithmetic (tests/exact_plans.py)


def test_float_rounding_does_not_decide_an_exact_tie():
    # two constant paths (max_step 0) of equal exact cost 3/10: 1/10 + 2/10 and 3/10 + 0; in float64
    # 0.1 + 0.2 > 0.3 + 0.0, so a float argmin would pick index 1; the tie goes to the smaller index 0
    assert 0.1 + 0.2 > 0.3 + 0.0
    c = [[Fraction(1, 10), Fraction(3, 10)], [Fraction(2, 10), Fraction(0)]]
    best, lex, paths = exact_plans.brute_force(c, 0)
    assert best == Fraction(3, 10) and sorted(paths) == [(0, 0), (1, 1)] and lex == [0, 0]
    path, total = solve_blocks(np.array(c, dtype=float), 0)
    assert path.tolist() == [0, 0] and total == 0.1 + 0.2


def test_tie_tolerance_is_relative_and_stated():
    assert TIE_RTOL == 1e-12
    # a cost-to-go above the minimum by 0.5e-12 relative ties (lower index wins); by 2e-12 it does not
    for rel, expected in ((0.5e-12, [0]), (2e-12, [1])):
        c = np.array([[1.0 + rel, 1.0]])
        assert solve_blocks(c, 0)[0].tolist() == expected
    # at zero only exact zeros tie
    assert solve_blocks(np.array([[1e-300, 0.0]]), 0)[0].tolist() == [1]


#: exact rational costs with denominators that are not powers of two (float sums round)
_rational_costs = st.integers(1, 4).flatmap(lambda n_blocks: st.integers(1, 6).flatmap(lambda n_levels: st.tuples(
    st.lists(st.lists(st.integers(0, 6), min_size=n_levels, max_size=n_levels), min_size=n_blocks, max_size=n_blocks),
    st.sampled_from([1, 3, 7, 10, 20, 30]),
    st.integers(0, 2),
)))


@settings(max_examples=300, deadline=None)
@given(case=_rational_costs)
def test_solve_blocks_equals_exact_brute_force_on_flat_rational_costs(case):
    ints, den, max_step = case
    c = [[Fraction(k, den) for k in row] for row in ints]
    best, lex, paths = exact_plans.brute_force(c, max_step)
    path, total = solve_blocks(np.array([[k / den for k in row] for row in ints]), max_step)
    assert path.tolist() == lex
    assert total == pytest.approx(float(best), rel=1e-14, abs=1e-15)
    # the exact DP of the reference module agrees with brute force (it is used where brute force is too big)
    assert exact_plans.dp(c, max_step) == (best, lex)
    # the optimal set is closed under element-wise min, so the lexicographic minimum is the element-wise minimum
    assert lex == [min(p[b] for p in paths) for b in range(len(lex))]


def _integer_instance(rng):
    """Integer values on a dyadic scale (exact in float64 and in Fraction) with many exact ties."""
    k = int(rng.choice([1, 2, 3, 5, 6, 9, 12, 14]))
    scale = float(rng.choice([40.0, 37.0, 1234.5, 20.25, 7.0]))
    values = rng.integers(0, int(2.6 * scale) + 1, size=(24, k))
    if rng.random() < 0.3:  # on the grid: many exactly flat costs
        values = np.round(rng.integers(8, 41, size=(24, k)) * scale / 20.0)
    if rng.random() < 0.3:  # a shortage-weight-1.5 plateau: 10 low and 2 high samples per hour are flat in between
        k = 12
        values = np.concatenate([rng.integers(0, int(0.4 * scale), size=(24, 10)),
                                 rng.integers(int(2.1 * scale), int(2.5 * scale), size=(24, 2))], axis=1)
    weights = None
    if k == 9 and rng.random() < 0.5:
        values, weights = np.sort(values, axis=1), QUANTILE_MASSES
    return values.astype(float), scale, [MONDAY, TUESDAY, THURSDAY, np.roll(MONDAY, 12)][int(rng.integers(0, 4))], weights


@pytest.mark.parametrize("seed", range(8))
def test_optimal_plan_equals_exact_rational_optimum(seed):
    # the whole optimizer (cost table, block sums, DP, tie-break) against the exact optimum computed
    # from the protocol's exact numbers; 25 instances per seed with frequent exact ties
    rng = np.random.default_rng(900 + seed)
    for _ in range(25):
        values, scale, shortage, weights = _integer_instance(rng)
        ints = [[int(x) for x in row] for row in values]
        masses = None if weights is None else exact_plans.QUANTILE_MASSES
        best, lex = exact_plans.optimal_plan(ints, int(scale) if scale == int(scale) else Fraction(scale), list(shortage), masses)
        res = optimal_plan(values, scale, shortage, weights=weights)
        assert res.plan.indices.tolist() == lex
        assert res.expected_loss == pytest.approx(float(best) / 24, rel=1e-12)


@pytest.mark.parametrize("case_id", [
    # real cases where the previous forward DP (float argmin parents) departed from the exact optimum
    "elec-FPC-2024-02-27-day_ahead", "cycle-14-2015-10-09-day_ahead", "cycle-193-2015-10-01-day_ahead",
    "cycle-404-2015-10-01-week_ahead", "cycle-407-2015-10-13-week_ahead",
])
def test_real_cases_equal_the_exact_rational_optimum(case_id):
    from fwgym.core.cases import get_case
    from fwgym.forecasters.classical import classical_distribution

    case = get_case(case_id)
    scale = Fraction(int(np.sum(case.history)), 336)  # the exact mean of 336 integer values
    assert case.scale == pytest.approx(float(scale), rel=1e-15)
    for m in ("weekday_empirical", "weekly_repeat", "all_hour_empirical", "recent_week_empirical",
              "recent_day_empirical", "hour_of_day_empirical", "perfect"):
        v = case.target().reshape(-1, 1) if m == "perfect" else classical_distribution(m, case.history, case.history_hours, case.target_hours)
        assert np.all(v == np.round(v))  # integer data: the exact problem is the float problem's intent
        _, lex = exact_plans.optimal_plan([[int(x) for x in row] for row in v], scale, list(case.shortage))
        assert optimal_plan(v, case.scale, case.shortage).plan.indices.tolist() == lex, m


def test_flat_floor_by_hand_lowest_plan_wins_and_ties_have_zero_excess():
    # scale 40, Tuesday (hours 0-5 weight 1.5). Block 0: z = 0.5, 0.5, 2.0 -> for a in (0.5, 2.0) its
    # cost falls with slope 0.3*2 - 1.5*1 = -0.9 per unit; block 1: z = 0.4 -> cost rises with slope
    # 0.3*3 = 0.9 for b > 0.4; blocks 2-7: z = 1.0 (level 1.00 costs 0). The ramp keeps b >= a - 0.3
    # and block 2 at 1.00 needs b in [0.70, 1.30], so every plan [a, a - 0.30, 1, ..., 1] with
    # a in {1.00, ..., 1.60} has the same exact cost: block 0 at 1.00: 0.3*0.5*2 + 1.5*1.0 = 1.8;
    # block 1 at 0.70: 3*0.3*0.3 = 0.27; floor = 2.07/24 = 0.08625. In float64 the slopes differ
    # by rounding (0.3*2 - 1.5 vs 0.3*3); the lexicographically smallest plan wins.
    y = np.array([20.0, 20.0, 80.0] + [16.0] * 3 + [40.0] * 18)
    ties = [[12 + k, 6 + k] + [12] * 6 for k in range(13)]
    best, lex = exact_plans.optimal_plan([[int(v)] for v in y], 40, list(TUESDAY))
    assert best == Fraction(207, 100) and lex == ties[0]
    floor = perfect_demand_plan(y, 40.0, TUESDAY)
    assert floor.plan.indices.tolist() == ties[0]
    assert floor.expected_loss == pytest.approx(0.08625, rel=1e-14)
    cost = cost_table(y.reshape(24, 1), 40.0, TUESDAY)
    raw = [plan_loss(cost, p) for p in ties]
    assert max(raw) - min(raw) <= 1e-15 and len(set(raw)) > 1  # float rounding does separate the ties
    for p in ties:  # every tie with the floor plan is reported at the floor: R = 0 exactly
        loss, fl = realised_loss(y, 40.0, TUESDAY, p)
        assert fl == floor.expected_loss and loss == fl
    loss, fl = realised_loss(y, 40.0, TUESDAY, [11, 6] + [12] * 6)  # not a tie: a = 0.95 costs 0.9 * 0.05 more
    assert loss - fl == pytest.approx(0.9 * 0.05 / 24, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# optimal_plan


@pytest.mark.parametrize("seed", range(6))
def test_optimal_plan_quantiles(seed):
    rng = np.random.default_rng(200 + seed)
    scale = float(rng.uniform(10, 10000))
    level = rng.uniform(0.3, 2.2, size=(24, 1))
    q = np.sort(scale * (level + rng.normal(0, 0.25, size=(24, 9))), axis=1)
    shortage = [MONDAY, TUESDAY, THURSDAY][seed % 3]
    res = optimal_plan(q, scale, shortage, weights=QUANTILE_MASSES)
    cost = numpy_cost(q, scale, shortage, [0.15] + [0.10] * 7 + [0.15])
    np.testing.assert_allclose(res.cost, cost, rtol=1e-12, atol=1e-12)
    idx = res.plan.indices
    assert idx.shape == (8,)
    assert is_ramp_feasible(idx)
    # the expected loss equals the plan's loss under the table, and the optimum of an independent DP
    assert res.expected_loss == pytest.approx(hand_plan_loss(cost, idx), rel=1e-12, abs=1e-14)
    assert res.expected_loss == pytest.approx(python_dp(block_costs(cost), 6) / 24.0, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(res.plan.levels, HAND_GRID[idx], atol=1e-12)
    np.testing.assert_allclose(res.plan.values, scale * HAND_GRID[idx], rtol=1e-12)


def test_optimal_plan_ramp_binding():
    # demand jumps from 0.4 to 2.0 between blocks 3 and 4: the plan must ramp in 0.30 steps
    scale = 1.0
    z = np.array([0.4] * 12 + [2.0] * 12)
    res = optimal_plan(z.reshape(24, 1), scale, MONDAY)
    assert is_ramp_feasible(res.plan.indices)
    cost = numpy_cost(z.reshape(24, 1), scale, MONDAY)
    assert res.expected_loss == pytest.approx(python_dp(block_costs(cost), 6) / 24.0, rel=1e-12)
    assert res.expected_loss > 0


@st.composite
def distributions(draw):
    k = draw(st.integers(1, 6))
    scale = draw(st.floats(0.1, 1e4, allow_nan=False, allow_infinity=False))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    values = scale * rng.uniform(-0.2, 2.5, size=(24, k))
    weekday = draw(st.integers(0, 6))
    shortage = [MONDAY, TUESDAY, np.array([2.0] * 6 + [1.5] * 6 + [1.0] * 12), THURSDAY][weekday % 4]
    return values, scale, shortage


@settings(max_examples=60, deadline=None)
@given(dist=distributions(), other=feasible_index_paths())
def test_optimal_plan_feasible_and_no_better_feasible_plan(dist, other):
    values, scale, shortage = dist
    res = optimal_plan(values, scale, shortage)
    idx = res.plan.indices
    assert is_ramp_feasible(idx)
    assert res.expected_loss == pytest.approx(plan_loss(res.cost, idx), rel=1e-12, abs=1e-14)
    cost = numpy_cost(values, scale, shortage)
    assert res.expected_loss == pytest.approx(hand_plan_loss(cost, idx), rel=1e-10, abs=1e-12)
    assert res.expected_loss <= hand_plan_loss(cost, other) + 1e-12
    assert invalid_loss(res.cost) > hand_plan_loss(cost, other)


#: normalised demand z (24,) in [0, 3], a scale, and 1-5 ramp-feasible index paths to compare
_demand_and_plans = given(
    z=st.lists(st.floats(0.0, 3.0, allow_nan=False), min_size=24, max_size=24),
    scale=st.floats(0.5, 5000, allow_nan=False),
    plans=st.lists(feasible_index_paths(), min_size=1, max_size=5),
)


@settings(max_examples=60, deadline=None)
@_demand_and_plans
def test_perfect_demand_floor_below_every_feasible_plan(z, scale, plans):
    actual = np.array(z) * scale
    floor = perfect_demand_plan(actual, scale, TUESDAY)
    cost = numpy_cost(actual.reshape(24, 1), scale, TUESDAY)
    assert is_ramp_feasible(floor.plan.indices)
    assert floor.expected_loss >= 0
    assert floor.expected_loss == pytest.approx(python_dp(block_costs(cost), 6) / 24.0, rel=1e-10, abs=1e-12)
    for p in plans:
        assert floor.expected_loss <= hand_plan_loss(cost, p) + 1e-12


def test_perfect_demand_floor_positive_off_grid():
    # z = 1.02 everywhere (between 1.00 and 1.05): best is min(shortage 0.02 * w, surplus 0.03 * 0.3)
    scale = 100.0
    actual = np.full(24, 102.0)
    floor = perfect_demand_plan(actual, scale, MONDAY)
    # per hour: level 1.00 costs 0.02 w_h; level 1.05 costs 0.3 * 0.03 = 0.009 < 0.02 <= 0.02 w_h
    assert floor.plan.indices.tolist() == [13] * 8
    assert floor.expected_loss == pytest.approx(0.009, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# invalid loss


def test_invalid_loss_by_hand():
    scale = 1.0
    # z = 1 everywhere, Monday: max_g C[h] = max(0.3*(2.0-1.0), w_h*(1.0-0.4)) = 0.6 w_h (w_h >= 1)
    # mean = (12*0.6 + 6*1.2 + 6*0.9)/24 = 0.825 -> invalid loss 1.825
    cost = cost_table(np.full((24, 1), 1.0), scale, MONDAY)
    assert invalid_loss(cost) == pytest.approx(1.825, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(dist=distributions(), plans=st.lists(feasible_index_paths(), min_size=1, max_size=8))
def test_invalid_loss_exceeds_every_feasible_plan(dist, plans):
    values, scale, shortage = dist
    cost = cost_table(values, scale, shortage)
    bad = invalid_loss(cost)
    indep = numpy_cost(values, scale, shortage).max(axis=1).mean() + 1.0
    assert bad == pytest.approx(indep, rel=1e-12)
    for p in plans:
        assert bad > plan_loss(cost, p)
        assert bad > hand_plan_loss(cost, p)


# ------------------------------------------------------------------------------------------------
# bad inputs


GOOD = np.ones((24, 3))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(values=np.ones((23, 3))),
        dict(values=np.ones((25, 3))),
        dict(values=np.ones((24, 0))),
        dict(values=np.ones((24, 3, 2))),
        dict(values=np.ones(0)),
        dict(values=np.where(np.arange(72).reshape(24, 3) == 5, np.nan, 1.0)),
        dict(values=np.where(np.arange(72).reshape(24, 3) == 7, np.inf, 1.0)),
        dict(weights=np.array([0.5, 0.7, -0.2])),
        dict(weights=np.array([0.2, 0.2, 0.2])),
        dict(weights=np.array([0.5, 0.5])),
        dict(weights=np.ones((24, 2)) / 2),
        dict(weights=np.array([np.nan, 0.5, 0.5])),
        dict(weights=np.full((24, 3), 0.4)),
        dict(scale=0.0),
        dict(scale=-1.0),
        dict(scale=float("nan")),
        dict(scale=float("inf")),
        dict(shortage=np.ones(23)),
        dict(shortage=np.ones((24, 1))),
        dict(shortage=np.ones(24, dtype=bool)),
        dict(shortage=-np.ones(24)),
        dict(scale=None),
        dict(scale="100"),
        dict(scale=True),
        dict(scale=np.array([100.0])),
        dict(values=np.ones((24, 3), dtype=complex)),
        dict(values=np.ones((24, 3), dtype=bool)),
        dict(values=np.ma.masked_array(np.ones((24, 3)), mask=np.zeros((24, 3), dtype=bool))),
        dict(values=[["1.0"] * 3] * 24),
        dict(weights=np.ones(3, dtype=bool)),
        dict(scale=10**400),                                           # float() overflows
        dict(values=np.full((24, 3), 1e300), scale=1e-10),            # finite inputs, costs overflow to inf
        dict(values=np.full((24, 3), 1e300), scale=1e-10, shortage=np.zeros(24)),  # ... and to NaN (0 * inf)
    ],
)
def test_bad_inputs_raise_value_error(kwargs):
    args = dict(values=GOOD, scale=1.0, shortage=MONDAY, weights=None)
    args.update(kwargs)
    with pytest.raises(ValueError):
        optimal_plan(args["values"], args["scale"], args["shortage"], weights=args["weights"])
    with pytest.raises(ValueError):
        cost_table(args["values"], args["scale"], args["shortage"], weights=args["weights"])


@pytest.mark.parametrize("actual", [np.ones(23), np.ones(25), np.full(24, np.nan)])
def test_perfect_demand_bad_input(actual):
    with pytest.raises(ValueError):
        perfect_demand_plan(actual, 1.0, MONDAY)


@pytest.mark.parametrize("indices", [[33] * 8, [-1] * 8, [0] * 9, [0] * 7, [0.5] * 8, [10**6] * 8, [[0] * 8], ["a"] * 8])
def test_plan_loss_refuses_bad_indices(indices):
    cost = optimal_plan(np.full((24, 9), 100.0), 100.0, MONDAY).cost
    with pytest.raises(ValueError):
        plan_loss(cost, indices)


@pytest.mark.parametrize("cost", [np.ones((2, 2)), np.ones((24, 32)), np.full((24, 33), np.nan), np.ones((24, 33), dtype=complex)])
def test_plan_loss_and_invalid_loss_refuse_bad_tables(cost):
    with pytest.raises(ValueError):
        plan_loss(cost, [0] * 8)
    with pytest.raises(ValueError):
        invalid_loss(cost)


def test_plan_loss_accepts_read_only_tables_and_equals_the_dp_total():
    res = optimal_plan(np.full((24, 9), 100.0), 100.0, MONDAY)
    cost = res.cost.copy()
    cost.flags.writeable = False
    assert plan_loss(cost, res.plan.indices) == res.expected_loss
    assert plan_loss(cost, list(res.plan.indices)) == res.expected_loss


@settings(max_examples=80, deadline=None)
@_demand_and_plans
def test_realised_loss_is_plan_loss_and_floor_bit_for_bit(z, scale, plans):
    # the env scores floor = the perfect plan's expected loss and loss = plan_loss(cost, submitted): both
    # sum the same terms in the same order, so no feasible plan can score below the floor, even by rounding
    actual = np.array(z) * scale
    best = perfect_demand_plan(actual, scale, TUESDAY)
    assert best.expected_loss == plan_loss(best.cost, best.plan.indices)
    assert realised_loss(actual, scale, TUESDAY, best.plan.indices) == (best.expected_loss, best.expected_loss)
    for p in plans:
        loss, floor = realised_loss(actual, scale, TUESDAY, np.array(p))
        assert loss == plan_loss(best.cost, np.array(p)) and floor == best.expected_loss
        assert floor <= loss


def test_realised_loss_bad_input():
    ok = np.full(24, 100.0)
    plan = np.full(8, 12)
    with pytest.raises(ValueError, match="indices"):
        realised_loss(ok, 100.0, MONDAY, np.full(8, 33))
    with pytest.raises(ValueError, match="indices"):
        realised_loss(ok, 100.0, MONDAY, np.full(8, -1))
    with pytest.raises(ValueError, match="indices"):
        realised_loss(ok, 100.0, MONDAY, np.full(7, 12))
    with pytest.raises(ValueError, match="indices"):
        realised_loss(ok, 100.0, MONDAY, np.full(8, 12.0))
    with pytest.raises(ValueError, match="finite"):
        realised_loss(np.r_[ok[:23], np.nan], 100.0, MONDAY, plan)
    with pytest.raises(ValueError):
        realised_loss(ok[:23], 100.0, MONDAY, plan)
    with pytest.raises(ValueError, match="scale"):
        realised_loss(ok, 0.0, MONDAY, plan)
    with pytest.raises(ValueError, match="shortage"):
        realised_loss(ok, 100.0, -MONDAY, plan)
    # hand-computed: demand 100 everywhere, scale 100, level 1.0 -> no cost; level 1.05 -> 0.3 * 0.05
    assert realised_loss(ok, 100.0, MONDAY, plan) == (0.0, 0.0)
    loss, floor = realised_loss(ok, 100.0, MONDAY, np.full(8, 13))
    assert floor == 0.0 and loss == pytest.approx(0.3 * 0.05, abs=1e-15)


def test_realised_loss_and_perfect_plan_refuse_what_optimal_plan_refuses():
    ok = np.full(24, 100.0)
    plan = np.full(8, 12)
    bad_actuals = [np.ma.masked_array(ok, mask=[True] + [False] * 23), ok.astype(complex), [None] * 24,
                   [10**400] * 24, {"a": 1}, ok.reshape(4, 6), ok.astype(str), ok > 0]
    for bad in bad_actuals:
        with pytest.raises(ValueError):
            realised_loss(bad, 100.0, MONDAY, plan)
        with pytest.raises(ValueError):
            perfect_demand_plan(bad, 100.0, MONDAY)
    with pytest.raises(ValueError, match="masked"):
        realised_loss(ok, 100.0, MONDAY, np.ma.masked_array(plan))
    with pytest.raises(ValueError, match="masked"):
        plan_loss(perfect_demand_plan(ok, 100.0, MONDAY).cost, np.ma.masked_array(plan))
    # valid indices whose summed cost overflows: the plan_loss message, not an index complaint
    with pytest.raises(ValueError, match="cost must be finite"):
        realised_loss(np.full(24, 10.0), 10.0, np.full(24, 5e307), np.zeros(8, dtype=np.int64))
