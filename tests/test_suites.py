"""The Suite spec (fwgym.suites): one definition per suite fact, read by ids, runner, baselines, scorer,
dense reward and displays."""
import math

import numpy as np
import pytest

from fwgym.baselines.registry import STATISTICAL_MODELS, TSFM_POLICIES, suite_policies
from fwgym.core.metrics import DECISION_METRIC, FORECAST_METRIC, RCRPS_CAP, Metric, task_metric
from fwgym.core.scoring import BUDGET, case_score
from fwgym.envs import ENV_IDS
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import REFERENCE_POLICIES, SUITES
from fwgym.evaluation.results import infer_suite
from fwgym.suites import SUITE_NAMES, Suite, get_suite, suite_metric
from fwgym.suites import SUITES as SPECS

CLASSICAL = ["weekday_empirical", "weekly_repeat", "all_hour_empirical", "calendar_residual", "recent_week_empirical",
             "recent_day_empirical", "hour_of_day_empirical", "level_adjusted_weekly"]


def test_the_three_suites_and_their_env_settings():
    assert SUITE_NAMES == ("decision", "context", "forecast")
    assert {n: s.env_kwargs for n, s in SPECS.items()} == {
        "decision": {}, "context": {"scenarios": True}, "forecast": {"scenarios": True, "task": "forecast"}}
    assert dict(SUITES) == {n: s.env_kwargs for n, s in SPECS.items()}  # the runner's view is derived
    assert [s.task for s in SPECS.values()] == ["decision", "decision", "forecast"]
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        get_suite("nope")
    with pytest.raises(TypeError):
        SPECS["x"] = SPECS["decision"]  # read-only


def test_env_ids_are_each_suite_on_each_domain():
    expected = {}
    for suite, suffix in (("decision", ""), ("context", "-Context"), ("forecast", "-Forecast")):
        for d, name in (("electricity", "Electricity"), ("cycle_hire", "CycleHire")):
            expected[f"FWBench-{name}{suffix}-v0"] = {"domain": d, "split": "train", **get_suite(suite).env_kwargs}
    expected["FWBench-v0"] = {"domain": ("electricity", "cycle_hire"), "split": "train"}
    assert ENV_IDS == expected
    assert list(ENV_IDS)[:3] == ["FWBench-Electricity-v0", "FWBench-CycleHire-v0", "FWBench-v0"]


def test_default_policies_resolve_the_groups():
    selectors = ["backtest_selector_4", "backtest_selector_8", "lead_matched_selector"]
    decision = CLASSICAL + ["seasonal_empirical"] + selectors + ["free_menu_oracle", "catalog_oracle", "perfect_demand"]
    assert suite_policies("decision", include_tsfm=False) == (decision, {})
    ext = CLASSICAL + ["seasonal_empirical", *STATISTICAL_MODELS] + selectors + [
        "free_menu_oracle", "catalog_oracle", "catalog_oracle_extended", "perfect_demand"]
    assert suite_policies("decision", include_tsfm=False, pool="extended")[0] == ext
    context = CLASSICAL + ["seasonal_empirical"] + selectors + [
        "context_hour_of_day_empirical", "hour_of_day_empirical_samples", "perfect_demand"]
    assert suite_policies("context", include_tsfm=False)[0] == context
    assert suite_policies("forecast")[0] == ["context_hour_of_day_empirical", "hour_of_day_empirical_samples"]
    with_tsfm, skipped = suite_policies("decision", include_tsfm=True)
    assert [p for p in with_tsfm if p in TSFM_POLICIES] == [p for p in TSFM_POLICIES if p not in skipped]
    assert with_tsfm.index("backtest_selector_4") == len(CLASSICAL) + 1 + len(TSFM_POLICIES) - len(skipped)
    assert REFERENCE_POLICIES == ("hour_of_day_empirical", "hour_of_day_empirical_samples")
    for s in SPECS.values():  # a suite's reference is among its defaults
        assert s.reference_policy in suite_policies(s.name, include_tsfm=False)[0]


