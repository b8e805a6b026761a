"""CRPS estimators, pinball loss, quantile score and RCRPS: hand-computed values, scoringrules, CiK's
formula, propriety, and the forecast envs' scoring of hostile submissions (issues 4 and 17)."""
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwgym.core.contract import ForecastSubmission
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.core.scoring import (RCRPS_CAP, bound_violation, crps_ensemble, crps_quantiles, pinball_loss, quantile_atoms,
                           rcrps, rcrps_alpha, rcrps_terms, score_forecast)

SAMPLES = np.array([[9, 12, 15, 16], [10, 11, 13, 17], [11, 13, 14, 15], [8, 12, 16, 18], [10, 14, 12, 16]], float)
TARGET = np.array([10, 12, 14, 16], float)


def roi(*idx):
    return np.isin(np.arange(4), idx)


# ------------------------------------------------------------------------------------------------
# the two sample estimators


@pytest.mark.parametrize("samples,y,fair,nrg", [
    # [1,2,3,4], y = 2.5: mean |X - y| = 1; sum_{i<j} |Xi - Xj| = 10 -> fair 1 - 10/12, nrg 1 - 10/16
    ([1, 2, 3, 4], 2.5, 1 / 6, 3 / 8),
    # [-1, 1], y = 0: mean |X - y| = 1, pair sum 2 -> fair 1 - 2/2 = 0, nrg 1 - 2/4 = 1/2
    ([-1, 1], 0, 0.0, 0.5),
    ([2, 2, 2, 2, 2], 0, 2.0, 2.0),
])
def test_crps_reference_values(samples, y, fair, nrg):
    x = np.array(samples, float)
    assert float(crps_ensemble(x, y, estimator="fair")) == pytest.approx(fair, abs=1e-15)
    assert float(crps_ensemble(x, y, estimator="nrg")) == pytest.approx(nrg, abs=1e-15)


def test_crps_per_step_by_hand():
    # column by column (pair sums by sorting, coefficients -4, -2, 0, 2, 4):
    #   step 0: [9,10,11,8,10] vs 10: mean |d| = 0.8, pair sum 14 -> fair 0.8 - 14/20 = 0.1, nrg 0.8 - 14/25 = 0.24
    #   step 1: [12,11,13,12,14] vs 12: 0.8, 14 -> 0.1, 0.24
    #   step 2: [15,13,14,16,12] vs 14: 1.2, 20 -> 0.2, 0.4
    #   step 3: [16,17,15,18,16] vs 16: 0.8, 14 -> 0.1, 0.24
    np.testing.assert_allclose(crps_ensemble(SAMPLES, TARGET, estimator="fair"), [0.1, 0.1, 0.2, 0.1], atol=1e-14)
    np.testing.assert_allclose(crps_ensemble(SAMPLES, TARGET, estimator="nrg"), [0.24, 0.24, 0.4, 0.24], atol=1e-14)


def test_nrg_is_the_crps_of_the_empirical_distribution():
    # CRPS(F, y) = integral (F(x) - 1{x >= y})^2 dx, F the empirical CDF of [1, 2, 4] and y = 3,
    # by hand: on [1,2) F = 1/3 -> 1/9; [2,3) F = 2/3 -> 4/9; [3,4) (2/3 - 1)^2 = 1/9; total 2/3
    assert float(crps_ensemble(np.array([1.0, 2.0, 4.0]), 3.0, estimator="nrg")) == pytest.approx(2 / 3, abs=1e-15)


def test_crps_matches_scoringrules():
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 17, 200):
        x = rng.normal(size=(n, 24)) * rng.uniform(0.1, 100)
        y = rng.normal(size=24)
        np.testing.assert_allclose(crps_ensemble(x, y, estimator="nrg"), sr.crps_ensemble(y, x.T, estimator="nrg", backend="numpy"),
                                   atol=1e-12, rtol=1e-12)
        if n >= 2:
            np.testing.assert_allclose(crps_ensemble(x, y, estimator="fair"), sr.crps_ensemble(y, x.T, estimator="fair", backend="numpy"),
                                       atol=1e-12, rtol=1e-12)


def test_quantile_score_matches_scoringrules_crps_quantile():
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(1)
    q = np.sort(rng.normal(size=(24, 9)) * 7 + 100, axis=1)
    y = rng.normal(size=24) * 7 + 100
    np.testing.assert_allclose(crps_quantiles(q, QUANTILE_LEVELS, y), sr.crps_quantile(y, q, np.array(QUANTILE_LEVELS), backend="numpy"),
                               rtol=1e-12, atol=1e-12)


