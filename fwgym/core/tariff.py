"""Forecast tariff of FWBench (protocol §2.2, DESIGN §6), in credits ("reference CPU microseconds").

A request (model, context_steps, horizon) is charged the price of the smallest context bucket and
the smallest horizon bucket that cover it. Context buckets: 96, 336 steps; horizon buckets 24, 64,
96, 192, 240, 336 steps.

Three sources of rows, one lookup (:func:`price`, :func:`credits_for`, :func:`tariff_rows`):

* :data:`TARIFF` -- the protocol's table (seasonal_empirical and the three TSFMs), frozen in code;
* the **extended tariff** of the statsmodels forecasters (``ets``, ``theta``, ``sarima``,
  ``mstl_ets``): a versioned data file, ``fwgym/config/tariff_extended.json`` (version, machine,
  method, date, rows), measured by ``python -m fwgym.forecasters.pricing --write`` and verified
  against :data:`EXTENDED_TARIFF_SHA256` when first read (:class:`~fwgym.data.DataIntegrityError`
  on a mismatch: an edited price never changes a score silently);
* rows of plug-in models, given to :func:`register_prices` (by
  :func:`fwgym.forecasters.register_forecaster`).
"""
from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from fwgym.validation import check_int, is_int

__all__ = ["CONTEXT_BUCKETS", "HORIZON_BUCKETS", "TARIFF", "EXTENDED_TARIFF_PATH", "EXTENDED_TARIFF_SHA256", "UNIT",
           "validate_rows", "load_extended_tariff", "extended_tariff", "register_prices", "unregister_prices",
           "tariff_rows", "tariff_source", "priced_models", "price", "credits_for"]

CONTEXT_BUCKETS: tuple[int, ...] = (96, 336)
HORIZON_BUCKETS: tuple[int, ...] = (24, 64, 96, 192, 240, 336)

#: model -> context bucket -> prices per horizon bucket (the protocol's pool)
TARIFF: dict[str, dict[int, tuple[int, ...]]] = {
    "chronos_bolt_tiny": {96: (7273, 7344, 21854, 35426, 48499, 93987), 336: (8452, 8452, 26108, 46595, 69541, 127481)},
    "chronos2": {96: (86752, 103806, 113726, 113726, 113726, 113726), 336: (86752, 103806, 113726, 113726, 113726, 116839)},
    "timesfm25": {96: (1181871,) + (1187691,) * 5, 336: (1181871,) + (1187691,) * 5},
    "seasonal_empirical": {336: (400, 1027, 1588, 3065, 3756, 5206)},
}

#: the frozen extended tariff (statsmodels forecasters) and its pinned sha256
EXTENDED_TARIFF_PATH = Path(__file__).resolve().parents[1] / "config" / "tariff_extended.json"
EXTENDED_TARIFF_SHA256 = "34716565f74995ce4ff3387bbbc428e70dfbd1ef90e67e1230461a80f63fbdce"
#: the unit every tariff file states
UNIT = "reference CPU microsecond credits"

_ROWS: dict[str, dict[int, tuple[int, ...]]] = dict(TARIFF)  # every priced model's rows (read by the hot path)
_SOURCES: dict[str, str] = {m: "protocol" for m in TARIFF}
_LOCK = threading.RLock()
_EXTENDED: dict | None = None  # the verified extended tariff document, once read


