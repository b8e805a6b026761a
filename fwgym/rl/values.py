"""Info values as exact, code-free JSON (the persistence of :mod:`fwgym.rl.infos` and the outcome tables of
:mod:`fwgym.rl.outcomes`): :func:`encode_value` / :func:`decode_value` keep types and float bits (``1`` vs ``1.0``
vs ``True``, ``-0.0``, NaN, lists vs tuples, NumPy scalars and arrays) and never pickle, so that reading a stored
value runs no code; :func:`kind_key` is the batching class Gymnasium's ``VectorEnv._add_info`` gives a value.
"""
from __future__ import annotations

import base64
import json
import math
import operator
import struct
from typing import Any

import numpy as np

__all__ = ["UnsupportedInfo", "OBJECT", "kind_key", "encode_value", "decode_value", "dumps_value", "kind_to_json",
           "kind_from_json", "same_value", "getter"]

OBJECT = "object"


class UnsupportedInfo(NotImplementedError):
    """An info dict the store cannot batch like Gymnasium or cannot persist (the message names the key)."""


def kind_key(value: Any):
    """The batching class of a leaf value, as ``VectorEnv._add_info`` decides it: the type itself for
    Python ``bool``/``int``/``float`` and NumPy number types (``np.bool_`` is not a number: object),
    ``("ndarray", shape, dtype.str)`` for an ndarray, ``"object"`` for anything else."""
    t = type(value)
    if t is float or t is int or t is bool or issubclass(t, np.number):
        return t
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str)
    return OBJECT


# -- tagged JSON: exact, code-free persistence of info values ----------------------------------------

def encode_value(value: Any):
    """``value`` as JSON data that :func:`decode_value` turns back into an equal value of the same types
    (``1`` vs ``1.0`` vs ``True``, ``-0.0``, NaN, lists vs tuples, NumPy scalars and arrays).

    Raises:
        UnsupportedInfo: a value of another type (e.g. an arbitrary object), a dict with non-string keys or
            an object array.
    """
    t = type(value)
    if value is None or t is bool or t is str or t is int:
        return value
    if t is float:
        # NaN and the infinities by their bits (the sign and payload of a NaN are kept: -nan is not nan's bits)
        return value if math.isfinite(value) else {"__t": "float", "bits": struct.pack(">d", value).hex()}
    if t is list:
        return [encode_value(v) for v in value]
    if t is tuple:
        return {"__t": "tuple", "v": [encode_value(v) for v in value]}
    if t is dict:
        if not all(type(k) is str for k in value):
            raise UnsupportedInfo(f"a dict with non-string keys cannot be stored: {list(value)[:5]!r}")
        return {"__t": "dict", "v": {k: encode_value(v) for k, v in value.items()}}
    if isinstance(value, np.generic) and not isinstance(value, (np.object_, np.void)) and value.dtype.kind in "biufcUS":
        return {"__t": "np", "dtype": value.dtype.str, "v": base64.b64encode(np.asarray(value).tobytes()).decode()}
    if t is np.ndarray and value.dtype.kind in "biufcUS":
        return {"__t": "nd", "dtype": value.dtype.str, "shape": list(value.shape),
                "v": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()}
    raise UnsupportedInfo(f"an info value of type {t.__module__}.{t.__qualname__} cannot be stored")


def decode_value(data: Any):
    """The value :func:`encode_value` encoded.

    Raises:
        ValueError: malformed data (an unknown tag, a bad dtype or shape).
    """
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    tag = data.get("__t")
    if tag == "float":
        raw = bytes.fromhex(data["bits"])
        if len(raw) != 8:
            raise ValueError(f"stored float of {len(raw)} bytes")
        return struct.unpack(">d", raw)[0]
    if tag == "tuple":
        return tuple(decode_value(v) for v in data["v"])
    if tag == "dict":
        return {k: decode_value(v) for k, v in data["v"].items()}
    if tag in ("np", "nd"):
        dtype = np.dtype(data["dtype"])
        if dtype.kind not in "biufcUS":
            raise ValueError(f"stored value of dtype {dtype} refused")
        raw = base64.b64decode(data["v"], validate=True)
        if tag == "np":
            return np.frombuffer(raw, dtype=dtype)[0]
        return np.frombuffer(raw, dtype=dtype).reshape(tuple(int(s) for s in data["shape"])).copy()
    raise ValueError(f"malformed stored info value {str(data)[:100]!r}")


def dumps_value(value) -> str:
    """:func:`encode_value` as compact JSON text (one canonical text per value: the pool's key)."""
    return json.dumps(encode_value(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# kinds as JSON: "bool" / "int" / "float" / "np:<dtype str>" / ["ndarray", shape, dtype] / "object"
def kind_to_json(kind):
    """A :func:`kind_key` as JSON data: ``"bool"``, ``"int"``, ``"float"``, ``"np:<dtype>"``, ``["ndarray", shape, dtype]``, ``"object"``."""
    if kind is bool or kind is int or kind is float:
        return kind.__name__
    if isinstance(kind, tuple):
        return ["ndarray", list(kind[1]), kind[2]]
    if kind == OBJECT:
        return OBJECT
    return "np:" + np.dtype(kind).str


def kind_from_json(data):
    """The :func:`kind_key` of :func:`kind_to_json`'s data.

    Raises:
        ValueError: malformed data, or a dtype that is not a NumPy number type.
    """
    if isinstance(data, list):
        return ("ndarray", tuple(int(s) for s in data[1]), np.dtype(data[2]).str)
    if data in ("bool", "int", "float"):
        return {"bool": bool, "int": int, "float": float}[data]
    if data == OBJECT:
        return OBJECT
    if isinstance(data, str) and data.startswith("np:"):
        t = np.dtype(data[3:]).type
        if not issubclass(t, np.number):
            raise ValueError(f"stored kind {data!r} is not a NumPy number type")
        return t
    raise ValueError(f"malformed stored kind {data!r}")


def same_value(a, b) -> bool:
    """``a`` and ``b`` are the same value exactly (types, float sign and NaN bits, array bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if type(a) is float or isinstance(a, np.floating):
        return np.asarray(a).tobytes() == np.asarray(b).tobytes()
    if type(a) in (bool, int, str) or a is None or isinstance(a, np.generic):
        return a == b
    try:
        return dumps_value(a) == dumps_value(b)
    except UnsupportedInfo:
        return a is b


def getter(indices: list[int]):
    """A callable returning ``(seq[i] for i in indices)`` as a tuple: ``operator.itemgetter``, also for 0 or 1 index."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        i = indices[0]
        return lambda seq: (seq[i],)
    return lambda seq: ()