def test_quantile_score_bias_for_a_normal_distribution():
    # truthful quantiles of N(0, 1), y ~ N(0, 1): E pinball_tau = phi(Phi^-1(tau)), so
    # E[QS] = 2 mean_k phi(z_k) = 0.61735 while E[CRPS] = 1/sqrt(pi) = 0.56419: ratio 1.0942 (the documented +9.4 %)
    from scipy.stats import norm

    sr = pytest.importorskip("scoringrules")
    z = norm.ppf(QUANTILE_LEVELS)
    ratio = 2 * norm.pdf(z).mean() / (1 / np.sqrt(np.pi))
    assert ratio == pytest.approx(1.0942, abs=1e-4)
    # the same by simulation with the library's closed-form normal CRPS (seeded)
    y = np.random.default_rng(2).normal(size=200_000)
    qs = crps_quantiles(np.tile(z, (y.size, 1)), QUANTILE_LEVELS, y).mean()
    assert qs / sr.crps_normal(y, 0.0, 1.0, backend="numpy").mean() == pytest.approx(ratio, rel=5e-3)


def test_crps_errors():
    with pytest.raises(ValueError):
        crps_ensemble(np.ones((1, 4)), TARGET, estimator="fair")
    with pytest.raises(ValueError):
        crps_ensemble(np.full((3, 4), np.nan), TARGET, estimator="nrg")
    with pytest.raises(ValueError):
        crps_ensemble(SAMPLES, TARGET, estimator="pwm")
    with pytest.raises(TypeError):
        crps_ensemble(SAMPLES, TARGET)  # the estimator is a required choice


# ------------------------------------------------------------------------------------------------
# RCRPS: reference values (alpha 0.25); the fair values are CiK's metric, the nrg values fwgym's score


@pytest.mark.parametrize("kwargs,fair,nrg", [
    # no RoI: fair mean(0.1, 0.1, 0.2, 0.1) = 0.125; nrg mean(0.24, 0.24, 0.4, 0.24) = 0.28; x 0.25
    ({}, 0.03125, 0.07),
    # RoI {1, 2}: fair 1/2 * 0.15 + 1/2 * 0.1 = 0.125; nrg 1/2 * 0.32 + 1/2 * 0.24 = 0.28
    ({"roi": roi(1, 2)}, 0.03125, 0.07),
    # RoI {2}: fair 1/2 * 0.2 + 1/2 * 0.1 = 0.15; nrg 1/2 * 0.4 + 1/2 * 0.24 = 0.32
    ({"roi": roi(2)}, 0.0375, 0.08),
    # lower 10 on every step: v = [0.25, 0, 0, 0.5, 0] (mean over 4 steps), mean 0.15, pair sum 2.5:
    # fair CRPS(v, 0) = 0.15 - 2.5/20 = 0.025, nrg 0.15 - 2.5/25 = 0.05;
    # 0.25 * (0.125 + 10 * 0.025) = 0.09375; 0.25 * (0.28 + 10 * 0.05) = 0.195
    ({"roi": roi(1, 2), "lower": np.full(4, 10.0)}, 0.09375, 0.195),
    # lower 10 and upper 16 everywhere: v = [0.25, 0.25, 0, 1.0, 0], mean 0.3, pair sum 4.5:
    # fair 0.3 - 4.5/20 = 0.075, nrg 0.3 - 4.5/25 = 0.12; 0.25 * (0.125 + 0.75); 0.25 * (0.28 + 1.2)
    ({"lower": np.full(4, 10.0), "upper": np.full(4, 16.0)}, 0.21875, 0.37),
])
def test_rcrps_reference_values(kwargs, fair, nrg):
    assert rcrps(SAMPLES, TARGET, 0.25, estimator="fair", **kwargs) == pytest.approx(fair, abs=1e-15)
    assert rcrps(SAMPLES, TARGET, 0.25, **kwargs) == pytest.approx(nrg, abs=1e-15)  # nrg is the default


def test_rcrps_partial_bound_is_the_mean_over_bounded_steps():
    # upper bound 16 at the last step only (changed from issue 4, which averaged over all 4 steps):
    # violations 1 (sample 2) and 2 (sample 4) over k = 1 bounded step -> v = [0, 1, 0, 2, 0],
    # mean 0.6, pair sum 10: fair 0.6 - 10/20 = 0.1, nrg 0.6 - 10/25 = 0.2
    upper = np.array([np.nan, np.nan, np.nan, 16.0])
    np.testing.assert_allclose(bound_violation(SAMPLES, upper=upper), [0, 1, 0, 2, 0])
    assert rcrps(SAMPLES, TARGET, 1.0, upper=upper, estimator="fair") == pytest.approx(0.125 + 10 * 0.1, abs=1e-14)
    assert rcrps(SAMPLES, TARGET, 1.0, upper=upper) == pytest.approx(0.28 + 10 * 0.2, abs=1e-14)


