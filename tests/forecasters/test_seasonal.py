"""seasonal_empirical: inverted-CDF quantiles of same-weekly-phase values, by hand and vs a per-step loop."""
import numpy as np
import pytest

from fwgym.forecasters.seasonal import SeasonalEmpirical

LEVELS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def test_two_values_per_phase_by_hand():
    x = np.arange(336.0)
    q = SeasonalEmpirical().predict_quantiles(x, 194)
    # step 1 is in phase with positions 168 and 0: levels <= 0.5 -> 0, > 0.5 -> 168
    np.testing.assert_array_equal(q[0], [0, 0, 0, 0, 0, 168, 168, 168, 168])
    np.testing.assert_array_equal(q[193], [25] * 5 + [193] * 4)


@pytest.mark.parametrize("n", [168, 200, 336])
def test_matches_a_per_step_loop(n):
    rng = np.random.default_rng(n)
    x = rng.gamma(2.0, 50.0, size=n)
    q = SeasonalEmpirical().predict_quantiles(x, 194)
    for j in range(1, 195):
        last = n - 1 + j - 168 * int(np.ceil(j / 168))
        np.testing.assert_array_equal(q[j - 1], np.quantile(x[last::-168], LEVELS, method="inverted_cdf"))


def test_needs_a_week_of_context():
    with pytest.raises(ValueError, match="at least 168"):
        SeasonalEmpirical().predict_quantiles(np.ones(100), 10)
