"""Gymnasium conventions of FWBenchEnv: ``render_mode="ansi"`` (a text view of the episode so far),
``metadata["render_fps"]``, and no ``check_env`` warning for any registered id."""
import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import fwgym  # noqa: F401  (registers the ids)
from fwgym.envs import ENV_IDS, RL_ENV_IDS
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.covering import target_quantiles


def test_metadata():
    assert FWBenchEnv.metadata == {"render_modes": ["ansi"], "render_fps": 4}
    with pytest.raises(ValueError, match="render_mode must be None or 'ansi'"):
        FWBenchEnv("cycle_hire", split="dev", render_mode="human")


def test_render_is_none_without_ansi():
    env = FWBenchEnv("cycle_hire", split="dev")
    env.reset(seed=0)
    assert env.render() is None
    assert FWBenchEnv("cycle_hire", split="dev", render_mode="ansi").render() is None  # before reset


def test_ansi_view_of_a_decision_episode():
    env = FWBenchEnv("cycle_hire", split="test", render_mode="ansi")
    cid = env.cases[0].case_id
    env.reset(options={"case_id": cid})
    case = env.episode.case
    text = env.render()
    assert text.endswith("\n") and text.splitlines()[0] == f"FWBench episode {cid}"
    assert "calls 0/12 (12 left); credits 0/113,726 (113,726 left)" in text and "tool calls: none yet" in text
    assert "answer: none submitted yet" in text and "episode over" not in text
    assert f"scale {case.scale:.6g} departures/hour; task decision" in text
    env.step({"tool": "catalog"})
    env.step({"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336, "horizon": 240}})
    env.step("not json")
    _, _, _, _, info = env.step({"tool": "plan", "args": {"forecast_id": "f1"}})
    credits = env.episode.spent
    mid = env.render()
    assert "episode over" not in mid and f"calls 4/12 (8 left); credits {credits:,}/113,726" in mid
    lines = mid.splitlines()
    start = lines.index("tool calls:")
    assert lines[start + 1:start + 5] == [
        "   1. catalog -> ok",
        f"   2. forecast(model=seasonal_empirical, context_steps=336, horizon=240) -> ok f1 [{credits:,} credits]",
        "   3. invalid -> error invalid_json",
        "   4. plan(forecast_id=f1) -> ok"]
    plan = info["tool_result"]["result"]["plan"]["decisions"]
    _, _, term, _, out = env.step({"tool": "submit", "args": {"decisions": plan}})
    assert term
    end = env.render().splitlines()
    assert end[-3] == "   5. submit(decisions=[8]) -> ok, ends the episode (submitted)"
    assert end[-2] == "submitted plan (levels b00..b07): " + " ".join(f"{x:.2f}" for x in out["levels"])
    assert end[-1] == (f"episode over: submitted, valid; loss {out['loss']:.5f}, floor {out['floor']:.5f}, "
                       f"R {out['R']:.4f}, S {out['S']:.4f}")
    # nothing hidden before the end: no floor or score while the episode runs
    assert "floor" not in mid and " S " not in mid


def test_ansi_view_of_a_forecast_episode_and_an_invalid_end():
    env = gym.make("FWBench-Electricity-Forecast-v0", split="test", render_mode="ansi").unwrapped
    env.reset(seed=3)
    assert f"scenario {env.episode.scenario.family}" in env.render()
    env.step({"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336, "horizon": 240}})
    q = target_quantiles(env.episode.case, env.episode.forecasts["f1"]["quantiles"])
    _, _, _, _, out = env.step({"tool": "submit", "args": {"quantiles": q.tolist()}})
    text = env.render().splitlines()
    assert text[-2] == (f"submitted forecast: quantiles 24x9, median {q[:, 4].min():.6g} .. {q[:, 4].max():.6g} "
                        "over the 24 target hours")
    assert text[-1] == f"episode over: submitted, valid; RCRPS {out['loss']:.5f}, R {out['R']:.4f}, S {out['S']:.4f}"
    env = FWBenchEnv("cycle_hire", split="dev", render_mode="ansi", max_calls=1)
    env.reset(seed=0)
    env.step({"tool": "catalog"})
    env.step({"tool": "\x1b[31mred", "args": {}})
    text = env.render()
    assert "\x1b" not in text and "?[31mred -> not run, ends the episode (call_limit_exceeded)" in text
    assert "answer: none accepted" in text and "episode over: call_limit_exceeded, invalid (call 2 exceeds" in text


@pytest.mark.parametrize("env_id", list(ENV_IDS) + list(RL_ENV_IDS))
def test_check_env_has_no_warning(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id, disable_env_checker=True)
        check_env(env.unwrapped)  # also makes the id with render_mode="ansi" and renders it
        env.close()
    assert [str(w.message) for w in caught] == []


def test_render_through_gym_make_and_observations_unchanged():
    a = gym.make("FWBench-CycleHire-v0", render_mode="ansi")
    b = gym.make("FWBench-CycleHire-v0")
    oa, _ = a.reset(seed=5)
    ob, _ = b.reset(seed=5)
    assert isinstance(a.render(), str) and b.render() is None
    for act in ({"tool": "catalog"}, {"tool": "classical_plan", "args": {"method": "weekday_empirical"}}):
        ra, rb = a.step(act), b.step(act)
        assert ra[0]["last_result"] == rb[0]["last_result"] and ra[1:4] == rb[1:4]
        np.testing.assert_array_equal(ra[0]["history"], rb[0]["history"])
        assert json.dumps(ra[4], default=str) == json.dumps(rb[4], default=str)
