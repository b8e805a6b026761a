"""The request/reply protocol between the evaluating process and a worker (:mod:`fwgym.isolation`).

Standard library only: the worker script (:mod:`fwgym.isolation.worker`) loads this file by path where
fwgym is not importable (a container that holds only an agent's code), so nothing here may import fwgym,
numpy or any other package.

**Frames.** One request, one reply, strictly alternating. A frame is a 4-byte big-endian length and the
payload. Requests from the evaluator are pickles of plain data (:func:`plain_data`: tuples, dicts, lists,
strings, numbers, numpy arrays; the worker trusts its evaluator). Replies are UTF-8 JSON
(:func:`encode_reply`, :func:`decode_reply`), so the evaluator parses them as plain data and never
unpickles anything the hosted code made:

================================= ==========================================================================
request                           reply ``{"ok": value}`` or ``{"error": {"type", "message", "traceback"}}``
================================= ==========================================================================
``("init", spec)``                the hello (:func:`fwgym.isolation.worker.describe`) of the object ``spec``
                                  names, after the sandbox and the import guard are in place
``("new",)``                      a fresh object from the same factory; its hello
``("reset", info)``               ``None`` (``reset(info)``, ``reset()`` or nothing, as ``run_episode``)
``("call", method, args)``        ``getattr(obj, method)(*args)`` (``act``, ``end_episode``, ``predict``...)
``("close",)``                    ``None``; the worker then exits 0 (it also exits at end of input)
================================= ==========================================================================

``spec`` is ``{"target": "package.module:factory" | "/abs/path/file.py:factory" | "builtin:NAME",
"kwargs": {...}, "cwd": DIR, "fwgym_version": STR, "guard": bool, "denied": [module, ...],
"sandbox": {...} | None, "sys_path": [DIR, ...] (optional), "own": DIR | None (optional)}`` (see
:func:`fwgym.isolation.worker.init` and :mod:`fwgym.isolation.sandbox`).
"""
from __future__ import annotations

import json
import struct
import traceback
from typing import Any, BinaryIO, Mapping

__all__ = ["PROTOCOL_VERSION", "HEADER", "DENIED_MODULES", "MAX_ERROR_CHARS", "MAX_TRACEBACK_CHARS", "FrameError",
           "write_frame", "read_frame", "encode_reply", "decode_reply", "plain_data"]

#: version of the request/reply protocol (sent in every hello)
PROTOCOL_VERSION = 2
#: the frame header: payload length, 4 bytes big-endian
HEADER = struct.Struct(">I")
#: fwgym modules hosted code may not import (nor any module below them): the packaged data and its
#: loaders, cases (targets), the envs (hindsight), the tools' episode ledger, the scorer and sigma, the
#: evaluation and report layers, the baselines (the oracles read hindsight), the RL room and the CLI
DENIED_MODULES: tuple[str, ...] = (
    "fwgym.data", "fwgym.domains", "fwgym.config", "fwgym.core.cases", "fwgym.core.scorer", "fwgym.core.scoring", "fwgym.context",
    "fwgym.envs", "fwgym.tools", "fwgym.evaluation", "fwgym.baselines", "fwgym.wrappers", "fwgym.rl", "fwgym.report",
    "fwgym.plots", "fwgym.cli",
)
#: most characters of an error message / traceback in a reply
MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS = 2000, 8000
#: how many nested containers :func:`plain_data` follows
_MAX_DEPTH = 64


