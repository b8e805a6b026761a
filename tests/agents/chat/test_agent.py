"""ChatAgent and ChatSession on the real env with scripted replies: reply -> action mapping, call accounting,
abandoning, traces, and episodes that start at reset (fwgym.agents.chat)."""
import json

import numpy as np
import pytest

from fwgym.agents import run_episode
from fwgym.agents.chat import (REPLY_ERROR_TOOL, ChatAgent, ChatSession, ContextExhausted, HarnessError,
                               ModelReply, ToolRequest)
from fwgym.agents.chat.prompts import tool_schemas
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.tools import REGISTRY

METHOD = "hour_of_day_empirical"


class ScriptedChatAgent(ChatAgent):
    """Replies from a list (ModelReply, str, exception instance, or callable(messages) -> one of those)."""

    backend = "scripted"

    def __init__(self, script, **kw):
        super().__init__(kw.pop("name", "scripted"), **kw)
        self.script = list(script)
        self.requests = []

    def complete(self, messages, tools):
        self.requests.append({"messages": [dict(m) for m in messages], "tools": tools})
        item = self.script.pop(0) if self.script else "no more script"
        if callable(item) and not isinstance(item, type):
            item = item(messages)
        if isinstance(item, Exception):
            raise item
        return ModelReply(content=item) if isinstance(item, str) else item


def _answer(decisions):
    return json.dumps({"decisions": decisions})


def _plan_from_last_result(messages):
    """Answer with the plan found in the last tool result of the chat."""
    for m in reversed(messages):
        if m["role"] in ("tool", "user") and '"decisions"' in (m.get("content") or ""):
            body = m["content"]
            data = json.loads(body[body.index("{"): body.rindex("}") + 1])
            return _answer(data["result"]["plan"]["decisions"])
    return "no plan found"


# --- episode facts and episode boundaries --------------------------------------------------------


def test_session_uses_the_env_tool_subset():
    env = FWBenchEnv("electricity", split="dev", tools=("classical_plan",))
    obs, info = env.reset(seed=1)
    s = ChatSession()
    s.start(obs, info["episode"])
    assert s.tools == ("classical_plan", "submit", "abstain") and s.task == "decision" and s.max_calls == 12
    assert [t["function"]["name"] for t in s.tool_schemas()] == ["classical_plan", "submit", "abstain"]
    s2 = ChatSession(tools=("classical_plan", "submit"))  # an explicit list wins over the facts
    s2.start(obs, info["episode"])
    assert s2.tools == ("classical_plan", "submit")
    s3 = ChatSession()
    s3.start(obs)  # no facts (another env): every registered tool
    assert s3.tools == tuple(REGISTRY)
    assert ChatSession(native_tools=False).tool_schemas() is None
    with pytest.raises(ValueError, match="unknown tools"):
        ChatSession().start(obs, {**info["episode"], "tools": ["catalog", "teleport"]})


def test_the_episode_facts_set_the_limits_of_the_prompt(case_id):
    env = FWBenchEnv("electricity", split="dev", max_calls=5, budget=1000)
    agent = ScriptedChatAgent([ContextExhausted("stop")], native_tools=False)
    run_episode(env, agent, options={"case_id": case_id})
    system = agent.requests[0]["messages"][0]["content"]
    assert "Tool-call limit: 5." in system and "credits spent / 1000)" in system and "Call 6 ends" in system
    assert agent.session.max_calls == 5 and agent.session.episode["case"]["case_id"] == case_id


class _CountingChatAgent(ScriptedChatAgent):
    """Counts chat sessions (episode starts)."""

    sessions = 0

    def _begin(self, observation):
        self.sessions += 1
        super()._begin(observation)


def test_an_episode_starts_at_reset_also_without_text_observations(case_id, plan_and_score, tmp_path):
    """With text_observations=False every observation has an empty last_result; the chat must still be one
    session per episode (it used to restart at every step: 13 sessions per episode)."""
    decisions, s_direct = plan_and_score
    env = FWBenchEnv("electricity", split="dev", text_observations=False)
    trace = tmp_path / "t.jsonl"
    script = ['{"tool": "catalog"}', '{"tool": "history", "args": {"last": 3}}', _answer(decisions)]
    agent = _CountingChatAgent(script * 2, native_tools=False, trace_out=trace)
    recs = [run_episode(env, agent, options={"case_id": case_id}).record for _ in range(2)]
    assert agent.sessions == 2 and all(r["valid"] and r["calls"] == 2 and r["S"] == s_direct for r in recs)
    traces = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(traces) == 2 and [len(t["replies"]) for t in traces] == [3, 3]
    assert [[s["kind"] for s in t["steps"]] for t in traces] == [["tool", "tool", "answer"]] * 2
    # the facts still reached the chat: the table has UTC dates although the context text is empty
    first = traces[0]["messages"][1]["content"]
    assert first.startswith("\n\nVisible history (336 hourly values") and "date (UTC) |" in first