def _k3_example():
    # 24 steps, y = 10; sample A = 10 except 11.5 at step 6; sample B = 12 except 13 at step 6 and 11.5
    # at step 7; upper bound 11 at steps 5, 6, 7 only (k = 3 of 24)
    y = np.full(24, 10.0)
    a = np.full(24, 10.0)
    a[6] = 11.5
    b = np.full(24, 12.0)
    b[6], b[7] = 13.0, 11.5
    upper = np.full(24, np.nan)
    upper[5:8] = 11.0
    return np.stack([a, b]), y, upper


def test_rcrps_equals_cik_on_a_hand_computed_k3_of_24_example():
    x, y, upper = _k3_example()
    # two samples: fair CRPS = mean|X - y| - |A - B|/2, nrg = mean|X - y| - |A - B|/4
    #   21 steps with (10, 12): mean 1, |A-B| 2 -> fair 0, nrg 0.5
    #   step 6 (11.5, 13): mean 2.25, diff 1.5 -> fair 1.5, nrg 1.875
    #   step 7 (10, 11.5): mean 0.75, diff 1.5 -> fair 0, nrg 0.375
    np.testing.assert_allclose(crps_ensemble(x, y, estimator="fair"), [0.0] * 6 + [1.5] + [0.0] * 17, atol=1e-15)
    # CiK's VariableMaxConstraint: mean over the 3 bounded steps: A (10, 11.5, 10) -> (0 + 0.5 + 0)/3 = 1/6;
    # B (12, 13, 11.5) -> (1 + 2 + 0.5)/3 = 7/6 (averaging over all 24 steps gave 3/24 of these)
    np.testing.assert_allclose(bound_violation(x, upper=upper), [1 / 6, 7 / 6], atol=1e-15)
    # CRPS(v, 0): mean 2/3, |v1 - v2| = 1 -> fair 2/3 - 1/2 = 1/6, nrg 2/3 - 1/4 = 5/12
    # CiK, alpha 0.1: 0.1 * (1.5/24 + 10 * 1/6) = 0.1 * 83/48
    assert rcrps(x, y, 0.1, upper=upper, estimator="fair") == pytest.approx(0.1 * 83 / 48, rel=1e-14)
    # fwgym's score (nrg): 0.1 * ((21 * 0.5 + 0.5 + 1.875 + 0.375)/24 + 10 * 5/12)... the 22 steps other than 6 and 7
    # are 21 plain steps plus step 5 (10, 12), also 0.5: (22 * 0.5 + 1.875 + 0.375)/24 = 13.25/24
    assert rcrps(x, y, 0.1, upper=upper) == pytest.approx(0.1 * (13.25 / 24 + 10 * 5 / 12), rel=1e-14)
    # with the bounded hours as the RoI: fair 1/2 * mean(0, 1.5, 0) + 1/2 * 0 = 0.25 -> 0.1 * (0.25 + 10/6)
    m = np.zeros(24, bool)
    m[5:8] = True
    assert rcrps(x, y, 0.1, roi=m, upper=upper, estimator="fair") == pytest.approx(0.1 * (0.25 + 10 / 6), rel=1e-14)


def test_rcrps_terms_split_the_hand_computed_k3_example():
    # the same example: CRPS term 0.1 * 13.25/24, violation term 0.1 * 10 * 5/12 (nrg); fair: 0.1 * 1.5/24, 0.1 * 10/6
    x, y, upper = _k3_example()
    crps_term, violation_term = rcrps_terms(x, y, 0.1, upper=upper)
    assert crps_term == pytest.approx(0.1 * 13.25 / 24, rel=1e-14)
    assert violation_term == pytest.approx(0.1 * 10 * 5 / 12, rel=1e-14)
    assert crps_term + violation_term == pytest.approx(rcrps(x, y, 0.1, upper=upper), rel=1e-14)
    fair = rcrps_terms(x, y, 0.1, upper=upper, estimator="fair")
    assert fair == pytest.approx((0.1 * 1.5 / 24, 0.1 * 10 / 6), rel=1e-14)
    # the CRPS term is exactly the RCRPS without bounds; no violation -> a violation term of exactly 0
    assert crps_term == rcrps(x, y, 0.1)
    assert rcrps_terms(x, y, 0.1, upper=np.full(24, 100.0)) == (rcrps(x, y, 0.1), 0.0)
    with pytest.raises(ValueError, match="alpha"):
        rcrps_terms(x, y, 0.0)


