"""Reading a forecast store (:mod:`fwgym.forecasters.store`): :class:`ForecastStore`, one instance per
directory and manifest in a process (:func:`open_store`), and the process-wide store (:func:`use_store`).

**Trust.** A store refuses, where it is attached (an env's construction, :func:`use_store`,
:meth:`ForecastStore.attach`, the CLI; :class:`~fwgym.forecasters.store.format.StoreError` and subclasses,
all ``ValueError``):

* a shard whose sha256, row count or schema differs from the manifest (``StoreIntegrityError``, naming the
  file); digests are checked when a model is prepared, i.e. when an env, ``use_store`` or
  :meth:`ForecastStore.attach` first needs it, before any of its forecasts is served;
* a forecaster whose :meth:`~fwgym.forecasters.base.QuantileForecaster.fingerprint` differs from the
  one the model was built with (another revision, other weights, settings, code, device or package
  versions: ``StoreMismatch``, naming the fields). Refusing, rather than ignoring the store with a warning,
  because a store is attached on purpose: a user who asked for it should learn that it cannot serve.

A forecaster first seen by a lookup (e.g. an oracle's own instance) and refused then is served live
with a ``RuntimeWarning`` instead (:meth:`ForecastStore.get`): a lookup never changes a result.

Digests are checked once per process and store (:func:`open_store` shares the instance): a shard
rewritten in place while a process has it memory-mapped is not detected by that process (replacing
the file, as the builder does, does not affect existing maps); ``fwgym forecasts verify`` checks
again.

Hits, misses and stale rows are counted per model (:meth:`ForecastStore.counts`).
"""
from __future__ import annotations

import hashlib
import os
import threading
import weakref
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.store.format import (MANIFEST, StoreAuditError, StoreError, StoreIntegrityError, StoreMismatch,
                                            context_digest, fingerprint_diff, fingerprint_digest, open_shard,
                                            parse_manifest)
from fwgym.forecasters.store.verify import difference

__all__ = ["ForecastStore", "open_store", "use_store", "active_store", "forget_opened"]


class _Model:
    """The prepared (verified, indexed) rows of one model."""

    def __init__(self, name: str, entry: dict, shards: list):
        self.name, self.entry, self.shards = name, entry, shards
        self.fingerprint = entry["fingerprint"]
        self.fingerprint_sha256 = entry["fingerprint_sha256"]
        self.index: dict[tuple, dict[str, dict[int, int]]] = {}  # (ctx, h) -> series -> origin -> shard << 32 | row
        self.hits = self.misses = self.stale = 0
        self.audited = self.audit_errors = 0
        self.tampered: str | None = None  # the audit's refusal, raised again for every later lookup
        self.rows = 0


