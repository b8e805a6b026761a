"""fwgym.tools.planning: the process-wide classical-plan cache (bounded LRU, hits equal recomputations),
classical_plan / plan / evaluate_plan against hand computations."""
from collections import OrderedDict

import numpy as np
import pytest

from fwgym.core.cases import build_cases
from fwgym.core.contract import GRID
from fwgym.forecasters.classical import classical_distribution, method_samples
from fwgym.core.optimizer import QUANTILE_MASSES, optimal_plan
from fwgym.tools import parse_action, planning


def run(ep, tool, **args):
    return ep.apply(parse_action({"tool": tool, "args": args})).result


def expected_loss_by_hand(levels, samples, scale, shortage):
    """(1/24) sum_h mean_k [0.3 (a_h - y_hk/s)+ + w_h (y_hk/s - a_h)+] (samples equally weighted)."""
    a = np.repeat(np.asarray(levels), 3)[:, None]
    z = np.maximum(samples, 0) / scale
    return float(np.mean(np.mean(0.3 * np.maximum(a - z, 0) + shortage[:, None] * np.maximum(z - a, 0), axis=1)))


def test_plan_cache_is_a_bounded_lru_and_hits_equal_recomputation(monkeypatch):
    monkeypatch.setattr(planning, "_PLAN_CACHE", OrderedDict())
    monkeypatch.setattr(planning, "_PLAN_CACHE_MAX", 3)
    cases = build_cases("electricity", "test")[:5]
    first = planning.classical_plan_result(cases[0], "weekday_empirical")
    for c in cases[1:3]:
        planning.classical_plan_result(c, "weekday_empirical")
    assert planning.classical_plan_result(cases[0], "weekday_empirical") is first  # a hit, now most recent
    planning.classical_plan_result(cases[3], "weekday_empirical")                  # evicts cases[1]
    assert list(planning._PLAN_CACHE) == [(c.case_id, "weekday_empirical") for c in (cases[2], cases[0], cases[3])]
    c = cases[4]
    fresh = optimal_plan(classical_distribution("weekday_empirical", c.history, c.history_hours, c.target_hours),
                         c.scale, c.shortage)
    got = planning.classical_plan_result(c, "weekday_empirical")
    assert np.array_equal(got.plan.indices, fresh.plan.indices) and got.expected_loss == fresh.expected_loss
    assert np.array_equal(got.cost, fresh.cost) and len(planning._PLAN_CACHE) == 3


def test_cached_plans_are_read_only(monkeypatch):
    monkeypatch.setattr(planning, "_PLAN_CACHE", OrderedDict())
    case = build_cases("electricity", "test")[0]
    hit = planning.classical_plan_result(case, "weekly_repeat")
    for a in (hit.plan.indices, hit.plan.levels, hit.plan.values, hit.cost):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 0
    again = planning.classical_plan_result(case, "weekly_repeat")
    assert again is hit


def test_classical_plan_payload_and_expected_loss_by_hand(make_episode, case):
    ep = make_episode()
    res = run(ep, "classical_plan", method="recent_week_empirical")["result"]
    samples = method_samples("recent_week_empirical", case.history, case.history_hours, case.target_hours)
    levels = res["plan"]["levels"]
    assert res["credits"] == 0 and res["method"] == "recent_week_empirical" and res["plan"]["unit"] == "MW"
    assert all(lv in np.round(GRID, 2).tolist() for lv in levels)
    assert max(abs(a - b) for a, b in zip(levels, levels[1:])) <= 0.3 + 1e-9
    assert [d["value"] for d in res["plan"]["decisions"]] == pytest.approx([lv * case.scale for lv in levels], rel=1e-12)
    assert [d["decision_id"] for d in res["plan"]["decisions"]] == [f"b{i:02d}" for i in range(8)]
    assert res["expected_loss"] == pytest.approx(expected_loss_by_hand(levels, samples, case.scale, case.shortage), rel=1e-12)
    assert ep.plans["recent_week_empirical"] is planning.classical_plan_result(case, "recent_week_empirical")
    assert run(ep, "plan", method="recent_week_empirical")["result"] == res | {"method": "recent_week_empirical"}


