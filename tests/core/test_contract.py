"""Tests for fwgym/core/contract.py: shortage weights, the grid, and plan validation (DESIGN §3, protocol §1.4/§5.1).

Every expectation is written out by hand or built independently of the code under test.
"""
from __future__ import annotations

import math
from datetime import date

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwgym.testing import feasible_index_paths

from fwgym.core.contract import (
    DECISION_IDS,
    GRID,
    VALUE_ABS_TOL,
    VALUE_REL_TOL,
    MAX_FORECAST_MAGNITUDE,
    PlanError,
    capacity_grid,
    shortage_weights,
    validate_decisions,
    validate_forecast,
    validate_levels,
)

IDS = [f"b{i:02d}" for i in range(8)]
#: grid levels written out independently: 0.40, 0.45, ..., 2.00
HAND_GRID = [round(0.40 + 0.05 * i, 2) for i in range(33)]


def records(values, ids=IDS):
    return [{"decision_id": d, "value": v} for d, v in zip(ids, values)]


def plan_error(fn, *args, **kwargs) -> PlanError:
    with pytest.raises(PlanError) as exc:
        fn(*args, **kwargs)
    return exc.value


# ------------------------------------------------------------------------------------------------
# shortage weights


HAND_WEIGHTS = {
    # pattern [1, 1, 2, 1.5] rotated right by weekday mod 4, each element x6
    0: [1.0] * 12 + [2.0] * 6 + [1.5] * 6,  # Monday, shift 0
    1: [1.5] * 6 + [1.0] * 12 + [2.0] * 6,  # Tuesday, shift 1
    2: [2.0] * 6 + [1.5] * 6 + [1.0] * 12,  # Wednesday, shift 2
    3: [1.0] * 6 + [2.0] * 6 + [1.5] * 6 + [1.0] * 6,  # Thursday, shift 3
    4: [1.0] * 12 + [2.0] * 6 + [1.5] * 6,  # Friday, shift 4 mod 4 = 0
    5: [1.5] * 6 + [1.0] * 12 + [2.0] * 6,  # Saturday, shift 1
    6: [2.0] * 6 + [1.5] * 6 + [1.0] * 12,  # Sunday, shift 2
}


@pytest.mark.parametrize("weekday", range(7))
def test_shortage_weights_by_hand(weekday):
    w = shortage_weights(weekday)
    assert w.shape == (24,)
    assert w.dtype == np.float64
    assert w.tolist() == HAND_WEIGHTS[weekday]


def test_shortage_weights_monday_and_tuesday_literal():
    assert shortage_weights(0).tolist() == [1] * 12 + [2] * 6 + [1.5] * 6
    assert shortage_weights(1).tolist() == [1.5] * 6 + [1] * 12 + [2] * 6


def test_shortage_weights_real_dates():
    # 2024-07-22 is a Monday, 2024-07-24 a Wednesday (checked with the date class, not fwgym)
    assert date(2024, 7, 22).weekday() == 0
    assert shortage_weights(date(2024, 7, 22).weekday()).tolist() == HAND_WEIGHTS[0]
    assert shortage_weights(date(2024, 7, 24).weekday()).tolist() == [2.0] * 6 + [1.5] * 6 + [1.0] * 12


@pytest.mark.parametrize("bad", [-1, 7, 1.5, True, 10])
def test_shortage_weights_bad_weekday(bad):
    with pytest.raises(ValueError):
        shortage_weights(bad)


# ------------------------------------------------------------------------------------------------
# grid


def test_grid_33_levels():
    assert GRID.shape == (33,)
    assert len(GRID) == 33
    assert GRID[0] == pytest.approx(0.40, abs=1e-12)
    assert GRID[-1] == pytest.approx(2.00, abs=1e-12)
    np.testing.assert_allclose(GRID, HAND_GRID, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.diff(GRID), 0.05, rtol=0, atol=1e-12)
    assert not GRID.flags.writeable


def test_decision_ids():
    assert list(DECISION_IDS) == IDS


# ------------------------------------------------------------------------------------------------
# valid plans