def test_a_new_episode_needs_reset_not_an_empty_result(env, case_id, plan_and_score):
    """act() after the first step continues the episode whatever the observation looks like; reset() starts a new one."""
    decisions, _ = plan_and_score
    agent = _CountingChatAgent(['{"tool": "catalog"}', '{"tool": "catalog"}', _answer(decisions)])
    obs, info = env.reset(options={"case_id": case_id})
    agent.reset(info)
    agent.act(obs)
    obs, *_ = env.step({"tool": "catalog"})
    agent.act({**obs, "last_result": ""})  # an empty result no longer restarts the chat
    assert agent.sessions == 1 and agent.session.turns == 2
    agent.reset(info)
    agent.act(obs)
    assert agent.sessions == 2 and agent.session.turns == 1


# --- reply -> action mapping ----------------------------------------------------------------------


def test_native_tool_calls_are_executed_in_order_each_counted(env, case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    agent = ScriptedChatAgent([
        ModelReply(content="", tool_calls=[ToolRequest("c1", "catalog", "{}"),
                                           ToolRequest("c2", "classical_plan", json.dumps({"method": METHOD})),
                                           ToolRequest("c3", "history", {"last": 3})]),
        _plan_from_last_result,
    ])
    res = run_episode(env, agent, options={"case_id": case_id})
    rec = res.record
    assert rec["valid"] and rec["calls"] == 3 and rec["S"] == s_direct
    assert [s["action"]["tool"] for s in agent.session.steps] == ["catalog", "classical_plan", "history", "submit"]
    msgs = agent.requests[1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in msgs[3:]] == ["c1", "c2", "c3"]
    assert "calls left: 9 of 12" in msgs[-1]["content"]
    assert agent.requests[0]["tools"] == tool_schemas(agent.session.tools)
    assert agent.status == "answered"


def test_text_tool_call_and_text_answer(env, case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    agent = ScriptedChatAgent(['I will plan. {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}',
                               _plan_from_last_result], native_tools=False)
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["valid"] and rec["calls"] == 1 and rec["S"] == s_direct
    assert agent.requests[0]["tools"] is None
    assert agent.requests[1]["messages"][-1]["role"] == "user"
    assert agent.requests[1]["messages"][-1]["content"].startswith("Result of classical_plan:")


@pytest.mark.parametrize("bad,code", [
    ("Sure! I think capacity should be high.", "no_json"),
    ('{"decisions": 1} and {"decisions": 2}', "ambiguous_candidates"),
    (json.dumps({"decisions": [{"decision_id": f"b0{i}", "value": "1000 MW" if i == 0 else 1} for i in range(8)]}),
     "not_a_number"),
    ('{"decisions": [{"decision_id": "b00", "value": NaN}]}', "non_finite"),
    ('{"a": 1, "a": 2}', "duplicate_keys"),
    ("", "empty_reply"),
])
def test_unusable_reply_is_one_counted_call_with_an_explanation(env, case_id, plan_and_score, bad, code):
    decisions, s_direct = plan_and_score
    agent = ScriptedChatAgent([bad, _answer(decisions)])
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["valid"] and rec["calls"] == 1 and rec["tool_counts"] == {REPLY_ERROR_TOOL: 1, "submit": 1}
    assert rec["S"] == s_direct and rec["credits"] == 0
    feedback = agent.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and f"could not be used ({code})" in feedback["content"]
    assert "unknown tool" not in feedback["content"]  # the model sees the parser's explanation
    step = agent.session.steps[0]
    assert step["kind"] == "error" and step["error"]["code"] == code
    assert step["env_result"]["ok"] is False  # the env's own record of the counted call


def test_garbage_forever_ends_at_the_call_limit(env, case_id):
    agent = ScriptedChatAgent(["garbage"] * 20)
    res = run_episode(env, agent, options={"case_id": case_id})
    assert res.record["status"] == "call_limit_exceeded" and res.record["calls"] == 13 and not res.record["valid"]
    assert len(agent.requests) == 13 and agent.status == "no_answer"
    assert agent.trace["score"]["status"] == "call_limit_exceeded"


def test_bad_native_arguments_and_badly_formatted_native_submit(env, case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    as_strings = [{"decision_id": d["decision_id"], "value": repr(d["value"])} for d in decisions]
    agent = ScriptedChatAgent([
        ModelReply(tool_calls=[ToolRequest("a", "history", "{last: 3"), ToolRequest("b", "submit", json.dumps({"decisions": decisions[:7]}))]),
        ModelReply(tool_calls=[ToolRequest("c", "submit", json.dumps({"decisions": as_strings}))]),
    ])
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["valid"] and rec["calls"] == 2 and rec["S"] == s_direct  # numeric strings are accepted, not rounded
    tool_msgs = [m for m in agent.requests[1]["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in tool_msgs[0]["content"] and "missing_decision" in tool_msgs[1]["content"]


def test_submit_in_the_middle_of_a_reply_ends_the_episode(env, case_id, plan_and_score):
    decisions, _ = plan_and_score
    agent = ScriptedChatAgent([ModelReply(tool_calls=[ToolRequest("a", "submit", json.dumps({"decisions": decisions})),
                                                      ToolRequest("b", "catalog", "{}")])])
    res = run_episode(env, agent, options={"case_id": case_id})
    assert res.record["valid"] and res.steps == 1 and res.record["calls"] == 0


def test_off_grid_answer_goes_to_the_env_unchanged(env, case_id, plan_and_score):
    decisions, _ = plan_and_score
    off = [dict(d) for d in decisions]
    off[0]["value"] = off[0]["value"] + 1.0
    agent = ScriptedChatAgent([_answer(off)])
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert not rec["valid"] and rec["status"] == "invalid_submission" and "off_grid" in rec["reason"]


def test_context_exhausted_is_the_models_and_ends_the_episode_abstained(env, case_id, tmp_path):
    trace = tmp_path / "t.jsonl"
    agent = ScriptedChatAgent(['{"tool": "catalog"}', ContextExhausted("HTTP 400: maximum context length is 4096 tokens")],
                              trace_out=trace)
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert not rec["valid"] and rec["status"] == "abstained" and rec["reason"].startswith("context_exhausted")
    assert rec["calls"] == 1 and agent.trace["agent_status"] == "context_exhausted"
    (t,) = [json.loads(x) for x in trace.read_text().splitlines()]
    assert t["agent_status"] == "context_exhausted" and t["steps"][-1]["kind"] == "abandon" and t["harness_error"] is None


def test_harness_error_propagates_after_the_trace_is_written(env, case_id, tmp_path):
    """An infrastructure failure is not the model's: act() raises HarnessError (the run layer ends the episode
    as harness_error, never scored) and the trace is complete and written before it does."""
    trace = tmp_path / "t.jsonl"
    agent = ScriptedChatAgent(['{"tool": "catalog"}', HarnessError("no reply after 4 attempts", "http_5xx")],
                              trace_out=trace)
    obs, info = env.reset(options={"case_id": case_id})
    agent.reset({**info, "episode_id": "ep-0007"})
    obs, *_ = env.step(agent.act(obs))
    with pytest.raises(HarnessError, match="no reply after 4 attempts") as ei:
        agent.act(obs)
    assert ei.value.kind == "http_5xx" and agent.status == "harness_error"
    (t,) = [json.loads(x) for x in trace.read_text().splitlines()]
    assert t["agent_status"] == "harness_error" and t["harness_error"] == {"kind": "http_5xx",
                                                                           "message": "no reply after 4 attempts"}
    assert t["episode_id"] == "ep-0007" and t["case_id"] == case_id and t["score"] is None
    assert [s["kind"] for s in t["steps"]] == ["tool"] and t["stats"]["model_turns"] == 1
    agent.end_episode({"case_id": case_id, "status": "harness_error"})  # a late end_episode writes nothing more
    assert len(trace.read_text().splitlines()) == 1


def test_episode_deadline_is_a_harness_error(env, case_id):
    class Slow(ScriptedChatAgent):
        def complete(self, messages, tools):
            import time

            time.sleep(0.3)
            return super().complete(messages, tools)

    agent = Slow(['{"tool": "catalog"}'] * 5, native_tools=False, episode_timeout=0.5)
    rec = run_episode(env, agent, options={"case_id": case_id}).record  # the run layer: harness_error, not scored
    assert rec["status"] == "harness_error" and not rec["scored"] and rec["S"] is None
    assert rec["harness_kind"] == "timeout" and "deadline of 0.5 s" in rec["reason"] and len(agent.requests) == 2
    with pytest.raises(ValueError, match="episode_timeout"):
        ScriptedChatAgent([], episode_timeout=0)


def test_episode_stats_account_tokens_turns_and_latency(env, case_id, plan_and_score):
    decisions, _ = plan_and_score
    usage = {"prompt_tokens": 1200, "completion_tokens": 30}
    agent = ScriptedChatAgent([ModelReply(content='{"tool": "catalog"}', meta={"usage": usage, "latency_s": 0.25,
                                                                               "requests": 2}),
                               ModelReply(content=_answer(decisions), meta={"usage": usage, "latency_s": 0.5,
                                                                            "requests": 0, "cached": True})])
    run_episode(env, agent, options={"case_id": case_id})
    st = agent.episode_stats()
    assert st["prompt_tokens"] == 2400 and st["completion_tokens"] == 60 and st["model_turns"] == 2
    assert st["requests"] == 2 and st["cached_replies"] == 1 and st["request_latency_s"] == [0.25, 0.5]
    assert st["wall_s"] >= 0 and agent.trace["stats"]["prompt_tokens"] == 2400
    agent2 = ScriptedChatAgent(['{"tool": "catalog"}', _answer(decisions)])  # no usage from the backend
    run_episode(env, agent2, options={"case_id": case_id})
    assert agent2.episode_stats()["prompt_tokens"] is None and agent2.episode_stats()["model_turns"] == 2


def test_abandon_ends_the_episode_even_when_invalid_submissions_are_retryable(case_id):
    env = FWBenchEnv("electricity", split="dev", invalid_submission="error")
    agent = ScriptedChatAgent([ContextExhausted("too long")])
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["status"] == "abstained" and rec["calls"] == 0 and not rec["valid"]
    assert agent.trace["agent_status"] == "context_exhausted" and len(agent.requests) == 1


def test_max_turns_bound_with_a_lenient_call_limit(case_id):
    env = FWBenchEnv("electricity", split="dev", call_limit="error", max_calls=2)
    agent = ScriptedChatAgent(['{"tool": "catalog"}'] * 50, max_turns=5)
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert len(agent.requests) == 5 and rec["calls"] == 2 and not rec["valid"] and "max_turns" in rec["reason"]


def test_refused_submission_lets_the_model_try_again(case_id, plan_and_score):
    decisions, s_direct = plan_and_score
    env = FWBenchEnv("electricity", split="dev", invalid_submission="error")
    off = [dict(d) for d in decisions]
    off[3]["value"] += 0.5
    agent = ScriptedChatAgent([_answer(off), _answer(decisions)])
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    assert rec["valid"] and rec["calls"] == 1 and rec["S"] == s_direct
    assert "off_grid" in agent.requests[1]["messages"][-1]["content"]


def test_trace_record_contents(env, case_id, plan_and_score, tmp_path):
    decisions, s_direct = plan_and_score
    path = tmp_path / "sub" / "traces.jsonl"
    agent = ScriptedChatAgent(["hmm", '{"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}',
                               _plan_from_last_result], trace_out=path)
    run_episode(env, agent, options={"case_id": case_id})
    (t,) = [json.loads(x) for x in path.read_text().splitlines()]
    assert t["case_id"] == case_id and t["policy"] == "scripted" and t["agent_status"] == "answered"
    assert t["score"]["S"] == s_direct and t["score"]["valid"] and t["score"]["calls"] == 2
    assert t["final_plan"]["submitted"]["decisions"] == decisions and len(t["final_plan"]["levels"]) == 8
    assert [s["kind"] for s in t["steps"]] == ["error", "tool", "answer"]
    assert [m["role"] for m in t["messages"]] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert len(t["replies"]) == 3 and t["turns"] == 3 and t["wall_s"] >= 0
    assert t["steps"][1]["env_result"]["result"]["method"] == METHOD and t["steps"][1]["calls_left"] == 10


def test_session_guards():
    s = ChatSession()
    with pytest.raises(RuntimeError):
        s.next_action()
    s.start({"context": "", "history": [1.0] * 24, "calls_left": 3, "budget_left": np.array([10.0])})
    assert s.add_reply(ModelReply(content="nothing")) == 1
    with pytest.raises(RuntimeError):
        s.add_reply(ModelReply(content="again"))
    assert s.next_action() == {"tool": REPLY_ERROR_TOOL, "args": {}}
    with pytest.raises(RuntimeError):
        s.next_action()


def test_oversized_reply_is_truncated_with_a_notice(env, case_id, tmp_path):
    huge = "x" * 5000 + '{"tool": "catalog"}'
    agent = ScriptedChatAgent([huge, ContextExhausted("stop")], max_reply_chars=1000, trace_out=tmp_path / "t.jsonl")
    rec = run_episode(env, agent, options={"case_id": case_id}).record
    t = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    reply = json.dumps(t["replies"][0])
    assert "reply truncated from 5019 to 1000 characters" in reply and "x" * 1001 not in reply
    assert rec["calls"] == 1  # the truncated reply holds no usable action: one wasted call
    with pytest.raises(ValueError):
        ScriptedChatAgent([], max_reply_chars=5)