def cik_metric(target, forecast, scaling, roi_mask, indices, thresholds):
    """CiK's threshold_weighted_crps restated (roi_weight 1/2, violation factor 10, linear, no log):
    its PWM CRPS, its VariableMaxConstraint (samples and thresholds multiplied by the scaling first)."""
    def pwm_crps(t, s):
        n = s.shape[0]
        ss = np.sort(s, axis=0)
        abs_diff = np.abs(t[None] - ss).sum(axis=0) / n
        beta0 = ss.sum(axis=0) / n
        beta1 = (np.arange(n)[:, None] * ss).sum(axis=0) / (n * (n - 1))
        return abs_diff + beta0 - 2 * beta1

    if roi_mask is not None:
        crps_value = 0.5 * pwm_crps(target[roi_mask], forecast[:, roi_mask]).mean() + \
            0.5 * pwm_crps(target[~roi_mask], forecast[:, ~roi_mask]).mean()
    else:
        crps_value = pwm_crps(target, forecast).mean()
    violation = (scaling * forecast[:, indices] - scaling * thresholds[None, :]).clip(min=0).mean(axis=1)
    violation_crps = pwm_crps(np.zeros(1), 10.0 * violation[:, None])[0]
    return scaling * crps_value + violation_crps


def test_rcrps_fair_equals_cik_metric_on_random_partial_bounds():
    rng = np.random.default_rng(11)
    for t in range(200):
        n, k = int(rng.integers(2, 30)), int(rng.integers(1, 24))
        y = rng.gamma(5.0, 100.0, 24)
        x = y[None] * rng.uniform(0.6, 1.5, (n, 24))
        idx = np.sort(rng.choice(24, size=k, replace=False))
        thr = y[idx] * rng.uniform(1.0, 1.3, k)
        upper = np.full(24, np.nan)
        upper[idx] = thr
        m = None
        if t % 2:
            m = np.zeros(24, bool)
            m[rng.integers(0, 12): rng.integers(13, 24)] = True
        alpha = 1.0 / float(rng.uniform(100, 1000))
        assert rcrps(x, y, alpha, m, upper=upper, estimator="fair") == pytest.approx(cik_metric(y, x, alpha, m, idx, thr), rel=1e-11)


def test_quantile_submission_is_scored_as_its_nine_atoms_by_hand():
    # 2 steps, quantiles [1, 2, ..., 9] at both steps, y = (5, 0). As 9 equal atoms:
    #   step 0: mean |q - 5| = 20/9; pair term sum_{i<j} |qi - qj| = sum_k (2k - 10) k = 120 -> 120/81
    #           CRPS = 20/9 - 120/81 = 60/81;  step 1: mean |q| = 5; CRPS = 5 - 120/81 = 285/81
    # upper bound 8.5 at step 1: the level paths violate by 0 (k <= 8) and 0.5 (k = 9): CRPS(v, 0) for
    #   atoms (0 x 8, 0.5): mean |v| = 0.5/9 = 4.5/81, pair sum 8 * 0.5 = 4 -> 4.5/81 - 4/81 = 0.5/81
    q = np.tile(np.arange(1.0, 10.0), (2, 1))
    y = np.array([5.0, 0.0])
    upper = np.array([np.nan, 8.5])
    sub = ForecastSubmission("quantiles", q)
    assert score_forecast(sub, y, 1.0)["rcrps"] == pytest.approx((60 / 81 + 285 / 81) / 2, rel=1e-14)
    assert score_forecast(sub, y, 2.0, upper=upper)["rcrps"] == pytest.approx(2 * ((60 + 285) / 162 + 10 * 0.5 / 81), rel=1e-14)
    roi = np.array([True, False])
    assert score_forecast(sub, y, 1.0, roi)["rcrps"] == pytest.approx(0.5 * 60 / 81 + 0.5 * 285 / 81, rel=1e-14)
    np.testing.assert_array_equal(quantile_atoms(q), q.T)


def _score(kind, values, y, alpha, roi=None, lower=None, upper=None):
    return score_forecast(ForecastSubmission(kind, np.asarray(values, dtype=np.float64)), y, alpha, roi, lower, upper)