def test_valid_records_plan():
    scale = 1234.5
    levels = [0.40, 0.70, 1.00, 1.30, 1.60, 1.90, 2.00, 1.70]
    plan = validate_decisions(records([scale * x for x in levels]), scale, "MW")
    assert plan.indices.tolist() == [0, 6, 12, 18, 24, 30, 32, 26]
    np.testing.assert_allclose(plan.levels, levels, atol=1e-12)
    np.testing.assert_allclose(plan.values, [scale * x for x in levels], rtol=1e-12)
    assert [d["decision_id"] for d in plan.decisions()] == IDS
    np.testing.assert_allclose([d["value"] for d in plan.decisions()], [scale * x for x in levels], rtol=1e-12)


def test_records_in_any_order_and_extra_keys():
    scale = 50.0
    levels = [1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35]
    recs = [{"decision_id": d, "value": scale * x, "forecast_id": "f1"} for d, x in zip(IDS, levels)]
    plan = validate_decisions(list(reversed(recs)), scale)
    assert plan.indices.tolist() == [12, 13, 14, 15, 16, 17, 18, 19]


def test_tuple_of_records_accepted():
    plan = validate_decisions(tuple(records([1.0] * 8)), 1.0)
    assert plan.indices.tolist() == [12] * 8


def test_object_keyed_form():
    scale = 7.0
    levels = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    plan = validate_decisions({d: scale * x for d, x in zip(IDS, levels)}, scale)
    assert plan.indices.tolist() == [2, 4, 6, 8, 10, 12, 14, 16]
    # key order does not matter
    plan2 = validate_decisions({d: scale * x for d, x in reversed(list(zip(IDS, levels)))}, scale)
    assert plan2.indices.tolist() == plan.indices.tolist()


def test_integer_values_accepted():
    # scale 100: level 1.0 -> 100 (an int is a JSON number)
    plan = validate_decisions(records([100] * 8), 100.0)
    assert plan.indices.tolist() == [12] * 8


def test_valid_levels():
    levels = [0.4, 0.7, 1.0, 1.3, 1.0, 0.7, 0.4, 0.45]
    plan = validate_levels(levels, 10.0)
    assert plan.indices.tolist() == [0, 6, 12, 18, 12, 6, 0, 1]
    np.testing.assert_allclose(plan.values, [10.0 * x for x in levels], rtol=1e-12)
    plan_np = validate_levels(np.array(levels), 10.0)
    assert plan_np.indices.tolist() == plan.indices.tolist()
    plan_tuple = validate_levels(tuple(levels), 10.0)
    assert plan_tuple.indices.tolist() == plan.indices.tolist()


@settings(max_examples=150, deadline=None)
@given(path=feasible_index_paths(), scale=st.floats(0.5, 1e5, allow_nan=False, allow_infinity=False))
def test_random_feasible_plans_validate(path, scale):
    levels = [HAND_GRID[i] for i in path]
    plan = validate_decisions(records([scale * x for x in levels]), scale)
    assert plan.indices.tolist() == path
    plan_l = validate_levels(levels, scale)
    assert plan_l.indices.tolist() == path


# ------------------------------------------------------------------------------------------------
# invalid plans: each reason code


@pytest.mark.parametrize("bad", ["b00=1", 42, None, 1.5, {1, 2}])
def test_bad_format_container(bad):
    assert plan_error(validate_decisions, bad, 1.0).code == "bad_format"


def test_bad_format_records():
    recs = records([1.0] * 8)
    assert plan_error(validate_decisions, recs[:7] + ["b07"], 1.0).code == "bad_format"
    assert plan_error(validate_decisions, recs[:7] + [[("decision_id", "b07")]], 1.0).code == "bad_format"
    no_value = recs[:7] + [{"decision_id": "b07"}]
    assert plan_error(validate_decisions, no_value, 1.0).code == "bad_format"
    no_id = recs[:7] + [{"value": 1.0}]
    assert plan_error(validate_decisions, no_id, 1.0).code == "bad_format"


@pytest.mark.parametrize("bad_id", ["b08", "B00", "b0", "b000", 0, None])
def test_unknown_decision_id(bad_id):
    recs = records([1.0] * 7) + [{"decision_id": bad_id, "value": 1.0}]
    assert plan_error(validate_decisions, recs, 1.0).code == "unknown_decision_id"


