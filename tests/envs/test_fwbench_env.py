"""FWBenchEnv: registration, env checker, seeding, episode rules, rewards, leakage, fuzzing."""
import json
import re
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fwgym
from fwgym.core.contract import GRID
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.tools import REGISTRY, result_json

CASE = "elec-ISNE-2024-07-19-day_ahead"


def hand_loss(levels, target, scale, weights):
    a = np.repeat(np.asarray(levels), 3)
    z = np.asarray(target) / scale
    return float(np.mean(0.3 * np.maximum(a - z, 0) + weights * np.maximum(z - a, 0)))


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv(domain="electricity", split="test")


@pytest.mark.parametrize("env_id", sorted(fwgym.ENV_IDS))
def test_check_env_passes_for_every_registered_id(env_id):
    e = gym.make(env_id)
    check_env(e.unwrapped, skip_render_check=True)
    obs, info = e.reset(seed=3)
    assert e.observation_space.contains(obs)


def test_text_spaces_accept_printable_text(env):
    space = env.observation_space["context"]
    assert space.contains("Heat advisory: 3 p.m.-8 p.m.; demand +12 %\n{\"a\": [1, 2]}")
    assert env.action_space.contains('{"tool": "catalog", "args": {}}')


def test_seeded_reset_is_deterministic_and_seeds_differ():
    e1, e2 = FWBenchEnv("electricity", split="test"), FWBenchEnv("electricity", split="test")
    ids1 = [e1.reset(seed=s)[1]["case_id"] for s in range(20)]
    ids2 = [e2.reset(seed=s)[1]["case_id"] for s in range(20)]
    assert ids1 == ids2
    assert len(set(ids1)) > 10


def _rollout(seed):
    e = FWBenchEnv(("electricity", "cycle_hire"), split="test")
    obs, info = e.reset(seed=seed)
    trace = [info["case_id"], obs["history"].tobytes(), obs["context"]]
    for action in ({"tool": "catalog"}, {"tool": "history", "args": {"last": 24}},
                   {"tool": "classical_plan", "args": {"method": "calendar_residual"}}):
        obs, r, term, trunc, info = e.step(action)
        trace.append(obs["last_result"])
    plan = json.loads(obs["last_result"])["result"]["plan"]
    obs, r, term, trunc, info = e.step({"tool": "submit", "args": {"decisions": plan["decisions"]}})
    trace += [r, info["S"], info["loss"]]
    return trace


def test_seeded_rollout_identical_twice():
    assert _rollout(11) == _rollout(11)


def test_case_id_option_and_unknown_id(env):
    obs, info = env.reset(options={"case_id": CASE})
    assert info["case_id"] == CASE
    with pytest.raises(ValueError, match="malformed case id"):
        env.reset(options={"case_id": "nonsense"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"case": CASE})


def test_case_ids_outside_the_pool_are_refused_naming_the_pool_and_their_split():
    with pytest.raises(ValueError, match=r"pool \(split 'dev', domain\(s\) \['electricity'\]\).*"
                                         r"'elec-AECI-2024-08-03-day_ahead' is a case of split 'test'"):
        FWBenchEnv(domain="electricity", split="dev", case_ids=["elec-AECI-2024-08-03-day_ahead"])
    with pytest.raises(ValueError, match="not in any split of electricity"):
        FWBenchEnv(domain="electricity", split="dev", case_ids=["elec-PJM-2025-03-01-day_ahead"])


def test_observation_contents(env):
    obs, info = env.reset(options={"case_id": CASE})
    case = env.episode.case
    assert obs["history"].shape == (336,) and obs["history"].dtype == np.float32
    np.testing.assert_allclose(obs["history"], case.history.astype(np.float32))
    assert obs["last_result"] == ""
    assert obs["calls_left"] == 12 and obs["budget_left"][0] == 113726
    assert "ISO New England" in obs["context"] and "2024-07-19" in obs["context"]
    facts = info.pop("episode")  # the episode's public facts: tests/envs/test_reset_info.py
    assert info == {"case_id": CASE, "calls": 0, "credits": 0, "budget_left": 113726} and facts["case"]["case_id"] == CASE


