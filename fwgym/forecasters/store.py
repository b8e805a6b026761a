"""The persisted forecast store: precomputed quantile forecasts on disk, read in place of inference.

Priced forecasts are deterministic functions of (forecaster, context, horizon), so they can be
computed once (``fwgym forecasts build``, :func:`build_store`) and read by every later process: the
tools, the oracles and the plots fetch a forecast through
:func:`fwgym.forecasters.covering.cached_quantiles`, which asks the attached store first and runs the
forecaster only on a miss. Credits are charged exactly as without a store (the charge happens in
:mod:`fwgym.tools.purchase` before the forecast is fetched) and a stored forecast is the array the
forecaster returned, bit for bit.

**Layout.** A store is a directory::

    manifest.json                       format, fwgym version, and per model: its fingerprint,
                                        builds, and every shard's file, sha256, row count, shape
    <model>/<C>x<H>-<seq>.arrow         Arrow IPC files (uncompressed, memory-mapped when read), one
                                        record batch of forecasts with context C and horizon H each

A shard's columns: ``series_id`` (string), ``origin`` (int64, epoch hour of the last context value),
``context_steps`` (int32), ``horizon`` (int32), ``case_id`` (string, the first case that asked for
the row; informational), ``context_sha256`` (32 bytes: sha256 of the context as C-contiguous
float64, :func:`context_digest`) and ``quantiles`` (fixed-size list of ``H * 9`` values: the
(H, 9) array row-major; float32 when every value of the shard is exactly a float32, which the
TSFMs' outputs are, else float64; read back as the same float64 values). The schema metadata
repeats the model, its fingerprint digest, C, H and the value type.

**Keys.** A row is found by (model, fingerprint, series, origin, context steps, horizon), the key of
:data:`~fwgym.forecasters.registry.FORECAST_CACHE` under the forecaster, and served only when the
context's sha256 equals the stored one (otherwise the lookup is a miss counted as ``stale``, and the
forecast is computed live). Lookups are dictionary reads in an index built when a model is first
prepared (about 100 bytes of memory per stored forecast); the arrays stay in the memory-mapped files.

**Trust.** A store refuses, where it is attached (an env's construction, :func:`use_store`,
:meth:`ForecastStore.attach`, the CLI; :class:`StoreError` and subclasses, all ``ValueError``):

* a shard whose sha256, row count or schema differs from the manifest (:class:`StoreIntegrityError`,
  naming the file); digests are checked when a model is prepared, i.e. when an env, ``use_store``
  or :meth:`ForecastStore.attach` first needs it, before any of its forecasts is served;
* a forecaster whose :meth:`~fwgym.forecasters.base.QuantileForecaster.fingerprint` differs from the
  one the model was built with (another revision, other weights, settings, device or package versions:
  :class:`StoreMismatch`, naming the fields). Refusing, rather than ignoring the store with a warning,
  because a store is attached on purpose: a user who asked for it should learn that it cannot serve.

A forecaster first seen by a lookup (e.g. an oracle's own instance) and refused then is served live
with a ``RuntimeWarning`` instead (:meth:`ForecastStore.get`): a lookup never changes a result.

Digests are checked once per process and store (:func:`open_store` shares the instance): a shard
rewritten in place while a process has it memory-mapped is not detected by that process (replacing
the file, as the builder does, does not affect existing maps); ``fwgym forecasts verify`` checks
again.

A TSFM's forecast depends at the level of float32 rounding on the torch thread count and the
hardware (the single-series path itself does); a store fixes one answer: the build's, recorded with
its ``torch_threads``. Statistical forecasts fitted under a time bound are stored when the fit
finished in time at build time.

Attach a store with ``FWBenchEnv(..., forecast_store=DIR)`` (also a ``make_rl_env`` and ``gym.make``
keyword), process-wide with :func:`use_store`, or ``fwgym evaluate --forecast-store DIR``. Hits,
misses and stale rows are counted per model (:meth:`ForecastStore.counts`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
import time
import weakref
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from fwgym.forecasters.base import N_QUANTILES, QuantileForecaster
from fwgym.ray_session import ray_session
from fwgym.validation import check_int

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "StoreError", "StoreIntegrityError", "StoreMismatch",
           "ForecastRequest", "ForecastStore", "context_digest", "fingerprint_digest", "open_store", "use_store",
           "active_store", "build_store", "batch_native"]

FORMAT = "fwgym-forecast-store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: rows per shard file (a week-ahead shard of float64 forecasts is then ~57 MB)
ROWS_PER_SHARD = 4096


class StoreError(ValueError):
    """A forecast store that cannot be used: missing or malformed manifest, bad arguments."""


class StoreIntegrityError(StoreError):
    """A shard that differs from the manifest (sha256, rows, schema): the message names the file."""


class StoreMismatch(StoreError):
    """A forecaster that is not the one a model of the store was built with (fingerprint differs)."""


class ForecastRequest(NamedTuple):
    """One forecast to store: ``context`` (float array, the ``context_steps`` values ending at the
    epoch hour ``origin``) of series ``series_id``, ``horizon`` steps; ``case_id`` says who asks."""

    case_id: str
    series_id: str
    origin: int
    context: np.ndarray
    horizon: int

    @property
    def key(self) -> tuple[str, int, int, int]:
        return (str(self.series_id), int(self.origin), len(self.context), int(self.horizon))


def context_digest(context: np.ndarray) -> bytes:
    """sha256 (32 bytes) of ``context`` as C-contiguous float64 values (the row check of a lookup)."""
    return hashlib.sha256(np.ascontiguousarray(context, dtype=np.float64).tobytes()).digest()


def fingerprint_digest(fingerprint: Mapping) -> str:
    """Hex sha256 of a fingerprint's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def batch_native(forecaster: QuantileForecaster) -> bool:
    """Whether ``forecaster`` overrides :meth:`~fwgym.forecasters.base.QuantileForecaster.predict_quantiles_batch`
    (one backend call per batch) instead of looping over the single-series path."""
    return type(forecaster).predict_quantiles_batch is not QuantileForecaster.predict_quantiles_batch


