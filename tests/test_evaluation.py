import json

import pytest

from fwgym.evaluation import evaluate, format_leaderboard, leaderboard, read_results, select_cases, write_results


def test_select_cases_limit_keeps_every_cohort():
    sel = select_cases("test", ["electricity"], limit=12)
    assert len(sel) == 12
    months = {cid.split("-")[3] for _, cid in sel}
    assert months == {"02", "07", "08"}
    with pytest.raises(ValueError):
        select_cases("test", limit=0)


def test_workers_give_identical_results():
    kw = dict(policies=["weekly_repeat", "perfect_demand"], split="test", limit=20, progress=False)
    one = evaluate(workers=1, **kw)
    two = evaluate(workers=2, **kw)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)


def test_results_roundtrip_and_leaderboard(tmp_path):
    recs = evaluate(["weekday_empirical", "perfect_demand"], split="dev", limit=10, progress=False)
    paths = write_results(recs, tmp_path / "run", {"k": 1})
    back = read_results([tmp_path / "run"])
    assert len(back) == len(recs) == 40
    rows = leaderboard(back)
    assert [r["policy"] for r in rows] == ["perfect_demand", "weekday_empirical"]
    assert rows[0]["S"] == 0.0 and rows[1]["S"] > 0
    text = format_leaderboard(rows)
    assert text.startswith("| policy | S |") and "weekday_empirical" in text
    assert paths["csv"].read_text().startswith("policy,")
    with pytest.raises(ValueError, match="duplicate"):
        read_results([tmp_path / "run", tmp_path / "run"])


def test_leaderboard_refuses_mismatched_case_sets():
    a = evaluate(["weekday_empirical"], split="test", limit=3, progress=False, domains=["cycle_hire"])
    b = evaluate(["weekly_repeat"], split="test", limit=4, progress=False, domains=["cycle_hire"])
    with pytest.raises(ValueError, match="different cases"):
        leaderboard(a + b)


# --- results sets, aggregation and the leaderboard command (issue 6) ---------------------------------

from collections import defaultdict  # noqa: E402

import numpy as np  # noqa: E402

from fwgym.evaluation import check_result_set, coverage  # noqa: E402
from fwgym.scoring import case_weights  # noqa: E402


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


def test_partial_or_duplicated_result_sets_are_rejected(tmp_path):
    recs = [_fake("p", "X", "A", "day_ahead", 1.0), _fake("p", "X", "B", "day_ahead", 2.0),
            _fake("q", "X", "A", "day_ahead", 1.5)]
    with pytest.raises(ValueError, match="partial result set: policies were evaluated on different cases"):
        check_result_set(recs)
    with pytest.raises(ValueError, match="duplicated result set"):
        check_result_set(recs[:2] + recs[:1])
    with pytest.raises(ValueError, match="duplicated"):
        leaderboard(recs[:2] + recs[:1])
    real = evaluate(["weekday_empirical"], split="test", limit=3, progress=False)
    with pytest.raises(ValueError, match="partial result set: it covers 6 of the 1259 cases"):
        check_result_set(real, complete=True)
    # a run's meta.json pins its records: a truncated file is rejected
    run = tmp_path / "run"
    write_results(real, run)
    assert len(read_results([run], allow_partial=False)) == 6  # the run declared its subset (limit 3)
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="partial results file"):
        read_results([run])
    # a bare results file claims the whole split
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="partial result set"):
        read_results([bare], allow_partial=False)
    assert len(read_results([bare])) == 6


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


def test_ray_backend_gives_identical_results():
    pytest.importorskip("ray")
    kw = dict(policies=["weekday_empirical", "perfect_demand"], split="test", limit=6, progress=False)
    local = evaluate(**kw)
    ray_recs = evaluate(backend="ray", workers=2, chunk_size=3, **kw)
    assert json.dumps(local, sort_keys=True) == json.dumps(ray_recs, sort_keys=True)


def test_suites_run_through_evaluate():
    from fwgym.evaluation import SUITES

    recs = evaluate(["context_hour_of_day_empirical", "hour_of_day_empirical_samples"], split="test", limit=8,
                    progress=False, env_kwargs=SUITES["forecast"], domains=["cycle_hire"])
    assert {r["policy"] for r in recs} == {"context_hour_of_day_empirical", "hour_of_day_empirical_samples"}
    assert all(r["valid"] and r["floor"] == 0.0 and 0 <= r["S"] <= 5 for r in recs)
    with pytest.raises(ValueError, match="backend"):
        evaluate(["weekday_empirical"], limit=1, progress=False, backend="spark")