def test_same_numbers_score_identically_as_quantiles_and_as_samples_on_random_inputs():
    # the identity of issue 27: one distribution, one score, bit for bit; and the old quantile score's gap
    # QS(q, y) - CRPS(q as 9 atoms, y) = (2/810) sum_k (k - 5) q_(k) >= 0 (hand-derived), which is gone
    rng = np.random.default_rng(2027)
    for t in range(300):
        y = rng.gamma(4.0, 50.0, 24)
        q = np.sort(y[:, None] * rng.uniform(0.5, 1.6, (24, 9)), axis=1)
        roi = None if t % 3 == 0 else rng.random(24) < 0.3
        upper = None if t % 2 else np.where(rng.random(24) < 0.4, y * rng.uniform(0.8, 1.2, 24), np.nan)
        lower = None if t % 5 else np.where(rng.random(24) < 0.2, y * 0.7, np.nan)
        a = _score("quantiles", q, y, 0.01, roi, lower, upper)
        b = _score("samples", q.T, y, 0.01, roi, lower, upper)
        assert a == b
        gap = crps_quantiles(q, QUANTILE_LEVELS, y) - crps_ensemble(q.T, y, estimator="nrg")
        np.testing.assert_allclose(gap, (2 / 810) * ((np.arange(1, 10) - 5) * q).sum(axis=1), rtol=1e-9, atol=1e-9)
        assert np.all(gap >= -1e-9)


def test_same_numbers_score_identically_in_the_env_on_real_cases():
    # the bought seasonal_empirical quantiles of real test cases, submitted as quantiles and as 9 samples
    import gymnasium as gym

    for env_id in ("FWBench-Electricity-Forecast-v0", "FWBench-CycleHire-Forecast-v0"):
        env = gym.make(env_id, split="test").unwrapped
        for case in env.cases[::60]:
            out = {}
            for kind in ("quantiles", "samples"):
                env.reset(options={"case_id": case.case_id})
                obs, *_ = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
                res = json.loads(obs["last_result"])["result"]
                lo, hi = res["target_steps"]
                q = res["quantiles"][lo - 1:hi]
                values = q if kind == "quantiles" else np.asarray(q).T.tolist()
                *_, info = env.step({"tool": "submit", "args": {kind: values}})
                assert info["valid"]
                out[kind] = (info["rcrps"], info["crps"], info["R"], info["S"])
            assert out["quantiles"] == out["samples"], case.case_id


def test_pinball_and_quantile_crps_by_hand():
    q = np.array([[1.0, 2.0, 3.0]])
    levels = [0.25, 0.5, 0.75]
    # y = 2.5: e = [1.5, .5, -.5] -> [.375, .25, .125]
    np.testing.assert_allclose(pinball_loss(q, levels, [2.5]), [[0.375, 0.25, 0.125]])
    assert crps_quantiles(q, levels, [2.5])[0] == pytest.approx(2 * 0.75 / 3)


def test_rcrps_errors():
    with pytest.raises(ValueError):
        rcrps(SAMPLES, TARGET, 0.0)
    with pytest.raises(ValueError):
        rcrps(SAMPLES, TARGET, 1.0, roi=np.ones(3, bool))
    with pytest.raises(ValueError):
        rcrps(SAMPLES, TARGET, 1.0, upper=np.ones(3))
    with pytest.raises(ValueError):
        rcrps(SAMPLES, TARGET, 1.0, upper=np.full(4, np.inf))
    with pytest.raises(ValueError):
        quantile_atoms(np.ones(4))


# ------------------------------------------------------------------------------------------------
# propriety: the truthful distribution's expected score is the best


def _expected_rcrps(sub, atoms, probs, alpha, estimator):
    """E_y[RCRPS(sub, y)] for y = atoms[j] (a 24-vector) with probability probs[j] (exact mixture)."""
    return sum(p * rcrps(sub, a, alpha, estimator=estimator) for a, p in zip(atoms, probs))


