"""The breakdown by scenario family and CiK context type (fwgym.evaluation.breakdown, issue 27): hand-built
weighted means with and without the violation term, the capped mean, CiK's fair column, and the breakdown in
the leaderboard's rows, Markdown, CSV, JSON and LaTeX."""
import csv
import io
import json

import pytest

from fwgym.evaluation.breakdown import (breakdown_columns, breakdown_metrics, breakdown_records, context_breakdown,
                                        forecast_columns, parse_column_key, record_groups)
from fwgym.evaluation.leaderboard import (context_tables, format_breakdowns, format_csv, format_json, format_latex,
                                          format_leaderboard, leaderboard)


def _rec(policy, i, domain, family, types, rcrps, no_violation, *, series="A", cohort=None, valid=True, fair=None):
    r = min(rcrps, 5.0)
    return {"policy": policy, "case_id": f"{domain}-{series}-{i}", "domain": domain, "cohort": cohort or f"{domain}-x",
            "series_id": series, "lead": "day_ahead", "split": "test", "S": r, "R": r, "loss": rcrps, "floor": 0.0,
            "credits": 0, "calls": 1, "valid": valid, "status": "submitted" if valid else "invalid_submission",
            "tool_counts": {"submit": 1}, "scenario": family, "context_types": types, "rcrps": rcrps,
            "rcrps_no_violation": no_violation, "rcrps_fair": fair}


def _two_domains(policy="p", shift=0.0):
    # electricity, one cohort and one series x lead group: plain means inside each group
    #   electricity/cap: cases 0, 1 (c_f), rcrps (2.0, 1e9 -> capped 5), without violation (0.5, 0.7)
    #   electricity/table: case 2 (c_cov, c_f), rcrps 0.4 = without violation
    # cycle_hire/cap: case 3 (c_f), rcrps 3.0, without violation 0.25
    return [_rec(policy, 0, "electricity", "cap", ["c_f"], 2.0 + shift, 0.5 + shift),
            _rec(policy, 1, "electricity", "cap", ["c_f"], 1e9, 0.7 + shift),
            _rec(policy, 2, "electricity", "table", ["c_cov", "c_f"], 0.4 + shift, 0.4 + shift),
            _rec(policy, 3, "cycle_hire", "cap", ["c_f"], 3.0 + shift, 0.25 + shift)]


def test_groups_of_a_record():
    r = _rec("p", 0, "electricity", "analog_day", ["c_h", "c_f"], 1.0, 1.0)
    assert record_groups(r) == {"family": ["electricity/analog_day"], "context_type": ["c_h", "c_f"]}
    assert record_groups({**r, "scenario": None}) == {}
    assert parse_column_key("R_no_violation[family:cycle_hire/station_closure]") == \
        ("R_no_violation", "family", "cycle_hire/station_closure")
    assert parse_column_key("S[electricity-july]") is None and parse_column_key("S") is None
    assert parse_column_key("S[cohort:x]") is None  # not a grouping of the breakdown


def test_hand_computed_breakdown_with_and_without_the_violation_term():
    recs = _two_domains()
    by = {(b["grouping"], b["group"]): b for b in context_breakdown(recs)}
    assert list(by) == [("family", "cycle_hire/cap"), ("family", "electricity/cap"), ("family", "electricity/table"),
                        ("context_type", "c_cov"), ("context_type", "c_f")]
    # electricity/cap: capped mean (2 + 5)/2 = 3.5; without the violation term (0.5 + 0.7)/2 = 0.6
    assert by[("family", "electricity/cap")]["R"] == pytest.approx(3.5)
    assert by[("family", "electricity/cap")]["R_no_violation"] == pytest.approx(0.6)
    assert by[("family", "electricity/cap")]["n"] == 2
    assert by[("family", "cycle_hire/cap")]["R"] == pytest.approx(3.0)
    # c_f: every case; the two domains weigh 1/2 each: electricity mean (2 + 5 + 0.4)/3, cycle hire 3
    assert by[("context_type", "c_f")]["R"] == pytest.approx(0.5 * 7.4 / 3 + 0.5 * 3.0)
    assert by[("context_type", "c_f")]["R_no_violation"] == pytest.approx(0.5 * 1.6 / 3 + 0.5 * 0.25)
    assert by[("context_type", "c_cov")]["R"] == pytest.approx(0.4) == by[("context_type", "c_cov")]["R_no_violation"]
    assert breakdown_metrics("forecast", recs) == ("S", "R", "R_no_violation")
    assert breakdown_metrics("context") == ("S", "R", "loss")
    # records written before rcrps_no_violation existed: no such column, never a made-up one
    old = [{k: v for k, v in r.items() if k != "rcrps_no_violation"} for r in recs]
    assert "R_no_violation" not in context_breakdown(old)[0]
    assert forecast_columns(old)["R_no_violation"] is None


