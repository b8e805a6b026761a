"""Priced forecast models by name, one shared instance per process, and the forecast cache."""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.seasonal import SeasonalEmpirical
from fwgym.forecasters.tsfm import Chronos2, ChronosBoltTiny, TimesFM25

#: priced model names in menu order (the protocol's forecast pool)
PRICED_MODELS: tuple[str, ...] = ("seasonal_empirical", "chronos_bolt_tiny", "chronos2", "timesfm25")
_FACTORIES = {"seasonal_empirical": SeasonalEmpirical, "chronos_bolt_tiny": ChronosBoltTiny,
              "chronos2": Chronos2, "timesfm25": TimesFM25}
_INSTANCES: dict[str, QuantileForecaster] = {}
_LOCK = threading.Lock()


def get_forecaster(name: str) -> QuantileForecaster:
    """The process-wide forecaster for ``name`` (created on first use, weights loaded lazily).

    Raises:
        ValueError: unknown name.
    """
    with _LOCK:
        if name not in _INSTANCES:
            if name not in _FACTORIES:
                raise ValueError(f"unknown model {name!r}; known models: {list(PRICED_MODELS)}")
            _INSTANCES[name] = _FACTORIES[name]()
        return _INSTANCES[name]


def set_forecaster(name: str, forecaster: QuantileForecaster | None) -> None:
    """Replace the process-wide forecaster for ``name`` (``None`` restores the default on next use),
    e.g. ``set_forecaster("chronos2", Chronos2(local_dir="/models/chronos-2"))``."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown model {name!r}; known models: {list(PRICED_MODELS)}")
    with _LOCK:
        if forecaster is None:
            _INSTANCES.pop(name, None)
        else:
            _INSTANCES[name] = forecaster


class ForecastCache:
    """Deterministic LRU cache of quantile forecasts keyed by (forecaster instance, series,
    last context hour, context steps, horizon); the instance carries model and revision."""

    def __init__(self, max_items: int = 20_000):
        self.max_items = max_items
        self._data: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._order: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_compute(self, forecaster: QuantileForecaster, key: tuple, compute) -> np.ndarray:
        with self._lock:
            store = self._data.setdefault(forecaster, {})
            if key in store:
                self.hits += 1
                return store[key]
        value = compute()
        value.flags.writeable = False
        with self._lock:
            self.misses += 1
            store[key] = value
            self._order[(id(forecaster), key)] = (weakref.ref(forecaster), key)
            while len(self._order) > self.max_items:
                (_, (ref, old)) = self._order.popitem(last=False)
                f = ref()
                if f is not None:
                    self._data.get(f, {}).pop(old, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data = weakref.WeakKeyDictionary()
            self._order.clear()


FORECAST_CACHE = ForecastCache()