def test_truthful_ensemble_has_the_best_expected_score_and_the_fair_estimator_is_gamed():
    # y takes one of m equally likely paths; the truthful submission is those m paths. Its expected
    # nrg score must beat perturbed, brackets, points and hand-picked subsets (the CRPS is strictly
    # proper); the fair estimator ranks a bracket first, the failure the nrg score removes
    rng = np.random.default_rng(17)
    gamed_fair = []
    for trial in range(60):
        m = int(rng.integers(2, 9))
        atoms = rng.gamma(3.0, 50.0, (m, 1)) * rng.uniform(0.5, 1.5, (m, 24))
        probs = [1.0 / m] * m
        truth = atoms.copy()
        lo, hi = atoms.min(axis=0), atoms.max(axis=0)
        rivals = {
            "perturbed": atoms * rng.uniform(0.9, 1.1, atoms.shape),
            "shifted": atoms + rng.normal(0, 10, 24)[None],
            "min/max bracket": np.stack([lo, hi]),
            "wide bracket": np.stack([np.zeros(24), np.full(24, 1e9)]),
            "mean point": np.tile(atoms.mean(axis=0), (2, 1)),
            "median point": np.tile(np.median(atoms, axis=0), (2, 1)),
            "2 atoms": atoms[:2],
            "spread x1.5": atoms.mean(axis=0) + 1.5 * (atoms - atoms.mean(axis=0)),
            "spread x0.5": atoms.mean(axis=0) + 0.5 * (atoms - atoms.mean(axis=0)),
            "random draws": atoms[rng.integers(0, m, 3 * m)] * rng.uniform(0.97, 1.03, (3 * m, 24)),
        }
        best = _expected_rcrps(truth, atoms, probs, 0.01, "nrg")
        for name, sub in rivals.items():
            assert best <= _expected_rcrps(sub, atoms, probs, 0.01, "nrg") + 1e-12, (trial, name)
        if m > 2:  # (with 2 atoms the truth is its own min/max bracket)
            fair_truth = _expected_rcrps(truth, atoms, probs, 0.01, "fair")
            gamed_fair.append(_expected_rcrps(rivals["min/max bracket"], atoms, probs, 0.01, "fair") < fair_truth)
    assert len(gamed_fair) > 40 and all(gamed_fair)  # the fair estimator prefers the bracket to the truth


def test_truthful_nine_atoms_have_the_best_expected_score_as_quantiles():
    # propriety of the quantile format: y takes one of m equally likely paths (m = 9: the belief is 9
    # equally weighted atoms per step, exactly what 9 quantiles define); reporting the sorted atoms
    # beats every rival (perturbed, shrunk, widened, the decile points of a fitted normal, a point)
    rng = np.random.default_rng(23)
    for _ in range(40):
        paths = rng.normal(100, 20, (9, 24))
        truth = np.sort(paths.T, axis=1)

        def expected(q):
            return np.mean([_score("quantiles", q, paths[j], 0.01)["rcrps"] for j in range(9)])

        best = expected(truth)
        mu, sd = truth.mean(axis=1, keepdims=True), truth.std(axis=1, keepdims=True)
        from scipy.stats import norm
        rivals = (truth * rng.uniform(0.95, 1.05, truth.shape), mu + 0.6 * (truth - mu), mu + 1.5 * (truth - mu),
                  mu + sd * norm.ppf(np.asarray(QUANTILE_LEVELS))[None], np.tile(np.median(truth, axis=1)[:, None], (1, 9)))
        for rival in rivals:
            assert best < expected(np.sort(rival, axis=1))


def test_mid_level_quantiles_minimise_the_exact_expected_score_of_nine_atoms_under_a_normal():
    # for Y ~ N(0, 1), E|x - Y| = x (2 Phi(x) - 1) + 2 phi(x), so the expected CRPS of 9 atoms is exact:
    # E = mean_k E|x_k - Y| - sum_k (2k - 10) x_(k) / 81. Its minimiser is x_k = Phi^-1((2k - 1)/18)
    # (derivative (2 Phi(x_k) - 1)/9 - (2k - 10)/81 = 0); the deciles 0.1..0.9 score 0.73 % worse
    from scipy.stats import norm

    def expected(x):
        x = np.sort(x)
        k = np.arange(1, 10)
        return float(np.mean(x * (2 * norm.cdf(x) - 1) + 2 * norm.pdf(x)) - np.sum((2 * k - 10) * x) / 81)

    mid = norm.ppf((2 * np.arange(1, 10) - 1) / 18)
    deciles = norm.ppf(np.asarray(QUANTILE_LEVELS))
    rng = np.random.default_rng(5)
    for _ in range(200):
        assert expected(mid) < expected(mid + rng.normal(0, 0.05, 9))
    assert expected(deciles) / expected(mid) - 1 == pytest.approx(0.0073, abs=5e-5)
    assert expected(mid) / (1 / np.sqrt(np.pi)) - 1 == pytest.approx(0.0084, abs=5e-5)  # the normal's CRPS is 1/sqrt(pi)
    # the same value from the scorer on one step (alpha 1, y drawn by quadrature)
    ys = norm.ppf((np.arange(20000) + 0.5) / 20000)
    sc = np.mean(crps_ensemble(np.tile(mid[:, None], (1, ys.size)), ys, estimator="nrg"))
    assert sc == pytest.approx(expected(mid), rel=1e-4)


