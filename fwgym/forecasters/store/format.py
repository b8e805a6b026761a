"""The forecast store's format (:mod:`fwgym.forecasters.store`): the directory layout, the manifest, the
shards' schema, the row keys and digests, and the errors.

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
:data:`~fwgym.forecasters.cache.FORECAST_CACHE` under the forecaster, and served only when the
context's sha256 equals the stored one.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NamedTuple

import numpy as np

from fwgym.errors import DataIntegrityError
from fwgym.forecasters.base import N_QUANTILES, QuantileForecaster

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "ROWS_PER_SHARD", "StoreError", "StoreIntegrityError",
           "StoreMismatch", "StoreAuditError", "ForecastRequest", "context_digest", "fingerprint_digest", "fingerprint_diff",
           "batch_native", "Shard", "parse_manifest", "open_shard", "read_batch"]

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


class StoreAuditError(StoreIntegrityError, DataIntegrityError):
    """A stored forecast that differs from the same forecast recomputed now (the store was changed after
    it was built, or by another forecaster): never served, never an agent's result; like a corrupted
    packaged file it stops the episode (the tools let it through) and ``fwgym`` reports it on one line."""


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


def fingerprint_diff(want: Mapping, got: Mapping, prefix: str = "", *, label: str = "store",
                     width: int = 120) -> list[str]:
    """``["field: <label> X, here Y", ...]`` for every (nested) field where two fingerprints differ (each value's
    JSON cut to ``width`` characters); the forecast store's and the RL outcome tables' checks share it."""
    out = []
    for k in sorted(set(want) | set(got)):
        a, b = want.get(k, "<absent>"), got.get(k, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += fingerprint_diff(a, b, f"{prefix}{k}.", label=label, width=width)
        elif a != b:
            out.append(f"{prefix}{k}: {label} {json.dumps(a)[:width]}, here {json.dumps(b)[:width]}")
    return out


@dataclass
class Shard:
    """One verified, memory-mapped shard file of a model."""

    file: str
    path: Path
    context_steps: int
    horizon: int
    rows: int
    values: np.ndarray | None = None  # (rows, horizon, 9) memory-mapped, float32 or float64
    digests: np.ndarray | None = None  # (rows, 32) uint8




def parse_manifest(raw: bytes, where: Path) -> dict:
    """The manifest's JSON, checked: format and version, every model's fingerprint digest, shard entries
    of the right types inside the model's folder.

    Raises:
        StoreError: anything else (the message names the file).
    """
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


def open_shard(root: Path, model: str, entry: dict, s: dict) -> tuple[Shard, list, list]:
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
        batch = read_batch(path)
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
        shard = Shard(s["file"], path, c, h, batch.num_rows, values.reshape(batch.num_rows, h, N_QUANTILES),
                       dbuf.reshape(batch.num_rows, 32))
        series = batch.column("series_id").to_pylist()
        origins = batch.column("origin").to_numpy().tolist()
    except StoreIntegrityError:
        raise
    except Exception as exc:
        raise StoreIntegrityError(f"forecast store {root}: shard {path} is unreadable or inconsistent with the "
                                  f"manifest ({type(exc).__name__}: {exc})") from None
    return shard, series, origins


def read_batch(path: Path):
    """The one record batch of a shard file, memory-mapped."""
    import pyarrow as pa

    reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
    if reader.num_record_batches != 1:
        raise ValueError(f"{reader.num_record_batches} record batches, expected 1")
    return reader.get_batch(0)