def test_unknown_decision_id_object_form():
    obj = {d: 1.0 for d in IDS}
    obj["b08"] = 1.0
    assert plan_error(validate_decisions, obj, 1.0).code == "unknown_decision_id"
    obj2 = {d: 1.0 for d in IDS[:7]}
    obj2["B07"] = 1.0
    assert plan_error(validate_decisions, obj2, 1.0).code == "unknown_decision_id"


def test_duplicate_decision():
    recs = records([1.0] * 8) + [{"decision_id": "b03", "value": 1.0}]
    assert plan_error(validate_decisions, recs, 1.0).code == "duplicate_decision"
    recs7 = records([1.0] * 7)
    recs7[6] = {"decision_id": "b00", "value": 1.0}
    assert plan_error(validate_decisions, recs7, 1.0).code == "duplicate_decision"


def test_missing_decision():
    assert plan_error(validate_decisions, records([1.0] * 7), 1.0).code == "missing_decision"
    assert plan_error(validate_decisions, [], 1.0).code == "missing_decision"
    obj = {d: 1.0 for d in IDS if d != "b05"}
    assert plan_error(validate_decisions, obj, 1.0).code == "missing_decision"
    assert plan_error(validate_decisions, {}, 1.0).code == "missing_decision"


@pytest.mark.parametrize("bad", [True, False, "1.0", "100", "1e2", None, [1.0], {"v": 1.0}, "NaN"])
def test_not_a_number(bad):
    vals = [1.0] * 8
    vals[4] = bad
    err = plan_error(validate_decisions, records(vals), 1.0)
    assert err.code == "not_a_number"
    assert "b04" in str(err)
    obj = {d: v for d, v in zip(IDS, vals)}
    assert plan_error(validate_decisions, obj, 1.0).code == "not_a_number"


@pytest.mark.parametrize("bad", [True, "1.0", None])
def test_not_a_number_levels(bad):
    levels = [1.0] * 8
    levels[0] = bad
    assert plan_error(validate_levels, levels, 1.0).code == "not_a_number"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite(bad):
    vals = [1.0] * 8
    vals[2] = bad
    err = plan_error(validate_decisions, records(vals), 1.0)
    assert err.code == "non_finite"
    assert "b02" in str(err)
    levels = [1.0] * 8
    levels[7] = bad
    assert plan_error(validate_levels, levels, 1.0).code == "non_finite"


@pytest.mark.parametrize("bad_level", [0.42, 0.35, 2.05, 0.0, -1.0, 1.025, 3.0])
def test_off_grid(bad_level):
    scale = 200.0
    vals = [scale * 1.0] * 8
    vals[1] = scale * bad_level
    # keep the rest feasible with respect to the ramp; off_grid is detected first
    assert plan_error(validate_decisions, records(vals), scale).code == "off_grid"
    levels = [1.0] * 8
    levels[1] = bad_level
    assert plan_error(validate_levels, levels, scale).code == "off_grid"


def test_off_grid_value_of_another_scale():
    # 1.0 * 100 is on the grid for scale 100 but not for scale 101 (101*0.99 is not a grid value)
    assert validate_decisions(records([100.0] * 8), 100.0).indices.tolist() == [12] * 8
    assert plan_error(validate_decisions, records([100.0] * 8), 101.0).code == "off_grid"


def test_ramp_exactly_030_allowed_035_refused():
    scale = 1000.0
    # 0.40 -> 0.70 is 6 grid steps = 0.30 exactly: allowed (both directions)
    ok = [0.40, 0.70, 1.00, 1.30, 1.60, 1.30, 1.00, 0.70]
    assert validate_decisions(records([scale * x for x in ok]), scale).indices.tolist() == [0, 6, 12, 18, 24, 18, 12, 6]
    assert validate_levels(ok, scale).indices.tolist() == [0, 6, 12, 18, 24, 18, 12, 6]
    # 0.30 steps at the top of the grid too (floating point rounding must not refuse them)
    top = [2.00, 1.70, 2.00, 1.70, 1.40, 1.10, 0.80, 0.50]
    assert validate_levels(top, 1.0).indices.tolist() == [32, 26, 32, 26, 20, 14, 8, 2]
    # 0.35 (7 steps) refused, upward and downward, anywhere in the plan
    for b in range(1, 8):
        up = [1.0] * 8
        up[b:] = [1.35] * (8 - b)
        err = plan_error(validate_decisions, records([scale * x for x in up]), scale)
        assert err.code == "ramp_violation"
        assert IDS[b - 1] in str(err) and IDS[b] in str(err)
        down = [1.0] * 8
        down[b:] = [0.65] * (8 - b)
        assert plan_error(validate_levels, down, scale).code == "ramp_violation"


