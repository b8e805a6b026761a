"""Predictive distributions for the target window.

* free classical methods (:mod:`fwgym.forecasters.classical`), sample sets per target hour;
* priced quantile forecasters (:mod:`fwgym.forecasters.seasonal`, :mod:`fwgym.forecasters.tsfm`)
  behind :class:`~fwgym.forecasters.base.QuantileForecaster`.
"""
from fwgym.forecasters.base import (Availability, ForecastBackendError, ModelUnavailable, QuantileForecaster,
                                    fill_gaps)
from fwgym.forecasters.classical import CLASSICAL_METHODS, classical_distribution
from fwgym.forecasters.registry import FORECAST_CACHE, PRICED_MODELS, get_forecaster, set_forecaster
from fwgym.forecasters.seasonal import SeasonalEmpirical
from fwgym.forecasters.tsfm import Chronos2, ChronosBoltTiny, TimesFM25

__all__ = [
    "Availability", "ForecastBackendError", "ModelUnavailable", "QuantileForecaster", "fill_gaps",
    "CLASSICAL_METHODS", "classical_distribution", "FORECAST_CACHE", "PRICED_MODELS", "get_forecaster",
    "set_forecaster", "SeasonalEmpirical", "Chronos2", "ChronosBoltTiny", "TimesFM25",
]