def _fingerprint_diff(want: Mapping, got: Mapping, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(want) | set(got)):
        a, b = want.get(k, "<absent>"), got.get(k, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += _fingerprint_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: store {json.dumps(a)[:120]}, here {json.dumps(b)[:120]}")
    return out


# -- reading -----------------------------------------------------------------------------------


@dataclass
class _Shard:
    file: str
    path: Path
    context_steps: int
    horizon: int
    rows: int
    values: np.ndarray | None = None  # (rows, horizon, 9) memory-mapped, float32 or float64
    digests: np.ndarray | None = None  # (rows, 32) uint8


class _Model:
    """The prepared (verified, indexed) rows of one model."""

    def __init__(self, name: str, entry: dict, shards: list[_Shard]):
        self.name, self.entry, self.shards = name, entry, shards
        self.fingerprint = entry["fingerprint"]
        self.fingerprint_sha256 = entry["fingerprint_sha256"]
        self.index: dict[tuple, dict[str, dict[int, int]]] = {}  # (ctx, h) -> series -> origin -> shard << 32 | row
        self.hits = self.misses = self.stale = 0
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
        self.manifest = _parse_manifest(raw, mpath)
        self.models: tuple[str, ...] = tuple(self.manifest["models"])
        self._prepared: dict[str, _Model] = {}
        self._verified: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # forecaster -> model name | False
        self._refusals: dict[str, int] = {}
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
            opened = [_open_shard(self.path, model, entry, s) for s in entry["shards"]]
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
            diff = _fingerprint_diff(m.fingerprint, fp)
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
            series_id, context, last_hour, horizon: as :func:`fwgym.forecasters.covering.cached_quantiles`.

        A forecaster that was not verified before (:meth:`attach` / :meth:`check`, which an env runs
        when it is made) is verified now; if the store cannot serve it (:class:`StoreMismatch`,
        :class:`StoreIntegrityError`) the lookup does not fail: it warns once (``RuntimeWarning``
        naming the reason) and returns ``None`` for every request of that forecaster, which is then
        computed live; ``counts()[model]["refused"]`` counts these lookups. So a lookup never changes
        a result and never fails a tool call; the errors are raised where a store is attached.

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
        with self._lock:
            m.hits += 1
        return q

    def _refuse(self, forecaster: QuantileForecaster, exc: StoreError) -> None:
        import warnings

        with self._lock:
            self._verified[forecaster] = False
            self._refusals[forecaster.name] = self._refusals.get(forecaster.name, 0) + 1
        warnings.warn(f"{exc}; its {forecaster.name} forecasts are computed live", RuntimeWarning, stacklevel=3)

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
        """``{model: {"rows", "hits", "misses", "stale", "refused"}}`` of the models prepared or
        refused (``stale``: misses on a stored key whose context digest differed; ``refused``: lookups
        of a forecaster the store cannot serve, see :meth:`get`; ``rows`` 0 for a model not prepared)."""
        with self._lock:
            out = {n: {"rows": m.rows, "hits": m.hits, "misses": m.misses, "stale": m.stale, "refused": 0}
                   for n, m in self._prepared.items()}
            for n, k in self._refusals.items():
                out.setdefault(n, {"rows": 0, "hits": 0, "misses": 0, "stale": 0, "refused": 0})["refused"] = k
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
                m.hits = m.misses = m.stale = 0
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
            rows[name] = sum(_open_shard(self.path, name, entry, s)[0].rows for s in entry["shards"])
            self.prepare(name)
        return rows


def _parse_manifest(raw: bytes, where: Path) -> dict:
    try:
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
        if doc.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {doc.get('format_version')!r}; this fwgym reads version {FORMAT_VERSION}")
        models = doc["models"]
        if not isinstance(models, dict):
            raise ValueError("'models' is not an object")
        for name, entry in models.items():
            if fingerprint_digest(entry["fingerprint"]) != entry["fingerprint_sha256"]:
                raise ValueError(f"{name}: fingerprint_sha256 does not match its fingerprint")
            for s in entry["shards"]:
                if not (isinstance(s["file"], str) and isinstance(s["sha256"], str) and isinstance(s["rows"], int)
                        and isinstance(s["context_steps"], int) and isinstance(s["horizon"], int)):
                    raise ValueError(f"{name}: malformed shard entry {s!r:.200}")
                p = Path(s["file"])
                if p.is_absolute() or ".." in p.parts or p.parts[0] != name:
                    raise ValueError(f"{name}: shard path {s['file']!r} is not inside the model's folder")
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise StoreError(f"forecast store manifest {where} is malformed ({type(exc).__name__}: {exc})") from None
    return doc


def _open_shard(root: Path, model: str, entry: dict, s: dict) -> tuple[_Shard, list, list]:
    """Check a shard file against its manifest entry and memory-map it: ``(shard, series ids, origins)``."""
    path = root / s["file"]
    if not path.is_file():
        raise StoreIntegrityError(f"forecast store {root}: shard {s['file']} of {model} is missing")
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest != s["sha256"]:
        raise StoreIntegrityError(f"forecast store {root}: shard {path} has sha256 {digest}, the manifest records "
                                  f"{s['sha256']}: the file was changed after the store was built; refusing the store "
                                  "(rebuild it, or restore the file)")
    try:
        batch = _read_batch(path)
        meta = {k.decode(): v.decode() for k, v in (batch.schema.metadata or {}).items()}
        h, c = s["horizon"], s["context_steps"]
        if (meta.get("model") != model or meta.get("fingerprint_sha256") != entry["fingerprint_sha256"]
                or int(meta.get("context_steps", -1)) != c or int(meta.get("horizon", -1)) != h):
            raise ValueError(f"its schema metadata {meta} does not match the manifest")
        if batch.num_rows != s["rows"]:
            raise ValueError(f"it has {batch.num_rows} rows, the manifest records {s['rows']}")
        ctx = batch.column("context_steps").to_numpy()
        hor = batch.column("horizon").to_numpy()
        if batch.num_rows and not (np.all(ctx == c) and np.all(hor == h)):
            raise ValueError("its context_steps/horizon columns differ from the manifest's")
        q = batch.column("quantiles")
        values = q.values.to_numpy(zero_copy_only=True)
        if q.offset or len(values) != batch.num_rows * h * N_QUANTILES:
            raise ValueError("its quantiles column has the wrong size")
        dig = batch.column("context_sha256")
        dbuf = np.frombuffer(dig.buffers()[1], dtype=np.uint8)[dig.offset * 32 : (dig.offset + batch.num_rows) * 32]
        shard = _Shard(s["file"], path, c, h, batch.num_rows, values.reshape(batch.num_rows, h, N_QUANTILES),
                       dbuf.reshape(batch.num_rows, 32))
        series = batch.column("series_id").to_pylist()
        origins = batch.column("origin").to_numpy().tolist()
    except StoreIntegrityError:
        raise
    except Exception as exc:
        raise StoreIntegrityError(f"forecast store {root}: shard {path} is unreadable or inconsistent with the "
                                  f"manifest ({type(exc).__name__}: {exc})") from None
    return shard, series, origins


def _read_batch(path: Path):
    import pyarrow as pa

    reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
    if reader.num_record_batches != 1:
        raise ValueError(f"{reader.num_record_batches} record batches, expected 1")
    return reader.get_batch(0)


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
    :func:`~fwgym.forecasters.covering.cached_quantiles` call without a store of its own (tools of
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


# -- building ----------------------------------------------------------------------------------


def _compute_chunk(forecaster: QuantileForecaster, contexts: list[np.ndarray], horizon: int, batch_size: int,
                   check: str) -> tuple[list, list, list, dict]:
    """Forecasts of one chunk of a (context length, horizon) group.

    With a batch-native forecaster (:func:`batch_native`) and ``batch_size > 1``, each batch goes
    through ``predict_quantiles_batch`` and rows of it are recomputed by the single-series
    ``predict_quantiles`` and compared byte for byte: ``check="first"``: every row of the chunk's
    first batch and one row (rotating) of each later batch; ``"sample"``: one row of each batch;
    ``"all"``: every row (an audit: slower than the single-series path alone). A difference ends batching for the chunk: that batch
    and the rest are computed one series at a time, and the caller recomputes the group's batched
    rows the same way. Without batching every row is ``predict_quantiles``, i.e. the live path.
    A batch that fails is computed row by row, so one failing context does not take its batch down.

    Returns:
        ``(arrays or None, errors or None, batched flags, stats)`` per row, stats
        ``{"batched_rows", "single_rows", "checked_rows", "mismatch"}`` (largest relative difference seen, or None).
    """
    n = len(contexts)
    out: list = [None] * n
    errors: list = [None] * n
    via_batch = [False] * n
    stats = {"batched_rows": 0, "single_rows": 0, "checked_rows": 0, "mismatch": None}

    def single(i: int) -> None:
        try:
            out[i] = forecaster.predict_quantiles(contexts[i], horizon)
        except Exception as exc:  # not stored; the live path fails the same way
            errors[i] = f"{type(exc).__name__}: {str(exc)[:300]}"
        stats["single_rows"] += 1

    batched = batch_native(forecaster) and batch_size > 1
    for b, start in enumerate(range(0, n, batch_size)):
        rows = list(range(start, min(n, start + batch_size)))
        got = None
        if batched:
            try:
                got = forecaster.predict_quantiles_batch([contexts[i] for i in rows], horizon)
            except Exception:
                got = None
        if got is None:
            for i in rows:
                single(i)
            continue
        checked = range(len(rows)) if check == "all" or (check == "first" and b == 0) else (b % len(rows),)
        worst = 0.0
        for k in checked:
            stats["checked_rows"] += 1
            try:
                ref = forecaster.predict_quantiles(contexts[rows[k]], horizon)
            except Exception:
                worst = math.inf
                continue
            g = np.ascontiguousarray(got[k], dtype=np.float64)
            if ref.shape != g.shape:
                worst = math.inf
            elif ref.tobytes() != g.tobytes():
                rel = np.abs(ref - g) / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
                worst = max(worst, float(np.max(rel)) or np.finfo(np.float64).tiny)
        if worst > 0.0:
            stats["mismatch"] = max(stats["mismatch"] or 0.0, worst)
            batched = False
            for i in rows:
                single(i)
            continue
        for k, i in enumerate(rows):
            out[i] = got[k]
            via_batch[i] = True
        stats["batched_rows"] += len(rows)
    return out, errors, via_batch, stats


def _shard_table(model: str, fp_sha: str, ctx: int, horizon: int, rows: list[tuple[ForecastRequest, bytes, np.ndarray]]):
    import pyarrow as pa

    q = np.stack([r[2] for r in rows]).reshape(len(rows), horizon * N_QUANTILES)
    as32 = q.astype(np.float32)
    lossless = bool(np.array_equal(as32.astype(np.float64), q) and
                    np.array_equal(np.signbit(as32), np.signbit(q)))
    values = as32 if lossless else q
    vtype = pa.float32() if lossless else pa.float64()
    qcol = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=vtype), horizon * N_QUANTILES)
    meta = {"model": model, "fingerprint_sha256": fp_sha, "context_steps": str(ctx), "horizon": str(horizon),
            "values": "float32" if lossless else "float64", "format": FORMAT, "format_version": str(FORMAT_VERSION)}
    schema = pa.schema([("series_id", pa.string()), ("origin", pa.int64()), ("context_steps", pa.int32()),
                        ("horizon", pa.int32()), ("case_id", pa.string()), ("context_sha256", pa.binary(32)),
                        ("quantiles", qcol.type)], metadata=meta)
    return pa.record_batch([
        pa.array([r[0].series_id for r in rows], type=pa.string()),
        pa.array([int(r[0].origin) for r in rows], type=pa.int64()),
        pa.array([ctx] * len(rows), type=pa.int32()),
        pa.array([horizon] * len(rows), type=pa.int32()),
        pa.array([r[0].case_id for r in rows], type=pa.string()),
        pa.array([r[1] for r in rows], type=pa.binary(32)),
        qcol,
    ], schema=schema), ("float32" if lossless else "float64")


