"""The one header writer renders the trust marks of fwgym.evaluation.marks (NOT HASH-CHECKED, EXPOSED) beside
its own (PARTIAL, W=<w>), in the header line, the CSV/JSON columns and the figures' mark."""
from __future__ import annotations

from fwgym.evaluation.header import (NOT_HASH_CHECKED, loss_weight_mark, make_header, mark_rows, not_hash_checked_mark,
                                     trust_marks)
from fwgym.evaluation.marks import MARK_COLUMNS, format_marks, row_marks
from fwgym.core.cases import build_cases


def _records(n: int = 3) -> list[dict]:
    """Records of two policies on the first ``n`` test cases of cycle hire (only the fields the header reads)."""
    cases = [c.case_id for c in build_cases("cycle_hire", "test")][:n]
    return [{"policy": p, "case_id": c, "split": "test", "domain": "cycle_hire", "exposed": p == "agent" and k == 0}
            for p in ("agent", "weekday_empirical") for k, c in enumerate(cases)]


def test_row_marks_become_header_marks_and_columns():
    recs = _records()
    manifest = {"settings": {"agents": {"agent": {"kind": "openai"}, "weekday_empirical": "weekday_empirical"}}}
    marks = row_marks(manifest, recs)
    # an LLM played by fwgym's harness is not an in-process code agent (its code is fwgym's)
    assert marks["agent"]["exposed"] == 1 and marks["agent"]["isolation"] == "harness"
    got = trust_marks(marks, {"agent": 3, "weekday_empirical": 3})
    assert [m.code for m in got] == ["EXPOSED"] and got[0].policies == frozenset({"agent"})
    # the EXPOSED text is the marks module's own line, not a second wording
    assert got[0].text == next(x for x in format_marks(marks, {"agent": 3, "weekday_empirical": 3})
                               if x.startswith("EXPOSED"))
    header = make_header(recs, suite="decision", formula="S", marks=[*got, loss_weight_mark(0.25)], row_marks=marks,
                         notes=[got[0].text, "EXPOSED: a note load_results wrote with other counts", "other note"])
    assert header.codes == ["EXPOSED", "W=0.25", "PARTIAL"]
    assert header.line().startswith("fwgym leaderboard (EXPOSED, W=0.25, PARTIAL): ")
    assert header.all_notes()[-1] == "other note" and sum(n.startswith("EXPOSED") for n in header.all_notes()) == 1
    rows = header.csv_rows([{"policy": "agent", "S": 0.1}, {"policy": "weekday_empirical", "S": 0.2}])
    assert list(rows[0]) == ["policy", "S", *MARK_COLUMNS, "partial"]
    assert [(r["exposed"], r["hash_checked"], r["isolation"], r["in_process"], r["partial"]) for r in rows] == [
        (1, True, "harness", False, True), (0, True, "fwgym", False, True)]
    assert header.figure_mark()[0].startswith("EXPOSED: records replayed after their target was sent; W=0.25: ")


def test_not_hash_checked_rows_without_row_marks():
    recs = [{**r, "exposed": False} for r in _records(2)]
    mark = not_hash_checked_mark(["agent"], "NOT HASH-CHECKED: a.jsonl has no manifest.json")
    assert mark is not None and mark.code == NOT_HASH_CHECKED and not_hash_checked_mark([]) is None
    rows = mark_rows([{"policy": "agent"}, {"policy": "weekday_empirical"}], [mark])
    assert [(r["hash_checked"], r["isolation"], r["partial"]) for r in rows] == [(False, "unknown", False),
                                                                               (True, "unknown", False)]
    # a source without a manifest: every row not hash-checked, said once in the header
    marks = row_marks(None, recs)
    got = trust_marks(marks, text="NOT HASH-CHECKED: a.jsonl has no manifest.json")
    header = make_header(recs, suite="decision", formula="S", marks=got, row_marks=marks,
                         notes=["NOT HASH-CHECKED: a.jsonl has no manifest.json"])
    assert header.codes == [NOT_HASH_CHECKED, "PARTIAL"]
    assert header.line().count("a.jsonl has no manifest.json") == 1
    assert {r["hash_checked"] for r in header.csv_rows([{"policy": "agent"}])} == {False}


def test_intervals_over_one_series_are_cautioned_and_zero_width_only_when_every_domain_has_one():
    from fwgym.evaluation.header import single_cluster_notes

    def rec(domain, series):
        return {"policy": "p", "case_id": f"{domain}-{series}", "domain": domain, "series_id": series,
                "cohort": f"{domain}-x", "lead": "day_ahead", "split": "dev", "S": 0.0}

    one = [rec("cycle_hire", "191")]
    assert single_cluster_notes(one) == [
        "CAUTION: cycle_hire has one series: the series-cluster bootstrap cannot resample it, so the intervals "
        "leave its variation out (they are 0 wide here, which is no certainty)"]
    mixed = one + [rec("electricity", "PJM"), rec("electricity", "ISNE")]
    assert single_cluster_notes(mixed)[0].endswith("leave its variation out")
    assert single_cluster_notes(mixed[1:]) == []
    h = make_header(mixed, suite="decision", formula="S", reference="p", n_boot=10, seed=1)
    assert any(n.startswith("CAUTION: cycle_hire has one series") for n in h.all_notes())
    assert not any(n.startswith("CAUTION") for n in make_header(mixed, suite="decision", formula="S").all_notes())


def test_code_agents_in_the_evaluating_process_or_unsandboxed_are_marked_in_the_title():
    from fwgym.evaluation.header import isolation_marks

    recs = _records()
    manifest = {"settings": {"agents": {"agent": {"factory": "mymod:make_agent"}, "weekday_empirical": "weekday_empirical"}}}
    marks = row_marks(manifest, recs)
    assert marks["agent"]["isolation"] == "in-process" and marks["agent"]["in_process"]
    (m,) = isolation_marks(marks)
    assert m.code == "IN-PROCESS" and m.policies == frozenset({"agent"}) and m.text.startswith("IN-PROCESS: 'agent'")
    header = make_header(recs, suite="decision", formula="S", marks=trust_marks(marks), row_marks=marks)
    assert "IN-PROCESS" in header.codes and "IN-PROCESS: 'agent' ran in the evaluating process" in header.line()
    unsandboxed = row_marks({"settings": {"agents": {"agent": {"worker_command": ["python"], "isolation": "process"}}}},
                            recs)
    assert [x.code for x in isolation_marks(unsandboxed)] == ["NO SANDBOX"]
    for kind, iso in (("openai", "harness"), ("transformers", "harness"), ("mcp", "external"), ("inspect", "external")):
        marks = row_marks({"settings": {"agents": {"agent": {"kind": kind}}}}, recs)
        assert marks["agent"]["isolation"] == iso and isolation_marks(marks) == []
