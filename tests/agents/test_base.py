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


# --- failures of the agent: harness errors are never scores, agent bugs are the agent's failure ------------------

CID = "elec-PJM-2024-08-11-week_ahead"


class _Failing(_InfoReset):
    """Plans, then fails on its second act (or in reset) with ``exc``; counts its stats calls."""

    name = "failing"

    def __init__(self, exc, where="act", stats=None):
        super().__init__()
        self.exc, self.where, self.stats, self.ended = exc, where, stats, []

    def reset(self, info):
        super().reset(info)
        if self.where == "reset":
            raise self.exc

    def act(self, obs):
        if self.calls == 1:
            raise self.exc
        return super().act(obs)

    def episode_stats(self):
        return self.stats

    def end_episode(self, record):
        self.ended.append(record)


def test_harness_error_abandons_the_episode_unscored():
    from fwgym.errors import HarnessError

    env = FWBenchEnv("electricity", split="test")
    for where in ("act", "reset"):
        agent = _Failing(HarnessError("connection refused by 127.0.0.1:9", kind="transport"), where)
        res = run_episode(env, agent, options={"case_id": CID}, episode_id="1:failing:" + CID)
        rec = res.record
        assert rec["status"] == "harness_error" and rec["scored"] is False and rec["harness_kind"] == "transport"
        assert rec["reason"] == "connection refused by 127.0.0.1:9" and not rec["valid"]
        assert rec["loss"] is rec["floor"] is rec["R"] is rec["S"] is None and rec["levels"] is None
        assert rec["case_id"] == CID and rec["cohort"] == "electricity-august" and rec["episode_id"] == "1:failing:" + CID
        assert rec["calls"] == (1 if where == "act" else 0) and rec["credits"] == 0
        assert agent.ended == [rec] and agent.infos[-1]["episode_id"] == "1:failing:" + CID
        with pytest.raises(RuntimeError, match="episode has ended"):  # the env episode is abandoned
            env.step({"tool": "catalog"})
    from fwgym.evaluation.records import check_record

    check_record(rec)


def test_an_agent_exception_is_the_agents_failure_and_keyboard_interrupt_propagates():
    env = FWBenchEnv("electricity", split="test")
    for where in ("act", "reset"):
        with pytest.raises(ZeroDivisionError):  # the default: an agent's exception propagates (fwgym's own policies)
            run_episode(env, _Failing(ZeroDivisionError("division by zero"), where), options={"case_id": CID})
        agent = _Failing(ZeroDivisionError("division by zero"), where)
        rec = run_episode(env, agent, options={"case_id": CID}, agent_errors="score").record
        assert rec["status"] == "abstained" and rec["scored"] is True and not rec["valid"]
        assert rec["reason"] == "agent_error: ZeroDivisionError: division by zero"
        assert rec["S"] > 0 and rec["calls"] == (1 if where == "act" else 0)  # scored invalid, via the env
    with pytest.raises(KeyboardInterrupt):
        run_episode(env, _Failing(KeyboardInterrupt(), "act"), options={"case_id": CID}, agent_errors="score")
    with pytest.raises(ValueError, match="agent_errors"):
        run_episode(env, _InfoReset(), options={"case_id": CID}, agent_errors="ignore")
    # the env is usable again after a reset
    assert run_episode(env, _InfoReset(), options={"case_id": CID}).record["valid"]


def test_episode_stats_are_merged_and_validated():
    env = FWBenchEnv("electricity", split="test")

    class WithStats(_InfoReset):
        def __init__(self, stats):
            super().__init__()
            self.stats = stats

        def episode_stats(self):
            if isinstance(self.stats, Exception):
                raise self.stats
            return self.stats

    good = {"prompt_tokens": 1200, "completion_tokens": 35, "model_turns": 2, "requests": 3,
            "request_latency_s": [0.25, 0.5, 0.125], "wall_s": 1.5, "other": "ignored"}
    rec = run_episode(env, WithStats(good), options={"case_id": CID}).record
    assert {k: rec[k] for k in good if k != "other"} == {k: v for k, v in good.items() if k != "other"}
    assert "other" not in rec and rec["valid"]
    bad = {"prompt_tokens": -1, "completion_tokens": True, "model_turns": 2.5, "requests": "3",
           "request_latency_s": [0.1, float("nan")], "wall_s": float("inf")}
    rec = run_episode(env, WithStats(bad), options={"case_id": CID}).record
    assert all(rec[k] is None for k in bad)
    with pytest.warns(RuntimeWarning, match="episode_stats"):
        rec = run_episode(env, WithStats(ValueError("oops")), options={"case_id": CID}).record
    assert rec["valid"] and rec["prompt_tokens"] is None