def test_decision_records_have_no_breakdown():
    recs = [{**r, "scenario": None, "context_types": None} for r in _two_domains()]
    for r in recs:
        for k in ("rcrps", "rcrps_no_violation", "rcrps_fair"):
            r.pop(k)
    assert context_breakdown(recs) == [] and breakdown_columns(recs) == {}
    rows = leaderboard(recs)
    assert context_tables(rows) == [] and "scenario family" not in format_breakdowns(rows)


def test_forecast_columns_capped_means_and_the_fair_label():
    recs = _two_domains()
    cols = forecast_columns(recs)
    # electricity (2 + 5 + 0.4)/3, cycle hire 3; without the violation term (0.5 + 0.7 + 0.4)/3 and 0.25
    assert cols["R_no_violation"] == pytest.approx(0.5 * 1.6 / 3 + 0.5 * 0.25)
    assert cols["R_fair"] is None  # quantile-like records: no fair estimator, so no column value
    drawn = [{**r, "rcrps_fair": r["rcrps"] / 2} for r in recs]
    drawn[3] = {**drawn[3], "valid": False, "status": "abstained", "rcrps_fair": None}  # a failed draw: the cap
    # electricity min(1, 5), min(5e8, 5), 0.2 -> (1 + 5 + 0.2)/3; cycle hire: invalid -> 5
    assert forecast_columns(drawn)["R_fair"] == pytest.approx(0.5 * 6.2 / 3 + 0.5 * 5.0)


def test_leaderboard_rows_tables_and_every_format_carry_the_breakdown():
    recs = _two_domains("ref") + _two_domains("p", shift=-0.1)
    rows = leaderboard(recs, reference="ref", n_boot=200)
    p = next(r for r in rows if r["policy"] == "p")
    # the RCRPS column is the capped mean: one absurd forecast (1e9) counts as 5, the uncapped mean stays in loss
    assert p["R"] == pytest.approx(0.5 * (1.9 + 5.0 + 0.3) / 3 + 0.5 * 2.9)
    assert p["loss"] > 1e8
    assert p["R_no_violation"] == pytest.approx(0.5 * 1.3 / 3 + 0.5 * 0.15)
    # paired differences on the capped means (every case of p is 0.1 lower, except the capped one)
    assert p["dR"] == pytest.approx(-(0.5 * 0.2 / 3 + 0.5 * 0.1))
    assert p["dR_no_violation"] == pytest.approx(-0.1) and "dloss" not in p
    assert p["R[family:electricity/cap]"] == pytest.approx((1.9 + 5.0) / 2)
    assert p["R_no_violation[family:electricity/cap]"] == pytest.approx((0.4 + 0.6) / 2)
    assert p["n[context_type:c_f]"] == 4
    long = [b for b in breakdown_records(rows) if b["policy"] == "p"]
    assert long == [{**{k: v for k, v in b.items() if k != "valid"}} for b in context_breakdown(recs) if b["policy"] == "p"]

    md = format_leaderboard(rows, "forecast").splitlines()
    assert md[0].startswith("| policy | S | RCRPS (capped mean) | RCRPS w/o violation | credits |")
    assert md[2].startswith(f"| p | {p['S']:.4f} | {p['R']:.4f} | {p['R_no_violation']:.4f} |")
    text = format_breakdowns(rows, "forecast")
    assert "RCRPS without the violation term (capped mean) by scenario family:" in text
    assert "| policy | cycle_hire/cap (n=1) | electricity/cap (n=2) | electricity/table (n=1) |" in text
    assert "S by scenario family:" not in text  # S = R without a credit weight: not shown twice
    titles = [t.title for t in context_tables(rows, "forecast")]
    assert titles == ["RCRPS (capped mean) by scenario family:", "RCRPS (capped mean) by CiK context type:",
                      "RCRPS without the violation term (capped mean) by scenario family:",
                      "RCRPS without the violation term (capped mean) by CiK context type:"]
    header = next(csv.reader(io.StringIO(format_csv(rows))))
    assert {"R_no_violation[family:electricity/cap]", "R[context_type:c_cov]", "n[family:cycle_hire/cap]"} <= set(header)
    doc = json.loads(format_json(rows, "forecast"))
    assert {"policy": "p", "grouping": "family", "group": "electricity/table", "n": 1, "S": pytest.approx(0.3),
            "R": pytest.approx(0.3), "R_no_violation": pytest.approx(0.3)} in doc["breakdown"]
    tex = format_latex(rows, "forecast")
    assert tex.count(r"\begin{tabular}") == 5 and "% RCRPS (capped mean) by CiK context type:" in tex
    assert r"electricity/cap (n=2)" in tex


def test_context_suite_tables_are_S_and_decision_loss():
    recs = [{**r, "loss": r["rcrps"] / 1e3} for r in _two_domains()]
    for r in recs:
        for k in ("rcrps", "rcrps_no_violation", "rcrps_fair"):
            r.pop(k)
    rows = leaderboard(recs)
    assert [t.title for t in context_tables(rows, "context")] == [
        "S by scenario family:", "S by CiK context type:", "decision loss by scenario family:",
        "decision loss by CiK context type:"]
    assert rows[0]["loss[family:electricity/cap]"] == pytest.approx((2.0 + 1e9) / 2e3)