def test_fixed_plan_scored_against_hand_loss(env):
    obs, _ = env.reset(options={"case_id": CASE})
    hs = env.hindsight()
    case = env.episode.case
    obs, r, term, trunc, info = env.step({"tool": "classical_plan", "args": {"method": "weekday_empirical"}})
    assert not term and r == 0.0 and info["calls"] == 1
    plan = json.loads(obs["last_result"])["result"]["plan"]
    obs, r, term, trunc, info = env.step({"tool": "submit", "args": {"decisions": plan["decisions"]}})
    assert term and not trunc and info["valid"] and info["status"] == "submitted"
    assert info["calls"] == 1  # submit does not count
    expected = hand_loss(plan["levels"], hs["target"], case.scale, case.shortage)
    assert info["loss"] == pytest.approx(expected, abs=1e-12)
    assert info["floor"] == pytest.approx(hs["floor"], abs=1e-15)
    assert info["floor"] <= info["loss"]
    sigma = env.sigma["electricity"]
    assert info["R"] == pytest.approx((expected - hs["floor"]) / sigma)
    assert info["S"] == pytest.approx(0.5 * info["R"])
    assert r == pytest.approx(-info["S"])


def test_all_ones_plan_on_flat_demand_loss_by_hand(env):
    # submit levels 1.0 everywhere: loss computed by hand from the realised target
    env.reset(options={"case_id": CASE})
    hs = env.hindsight()
    case = env.episode.case
    _, r, term, _, info = env.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert info["loss"] == pytest.approx(hand_loss([1.0] * 8, hs["target"], case.scale, case.shortage))


@pytest.mark.parametrize("bad", [{"tool": "submit", "args": {}}, {"tool": "submit", "args": {"plan": 1}},
                                 {"tool": "abstain", "args": {"reason": 5}}])
def test_malformed_submits_are_calls_and_the_thirteenth_ends_the_episode(env, bad):
    env.reset(options={"case_id": CASE})
    for _ in range(11):
        env.step({"tool": "catalog"})
    obs, _, term, _, info = env.step(bad)  # call 12: an error result that counts
    assert not term and info["calls"] == 12 and info["tool_result"]["error"]["code"] == "invalid_arguments"
    obs, _, term, _, info = env.step(bad)  # call 13: beyond the limit
    assert term and not info["valid"] and info["status"] == "call_limit_exceeded" and info["calls"] == 13
    assert info["tool_result"]["error"]["code"] == "call_limit_exceeded"


def test_malformed_submits_at_the_limit_in_error_mode_are_refused_and_not_counted():
    e = FWBenchEnv("electricity", split="test", call_limit="error")
    e.reset(options={"case_id": CASE})
    for _ in range(12):
        e.step({"tool": "catalog"})
    for _ in range(3):
        _, _, term, _, info = e.step({"tool": "submit", "args": {}})
        assert not term and info["calls"] == 12 and info["credits"] == 0
    _, _, term, _, info = e.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"] and info["calls"] == 12


def test_history_outside_the_window_and_huge_numbers_are_clear_errors(env):
    env.reset(options={"case_id": CASE})
    for args, code in [({"start": "9999-12-31T23:00:00+14:00"}, "out_of_range"), ({"end": "1971-01-01T00:00:00Z"}, "out_of_range"),
                       ({"last": 10**5000}, "invalid_arguments"), ({"last": [10**5000]}, "invalid_arguments")]:
        _, _, term, _, info = env.step({"tool": "history", "args": args})
        assert not term and info["tool_result"]["error"]["code"] == code, args
    _, _, _, _, info = env.step({"tool": "classical_plan", "args": {"method": 10**5000}})
    assert info["tool_result"]["error"]["code"] == "invalid_arguments"
    assert "cannot be displayed" in info["tool_result"]["error"]["message"]


def test_echoed_agent_names_are_capped_so_last_result_stays_valid_json(env):
    env.reset(options={"case_id": CASE})
    long_key = "\u00e9" * 99_000  # 6 characters each once escaped to ASCII
    actions = [json.dumps({"tool": "catalog", "args": {long_key: 1}}, ensure_ascii=False),
               {"tool": "catalog", "x" * 300_000: 1},
               {"tool": "catalog", "args": {f"k{i}" * 1000: i for i in range(50)}}]
    for a in actions:
        obs, _, term, _, info = env.step(a)
        assert not term and len(obs["last_result"]) < 3000
        assert json.loads(obs["last_result"]) == info["tool_result"]
        assert info["tool_result"]["error"]["code"] in ("invalid_arguments", "invalid_action")


def test_the_env_counts_calls_by_the_registry_flag(monkeypatch):
    # the env counts nothing itself: flipping Tool.counts_as_call in the registry changes its count
    monkeypatch.setitem(REGISTRY, "history", replace(REGISTRY["history"], counts_as_call=False))
    env = FWBenchEnv("electricity", split="test", text_observations=False)
    env.reset(options={"case_id": CASE})
    for _ in range(3):
        *_, info = env.step({"tool": "history", "args": {"last": 2}})
    *_, info = env.step({"tool": "catalog"})
    assert info["calls"] == 1 and info["tool_result"]["result"]["calls"] == {"limit": 12, "used": 0, "remaining": 12}


