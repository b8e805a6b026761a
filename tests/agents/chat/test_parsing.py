"""Table tests of the text-answer parser (fwgym.agents.chat.parsing): accepted and rejected forms with reasons."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwgym.agents.chat.parsing import (
    AnswerError,
    normalise_decisions,
    normalise_submit_args,
    parse_number,
    parse_reply_text,
)

IDS = [f"b{i:02d}" for i in range(8)]
VALUES = [54103.0, 59513.25, 64923.5, 70333.75, 75744.0, 70333.75, 64923.5, 59513.25]
RECORDS = [{"decision_id": d, "value": v} for d, v in zip(IDS, VALUES)]
ANSWER = json.dumps({"decisions": RECORDS})
KEYED = json.dumps(dict(zip(IDS, VALUES)))


def _with(value_b00, raw=False):
    """The canonical answer with b00's value replaced by a raw JSON fragment (raw=True) or a JSON value."""
    frag = value_b00 if raw else json.dumps(value_b00)
    return ANSWER.replace("54103.0", frag, 1)


def _records(i, key, value):
    """The 8 canonical records with record ``i``'s ``key`` set to ``value``."""
    recs = [dict(r) for r in RECORDS]
    recs[i][key] = value
    return recs


# (case id, reply text, expected kind, expected code or source)
TABLE = [
    # --- accepted answers -------------------------------------------------------------------------
    ("whole-object", ANSWER, "answer", "whole"),
    ("whitespace-bom", "\ufeff \n " + ANSWER + "\n\n", "answer", "whole"),
    ("fence-json", "```json\n" + ANSWER + "\n```", "answer", "fence"),
    ("fence-plain", "My plan:\n```\n" + ANSWER + "\n```\nDone.", "answer", "fence"),
    ("prose", "After checking the hour-of-day plan, here it is: " + ANSWER + " Thanks.", "answer", "prose"),
    ("bare-list", json.dumps(RECORDS), "answer", "whole"),
    ("bare-list-in-prose", "Answer: " + json.dumps(RECORDS) + " (final)", "answer", "prose"),
    ("keyed-object", KEYED, "answer", "whole"),
    ("decisions-keyed", json.dumps({"decisions": dict(zip(IDS, VALUES))}), "answer", "whole"),
    ("extra-top-level-key", json.dumps({"rationale": "hour of day", "decisions": RECORDS}), "answer", "whole"),
    ("extra-record-key", json.dumps({"decisions": _records(0, "forecast_id", "f1")}), "answer", "whole"),
    ("records-out-of-order", json.dumps({"decisions": RECORDS[::-1]}), "answer", "whole"),
    ("numeric-string", _with("54103.0"), "answer", "whole"),
    ("numeric-string-exp", _with("5.4103e4"), "answer", "whole"),
    ("integer-value", _with("54103", raw=True), "answer", "whole"),
    # --- accepted tool calls ----------------------------------------------------------------------
    ("tool-call", '{"tool": "classical_plan", "args": {"method": "weekly_repeat"}}', "tool_call", "whole"),
    ("tool-call-no-args", 'Let me look first. {"tool": "catalog"}', "tool_call", "prose"),
    ("function-call-string-args", '{"name": "history", "arguments": "{\\"last\\": 24}"}', "tool_call", "whole"),
    ("function-call-object-args", '```json\n{"name": "quote", "arguments": {"model": "chronos2"}}\n```', "tool_call", "fence"),
    # --- rejected ---------------------------------------------------------------------------------
    ("empty", "", "error", "empty_reply"),
    ("whitespace-only", "  \n\t ", "error", "empty_reply"),
    ("prose-only", "I would buy a Chronos-2 forecast and then plan.", "error", "no_json"),
    ("number-only-then-prose", "42 is my answer", "error", "no_json"),
    ("two-objects", "First idea: " + ANSWER + "\nBetter idea: " + ANSWER, "error", "ambiguous_candidates"),
    ("fence-and-prose-copy", "```json\n" + ANSWER + "\n```\nSo the answer is " + ANSWER, "error", "ambiguous_candidates"),
    ("tool-call-and-answer", '{"tool": "catalog"} then ' + ANSWER, "error", "ambiguous_candidates"),
    ("truncated", "Here: " + ANSWER[:-30], "error", "malformed_decision_candidate"),
    ("single-quotes", ANSWER.replace('"', "'"), "error", "malformed_decision_candidate"),
    ("trailing-comma", ANSWER.replace("}]}", "},]}"), "error", "malformed_decision_candidate"),
    ("comment-inside", ANSWER.replace("[", "[ // plan\n", 1), "error", "malformed_decision_candidate"),
    ("duplicate-top-key", '{"decisions": [], "decisions": ' + json.dumps(RECORDS) + "}", "error", "duplicate_keys"),
    ("duplicate-record-key", _with('54103.0, "value": 1', raw=True), "error", "duplicate_keys"),
    ("nan", _with("NaN", raw=True), "error", "non_finite"),
    ("infinity", _with("-Infinity", raw=True), "error", "non_finite"),
    ("overflow-float", _with("1e999", raw=True), "error", "non_finite"),
    ("nan-string", _with("NaN"), "error", "not_a_number"),
    ("units", _with("54103 MW"), "error", "not_a_number"),
    ("arithmetic", _with("2*27051.5"), "error", "not_a_number"),
    ("thousands-comma", _with("54,103"), "error", "not_a_number"),
    ("padded-string", _with(" 54103"), "error", "not_a_number"),
    ("plus-sign", _with("+54103"), "error", "not_a_number"),
    ("hex", _with("0xD357"), "error", "not_a_number"),
    ("bool", _with(True), "error", "not_a_number"),
    ("null", _with(None), "error", "not_a_number"),
    ("huge-int", _with("1" + "0" * 400, raw=True), "error", "huge_number"),
    ("duplicate-id", json.dumps({"decisions": RECORDS + [RECORDS[3]]}), "error", "duplicate_decision"),
    ("seven-decisions", json.dumps({"decisions": RECORDS[:7]}), "error", "missing_decision"),
    ("unknown-id", json.dumps({"decisions": _records(7, "decision_id", "b08")}), "error", "unknown_decision_id"),
    ("uppercase-id", json.dumps({"decisions": _records(0, "decision_id", "B00")}), "error", "unknown_decision_id"),
    ("keyed-extra-key", json.dumps({**dict(zip(IDS, VALUES)), "note": 1}), "error", "unknown_decision_id"),
    ("keyed-missing", json.dumps(dict(zip(IDS[:6], VALUES))), "error", "missing_decision"),
    ("record-without-value", json.dumps({"decisions": [{"decision_id": d} for d in IDS]}), "error", "bad_record"),
    ("list-of-numbers", json.dumps(VALUES), "error", "not_an_answer"),
    ("unrelated-object", '{"plan": "hour of day"}', "error", "not_an_answer"),
    ("decisions-string", '{"decisions": "see above"}', "error", "not_an_answer"),
    ("tool-call-extra-key", '{"tool": "catalog", "args": {}, "why": "look"}', "error", "malformed_tool_call"),
    ("tool-call-args-list", '{"tool": "catalog", "args": [1]}', "error", "malformed_tool_call"),
    ("function-call-bad-args", '{"name": "history", "arguments": "{last: 24"}', "error", "malformed_tool_call"),
    ("brace-in-prose-with-marker", "The block {b00} should be high.", "error", "malformed_decision_candidate"),
    ("levels-and-decisions", json.dumps({"decisions": RECORDS, "levels": [1.0] * 8}), "error", "ambiguous_answer"),
    ("levels-too-short", json.dumps({"levels": [1.0, 1.0]}), "error", "bad_levels"),
    ("quantiles-in-a-decision-episode", json.dumps({"quantiles": [[1.0] * 9] * 24}), "error", "wrong_task_answer"),
    ("broken-levels", 'Final: {"levels": [1.0, 1.05,', "error", "malformed_decision_candidate"),
]

