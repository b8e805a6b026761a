"""The persisted forecast store: precomputed quantile forecasts on disk, read in place of inference
(docs/store.md).

Priced forecasts are deterministic functions of (forecaster, context, horizon), so they can be
computed once (``fwgym forecasts build``, :func:`build_store`) and read by every later process: the
tools, the oracles and the plots fetch a forecast through
:func:`fwgym.forecasters.cache.cached_quantiles`, which asks the attached store first and runs the
forecaster only on a miss. Credits are charged exactly as without a store (the charge happens in
:mod:`fwgym.tools.purchase` before the forecast is fetched) and a stored forecast is the array the
forecaster returned, bit for bit.

* :mod:`~fwgym.forecasters.store.format`: the directory layout, manifest, shard schema, keys, digests, errors;
* :mod:`~fwgym.forecasters.store.build`: :func:`build_store`;
* :mod:`~fwgym.forecasters.store.read`: :class:`ForecastStore`, :func:`open_store`, :func:`use_store`;
* :mod:`~fwgym.forecasters.store.verify`: recomputing stored rows (``fwgym forecasts verify --recompute N``)
  and the audit of store hits during evaluation.

Attach a store with ``FWBenchEnv(..., forecast_store=DIR)`` (also a ``make_rl_env`` and ``gym.make``
keyword), process-wide with :func:`use_store`, or ``fwgym evaluate --forecast-store DIR``.
"""
from fwgym.forecasters.store.build import build_store
from fwgym.forecasters.store.format import (FORMAT, FORMAT_VERSION, MANIFEST, ForecastRequest, StoreAuditError,
                                            StoreError, StoreIntegrityError, StoreMismatch, batch_native,
                                            context_digest, fingerprint_digest)
from fwgym.forecasters.store.read import ForecastStore, active_store, open_store, use_store

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "StoreError", "StoreIntegrityError", "StoreMismatch", "StoreAuditError",
           "ForecastRequest", "ForecastStore", "context_digest", "fingerprint_digest", "open_store", "use_store",
           "active_store", "build_store", "batch_native"]
