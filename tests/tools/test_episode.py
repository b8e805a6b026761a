"""fwgym.tools.episode: the ledger's call-counting rule (read from Tool.counts_as_call), call-limit
policies, charging and the tool tallies, on episodes built without an env.

The rule table below is written out by hand (max_calls = 3; "below" starts at 2 counted calls,
"at" at 3); it is not derived from the code under test.
"""
from dataclasses import replace

import numpy as np
import pytest

from fwgym.core.cases import Case
from fwgym.core.series import hour_to_iso
from fwgym.tools import ERROR, REGISTRY, TERMINATE, CallOutcome, Episode, parse_action
from fwgym.tools import episode as episode_module

MAX = 3
START = {"below": 2, "at": 3}
ORIGIN = "2024-07-17T11:00:00Z"  # 10 hours before the last visible hour 2024-07-17T21:00Z

#: (label, action, kind, code of the result when the tool runs, credits it charges when it runs)
#: kinds: "count" (counts whatever its outcome), "answer" (accepted submit/abstain), "refused_answer"
#: (malformed submit/abstain), "invalid_plan" (a submit whose plan is not valid)
ACTIONS = [
    ("catalog ok", {"tool": "catalog"}, "count", None, 0),
    ("catalog refused", {"tool": "catalog", "args": {"x": 1}}, "count", "invalid_arguments", 0),
    ("history ok", {"tool": "history", "args": {"last": 3}}, "count", None, 0),
    ("history refused", {"tool": "history", "args": {"end": "2024-07-17T22:00:00Z"}}, "count", "out_of_range", 0),
    ("classical_plan ok", {"tool": "classical_plan", "args": {"method": "weekly_repeat"}}, "count", None, 0),
    ("classical_plan refused", {"tool": "classical_plan", "args": {"method": "prophet"}}, "count", "invalid_arguments", 0),
    ("plan ok", {"tool": "plan", "args": {"method": "weekly_repeat"}}, "count", None, 0),
    ("plan refused", {"tool": "plan", "args": {"forecast_id": "f1"}}, "count", "not_found", 0),
    ("evaluate_plan ok", {"tool": "evaluate_plan", "args": {"method": "weekly_repeat", "levels": [1.0] * 8}}, "count", None, 0),
    ("evaluate_plan refused", {"tool": "evaluate_plan", "args": {"method": "weekly_repeat", "levels": [1.01] * 8}},
     "count", "invalid_plan", 0),
    ("quote ok", {"tool": "quote", "args": {"model": "seasonal_empirical"}}, "count", None, 0),
    ("quote refused", {"tool": "quote", "args": {"model": "prophet"}}, "count", "invalid_arguments", 0),
    ("forecast ok", {"tool": "forecast", "args": {"model": "seasonal_empirical"}}, "count", None, 1027),
    ("forecast refused", {"tool": "forecast", "args": {"model": "timesfm25"}}, "count", "insufficient_budget", 0),
    ("replay ok", {"tool": "replay", "args": {"model": "seasonal_empirical", "origin": ORIGIN}}, "count", None, 1027),
    ("replay refused", {"tool": "replay", "args": {"model": "seasonal_empirical", "origin": "2024-07-17T22:00:00Z"}},
     "count", "out_of_range", 0),
    ("invalid action", "{not json", "count", "invalid_json", 0),
    ("unknown tool", {"tool": "teleport"}, "count", "unknown_tool", 0),
    ("submit ok", {"tool": "submit", "args": {"levels": [1.0] * 8}}, "answer", None, 0),
    ("abstain ok", {"tool": "abstain", "args": {"reason": "done"}}, "answer", None, 0),
    ("submit refused", {"tool": "submit", "args": {}}, "refused_answer", "invalid_arguments", 0),
    ("abstain refused", {"tool": "abstain", "args": {"reason": 5}}, "refused_answer", "invalid_arguments", 0),
    ("submit invalid plan", {"tool": "submit", "args": {"levels": [1.0] * 7 + [1.02]}}, "invalid_plan", "invalid_plan", 0),
]

