"""Server faults against the real ``openai`` client and scripted OpenAI-compatible servers on 127.0.0.1 (issue 19):
each fault gives the documented outcome at the agent level — HarnessError with its kind (the run layer then ends the
episode as harness_error, never scored) or a counted model error — within bounded time, with no traceback and nothing
of the API key written anywhere; plus the preflight and the reply cache."""
import json
import pickle
import resource
import threading
import time

import pytest

pytest.importorskip("openai", reason="the llm extra (openai) is not installed")

from fwgym.agents import run_episode  # noqa: E402
from fwgym.agents.chat import HarnessError, read_traces  # noqa: E402
from fwgym.agents.chat.traces import REDACTED  # noqa: E402
from fwgym.agents.factory import LLMAgentFactory  # noqa: E402
from fwgym.agents.openai import OpenAIChatAgent, completion_problem  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, Step, completion  # noqa: E402
from fwgym.evaluation.records import VOLATILE_FIELDS  # noqa: E402

METHOD = "hour_of_day_empirical"


@pytest.fixture
def serve():
    servers = []

    def start(script, **kw):
        s = ScriptedChatServer(script, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def agent_for(server, **kw):
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 2)
    agent = OpenAIChatAgent("test-model", base_url=server.url if server else "http://127.0.0.1:9/v1", **kw)
    _AGENTS.append(agent)
    return agent


_AGENTS: list = []


@pytest.fixture(autouse=True)
def _close_agents():
    """Close every agent a test made with :func:`agent_for` (its HTTP client's pooled sockets)."""
    yield
    while _AGENTS:
        _AGENTS.pop().close()


def answer(decisions):
    return json.dumps({"decisions": decisions})


def _episode_raises(env, agent, case_id, kind):
    """Play the episode; the agent's HarnessError must end it as an unscored harness_error of ``kind``
    (run_episode catches it); returns the error as the record tells it (its kind and message)."""
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["status"] == "harness_error" and rec["scored"] is False and rec["S"] is None, rec["status"]
    assert rec["harness_kind"] == kind, (rec["harness_kind"], rec["reason"])
    return HarnessError(rec["reason"], rec["harness_kind"])


def test_no_server_is_a_transport_harness_error(env, case_id, tmp_path):
    agent = agent_for(None, max_retries=1, trace_out=tmp_path / "t.jsonl")
    t0 = time.perf_counter()
    exc = _episode_raises(env, agent, case_id, "transport")
    assert "cannot reach http://127.0.0.1:9/v1" in str(exc) and time.perf_counter() - t0 < 10
    (t,) = read_traces(tmp_path / "t.jsonl")
    assert t["agent_status"] == "harness_error" and t["harness_error"]["kind"] == "transport" and t["score"] is None


