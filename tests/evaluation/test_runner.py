"""Running policies on cases (fwgym.evaluation.runner): case selection, workers and backends, the suites."""
import json

import pytest

from fwgym.evaluation import SUITES, evaluate, policy_label, select_cases
from fwgym.evaluation.records import stable_record


def test_select_cases_limit_keeps_every_cohort():
    sel = select_cases("test", ["electricity"], limit=12)
    assert len(sel) == 12
    months = {cid.split("-")[3] for _, cid in sel}
    assert months == {"02", "07", "08"}
    with pytest.raises(ValueError):
        select_cases("test", limit=0)
    with pytest.raises(ValueError, match="unknown domain"):
        select_cases("test", ["weather"])
    some = [cid for _, cid in sel[:3]]
    assert select_cases("test", case_ids=some) == [("electricity", c) for c in some]
    assert all(cid.endswith("week_ahead") for _, cid in select_cases("test", ["cycle_hire"], lead="week_ahead"))


def test_workers_give_identical_results():
    kw = dict(policies=["weekly_repeat", "perfect_demand"], split="test", limit=20, progress=False)
    one = evaluate(workers=1, **kw)
    two = evaluate(workers=2, **kw)
    assert json.dumps([stable_record(r) for r in one], sort_keys=True) == json.dumps(
        [stable_record(r) for r in two], sort_keys=True)  # all but the measured times and memory
    # sorted by policy order, then case order; one record per (policy, case)
    assert [r["policy"] for r in one] == ["weekly_repeat"] * 40 + ["perfect_demand"] * 40
    assert [r["case_id"] for r in one[:40]] == [c for _, c in select_cases("test", limit=20)]


def test_ray_backend_gives_identical_results():
    pytest.importorskip("ray")
    kw = dict(policies=["weekday_empirical", "perfect_demand"], split="test", limit=6, progress=False)
    local = evaluate(**kw)
    ray_recs = evaluate(backend="ray", workers=2, chunk_size=3, **kw)
    assert json.dumps([stable_record(r) for r in local], sort_keys=True) == json.dumps(
        [stable_record(r) for r in ray_recs], sort_keys=True)


def test_suites_run_through_evaluate():
    recs = evaluate(["context_hour_of_day_empirical", "hour_of_day_empirical_samples"], split="test", limit=8,
                    progress=False, env_kwargs=SUITES["forecast"], domains=["cycle_hire"])
    assert {r["policy"] for r in recs} == {"context_hour_of_day_empirical", "hour_of_day_empirical_samples"}
    assert all(r["valid"] and r["floor"] == 0.0 and 0 <= r["S"] <= 5 for r in recs)
    assert all(r["scenario"] is not None and r["rcrps"] == r["loss"] for r in recs)
    with pytest.raises(ValueError, match="submit capacity decisions"):
        evaluate(["weekday_empirical"], limit=1, progress=False, env_kwargs=SUITES["forecast"])
    with pytest.raises(ValueError, match="backend"):
        evaluate(["weekday_empirical"], limit=1, progress=False, backend="spark")


def test_policy_names_and_progress():
    class Named:
        name = "mine"

        def act(self, observation):
            return {"tool": "abstain", "args": {"reason": "test"}}

    assert policy_label("weekday_empirical") == "weekday_empirical" and policy_label(Named) == "mine"
    with pytest.raises(ValueError, match="repeat"):
        evaluate(["weekday_empirical", "weekday_empirical"], limit=1, progress=False)
    with pytest.raises(ValueError, match="unknown policy"):
        evaluate(["nobody"], limit=1, progress=False)
    seen = []
    recs = evaluate([Named], split="test", limit=2, progress=seen.append)
    assert sum(seen) == 4 and {(r["policy"], r["status"], r["valid"]) for r in recs} == {("mine", "abstained", False)}


def test_concurrency_gives_the_records_of_one_episode_at_a_time():
    # threads, each with its own env and agent, against one deterministic scripted endpoint: the same records
    from fwgym.agents.factory import LLMAgentFactory
    from fwgym.testing.chat_server import ScriptedChatServer, plan_then_answer

    with ScriptedChatServer(respond=plan_then_answer("weekday_empirical"), delay=0.02) as srv:
        factory = LLMAgentFactory(kind="openai", model="test-model", base_url=srv.url, timeout=10.0, max_retries=0)
        kw = dict(policies=[factory, "weekday_empirical"], split="test", limit=6, progress=False)
        one = evaluate(concurrency=1, **kw)
        many = evaluate(concurrency=5, **kw)
        episodes = [r for r in srv.posts() if "tools" in r["body"] and r["body"].get("max_tokens") != 1]  # (each run
        # also makes its preflight requests: the short completion and the one-token tools probe)
        assert len(episodes) == 2 * 2 * 12
    from fwgym.evaluation.records import VOLATILE_FIELDS

    timing = set(VOLATILE_FIELDS)  # measured times and memory are the only fields allowed to differ
    untimed = lambda recs: json.dumps([{k: v for k, v in r.items() if k not in timing} for r in recs], sort_keys=True)
    assert untimed(one) == untimed(many)
    agent = [r for r in one if r["policy"] == "openai:test-model"]
    base = {r["case_id"]: r["S"] for r in one if r["policy"] == "weekday_empirical"}
    assert len(agent) == 12 and all(r["valid"] and r["S"] == base[r["case_id"]] for r in agent)
    with pytest.raises(ValueError, match="concurrency"):
        evaluate(["weekday_empirical"], limit=1, progress=False, concurrency=0)
