"""fwgym.tools: the process-wide classical-plan cache (bounded LRU, hits equal recomputations), the forecast result."""
from collections import OrderedDict

import numpy as np
import pytest

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

    env = FWBenchEnv("electricity", text_observations=False)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    *_, info = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    res = info["tool_result"]["result"]
    q = env.episode.forecasts[res["forecast_id"]]["quantiles"]  # what plan and scoring use (unrounded)
    shown = np.array(res["quantiles"])
    assert shown.shape == q.shape == (50, 9) and type(res["quantiles"][0][0]) is float
    assert np.max(np.abs(shown - q)) <= 5e-7 + 1e-12 * np.max(q)
    assert all(v == round(v, 6) for row in res["quantiles"] for v in row)
