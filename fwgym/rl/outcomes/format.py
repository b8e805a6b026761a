"""The on-disk format of an outcome table: a directory of Arrow IPC files and a sha256 manifest.

Layout (``E`` = menu entries, ``n`` = cases; slot ``s`` owns rows ``1 + s*(E+1) + e``: ``e < E`` the outcome of
menu entry ``e`` played from the case's reset, ``e == E`` the reset itself; row 0 is empty)::

    manifest.json    format, fwgym version, identity and fingerprint (each with its sha256), layout (menu,
                     features, fixed/varying split), the info store's nodes, kinds and patterns, every file's
                     sha256, bytes and rows, and the build record
    cases.arrow      per case: case_id (string), reset_obs (the features after the reset, float32; the first
                     n_fixed of them are fixed within the episode)
    rows.arrow       per row one packed record (``record``, fixed-size binary; :func:`pack_rows`, its fields in the
                     manifest's ``layout.record``): obs (the features after n_fixed, float32), reward (float64),
                     terminated, truncated (bool), mask (the action mask after the row, E bools), info_pattern
                     (int32), the info store's tables (t:<group>: the row's columns of that group) and ndarray
                     leaves (a:<node>; :class:`fwgym.rl.infos.InfoStore`). A vector step gathers each env's record
                     once (one random read per env) and slices every part out of it.
    pool.arrow       the info store's pool of distinct object values, tagged JSON (:mod:`fwgym.rl.values`)

Format version 2 (the packed record); a table of another version is stale (:class:`TableStale`: rebuild it).

Arrays are fixed-size binary columns read as NumPy views of the memory-mapped file (zero-copy, read-only), so a
table of the train split costs no load time beyond its sha256 check and is shared by the processes that read it.
Nothing is pickled: reading a table runs no code. The rules are the forecast store's
(:mod:`fwgym.forecasters.store`): files are checked against the manifest when a table is opened
(:class:`TableIntegrityError`), and a table whose fingerprint differs from the running code's is refused
(:class:`TableStale`).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "FILES", "TableError", "TableIntegrityError", "TableStale",
           "file_sha256", "write_arrow", "read_arrow", "write_manifest", "read_manifest", "default_root", "table_dir",
           "fingerprint_diff", "now", "pack_rows", "record_fields", "unpack_rows"]

FORMAT = "fwgym-outcome-table"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
FILES = ("cases.arrow", "rows.arrow", "pool.arrow")
#: environment variable naming the directory of the default tables (``off`` / ``0`` / ``none``: never read them)
ENV_VAR = "FWGYM_OUTCOME_TABLES"


class TableError(ValueError):
    """An outcome table that cannot be used: missing or malformed manifest or file, or one built for other settings."""


class TableIntegrityError(TableError):
    """A file of the table differs from its manifest (sha256, rows, schema): the message names it."""


class TableStale(TableError):
    """A table built by other code, data, prices, forecasters or library versions (the message names the fields)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fingerprint_diff(want: Mapping, got: Mapping) -> list[str]:
    """``"field: table X, here Y"`` for every leaf where two fingerprints differ
    (:func:`fwgym.forecasters.store.format.fingerprint_diff`, the store's check)."""
    from fwgym.forecasters.store.format import fingerprint_diff as nested_diff

    return nested_diff(want, got, label="table", width=80)


