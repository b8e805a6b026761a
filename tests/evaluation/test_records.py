"""The one record schema (fwgym.evaluation.records): the env and the episode loop emit exactly its fields,
no other field list exists in the package, and the checks of single records and of record sets."""
import ast
import typing
from pathlib import Path

import pytest
from scripted_agents import BuyThenSubmitQuantiles, PlanAndSubmit, Script

import fwgym
from fwgym.agents import run_episode
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import SUITES, evaluate
from fwgym.agents.base import EPISODE_STATS_KEYS, RESOURCE_KEYS
from fwgym.evaluation.records import (ACCOUNTING_FIELDS, CORE_FIELDS, ENV_FIELDS, FIELD_MEANINGS, FORECAST_TASK_FIELDS,
                                      RECORD_FIELDS, RESOURCE_FIELDS, RUN_FIELDS, EVALUATION_FIELDS, Record, check_record,
                                      check_result_set, coverage,
                                      is_scored, stored_record)

PACKAGE = Path(fwgym.__file__).parent


ENDINGS = {  # agent -> the status it ends with, in a decision env
    "submitted": PlanAndSubmit,
    "invalid_submission": lambda: Script({"tool": "submit",
                                          "args": {"decisions": [{"decision_id": "b00", "value": 1}]}}),
    "abstained": lambda: Script({"tool": "abstain", "args": {"reason": "no idea"}}),
    "call_limit_exceeded": lambda: Script({"tool": "catalog"}),
}


def _terminal_info(env, agent, case_id):
    obs, info = env.reset(options={"case_id": case_id})
    agent.reset()
    while True:
        obs, _, term, trunc, info = env.step(agent.act(obs))
        if term or trunc:
            return info


@pytest.mark.parametrize("suite", list(SUITES))
def test_env_terminal_info_is_the_schema(suite):
    # the env's terminal info carries exactly the schema's env fields (and the step's tool_result);
    # the forecast-task fields exactly in forecast-task envs
    env = FWBenchEnv(("electricity", "cycle_hire"), split="test", max_calls=3, **SUITES[suite])
    forecast = SUITES[suite].get("task") == "forecast"
    expected = set(ENV_FIELDS) if forecast else set(ENV_FIELDS) - set(FORECAST_TASK_FIELDS)
    agents = dict(ENDINGS)
    if forecast:
        agents["submitted"] = BuyThenSubmitQuantiles
        agents["invalid_submission"] = lambda: Script({"tool": "submit", "args": {"quantiles": [[1.0] * 9]}})
    for status, make in agents.items():
        for case in (env.cases[0], env.cases[-1]):  # both domains
            info = _terminal_info(env, make(), case.case_id)
            assert info["status"] == status
            assert set(info) - {"tool_result"} == expected, status
            record = run_episode(env, make(), options={"case_id": case.case_id}).record
            assert set(record) == expected | {"policy"} | set(RUN_FIELDS) | set(ACCOUNTING_FIELDS) | set(RESOURCE_FIELDS)
            assert record["episode_wall_s"] > 0 and record["cpu_s"] >= 0 and record["peak_rss_mib"] > 10
            assert record["scored"] is True and record["harness_kind"] is None and record["episode_id"] is None
            assert all(record[k] is None for k in ACCOUNTING_FIELDS)  # a scripted agent has no episode_stats
            assert (record["submission"] is not None) == (forecast and status == "submitted")
            check_record(record)


def test_schema_fields_types_and_meanings():
    assert RECORD_FIELDS[0] == "policy"
    assert set(RECORD_FIELDS) == (set(ENV_FIELDS) | {"policy"} | set(RUN_FIELDS) | set(ACCOUNTING_FIELDS)
                                  | set(RESOURCE_FIELDS) | set(EVALUATION_FIELDS))
    assert len(set(RECORD_FIELDS)) == len(RECORD_FIELDS) == 47
    assert RESOURCE_FIELDS == RESOURCE_KEYS == ("episode_wall_s", "cpu_s", "peak_rss_mib", "pss_mib")
    assert RUN_FIELDS == ("episode_id", "scored", "harness_kind", "tool_calls")
    assert EVALUATION_FIELDS == ("exposed",)
    assert ACCOUNTING_FIELDS == EPISODE_STATS_KEYS == ("prompt_tokens", "completion_tokens", "failed_tokens", "model_turns",
                                                       "requests", "request_latency_s", "wall_s", "served_model")
    # the fields of the results files of fwgym 0.1.0, the "core" projection of the behaviour hashes
    assert CORE_FIELDS == ("policy", "case_id", "domain", "cohort", "series_id", "lead", "split", "loss", "floor",
                           "R", "S", "credits", "calls", "valid", "status", "reason", "tool_counts", "levels")
    assert FORECAST_TASK_FIELDS == ("rcrps", "crps", "alpha", "rcrps_no_violation", "rcrps_fair")
    assert Record.__required_keys__ == frozenset(RECORD_FIELDS) - set(FORECAST_TASK_FIELDS) - set(EVALUATION_FIELDS)
    hints = typing.get_type_hints(Record)
    assert hints["S"] == float | None and hints["credits"] is int and hints["valid"] is bool  # None: not scored
    assert hints["scored"] is bool and hints["request_latency_s"] == list[float] | None
    assert hints["levels"] == list[float] | None
    assert all(len(FIELD_MEANINGS[f]) > 10 for f in RECORD_FIELDS)
    assert all(f"        {f} (" in Record.__doc__ for f in RECORD_FIELDS)


