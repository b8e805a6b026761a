"""The covering-forecast recipe: one quantile forecast of a case and the plan on it.

"Buy a full-context forecast with the minimal covering horizon, then plan on it" is what the
``forecast`` tool does by default, what the catalog oracle prices without paying
(:func:`fwgym.baselines.oracles.priced_candidate`) and what the case plots draw
(:func:`fwgym.plots.plot_case`). All three go through these functions, so they share one request
(:data:`COVERING_CONTEXT` visible steps, horizon ``case.horizon``), one lookup of the forecast
(:func:`fwgym.forecasters.cache.cached_quantiles`: the attached store, the process-wide cache, the
forecaster), one target slice and one DP call (:func:`plan_on_forecast`).

Nothing here charges credits, loads weights or knows an env: the caller checks availability, loads
the forecaster and (in the tools) charges before asking for a forecast.
"""
from __future__ import annotations

import numpy as np

from fwgym.core.cases import HISTORY_HOURS, Case
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.cache import Predict, cached_quantiles
from fwgym.forecasters.store import ForecastStore
from fwgym.core.optimizer import QUANTILE_MASSES, PlanResult, optimal_plan
from fwgym.core.tariff import credits_for

__all__ = ["COVERING_CONTEXT", "covering_credits", "covering_forecast", "target_quantiles", "plan_on_forecast"]

#: context steps of the covering request: the whole visible history (336 hours)
COVERING_CONTEXT = HISTORY_HOURS


def covering_credits(model: str, case: Case) -> int:
    """Credits of the covering request of ``model`` on ``case`` at the tariff (:func:`fwgym.core.tariff.credits_for`).

    Raises:
        ValueError: ``model`` has no tariff row for that request.
    """
    return credits_for(model, COVERING_CONTEXT, case.horizon)


def covering_forecast(case: Case, forecaster: QuantileForecaster, predict: Predict | None = None,
                      store: ForecastStore | None = None) -> np.ndarray:
    """The covering forecast of ``case``: context = the :data:`COVERING_CONTEXT` last visible hours,
    horizon = ``case.horizon`` (the minimal horizon covering the target: 50 day-ahead, 194 week-ahead).

    Returns:
        read-only float64 array (case.horizon, 9), raw units; step 1 is the hour after the last visible one.

    Args:
        case, forecaster, predict, store: as :func:`fwgym.forecasters.cache.cached_quantiles`.

    Raises:
        as :func:`fwgym.forecasters.cache.cached_quantiles`.
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