def test_thirteenth_call_ends_episode_invalid(env):
    env.reset(options={"case_id": CASE})
    hs = env.hindsight()
    case = env.episode.case
    for i in range(12):
        obs, r, term, trunc, info = env.step({"tool": "catalog"})
        assert not term and info["calls"] == i + 1 and obs["calls_left"] == 11 - i
    obs, r, term, trunc, info = env.step({"tool": "catalog"})
    assert term and not info["valid"] and info["status"] == "call_limit_exceeded" and info["calls"] == 13
    z = hs["target"] / case.scale
    worst = np.mean([max(0.3 * max(g - zh, 0) + w * max(zh - g, 0) for g in GRID) for zh, w in zip(z, case.shortage)])
    assert info["loss"] == pytest.approx(worst + 1.0)
    assert r == pytest.approx(-info["S"])
    with pytest.raises(RuntimeError):
        env.step({"tool": "catalog"})


def test_submit_after_twelve_calls_is_still_accepted(env):
    env.reset(options={"case_id": CASE})
    for _ in range(12):
        env.step("not json")
    obs, r, term, trunc, info = env.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"] and info["calls"] == 12


def test_soft_call_limit_refuses_but_allows_submit():
    e = FWBenchEnv("electricity", split="test", call_limit="error", max_calls=2)
    e.reset(options={"case_id": CASE})
    e.step({"tool": "catalog"}), e.step({"tool": "catalog"})
    obs, r, term, trunc, info = e.step({"tool": "catalog"})
    assert not term and json.loads(obs["last_result"])["error"]["code"] == "call_limit" and info["calls"] == 2
    _, _, term, _, info = e.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"]


@pytest.mark.parametrize("levels,code", [
    ([1.0, 1.0, 1.0, 1.35, 1.35, 1.35, 1.35, 1.35], "ramp_violation"),
    ([1.0, 1.0, 1.0, 1.02, 1.0, 1.0, 1.0, 1.0], "off_grid"),
    ([1.0] * 7 + [float("nan")], "non_finite"),
])
def test_invalid_submission_terminates_with_reason(env, levels, code):
    env.reset(options={"case_id": CASE})
    _, r, term, _, info = env.step({"tool": "submit", "args": {"levels": levels}})
    assert term and not info["valid"] and info["status"] == "invalid_submission" and code in info["reason"]


def test_duplicate_decision_id_is_invalid(env):
    env.reset(options={"case_id": CASE})
    s = env.episode.case.scale
    decisions = [{"decision_id": f"b{i:02d}", "value": s} for i in range(7)] + [{"decision_id": "b00", "value": s}]
    _, _, term, _, info = env.step({"tool": "submit", "args": {"decisions": decisions}})
    assert term and not info["valid"] and "duplicate" in info["reason"]


def test_invalid_submission_error_mode_lets_agent_retry():
    e = FWBenchEnv("electricity", split="test", invalid_submission="error")
    e.reset(options={"case_id": CASE})
    obs, r, term, _, info = e.step({"tool": "submit", "args": {"levels": [1.0] * 7 + [1.02]}})
    assert not term and info["calls"] == 1 and json.loads(obs["last_result"])["error"]["code"] == "invalid_plan"
    _, _, term, _, info = e.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"]


@pytest.mark.parametrize("action,code", [
    ("{not json", "invalid_json"),
    ('{"tool": "catalog", "tool": "history"}', "invalid_json"),
    ('{"tool": "submit", "args": {"levels": [NaN, 1, 1, 1, 1, 1, 1, 1]}}', "invalid_json"),
    ("[1, 2]", "invalid_action"),
    ({"tool": "teleport"}, "unknown_tool"),
    ({"tool": "history", "args": {"last": 337}}, "invalid_arguments"),
    ({"tool": "history", "args": {"last": "10"}}, "invalid_arguments"),
    ({"tool": "history", "args": {"bogus": 1}}, "invalid_arguments"),
    ({"tool": "classical_plan", "args": {"method": "prophet"}}, "invalid_arguments"),
    ({"tool": "plan", "args": {"forecast_id": "f1"}}, "not_found"),
    ({"tool": "submit", "args": {}}, "invalid_arguments"),
    ({"tool": "catalog", "args": [1]}, "invalid_arguments"),
    ({"tool": 5}, "invalid_action"),
    ({"tool": "catalog", "extra": 1}, "invalid_action"),
])
def test_malformed_actions_return_errors_and_count(env, action, code):
    env.reset(options={"case_id": CASE})
    obs, r, term, trunc, info = env.step(action)
    res = json.loads(obs["last_result"])
    assert not term and r == 0.0 and info["calls"] == 1
    assert res["ok"] is False and res["error"]["code"] == code and res["error"]["message"]