LEVELS = [1.0, 1.05, 1.1, 1.3, 1.6, 1.3, 1.0, 0.85]
QUANTILES = [[100.0 + h + 5 * k for k in range(9)] for h in range(24)]
SAMPLES = [[100.0 + h + s for h in range(24)] for s in range(3)]
#: (case id, task, reply text, expected kind, expected code / canonical submit args)
TASK_TABLE = [
    ("levels", "decision", json.dumps({"levels": LEVELS}), "answer", {"levels": LEVELS}),
    ("levels-strings", "decision", json.dumps({"levels": [str(x) for x in LEVELS]}), "answer", {"levels": LEVELS}),
    ("levels-with-rationale", "decision", "Plan:\n```json\n" + json.dumps({"why": "peak", "levels": LEVELS}) + "\n```",
     "answer", {"levels": LEVELS}),
    ("quantiles", "forecast", json.dumps({"quantiles": QUANTILES}), "answer", {"quantiles": QUANTILES}),
    ("samples-in-prose", "forecast", "My paths: " + json.dumps({"samples": SAMPLES}) + " done", "answer",
     {"samples": SAMPLES}),
    ("quantiles-23-rows", "forecast", json.dumps({"quantiles": QUANTILES[:23]}), "error", "bad_forecast_shape"),
    ("quantiles-8-levels", "forecast", json.dumps({"quantiles": [r[:8] for r in QUANTILES]}), "error", "bad_forecast_shape"),
    ("one-sample", "forecast", json.dumps({"samples": SAMPLES[:1]}), "error", "bad_forecast_shape"),
    ("quantiles-and-samples", "forecast", json.dumps({"quantiles": QUANTILES, "samples": SAMPLES}), "error",
     "ambiguous_answer"),
    ("quantile-unit", "forecast", json.dumps({"quantiles": [["100 MW"] + r[1:] for r in QUANTILES]}), "error",
     "not_a_number"),
    ("decisions-in-a-forecast-episode", "forecast", ANSWER, "error", "wrong_task_answer"),
    ("keyed-in-a-forecast-episode", "forecast", KEYED, "error", "not_an_answer"),
    ("broken-quantiles", "forecast", 'here {"quantiles": [[1, 2', "error", "malformed_decision_candidate"),
    ("forecast-tool-call", "forecast", '{"tool": "forecast", "args": {"model": "chronos2"}}', "tool_call", None),
]


