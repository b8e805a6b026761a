"""Trace bounds, secret scrubbing and the written shape (fwgym.agents.chat.traces, fwgym.traces.Trace)."""
import json

import pytest
from json_shapes import assert_shape

from fwgym.agents import run_episode
from fwgym.agents.chat import ChatAgent, ModelReply, ToolRequest
from fwgym.agents.chat.traces import MAX_TRACE_CHARS, REDACTED, bound_trace, scrub
from fwgym.traces import SCORE_FIELDS, Trace


def _size(t):
    return len(json.dumps(t, ensure_ascii=False))


def test_bound_trace_cuts_long_strings_and_lists_with_notices():
    t = {"trace_id": "x", "policy": "p", "messages": [{"role": "user", "content": "a" * 50_000}] * 30,
         "steps": [{"action": {"tool": "submit", "args": {"samples": [[1.5] * 24] * 10_000}}}]}
    assert _size(t) > 1_500_000
    out = bound_trace(t, 200_000)
    assert _size(out) <= 200_000 and out["truncated"] is True and out["policy"] == "p" and len(out["messages"]) == 30
    assert "characters cut]" in out["messages"][0]["content"]
    assert any("items cut]" in json.dumps(s) for s in out["steps"])
    small = {"policy": "p", "messages": []}
    assert bound_trace(small) is small and "truncated" not in small
    with pytest.raises(ValueError):
        bound_trace(t, 100)
    assert MAX_TRACE_CHARS == 2_000_000


def test_scrub_replaces_secrets_everywhere():
    data = {"k sk-abc123": ["x sk-abc123 y", {"n": 1, "s": "sk-abc123"}], "ok": None}
    assert scrub(data, ["sk-abc123"]) == {f"k {REDACTED}": [f"x {REDACTED} y", {"n": 1, "s": REDACTED}], "ok": None}
    assert scrub(data, ["abc"]) == data  # too short to be a secret: ignored
    assert scrub("text", []) == "text"


class _Echo(ChatAgent):
    """A backend whose replies contain its secret, in text, reasoning and tool arguments."""

    backend = "echo"
    SECRET = "sk-echo-secret-987654321"

    def secrets(self):
        return [self.SECRET]

    def complete(self, messages, tools):
        if len(messages) > 2:
            return ModelReply(content=json.dumps({"tool": "abstain", "args": {"reason": f"key {self.SECRET}"}}))
        return ModelReply(content=f"the key is {self.SECRET}", reasoning=self.SECRET,
                          tool_calls=[ToolRequest("c", "history", json.dumps({"start": self.SECRET}))])


def test_secrets_never_reach_the_chat_the_env_or_the_trace(env, case_id, tmp_path):
    agent = _Echo("echo", trace_out=tmp_path / "t.jsonl")
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    line = (tmp_path / "t.jsonl").read_text()
    assert _Echo.SECRET not in line and REDACTED in line
    assert _Echo.SECRET not in json.dumps(rec) and rec["status"] == "abstained"
    assert all(_Echo.SECRET not in json.dumps(m) for m in agent.session.messages)


def test_a_huge_episode_trace_stays_under_the_bound(env, case_id, tmp_path):
    class Verbose(ChatAgent):
        def complete(self, messages, tools):
            return ModelReply(content="x" * 99_000 + " {}", reasoning="r" * 99_000)

    agent = Verbose("verbose", trace_out=tmp_path / "t.jsonl", max_trace_chars=300_000)
    run_episode(env, agent, options={"case_id": case_id})
    line = (tmp_path / "t.jsonl").read_text()
    assert len(line) <= 300_001 and json.loads(line)["truncated"] is True and json.loads(line)["score"]["calls"] == 13


class _Script(ChatAgent):
    """Replies from a list, with backend details (meta) on the first."""

    backend = "script"

    def __init__(self, replies, **kw):
        super().__init__("script", **kw)
        self.replies = list(replies)

    def complete(self, messages, tools):
        return self.replies.pop(0)


def test_a_written_trace_fits_trace_in_field_order(env, case_id, plan_and_score, tmp_path):
    decisions, s_direct = plan_and_score
    agent = _Script([
        ModelReply(tool_calls=[ToolRequest("c1", "catalog", "{}")], finish_reason="tool_calls",
                   meta={"latency_s": 0.25, "requests": 1, "usage": {"prompt_tokens": 10, "completion_tokens": 2}}),
        ModelReply(content="no JSON here"),
        ModelReply(content=json.dumps({"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}})),
        ModelReply(content=json.dumps({"decisions": decisions}), reasoning="the free plan"),
    ], trace_out=tmp_path / "t.jsonl")
    run_episode(env, agent, options={"case_id": case_id})
    (t,) = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert_shape(t, Trace)
    assert list(t) == [k for k in Trace.__annotations__ if k != "direct_samples"]  # every field, in the type's order
    assert SCORE_FIELDS == ("S", "R", "loss", "floor", "credits", "calls", "valid", "status", "reason")
    assert list(t["score"]) == list(SCORE_FIELDS) and t["score"]["S"] == s_direct and t["score"]["calls"] == 3
    assert [(s["source"], s["kind"]) for s in t["steps"]] == [("native", "tool"), ("text", "error"), ("text", "tool"),
                                                             ("text", "answer")]
    assert t["steps"][0]["env_result"]["result"]["case"]["case_id"] == case_id  # a ToolResult with its Catalog
    assert t["steps"][1]["error"]["code"] == "no_json" and t["steps"][3]["env_result"] is None
    assert t["replies"][0] == {"turn": 1, "content": None, "finish_reason": "tool_calls",
                               "tool_calls": [{"id": "c1", "name": "catalog", "arguments": "{}"}],
                               "latency_s": 0.25, "requests": 1, "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    assert t["replies"][3]["reasoning"] == "the free plan" and t["usage"] == {"prompt_tokens": 10, "completion_tokens": 2}