def write_arrow(path: Path, columns: Mapping[str, np.ndarray | Sequence[str]],
                metadata: Mapping[str, str] | None = None) -> dict:
    """Write ``columns`` as one record batch (atomically: a temporary file, then a rename).

    Columns: a 2-D (or more) NumPy array becomes a fixed-size binary column of its rows' bytes (read back by
    :func:`read_arrow` with the dtype and shape recorded in the schema metadata), a 1-D numeric array a primitive
    column, a list of str a string column.

    Returns:
        ``{"sha256", "bytes", "rows"}`` of the written file.
    """
    import pyarrow as pa

    arrays, fields, meta = [], [], dict(metadata or {})
    n = None
    for name, col in columns.items():
        if isinstance(col, np.ndarray) and (col.ndim > 1 or col.dtype == np.bool_):
            a = np.ascontiguousarray(col)
            width = int(np.prod(a.shape[1:], dtype=np.int64)) * a.itemsize
            arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(max(width, 1)) if width else pa.binary(1), len(a),
                                                       [None, pa.py_buffer(a if width else np.zeros(len(a), np.uint8))])
            meta[f"dtype:{name}"] = a.dtype.str
            meta[f"shape:{name}"] = json.dumps(list(a.shape[1:]))
        elif isinstance(col, np.ndarray):
            arr = pa.array(col)
        else:
            arr = pa.array(list(col), type=pa.large_string())
        if n is None:
            n = len(arr)
        elif len(arr) != n:
            raise ValueError(f"column {name} has {len(arr)} rows, expected {n}")
        arrays.append(arr)
        fields.append(pa.field(name, arr.type))
    schema = pa.schema(fields, metadata={**meta, "format": FORMAT, "format_version": str(FORMAT_VERSION)})
    batch = pa.record_batch(arrays, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(batch)
    os.replace(tmp, path)
    return {"sha256": file_sha256(path), "bytes": path.stat().st_size, "rows": int(n or 0)}


def read_arrow(path: Path, expect: Mapping | None = None) -> dict:
    """The columns of a file written by :func:`write_arrow`, memory-mapped: fixed-size binary columns as read-only
    NumPy arrays of their recorded dtype and shape, primitive columns as NumPy arrays, strings as Python lists.

    Args:
        path: the file.
        expect: its manifest entry (``sha256``, ``rows``): checked first.

    Raises:
        TableIntegrityError: the file is missing, its sha256 or row count differs from ``expect``, or it is not
            such a file.
    """
    import pyarrow as pa

    if not path.is_file():
        raise TableIntegrityError(f"outcome table file {path} is missing")
    if expect is not None:
        digest = file_sha256(path)
        if digest != expect["sha256"]:
            raise TableIntegrityError(f"outcome table file {path} has sha256 {digest}, the manifest records "
                                      f"{expect['sha256']}: the file was changed after the table was built; refusing "
                                      "the table (rebuild it: fwgym rl build ..., or restore the file)")
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
        batch = reader.get_batch(0) if reader.num_record_batches == 1 else None
        if batch is None:
            raise ValueError(f"{reader.num_record_batches} record batches, expected 1")
        meta = {k.decode(): v.decode() for k, v in (batch.schema.metadata or {}).items()}
        if meta.get("format") != FORMAT or meta.get("format_version") != str(FORMAT_VERSION):
            raise ValueError(f"format {meta.get('format')!r} version {meta.get('format_version')!r}")
        if expect is not None and batch.num_rows != expect["rows"]:
            raise ValueError(f"{batch.num_rows} rows, the manifest records {expect['rows']}")
        out: dict = {}
        for name, col in zip(batch.schema.names, batch.columns):
            if col.null_count:
                raise ValueError(f"column {name} has nulls")
            if pa.types.is_fixed_size_binary(col.type):
                dtype, shape = np.dtype(meta[f"dtype:{name}"]), tuple(json.loads(meta[f"shape:{name}"]))
                if dtype.hasobject:
                    raise ValueError(f"column {name} has an object dtype")
                width = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                buf = col.buffers()[1]
                if width == 0:
                    out[name] = np.zeros((len(col), *shape), dtype=dtype)
                    continue
                a = np.frombuffer(buf, dtype=np.uint8, count=len(col) * width, offset=col.offset * width)
                out[name] = a.view(dtype).reshape((len(col), *shape))
            elif pa.types.is_large_string(col.type) or pa.types.is_string(col.type):
                out[name] = col.to_pylist()
            else:
                out[name] = col.to_numpy(zero_copy_only=True)
        return out
    except (ValueError, KeyError, TypeError, OSError, pa.ArrowException) as exc:
        raise TableIntegrityError(f"outcome table file {path} is not readable ({type(exc).__name__}: {exc})") from None


def write_manifest(root: Path, doc: dict) -> None:
    """Write ``manifest.json`` atomically (a temporary file in the directory, then a rename)."""
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, root / MANIFEST)


