"""Paired series-cluster bootstrap of aggregate differences (fwgym.evaluation.bootstrap)."""
import numpy as np
import pytest

from fwgym.evaluation import ClusterBootstrap, evaluate, leaderboard, paired_bootstrap
from fwgym.core.scoring import aggregate


@pytest.fixture(scope="module")
def records():
    return evaluate(["hour_of_day_empirical", "weekday_empirical", "weekly_repeat"], split="test", limit=60,
                    progress=False)


def _rec(policy, domain, cohort, series, lead, S, loss=None, i=0):
    return {"policy": policy, "case_id": f"{domain}-{series}-{cohort}-{lead}-{i}", "domain": domain, "cohort": cohort,
            "series_id": series, "lead": lead, "split": "test", "S": S, "loss": S if loss is None else loss,
            "valid": True}


def test_reproducible_under_its_seed_and_contains_the_point_estimate(records):
    a = paired_bootstrap(records, "hour_of_day_empirical", "weekday_empirical")
    b = paired_bootstrap(records, "hour_of_day_empirical", "weekday_empirical")
    assert a == b and a["n_boot"] == 10_000 and a["seed"] == 1701
    assert (a["diff"], a["lo"], a["hi"]) == (a["S"]["diff"], a["S"]["lo"], a["S"]["hi"])
    c = paired_bootstrap(records, "hour_of_day_empirical", "weekday_empirical", seed=7)
    assert c["S"]["diff"] == a["S"]["diff"] and (c["S"]["lo"], c["S"]["hi"]) != (a["S"]["lo"], a["S"]["hi"])
    for m in ("S", "loss"):
        assert a[m]["lo"] <= a[m]["diff"] <= a[m]["hi"]
    agg = {p: aggregate([r for r in records if r["policy"] == p])["S"]
           for p in ("hour_of_day_empirical", "weekday_empirical")}
    assert a["S"]["diff"] == pytest.approx(agg["weekday_empirical"] - agg["hour_of_day_empirical"], abs=1e-15)
    assert set(a["clusters"]) == {"electricity", "cycle_hire"}
    same = paired_bootstrap(records, "weekday_empirical", "weekday_empirical")
    assert same["S"] == {"diff": 0.0, "lo": 0.0, "hi": 0.0}


def test_hand_checkable_two_series_case():
    # one domain, one cohort, two series with one case each: paired differences d1 = 0.1, d2 = 0.5.
    # Draws of 2 series ids with replacement give means 0.1 (p = 1/4), 0.3 (1/2), 0.5 (1/4).
    recs = [_rec(p, "electricity", "c", s, "day_ahead", v)
            for p, s, v in (("ref", "A", 1.0), ("ref", "B", 1.0), ("pol", "A", 1.1), ("pol", "B", 1.5))]
    out = paired_bootstrap(recs, "ref", "pol", n_boot=4000, seed=1)
    assert out["S"]["diff"] == pytest.approx(0.3)
    assert out["S"]["lo"] == pytest.approx(0.1) and out["S"]["hi"] == pytest.approx(0.5)
    boot = ClusterBootstrap(recs[:2], 4000, 1)
    draws = boot.draws(np.array([0.1, 0.5]))[:, 0]
    assert set(np.round(draws, 12)) == {0.1, 0.3, 0.5}
    assert np.mean(np.isclose(draws, 0.3)) == pytest.approx(0.5, abs=0.03)


def test_each_draw_equals_the_case_weighted_aggregate_of_the_resampled_set():
    rng = np.random.default_rng(0)
    recs = []
    for dom, cohorts, series in (("electricity", ("e1", "e2"), "ABCD"), ("cycle_hire", ("c1",), "xyz")):
        for co in cohorts:
            for s in series:
                for lead in ("day_ahead", "week_ahead"):
                    for i in range(rng.integers(1, 4)):
                        if (co, s) != ("e2", "D"):  # series D absent from cohort e2
                            recs.append(_rec("ref", dom, co, s, lead, float(rng.normal()), i=i))
    boot = ClusterBootstrap(recs, 50, 3)
    x = np.array([r["S"] for r in recs])
    draws = boot.draws(x)[:, 0]
    for b in range(50):
        resampled = []
        for dom, n_s, _, groups, counts in boot.domains:
            series = sorted({r["series_id"] for r in recs if r["domain"] == dom})
            for k, s in enumerate(series):
                for copy in range(int(counts[b, k])):
                    resampled += [{**r, "series_id": f"{s}#{copy}", "case_id": f"{r['case_id']}#{copy}"}
                                  for r in recs if r["domain"] == dom and r["series_id"] == s]
        assert draws[b] == pytest.approx(aggregate(resampled, fields=("S",))["S"], abs=1e-12)


def test_leaderboard_reference_columns(records):
    rows = leaderboard(records, reference="hour_of_day_empirical")
    by = {r["policy"]: r for r in rows}
    ref = by["hour_of_day_empirical"]
    assert ref["dS"] == 0.0 and ref["dS_lo"] == 0.0 and ref["dS_hi"] == 0.0
    pb = paired_bootstrap(records, "hour_of_day_empirical", "weekly_repeat")
    r = by["weekly_repeat"]
    assert (r["dS"], r["dS_lo"], r["dS_hi"]) == (pb["S"]["diff"], pb["S"]["lo"], pb["S"]["hi"])
    assert (r["dloss"], r["dloss_lo"], r["dloss_hi"]) == (pb["loss"]["diff"], pb["loss"]["lo"], pb["loss"]["hi"])


def test_bad_arguments():
    recs = [_rec("ref", "electricity", "c", "A", "day_ahead", 1.0)]
    with pytest.raises(ValueError, match="not in the results"):
        paired_bootstrap(recs, "ref", "other")
    with pytest.raises(ValueError, match="n_boot"):
        paired_bootstrap(recs, "ref", "ref", n_boot=0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(recs, "ref", "ref", level=1.5)
    with pytest.raises(ValueError, match="different cases"):
        paired_bootstrap(recs + [_rec("pol", "electricity", "c", "B", "day_ahead", 1.0)], "ref", "pol")
