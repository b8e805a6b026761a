"""fwgym.tools: the process-wide classical-plan cache (bounded LRU, hits equal recomputations), the forecast result and its rounding."""
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fwgym import tools
from fwgym.cases import build_cases
from fwgym.forecasters.classical import classical_distribution
from fwgym.optimizer import optimal_plan


def test_plan_cache_is_a_bounded_lru_and_hits_equal_recomputation(monkeypatch):
    monkeypatch.setattr(tools, "_PLAN_CACHE", OrderedDict())
    monkeypatch.setattr(tools, "_PLAN_CACHE_MAX", 3)
    cases = build_cases("electricity", "test")[:5]
    first = tools.classical_plan_result(cases[0], "weekday_empirical")
    for c in cases[1:3]:
        tools.classical_plan_result(c, "weekday_empirical")
    assert tools.classical_plan_result(cases[0], "weekday_empirical") is first  # a hit, now most recent
    tools.classical_plan_result(cases[3], "weekday_empirical")                  # evicts cases[1]
    assert list(tools._PLAN_CACHE) == [(c.case_id, "weekday_empirical") for c in (cases[2], cases[0], cases[3])]
    c = cases[4]
    fresh = optimal_plan(classical_distribution("weekday_empirical", c.history, c.history_hours, c.target_hours),
                         c.scale, c.shortage)
    got = tools.classical_plan_result(c, "weekday_empirical")
    assert np.array_equal(got.plan.indices, fresh.plan.indices) and got.expected_loss == fresh.expected_loss
    assert np.array_equal(got.cost, fresh.cost) and len(tools._PLAN_CACHE) == 3


def test_cached_plans_are_read_only(monkeypatch):
    monkeypatch.setattr(tools, "_PLAN_CACHE", OrderedDict())
    case = build_cases("electricity", "test")[0]
    hit = tools.classical_plan_result(case, "weekly_repeat")
    for a in (hit.plan.indices, hit.plan.levels, hit.plan.values, hit.cost):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 0
    again = tools.classical_plan_result(case, "weekly_repeat")
    assert again is hit


def test_forecast_result_carries_the_quantiles_rounded_to_6_decimals():
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv("electricity", split="test", text_observations=False)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    *_, info = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    res = info["tool_result"]["result"]
    q = env.episode.forecasts[res["forecast_id"]]["quantiles"]  # what plan and scoring use (unrounded)
    shown = np.array(res["quantiles"])
    assert shown.shape == q.shape == (50, 9) and type(res["quantiles"][0][0]) is float
    assert np.max(np.abs(shown - q)) <= 5e-7 + 1e-12 * np.max(q)
    assert all(v == round(v, 6) for row in res["quantiles"] for v in row)
    assert res["quantiles"] == [[round(float(v), 6) for v in row] for row in q]


def _same(x: float, y: float) -> bool:
    return repr(x) == repr(y)  # also tells -0.0 from 0.0 and matches NaN with NaN


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                  elements=st.floats(allow_nan=True, allow_infinity=True, width=64)),
       st.integers(0, 8))
def test_rounded_lists_equals_python_round_on_any_floats(a, digits):
    out = tools.rounded_lists(a, digits)
    ref = np.vectorize(lambda v: round(float(v), digits), otypes=[object])(a).tolist() if a.size else a.tolist()
    flat = lambda x: [v for y in x for v in flat(y)] if isinstance(x, list) else [x]  # noqa: E731
    assert len(flat(out)) == a.size and all(_same(u, v) for u, v in zip(flat(out), flat(ref)))


def test_rounded_lists_near_ties_huge_and_overflowing_values():
    rng = np.random.default_rng(0)
    a = np.concatenate([
        np.arange(-4000, 4000) / 128.0,  # exact ties at the 6th decimal (k/128: 0.0078125 -> 0.007812, half to even)
        (np.arange(1, 20000) + 0.5) / 1e6,  # decimal half-way cases, stored just above or below
        rng.normal(5000, 2000, 20000), rng.uniform(-1e7, 1e7, 20000),  # MW-like values
        [1e305, -1.7e308, 4.5e15, 2.0**53, 5e-7, -5e-7, 0.0, -0.0, np.inf, -np.inf, np.nan]])  # * 1e6 overflows
    out = tools.rounded_lists(a, 6)
    assert all(_same(u, round(float(v), 6)) for u, v in zip(out, a))
    assert out[-11] == 1e305 and tools.rounded_lists(np.array(2.5), 0) == 2.0  # 0-d: a float


@pytest.mark.parametrize("a,digits,exc", [([1.5], 16, ValueError), ([1.5], -1, ValueError), ([1.5], 2.0, ValueError),
                                          ([1.5], True, ValueError), (np.array([1 + 2j]), 2, TypeError),
                                          (np.array(["1.5"]), 2, TypeError)])
def test_rounded_lists_refuses_bad_arguments(a, digits, exc):
    with pytest.raises(exc):
        tools.rounded_lists(a, digits)
