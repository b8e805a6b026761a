"""Context and Forecast envs: scenario targets, RCRPS reward, invalid forecasts, forecast CRPS in info,
and the context-reading baseline beating the same method without the text."""
import json

import gymnasium as gym
import numpy as np
import pytest

from fwgym.agents import run_episode
from fwgym.baselines.context import ContextAwareAgent
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.core.scoring import crps_ensemble, rcrps, rcrps_alpha


def test_context_env_scores_the_transformed_target():
    env = gym.make("FWBench-CycleHire-Context-v0", split="test").unwrapped
    obs, _ = env.reset(options={"case_id": "cycle-14-2015-10-05-week_ahead"})
    hs = env.hindsight()
    sc = env.episode.scenario
    assert "Context: " + sc.text in obs["context"]
    np.testing.assert_array_equal(hs["target"], sc.apply(env.episode.case.target()))
    np.testing.assert_array_equal(hs["roi"], sc.roi)
    _, r, term, _, info = env.step({"tool": "submit", "args": {"decisions": hs["perfect_plan"].decisions()}})
    assert term and info["S"] == 0.0 and info["scenario"] == sc.family


def _quantiles(y):
    return [[float(v) * (0.8 + 0.05 * k) for k in range(9)] for v in y]


def test_forecast_env_rcrps_reward_by_hand():
    env = FWBenchEnv("electricity", split="test", scenarios=True, task="forecast", credit_weight=1.0)
    obs, _ = env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    sc = env.episode.scenario
    y = env.hindsight()["target"]
    q = np.array(_quantiles(env.episode.case.history[-24:]))
    obs, r, term, _, info = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    assert info["credits"] == 1027
    _, r, term, _, info = env.step({"tool": "submit", "args": {"quantiles": q.tolist()}})
    alpha = rcrps_alpha("electricity", "ISNE", sc.family)  # the announced event's family (as CiK's scaling)
    expected = rcrps(q.T, y, alpha, sc.roi, sc.lower, sc.upper, estimator="nrg")  # the 9 values as equal atoms
    assert term and info["valid"] and info["rcrps"] == pytest.approx(expected)
    assert r == pytest.approx(-(min(expected, 5.0) + 1027 / 113726))
    fc = info["forecast_crps"]["f1"]
    assert fc["model"] == "seasonal_empirical" and fc["crps"] > 0


def test_forecast_record_carries_the_rcrps_without_its_violation_term():
    # a station closure (upper bound 0 over the closed hours): history-shaped quantiles violate it, so the
    # record's rcrps is the CRPS term plus alpha * 10 * CRPS(v, 0), and rcrps_no_violation is the CRPS term alone
    from fwgym.context.scenarios import make_scenario

    env = FWBenchEnv("cycle_hire", split="test", scenarios=True, task="forecast")
    case = next(c for c in env.cases if make_scenario(c, 0).upper is not None)
    env.reset(options={"case_id": case.case_id})
    sc = env.episode.scenario
    y = env.hindsight()["target"]
    q = np.array(_quantiles(np.asarray(env.episode.case.history[-24:]) + 1.0))
    *_, info = env.step({"tool": "submit", "args": {"quantiles": q.tolist()}})
    alpha = rcrps_alpha("cycle_hire", case.series_id, sc.family)
    with_bounds = rcrps(q.T, y, alpha, sc.roi, sc.lower, sc.upper)
    without = rcrps(q.T, y, alpha, sc.roi)  # the same paths, no bounds
    assert info["rcrps"] == pytest.approx(with_bounds, rel=1e-12)
    assert info["rcrps_no_violation"] == pytest.approx(without, rel=1e-12)
    assert info["rcrps"] > info["rcrps_no_violation"] > 0


@pytest.mark.parametrize("args,reason", [
    ({"quantiles": [[1.0] * 9] * 23}, "bad_format"),
    ({"quantiles": [[1.0] * 8 + [float("nan")]] + [[1.0] * 9] * 23}, "non_finite"),
    ({"quantiles": [[2.0] + [1.0] * 8] * 24}, "non_monotone"),
    ({"samples": [[1.0] * 24]}, "bad_format"),
    ({"samples": [["1"] * 24] * 3}, "not_a_number"),
])
def test_invalid_forecast_gets_capped_worst_score(args, reason):
    env = FWBenchEnv("cycle_hire", split="test", scenarios=True, task="forecast")
    env.reset(seed=0)
    _, r, term, _, info = env.step({"tool": "submit", "args": args})
    assert term and not info["valid"] and reason in info["reason"] and r == -5.0 and info["S"] == 5.0


def test_invalid_forecast_error_mode_allows_retry():
    env = FWBenchEnv("cycle_hire", split="test", scenarios=True, task="forecast", invalid_submission="error")
    env.reset(seed=0)
    obs, r, term, _, info = env.step({"tool": "submit", "args": {"samples": [[1.0] * 24]}})
    assert not term and info["calls"] == 1
    _, r, term, _, info = env.step({"tool": "submit", "args": {"samples": [[1.0] * 24, [2.0] * 24]}})
    assert term and info["valid"]


def test_decision_env_info_reports_forecast_crps():
    env = FWBenchEnv("electricity", split="test")
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-week_ahead"})
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    q = np.array(json.loads(obs["last_result"])["result"]["quantiles"])[170:194]
    _, _, _, _, info = env.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    expected = crps_ensemble(q.T, env.hindsight()["target"], estimator="nrg").mean()  # as a quantile submission
    assert info["forecast_crps"]["f1"]["crps"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("env_id", ["FWBench-Electricity-Context-v0", "FWBench-CycleHire-Context-v0",
                                    "FWBench-Electricity-Forecast-v0", "FWBench-CycleHire-Forecast-v0"])
def test_context_reading_beats_the_same_method_without_text(env_id):
    # on dev notes (the writing the regex baseline was written from); on test it reads nothing (tests/context)
    env = gym.make(env_id, split="dev").unwrapped
    cases = [c for c in env.cases][::6]
    s = {}
    for agent in (ContextAwareAgent(True), ContextAwareAgent(False)):
        s[agent.use_context] = np.mean([run_episode(env, agent, options={"case_id": c.case_id}).record["S"] for c in cases])
    assert s[True] < s[False]


@pytest.mark.parametrize("credit_weight", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("reward", ["dense", "terminal"])
def test_forecast_env_rewards_sum_to_minus_s(reward, credit_weight):
    e = FWBenchEnv("electricity", split="test", task="forecast", scenarios=True, reward=reward, credit_weight=credit_weight)
    e.reset(seed=3)
    total = 0.0
    obs, r, *_ = e.step({"tool": "forecast", "args": {"model": "seasonal_empirical", "horizon": 336}})
    total += r
    assert r == (pytest.approx(-credit_weight * json.loads(obs["last_result"])["result"]["credits"] / 113_726)
                 if reward == "dense" else 0.0)
    q = json.loads(obs["last_result"])["result"]["quantiles"]
    lo, hi = e.episode.case.target_steps
    _, r, term, _, info = e.step({"tool": "submit", "args": {"quantiles": q[lo - 1 : hi]}})
    total += r
    assert term and info["valid"] and info["credits"] > 0
    assert total == pytest.approx(-info["S"], abs=1e-12)
    assert info["S"] == pytest.approx(info["R"] + credit_weight * info["credits"] / 113_726)