def test_minmax_of_an_honest_ensemble_scores_worse_on_real_cases():
    from fwgym.core.cases import build_cases
    from fwgym.forecasters.classical import classical_distribution

    # the honest 14-sample hour-of-day ensemble vs its per-hour min and max. The score is proper in
    # expectation (not case by case: when the truth falls far out, a wider forecast can win one case)
    honest, gamed = [], []
    for case in build_cases("electricity", "test")[::10] + build_cases("cycle_hire", "test")[::5]:
        s = classical_distribution("hour_of_day_empirical", case.history, case.history_hours, case.target_hours).T
        alpha = rcrps_alpha(case.domain, case.series_id)
        bracket = np.stack([s.min(axis=0), s.max(axis=0)])
        honest.append(rcrps(s, case.target(), alpha))
        gamed.append(rcrps(bracket, case.target(), alpha))
        # the fair estimator rewarded the bracket (issue 17: on 100 % of cases)
        assert rcrps(bracket, case.target(), alpha, estimator="fair") < rcrps(s, case.target(), alpha, estimator="fair")
    honest, gamed = np.array(honest), np.array(gamed)
    assert len(honest) == 143
    assert gamed.mean() > 1.2 * honest.mean()
    assert (gamed > honest).mean() > 0.8  # 119 of 143 cases when written


# ------------------------------------------------------------------------------------------------
# score_forecast: the whole assembly, never raising


def _sub(kind, values):
    return ForecastSubmission(kind, np.asarray(values, dtype=np.float64))


def test_score_forecast_assembly_and_cap():
    x, y, upper = _k3_example()
    res = score_forecast(_sub("samples", x), y, 0.1, None, None, upper)
    assert res["rcrps"] == pytest.approx(0.1 * (13.25 / 24 + 10 * 5 / 12), rel=1e-14)
    # without the violation term: the CRPS term alone, which is the RCRPS of the same paths without bounds
    assert res["rcrps_no_violation"] == pytest.approx(0.1 * 13.25 / 24, rel=1e-14)
    assert res["rcrps_no_violation"] == score_forecast(_sub("samples", x), y, 0.1)["rcrps"]
    assert res["R"] == res["rcrps"] and res["crps"] == pytest.approx(13.25 / 24, rel=1e-14)
    # the bracket: nrg per step = (y + 1e9 - y)/2 - 1e9/4 = 2.5e8 -> far above the cap
    res = score_forecast(_sub("samples", [[0.0] * 24, [1e9] * 24]), y, 0.1)
    assert res["rcrps"] == pytest.approx(0.1 * 2.5e8) and res["R"] == RCRPS_CAP
    assert score_forecast(None, y, 0.1) == {"rcrps": RCRPS_CAP, "R": RCRPS_CAP, "rcrps_no_violation": RCRPS_CAP,
                                            "crps": None}
    q = np.tile(np.linspace(8, 12, 9), (24, 1))
    res = score_forecast(_sub("quantiles", q), y, 0.1)
    assert res["rcrps"] == pytest.approx(0.1 * crps_ensemble(q.T, y, estimator="nrg").mean(), rel=1e-14)
    # the fair estimator beside it: samples only (a label for model draws), None for quantiles and invalid
    assert score_forecast(_sub("quantiles", q), y, 0.1, fair=True)["rcrps_fair"] is None
    assert score_forecast(None, y, 0.1, fair=True)["rcrps_fair"] is None
    res = score_forecast(_sub("samples", q.T), y, 0.1, fair=True)
    assert res["rcrps_no_violation"] == res["rcrps"]  # no bounds: the same number, bit for bit
    assert res["rcrps_fair"] == pytest.approx(0.1 * crps_ensemble(q.T, y, estimator="fair").mean(), rel=1e-14)
    assert res["rcrps"] == pytest.approx(0.1 * crps_ensemble(q.T, y, estimator="nrg").mean(), rel=1e-14)


def test_score_forecast_maps_a_non_finite_score_to_the_cap():
    # beyond validation's bound (not reachable through the env) the arithmetic overflows: the cap, no NaN
    y = np.full(24, 10.0)
    for vals in ([[1e308] * 24, [-1e308] * 24], [[1e308] * 24, [1.5e308] * 24]):
        res = score_forecast(_sub("samples", vals), y, 0.1, None, None, np.full(24, 5.0))
        assert res["rcrps"] == RCRPS_CAP and res["R"] == RCRPS_CAP
        assert np.isfinite(res["rcrps_no_violation"])