class ForecastStore:
    """A forecast store directory opened for reading (see the module docstring).

    Prefer :func:`open_store`, which shares one instance per directory in a process.

    Args:
        path: the store directory (with ``manifest.json``).

    Attributes:
        path: the directory; manifest: the parsed manifest; digest: hex sha256 of ``manifest.json``
        (names this exact store, e.g. in a run's metadata); models: the model names it holds.

    Raises:
        StoreError: no directory, no or malformed manifest, unknown format version.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        mpath = self.path / MANIFEST
        if not mpath.is_file():
            raise StoreError(f"forecast store {self.path}: no {MANIFEST} (build one with: fwgym forecasts build "
                             f"--model M --split S --out {self.path})")
        raw = mpath.read_bytes()
        self.digest = hashlib.sha256(raw).hexdigest()
        self.manifest = parse_manifest(raw, mpath)
        self.models: tuple[str, ...] = tuple(self.manifest["models"])
        self._prepared: dict[str, _Model] = {}
        self._verified: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # forecaster -> model name | False
        self._refusals: dict[str, int] = {}
        self._rng = np.random.default_rng()  # audits drawn from OS entropy: not predictable from the store
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ForecastStore({str(self.path)!r}, models={list(self.models)})"

    # -- preparation and verification ----------------------------------------------------------

    def prepare(self, model: str) -> None:
        """Verify the shards of ``model`` (sha256, rows, schema) and index their keys (once).

        Raises:
            StoreError: ``model`` is not in the store.
            StoreIntegrityError: a shard is missing or differs from the manifest (the message names it).
        """
        if model in self._prepared:
            return
        with self._lock:
            if model in self._prepared:
                return
            if model not in self.manifest["models"]:
                raise StoreError(f"forecast store {self.path} holds no forecasts of {model!r} (it holds {list(self.models)})")
            entry = self.manifest["models"][model]
            opened = [open_shard(self.path, model, entry, s) for s in entry["shards"]]
            m = _Model(model, entry, [sh for sh, _, _ in opened])
            for si, (sh, series, origins) in enumerate(opened):
                group = m.index.setdefault((sh.context_steps, sh.horizon), {})
                for row, (sid, origin) in enumerate(zip(series, origins)):
                    by_origin = group.setdefault(sid, {})
                    if origin in by_origin:
                        raise StoreIntegrityError(f"forecast store {self.path}: shard {sh.path} repeats the key "
                                                  f"({sid}, {origin}, {sh.context_steps}, {sh.horizon}) of {model}")
                    by_origin[origin] = (si << 32) | row
                m.rows += sh.rows
            self._prepared[model] = m

    def check(self, forecaster: QuantileForecaster) -> bool:
        """Verify that ``forecaster`` is the one its model was built with (remembered per instance).

        Returns:
            ``True`` when the store holds its model (now prepared: shards verified), ``False`` when
            it holds no forecasts of that model (nothing is served to it).

        Raises:
            StoreMismatch: the fingerprints differ (the message names the differing fields).
            StoreIntegrityError: as :meth:`prepare`.
        """
        name = forecaster.name
        if name not in self.manifest["models"]:
            return False
        if self._verified.get(forecaster) == name:
            return True  # (an instance refused by a lookup is checked again, and raises again)
        self.prepare(name)
        m = self._prepared[name]
        fp = forecaster.fingerprint()
        if fingerprint_digest(fp) != m.fingerprint_sha256:
            diff = fingerprint_diff(m.fingerprint, fp)
            raise StoreMismatch(
                f"forecast store {self.path} was built for another {name} than this process serves "
                f"({'; '.join(diff) or 'fingerprints differ'}); rebuild it with this forecaster (fwgym forecasts "
                f"build --model {name} ... --overwrite) or attach the store only where that forecaster is used")
        self._verified[forecaster] = name
        return True

    def attach(self, forecasters: Mapping[str, QuantileForecaster]) -> "ForecastStore":
        """Prepare and verify the store for the forecasters an env (or a vector env) will use: each
        forecaster whose model the store holds and that reports itself available is checked
        (:meth:`check`); unavailable ones are never asked for a forecast (the tools refuse them free).

        Returns:
            ``self``.

        Raises:
            StoreMismatch, StoreIntegrityError: as :meth:`check`.
        """
        for name, f in forecasters.items():
            if name in self.manifest["models"] and f.availability().available:
                self.check(f)
        return self

    # -- lookups -------------------------------------------------------------------------------

    def get(self, forecaster: QuantileForecaster, series_id: str, context: np.ndarray, last_hour: int,
            horizon: int) -> np.ndarray | None:
        """The stored forecast of a request, or ``None`` (a miss: not stored, or a stored row whose
        context digest differs: ``stale``; a model the store does not hold is not counted).

        Args:
            forecaster: the forecaster the request is for (verified on first use, :meth:`check`).
            series_id, context, last_hour, horizon: as :func:`fwgym.forecasters.cache.cached_quantiles`.

        A forecaster that was not verified before (:meth:`attach` / :meth:`check`, which an env runs
        when it is made) is verified now; if the store cannot serve it (:class:`StoreMismatch`,
        :class:`StoreIntegrityError`) the lookup does not fail: it warns once (``RuntimeWarning``
        naming the reason) and returns ``None`` for every request of that forecaster, which is then
        computed live; ``counts()[model]["refused"]`` counts these lookups. So a lookup never changes
        a result and never fails a tool call; the errors are raised where a store is attached.

        **Audit.** For a forecaster with ``store_audit`` > 0 (cheap to recompute: the seasonal and
        statsmodels forecasters) the model's first hit in this process and a random ``store_audit``
        fraction of the later ones are recomputed and compared bit for bit; a difference raises
        :class:`~fwgym.forecasters.store.format.StoreAuditError` (a
        :class:`~fwgym.errors.DataIntegrityError`: the tools let it through, the episode stops, it is
        never an agent's result) now and at every later lookup of that model.

        Returns:
            read-only float64 array (horizon, 9), equal bit for bit to what the forecaster returned
            at build time.
        """
        if forecaster.name not in self.manifest["models"]:
            return None
        verified = self._verified.get(forecaster)
        if verified is None:
            try:
                self.check(forecaster)
            except StoreError as exc:  # never an error in the middle of an episode: live inference, loudly
                self._refuse(forecaster, exc)
                return None
        elif verified is False:
            with self._lock:
                self._refusals[forecaster.name] = self._refusals.get(forecaster.name, 0) + 1
            return None
        m = self._prepared[forecaster.name]
        code = m.index.get((len(context), int(horizon)), {}).get(str(series_id), {}).get(int(last_hour))
        if code is None:
            with self._lock:
                m.misses += 1
            return None
        sh = m.shards[code >> 32]
        row = code & 0xFFFFFFFF
        if context_digest(context) != sh.digests[row].tobytes():
            with self._lock:
                m.stale += 1
                m.misses += 1
            return None
        q = sh.values[row]
        if q.dtype != np.float64:
            q = q.astype(np.float64)
            q.flags.writeable = False
        if m.tampered is not None:
            raise StoreAuditError(m.tampered)
        if self._audit_due(forecaster, m):
            self._audit(forecaster, m, q, context, horizon, (series_id, int(last_hour), len(context), int(horizon)))
        with self._lock:
            m.hits += 1
        return q

    def _audit_due(self, forecaster: QuantileForecaster, m: _Model) -> bool:
        """Whether this hit is recomputed: the model's first hit in this process, then a random
        ``store_audit`` fraction (a forecaster with ``store_audit`` 0 is never audited)."""
        fraction = float(getattr(forecaster, "store_audit", 0.0) or 0.0)
        if fraction <= 0.0:
            return False
        with self._lock:
            return m.audited == 0 or self._rng.random() < fraction

    def _audit(self, forecaster: QuantileForecaster, m: _Model, stored: np.ndarray, context: np.ndarray,
               horizon: int, key: tuple) -> None:
        """Recompute a hit and compare it bit for bit; a difference refuses the store (see the module doc of
        :mod:`fwgym.forecasters.store.verify`). A recomputation that fails is not a difference (counted)."""
        try:
            fresh = forecaster.predict_quantiles(context, horizon)
        except Exception:  # noqa: BLE001 - e.g. a statsmodels fit past its time limit: no verdict
            with self._lock:
                m.audit_errors += 1
            return
        diff = difference(stored, fresh)
        with self._lock:
            m.audited += 1
            if diff is None:
                return
            m.tampered = (f"forecast store {self.path} (manifest sha256 {self.digest[:16]}): its {m.name} forecast "
                          f"for {key[0]} at hour {key[1]} ({key[2]}x{key[3]}) differs from the one {m.name} "
                          f"computes now (largest difference {diff:.6g}): the store was changed after it was "
                          "built; refusing it (rebuild it; `fwgym forecasts verify DIR --recompute N` checks a "
                          "store's values)")
        raise StoreAuditError(m.tampered)

    def _refuse(self, forecaster: QuantileForecaster, exc: StoreError) -> None:
        from fwgym.warn import warn_user

        with self._lock:
            self._verified[forecaster] = False
            self._refusals[forecaster.name] = self._refusals.get(forecaster.name, 0) + 1
        warn_user(f"{exc}; its {forecaster.name} forecasts are computed live", RuntimeWarning)

    def get_many(self, forecaster: QuantileForecaster,
                 requests: Iterable[tuple[str, np.ndarray, int, int]]) -> list[np.ndarray | None]:
        """:meth:`get` of many ``(series_id, context, last_hour, horizon)`` requests of one forecaster
        (one verification, one index per request): e.g. the forecasts of every sub-env of a vector env.

        Returns:
            one array or ``None`` per request, in order.
        """
        return [self.get(forecaster, s, c, h0, h) for s, c, h0, h in requests]

    def keys(self, model: str) -> set[tuple[str, int, int, int]]:
        """The ``(series_id, origin, context_steps, horizon)`` keys stored for ``model``.

        Raises:
            StoreError, StoreIntegrityError: as :meth:`prepare`.
        """
        self.prepare(model)
        m = self._prepared[model]
        return {(s, o, c, h) for (c, h), by_series in m.index.items() for s, origins in by_series.items() for o in origins}

    def counts(self) -> dict[str, dict[str, int]]:
        """``{model: {"rows", "hits", "misses", "stale", "refused", "audited", "audit_errors"}}`` of the
        models prepared or refused (``stale``: misses on a stored key whose context digest differed;
        ``refused``: lookups of a forecaster the store cannot serve, see :meth:`get`; ``audited``: hits
        recomputed and found equal; ``audit_errors``: recomputations that failed; ``rows`` 0 for a model not
        prepared)."""
        empty = {"rows": 0, "hits": 0, "misses": 0, "stale": 0, "refused": 0, "audited": 0, "audit_errors": 0}
        with self._lock:
            out = {n: {**empty, "rows": m.rows, "hits": m.hits, "misses": m.misses, "stale": m.stale,
                       "audited": m.audited, "audit_errors": m.audit_errors} for n, m in self._prepared.items()}
            for n, k in self._refusals.items():
                out.setdefault(n, dict(empty))["refused"] = k
            return out

    @property
    def hits(self) -> int:
        return sum(c["hits"] for c in self.counts().values())

    @property
    def misses(self) -> int:
        return sum(c["misses"] for c in self.counts().values())

    def reset_counts(self) -> None:
        with self._lock:
            for m in self._prepared.values():
                m.hits = m.misses = m.stale = m.audited = m.audit_errors = 0
            self._refusals.clear()

    def verify(self) -> dict[str, int]:
        """Check every shard of every model against the manifest now (sha256, rows, schema; also
        shards verified before, e.g. by :meth:`prepare`), and prepare every model.

        Returns:
            ``{model: rows}``.

        Raises:
            StoreIntegrityError: as :meth:`prepare`.
        """
        rows = {}
        for name in self.models:
            entry = self.manifest["models"][name]
            rows[name] = sum(open_shard(self.path, name, entry, s)[0].rows for s in entry["shards"])
            self.prepare(name)
        return rows


_OPEN: dict[tuple, ForecastStore] = {}
_OPEN_LOCK = threading.Lock()
_ACTIVE: ForecastStore | None = None


def open_store(store: str | os.PathLike | ForecastStore) -> ForecastStore:
    """The :class:`ForecastStore` of a directory, one instance per directory and manifest in a
    process (envs attached to the same directory share its index and memory maps).

    Args:
        store: a directory, or an open store (returned as it is).

    Raises:
        StoreError: as :class:`ForecastStore`.
    """
    if isinstance(store, ForecastStore):
        return store
    if not isinstance(store, (str, os.PathLike)):
        raise StoreError(f"a forecast store is a directory path or a ForecastStore, got {type(store).__name__}")
    path = Path(store).resolve()
    try:
        st = (path / MANIFEST).stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    with _OPEN_LOCK:
        if key is not None and key in _OPEN:
            return _OPEN[key]
        opened = ForecastStore(path)
        if key is not None:
            _OPEN[key] = opened
        return opened


def use_store(store: str | os.PathLike | ForecastStore | None) -> ForecastStore | None:
    """Attach a forecast store to the whole process (``None`` detaches it): every
    :func:`~fwgym.forecasters.cache.cached_quantiles` call without a store of its own (tools of
    envs made without ``forecast_store``, oracles, plots) reads it first.

    The store is verified against the process-wide forecasters of its models
    (:func:`fwgym.forecasters.registry.get_forecaster`, when available) now; other instances are
    verified when first used (an env made with ``forecasters=`` overrides verifies them when it is made).

    Returns:
        the attached store (or ``None``).

    Raises:
        StoreError, StoreMismatch, StoreIntegrityError: the store cannot serve (nothing is attached then).
    """
    global _ACTIVE
    if store is None:
        _ACTIVE = None
        return None
    from fwgym.forecasters.registry import get_forecaster, known_models

    opened = open_store(store)
    known = set(known_models())
    opened.attach({m: get_forecaster(m) for m in opened.models if m in known})
    _ACTIVE = opened
    return opened


def active_store() -> ForecastStore | None:
    """The process-wide store of :func:`use_store`, or ``None``."""
    return _ACTIVE


def forget_opened(root: str | os.PathLike) -> None:
    """Drop the shared instance of the store at ``root`` (its directory changed: the next
    :func:`open_store` reads it again)."""
    with _OPEN_LOCK:
        for k in [k for k in _OPEN if k[0] == str(Path(root).resolve())]:
            del _OPEN[k]