def test_metric_formulas_and_weights():
    assert suite_metric("decision").formula == "S = (R + c/B)/2, R = (loss − F)/σ"
    assert suite_metric("forecast").formula == "S = R + 0·c/B, R = min(RCRPS, 5)"
    assert suite_metric("forecast", 0.25).formula == "S = R + 0.25·c/B, R = min(RCRPS, 5)"
    assert suite_metric("context", 0.25).credit_weight == 0.5  # the decision suites' weight is the protocol's
    m = suite_metric("context")
    assert (m.suite, m.task, m.r_weight, m.credit_weight, m.y_field, m.has_floor) == (
        "context", "decision", 0.5, 0.5, "loss", True)
    assert "scenario-transformed" in m.loss_label and "realised" in suite_metric("decision").loss_label
    assert isinstance(m, Metric) and get_suite("forecast").metric().R_name == f"min(RCRPS, {RCRPS_CAP:g})"
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="credit_weight"):
            task_metric("forecast", bad)
    with pytest.raises(ValueError, match="task"):
        task_metric("answer")
    with pytest.raises(ValueError, match="task"):
        Suite("x", "x", "x", "answer", False, "", "p", (), "x").metric()


def test_metric_score_is_the_protocols_formula_bit_for_bit():
    rng = np.random.default_rng(3)
    for _ in range(2000):
        r, c, b = float(rng.exponential(2.0)), int(rng.integers(0, BUDGET)), int(rng.choice([BUDGET, 500, 1]))
        w = float(rng.choice([0.0, 0.1, 0.5, 1.0, 3.0]))
        assert DECISION_METRIC.score(r, c, b) == 0.5 * (r + c / b)  # FWBench protocol §5, written as there
        assert task_metric("forecast", w).score(r, c, b) == r + w * c / b
        assert -DECISION_METRIC.credit_cost(c, b) == -0.5 * c / b
    loss, floor, sigma = 0.1, 0.04, 0.05
    assert case_score(loss, floor, 11_372.6, sigma) == ((loss - floor) / sigma, 0.5 * ((loss - floor) / sigma + 0.1))
    assert FORECAST_METRIC.credit_weight == 0.0 and FORECAST_METRIC.score(1.5, 1000, BUDGET) == 1.5


@pytest.mark.parametrize("suite,w", [("decision", None), ("forecast", 0.5)])
def test_dense_rewards_pay_the_metrics_parts_and_sum_to_minus_s(suite, w):
    kw = dict(get_suite(suite).env_kwargs, **({"credit_weight": w} if w is not None else {}))
    env = FWBenchEnv("cycle_hire", split="dev", reward="dense", **kw)
    metric = get_suite(suite).metric(w)
    assert env.metric == task_metric(get_suite(suite).task, w)
    env.reset(seed=0)
    _, r1, *_ = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    spent = env.episode.spent
    assert spent > 0 and r1 == -metric.credit_cost(spent, BUDGET)
    if suite == "forecast":
        answer = {"tool": "submit", "args": {"quantiles": [[float(q) for q in range(1, 10)]] * 24}}
    else:
        _, r0, _, _, info = env.step({"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}})
        assert r0 == 0.0  # a free tool
        answer = {"tool": "submit", "args": {"decisions": info["tool_result"]["result"]["plan"]["decisions"]}}
    _, r2, term, _, info = env.step(answer)
    assert info["valid"]
    assert term and r2 == -(metric.r_weight * info["R"])
    assert r1 + r2 == pytest.approx(-info["S"], rel=1e-12, abs=1e-15)
    assert info["S"] == metric.score(info["R"], spent, BUDGET)


def test_records_without_a_manifest_read_as_the_suite_their_fields_show():
    assert infer_suite([{"rcrps": 0.1, "scenario": "heavy_rain"}]) == "forecast"
    assert infer_suite([{"scenario": "heavy_rain"}]) == "context"
    assert infer_suite([{"scenario": None}]) == "decision"