def validate_rows(model: str, rows: Mapping) -> dict[int, tuple[int, ...]]:
    """Check one model's tariff rows and return them normalised.

    Args:
        model: the model name (for messages).
        rows: ``{context bucket: 6 prices}``; buckets are a non-empty subset of :data:`CONTEXT_BUCKETS`
            (ints or their decimal strings, as in JSON), prices positive integers, one per horizon
            bucket of :data:`HORIZON_BUCKETS`.

    Returns:
        ``{int bucket: tuple of 6 int}`` sorted by bucket.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(rows, Mapping) or not rows:
        raise ValueError(f"tariff rows of {model!r} must be a non-empty mapping {{context bucket: prices}}, got {rows!r:.100}")
    out = {}
    for key, prices in rows.items():
        try:
            if not (is_int(key) or isinstance(key, str)):
                raise ValueError
            cb = int(key)
            if str(cb) != str(key):
                raise ValueError
        except ValueError:
            raise ValueError(f"tariff rows of {model!r}: context bucket {key!r} is not one of {list(CONTEXT_BUCKETS)}") from None
        if cb not in CONTEXT_BUCKETS or cb in out:
            raise ValueError(f"tariff rows of {model!r}: context bucket {key!r} is not one of {list(CONTEXT_BUCKETS)} (or repeated)")
        if isinstance(prices, (str, bytes)) or not hasattr(prices, "__len__") or len(prices) != len(HORIZON_BUCKETS):
            raise ValueError(f"tariff rows of {model!r}, context bucket {cb}: expected {len(HORIZON_BUCKETS)} prices "
                             f"(horizon buckets {list(HORIZON_BUCKETS)}), got {prices!r:.100}")
        if any(not is_int(p) or p < 1 for p in prices):
            raise ValueError(f"tariff rows of {model!r}, context bucket {cb}: prices must be positive integers, got {list(prices)}")
        out[cb] = tuple(int(p) for p in prices)
    return dict(sorted(out.items()))


def load_extended_tariff(path: str | Path | None = None, sha256: str | None = None) -> dict:
    """Read and verify an extended tariff file.

    Args:
        path: the file (default :data:`EXTENDED_TARIFF_PATH`).
        sha256: expected digest (default :data:`EXTENDED_TARIFF_SHA256` for the default path; no check
            for another path unless given).

    Returns:
        the document: ``{"version", "unit", "date", "machine", "method", "command", "context_buckets",
        "horizon_buckets", "rows": {model: {bucket: [6 prices]}}, ...}`` with ``rows`` normalised by
        :func:`validate_rows`.

    Raises:
        fwgym.data.DataIntegrityError: missing file or digest mismatch (the message names the file).
        ValueError: not a tariff document (missing keys, other buckets or unit, bad rows).
    """
    from fwgym.data import verify_file

    p = Path(path) if path is not None else EXTENDED_TARIFF_PATH
    if sha256 is None and path is None:
        sha256 = EXTENDED_TARIFF_SHA256
    if sha256 is not None:
        verify_file(p, sha256)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        missing = [k for k in ("version", "unit", "date", "machine", "method", "context_buckets", "horizon_buckets", "rows")
                   if k not in doc]
        if missing:
            raise ValueError(f"missing keys {missing}")
        if doc["unit"] != UNIT:
            raise ValueError(f"unit is {doc['unit']!r}, expected {UNIT!r}")
        if tuple(doc["context_buckets"]) != CONTEXT_BUCKETS or tuple(doc["horizon_buckets"]) != HORIZON_BUCKETS:
            raise ValueError(f"buckets {doc['context_buckets']} / {doc['horizon_buckets']} differ from "
                             f"{list(CONTEXT_BUCKETS)} / {list(HORIZON_BUCKETS)}")
        rows = doc["rows"]
        if not isinstance(rows, dict) or not rows:
            raise ValueError("'rows' must be a non-empty object {model: {context bucket: prices}}")
        doc["rows"] = {str(m): validate_rows(str(m), r) for m, r in rows.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{p}: not an fwgym tariff file ({exc})") from None
    return doc


def extended_tariff() -> dict:
    """The verified extended tariff document (read once per process).

    Raises:
        fwgym.data.DataIntegrityError, ValueError: as :func:`load_extended_tariff`.
    """
    global _EXTENDED
    with _LOCK:
        if _EXTENDED is None:
            doc = load_extended_tariff()
            clash = [m for m in doc["rows"] if m in TARIFF]
            if clash:
                raise ValueError(f"{EXTENDED_TARIFF_PATH}: the extended tariff may not re-price protocol models {clash}")
            for m, rows in doc["rows"].items():
                if _SOURCES.get(m) not in (None, "extended"):
                    continue  # a registered plug-in of the same name keeps its rows (its registration said so)
                _ROWS[m] = rows
                _SOURCES[m] = "extended"
            _price.cache_clear()
            _EXTENDED = doc
        return _EXTENDED


def register_prices(model: str, rows: Mapping, replace: bool = False) -> dict[int, tuple[int, ...]]:
    """Add (or with ``replace=True`` replace) the tariff rows of a plug-in model.

    Args:
        model: model name (not a protocol model).
        rows: as :func:`validate_rows`.
        replace: allow replacing rows registered before (never the protocol's).

    Returns:
        the normalised rows.

    Raises:
        ValueError: bad rows, a protocol model, or rows already registered without ``replace``.
    """
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty string, got {model!r}")
    norm = validate_rows(model, rows)
    with _LOCK:
        if model in TARIFF:
            raise ValueError(f"{model!r} is a protocol model; its prices are the protocol's tariff")
        if model in _ROWS and not replace:
            raise ValueError(f"{model!r} already has tariff rows ({_SOURCES[model]}); pass replace=True to replace them")
        _ROWS[model] = norm
        _SOURCES[model] = "registered"
        _price.cache_clear()
    return norm


def unregister_prices(model: str) -> None:
    """Remove a plug-in model's registered rows (the protocol's and the extended file's stay)."""
    with _LOCK:
        if _SOURCES.get(model) == "registered":
            del _ROWS[model]
            del _SOURCES[model]
            if _EXTENDED is not None and model in _EXTENDED["rows"]:
                _ROWS[model], _SOURCES[model] = _EXTENDED["rows"][model], "extended"
            _price.cache_clear()


def _rows(model: str) -> dict[int, tuple[int, ...]] | None:
    rows = _ROWS.get(model)
    if rows is None and _EXTENDED is None and isinstance(model, str):
        extended_tariff()  # first lookup of a model outside the protocol's table
        rows = _ROWS.get(model)
    return rows


def tariff_rows(model: str) -> dict[int, tuple[int, ...]]:
    """``{context bucket: prices per horizon bucket}`` of ``model``.

    Raises:
        ValueError: unknown model.
        fwgym.data.DataIntegrityError: the extended tariff file fails its check (only when a model
            outside the protocol's table is looked up).
    """
    rows = _rows(model)
    if rows is None:
        raise ValueError(f"unknown model {model!r}; priced models are {priced_models()}")
    return dict(rows)


def tariff_source(model: str) -> str:
    """``"protocol"``, ``"extended"`` (the frozen file) or ``"registered"`` (a plug-in).

    Raises:
        ValueError: unknown model.
    """
    tariff_rows(model)
    return _SOURCES[model]


def priced_models() -> list[str]:
    """Names of every model with tariff rows (protocol, extended file, registered), in that order."""
    extended_tariff()
    return list(_ROWS)


def price(model: str, context_steps: int, horizon: int) -> dict:
    """Price of a request.

    Returns:
        ``{"model", "context_steps", "horizon", "context_bucket", "horizon_bucket", "credits"}``.

    Raises:
        ValueError: unknown model, non-integer or out-of-range context/horizon (no bucket covers it).
        fwgym.data.DataIntegrityError: as :func:`tariff_rows`.
    """
    if _rows(model) is None:
        raise ValueError(f"unknown model {model!r}; priced models are {priced_models()}")
    return dict(_price(model, check_int("context_steps", context_steps), check_int("horizon", horizon)))


def credits_for(model: str, context_steps: int, horizon: int) -> int:
    """Credits of a request: ``price(model, context_steps, horizon)["credits"]`` without copying the
    quote (the hot path of the catalog, the RL features and the macro masks).

    Raises:
        ValueError: as :func:`price`.
    """
    if model in _ROWS and type(context_steps) is int and type(horizon) is int:
        return _price(model, context_steps, horizon)["credits"]
    return price(model, context_steps, horizon)["credits"]  # its checks and errors


@lru_cache(maxsize=4096)
def _price(model: str, context_steps: int, horizon: int) -> dict:
    # cached on validated arguments (bools are rejected above: True == 1 would share a cache key);
    # cleared whenever rows are added or replaced
    if horizon < 1 or horizon > HORIZON_BUCKETS[-1]:
        raise ValueError(f"horizon must be in 1..{HORIZON_BUCKETS[-1]}, got {horizon}")
    rows = _ROWS[model]
    buckets = sorted(rows)
    if context_steps < 1 or context_steps > buckets[-1]:
        raise ValueError(f"context_steps for {model} must be in 1..{buckets[-1]}, got {context_steps}")
    cb = next(b for b in buckets if context_steps <= b)
    hi = next(i for i, b in enumerate(HORIZON_BUCKETS) if horizon <= b)
    return {
        "model": model,
        "context_steps": context_steps,
        "horizon": horizon,
        "context_bucket": cb,
        "horizon_bucket": HORIZON_BUCKETS[hi],
        "credits": rows[cb][hi],
    }
