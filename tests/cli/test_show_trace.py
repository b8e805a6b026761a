"""``fwgym show-trace``: transcripts and summary lines of LLM traces, filters and errors."""
import json

from fwgym.agents import run_episode
from fwgym.agents.chat import ChatAgent, ModelReply, ToolRequest
from fwgym.cli import main


class _Scripted(ChatAgent):
    """A native tool call, then a text answer with the plan it returned."""

    backend = "scripted"

    def complete(self, messages, tools):
        if messages[-1]["role"] != "tool":
            return ModelReply(tool_calls=[ToolRequest("c1", "classical_plan", {"method": "weekday_empirical"})],
                              finish_reason="tool_calls", meta={"latency_s": 0.5})
        body = messages[-1]["content"]
        plan = json.loads(body[: body.rindex("}") + 1])["result"]["plan"]["decisions"]
        return ModelReply(content=json.dumps({"decisions": plan}), finish_reason="stop")


def _traces(env, tmp_path, n=2):
    path = tmp_path / "traces.jsonl"
    agent = _Scripted("scripted", trace_out=path)
    ids = [c.case_id for c in env.cases[:n]]
    for cid in ids:
        run_episode(env, agent, options={"case_id": cid})
    return path, ids


def test_transcript_and_list(env, tmp_path, capsys):
    path, ids = _traces(env, tmp_path)
    assert main(["show-trace", str(path), "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"[0] scripted | case {ids[0]} | status submitted | agent answered")
    assert main(["show-trace", str(path), "--case", ids[1]]) == 0
    text = capsys.readouterr().out
    for needle in ("[system]", "[user]", "[assistant #1] (finish tool_calls, 0.5 s)", "-> tool call classical_plan",
                   "[tool result c1]", "[assistant #2]", "-> answer: submit", "final plan (levels)", "env status submitted",
                   f"case {ids[1]}"):
        assert needle in text, needle
    assert ids[0] not in text
    assert main(["show-trace", str(path), "--episode", "1", "--no-system"]) == 0
    assert "[system]" not in capsys.readouterr().out


def test_show_trace_errors(tmp_path, capsys):
    assert main(["show-trace", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["show-trace", str(bad)]) == 2
    assert "bad.jsonl:1: not a JSON line" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["show-trace", str(empty)]) == 2  # holds no traces
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"policy": "p", "messages": []}) + "\n")
    assert main(["show-trace", str(one), "--episode", "3"]) == 2
    assert "--episode 3 out of range (0..0)" in capsys.readouterr().err


def test_model_controlled_terminal_escapes_are_shown_escaped(tmp_path, capsys):
    """A reply or a server message with ANSI escapes, a carriage return or a bidi override cannot drive the terminal."""
    evil = "\x1b[2J\x1b]0;pwned\x07ok\rX\u202egnp.exe\x9b31m"
    t = {"policy": "p\x1b[31m", "case_id": "c1", "agent_status": "harness_error",
         "harness_error": {"kind": "http_5xx", "message": "server said " + evil},
         "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                      {"role": "assistant", "content": evil, "tool_calls": [
                          {"id": "x", "function": {"name": "n\x1b[0m", "arguments": evil}}]},
                      {"role": "tool", "tool_call_id": "x", "content": evil}],
         "replies": [{"turn": 1, "reasoning": evil, "finish_reason": "stop\x1b"}], "steps": []}
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps(t) + "\n")
    for argv in (["--list"], [], ["--full"]):
        assert main(["show-trace", str(path), *argv]) == 0
        out = capsys.readouterr().out
        assert not any(ch in out for ch in "\x1b\x07\r\x9b\u202e"), argv
        assert "\\x1b[2J" in out or argv == ["--list"]
    main(["show-trace", str(path)])
    assert "harness error (http_5xx): server said \\x1b[2J" in capsys.readouterr().out
