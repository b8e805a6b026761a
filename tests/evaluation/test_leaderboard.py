"""The leaderboard (fwgym.evaluation.leaderboard): hand-built aggregates, breakdowns, the reference policy,
the Markdown and CSV forms and the ``fwgym leaderboard`` command."""
import csv
from collections import defaultdict

import numpy as np
import pytest

from fwgym.evaluation import (DEFAULT_REFERENCE, REFERENCE_POLICIES, check_result_set, coverage, evaluate,
                              format_breakdowns, format_leaderboard, leaderboard, reference_policy, write_csv,
                              write_results)
from fwgym.core.scoring import case_weights


def _fake(policy, cohort, series, lead, S, i=0, domain="electricity"):
    return {"policy": policy, "case_id": f"{cohort}-{series}-{lead}-{i}", "domain": domain, "cohort": cohort,
            "series_id": series, "lead": lead, "split": "test", "S": S, "R": 2 * S, "loss": S / 10, "floor": 0.0,
            "credits": 0, "calls": 1, "valid": True, "status": "submitted", "tool_counts": {"submit": 1}}


def test_hand_built_two_cohort_aggregate():
    # cohort X: groups (A, day_ahead) = mean(1, 3) = 2, (A, week_ahead) = 4, (B, day_ahead) = 6 -> 4
    # cohort Y: (A, day_ahead) = 10 -> 10; the domain's two cohorts weigh 1/2 each -> S = 7
    recs = [_fake("p", "X", "A", "day_ahead", 1.0, 0), _fake("p", "X", "A", "day_ahead", 3.0, 1),
            _fake("p", "X", "A", "week_ahead", 4.0), _fake("p", "X", "B", "day_ahead", 6.0),
            _fake("p", "Y", "A", "day_ahead", 10.0)]
    w = case_weights(recs)
    np.testing.assert_allclose(w, [1 / 12, 1 / 12, 1 / 6, 1 / 6, 1 / 2])
    assert w.sum() == pytest.approx(1.0)
    row = leaderboard(recs)[0]
    assert row["S"] == pytest.approx(7.0) and row["R"] == pytest.approx(14.0) and row["loss"] == pytest.approx(0.7)
    assert row["S[X]"] == pytest.approx(4.0) and row["S[Y]"] == pytest.approx(10.0)
    # per lead: day_ahead -> X: (2 + 6)/2 = 4, Y: 10 -> 7; week_ahead -> X only: 4
    assert row["S[day_ahead]"] == pytest.approx(7.0) and row["S[week_ahead]"] == pytest.approx(4.0)
    assert row["n"] == 5 and row["valid"] == 5 and "reference" not in row


def test_rows_sorted_by_S_and_formatted():
    recs = [_fake("b", "X", "A", "day_ahead", 0.25), _fake("a", "X", "A", "day_ahead", 0.25),
            _fake("c", "X", "A", "day_ahead", 0.125)]
    rows = leaderboard(recs)
    assert [r["policy"] for r in rows] == ["c", "a", "b"]  # by S, then name
    text = format_leaderboard(rows).splitlines()
    assert text[0] == "| policy | S | R | loss | credits | calls | valid |"
    assert text[2] == "| c | 0.1250 | 0.2500 | 0.01250 | 0.0 | 1.00 | 1/1 |"
    assert format_leaderboard([]) == "(no results)" and format_breakdowns([]) == ""
    assert format_breakdowns(rows).splitlines()[:3] == ["S by cohort and lead:", "", "| policy | X | day_ahead |"]


def test_leaderboard_refuses_mismatched_case_sets():
    a = evaluate(["weekday_empirical"], split="test", limit=3, progress=False, domains=["cycle_hire"])
    b = evaluate(["weekly_repeat"], split="test", limit=4, progress=False, domains=["cycle_hire"])
    with pytest.raises(ValueError, match="different cases"):
        leaderboard(a + b)
    with pytest.raises(ValueError, match="duplicated"):
        leaderboard(a + a[:1])