@pytest.mark.parametrize("case_id,task,text,kind,detail", TASK_TABLE, ids=[t[0] for t in TASK_TABLE])
def test_parse_table_by_task(case_id, task, text, kind, detail):
    """One answer grammar: a text answer is the submit tool's arguments of the episode's task."""
    r = parse_reply_text(text, task=task)
    assert r.kind == kind, (case_id, r)
    if kind == "error":
        assert r.code == detail and len(r.message) > 20
        if task == "forecast":
            assert "quantiles" in r.message or "samples" in r.message or r.code == "not_a_number"
    elif kind == "answer":
        assert r.answer == detail and r.action() == {"tool": "submit", "args": detail}
        assert r.action()["args"] is not r.answer  # a copy
        assert normalise_submit_args(detail, task) == detail  # the same grammar as the submit tool


def test_table_is_large_enough():
    assert len(TABLE) >= 25
    assert sum(1 for t in TABLE if t[2] == "error") >= 25


@pytest.mark.parametrize("case_id,text,kind,detail", TABLE, ids=[t[0] for t in TABLE])
def test_parse_table(case_id, text, kind, detail):
    r = parse_reply_text(text)
    assert r.kind == kind, (case_id, r)
    if kind == "error":
        assert r.code == detail
        assert r.message and len(r.message) > 20  # a clear explanation for the model
        assert r.action() is None
    else:
        assert r.source == detail
        assert r.action() is not None


