"""The per-episode resource profile of a run (fwgym.evaluation.profile, ``fwgym profile``): statistics by
policy, cohort and lead, by hand; every record of a run has the fields, positive."""
import csv
import io
import json

import pytest

from fwgym.cli import main
from fwgym.evaluation.profile import profile, profile_table


def _rec(policy, cohort, lead, wall, cpu, rss, pss=None, tokens=None):
    return {"policy": policy, "cohort": cohort, "lead": lead, "episode_wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss,
            "pss_mib": pss, "prompt_tokens": tokens, "completion_tokens": None if tokens is None else 10, "calls": 2,
            "requests": None}


def test_statistics_by_hand():
    recs = [_rec("a", "c1", "day_ahead", 1.0, 0.5, 100), _rec("a", "c1", "week_ahead", 3.0, 1.5, 300, pss=50, tokens=900),
            _rec("a", "c2", "day_ahead", 2.0, 1.0, 200), {**_rec("b", "c1", "day_ahead", 0, 0, 0), "cpu_s": None,
                                                        "peak_rss_mib": None, "episode_wall_s": None}]
    rows = {(r["policy"], r["group"]): r for r in profile(recs)}
    a = rows[("a", "all")]
    assert (a["n"], a["episode_wall_s_mean"], a["episode_wall_s_median"], a["cpu_s_mean"]) == (3, 2.0, 2.0, 1.0)
    assert a["episode_wall_s_p95"] == pytest.approx(2.9) and a["episode_wall_s_total"] == 6.0
    assert (a["peak_rss_mib_median"], a["peak_rss_mib_max"], a["pss_mib_median"], a["pss_mib_n"]) == (200, 300, 50, 1)
    assert (a["prompt_tokens_mean"], a["completion_tokens_mean"], a["calls_mean"], a["requests_mean"]) == (900, 10, 2, None)
    assert rows[("a", "c1")]["n"] == 2 and rows[("a", "day_ahead")]["episode_wall_s_mean"] == 1.5
    assert rows[("b", "all")]["cpu_s_mean"] is None  # records without the fields (older runs)
    table = profile_table(list(rows.values()), groups=False)
    assert [r[:4] for r in table.rows] == [("a", "all", "3", "2.00 s"), ("b", "all", "1", "–")]
    with pytest.raises(ValueError):
        profile([])


def test_profile_command_on_a_run(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(run), "--policies",
                 "hour_of_day_empirical", "seasonal_empirical"]) == 0
    records = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert all(r["episode_wall_s"] > 0 and r["cpu_s"] >= 0 and r["peak_rss_mib"] > 10 for r in records)
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main(["profile", str(run), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fwgym profile (PARTIAL): ") and max(len(x) for x in out.splitlines()) <= 80
    assert "hour_of_day_empirical" in out and "electricity-august" in out and "day_ahead" in out
    assert main(["profile", str(run), "--format", "csv", "--no-breakdown"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["policy"] for r in rows] == ["hour_of_day_empirical", "seasonal_empirical"]
    assert all(float(r["episode_wall_s_mean"]) > 0 and r["partial"] == "true" for r in rows)
