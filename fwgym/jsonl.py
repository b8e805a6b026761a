"""JSON Lines files (https://jsonlines.org): the one reader and writer of fwgym's record, trace and log files.

One JSON value per line, UTF-8, ``\\n`` line ends; blank lines are skipped when reading. Lines are
written with ``ensure_ascii=True`` (every non-ASCII character as a ``\\uXXXX`` escape), so any Python
string, even one with a lone surrogate from a model's reply, can be written and is read back exactly;
floats are written by ``repr`` (they read back bit for bit) and NumPy scalars and arrays as the
equivalent Python values (:func:`to_jsonable`). NaN and infinities are written as Python's ``json``
writes them (``NaN``, ``Infinity``) and read back.

:func:`write_jsonl` replaces a whole file atomically (a temporary file in the same folder, then
``os.replace``); :func:`append_jsonl` adds one line under an exclusive lock (so processes may share a
file) and can ``fsync`` it, so a crash loses at most the line being written.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = ["to_jsonable", "dumps_line", "iter_jsonl", "read_jsonl", "write_jsonl", "append_jsonl"]


def to_jsonable(o: Any) -> Any:
    """The ``default`` hook of :func:`json.dumps`: NumPy (or torch) scalars as Python numbers, arrays as
    nested lists of their shape, anything else as ``str(o)``."""
    if callable(getattr(o, "tolist", None)):
        return o.tolist()
    if callable(getattr(o, "item", None)):
        return o.item()
    return str(o)


def dumps_line(value: Any, *, sort_keys: bool = False) -> str:
    """``value`` as one JSON line (with its ``\\n``), as every fwgym JSONL file writes it."""
    return json.dumps(value, sort_keys=sort_keys, default=to_jsonable) + "\n"


def iter_jsonl(path: str | os.PathLike, *, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``path`` (numbers start at 1).

    Args:
        objects: every value must be a JSON object (a ``dict``).

    Raises:
        FileNotFoundError: no such file. ValueError: a line is not UTF-8 or not JSON, or not an object
            with ``objects`` (the message names ``path:line``).
    """
    with open(path, encoding="utf-8") as fh:
        n = 0
        while True:
            try:
                line = fh.readline()
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path}:{n + 1}: not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                                 "line's chunk); the file is not a JSON Lines file of fwgym, or it is corrupt") from None
            if not line:
                break
            n += 1
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a JSON line ({exc}); the file is truncated or corrupt") from None
            if objects and not isinstance(value, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object, got a {type(value).__name__}")
            yield n, value


def read_jsonl(path: str | os.PathLike, *, objects: bool = True) -> list:
    """Every value of a JSONL file, in order (see :func:`iter_jsonl` for ``objects`` and the errors)."""
    return [value for _, value in iter_jsonl(path, objects=objects)]


def write_jsonl(path: str | os.PathLike, values: Iterable[Any], *, sort_keys: bool = False) -> Path:
    """Write ``values`` one per line to ``path``, replacing the file atomically (parent folders created).

    Returns:
        The path written.

    Raises:
        OSError: the file cannot be written. TypeError, ValueError: a value is not JSON-serialisable
            (the old file, if any, is left as it was).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")  # open(): the umask applies
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as fh:
            for value in values:
                fh.write(dumps_line(value, sort_keys=sort_keys))
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def append_jsonl(path: str | os.PathLike, value: Any, *, sort_keys: bool = False, fsync: bool = False) -> None:
    """Append ``value`` as one line to ``path`` (parent folders created), under an exclusive
    ``fcntl.flock`` lock where the platform has one, so several processes may append to one file.

    Args:
        fsync: also ``os.fsync`` the file, so the line survives a crash of the machine.

    Raises:
        OSError: the file cannot be written. TypeError, ValueError: ``value`` is not JSON-serialisable
            (nothing is written).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    line = dumps_line(value, sort_keys=sort_keys)
    with open(p, "a", encoding="utf-8", newline="\n") as fh:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except (ImportError, OSError):  # pragma: no cover - non-POSIX
            pass
        fh.write(line)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
