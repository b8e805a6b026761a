"""Tokens of failed attempts (issue 28.4): the usage a server reports for an attempt whose reply the episode does not
use (an error response the SDK retried, a final error, a 200 body refused as bad_response) is counted in the
record's token totals and its ``failed_tokens``, against scripted OpenAI-compatible servers on 127.0.0.1; replies
that are the model's (unusable, re-asked as a counted call) were and are counted as replies."""
import json

import pytest

pytest.importorskip("openai", reason="the llm extra (openai) is not installed")

from fwgym.agents import run_episode  # noqa: E402
from fwgym.agents.chat import read_traces  # noqa: E402
from fwgym.agents.openai import OpenAIChatAgent  # noqa: E402
from fwgym.agents.openai_transport import usage_of  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, Step, completion  # noqa: E402


def _usage(prompt, completion_tokens):
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}


def _play(script, env, case_id, tmp_path, **kw):
    with ScriptedChatServer(script) as srv:
        agent = OpenAIChatAgent("test-model", base_url=srv.url, timeout=10.0, max_retries=2,
                                trace_out=tmp_path / "t.jsonl", **kw)
        try:
            rec = run_episode(env, agent, options={"case_id": case_id}).record
        finally:
            agent.close()
        posts = len(srv.posts())
    (trace,) = read_traces(tmp_path / "t.jsonl")
    return rec, trace, posts


def test_a_retried_error_that_reported_usage_is_counted(env, case_id, plan_and_score, tmp_path):
    decisions, s_direct = plan_and_score
    script = [Step({"error": {"message": "overloaded"}, "usage": _usage(900, 40)}, status=503),
              completion(json.dumps({"decisions": decisions}), usage=(100, 10))]
    rec, trace, posts = _play(script, env, case_id, tmp_path)
    assert posts == 2 and rec["valid"] and rec["S"] == s_direct and rec["requests"] == 2
    assert (rec["prompt_tokens"], rec["completion_tokens"], rec["failed_tokens"]) == (1000, 50, 940)
    assert trace["stats"]["failed_attempts"] == [{"what": "HTTP 503", "prompt_tokens": 900, "completion_tokens": 40}]
    assert trace["usage"]["prompt_tokens"] == 100  # the trace's replies: the one used reply


def test_a_refused_200_body_that_reported_usage_is_counted_in_the_harness_error_record(env, case_id, tmp_path):
    script = [completion(tool_calls=[("classical_plan", {"method": "weekday_empirical"})], usage=(100, 10)),
              Step({"choices": [], "usage": _usage(700, 30)})]
    rec, trace, posts = _play(script, env, case_id, tmp_path)
    assert posts == 2 and rec["status"] == "harness_error" and rec["harness_kind"] == "bad_response"
    assert (rec["prompt_tokens"], rec["completion_tokens"], rec["failed_tokens"]) == (800, 40, 730)
    assert trace["stats"]["failed_attempts"] == [{"what": "bad_response", "prompt_tokens": 700, "completion_tokens": 30}]


def test_a_final_error_alone_reports_its_tokens_and_errors_without_usage_add_none(env, case_id, tmp_path):
    rec, trace, _ = _play([Step({"error": {"message": "bad"}, "usage": _usage(500, 0)}, status=400)], env, case_id,
                          tmp_path)
    assert rec["harness_kind"] == "bad_request" and rec["model_turns"] == 0
    assert (rec["prompt_tokens"], rec["completion_tokens"], rec["failed_tokens"]) == (500, 0, 500)
    (tmp_path / "t.jsonl").unlink()
    rec, trace, posts = _play([Step(status=503), Step(status=502), completion('{"levels": [1.0]}', usage=(100, 10)),
                               completion("no answer", usage=(120, 5))] + [completion("x", usage=(130, 1))] * 12,
                              env, case_id, tmp_path)
    assert [a["what"] for a in trace["stats"]["failed_attempts"]] == ["HTTP 503", "HTTP 502"]
    assert all(a["prompt_tokens"] is None for a in trace["stats"]["failed_attempts"]) and rec["failed_tokens"] == 0
    # the unusable replies are the model's counted calls: their tokens were and are in the totals
    assert rec["status"] == "call_limit_exceeded" and rec["model_turns"] == 13
    assert rec["prompt_tokens"] == 100 + 120 + 11 * 130 and rec["completion_tokens"] == 10 + 5 + 11


def test_usage_of_reads_only_non_negative_integer_counts():
    assert usage_of({"usage": _usage(3, 4)}) == {"prompt_tokens": 3, "completion_tokens": 4}
    assert usage_of({"usage": {"prompt_tokens": 3}}) is None and usage_of({"usage": {"prompt_tokens": True,
                                                                                     "completion_tokens": 1}}) is None
    assert usage_of({"usage": {"prompt_tokens": -1, "completion_tokens": 1}}) is None and usage_of([1]) is None
