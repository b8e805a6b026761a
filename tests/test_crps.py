"""CRPS, pinball loss and RCRPS against hand-computed values (issue 4) and scoringrules."""
import numpy as np
import pytest

from fwgym.scoring import RCRPS_CAP, crps_quantiles, crps_samples, pinball_loss, rcrps, rcrps_alpha

SAMPLES = np.array([[9, 12, 15, 16], [10, 11, 13, 17], [11, 13, 14, 15], [8, 12, 16, 18], [10, 14, 12, 16]], float)
TARGET = np.array([10, 12, 14, 16], float)


def roi(*idx):
    return np.isin(np.arange(4), idx)


@pytest.mark.parametrize("samples,y,expected", [([1, 2, 3, 4], 2.5, 1 / 6), ([-1, 1], 0, 0.0), ([2, 2, 2, 2, 2], 0, 2.0)])
def test_crps_reference_values(samples, y, expected):
    assert float(crps_samples(np.array(samples, float), y)) == pytest.approx(expected, abs=1e-15)


def test_crps_per_step_by_hand():
    # fair CRPS of each column of SAMPLES vs TARGET, computed by hand: 0.1, 0.1, 0.2, 0.1
    np.testing.assert_allclose(crps_samples(SAMPLES, TARGET), [0.1, 0.1, 0.2, 0.1], atol=1e-14)


def test_crps_matches_scoringrules_fair():
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(0)
    for n in (2, 3, 17, 200):
        x = rng.normal(size=(n, 24)) * rng.uniform(0.1, 100)
        y = rng.normal(size=24)
        np.testing.assert_allclose(crps_samples(x, y), sr.crps_ensemble(y, x.T, estimator="fair"), atol=1e-12, rtol=0)


@pytest.mark.parametrize("kwargs,expected", [
    ({}, 0.03125),
    ({"roi": roi(1, 2)}, 0.03125),
    ({"roi": roi(2)}, 0.0375),
    ({"roi": roi(1, 2), "lower": np.full(4, 10.0)}, 0.09375),
    ({"lower": np.full(4, 10.0), "upper": np.full(4, 16.0)}, 0.21875),
])
def test_rcrps_reference_values(kwargs, expected):
    assert rcrps(SAMPLES, TARGET, 0.25, **kwargs) == pytest.approx(expected, abs=1e-15)


def test_rcrps_nan_bounds_mean_unbounded():
    upper = np.array([np.nan, np.nan, np.nan, 16.0])
    # upper bound only at the last step: violations 1 (sample 2) and 2 (sample 4) -> v = [0, .25, 0, .5, 0]
    v = np.array([0, 0.25, 0, 0.5, 0])
    pair = sum(abs(a - b) for a in v for b in v)
    crps_v = v.mean() - pair / (2 * 5 * 4)
    assert rcrps(SAMPLES, TARGET, 1.0, upper=upper) == pytest.approx(0.125 + 10 * crps_v)


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
        crps_samples(np.ones((1, 4)), TARGET)
    with pytest.raises(ValueError):
        crps_samples(np.full((3, 4), np.nan), TARGET)


def test_alpha_is_inverse_mean_train_range():
    from fwgym.cases import build_cases

    ranges = [np.ptp(c.target()) for c in build_cases("cycle_hire", "train") if c.series_id == "14"]
    assert rcrps_alpha("cycle_hire", "14") == pytest.approx(1 / np.mean(ranges))
    assert RCRPS_CAP == 5.0