#: (kind, start, call_limit, invalid_submission) -> (calls after, ends, the tool ran, result code)
#: "code" = the tool's own code; "call_limit" = the ledger's refusal; None = no result (terminal)
RULES = {
    # a counted tool below the limit: runs and counts, whatever the policies
    **{("count", "below", cl, inv): (3, None, True, "code") for cl in (TERMINATE, ERROR) for inv in (TERMINATE, ERROR)},
    # at the limit: call 4 ends the episode without running, or is refused free and not counted
    **{("count", "at", TERMINATE, inv): (4, "call_limit_exceeded", False, None) for inv in (TERMINATE, ERROR)},
    **{("count", "at", ERROR, inv): (3, None, False, "call_limit") for inv in (TERMINATE, ERROR)},
    # an accepted answer never counts and is never blocked by the limit
    **{("answer", s, cl, inv): (START[s], "ends", True, "code") for s in START for cl in (TERMINATE, ERROR)
       for inv in (TERMINATE, ERROR)},
    # a refused answer counts below the limit; at it: call 4 ends the episode, or it is refused and not counted
    **{("refused_answer", "below", cl, inv): (3, None, True, "code") for cl in (TERMINATE, ERROR) for inv in (TERMINATE, ERROR)},
    **{("refused_answer", "at", TERMINATE, inv): (4, "call_limit_exceeded", True, "code") for inv in (TERMINATE, ERROR)},
    **{("refused_answer", "at", ERROR, inv): (3, None, True, "code") for inv in (TERMINATE, ERROR)},
    # an invalid plan ends the episode uncounted (protocol), or is a refused answer (invalid_submission="error")
    **{("invalid_plan", s, cl, TERMINATE): (START[s], "invalid_submission", True, "code") for s in START
       for cl in (TERMINATE, ERROR)},
    ("invalid_plan", "below", TERMINATE, ERROR): (3, None, True, "code"),
    ("invalid_plan", "below", ERROR, ERROR): (3, None, True, "code"),
    ("invalid_plan", "at", TERMINATE, ERROR): (4, "call_limit_exceeded", True, "code"),
    ("invalid_plan", "at", ERROR, ERROR): (3, None, True, "code"),
}


def test_the_rule_table_is_complete():
    kinds = {a[2] for a in ACTIONS}
    assert len(RULES) == len(kinds) * 2 * 2 * 2 == 32


@pytest.mark.parametrize("invalid_submission", [TERMINATE, ERROR])
@pytest.mark.parametrize("call_limit", [TERMINATE, ERROR])
@pytest.mark.parametrize("start", list(START))
@pytest.mark.parametrize("label,action,kind,code,credits", ACTIONS, ids=[a[0] for a in ACTIONS])
def test_counting_rule(make_episode, label, action, kind, code, credits, start, call_limit, invalid_submission):
    ep = make_episode(max_calls=MAX, calls=START[start], call_limit=call_limit, invalid_submission=invalid_submission)
    out = ep.apply(parse_action(action))
    calls, ends, ran, result_code = RULES[(kind, start, call_limit, invalid_submission)]
    name = "invalid" if isinstance(action, str) else action["tool"]
    assert isinstance(out, CallOutcome)
    assert ep.calls == calls and ep.calls_left == max(0, MAX - calls)
    if ends == "ends":
        ends = {"submit": "submitted", "abstain": "abstained"}[name]
    assert out.ends == ends
    assert out.charged == ep.spent == (credits if ran else 0)
    if result_code is None:
        assert out.result is None
    else:
        want = code if result_code == "code" else result_code
        assert out.result["tool"] == name and out.result["ok"] is (want is None)
        assert want is None or out.result["error"]["code"] == want
    if ends == "call_limit_exceeded":
        assert out.tool == name and out.reason.startswith("call 4 ") and "exceeds the limit of 3 tool calls" in out.reason
    # the tally: every call, except one refused at the limit in "error" mode
    refused_free = kind == "count" and start == "at" and call_limit == ERROR
    assert dict(ep.tool_counts) == ({} if refused_free else {name: 1})


def test_terminal_outcomes_carry_status_reason_and_tool(make_episode):
    ep = make_episode(max_calls=MAX, calls=MAX)
    out = ep.apply(parse_action({"tool": "catalog"}))
    assert out == CallOutcome(None, 0, "call_limit_exceeded", "call 4 exceeds the limit of 3 tool calls", "catalog")
    ep = make_episode(max_calls=MAX, calls=MAX)
    out = ep.apply(parse_action({"tool": "submit", "args": {"x": 1}}))
    assert (out.ends, out.tool) == ("call_limit_exceeded", "submit")
    assert out.reason == "call 4 (a refused submit: invalid_arguments) exceeds the limit of 3 tool calls"
    ep = make_episode()
    out = ep.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 7 + [1.02]}}))
    assert (out.ends, out.tool, ep.submission) == ("invalid_submission", "submit", None)
    assert out.reason == out.result["error"]["message"] and out.reason.startswith("off_grid: ")
    ep = make_episode()
    out = ep.apply(parse_action({"tool": "abstain", "args": {}}))
    assert out[2:] == ("abstained", "no reason given", "abstain") and out.result == {"tool": "abstain", "ok": True,
                                                                                    "result": {"abstained": True}}
    ep = make_episode()
    out = ep.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 8}}))
    assert out[2:] == ("submitted", "", "submit") and np.array_equal(ep.submission.levels, np.ones(8))