@pytest.mark.parametrize("env_id", ["FWBench-Electricity-Forecast-v0", "FWBench-CycleHire-Forecast-v0"])
def test_forecast_env_scores_hostile_submissions_without_raising(env_id):
    import gymnasium as gym

    from fwgym.envs import register_envs

    register_envs()
    env = gym.make(env_id, split="test")
    hostile = {
        "bracket": {"samples": [[0] * 24, [10**9] * 24]},
        "huge": {"samples": [[1e308] * 24, [-1e308] * 24]},
        "huge bounded": {"samples": [[1e308] * 24, [1.5e308] * 24]},
        "huge quantiles": {"quantiles": [[-1e308] * 4 + [0] + [1e308] * 4] * 24},
    }
    bounded_seen = 0
    for seed in range(6):
        for name, args in hostile.items():
            env.reset(seed=seed)
            bounded_seen += env.unwrapped.episode.scenario.upper is not None
            _, reward, term, _, info = env.step({"tool": "submit", "args": args})
            assert term and info["R"] == RCRPS_CAP and reward == -RCRPS_CAP and np.isfinite(info["S"]), name
            assert info["valid"] == (name == "bracket"), name
    assert bounded_seen > 0  # some draws carry a bound (transmission limit / station closure)


def test_alpha_is_inverse_mean_train_range():
    from fwgym.core.cases import build_cases
    from fwgym.context.scenarios import make_scenario

    cases = [c for c in build_cases("cycle_hire", "train") if c.series_id == "14"]
    assert rcrps_alpha("cycle_hire", "14") == pytest.approx(1 / np.mean([np.ptp(c.target()) for c in cases]))
    # with the announced event (as CiK's scaling): the family's scenario applied to each train case
    # (a station has fewer than 200 train cases: all of them)
    assert len(cases) < 200
    surge = [np.ptp(make_scenario(c, 0, "event_surge").apply(c.target())) for c in cases]
    assert rcrps_alpha("cycle_hire", "14", "event_surge") == pytest.approx(1 / np.mean(surge))
    assert rcrps_alpha("cycle_hire", "14", "event_surge") < rcrps_alpha("cycle_hire", "14")  # surges widen the range
    # an electricity series: 200 evenly spaced train cases (first and last included)
    cases = [c for c in build_cases("electricity", "train") if c.series_id == "ISNE"]
    picked = [cases[round(i * (len(cases) - 1) / 199)] for i in range(200)]
    limit = [np.ptp(make_scenario(c, 0, "transmission_limit").apply(c.target())) for c in picked]
    assert rcrps_alpha("electricity", "ISNE", "transmission_limit") == pytest.approx(1 / np.mean(limit), rel=1e-12)
    assert RCRPS_CAP == 5.0


def test_fraction_check_of_nrg_on_small_integers():
    # the nrg formula in exact arithmetic on a random small ensemble equals the float result
    rng = np.random.default_rng(5)
    x = rng.integers(-20, 20, 7)
    y = 3
    exact = Fraction(sum(abs(int(v) - y) for v in x), 7) - Fraction(sum(abs(int(a) - int(b)) for a in x for b in x), 2 * 49)
    assert float(crps_ensemble(x.astype(float), float(y), estimator="nrg")) == pytest.approx(float(exact), abs=1e-14)


_extreme = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 1e308, -1e308, 5e-324, 1e13, -1e13]),
                     st.integers(-10**20, 10**20))


@pytest.fixture(scope="module")
def bounded_env():
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.context.scenarios import make_scenario

    env = FWBenchEnv("electricity", split="test", scenarios=True, task="forecast")
    case = next(c for c in env.cases if make_scenario(c, 0).upper is not None)
    return env, case.case_id


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(_extreme, min_size=24, max_size=24), min_size=2, max_size=4), as_quantiles=st.booleans())
def test_no_forecast_submission_makes_step_raise(bounded_env, rows, as_quantiles):
    # a bounded family (transmission limit): any numbers give a finite reward in [-5, 0] and end the episode
    env, case_id = bounded_env
    env.reset(options={"case_id": case_id})
    assert env.episode.scenario.upper is not None
    args = {"quantiles": [sorted(rows[0][:9] * 3)[:9]] * 24} if as_quantiles else {"samples": rows}
    _, reward, term, _, info = env.step({"tool": "submit", "args": args})
    assert term and -RCRPS_CAP <= reward <= 0.0 and 0.0 <= info["R"] <= RCRPS_CAP and np.isfinite(info["loss"])
