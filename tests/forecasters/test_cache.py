"""fwgym.forecasters.cache: the forecast cache (LRU order, entry and byte bounds, accounting)."""
import gc

import numpy as np

from fwgym.forecasters.cache import ForecastCache
from fwgym.forecasters.seasonal import SeasonalEmpirical


def _value(n_steps: int, fill: float = 1.0) -> np.ndarray:
    return np.full((n_steps, 9), fill)  # n_steps * 72 bytes


def test_lru_order_and_item_bound():
    cache, f = ForecastCache(max_items=3), SeasonalEmpirical()
    calls = []

    def get(k):
        return cache.get_or_compute(f, k, lambda: calls.append(k) or _value(2, k))

    for k in (1, 2, 3):
        get(k)
    get(1)          # hit: 1 becomes the most recent
    get(4)          # evicts 2, the least recently used
    assert calls == [1, 2, 3, 4] and (cache.hits, cache.misses) == (1, 4)
    get(2)          # recomputed; evicts 3
    get(1)          # still cached
    assert calls == [1, 2, 3, 4, 2]
    assert get(3)[0, 0] == 3 and calls[-1] == 3
    assert not get(1).flags.writeable


def test_byte_bound_and_accounting():
    cache, f = ForecastCache(max_items=100, max_bytes=10 * 72 * 10), SeasonalEmpirical()  # room for ten 10-step forecasts
    for k in range(25):
        cache.get_or_compute(f, k, lambda: _value(10))
    assert len(cache._order) == 10 and cache.nbytes == 10 * 720
    cache.get_or_compute(f, "big", lambda: _value(1000))  # larger than the whole budget: returned, not kept
    assert cache.nbytes <= cache.max_bytes
    cache.clear()
    assert cache.nbytes == 0 and len(cache._order) == 0


def test_entries_of_a_collected_forecaster_are_still_accounted():
    cache = ForecastCache(max_items=100, max_bytes=5 * 720)
    f = SeasonalEmpirical()
    for k in range(5):
        cache.get_or_compute(f, k, lambda: _value(10))
    del f
    gc.collect()
    g = SeasonalEmpirical()
    for k in range(5):  # the dead forecaster's bytes are released as its entries age out
        cache.get_or_compute(g, k, lambda: _value(10))
    assert cache.nbytes == 5 * 720 and len(cache._order) == 5
    calls = []
    cache.get_or_compute(g, 0, lambda: calls.append(0) or _value(10))
    assert calls == []  # g's entries are the ones kept