def test_a_disallowed_tool_is_an_unknown_tool_that_counts(make_episode):
    ep = make_episode(tools={t: REGISTRY[t] for t in ("catalog", "submit", "abstain")})
    out = ep.apply(parse_action({"tool": "forecast", "args": {"model": "seasonal_empirical"}}))
    assert out.result["error"]["code"] == "unknown_tool" and ep.calls == 1 and ep.spent == 0
    assert "['catalog', 'submit', 'abstain']" in out.result["error"]["message"]
    assert dict(ep.tool_counts) == {"forecast": 1}
    # an answer tool the episode does not allow counts too (it is unknown there)
    ep = make_episode(tools={"catalog": REGISTRY["catalog"]})
    out = ep.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 8}}))
    assert out.ends is None and out.result["error"]["code"] == "unknown_tool" and ep.calls == 1 and ep.submission is None


def test_counts_as_call_is_the_flag_the_ledger_reads(make_episode):
    tools = {t: REGISTRY[t] for t in REGISTRY}
    # flipped to False: an accepted catalog no longer counts, a refused one still does
    free = make_episode(tools={**tools, "catalog": replace(REGISTRY["catalog"], counts_as_call=False)})
    free.apply(parse_action({"tool": "catalog"}))
    assert free.calls == 0
    free.apply(parse_action({"tool": "catalog", "args": {"x": 1}}))
    assert free.calls == 1
    # flipped to True: an accepted submit counts, and at the limit it is blocked like any counted call
    counted = make_episode(tools={**tools, "submit": replace(REGISTRY["submit"], counts_as_call=True)})
    out = counted.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 8}}))
    assert out.ends == "submitted" and counted.calls == 1
    blocked = make_episode(max_calls=0, tools={**tools, "submit": replace(REGISTRY["submit"], counts_as_call=True)})
    out = blocked.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 8}}))
    assert out.ends == "call_limit_exceeded" and blocked.submission is None
    # the registered flags, as the env uses them
    normal = make_episode(max_calls=0)
    assert normal.apply(parse_action({"tool": "submit", "args": {"levels": [1.0] * 8}})).ends == "submitted"


def test_charges_are_the_tariff_and_never_exceed_the_budget(make_episode):
    ep = make_episode(budget=2100)
    for _ in range(2):  # seasonal_empirical 336/50: 1027 credits each
        out = ep.apply(parse_action({"tool": "forecast", "args": {"model": "seasonal_empirical"}}))
        assert out.result["ok"] and out.charged == 1027
    assert ep.spent == 2054 and ep.budget_left == 46 and ep.calls == 2
    out = ep.apply(parse_action({"tool": "forecast", "args": {"model": "seasonal_empirical", "horizon": 24}}))  # 400
    assert out.result["error"]["code"] == "insufficient_budget" and out.charged == 0 and ep.spent == 2054
    assert "costs 400 credits but only 46 remain; nothing was charged" in out.result["error"]["message"]
    assert list(ep.forecasts) == ["f1", "f2"] and ep.calls == 3


def test_a_handler_that_crashes_is_an_internal_error_result(make_episode):
    def boom(ep, args):
        raise ZeroDivisionError("division by zero")

    ep = make_episode(tools={"catalog": replace(REGISTRY["catalog"], handler=boom)})
    out = ep.apply(parse_action({"tool": "catalog"}))
    assert out.result == {"tool": "catalog", "ok": False, "error": {
        "code": "internal_error", "message": "catalog failed unexpectedly: ZeroDivisionError: division by zero"}}
    assert ep.calls == 1


def test_policies_and_tools_are_checked(case):
    with pytest.raises(TypeError, match="tools must map names to Tool objects"):
        Episode(case=case, tools=("catalog", "submit"))
    with pytest.raises(ValueError, match="call_limit and invalid_submission"):
        Episode(case=case, call_limit="soft")
    with pytest.raises(ValueError, match="call_limit and invalid_submission"):
        Episode(case=case, invalid_submission=True)


def test_no_tool_reads_hindsight(make_episode, monkeypatch):
    """Leakage probe of the tool layer: with the realised target unreadable, every tool still works."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a tool read the hindsight target")

    monkeypatch.setattr(Case, "target", forbidden)
    monkeypatch.setattr(episode_module.Episode, "target", forbidden)
    ep = make_episode()
    actions = [a for _, a, kind, code, _ in ACTIONS if code is None and kind == "count"]
    actions += [{"tool": "plan", "args": {"forecast_id": "f1"}},
                {"tool": "evaluate_plan", "args": {"forecast_id": "f1", "levels": [1.0] * 8}},
                {"tool": "history", "args": {"start": hour_to_iso(ep.case.history_start), "end": hour_to_iso(ep.case.last_visible)}},
                {"tool": "submit", "args": {"levels": [1.0] * 8}}]
    for action in actions:
        out = ep.apply(parse_action(action))
        assert out.result["ok"], (action, out.result)