def read_manifest(root: Path) -> dict:
    """The parsed manifest of the table at ``root``, checked for its format and the sha256 of its identity and
    fingerprint.

    Raises:
        TableError: no manifest, or a malformed one.
    """
    from fwgym.forecasters.store import fingerprint_digest as digest  # identity.digest's rule

    path = root / MANIFEST
    if not path.is_file():
        raise TableError(f"no outcome table at {root} (no {MANIFEST}; build one with: fwgym rl build --split SPLIT)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
        if doc.get("format_version") != FORMAT_VERSION:
            raise TableStale(f"outcome table {root} has format version {doc.get('format_version')!r}; this fwgym reads "
                             f"version {FORMAT_VERSION}; rebuild it")  # read.OutcomeTable adds the command
        for part in ("identity", "fingerprint"):
            if digest(doc[part]) != doc[f"{part}_sha256"]:
                raise ValueError(f"{part}_sha256 does not match its {part}")
        if sorted(doc["files"]) != sorted(FILES):
            raise ValueError(f"files {sorted(doc['files'])}, expected {sorted(FILES)}")
        for name, entry in doc["files"].items():
            if not (isinstance(entry.get("sha256"), str) and isinstance(entry.get("rows"), int)):
                raise ValueError(f"malformed file entry {name}")
        layout = doc["layout"]
        if not (isinstance(layout["menu"], list) and isinstance(layout["features"], list)):
            raise ValueError("malformed layout")
    except TableStale:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TableError(f"outcome table manifest {path} is malformed ({type(exc).__name__}: {exc})") from None
    return doc


def default_root() -> Path | None:
    """The directory of the default tables: ``$FWGYM_OUTCOME_TABLES`` (``off``, ``0`` or ``none``: ``None``, no default
    tables), else ``$XDG_CACHE_HOME/fwgym/outcome-tables`` (``~/.cache/fwgym/outcome-tables``)."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() in ("", "off", "0", "none", "false") else Path(value).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "fwgym" / "outcome-tables"


def table_dir(root: Path, identity: Mapping) -> Path:
    """The default directory of the table of ``identity`` under ``root``: ``<variant>-<split>-<sha256[:16]>``."""
    from fwgym.forecasters.store import fingerprint_digest as digest  # identity.digest's rule

    return Path(root) / f"{identity['variant']}-{identity['split']}-{digest(identity)[:16]}"


def pack_rows(columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[list]]:
    """One packed record per row of ``columns`` (each an array of ``rows`` rows, any fixed shape and non-object
    dtype): ``(record (rows, bytes) uint8, fields)``, ``fields`` one ``[name, byte offset, dtype str, shape]`` per
    column. Columns are laid out by decreasing alignment and the record is padded to a multiple of the largest
    alignment (at least 8 bytes), so every field of every row is aligned; :func:`unpack_rows` gives the columns back
    as views.

    Raises:
        ValueError: columns of different row counts, an object dtype, or a structured / sub-array dtype (its
            ``dtype.str`` would not name it).
    """
    items = [(name, np.asarray(a)) for name, a in columns.items()]
    rows = {len(a) for _, a in items}
    if len(rows) > 1:
        raise ValueError(f"columns of different row counts: {sorted(rows)}")
    if any(a.dtype.hasobject or a.ndim == 0 or a.dtype.fields is not None or a.dtype.subdtype is not None
           for _, a in items):
        raise ValueError("a column has an object, structured or sub-array dtype, or no rows axis")
    n = rows.pop() if rows else 0
    items.sort(key=lambda kv: -kv[1].dtype.alignment)
    offsets, off = [], 0
    for _, a in items:
        offsets.append(off)
        off += a.dtype.itemsize * int(np.prod(a.shape[1:], dtype=np.int64))
    align = max([8] + [a.dtype.alignment for _, a in items])
    record = np.zeros((n, max(-(-off // align) * align, align)), dtype=np.uint8)
    for (_, a), o in zip(items, offsets):
        w = a.dtype.itemsize * int(np.prod(a.shape[1:], dtype=np.int64))
        if w:
            record[:, o: o + w] = np.ascontiguousarray(a).view(np.uint8).reshape(n, w)
    return record, [[name, o, a.dtype.str, list(a.shape[1:])] for (name, a), o in zip(items, offsets)]


def record_fields(fields: Sequence, width: int) -> dict[str, tuple[int, np.dtype, tuple[int, ...]]]:
    """A packed record's field list (:func:`pack_rows`'s ``fields``), checked against a ``width``-byte record:
    ``{name: (byte offset, dtype, shape)}`` in the list's order.

    Raises:
        ValueError: a malformed field list (unknown dtype, object dtype, a field outside the record, overlapping or
            misaligned fields, a repeated name).
    """
    out: dict[str, tuple[int, np.dtype, tuple[int, ...]]] = {}
    spans = []
    for field in fields:
        try:
            name, off, dtype, shape = str(field[0]), int(field[1]), np.dtype(field[2]), tuple(int(d) for d in field[3])
            if dtype.hasobject or name in out or any(d < 0 for d in shape):
                raise ValueError("object dtype, repeated name or negative shape")
            w = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        except (IndexError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"record field {field!r} is malformed ({type(exc).__name__}: {exc})") from None
        if off < 0 or off + w > width or off % dtype.alignment:
            raise ValueError(f"record field {field!r} is outside the {width}-byte record or misaligned")
        spans.append((off, off + w, name))
        out[name] = (off, dtype, shape)
    end, last = 0, None  # a sweep over the non-empty spans (an empty one between two must not hide their overlap)
    for b0, b1, b in sorted(s for s in spans if s[1] > s[0]):
        if b0 < end:
            raise ValueError(f"record fields {last} and {b} overlap")
        if b1 > end:
            end, last = b1, b
    return out


def unpack_rows(record: np.ndarray, fields: Sequence | Mapping) -> dict[str, np.ndarray]:
    """The columns of a packed ``record`` (:func:`pack_rows`) as views of it (read-only when the record is):
    ``{name: (rows, *shape) array of its dtype}``; ``fields`` a field list or :func:`record_fields`' dict.

    Raises:
        ValueError: a record that is not ``(rows, bytes)`` uint8; a malformed field list (:func:`record_fields`).
    """
    if record.ndim != 2 or record.dtype != np.uint8:
        raise ValueError(f"a record is a (rows, bytes) uint8 array, got {record.dtype} {record.shape}")
    n, width = record.shape
    specs = fields if isinstance(fields, Mapping) else record_fields(fields, width)
    out: dict[str, np.ndarray] = {}
    for name, (off, dtype, shape) in specs.items():
        w = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        out[name] = (record[:, off: off + w].view(dtype).reshape(n, *shape) if w else
                     np.zeros((n, *shape), dtype=dtype))
    return out
