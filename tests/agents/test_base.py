"""run_episode, the one episode loop, and the agent protocol (reset(info) / reset(), act, hindsight)."""
import json

import pytest

from fwgym.agents import reset_agent, run_episode
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


class _InfoReset:
    """Records what run_episode hands to reset; submits the hour-of-day plan of the episode's own facts."""

    def __init__(self):
        self.infos, self.calls = [], 0

    def reset(self, info):
        self.infos.append(info)

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}


class _PlainReset(_InfoReset):
    def reset(self):  # the old protocol: no argument
        self.infos.append("called")


def test_run_episode_passes_the_reset_info_to_a_reset_that_takes_it():
    env = FWBenchEnv("electricity", split="test")
    cid = "elec-PJM-2024-08-11-week_ahead"
    agent = _InfoReset()
    res = run_episode(env, agent, options={"case_id": cid})
    (info,) = agent.infos
    assert info["case_id"] == cid and info["episode"]["case"]["case_id"] == cid and res.record["valid"]
    assert info["episode"]["target"]["steps"] == [171, 194] and info["episode"]["max_calls"] == 12
    plain = _PlainReset()
    assert run_episode(env, plain, options={"case_id": cid}).record["S"] == res.record["S"]
    assert plain.infos == ["called"]
    no_reset = Looper()  # an agent without reset runs too
    assert run_episode(env, no_reset, seed=0).record["status"] == "call_limit_exceeded"


def test_reset_agent_dispatch():
    seen = []

    class Kw:
        def reset(self, info=None, *, strict=False):
            seen.append(("kw", info))

    class Star:
        def reset(self, *args):
            seen.append(("star", args))

    class KwOnly:
        def reset(self, *, info=None):  # keyword-only: not a positional parameter, called as reset()
            seen.append(("kwonly", info))

    for a in (Kw(), Star(), KwOnly()):
        reset_agent(a, {"x": 1})
    reset_agent(object(), {"x": 1})  # no reset: nothing happens
    assert seen == [("kw", {"x": 1}), ("star", ({"x": 1},)), ("kwonly", None)]