def test_test_split_weights_sum_to_one_with_the_cohort_weights():
    recs = evaluate(["perfect_demand"], split="test", progress=False)
    w = case_weights(recs)
    assert w.sum() == pytest.approx(1.0, abs=1e-12) and (w > 0).all()
    by = defaultdict(float)
    for r, wi in zip(recs, w):
        by[r["cohort"]] += wi
    assert by == pytest.approx({"electricity-february": 1 / 6, "electricity-july": 1 / 6,
                                "electricity-august": 1 / 6, "cycle_hire-october": 1 / 2})
    assert coverage(recs)["complete"]
    check_result_set(recs, complete=True)
    with pytest.raises(ValueError, match="partial result set"):
        leaderboard(recs[:-1], complete=True)


def test_reference_policy_is_chosen_once():
    both = ["weekday_empirical", "hour_of_day_empirical"]
    assert REFERENCE_POLICIES[0] == DEFAULT_REFERENCE == "hour_of_day_empirical"
    assert reference_policy(both) == "hour_of_day_empirical"
    assert reference_policy(["context_hour_of_day_empirical", "hour_of_day_empirical_samples"]) == \
        "hour_of_day_empirical_samples"  # the forecast suite's twin
    assert reference_policy(["hour_of_day_empirical"]) is None  # one row: nothing to compare
    assert reference_policy(["weekday_empirical", "weekly_repeat"]) is None
    assert reference_policy(both, None) is None and reference_policy(both, "None") is None
    assert reference_policy(both, "weekday_empirical") == "weekday_empirical"
    assert reference_policy(["weekday_empirical"], "weekday_empirical") == "weekday_empirical"
    with pytest.raises(ValueError, match="reference policy 'nobody' is not among the policies"):
        reference_policy(both, "nobody")
    recs = [_fake("p", "X", "A", "day_ahead", 1.0), _fake("hour_of_day_empirical", "X", "A", "day_ahead", 2.0)]
    assert {r["reference"] for r in leaderboard(recs, reference="auto")} == {"hour_of_day_empirical"}
    with pytest.raises(ValueError, match="not among the policies"):
        leaderboard(recs, reference="q")


def test_write_csv_header_is_the_union_of_row_keys(tmp_path):
    rows = [{"policy": "a", "S": 1.0}, {"policy": "b", "S": 2.0, "extra": 3}]
    p = write_csv(rows, tmp_path / "sub" / "lb.csv")
    with open(p, newline="") as fh:
        got = list(csv.DictReader(fh))
    assert got == [{"policy": "a", "S": "1.0", "extra": ""}, {"policy": "b", "S": "2.0", "extra": "3"}]


def test_leaderboard_command_markdown_csv_and_errors(tmp_path, capsys):
    from fwgym.cli import main

    recs = evaluate(["hour_of_day_empirical", "weekday_empirical", "perfect_demand"], split="test", limit=3,
                    progress=False)
    write_results(recs[:6], tmp_path / "a")  # hour_of_day_empirical
    write_results(recs[6:], tmp_path / "b")  # the two others: runs merge
    csv_path = tmp_path / "lb.csv"
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert "| policy | S | R | loss | credits | calls | valid | ΔS vs hour_of_day_empirical [95% CI] |" in out
    assert "| hour_of_day_empirical |" in out and "(reference)" in out and "S by cohort and lead:" in out
    assert "PARTIAL" in out
    header = csv_path.read_text().splitlines()[0].split(",")
    assert {"policy", "S", "dS", "dS_lo", "dS_hi", "dloss_lo", "S[day_ahead]", "S[cycle_hire-october]"} <= set(header)
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--reference", "none",
                 "--no-breakdown"]) == 0
    assert "ΔS" not in capsys.readouterr().out
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "a")]) == 2
    assert "duplicated result set" in capsys.readouterr().err
    assert main(["leaderboard", str(tmp_path / "a"), "--reference", "nobody"]) == 2
    assert "--reference" in capsys.readouterr().err
