"""RecordToolCalls: every step of an episode with its action and the env's answer, reset per episode."""
import json

import gymnasium as gym
import pytest

from fwgym.agents import run_episode
from fwgym.baselines import make_policy
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.wrappers import RecordToolCalls
from fwgym.evaluation.records import stable_record  # noqa: E402


def test_records_each_step_and_changes_nothing():
    case_id = FWBenchEnv("electricity", split="dev").cases[3].case_id
    plain = run_episode(FWBenchEnv("electricity", split="dev"), make_policy("backtest_selector_4"),
                        options={"case_id": case_id})
    env = RecordToolCalls(FWBenchEnv("electricity", split="dev"))
    assert isinstance(env, gym.Wrapper)
    rec = run_episode(env, make_policy("backtest_selector_4"), options={"case_id": case_id}, keep_actions=True)
    assert stable_record(rec.record) == stable_record(plain.record) and rec.total_reward == plain.total_reward
    assert [c["action"] for c in env.calls] == rec.actions and len(env.calls) == rec.steps == 2
    first, last = env.calls
    assert first["action"]["tool"] == "classical_plan" and json.loads(first["result"])["ok"]
    assert first["calls_left"] == 11 and first["info"]["calls"] == 1 and first["info"]["tool_result"]["ok"]
    assert last["action"]["tool"] == "submit" and last["info"]["S"] == rec.record["S"] and last["calls_left"] == 11
    run_episode(env, make_policy("weekday_empirical"), seed=1)
    assert len(env.calls) == 2 and env.calls[0]["action"]["args"]["method"] == "weekday_empirical"  # reset: a new record


def test_string_actions_errors_and_numeric_envs():
    env = RecordToolCalls(FWBenchEnv("electricity", split="dev", text_observations=False))
    env.reset(seed=0)
    env.step('{"tool": "history", "args": {"last": 2}}')
    env.step("not json")
    assert [c["action"] for c in env.calls] == ['{"tool": "history", "args": {"last": 2}}', "not json"]
    assert [c["result"] for c in env.calls] == ["", ""]  # no text rendered: the results are in info
    assert env.calls[0]["info"]["tool_result"]["ok"] and not env.calls[1]["info"]["tool_result"]["ok"]
    assert [c["calls_left"] for c in env.calls] == [11, 10]
    env.calls[0]["info"]["calls"] = -1  # the record holds copies of info
    with pytest.raises(RuntimeError):
        RecordToolCalls(FWBenchEnv("electricity", split="dev")).step({"tool": "catalog"})  # no reset: the env refuses