class FrameError(RuntimeError):
    """A frame that is larger than allowed, or input that ends inside a frame."""


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    """Write one frame (header + ``payload``) and flush.

    Raises:
        FrameError: ``payload`` longer than 4 GiB - 1. OSError (e.g. BrokenPipeError): the other end is gone.
    """
    if len(payload) > 0xFFFFFFFF:
        raise FrameError(f"a frame of {len(payload)} bytes is too large")
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got == 0:
                return None
            raise FrameError(f"input ended after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO, max_bytes: int | None = None) -> bytes | None:
    """Read one frame's payload; ``None`` at end of input before a frame starts.

    Raises:
        FrameError: the frame announces more than ``max_bytes`` bytes (nothing more is read), or the input
            ends inside the frame.
    """
    head = _read_exactly(stream, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if max_bytes is not None and n > max_bytes:
        raise FrameError(f"a reply of {n} bytes exceeds the limit of {max_bytes} bytes")
    if n == 0:
        return b""
    body = _read_exactly(stream, n)
    if body is None:
        raise FrameError(f"input ended before a frame of {n} bytes")
    return body


def _plain_default(obj: Any):
    """``json.dumps`` hook: numpy arrays and scalars become lists and numbers; anything else is refused."""
    tolist = getattr(obj, "tolist", None)
    if callable(tolist) and type(obj).__module__ == "numpy":
        return tolist()
    raise TypeError(f"a {type(obj).__module__}.{type(obj).__qualname__} is not plain data (JSON values, numpy "
                    "arrays and numbers only)")


def encode_reply(value: Any = None, error: BaseException | None = None) -> bytes:
    """The JSON payload of a reply: ``{"ok": value}``, or ``{"error": ...}`` describing ``error``.

    A ``value`` that is not plain data becomes an error reply (``TypeError``) instead. Floats are written
    as Python's shortest round-trip repr, so a float64 array arrives bit for bit.
    """
    if error is None:
        try:
            return json.dumps({"ok": value}, default=_plain_default, allow_nan=True).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            error = TypeError(f"the hosted code returned a value that cannot be sent to the evaluator: {exc}")
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return json.dumps({"error": {"type": f"{type(error).__module__}.{type(error).__qualname__}",
                                 "message": str(error)[:MAX_ERROR_CHARS],
                                 "traceback": tb[-MAX_TRACEBACK_CHARS:]}}).encode("utf-8")


def decode_reply(payload: bytes) -> dict:
    """Parse a reply as plain data (JSON only; nothing is unpickled or executed).

    Returns:
        ``{"ok": value}`` or ``{"error": {"type": str, "message": str, "traceback": str}}``.

    Raises:
        ValueError: not UTF-8 JSON, nested too deeply to parse, or not one of the two reply shapes.
    """
    try:
        reply = json.loads(payload.decode("utf-8"))
    except RecursionError:
        raise ValueError("a reply nested too deeply to parse") from None
    if not isinstance(reply, dict) or len(reply) != 1 or not ({"ok", "error"} & set(reply)):
        raise ValueError("a reply must be a JSON object with exactly one key, 'ok' or 'error'")
    if "error" in reply:
        err = reply["error"]
        if not isinstance(err, dict) or not all(isinstance(err.get(k), str) for k in ("type", "message", "traceback")):
            raise ValueError("an error reply must hold the strings 'type', 'message' and 'traceback'")
    return reply


def plain_data(obj: Any, _depth: int = 0) -> Any:
    """``obj`` checked to be plain data for a worker: dicts (any mapping), lists, tuples, strings, bytes,
    numbers, booleans, ``None``, numpy arrays of a non-object dtype and numpy scalars. Mappings become
    dicts; everything else is returned as is.

    Raises:
        TypeError: anything else (e.g. an env, a case, a function), or nesting deeper than 64 levels.
    """
    if obj is None or isinstance(obj, (str, bytes, bool, int, float)):
        return obj
    if _depth > _MAX_DEPTH:
        raise TypeError("data nested too deeply for an isolated worker")
    if isinstance(obj, Mapping):
        return {plain_data(k, _depth + 1): plain_data(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(plain_data(v, _depth + 1) for v in obj)
    if isinstance(obj, list):
        return [plain_data(v, _depth + 1) for v in obj]
    if type(obj).__module__ == "numpy":
        dtype = getattr(obj, "dtype", None)
        if dtype is not None and not dtype.hasobject:
            return obj
    raise TypeError(f"a {type(obj).__module__}.{type(obj).__qualname__} is not plain data; an isolated worker "
                    "receives only observations, the reset info, records and forecast requests")
