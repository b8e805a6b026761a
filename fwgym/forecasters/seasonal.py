"""``seasonal_empirical``: the priced classical forecaster of FWBench (protocol §3.2)."""
from __future__ import annotations

import numpy as np

from fwgym.forecasters.base import QuantileForecaster
from fwgym.core.optimizer import QUANTILE_LEVELS

__all__ = ["WEEK", "SeasonalEmpirical"]

WEEK = 168


class SeasonalEmpirical(QuantileForecaster):
    """For step ``j``, the empirical quantiles (inverted-CDF method, ``numpy.quantile(method="inverted_cdf")``)
    of the context values at the same weekly phase (stride 168). Needs a context of >= 168 steps.

    With a 336-step context there are 2 values per phase: levels <= 0.5 give the lower value,
    levels > 0.5 the upper one.
    """

    name = "seasonal_empirical"
    min_context = WEEK
    revision = "v1"
    bounded = True  # two small NumPy quantile calls: no worker thread (its hand-off cost more than the forecast)
    store_audit = 0.05  # cheap: 1 in 20 store hits (and the first) is recomputed and compared

    def _predict(self, context: np.ndarray, horizon: int) -> np.ndarray:
        steps = np.arange(1, horizon + 1)
        # position in the context of the most recent value in phase with step j: n - 1 + j - 168*ceil(j/168)
        last = len(context) - 1 + steps - WEEK * np.ceil(steps / WEEK).astype(np.int64)
        counts = last // WEEK + 1  # values in phase; at most two distinct counts
        out = np.empty((horizon, len(QUANTILE_LEVELS)))
        for c in np.unique(counts):
            rows = np.flatnonzero(counts == c)
            vals = context[last[rows, None] - WEEK * np.arange(c)[None, :]]
            out[rows] = np.quantile(vals, QUANTILE_LEVELS, axis=1, method="inverted_cdf").T
        return out
