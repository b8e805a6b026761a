import pytest

from fwgym.agents import run_episode
from fwgym.baselines import FixedMethodAgent, PerfectDemandOracle
from fwgym.envs.fwbench import FWBenchEnv


class Looper:
    def act(self, obs):
        return {"tool": "catalog"}


def test_run_episode_returns_record_with_policy_name():
    env = FWBenchEnv("electricity", split="test")
    res = run_episode(env, FixedMethodAgent("hour_of_day_empirical"), options={"case_id": "elec-PJM-2024-08-11-week_ahead"})
    assert res.record["policy"] == "hour_of_day_empirical" and res.steps == 2 and res.record["valid"]
    assert res.total_reward == pytest.approx(-res.record["S"])


def test_run_episode_with_looping_agent_ends_at_call_limit():
    env = FWBenchEnv("electricity", split="test")
    res = run_episode(env, Looper(), seed=0)
    assert res.steps == 13 and res.record["status"] == "call_limit_exceeded" and res.record["policy"] == "Looper"


def test_run_episode_max_steps_guard():
    env = FWBenchEnv("electricity", split="test", call_limit="error")
    with pytest.raises(RuntimeError, match="did not end"):
        run_episode(env, Looper(), seed=0, max_steps=30)


def test_oracle_gets_hindsight_only_through_run_episode():
    with pytest.raises(RuntimeError, match="hindsight"):
        PerfectDemandOracle().act({})
