"""Where every priced forecast comes from: the attached forecast store, else the process-wide cache, else the
forecaster (:func:`cached_quantiles`), and the cache itself (:class:`ForecastCache`, :data:`FORECAST_CACHE`;
its key: :func:`forecast_key`).

The ``forecast`` and ``replay`` tools (:mod:`fwgym.tools.purchase`), the covering recipe of the oracles and
plots (:mod:`fwgym.forecasters.covering`) and nothing else fetch forecasts, all through :func:`cached_quantiles`.
Nothing here knows a case, charges credits or loads weights: a forecast is asked for by series id, context
and horizon, from a forecaster the caller has loaded (and, in the tools, paid for).
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable

import numpy as np

from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.store import ForecastStore, active_store

__all__ = ["Predict", "ForecastCache", "FORECAST_CACHE", "forecast_key", "cached_quantiles"]

#: ``predict(context, horizon) -> (horizon, 9)`` quantiles: a forecaster's ``predict_quantiles``, or a
#: bounded-time wrapper of it (the tools' ``forecast_timeout``)
Predict = Callable[[np.ndarray, int], np.ndarray]


class ForecastCache:
    """Deterministic LRU cache of quantile forecasts keyed by (forecaster instance, series,
    last context hour, context steps, horizon); the instance carries model and revision.

    Bounded by ``max_items`` entries and ``max_bytes`` of forecast arrays (default 64 MiB, ~4,600
    covering forecasts of 194 steps); the least recently used entries go first.
    """

    def __init__(self, max_items: int = 20_000, max_bytes: int = 64 << 20):
        self.max_items, self.max_bytes = max_items, max_bytes
        self.nbytes = 0
        self._data: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._order: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_compute(self, forecaster: QuantileForecaster, key: tuple, compute) -> np.ndarray:
        """The cached forecast of ``forecaster`` under ``key`` (:func:`forecast_key`), else ``compute()`` stored
        read-only (nothing is stored when it raises)."""
        with self._lock:
            store = self._data.setdefault(forecaster, {})
            if key in store:
                self.hits += 1
                if (id(forecaster), key) in self._order:
                    self._order.move_to_end((id(forecaster), key))
                return store[key]
        value = compute()
        value.flags.writeable = False
        okey = (id(forecaster), key)
        with self._lock:
            self.misses += 1
            previous = self._order.pop(okey, None)  # a concurrent computation, or a reused id()
            if previous is not None:
                self.nbytes -= previous[2]
            store[key] = value
            self._order[okey] = (weakref.ref(forecaster), key, value.nbytes)
            self.nbytes += value.nbytes
            while self._order and (len(self._order) > self.max_items or self.nbytes > self.max_bytes):
                _, (ref, old, size) = self._order.popitem(last=False)
                self.nbytes -= size
                f = ref()
                if f is not None:
                    self._data.get(f, {}).pop(old, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data = weakref.WeakKeyDictionary()
            self._order.clear()
            self.nbytes = 0


#: the process-wide forecast cache (:func:`cached_quantiles`)
FORECAST_CACHE = ForecastCache()


def forecast_key(series_id: str, last_hour: int, context_steps: int, horizon: int) -> tuple[str, int, int, int]:
    """The :data:`FORECAST_CACHE` key of a forecast (the forecaster
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
    cache), then :data:`FORECAST_CACHE`, then ``predict``.

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