def test_big_jump_is_ramp_violation():
    assert plan_error(validate_levels, [0.4, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0], 1.0).code == "ramp_violation"


@pytest.mark.parametrize("bad", [[1.0] * 7, [1.0] * 9, [], "1.0", {"b00": 1.0}, None, 1.0, np.array(1.0),
                                 np.ones((8, 1)), np.ones(7)])
def test_levels_bad_format(bad):
    assert plan_error(validate_levels, bad, 1.0).code == "bad_format"


def test_plan_error_is_value_error():
    err = plan_error(validate_levels, [1.0] * 7, 1.0)
    assert isinstance(err, ValueError)
    assert err.message == str(err)


# ------------------------------------------------------------------------------------------------
# tolerance abs 1e-6 / rel 1e-9


def test_abs_tolerance():
    # scale 1: rel tol 1e-9 * ~1 is below the abs tol 1e-6, so abs dominates
    ok = [1.0 + 9e-7] * 8
    assert validate_decisions(records(ok), 1.0).indices.tolist() == [12] * 8
    ok_low = [1.0 - 9e-7] * 8
    assert validate_decisions(records(ok_low), 1.0).indices.tolist() == [12] * 8
    bad = [1.0 + 2e-6] * 8
    assert plan_error(validate_decisions, records(bad), 1.0).code == "off_grid"
    assert plan_error(validate_levels, bad, 1.0).code == "off_grid"


def test_rel_tolerance():
    # scale 1e6, level 1.0: value 1e6; rel tol 1e-9 * 1e6 = 1e-3 dominates abs 1e-6
    scale = 1e6
    ok = [1e6 + 5e-4] * 8
    assert validate_decisions(records(ok), scale).indices.tolist() == [12] * 8
    bad = [1e6 + 2e-3] * 8
    assert plan_error(validate_decisions, records(bad), scale).code == "off_grid"


def test_tolerance_boundary_is_the_original_graders_rule():
    # |v - g| <= atol + rtol * |g| (numpy.isclose(v, g, rtol=1e-9, atol=1e-6)), not max(atol, rtol * |g|)
    assert (VALUE_ABS_TOL, VALUE_REL_TOL) == (1e-6, 1e-9)
    # scale 1e6, level 1.00, g = 1e6: tolerance 1e-6 + 1e-3 = 0.001001
    inside, outside = 1e6 + 0.0010009, 1e6 + 0.0010012
    assert validate_decisions(records([inside] * 8), 1e6).indices.tolist() == [12] * 8  # refused by the max() rule
    assert plan_error(validate_decisions, records([outside] * 8), 1e6).code == "off_grid"
    assert plan_error(validate_decisions, records([1e6 - 0.0010012] * 8), 1e6).code == "off_grid"
    assert np.isclose(inside, 1e6, rtol=1e-9, atol=1e-6) and not np.isclose(outside, 1e6, rtol=1e-9, atol=1e-6)
    # normalised levels (scale 1), g = 1.0: tolerance 1.001e-6
    assert validate_levels([1.0 + 1.0005e-6] * 8, 1.0).indices.tolist() == [12] * 8  # refused by the max() rule
    assert plan_error(validate_levels, [1.0 + 1.0015e-6] * 8, 1.0).code == "off_grid"
    # the rule is relative to the grid value g, not to the submitted value: at g = 2.00 x 1e6 the band is 0.002001
    assert validate_decisions(records([2e6 + 0.0020005] + [2e6] * 7), 1e6).indices.tolist() == [32] * 8
    assert plan_error(validate_decisions, records([2e6 + 0.0020015] + [2e6] * 7), 1e6).code == "off_grid"