def _write_shard(path: Path, batch) -> tuple[str, int]:
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    os.replace(tmp, path)
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return digest, path.stat().st_size


def _write_manifest(root: Path, doc: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as a file opened for writing (mkstemp makes it private)
    os.replace(tmp, root / MANIFEST)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _torch_threads() -> int | None:
    import sys

    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def build_store(out: str | os.PathLike, forecaster: QuantileForecaster, requests: Sequence[ForecastRequest], *,  # noqa: C901 - argument checks, resume/overwrite rules and the local/Ray task loop of one build; split with the store refactor (issue 20)
                batch_size: int = 64, workers: int = 1, backend: str = "local", ray_address: str | None = None,
                rows_per_shard: int = ROWS_PER_SHARD, overwrite: bool = False, check: str = "first",
                progress: Callable[[int], None] | None = None, info: Mapping | None = None) -> dict:
    """Compute the forecasts of ``requests`` with ``forecaster`` and add them to the store at ``out``.

    Requests are deduplicated by key; keys the store already holds for this forecaster are skipped
    (a store grows build by build, e.g. the train split, then dev). Requests are grouped by (context
    steps, horizon) and computed in chunks of ``8 * batch_size`` in this process (``workers`` 1),
    in a process pool, or as Ray tasks; a batch-native forecaster (the TSFMs) runs whole batches
    through its pipeline, checked against the single-series path (:func:`_compute_chunk`: stored
    values are the single-series values bit for bit; a group where batching changed a bit is
    computed one series at a time and the manifest says so). Requests whose forecast fails are not
    stored (the live path then fails the same way); the manifest counts them.

    Args:
        out: the store directory (created if needed).
        forecaster: the forecaster (its ``name`` is the model; loaded here, or in each worker).
        requests: the forecasts to compute.
        batch_size: series per backend call (1: one by one).
        workers: processes (``backend="local"``) or Ray CPUs of a local cluster; 1 = this process.
        backend: ``"local"`` or ``"ray"``.
        ray_address: an existing Ray cluster (default: start a local one).
        rows_per_shard: rows per shard file.
        overwrite: replace the model's rows when the store holds it with another fingerprint (or to
            rebuild it from scratch); without it such a store is refused.
        check: how batched results are checked against the single-series path (:func:`_compute_chunk`):
            ``"first"`` (every row of each group's first batch, then one row of every later batch) or
            ``"all"`` (every row).
        progress: called with the number of requests finished, as they finish.
        info: JSON data recorded with this build in the manifest (e.g. split, domains, command).

    Returns:
        the build's record in the manifest (requests, stored, skipped, failed, groups, timing).

    Raises:
        StoreError: bad arguments; a malformed existing store.
        StoreMismatch: the store holds the model with another fingerprint (without ``overwrite``).
        StoreIntegrityError: an existing shard of the model is tampered.
        ModelUnavailable: the forecaster's weights cannot be found.
    """
    from fwgym.version import __version__
    from fwgym.forecasters.base import ModelUnavailable

    batch_size = check_int("batch_size", batch_size, minimum=1, error=StoreError)
    workers = check_int("workers", workers, minimum=1, error=StoreError)
    if backend not in ("local", "ray"):
        raise StoreError(f"backend must be 'local' or 'ray', got {backend!r}")
    if check not in ("first", "all"):
        raise StoreError(f"check must be 'first' or 'all', got {check!r}")
    rows_per_shard = check_int("rows_per_shard", rows_per_shard, minimum=1, error=StoreError)
    model = forecaster.name
    av = forecaster.availability()
    if not av.available:
        raise ModelUnavailable(av.reason or f"{model} is unavailable")
    fp = forecaster.fingerprint()
    if "weights" in fp and fp["weights"] is None:
        raise ModelUnavailable(f"{model}: the identity of its weights cannot be established (not on this machine yet)")
    fp_sha = fingerprint_digest(fp)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    doc = ({"format": FORMAT, "format_version": FORMAT_VERSION, "fwgym_version": __version__, "created": _now(),
            "models": {}} if not (root / MANIFEST).exists() else None)
    existing: set = set()
    if doc is None:
        store = ForecastStore(root)
        doc = store.manifest
        entry = doc["models"].get(model)
        if entry is not None:
            if entry["fingerprint_sha256"] != fp_sha and not overwrite:
                diff = _fingerprint_diff(entry["fingerprint"], fp)
                raise StoreMismatch(f"forecast store {root} holds {model} forecasts of another forecaster "
                                    f"({'; '.join(diff)}); pass overwrite=True (--overwrite) to replace them")
            if overwrite:
                for s in entry["shards"]:
                    (root / s["file"]).unlink(missing_ok=True)
                del doc["models"][model]
            else:
                existing = store.keys(model)
    entry = doc["models"].setdefault(model, {"fingerprint": fp, "fingerprint_sha256": fp_sha,
                                             "revision": forecaster.revision, "builds": [], "shards": []})

    unique: dict[tuple, ForecastRequest] = {}
    for r in requests:
        k = r.key
        if k not in existing and k not in unique:
            unique[k] = r
    groups: dict[tuple[int, int], list[ForecastRequest]] = {}
    for r in unique.values():
        groups.setdefault((len(r.context), int(r.horizon)), []).append(r)

    chunk = 8 * batch_size
    tasks = [(ctx_h, reqs[i : i + chunk], check if check == "all" or i == 0 else "sample")
             for ctx_h, reqs in sorted(groups.items()) for i in range(0, len(reqs), chunk)]
    if workers == 1 and backend == "local":
        forecaster.load()
    results = _run_tasks(forecaster, tasks, batch_size, workers, backend, ray_address, progress)

    group_stats: dict[tuple, dict] = {}
    for (ctx_h, _reqs, _check), (_arrays, _errors, _flags, stats) in zip(tasks, results):
        g = group_stats.setdefault(ctx_h, {"context_steps": ctx_h[0], "horizon": ctx_h[1], "rows": 0, "failed": 0,
                                           "batched_rows": 0, "single_rows": 0, "checked_rows": 0, "batch_mismatch": None})
        for k in ("batched_rows", "single_rows", "checked_rows"):
            g[k] += stats[k]
        if stats["mismatch"] is not None:
            g["batch_mismatch"] = max(g["batch_mismatch"] or 0.0, stats["mismatch"])
    redo = [(t, r) for t, r in zip(tasks, results) if group_stats[t[0]]["batch_mismatch"] is not None and any(r[2])]
    if redo:  # batching changed a bit somewhere in these groups: their batched rows again, one series at a time
        again_tasks = [(ctx_h, [q for q, f in zip(reqs, res[2]) if f], "sample") for (ctx_h, reqs, _c), res in redo]
        again = _run_tasks(forecaster, again_tasks, 1, workers, backend, ray_address, None)
        for ((ctx_h, _reqs, _c), res), (arrays, errors, _f, _stats) in zip(redo, again):
            where = [i for i, f in enumerate(res[2]) if f]
            for j, i in enumerate(where):
                res[0][i], res[1][i], res[2][i] = arrays[j], errors[j], False
            g = group_stats[ctx_h]
            g["batched_rows"] -= len(where)
            g["single_rows"] += len(where)

    seq = 1 + max([int(p.stem.rsplit("-", 1)[-1]) for p in (root / model).glob("*.arrow")
                   if p.stem.rsplit("-", 1)[-1].isdigit()] or [-1])
    failures: list[str] = []
    pending: dict[tuple, list] = {}
    stored = failed = 0

    def flush(ctx_h, rows):
        nonlocal seq
        c, h = ctx_h
        batch, vtype = _shard_table(model, fp_sha, c, h, rows)
        rel = f"{model}/{c:03d}x{h:03d}-{seq:05d}.arrow"
        seq += 1
        digest, size = _write_shard(root / rel, batch)
        entry["shards"].append({"file": rel, "sha256": digest, "rows": len(rows), "context_steps": c, "horizon": h,
                                "values": vtype, "bytes": size})

    for (ctx_h, reqs, _check), (arrays, errors, _flags, _stats) in zip(tasks, results):
        g = group_stats[ctx_h]
        rows = pending.setdefault(ctx_h, [])
        for r, q, err in zip(reqs, arrays, errors):
            if q is None:
                failed += 1
                g["failed"] += 1
                if len(failures) < 20:
                    failures.append(f"{r.case_id} ({r.series_id} @ {r.origin}, {len(r.context)}x{r.horizon}): {err}")
                continue
            rows.append((r, context_digest(r.context), q))
            g["rows"] += 1
            stored += 1
            if len(rows) >= rows_per_shard:
                flush(ctx_h, rows)
                rows = pending[ctx_h] = []
    for ctx_h, rows in pending.items():
        if rows:
            flush(ctx_h, rows)

    seconds = time.perf_counter() - t0
    distinct = {r.key for r in requests}
    record = {
        "created": _now(), "fwgym_version": __version__, "requests": len(requests), "distinct": len(distinct),
        "skipped_existing": len(distinct & existing), "stored": stored, "failed": failed, "failures": failures,
        "batch_size": batch_size, "check": check, "workers": workers, "backend": backend,
        "torch_threads": _torch_threads(),
        "groups": [{**g, "mode": ("single" if not g["batched_rows"] else "batched" if not g["single_rows"]
                                  else "mixed")} for g in group_stats.values()],
        "seconds": round(seconds, 3),
        "forecasts_per_second": round((stored + failed) / seconds, 3) if seconds > 0 else None,
        **({"info": dict(info)} if info else {}),
    }
    entry["builds"].append(record)
    doc["fwgym_version"] = __version__
    doc["updated"] = _now()
    _write_manifest(root, doc)
    with _OPEN_LOCK:  # the directory changed: later open_store calls read it again
        for k in [k for k in _OPEN if k[0] == str(root.resolve())]:
            del _OPEN[k]
    return record


def _task(args):
    return _compute_chunk(*args)


def _run_tasks(forecaster, tasks, batch_size, workers, backend, ray_address, progress) -> list:
    """Run the chunks (in order) in this process, a process pool or Ray; report progress."""
    payloads = [(forecaster, [r.context for r in reqs], ctx_h[1], batch_size, check) for ctx_h, reqs, check in tasks]
    done = []
    if backend == "ray":
        with ray_session(workers, ray_address) as ray:
            remote = ray.remote(_task)
            refs = [remote.remote(p) for p in payloads]
            for ref, p in zip(refs, payloads):
                done.append(ray.get(ref))
                if progress:
                    progress(len(p[1]))
        return done
    if workers == 1:
        unequal: set = set()  # groups where batching changed a bit: their later chunks go one series at a time
        for (ctx_h, _reqs, _check), p in zip(tasks, payloads):
            res = _task(p if ctx_h not in unequal else (*p[:3], 1, p[4]))
            if res[3]["mismatch"] is not None:
                unequal.add(ctx_h)
            done.append(res)
            if progress:
                progress(len(p[1]))
        return done
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for p, res in zip(payloads, pool.map(_task, payloads)):
            done.append(res)
            if progress:
                progress(len(p[1]))
    return done