def test_dense_reward_sums_to_minus_s():
    e = FWBenchEnv("cycle_hire", split="test", reward="dense")
    for seed in range(5):
        e.reset(seed=seed)
        total = 0.0
        for a in ({"tool": "catalog"}, {"tool": "classical_plan", "args": {"method": "weekly_repeat"}}):
            _, r, _, _, _ = e.step(a)
            total += r
        _, r, term, _, info = e.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
        total += r
        assert term and total == pytest.approx(-info["S"], abs=1e-12)


# ---------------------------------------------------------------------------------------------
# leakage probes


def _numbers(text):
    return {float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)}


ADVERSARIAL = [
    {"tool": "catalog"},
    {"tool": "history", "args": {"last": 336}},
    {"tool": "history", "args": {"last": 400}},
    {"tool": "history", "args": {"last": -5}},
    {"tool": "history", "args": {"start": "2024-07-17T00:00:00Z", "end": "2024-07-20T00:00:00Z"}},
    {"tool": "history", "args": {"start": "2024-07-16T20:00:00-04:00", "end": "2024-07-17T23:00:00+02:00"}},
    {"tool": "history", "args": {"start": "2024-07-17T22:00:00Z"}},
    {"tool": "history", "args": {"end": "2024-07-19T05:00:00Z"}},
    {"tool": "history", "args": {"start": "2024-07-17 21:00"}},
    {"tool": "history", "args": {"start": "1e309"}},
    {"tool": "history", "args": {"end": "2024-07-17T21:00:00Z"}},
]


@pytest.mark.parametrize("suite", [{}, {"scenarios": True}, {"scenarios": True, "task": "forecast"}],
                         ids=["decision", "context", "forecast"])
@pytest.mark.parametrize("case_id", [CASE, "elec-ERCO-2024-02-27-week_ahead", "cycle-14-2015-10-05-day_ahead"])
def test_no_value_at_or_after_cutoff_reaches_the_agent(case_id, suite):
    domain = "cycle_hire" if case_id.startswith("cycle") else "electricity"
    e = FWBenchEnv(domain, split="test", **suite)
    obs, info = e.reset(options={"case_id": case_id})
    case = e.episode.case
    future = case.series.window(case.as_of - 2, case.target_start + 24 - (case.as_of - 2))
    history_vals = set(np.asarray(case.history, dtype=float).tolist())
    scored = e.episode.target()  # the (scenario-transformed) target the episode is scored on
    secret = {float(v) for v in np.concatenate([future, scored]) if v not in history_vals and v != 0}
    assert secret, "probe needs values that are not also in the history"
    seen = _numbers(obs["context"])
    for a in ADVERSARIAL + [{"tool": "classical_plan", "args": {"method": m}} for m in fwgym.forecasters.CLASSICAL_METHODS]:
        obs, r, term, trunc, info = e.step(a)
        assert not term
        assert set(info) == {"case_id", "calls", "credits", "budget_left", "tool_result"}
        assert json.loads(result_json(info["tool_result"])) == json.loads(obs["last_result"])  # the same result
        seen |= _numbers(obs["last_result"])
        assert not any(np.isin(obs["history"], np.float32(list(secret))))
        if info["calls"] >= 11:
            break
    assert not (seen & secret), f"leaked values: {sorted(seen & secret)[:5]}"
    # history requests crossing the cut-off are refused, not clipped
    e.reset(options={"case_id": case_id})
    end = case.last_visible + 1
    from fwgym.core.series import hour_to_iso
    obs, *_ = e.step({"tool": "history", "args": {"end": hour_to_iso(end)}})
    assert json.loads(obs["last_result"])["error"]["code"] == "out_of_range"


# ---------------------------------------------------------------------------------------------
# fuzzing (a bounded run here; benchmarks/fuzz_actions.py runs 10,000+ actions)

from fwgym.testing import action_strategy, play_fuzzed


@pytest.fixture(scope="module")
def fuzz_envs():
    return [gym.make(i, disable_env_checker=True) for i in sorted(fwgym.ENV_IDS)]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seq=st.lists(action_strategy(), min_size=1, max_size=14), seed=st.integers(0, 10_000), which=st.integers(0, 100))
