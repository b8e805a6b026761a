"""Predictive distributions for the target window.

* free classical methods (:mod:`fwgym.forecasters.classical`), sample sets per target hour;
* priced quantile forecasters behind :class:`~fwgym.forecasters.base.QuantileForecaster`: the protocol's
  pool (:mod:`fwgym.forecasters.seasonal`, :mod:`fwgym.forecasters.tsfm`), the statsmodels forecasters
  of the extended pool (:mod:`fwgym.forecasters.statistical`) and plug-ins
  (:func:`~fwgym.forecasters.registry.register_forecaster`, entry-point group ``fwgym.forecasters``);
  names, pools and instances in :mod:`fwgym.forecasters.registry`.
"""
from fwgym.forecasters.base import (Availability, ForecastBackendError, ModelUnavailable, QuantileForecaster,
                                    fill_gaps)
from fwgym.forecasters.classical import CLASSICAL_METHODS, classical_distribution
from fwgym.forecasters.cache import FORECAST_CACHE
from fwgym.forecasters.registry import (ENTRY_POINT_GROUP, EXTENDED_MODELS, POOLS, PRICED_MODELS,
                                        STATISTICAL_MODELS, ForecasterSpec, PluginError, check_models, describe_pool,
                                        get_forecaster, known_models, load_entry_points, register_forecaster,
                                        set_forecaster, unregister_forecaster)
from fwgym.forecasters.seasonal import SeasonalEmpirical
from fwgym.forecasters.statistical import ETS, MSTLETS, SARIMA, StatsmodelsForecaster, Theta
from fwgym.forecasters.tsfm import Chronos2, ChronosBoltTiny, TimesFM25

__all__ = [
    "Availability", "ForecastBackendError", "ModelUnavailable", "QuantileForecaster", "fill_gaps",
    "CLASSICAL_METHODS", "classical_distribution", "FORECAST_CACHE", "PRICED_MODELS", "get_forecaster",
    "set_forecaster", "SeasonalEmpirical", "Chronos2", "ChronosBoltTiny", "TimesFM25",
    "EXTENDED_MODELS", "STATISTICAL_MODELS", "POOLS", "ENTRY_POINT_GROUP", "ForecasterSpec", "PluginError",
    "check_models", "describe_pool", "known_models", "load_entry_points", "register_forecaster",
    "unregister_forecaster", "StatsmodelsForecaster", "ETS", "Theta", "SARIMA", "MSTLETS",
]
