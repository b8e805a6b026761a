"""The covering-forecast recipe: one quantile forecast of a case, its cache key, and the plan on it.

"Buy a full-context forecast with the minimal covering horizon, then plan on it" is what the
``forecast`` tool does by default, what the catalog oracle prices without paying
(:func:`fwgym.baselines.oracles.priced_candidate`) and what the case plots draw
(:func:`fwgym.plots.plot_case`). All three go through these functions, so they share one request
(:data:`COVERING_CONTEXT` visible steps, horizon ``case.horizon``), one
:data:`~fwgym.forecasters.registry.FORECAST_CACHE` key (:func:`forecast_key`), one target slice
and one DP call (:func:`plan_on_forecast`). The ``replay`` tool uses :func:`cached_quantiles` for its
backtests (an origin inside the visible history). :func:`cached_quantiles` reads a forecast store
first when one is attached (:mod:`fwgym.forecasters.store`).

Nothing here charges credits, loads weights or knows an env: the caller checks availability, loads
the forecaster and (in the tools) charges before calling :func:`cached_quantiles`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from fwgym.core.cases import HISTORY_HOURS, Case
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.registry import FORECAST_CACHE
from fwgym.forecasters.store import ForecastStore, active_store
from fwgym.core.optimizer import QUANTILE_MASSES, PlanResult, optimal_plan
from fwgym.core.tariff import credits_for

__all__ = ["COVERING_CONTEXT", "covering_credits", "forecast_key", "cached_quantiles", "covering_forecast", "target_quantiles",
           "plan_on_forecast"]

#: context steps of the covering request: the whole visible history (336 hours)
COVERING_CONTEXT = HISTORY_HOURS

#: ``predict(context, horizon) -> (horizon, 9)`` quantiles: a forecaster's ``predict_quantiles``, or a
#: bounded-time wrapper of it (the tools' ``forecast_timeout``)
Predict = Callable[[np.ndarray, int], np.ndarray]


def covering_credits(model: str, case: Case) -> int:
    """Credits of the covering request of ``model`` on ``case`` at the tariff (:func:`fwgym.core.tariff.credits_for`).

    Raises:
        ValueError: ``model`` has no tariff row for that request.
    """
    return credits_for(model, COVERING_CONTEXT, case.horizon)


def forecast_key(series_id: str, last_hour: int, context_steps: int, horizon: int) -> tuple[str, int, int, int]:
    """The :data:`~fwgym.forecasters.registry.FORECAST_CACHE` key of a forecast (the forecaster
    instance, which carries model and revision, is the cache's outer key).

    Args:
        series_id: the series the context is taken from.
        last_hour: epoch hour (UTC) of the last context value; step 1 is ``last_hour + 1``.
        context_steps: number of context values.
        horizon: number of forecast steps.
    """
    return (series_id, int(last_hour), int(context_steps), int(horizon))


def cached_quantiles(forecaster: QuantileForecaster, series_id: str, context: np.ndarray, last_hour: int,
                     horizon: int, predict: Predict | None = None, store: ForecastStore | None = None) -> np.ndarray:
    """Quantiles 0.1..0.9 of ``forecaster`` for ``horizon`` steps after ``context``: read from the
    forecast store when it holds them (:mod:`fwgym.forecasters.store`), else computed once per process
    (deterministic forecasters: a hit equals a recomputation).

    Order: the store (``store``, or the process-wide one of :func:`~fwgym.forecasters.store.use_store`;
    a stored row is served when the context's sha256 matches; store hits are not copied into the
    cache), then :data:`~fwgym.forecasters.registry.FORECAST_CACHE`, then ``predict``.

    Args:
        forecaster: a loaded forecaster (the caller ran ``load()``).
        series_id: the series of ``context``.
        context: float array (T,), consecutive hourly values ending at ``last_hour``, raw units.
        last_hour: epoch hour of ``context[-1]``.
        horizon: steps to forecast, >= 1.
        predict: how to compute on a miss (default ``forecaster.predict_quantiles``).
        store: the forecast store to read (default: the process-wide one, if any).

    Returns:
        read-only float64 array (horizon, 9).

    Raises:
        whatever ``predict`` raises (``ValueError``, ``ModelUnavailable``, ``ForecastBackendError``);
        nothing is cached then. :class:`~fwgym.forecasters.store.StoreMismatch` /
        :class:`~fwgym.forecasters.store.StoreIntegrityError` when the store cannot serve this
        forecaster (an env verifies its forecasters when it is made, so its tools never see these).
    """
    source = store if store is not None else active_store()
    if source is not None:
        stored = source.get(forecaster, series_id, context, last_hour, horizon)
        if stored is not None:
            return stored
    compute = forecaster.predict_quantiles if predict is None else predict
    key = forecast_key(series_id, last_hour, len(context), horizon)
    return FORECAST_CACHE.get_or_compute(forecaster, key, lambda: compute(context, horizon))


def covering_forecast(case: Case, forecaster: QuantileForecaster, predict: Predict | None = None,
                      store: ForecastStore | None = None) -> np.ndarray:
    """The covering forecast of ``case``: context = the :data:`COVERING_CONTEXT` last visible hours,
    horizon = ``case.horizon`` (the minimal horizon covering the target: 50 day-ahead, 194 week-ahead).

    Returns:
        read-only float64 array (case.horizon, 9), raw units; step 1 is the hour after the last visible one.

    Args:
        case, forecaster, predict, store: as :func:`cached_quantiles`.

    Raises:
        as :func:`cached_quantiles`.
    """
    context = case.history[-COVERING_CONTEXT:]
    return cached_quantiles(forecaster, case.series_id, context, case.last_visible, case.horizon, predict, store)


def target_quantiles(case: Case, quantiles: np.ndarray) -> np.ndarray | None:
    """The 24 target rows (steps ``target_steps[0]..target_steps[1]``) of a forecast from the last
    visible hour, shape (24, 9); ``None`` when its horizon stops short of the target."""
    lo, hi = case.target_steps
    return quantiles[lo - 1 : hi] if len(quantiles) >= hi else None


def plan_on_forecast(case: Case, quantiles: np.ndarray) -> PlanResult | None:
    """The optimal plan under a forecast from the last visible hour: the DP on its 24 target rows with
    the quantile masses [0.15, 0.10 x 7, 0.15] (DESIGN §4); ``None`` when the forecast does not cover
    the target."""
    q = target_quantiles(case, quantiles)
    return None if q is None else optimal_plan(q, case.scale, case.shortage, QUANTILE_MASSES)