def test_fuzzed_actions_never_crash(fuzz_envs, seq, seed, which):
    play_fuzzed(fuzz_envs[which % len(fuzz_envs)], seq, seed)


def test_abstain_ends_the_episode_invalid_with_the_reason(env):
    env.reset(options={"case_id": CASE})
    env.step({"tool": "catalog"})
    _, r, term, _, info = env.step({"tool": "abstain", "args": {"reason": "context_exhausted: prompt too long"}})
    assert term and not info["valid"] and info["status"] == "abstained" and info["calls"] == 1
    assert info["reason"] == "context_exhausted: prompt too long" and r == pytest.approx(-info["S"])
    env.reset(options={"case_id": CASE})
    obs, _, term, _, info = env.step({"tool": "abstain", "args": {"reason": 5}})
    assert not term and info["calls"] == 1 and json.loads(obs["last_result"])["error"]["code"] == "invalid_arguments"


def test_text_observations_off_plays_the_same_episode_without_rendering():
    with_text = FWBenchEnv("electricity", split="test")
    without = FWBenchEnv("electricity", split="test", text_observations=False)
    o1, _ = with_text.reset(options={"case_id": CASE})
    o2, _ = without.reset(options={"case_id": CASE})
    assert o1["context"] and o2["context"] == "" and o2["last_result"] == ""
    assert without.observation_space.contains(o2)
    actions = [{"tool": "catalog"}, '{"tool": "history", "args": {"last": 3}}', "not json",
               {"tool": "classical_plan", "args": {"method": "weekday_empirical"}}]
    for a in actions:
        o1, r1, t1, _, i1 = with_text.step(a)
        o2, r2, t2, _, i2 = without.step(a)
        assert o2["context"] == o2["last_result"] == ""
        assert o1["last_result"] == result_json(i1["tool_result"]) == result_json(i2["tool_result"])
        assert (r1, t1) == (r2, t2) and np.array_equal(o1["history"], o2["history"])
    plan = i1["tool_result"]["result"]["plan"]["decisions"]
    _, r1, t1, _, i1 = with_text.step({"tool": "submit", "args": {"decisions": plan}})
    _, r2, t2, _, i2 = without.step({"tool": "submit", "args": {"decisions": plan}})
    assert t1 and t2 and r1 == r2 and i1["S"] == i2["S"] and i1["tool_result"] == i2["tool_result"]
    with pytest.raises(ValueError, match="text_observations"):
        FWBenchEnv("electricity", split="test", text_observations="no")


def test_each_episode_is_served_by_the_pool_forecasters_of_its_reset():
    from fwgym.forecasters import SeasonalEmpirical, get_forecaster

    mine = SeasonalEmpirical()
    e = FWBenchEnv("electricity", split="test", models=("seasonal_empirical", "chronos2"),
                   forecasters={"seasonal_empirical": mine})
    e.reset(options={"case_id": CASE})
    assert e.episode.forecasters == {"seasonal_empirical": mine, "chronos2": get_forecaster("chronos2")}
    assert e.episode.forecaster("seasonal_empirical") is mine


def test_a_forecast_step_crosses_at_most_12_modules():
    """One ``env.step`` of a ``forecast`` call whose forecaster really runs (issue 26: 16 modules and 55 module
    switches before the plan moved to the plan tools, the forecast cache next to its key, the argument checks into
    the action grammar and the pool's forecasters into the episode)."""
    import sys

    from fwgym.forecasters.cache import FORECAST_CACHE

    e = FWBenchEnv("electricity", split="test")
    action = json.dumps({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    e.reset(options={"case_id": "elec-ISNE-2024-07-19-week_ahead"})
    e.step(action)  # lazy imports and the case's arrays, on another case
    e.reset(options={"case_id": CASE})
    FORECAST_CACHE.clear()
    seq: list[str] = []

    def profile(frame, event, arg):
        name = frame.f_globals.get("__name__", "")
        if event == "call" and name.startswith("fwgym") and frame.f_code.co_name != "<module>":
            seq.append(name)

    sys.setprofile(profile)
    try:
        _, _, _, _, info = e.step(action)
    finally:
        sys.setprofile(None)
    assert info["tool_result"]["ok"] and "fwgym.forecasters.seasonal" in seq  # computed, not a cache hit
    switches = sum(a != b for a, b in zip(seq, seq[1:]))
    assert len(set(seq)) <= 12, (sorted(set(seq)), f"{switches} module switches (44 when this test was written)")
