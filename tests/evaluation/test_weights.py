"""Loss-cost weight sensitivity (paper §4.5): saved decisions re-scored with S = W·R + (1−W)·c/B by the one
formula of the score (fwgym.core.scoring.case_score), by hand on 3 records; W = 1/2 is the protocol's S bit
for bit; rankings and Kendall's tau across weights."""
import pytest

from fwgym.core.scoring import BUDGET, case_score
from fwgym.evaluation import evaluate
from fwgym.evaluation.weights import reweight, sensitivity, sensitivity_table, weighted_formula

SIGMA = {"electricity": 0.05, "cycle_hire": 0.04}


def _rec(policy, case, loss, floor, credits, series="ISNE"):
    R, S = case_score(loss, floor, credits, SIGMA["electricity"], BUDGET)
    return {"policy": policy, "case_id": f"elec-{series}-2024-07-{case:02d}-day_ahead", "domain": "electricity",
            "cohort": "electricity-july", "series_id": series, "lead": "day_ahead", "split": "test", "loss": loss,
            "floor": floor, "R": R, "S": S, "credits": credits, "calls": 1, "valid": True, "status": "submitted"}


def test_reweighting_three_records_by_hand():
    # R = (loss - F)/sigma = 2, 1, 0 and c/B = 1/2, 0, 1 (B = 113,726; sigma 0.05)
    recs = [_rec("p", 3, 0.40, 0.30, 56_863), _rec("p", 11, 0.35, 0.30, 0), _rec("p", 19, 0.30, 0.30, BUDGET)]
    for w, want in ((0.25, [0.25 * 2 + 0.75 * 0.5, 0.25 * 1 + 0.0, 0.0 + 0.75 * 1]),
                    (0.75, [0.75 * 2 + 0.25 * 0.5, 0.75 * 1 + 0.0, 0.0 + 0.25 * 1]),
                    (1.0, [2.0, 1.0, 0.0]), (0.0, [0.5, 0.0, 1.0])):
        got = [r["S"] for r in reweight(recs, w, SIGMA, BUDGET)]
        assert got == pytest.approx(want, abs=1e-12), w
    assert [r["S"] for r in reweight(recs, 0.5, SIGMA)] == [r["S"] for r in recs] == pytest.approx([1.25, 0.5, 0.5])
    before = [dict(r) for r in recs]
    reweight(recs, 0.25, SIGMA)
    assert recs == before  # copies: the input is not changed


def test_protocol_weight_is_the_stored_score_bit_for_bit_on_real_records():
    recs = evaluate(["weekday_empirical", "seasonal_empirical"], split="test", limit=3, progress=False)
    from fwgym.core.scoring import load_sigma

    assert [r["S"] for r in reweight(recs, 0.5, load_sigma())] == [r["S"] for r in recs]
    paid = [r for r in reweight(recs, 0.25, load_sigma()) if r["credits"]]
    assert paid and all(r["S"] == pytest.approx(0.25 * r["R"] + 0.75 * r["credits"] / BUDGET, abs=1e-15) for r in paid)


def test_refusals():
    recs = [_rec("p", 3, 0.40, 0.30, 0)]
    with pytest.raises(ValueError, match="decision suites"):
        reweight(recs, 0.25, SIGMA, suite="forecast")
    for bad in (-0.1, 1.5, float("nan"), "x", True):
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            reweight(recs, bad, SIGMA)
    with pytest.raises(ValueError, match="no sigma for domain 'electricity'"):
        reweight(recs, 0.25, {"cycle_hire": 0.04})
    with pytest.raises(ValueError, match="not \\(loss - floor\\)/sigma"):
        reweight(recs, 0.25, {"electricity": 0.1})  # the run was scored with another sigma


def test_sensitivity_ranks_flip_when_the_loss_weighs_more():
    # A: R = 1, no credits; B: R = 0.5, c/B = 0.6. S(0.25): A 0.25 < B 0.575; S(0.5): A 0.5 < B 0.55;
    # S(0.75): B 0.525 < A 0.75
    a = [_rec("A", d, 0.35, 0.30, 0, series=s) for d, s in ((3, "ISNE"), (11, "PJM"))]
    b = [_rec("B", d, 0.325, 0.30, round(0.6 * BUDGET), series=s) for d, s in ((3, "ISNE"), (11, "PJM"))]
    rows, tau = sensitivity(a + b, [0.25, 0.75], SIGMA)
    assert [r["policy"] for r in rows] == ["A", "B"]  # in the protocol's order
    assert (rows[0]["S@0.25"], rows[1]["S@0.25"]) == pytest.approx((0.25, 0.125 + 0.75 * round(0.6 * BUDGET) / BUDGET))
    assert [(r["rank@0.25"], r["rank@0.75"]) for r in rows] == [(1, 2), (2, 1)]
    assert tau == {0.25: pytest.approx(1.0), 0.75: pytest.approx(-1.0)}
    table = sensitivity_table(rows, [0.25, 0.75], tau)
    assert table.columns == ("policy", "S (W=0.25)", "rank (W=0.25)", "S (W=0.75)", "rank (W=0.75)")
    assert table.rows[-1] == ("Kendall tau-b vs W=0.5", "1.000", "", "-1.000", "")
    # with a reference, each weight's paired bootstrap difference is a column (the header announces intervals)
    rows, tau = sensitivity(a + b, [0.25, 0.75], SIGMA, reference="A", n_boot=50)
    table = sensitivity_table(rows, [0.25, 0.75], tau, reference="A")
    assert table.columns == ("policy", "S (W=0.25)", "rank (W=0.25)", "ΔS vs A (W=0.25) [95% CI]", "S (W=0.75)",
                             "rank (W=0.75)", "ΔS vs A (W=0.75) [95% CI]")
    d = rows[1]["dS@0.75"]
    assert d == pytest.approx(rows[1]["S@0.75"] - rows[0]["S@0.75"], abs=1e-12) and d < 0
    assert table.rows[0][3] == table.rows[0][6] == "(reference)"
    assert table.rows[1][6] == f"{d:+.4f} [{rows[1]['dS_lo@0.75']:+.4f}, {rows[1]['dS_hi@0.75']:+.4f}]"
    assert table.rows[-1] == ("Kendall tau-b vs W=0.5", "1.000", "", "", "-1.000", "", "")
    with pytest.raises(ValueError, match="carry no intervals"):
        sensitivity_table(sensitivity(a + b, [0.25], SIGMA)[0], [0.25], tau, reference="A")
    assert weighted_formula(0.25) == "S = 0.25·R + 0.75·c/B, R = (loss − F)/σ"
    assert weighted_formula(0.5) == "S = (R + c/B)/2, R = (loss − F)/σ"
    with pytest.raises(ValueError, match="given twice"):
        sensitivity(a + b, [0.25, 0.25], SIGMA)