def test_429_retry_after_is_honoured_by_the_sdk(serve, env, case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    srv = serve([Step(status=429, headers={"Retry-After": "1.5"}), completion(answer(decisions))])
    agent = agent_for(srv)
    t0 = time.perf_counter()
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    waited = time.perf_counter() - t0
    assert rec["valid"] and rec["S"] == s_direct and len(srv.posts()) == 2
    assert waited >= 1.5  # the server's Retry-After, not fwgym's old 1-2-4 s loop or the SDK's 0.5 s backoff
    assert agent.trace["replies"][0]["requests"] == 2


def test_429_beyond_the_retries_or_the_deadline_is_rate_limited(serve, env, case_id):
    srv = serve([Step(status=429, headers={"Retry-After": "0.1"})] * 3)
    _episode_raises(env, agent_for(srv, max_retries=2), case_id, "rate_limited")
    assert len(srv.posts()) == 3
    srv = serve([Step(status=429, headers={"Retry-After": "60"})] * 3)
    t0 = time.perf_counter()
    _episode_raises(env, agent_for(srv, timeout=3.0), case_id, "rate_limited")
    assert len(srv.posts()) == 1 and time.perf_counter() - t0 < 2  # a wait past the deadline is not waited


@pytest.mark.parametrize("step", [Step(raw=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
                                  Step(raw=b'{"choices": [{"message": {"content": "x"'),
                                  Step({"choices": []}), Step({"object": "list", "data": []}),
                                  Step({"choices": [{"message": {"content": {"text": "x"}}}]})],
                         ids=["html", "truncated-json", "no-choices", "not-a-completion", "content-object"])
def test_unusable_200_bodies_are_bad_response(serve, env, case_id, step):
    srv = serve([step] * 3)
    exc = _episode_raises(env, agent_for(srv), case_id, "bad_response")
    assert len(srv.posts()) == 1 and "Traceback" not in str(exc)


def test_completion_problem_table():
    assert completion_problem(completion("x")) is None and completion_problem(completion(tool_calls=[("catalog", {})])) is None
    assert completion_problem([]) and completion_problem({"choices": [1]}) and completion_problem(
        {"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]})


def test_slow_drip_is_cut_at_the_deadline(serve, env, case_id, plan_and_score):
    """A server sending one byte every 0.4 s: httpx's per-read timeout never fires; the deadline does."""
    decisions, _ = plan_and_score
    srv = serve([Step(completion(answer(decisions)), drip=0.4)] * 3)
    t0 = time.perf_counter()
    exc = _episode_raises(env, agent_for(srv, timeout=2.0, max_retries=3), case_id, "timeout")
    wall = time.perf_counter() - t0
    assert 2.0 <= wall < 3.5, wall  # not (body bytes x 0.4 s) and not retried
    assert len(srv.posts()) == 1 and "within 2 s" in str(exc)


def test_a_stalled_body_is_cut_by_the_watchdog(serve, env, case_id):
    """Headers, then one byte and silence: the read started just before the deadline is interrupted at it."""
    srv = serve([Step(completion("x" * 50), drip=30.0)])
    t0 = time.perf_counter()
    _episode_raises(env, agent_for(srv, timeout=1.5), case_id, "timeout")
    assert time.perf_counter() - t0 < 2.5


def test_401_mid_run_keeps_the_finished_turns_in_the_trace(serve, env, case_id, tmp_path):
    srv = serve([completion(tool_calls=[("classical_plan", {"method": METHOD})]),
                 Step({"error": {"message": "Incorrect API key provided"}}, status=401)] + [completion("x")] * 3)
    agent = agent_for(srv, trace_out=tmp_path / "t.jsonl")
    _episode_raises(env, agent, case_id, "auth")
    assert len(srv.posts()) == 2  # never retried
    (t,) = read_traces(tmp_path / "t.jsonl")
    assert t["harness_error"]["kind"] == "auth" and "HTTP 401" in t["harness_error"]["message"]
    assert [s["action"]["tool"] for s in t["steps"]] == ["classical_plan"] and t["stats"]["model_turns"] == 1
    # the same agent plays the next episode normally
    srv2 = serve([completion(tool_calls=[("catalog", {})]), completion("nothing")] * 7)
    agent.base_url, agent._client = srv2.url, None
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["status"] == "call_limit_exceeded" and len(read_traces(tmp_path / "t.jsonl")) == 2


def test_huge_tool_argument_is_the_models_counted_error(serve, env, case_id, plan_and_score, tmp_path):
    """A 2,000,000-record submit (66 MB of arguments): refused before parsing as one counted call with a notice;
    the trace line stays bounded; the chat keeps "{}" in place of the arguments."""
    decisions, s_direct = plan_and_score
    huge = '{"decisions": [' + ",".join(['{"decision_id": "b00", "value": 1}'] * 2_000_000) + "]}"
    srv = serve([completion(tool_calls=[("submit", huge)]), completion(answer(decisions))])
    agent = agent_for(srv, timeout=60.0, trace_out=tmp_path / "t.jsonl")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert rec["valid"] and rec["S"] == s_direct and rec["calls"] == 1 and rec["tool_counts"]["invalid_reply"] == 1
    second = srv.posts()[1]["body"]["messages"]
    assert second[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "arguments_too_long" in second[3]["content"] and f"have {len(huge)} characters" in second[3]["content"]
    line = (tmp_path / "t.jsonl").read_text()
    assert len(line) < 200_000 and str(len(huge)) in line
    assert grew_mb < 1500, grew_mb  # was 5.8 GB before the bound (the body itself is ~80 MB)


def test_an_echoed_key_is_scrubbed_from_everything_written(serve, env, case_id, plan_and_score, tmp_path, monkeypatch):
    decisions, _ = plan_and_score
    secret = "sk-live-echo-0123456789abcdef"
    monkeypatch.setenv("FWGYM_ECHO_KEY", secret)
    srv = serve([completion(f"My key is {secret}. " + json.dumps({"tool": "abstain", "args": {"reason": secret}}))])
    agent = agent_for(srv, api_key_env="FWGYM_ECHO_KEY", trace_out=tmp_path / "t.jsonl", reply_cache=tmp_path / "cache")
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert srv.posts()[0]["headers"]["authorization"] == f"Bearer {secret}"
    assert rec["status"] == "abstained" and secret not in json.dumps(rec) and REDACTED in rec["reason"]
    srv2 = serve([Step({"error": {"message": f"invalid key {secret} for this org"}}, status=403)])
    agent2 = agent_for(srv2, api_key_env="FWGYM_ECHO_KEY", trace_out=tmp_path / "t.jsonl")
    exc = _episode_raises(env, agent2, case_id, "auth")
    assert secret not in str(exc) and REDACTED in str(exc)
    written = (tmp_path / "t.jsonl").read_text() + "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert secret not in written and written.count(REDACTED) >= 3
    assert secret not in pickle.dumps(agent).decode("latin-1") and secret not in repr(vars(agent))


def test_reply_cache_second_run_makes_no_request(serve, env, case_id, plan_and_score, tmp_path):
    decisions, s_direct = plan_and_score

    def plan_then_answer(body):
        if any(m["role"] == "tool" for m in body["messages"]):
            return completion(answer(decisions))
        return completion(tool_calls=[("classical_plan", {"method": METHOD})])

    srv = serve([plan_then_answer] * 4)
    cache = tmp_path / "replies"
    records = []
    for _ in range(2):
        agent = agent_for(srv, reply_cache=cache, temperature=0.7, seed=5)
        records.append(run_episode(env, agent, options={"case_id": case_id}).record)
    assert len(srv.posts()) == 2  # the first run's two turns; the second run: zero HTTP requests
    volatile = ("requests", *VOLATILE_FIELDS)  # the run's accounting (2 requests, then 0) and measured times
    assert ({k: v for k, v in records[0].items() if k not in volatile}
            == {k: v for k, v in records[1].items() if k not in volatile}) and records[0]["S"] == s_direct
    assert records[0]["requests"] == 2 and records[1]["requests"] == 0
    st = agent.episode_stats()
    assert st["requests"] == 0 and st["cached_replies"] == 2 and st["prompt_tokens"] == 200
    assert agent.cache.hits == 2 and len(agent.cache) == 2
    other = agent_for(srv, reply_cache=cache, temperature=0.8, seed=5)  # another setting: another key
    run_episode(env, other, options={"case_id": case_id})
    assert len(srv.posts()) == 4


def test_reply_cache_is_thread_safe(serve, env, case_id, plan_and_score, tmp_path):
    decisions, _ = plan_and_score
    srv = serve([completion(answer(decisions))] * 40)
    from fwgym.envs.fwbench import FWBenchEnv

    errors = []

    def one():
        try:
            e = FWBenchEnv("electricity", split="dev")
            run_episode(e, agent_for(srv, reply_cache=tmp_path / "c"), options={"case_id": case_id})
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(list((tmp_path / "c").rglob("*.json"))) == 1
    assert not list((tmp_path / "c").rglob("*.tmp"))


def test_the_shipped_scripted_server_counts_its_prompts_so_the_preflight_sees_the_tools(serve):
    """``python -m fwgym.testing.chat_server`` answers with ``counted_usage``: the prompt grows with the tools (no
    --describe-tools warning on fwgym's own server) and with a task's answer (measured, not estimated)."""
    from fwgym.testing.chat_server import counted_usage, play_every_suite

    srv = serve((), respond=counted_usage(play_every_suite()))
    facts = LLMAgentFactory(kind="openai", model="test-model", base_url=srv.url, seed=3).preflight()
    assert facts["tools_shown"] is True
    assert set(facts["answer_tokens"]) == {"decision", "forecast"} and facts["answer_tokens"]["forecast"] > 500
    posts = srv.posts()
    plain, tooled = posts[3]["body"], posts[4]["body"]
    assert "tools" not in plain and tooled["tools"]


def test_preflight_reports_the_server_and_the_seed(serve):
    srv = serve([completion("apple, pear"), completion("apple, pear"), completion("dog, cat")],
                models=["test-model", "other"])
    facts = LLMAgentFactory(kind="openai", model="test-model", base_url=srv.url, seed=3).preflight()
    assert facts["kind"] == "openai" and facts["server_models"] == ["other", "test-model"] and facts["model_listed"]
    assert facts["seed_honoured"] is True and facts["reported_model"] == "test-model" and facts["openai_sdk"]
    posts = srv.posts()
    # 3 seed probes, then the tools probe: the same 1-token request without and with one tool, then the answer
    # probe: a 1-token request without and with each task's typical answer
    assert len(posts) == 8 and posts[0]["body"] == posts[1]["body"] and posts[0]["body"]["max_tokens"] == 24
    assert posts[0]["body"]["temperature"] == 1.0 and posts[2]["body"]["seed"] == 4
    assert posts[3]["body"]["max_tokens"] == 1 and "tools" not in posts[3]["body"] and posts[4]["body"]["tools"]
    assert [p["body"]["max_tokens"] for p in posts[5:]] == [1, 1, 1] and '"quantiles"' in str(posts[7]["body"])
    assert facts["tools_shown"] is False  # the scripted server's usage does not grow with tools: not shown
    assert facts["answer_tokens"] is None and facts["max_tokens"] == 2048  # nor with the answer: not measured
    assert facts["parallel_slots"] is None and facts["server_kind"] == "openai"
    assert srv.requests[0]["method"] == "GET" and srv.requests[0]["path"] == "/v1/models"
    srv2 = serve([completion("OK"), completion("Sure"), completion("x")], models=None)  # no /models; seed ignored
    facts = OpenAIChatAgent("m", base_url=srv2.url, seed=3).preflight()
    assert facts["server_models"] is None and facts["model_listed"] is None and facts["seed_honoured"] is False
    srv3 = serve([completion("same")] * 3)  # a reply that does not depend on the seed: inconclusive
    assert OpenAIChatAgent("m", base_url=srv3.url, seed=3).preflight()["seed_honoured"] is None
    srv4 = serve([completion("x")])
    assert OpenAIChatAgent("m", base_url=srv4.url, native_tools=False).preflight()["seed_honoured"] is None
    assert len(srv4.posts()) == 4  # no seed, no native tools: one probe, and the 3 of the answer


@pytest.mark.parametrize("script,kind,needle", [
    (None, "transport", "no OpenAI-compatible server at http://127.0.0.1:9/v1"),
    ([Step({"error": {"message": "bad key"}}, status=401)], "auth", "HTTP 401: bad key"),
    ([Step({"error": {"message": "model 'test-model' not found"}}, status=404)], "not_found", "not found"),
    ([Step(raw=b"<html>")], "bad_response", "not JSON"),
])
def test_preflight_fails_early_with_a_clear_message(serve, script, kind, needle):
    srv = serve(script, models=None) if script is not None else None
    with pytest.raises(HarnessError, match=needle) as ei:
        agent_for(srv, max_retries=0).preflight()
    assert ei.value.kind == kind and "preflight" in str(ei.value)


def test_body_larger_than_the_bound_is_bad_response(serve, env, case_id):
    srv = serve([completion("x" * 5000)])
    _episode_raises(env, agent_for(srv, max_response_bytes=1000), case_id, "bad_response")


def test_episode_deadline_bounds_the_request(serve, env, case_id):
    srv = serve([completion(tool_calls=[("catalog", {})]), Step(completion("late"), sleep=5.0)])
    agent = agent_for(srv, timeout=30.0, episode_timeout=1.0)
    t0 = time.perf_counter()
    _episode_raises(env, agent, case_id, "timeout")
    assert time.perf_counter() - t0 < 2.5


def test_strict_tools_drop_nulls_and_tool_results_as_user(serve, env, case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    srv = serve([completion(tool_calls=[("history", {"last": None}), ("classical_plan", {"method": METHOD})]),
                 completion(answer(decisions))])
    agent = agent_for(srv, strict_tools=True, tool_results_as="user")
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["valid"] and rec["calls"] == 2 and rec["S"] == s_direct
    first, second = srv.posts()[0]["body"], srv.posts()[1]["body"]
    fns = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert fns["history"]["strict"] is True and "strict" not in fns["submit"]
    assert agent.session.steps[0]["action"] == {"tool": "history", "args": {}}  # null = the default (48 hours)
    assert agent.session.steps[0]["dropped_null_arguments"] == ["last"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]  # both results, one message
    folded = second["messages"][3]["content"]
    assert folded.startswith("Result of history:") and "\n\nResult of classical_plan:" in folded
