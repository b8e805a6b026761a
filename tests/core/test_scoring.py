"""Tests for fwgym/core/scoring.py: per-case R/S, cohort/group weights, aggregation, sigma file loading."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fwgym.core.scoring import BUDGET, aggregate, case_score, case_weights, load_sigma


def test_budget():
    assert BUDGET == 113_726


def test_case_score_hand_values():
    # R = (0.1 - 0.04) / 0.05 = 1.2; credits/B = 11372.6 / 113726 = 0.1; S = (1.2 + 0.1)/2 = 0.65
    r, s = case_score(0.1, 0.04, 11372.6, 0.05)
    assert r == pytest.approx(1.2, abs=1e-12)
    assert s == pytest.approx(0.65, abs=1e-12)


def test_case_score_more_hand_values():
    # perfect plan, no credits -> 0, 0
    assert case_score(0.02, 0.02, 0, 0.0542) == (0.0, 0.0)
    # free plan: S = R / 2
    r, s = case_score(0.3, 0.1, 0, 0.04)
    assert r == pytest.approx(5.0) and s == pytest.approx(2.5)
    # full budget spent on a perfect plan: S = 0.5
    r, s = case_score(0.05, 0.05, 113_726, 0.05)
    assert r == 0.0 and s == pytest.approx(0.5, abs=1e-15)
    # custom budget: credits 50 of 200 -> 0.25; R = 0.01/0.02 = 0.5; S = 0.375
    r, s = case_score(0.03, 0.02, 50, 0.02, budget=200)
    assert r == pytest.approx(0.5) and s == pytest.approx(0.375)


@pytest.mark.parametrize(
    "args",
    [
        (0.1, 0.04, 0, 0.0),
        (0.1, 0.04, 0, -0.05),
        (0.1, 0.04, 0, float("nan")),
        (float("nan"), 0.04, 0, 0.05),
        (0.1, float("inf"), 0, 0.05),
        (0.1, 0.04, float("nan"), 0.05),
    ],
)
def test_case_score_errors(args):
    with pytest.raises(ValueError):
        case_score(*args)
    with pytest.raises(ValueError):
        case_score(0.1, 0.04, 0, 0.05, budget=0)


def rec(case_id, domain, cohort, series_id, lead, **kw):
    base = dict(case_id=case_id, domain=domain, cohort=cohort, series_id=series_id, lead=lead)
    base.update(kw)
    return base


def synthetic_records():
    """Two domains; electricity has two cohorts, cycle hire one; groups of unequal sizes.

    Hand weights: each domain 1/2.
      electricity / cohort A (2 groups, 1/4 each cohort -> 1/8 per group):
        (X, day_ahead) 2 cases -> 1/16 each;  (Y, day_ahead) 1 case -> 1/8
      electricity / cohort B (1 group, 3 cases): 1/4 / 3 = 1/12 each
      cycle_hire / cohort C (3 groups -> 1/6 per group):
        (1, day_ahead) 1 case -> 1/6; (2, day_ahead) 2 cases -> 1/12 each; (1, week_ahead) 1 case -> 1/6
    """
    return [
        rec("e1", "electricity", "A", "X", "day_ahead", S=1.0, R=2.0, loss=0.1, floor=0.01, credits=0, calls=1, valid=True),
        rec("e2", "electricity", "A", "X", "day_ahead", S=3.0, R=4.0, loss=0.3, floor=0.02, credits=100, calls=2, valid=True),
        rec("e3", "electricity", "A", "Y", "day_ahead", S=2.0, R=2.0, loss=0.2, floor=0.03, credits=0, calls=3, valid=False),
        rec("e4", "electricity", "B", "X", "week_ahead", S=0.0, R=0.0, loss=0.0, floor=0.0, credits=0, calls=0, valid=True),
        rec("e5", "electricity", "B", "X", "week_ahead", S=6.0, R=6.0, loss=0.6, floor=0.0, credits=600, calls=6, valid=True),
        rec("e6", "electricity", "B", "X", "week_ahead", S=3.0, R=3.0, loss=0.3, floor=0.0, credits=300, calls=3, valid=True),
        rec("c1", "cycle_hire", "C", "1", "day_ahead", S=1.0, R=1.0, loss=1.0, floor=0.5, credits=0, calls=1, valid=True),
        rec("c2", "cycle_hire", "C", "2", "day_ahead", S=2.0, R=2.0, loss=2.0, floor=0.5, credits=0, calls=1, valid=False),
        rec("c3", "cycle_hire", "C", "2", "day_ahead", S=4.0, R=4.0, loss=4.0, floor=0.5, credits=0, calls=1, valid=True),
        rec("c4", "cycle_hire", "C", "1", "week_ahead", S=5.0, R=5.0, loss=5.0, floor=0.5, credits=1200, calls=4, valid=True),
    ]


HAND_W = [1 / 16, 1 / 16, 1 / 8, 1 / 12, 1 / 12, 1 / 12, 1 / 6, 1 / 12, 1 / 12, 1 / 6]


def test_case_weights_hand():
    w = case_weights(synthetic_records())
    np.testing.assert_allclose(w, HAND_W, rtol=1e-12)
    assert math.isclose(sum(HAND_W), 1.0)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_case_weights_order_independent():
    recs = synthetic_records()
    perm = [9, 3, 0, 7, 1, 5, 2, 8, 4, 6]
    w = case_weights([recs[i] for i in perm])
    np.testing.assert_allclose(w, [HAND_W[i] for i in perm], rtol=1e-12)


def test_case_weights_same_series_other_cohort_is_another_group():
    recs = [
        rec("a", "electricity", "feb", "PJM", "day_ahead"),
        rec("b", "electricity", "jul", "PJM", "day_ahead"),
        rec("c", "electricity", "jul", "PJM", "day_ahead"),
    ]
    # single domain -> 1; two cohorts -> 1/2 each; jul: one group of 2 -> 1/4 each
    np.testing.assert_allclose(case_weights(recs), [1 / 2, 1 / 4, 1 / 4])


def test_case_weights_test_split_shape():
    # the paper's test layout: 3 electricity cohorts and 1 cycle-hire cohort -> 1/6, 1/6, 1/6, 1/2
    recs = []
    for cohort, n_series in (("electricity-february", 3), ("electricity-july", 2), ("electricity-august", 5)):
        for s in range(n_series):
            for lead in ("day_ahead", "week_ahead"):
                for d in range(1 + s % 3):
                    recs.append(rec(f"{cohort}-{s}-{lead}-{d}", "electricity", cohort, f"S{s}", lead))
    for s in range(4):
        for d in range(2 + s % 2):
            recs.append(rec(f"cyc-{s}-{d}", "cycle_hire", "cycle_hire-october", str(s), "day_ahead"))
    w = case_weights(recs)
    by = {}
    for r, x in zip(recs, w):
        by[r["cohort"]] = by.get(r["cohort"], 0.0) + x
    assert by == pytest.approx({"electricity-february": 1 / 6, "electricity-july": 1 / 6,
                                "electricity-august": 1 / 6, "cycle_hire-october": 1 / 2}, abs=1e-12)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_case_weights_errors():
    with pytest.raises(ValueError):
        case_weights([])
    recs = synthetic_records()
    with pytest.raises(ValueError):
        case_weights(recs + [recs[0]])


def test_aggregate_hand():
    recs = synthetic_records()
    out = aggregate(recs)
    # weighted S by hand: (1+3)/16 + 2/8 + (0+6+3)/12 + 1/6 + (2+4)/12 + 5/6
    s = 4 / 16 + 2 / 8 + 9 / 12 + 1 / 6 + 6 / 12 + 5 / 6
    assert out["S"] == pytest.approx(s, rel=1e-12)
    # weighted credits: 100/16 + (600 + 300)/12 + 1200/6 = 6.25 + 75 + 200
    assert out["credits"] == pytest.approx(281.25, rel=1e-12)
    # weighted calls: (1+2)/16 + 3/8 + 9/12 + 1/6 + 2/12 + 4/6
    assert out["calls"] == pytest.approx(3 / 16 + 3 / 8 + 9 / 12 + 1 / 6 + 2 / 12 + 4 / 6, rel=1e-12)
    assert out["n"] == 10
    assert out["valid"] == 8


def test_aggregate_s_is_linear():
    # S_i = (R_i + c_i / B)/2 for every record -> aggregate S = (agg R + agg credits / B)/2
    rng = np.random.default_rng(3)
    recs = []
    for i, r in enumerate(synthetic_records()):
        R, c = float(rng.uniform(0, 5)), float(rng.integers(0, 100_000))
        recs.append(dict(r, R=R, credits=c, S=0.5 * (R + c / 113_726)))
    out = aggregate(recs, fields=("S", "R", "credits"))
    assert out["S"] == pytest.approx(0.5 * (out["R"] + out["credits"] / 113_726), rel=1e-12)
    assert set(out) == {"S", "R", "credits", "n", "valid"}


def test_aggregate_is_the_correctly_rounded_weighted_mean():
    from fractions import Fraction

    # one domain, 3 cohorts of weight 1/3 each: the float weights 1/3 sum to 0.9999999999999999 with np.dot
    recs = [{"case_id": f"c{i}", "domain": "d", "cohort": f"k{i % 3}", "series_id": f"s{i}", "lead": "day_ahead",
             "S": 0.1 * (i + 1), "R": 0.1, "loss": 1 / 3, "floor": 0.0, "credits": 7, "calls": 1, "valid": True}
            for i in range(6)]
    w = case_weights(recs)
    assert float(np.dot(w, np.ones(6))) != 1.0  # the summation the mean must not depend on
    out = aggregate(recs)
    assert (out["calls"], out["R"], out["loss"], out["credits"]) == (1.0, 0.1, 1 / 3, 7.0)  # equal values: that value
    # unequal values: the exact rational mean, rounded once (weights 1/6 each here)
    assert out["S"] == float(sum(Fraction(0.1 * (i + 1)) for i in range(6)) / 6)
    assert aggregate(recs[::-1])["S"] == out["S"]  # and no dependence on the order of the records


# ------------------------------------------------------------------------------------------------
# sigma


def test_load_sigma_default_file():
    sig = load_sigma()
    assert set(sig) >= {"electricity", "cycle_hire"}
    assert all(v > 0 and math.isfinite(v) for v in sig.values())


def test_load_sigma_custom_file(tmp_path):
    p = tmp_path / "sigma.json"
    p.write_text(json.dumps({"sigma": {"electricity": 0.0542, "cycle_hire": 0.0434}}))
    assert load_sigma(p) == {"electricity": 0.0542, "cycle_hire": 0.0434}
    assert load_sigma(str(p)) == {"electricity": 0.0542, "cycle_hire": 0.0434}


def test_load_sigma_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_sigma(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError):
        load_sigma(tmp_path)  # a directory is not a file


@pytest.mark.parametrize(
    "content",
    [
        {"sigma": {"electricity": 0.05}},
        {"sigma": {"cycle_hire": 0.05}},
        {"sigma": {"electricity": 0.0, "cycle_hire": 0.04}},
        {"sigma": {"electricity": -0.05, "cycle_hire": 0.04}},
        {"sigma": {"electricity": 0.05, "cycle_hire": "abc"}},
        {"sigma": {}},
    ],
)
def test_load_sigma_invalid_values(content, tmp_path):
    p = tmp_path / "sigma.json"
    p.write_text(json.dumps(content))
    with pytest.raises(ValueError):
        load_sigma(p)


@pytest.mark.parametrize("text", ['{"sigma": {"electricity": NaN, "cycle_hire": 0.04}}',
                                  '{"sigma": {"electricity": Infinity, "cycle_hire": 0.04}}',
                                  "not json", ""])
def test_load_sigma_invalid_text(text, tmp_path):
    p = tmp_path / "sigma.json"
    p.write_text(text)
    with pytest.raises(ValueError):
        load_sigma(p)


@pytest.mark.parametrize("text", ["{}", "[]", '{"sigma": [1]}', '{"sigma": {"electricity": null, "cycle_hire": 0.04}}'])
def test_load_sigma_wrong_structure_is_value_error(text, tmp_path):
    p = tmp_path / "sigma.json"
    p.write_text(text)
    with pytest.raises(ValueError):
        load_sigma(p)


@pytest.mark.parametrize("bad", [10**400, float("nan"), float("inf"), "1.0", None])
def test_case_score_refuses_non_finite_or_non_numbers(bad):
    from fwgym.core.scoring import case_score

    for args in ((bad, 0.5, 0, 1.0), (1.0, bad, 0, 1.0), (1.0, 0.5, bad, 1.0)):
        with pytest.raises(ValueError, match="finite"):
            case_score(*args)


def test_calibrate_sigma_write_records_the_digest(tmp_path, monkeypatch):
    # `fwgym calibrate-sigma --write` writes sigma.json and records its sha256, so the new file loads;
    # a later hand edit is refused again (the calibration itself is replaced by a fixed result here)
    import shutil

    import fwgym.data as fdata
    import fwgym.evaluation.calibration
    import fwgym.core.scoring as scoring
    from fwgym.cli import main

    for rel in ("config/sigma.json", "data/sha256.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fdata.PACKAGE_DIR / rel, tmp_path / rel)
    monkeypatch.setattr(fdata, "PACKAGE_DIR", tmp_path)
    monkeypatch.setattr(fdata, "MANIFEST_PATH", tmp_path / "data" / "sha256.json")
    monkeypatch.setattr(scoring, "SIGMA_PATH", tmp_path / "config" / "sigma.json")
    monkeypatch.setattr(fwgym.evaluation.calibration, "calibrate_sigma", lambda **kw: {
        "sigma": {"electricity": 0.07, "cycle_hire": 0.06}, "policy": "hour_of_day_empirical", "split": "dev",
        "cases": {"electricity": 751, "cycle_hire": 160}})
    before = json.loads((tmp_path / "data" / "sha256.json").read_text())["files"]
    assert main(["calibrate-sigma", "--write", "--no-progress"]) == 0
    after = json.loads((tmp_path / "data" / "sha256.json").read_text())["files"]
    assert after["config/sigma.json"] == fdata.sha256_file(tmp_path / "config" / "sigma.json") != before["config/sigma.json"]
    assert {k: v for k, v in after.items() if k != "config/sigma.json"} == {k: v for k, v in before.items() if k != "config/sigma.json"}
    assert load_sigma() == {"electricity": 0.07, "cycle_hire": 0.06}
    (tmp_path / "config" / "sigma.json").write_text((tmp_path / "config" / "sigma.json").read_text().replace("0.07", "0.7"))
    with pytest.raises(fdata.DataIntegrityError, match="sigma.json"):
        load_sigma()


def test_write_sigma_refuses_an_invalid_calibration(tmp_path):
    from fwgym.core.scoring import write_sigma

    with pytest.raises(ValueError):
        write_sigma(json.dumps({"sigma": {"electricity": 0.0, "cycle_hire": 0.05}}), tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
    p = write_sigma(json.dumps({"sigma": {"electricity": 0.05, "cycle_hire": 0.05}}), tmp_path / "s.json")
    assert load_sigma(p) == {"electricity": 0.05, "cycle_hire": 0.05}