def _string_collections(tree):
    """Tuple/list/set literals of string constants, and the string keys of dict literals, with their line."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        names = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if names:
            yield type(node).__name__, node.lineno, names


#: places allowed to name many record fields at once: the env BUILDS the record (the test above ties it to the
#: schema); the chat agent's trace "score" is a projection of 9 fields (to switch to a schema group)
PRODUCERS = {("envs/fwbench.py", "Dict")}


def test_the_schema_is_the_only_field_list():
    # no literal outside records.py names 10 or more of the record's fields: a second field list would drift
    fields = set(RECORD_FIELDS)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "evaluation/records.py":
            continue
        for kind, line, names in _string_collections(ast.parse(path.read_text(encoding="utf-8"))):
            if len(names & fields) >= 10 and (rel, kind) not in PRODUCERS:
                found.append(f"{rel}:{line} {sorted(names & fields)}")
    assert found == []
    # the probe finds the copy that existed before the schema (evaluation.RECORD_FIELDS of fwgym 0.1.0)
    old = "RECORD_FIELDS = (" + ", ".join(repr(f) for f in CORE_FIELDS) + ")"
    assert [len(n & fields) for _, _, n in _string_collections(ast.parse(old))] == [18]


def test_check_record_names_what_is_wrong():
    env = FWBenchEnv("cycle_hire", split="test")
    cid = env.cases[0].case_id
    rec = run_episode(env, PlanAndSubmit(), options={"case_id": cid}).record
    check_record(rec)
    assert stored_record(rec) == rec and list(stored_record(rec)) == [f for f in RECORD_FIELDS if f in rec]
    with pytest.raises(ValueError, match=rf"x.jsonl:3: result record of policy 'plan_and_submit' on case "
                                         rf"'{cid}' lacks \['S'\]"):
        check_record({k: v for k, v in rec.items() if k != "S"}, where="x.jsonl:3")
    with pytest.raises(ValueError, match=r"holds fields the record schema does not name \['score'\]"):
        stored_record({**rec, "score": 1.0})
    check_record({k: rec[k] for k in CORE_FIELDS}, required=CORE_FIELDS)
    with pytest.raises(ValueError, match="lacks"):
        check_record({k: rec[k] for k in CORE_FIELDS})  # the detail fields are required unless said otherwise


# --- result sets (issue 6) -------------------------------------------------------------------------


def _fake(policy, cohort, series, lead, S, i=0, domain="electricity"):
    return {"policy": policy, "case_id": f"{cohort}-{series}-{lead}-{i}", "domain": domain, "cohort": cohort,
            "series_id": series, "lead": lead, "split": "test", "S": S, "R": 2 * S, "loss": S / 10, "floor": 0.0,
            "credits": 0, "calls": 1, "valid": True, "status": "submitted", "tool_counts": {"submit": 1}}


def test_partial_or_duplicated_result_sets_are_rejected():
    recs = [_fake("p", "X", "A", "day_ahead", 1.0), _fake("p", "X", "B", "day_ahead", 2.0),
            _fake("q", "X", "A", "day_ahead", 1.5)]
    with pytest.raises(ValueError, match="partial result set: policies were evaluated on different cases"):
        check_result_set(recs)
    with pytest.raises(ValueError, match="duplicated result set"):
        check_result_set(recs[:2] + recs[:1])
    with pytest.raises(ValueError, match="no result records"):
        check_result_set([])
    harness = {**recs[0], "status": "harness_error", "scored": False, "S": None, "R": None, "loss": None,
               "floor": None, "valid": False}
    assert not is_scored(harness) and is_scored(recs[0])
    with pytest.raises(ValueError, match=r"incomplete result set: policy 'p' has 1 harness_error episode\(s\) with "
                                         r"no score .* `fwgym evaluate --resume DIR`"):
        check_result_set([harness, recs[1]])
    real = evaluate(["weekday_empirical"], split="test", limit=3, progress=False)
    with pytest.raises(ValueError, match="partial result set: it covers 6 of the 1259 cases"):
        check_result_set(real, complete=True)
    stray = {**real[0], "case_id": "cycle-0-2015-10-01-day_ahead", "domain": "cycle_hire"}
    with pytest.raises(ValueError, match="holds 1 case ids that are not in the split index"):
        full = evaluate(["weekday_empirical"], split="test", progress=False, domains=["cycle_hire"])
        check_result_set([*full, stray], complete=True)
    cov = coverage(real)
    assert cov == {"cases": 6, "index_cases": 1259, "complete": False,
                   "by_domain": {"test/cycle_hire": [3, 157], "test/electricity": [3, 1102]}}
