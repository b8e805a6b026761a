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

Reading is one reader for every JSON file fwgym reads (records, traces, started logs, run manifests, the forecast
store's manifest, reply caches): :func:`iter_jsonl` / :func:`read_jsonl` for JSON Lines, :func:`read_json` for a
file holding one JSON value. A line or file that is not UTF-8, not JSON, or nested deeper than
:data:`MAX_DEPTH` levels (fwgym's own files nest a few levels; 100,000 nested brackets would otherwise end
Python's parser with a ``RecursionError``) is a ``ValueError`` whose message starts with ``file:line``.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = ["MAX_DEPTH", "to_jsonable", "dumps_line", "loads", "iter_jsonl", "read_jsonl", "read_json", "write_jsonl",
           "append_jsonl", "json_depth"]

#: deepest nesting (arrays and objects) a JSON value fwgym reads may have
MAX_DEPTH = 256


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


def _too_deep(text: str, limit: int = MAX_DEPTH) -> int | None:
    """Offset in ``text`` where JSON nesting first exceeds ``limit`` levels (brackets in strings not counted), or
    ``None``. Only called when ``text`` holds more than ``limit`` opening brackets."""
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return None


def _deep_error(where: str, text: str, offset: int | None, base_line: int | None = None) -> ValueError:
    pos = ""
    if offset is not None:
        line = text.count("\n", 0, offset) + 1
        col = offset - (text.rfind("\n", 0, offset) + 1) + 1
        pos = f":{line}" if base_line is None else ""
        pos += f" (column {col})"
    return ValueError(f"{where}{pos}: JSON nested deeper than {MAX_DEPTH} levels; not a file fwgym wrote, or corrupt")


def loads(text: str, where: str, *, multiline: bool = False) -> Any:
    """``json.loads(text)`` refusing nesting deeper than :data:`MAX_DEPTH` (before Python's parser would recurse).

    Args:
        where: what the message names (``"path:line"`` for a line; ``"path"`` with ``multiline``: the line is added).

    Raises:
        ValueError: ``"<where>[:line]: ..."``: not JSON, or nested too deeply.
    """
    if text.count("[") + text.count("{") > MAX_DEPTH:
        off = _too_deep(text)
        if off is not None:
            raise _deep_error(where, text, off, None if multiline else 0)
    try:
        return json.loads(text)
    except RecursionError:
        raise _deep_error(where, text, None) from None
    except ValueError as exc:
        line = f":{exc.lineno}" if multiline and isinstance(exc, json.JSONDecodeError) else ""
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ValueError(f"{where}{line}: not JSON ({msg}); the file is truncated or corrupt") from None


def json_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON-like value (lists, tuples and dicts), counted up to ``limit + 1``."""
    depth, level = 0, [value]
    while level and depth <= limit:
        nxt: list[Any] = []
        for v in level:
            if isinstance(v, dict):
                nxt.extend(v.values())
            elif isinstance(v, (list, tuple)):
                nxt.extend(v)
        if not nxt and not any(isinstance(v, (dict, list, tuple)) for v in level):
            break
        depth += 1
        level = nxt
    return depth


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value of a file (a manifest, a reply cache entry, ...).

    Raises:
        FileNotFoundError: no such file. ValueError: ``path:line: ...``: not UTF-8, not JSON, nested deeper than
            :data:`MAX_DEPTH` levels.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return loads(text, str(path), multiline=True)


def iter_jsonl(path: str | os.PathLike, *, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``path`` (numbers start at 1).

    Args:
        objects: every value must be a JSON object (a ``dict``).

    Raises:
        FileNotFoundError: no such file. ValueError: a line is not UTF-8, not JSON, nested deeper than
            :data:`MAX_DEPTH` levels, or not an object with ``objects`` (the message names ``path:line``).
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
                value = loads(line, f"{path}:{n}")
            except ValueError as exc:
                raise ValueError(str(exc).replace(": not JSON (", ": not a JSON line (", 1)) from None
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