@pytest.mark.parametrize("case_id,text,kind,detail", [t for t in TABLE if t[2] == "answer"],
                         ids=[t[0] for t in TABLE if t[2] == "answer"])
def test_answers_are_canonical_and_unrounded(case_id, text, kind, detail):
    r = parse_reply_text(text)
    assert [d["decision_id"] for d in r.decisions] == IDS
    got = [d["value"] for d in r.decisions]
    assert got == VALUES and all(type(v) is float for v in got)
    assert all(set(d) == {"decision_id", "value"} for d in r.decisions)  # extra record keys dropped
    action = r.action()
    assert action["tool"] == "submit" and action["args"]["decisions"] == [dict(d) for d in r.decisions]


def test_off_grid_values_are_not_snapped():
    r = parse_reply_text(_with("54103.0000001", raw=True))
    assert r.kind == "answer" and r.decisions[0]["value"] == 54103.0000001


def test_tool_call_details():
    r = parse_reply_text('{"name": "history", "arguments": "{\\"last\\": 24}"}')
    assert r.action() == {"tool": "history", "args": {"last": 24}}
    assert parse_reply_text('{"tool": "catalog", "args": null}').action() == {"tool": "catalog", "args": {}}


def test_tool_calls_can_be_disabled():
    r = parse_reply_text('{"tool": "catalog"}', allow_tool_calls=False)
    assert r.kind == "error" and r.code == "not_an_answer"
    assert parse_reply_text(ANSWER, allow_tool_calls=False).kind == "answer"


def test_parse_number_rules():
    assert parse_number("-0") == 0.0 and parse_number("1.5E+3") == 1500.0 and parse_number(7) == 7.0
    for bad, code in [("01", "not_a_number"), ("1.", "not_a_number"), (".5", "not_a_number"), ("1e", "not_a_number"),
                      ("inf", "not_a_number"), (float("nan"), "non_finite"), ("1e400", "non_finite"), ([1], "not_a_number"),
                      (10 ** 40, "huge_number"), ("9" * 31, "huge_number")]:
        with pytest.raises(AnswerError) as ei:
            parse_number(bad, "b01")
        assert ei.value.code == code and "b01" in ei.value.message


def test_normalise_decisions_and_submit_args():
    assert normalise_decisions(dict(zip(IDS, map(str, VALUES))))[1] == {"decision_id": "b01", "value": 59513.25}
    with pytest.raises(AnswerError):
        normalise_decisions(42)
    assert normalise_submit_args({"levels": ["1.0"] + [1.05] * 7})["levels"][0] == 1.0
    with pytest.raises(AnswerError) as ei:
        normalise_submit_args({"levels": [1.0] * 7})
    assert ei.value.code == "bad_levels"
    with pytest.raises(AnswerError):
        normalise_submit_args({"decisions": RECORDS[:3]})
    for odd, code in [({"decisions": RECORDS, "levels": [1.0] * 8}, "ambiguous_answer"), ({}, "not_an_answer"),
                      ({"levels": [1.0] * 8, "note": 1}, "unknown_answer_key"),
                      ({"quantiles": [[1.0] * 9] * 24}, "wrong_task_answer")]:
        with pytest.raises(AnswerError) as ei:
            normalise_submit_args(odd)
        assert ei.value.code == code, odd


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]":,.-+0123456789eE abdn_ilsvtuoc\n`')), max_size=200))
def test_parser_never_raises(text):
    r = parse_reply_text(text)
    assert r.kind in ("answer", "tool_call", "error")
    if r.kind == "error":
        assert r.code and r.message


def test_non_text_and_oversized_inputs():
    assert parse_reply_text(None).code == "empty_reply"
    assert parse_reply_text(b"{}").code == "unreadable_reply"
    assert parse_reply_text("x" * 300_000).code == "reply_too_long"