def test_off_grid_message_gives_full_precision():
    err = plan_error(validate_decisions, records([1.5] * 8), 4.821428571428571, "departures/hour")
    assert "4.821428571428571" in err.message and repr(0.4 * 4.821428571428571) in err.message


def test_capacity_grid_values_validate_exactly():
    for scale in (4.821428571428571, 2792.4315476190477, 1e-3, 123456.789):
        grid = capacity_grid(scale)
        assert len(grid) == 33 and all(type(v) is float for v in grid)
        plan = validate_decisions(records([float(repr(grid[k])) for k in (0, 6, 12, 18, 24, 30, 32, 26)]), scale)
        assert plan.indices.tolist() == [0, 6, 12, 18, 24, 30, 32, 26]
        np.testing.assert_array_equal(plan.values, [grid[k] for k in (0, 6, 12, 18, 24, 30, 32, 26)])


# ------------------------------------------------------------------------------------------------
# forecast submissions


def test_validate_forecast_accepts_samples_and_quantiles():
    sub = validate_forecast({"samples": [[1.0] * 24, [2] * 24]}, 10.0)
    assert sub.kind == "samples" and sub.values.shape == (2, 24) and not sub.values.flags.writeable
    sub = validate_forecast({"quantiles": [[float(k) for k in range(9)]] * 24}, 10.0)
    assert sub.kind == "quantiles" and sub.values.shape == (24, 9)


@pytest.mark.parametrize("value", [1e12 * 10.0 * (1 + 1e-15), -1.0000001e13, 1e308, -1e308, 10**300])
def test_validate_forecast_refuses_magnitudes_beyond_1e12_scale(value):
    # scale 10: the bound is 1e12 x 10 = 1e13 in magnitude
    assert MAX_FORECAST_MAGNITUDE == 1e12
    for args in ({"samples": [[1.0] * 24, [value] + [1.0] * 23]}, {"quantiles": [[0.0] * 8 + [value]] * 24}):
        if isinstance(value, float) and value < 0 and "quantiles" in args:
            args = {"quantiles": [[value] + [0.0] * 8] * 24}
        err = plan_error(validate_forecast, args, 10.0)
        assert err.code == "too_large" and "1e+12 x scale" in err.message


def test_validate_forecast_bound_is_inclusive():
    assert validate_forecast({"samples": [[1e13] * 24, [-1e13] * 24]}, 10.0).values.max() == 1e13


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), None, "1"])
def test_validate_forecast_needs_a_scale(bad):
    with pytest.raises(ValueError, match="scale"):
        validate_forecast({"samples": [[1.0] * 24] * 2}, bad)


# ------------------------------------------------------------------------------------------------
# known bug: huge JSON integers


def test_huge_integer_is_plan_error():
    vals = [1.0] * 8
    vals[0] = 10**400
    with pytest.raises(PlanError):
        validate_decisions(records(vals), 1.0)


def test_huge_integer_level_is_plan_error():
    with pytest.raises(PlanError):
        validate_levels([10**400] * 8, 1.0)


@settings(max_examples=300, deadline=None)
@given(scale=st.floats(1e-3, 1e6), k=st.integers(0, 32), jitter=st.floats(-0.03, 0.03), far=st.floats(-1e12, 1e12))
def test_snapping_agrees_with_the_nearest_grid_value(scale, k, jitter, far):
    # the nearest-index arithmetic of _snap_exact equals argmin |GRID*scale - v| for accepted values,
    # and every refused value is farther than the tolerance from that nearest grid value
    grid = GRID * scale
    for v in (float(grid[k]), float(grid[k]) * (1 + 1e-12), (GRID[k] + jitter) * scale, far):
        nearest = int(np.abs(grid - v).argmin())
        try:
            plan = validate_decisions({d: v if i == 0 else float(grid[10]) for i, d in enumerate(DECISION_IDS)}, scale)
        except PlanError as exc:
            assert exc.code in ("off_grid", "ramp_violation")
            if exc.code == "off_grid":
                assert not math.isclose(v, float(grid[nearest]), rel_tol=VALUE_REL_TOL, abs_tol=VALUE_ABS_TOL)
            continue
        assert plan.indices[0] == nearest
