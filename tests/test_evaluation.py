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