def test_evaluate_plan_is_the_expected_loss_of_any_plan(make_episode, case):
    ep = make_episode()
    samples = method_samples("weekly_repeat", case.history, case.history_hours, case.target_hours)
    levels = [1.0, 1.1, 1.2, 1.3, 1.3, 1.2, 1.1, 1.0]
    res = run(ep, "evaluate_plan", method="weekly_repeat", levels=levels)["result"]
    assert res["expected_loss"] == pytest.approx(expected_loss_by_hand(levels, samples, case.scale, case.shortage), rel=1e-12)
    assert res["optimal_expected_loss"] <= res["expected_loss"]
    decisions = [{"decision_id": f"b{i:02d}", "value": lv * case.scale} for i, lv in enumerate(levels)]
    assert run(ep, "evaluate_plan", method="weekly_repeat", decisions=decisions)["result"] == res


def test_plan_on_a_bought_forecast_is_the_dp_on_its_target_rows(make_episode, case):
    ep = make_episode()
    fid = run(ep, "forecast", model="seasonal_empirical")["result"]["forecast_id"]
    q = ep.forecasts[fid]["quantiles"]
    want = optimal_plan(q[26:50], case.scale, case.shortage, QUANTILE_MASSES)  # target steps 27..50
    res = run(ep, "plan", forecast_id=fid)["result"]
    assert res["forecast_id"] == "f1" and res["expected_loss"] == want.expected_loss
    assert res["plan"]["levels"] == [round(float(x), 2) for x in want.plan.levels]
    ev = run(ep, "evaluate_plan", forecast_id=fid, levels=res["plan"]["levels"])["result"]
    assert ev == {"forecast_id": "f1", "expected_loss": want.expected_loss, "optimal_expected_loss": want.expected_loss}


@pytest.mark.parametrize("tool,args,code,needle", [
    ("plan", {"forecast_id": "f1", "method": "weekly_repeat"}, "invalid_arguments", "exactly one of"),
    ("plan", {}, "invalid_arguments", "exactly one of"),
    ("plan", {"forecast_id": 1}, "not_found", "no forecast with id 1"),
    ("plan", {"method": "prophet"}, "invalid_arguments", "'method' must be one of"),
    ("evaluate_plan", {"method": "weekly_repeat"}, "invalid_arguments", "'decisions' (physical capacities) or 'levels'"),
    ("evaluate_plan", {"method": "weekly_repeat", "levels": [1.0] * 7}, "invalid_plan", "bad_format: levels must be a list of 8"),
    ("classical_plan", {}, "invalid_arguments", "'method' must be one of"),
])
def test_planning_refusals(make_episode, tool, args, code, needle):
    err = run(make_episode(), tool, **args)["error"]
    assert err["code"] == code and needle in err["message"], err


def test_a_forecast_short_of_the_target_cannot_be_planned_on(make_episode):
    ep = make_episode()
    res = run(ep, "forecast", model="seasonal_empirical", horizon=49)["result"]
    assert res["covers_target"] is False and "plan" not in ep.forecasts["f1"] and ep.spent == 1027  # not planned yet
    err = run(ep, "plan", forecast_id="f1")["error"]
    assert err["code"] == "horizon_too_short" and "steps 1..49" in err["message"] and "27..50" in err["message"]
    assert "credits stay charged" in err["message"] and ep.forecasts["f1"]["plan"] is None and ep.spent == 1027


def test_a_bought_forecast_is_planned_once_when_a_tool_first_asks(make_episode, monkeypatch):
    from fwgym.tools import planning

    ep = make_episode()
    run(ep, "forecast", model="seasonal_empirical")
    assert "plan" not in ep.forecasts["f1"]  # buying plans nothing
    calls = []
    monkeypatch.setattr(planning, "plan_on_forecast", lambda case, q: calls.append(q) or optimal_plan(
        q[26:50], case.scale, case.shortage, QUANTILE_MASSES))
    first = run(ep, "plan", forecast_id="f1")["result"]
    again = run(ep, "evaluate_plan", forecast_id="f1", levels=first["plan"]["levels"])["result"]
    assert len(calls) == 1 and calls[0] is ep.forecasts["f1"]["quantiles"]
    assert again["expected_loss"] == again["optimal_expected_loss"] == first["expected_loss"]
