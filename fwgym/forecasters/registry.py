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
    f = _INSTANCES.get(name)  # the hot path: a dict read is atomic, creation below takes the lock
    if f is not None:
        return f
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


FORECAST_CACHE = ForecastCache()
