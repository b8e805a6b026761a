"""``fwgym show-trace`` on files that are JSON Lines but not traces: a clean error naming the episode
(exit 2), never a traceback (fwgym.cli.trace_shape); fuzzed with hypothesis."""
import io
import json
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwgym.cli import main, show_trace
from fwgym.cli.trace_shape import trace_problem


@pytest.mark.parametrize("trace, problem", [
    ({"messages": [1]}, "messages[0] is a number, expected an object"),
    ({"messages": "abc"}, "field 'messages' is a string, expected a list"),
    ({"score": 5}, "field 'score' is a number, expected an object"),
    ({"replies": [1]}, "replies[0] is a number, expected an object"),
    ({"replies": [{"attempts": "3"}]}, "replies[0].attempts is a string, expected a number"),
    ({"steps": [{"kind": "error"}]}, "steps[0] (error) has no 'error' object with a code"),
    ({"steps": [{"kind": "abandon", "error": {"code": "x"}}]}, "has no 'error' object with a code and message"),
    ({"steps": [{"kind": "call", "turn": 1}]}, "steps[0] has no 'action' object"),
    ({"final_plan": {"levels": ["a"]}}, "final_plan.levels is not a list of numbers"),
    ({"messages": [{"role": "assistant", "tool_calls": [1]}]}, "tool_calls[0] is not an object with a 'function'"),
])
def test_unreadable_shapes_are_refused_with_the_episode_named(tmp_path, capsys, trace, problem):
    assert problem in trace_problem(trace)
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"policy": "ok", "messages": None}) + "\n" + json.dumps(trace) + "\n")
    assert main(["show-trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fwgym show-trace: error: {path}: episode [1] is not a trace record of fwgym: ")
    assert problem in err and "Traceback" not in err


def test_a_minimal_record_and_missing_fields_are_fine(tmp_path, capsys):
    assert trace_problem({}) is None and trace_problem({"messages": None, "score": None}) is None
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"policy": "p", "messages": None}) + "\n")
    assert main(["show-trace", str(path), "--list"]) == 0
    assert capsys.readouterr().out.startswith("[0] p | case ? | status -")


json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=32)
                           | st.text(max_size=5), lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "function", "name",
                                                              "arguments", "turn", "kind", "source", "error", "code",
                                                              "message", "action", "tool", "attempts", "levels",
                                                              "status", "reason", "latency_s", "finish_reason", "id",
                                                              "tool_call_id", "reasoning"]), kids, max_size=4),
                           max_leaves=12)
traces = st.dictionaries(st.sampled_from(["policy", "case_id", "messages", "replies", "steps", "score", "final_plan",
                                          "settings", "usage", "turns", "wall_s", "agent_status", "backend"]),
                         json_values, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=traces, listing=st.booleans())
def test_fuzzed_records_render_or_are_refused_never_crash(tmp_path_factory, t, listing):
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_text(json.dumps(t) + "\n")
    args = SimpleNamespace(file=str(path), list=listing, case=None, policy=None, episode=None, full=False,
                           max_chars=50, no_system=False)
    code = show_trace.run(args, out=io.StringIO())
    assert code == (2 if trace_problem(t) or "messages" not in t else 0)  # a file without traces: refused


def test_a_results_file_holds_no_traces_and_is_refused(tmp_path, capsys):
    """The results file of a run is JSON Lines of records, not traces: refused in one line (exit 2), where it
    printed every record as a 'transcript' (113,310 lines for a test-split run) with exit 0."""
    from fwgym.evaluation import evaluate, write_results

    run = tmp_path / "run"
    write_results(evaluate(["hour_of_day_empirical"], split="test", limit=1, progress=False), run)
    results = run / "results.jsonl"
    assert main(["show-trace", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"fwgym show-trace: error: {results} holds no traces: none of its 2 lines has 'messages' or "
                   "'trace_version' (its lines are result records: this is a results file; the traces of a run are "
                   "in its traces.jsonl)")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["show-trace", str(empty)]) == 2
    assert capsys.readouterr().err.strip() == f"fwgym show-trace: error: {empty} holds no traces (no line)"


def test_the_checked_json_types_are_those_of_trace_and_the_records_come_back():
    from fwgym.cli.trace_shape import _FIELDS, check_traces

    assert list(_FIELDS.items()) == [("score", dict), ("settings", dict), ("final_plan", dict), ("usage", dict),
                                     ("replies", list), ("steps", list), ("messages", list)]
    traces = [{"policy": "p", "messages": []}, {"trace_version": 2, "score": None}]
    checked = check_traces(traces, "t.jsonl")
    assert checked == traces and all(a is b for a, b in zip(checked, traces))
    assert check_traces([{"messages": [], "score": {"S": 1.0}}], "t.jsonl")[0]["score"] == {"S": 1.0}
    with pytest.raises(ValueError, match=r"t.jsonl: episode \[1\] .*field 'score' is a list"):
        check_traces([{"messages": []}, {"score": []}], "t.jsonl")
