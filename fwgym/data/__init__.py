"""Real data shipped inside fwgym, verified by sha256 on every load.

Two long-format Parquet files live next to this module (see ``ATTRIBUTION.md`` for sources,
licences and the required attribution text):

* ``eia930_demand.parquet`` -- U.S. EIA Form EIA-930 hourly demand, 54 balancing authorities,
  2020-2024, MW, UTC hour start.
* ``tfl_cycle_hire.parquet`` -- TfL cycle-hire hourly departures, 100 stations, 2015, counts,
  UTC hour start, zeros kept.

Missing hours are absent rows. :func:`read_series_file` turns a file into dense per-series hourly
arrays with NaN at missing hours (:class:`RawSeries`); which file is which domain's, and in which unit,
is the domain's spec (:mod:`fwgym.domains`), and :func:`fwgym.core.series.load_series` builds the
:class:`~fwgym.core.series.Series` of a domain. This package knows files and digests only.

Every packaged file that changes a score -- the two Parquet files, the balancing-authority names
and zones (``balancing_authorities.csv``, ``balancing_authority_zones.csv``: names enter the
context, zones place the scenario windows) and the frozen sigma (``../config/sigma.json``) -- is
listed with its sha256 in ``sha256.json`` (:data:`SCORE_FILES`) and checked when it is read
(:func:`verified_bytes`, :func:`verify_packaged`): an edited file is refused with a
:class:`DataIntegrityError` naming it. ``fwgym calibrate-sigma --write`` records the new sigma
file's digest (:func:`record_sha256`).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fwgym.errors import DataIntegrityError

__all__ = ["DATA_DIR", "PACKAGE_DIR", "MANIFEST_PATH", "SCORE_FILES", "NAME_COLUMNS", "DataIntegrityError", "RawSeries",
           "sha256_file", "verify_file", "expected_sha256", "verified_bytes", "verify_packaged", "record_sha256",
           "read_csv_rows", "read_series_file"]

DATA_DIR = Path(__file__).resolve().parent
#: the fwgym package directory: the paths of :data:`SCORE_FILES` are relative to it
PACKAGE_DIR = DATA_DIR.parent
#: the sha256 manifest of :data:`SCORE_FILES`
MANIFEST_PATH = DATA_DIR / "sha256.json"

#: every packaged file that changes a score (paths relative to :data:`PACKAGE_DIR`), each listed in the manifest
SCORE_FILES: tuple[str, ...] = (
    "config/sigma.json",
    "data/balancing_authorities.csv",
    "data/balancing_authority_zones.csv",
    "data/eia930_demand.parquet",
    "data/tfl_cycle_hire.parquet",
)

#: columns of a series file that name its series (the first present is read)
NAME_COLUMNS: tuple[str, ...] = ("station_name", "name")


@dataclass(frozen=True, eq=False)
class RawSeries:
    """One series of a data file as read: its id, its name (from the file's name column, else ``None``),
    the epoch hour of its first value and its dense hourly values (float64, NaN at missing hours,
    read-only). :func:`fwgym.core.series.load_series` makes a :class:`~fwgym.core.series.Series` of it."""

    series_id: str
    name: str | None
    start_hour: int
    values: np.ndarray


_CACHE: dict[tuple[str, str], dict[str, RawSeries]] = {}
_LOCK = threading.Lock()


def sha256_file(path: Path) -> str:
    """Return the hex sha256 digest of the file at ``path`` (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(path: Path, expected: str, actual: str, hint: str = "") -> DataIntegrityError:
    return DataIntegrityError(
        f"data file {path} failed its sha256 check (expected {expected}, got {actual}): the file is truncated "
        f"or altered; {hint or 'reinstall fwgym or restore the original file'}")


def verify_file(path: Path, expected_sha256: str) -> None:
    """Raise :class:`DataIntegrityError` unless ``path`` exists and has digest ``expected_sha256``."""
    path = Path(path)
    if not path.is_file():
        raise DataIntegrityError(
            f"data file {path} is missing; reinstall fwgym (the package ships it) or restore the file"
        )
    actual = sha256_file(path)
    if actual != expected_sha256:
        raise _mismatch(path, expected_sha256, actual)


def _manifest() -> dict[str, str]:
    """``{relative path: sha256}`` of the manifest (read on every call: it is small).

    Raises:
        DataIntegrityError: the manifest is missing, malformed, or lacks one of :data:`SCORE_FILES`.
    """
    path = MANIFEST_PATH
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        out = {str(k): str(v) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataIntegrityError(f"sha256 manifest {path} is missing or malformed ({type(exc).__name__}: {exc}); "
                                 "reinstall fwgym or restore the file") from None
    missing = [f for f in SCORE_FILES if f not in out]
    if missing:
        raise DataIntegrityError(f"sha256 manifest {path} does not list {missing}; reinstall fwgym or restore the file")
    return out


def expected_sha256(relpath: str) -> str:
    """The recorded sha256 of packaged file ``relpath`` (one of :data:`SCORE_FILES`).

    Raises:
        ValueError: ``relpath`` is not a score file.
        DataIntegrityError: the manifest is missing or malformed.
    """
    if relpath not in SCORE_FILES:
        raise ValueError(f"{relpath!r} is not a checked file; expected one of {list(SCORE_FILES)}")
    return _manifest()[relpath]


def _hint(relpath: str) -> str:
    if relpath == "config/sigma.json":
        return ("restore the file, or recompute it with `fwgym calibrate-sigma --write` (which records its digest); "
                "to score with another sigma pass it explicitly (FWBenchEnv(sigma=...))")
    return "reinstall fwgym or restore the original file"


def verified_bytes(relpath: str) -> bytes:
    """The content of packaged score file ``relpath`` (e.g. ``"config/sigma.json"``), read once and
    checked against the manifest before it is returned (so the bytes checked are the bytes parsed).

    Raises:
        ValueError: ``relpath`` is not one of :data:`SCORE_FILES`.
        DataIntegrityError: the file is missing or its digest differs (the message names the file).
    """
    digest = expected_sha256(relpath)
    path = PACKAGE_DIR / relpath
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataIntegrityError(f"data file {path} cannot be read ({type(exc).__name__}: {exc}); "
                                 f"{_hint(relpath)}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise _mismatch(path, digest, actual, _hint(relpath))
    return data


def verify_packaged(relpath: str, path: Path | None = None) -> None:
    """Check ``path`` (default: the packaged ``relpath``) against the manifest's digest of ``relpath``.

    Raises:
        ValueError: ``relpath`` is not one of :data:`SCORE_FILES`.
        DataIntegrityError: missing file or digest mismatch (the message names the file).
    """
    verify_file(PACKAGE_DIR / relpath if path is None else Path(path), expected_sha256(relpath))


def record_sha256(relpath: str) -> str:
    """Record the current digest of packaged file ``relpath`` in the manifest (atomic rewrite) and
    return it. Used by ``fwgym calibrate-sigma --write`` after it writes ``config/sigma.json``.

    Raises:
        ValueError: ``relpath`` is not one of :data:`SCORE_FILES`.
        DataIntegrityError: the manifest is malformed, or the file is missing.
    """
    if relpath not in SCORE_FILES:
        raise ValueError(f"{relpath!r} is not a checked file; expected one of {list(SCORE_FILES)}")
    path = PACKAGE_DIR / relpath
    if not path.is_file():
        raise DataIntegrityError(f"data file {path} is missing")
    files = _manifest()
    files[relpath] = sha256_file(path)
    doc = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    doc["files"] = dict(sorted(files.items()))
    fd, tmp = tempfile.mkstemp(dir=MANIFEST_PATH.parent, prefix=".sha256-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, MANIFEST_PATH)
    return files[relpath]


def read_csv_rows(relpath: str) -> list[dict[str, str]]:
    """Rows of a packaged score CSV (``data/...csv``) after its sha256 check (:func:`verified_bytes`)."""
    text = verified_bytes(relpath).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _release_memory() -> None:
    """Return the parse temporaries (tens of MB) to the OS: Arrow's pool and glibc's free lists."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except Exception:  # pragma: no cover - best effort
        pass
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except Exception:  # pragma: no cover - not glibc
        pass


def _primitive_numpy(column, dtype) -> np.ndarray:
    """A null-free primitive Arrow (chunked) array as a NumPy copy of ``dtype``, read through its data
    buffer (``Array.to_numpy`` would import pandas, ~75 MB of RSS, only to check for extension types).

    Raises:
        ValueError: the column holds nulls.
    """
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if arr.null_count:
        raise ValueError(f"column has {arr.null_count} null values")
    arr = arr.cast(pa.from_numpy_dtype(np.dtype(dtype)))
    width = np.dtype(dtype).itemsize
    buf = arr.buffers()[1]
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * width).copy()


def read_series_file(path: str | Path, sha256: str) -> dict[str, RawSeries]:
    """Read, verify and densify a long-format hourly Parquet file (columns ``series_id``, ``timestamp``
    (UTC hour starts), ``value``, optionally ``station_name`` or ``name``). Missing hours are absent rows.

    Args:
        path: the file.
        sha256: its expected digest (checked before the file is parsed).

    Returns:
        ``{series_id: RawSeries}`` in sorted id order; each ``values`` array is float64, dense from
        ``start_hour`` (epoch hours), NaN at missing hours, read-only. Results are cached per (path,
        digest): the arrays are shared by every caller of a process.

    Raises:
        DataIntegrityError: the file is missing, fails its sha256 check, cannot be parsed, or holds
            duplicate timestamps, non-hourly timestamps, or non-finite / negative values.
    """
    path = Path(path)
    key = (str(path.resolve()), sha256)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        out = _read(path, sha256)
        _CACHE[key] = out
        return out


def _read(path: Path, digest: str) -> dict[str, RawSeries]:  # noqa: C901 - one pass of checks over a parsed file
    verify_file(path, digest)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        # ParquetFile.read without the pandas metadata: pq.read_table would import pandas (~75 MB RSS).
        # The parse runs on the system allocator, which hands its temporaries back (Arrow's default
        # mimalloc pool keeps ~15 MB of them); the previous default pool is restored afterwards.
        previous_pool = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            table = pq.ParquetFile(path).read(use_threads=False, use_pandas_metadata=False)
            enc = table.column("series_id").combine_chunks().dictionary_encode()
            codes = _primitive_numpy(enc.indices, np.int64)
            labels = [str(x) for x in enc.dictionary.to_pylist()]
            if not pa.types.is_timestamp(table.column("timestamp").type):
                raise TypeError(f"column 'timestamp' has type {table.column('timestamp').type}, expected a timestamp")
            micro = _primitive_numpy(table.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()), np.int64)
            values = _primitive_numpy(table.column("value").cast(pa.float64()), np.float64)
            name_field = next((c for c in NAME_COLUMNS if c in table.column_names), None)
            names_col = table.column(name_field) if name_field is not None else None
        finally:
            pa.set_memory_pool(previous_pool)
    except Exception as exc:  # pyarrow raises several exception types for bad files
        raise DataIntegrityError(f"data file {path} could not be read as Parquet: {exc}") from exc
    if len(codes) == 0:
        raise DataIntegrityError(f"data file {path} holds no rows")
    if np.any(micro % 3_600_000_000 != 0):
        raise DataIntegrityError(f"data file {path} has timestamps that are not on the hour")
    hours = micro // 3_600_000_000
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise DataIntegrityError(f"data file {path} holds NaN, infinite or negative values")
    bounds = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(codes)]])
    if len(starts) != len(labels):
        raise DataIntegrityError(f"data file {path} is not sorted by series_id (a series appears in several runs)")
    out: dict[str, RawSeries] = {}
    for s, e in zip(starts, ends):
        sid = labels[codes[s]]
        h = hours[s:e]
        if np.any(np.diff(h) <= 0):
            raise DataIntegrityError(f"data file {path}: series {sid} has duplicate or unsorted timestamps")
        dense = np.full(int(h[-1] - h[0] + 1), np.nan)
        dense[h - h[0]] = values[s:e]
        dense.flags.writeable = False
        name = str(names_col[int(s)].as_py()) if names_col is not None else None
        out[sid] = RawSeries(series_id=sid, name=name, start_hour=int(h[0]), values=dense)
    out = dict(sorted(out.items()))
    del table, enc, codes, values, micro, hours
    _release_memory()
    return out
