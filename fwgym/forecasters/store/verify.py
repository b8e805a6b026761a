"""Checking a forecast store's values, not only its hashes (:mod:`fwgym.forecasters.store`; docs/store.md).

A store's sha256 manifest proves that its files are the ones its manifest lists, not that the manifest's
author computed them with the forecaster it names: a store whose forecasts were replaced by the realised
future, with the manifest's digests recomputed, passes every hash check. Two checks recompute values:

* :func:`recompute_rows` (``fwgym forecasts verify DIR --recompute N``): N random rows of each model,
  their contexts rebuilt from fwgym's packaged data (:func:`context_from_data`; the row's context digest
  must match), recomputed by the forecaster and compared bit for bit;
* the audit of store hits during evaluation (:meth:`fwgym.forecasters.store.read.ForecastStore.get`): for
  forecasters cheap to recompute (``store_audit`` > 0: the seasonal and statsmodels ones), the first hit
  of each model in a process and a random fraction of the later ones are recomputed from the request's
  context; a difference refuses the store (:class:`~fwgym.forecasters.store.format.StoreAuditError`).

A TSFM's forecast depends at the level of float32 rounding on the torch thread count and the hardware:
:func:`recompute_rows` recomputes with the build's ``torch_threads`` and says so when values differ.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.store.format import context_digest

if TYPE_CHECKING:
    from fwgym.core.series import Series

__all__ = ["difference", "context_from_data", "recompute_rows"]


def difference(stored: np.ndarray, fresh: np.ndarray) -> float | None:
    """``None`` when ``fresh`` equals ``stored`` bit for bit (as float64), else the largest absolute difference
    (``inf`` for another shape or a non-finite value)."""
    a = np.ascontiguousarray(stored, dtype=np.float64)
    b = np.ascontiguousarray(fresh, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    if a.tobytes() == b.tobytes():
        return None
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    return float(np.max(d)) if np.all(np.isfinite(d)) else math.inf


_SERIES: dict[str, Series] | None = None


def context_from_data(series_id: str, origin: int, steps: int) -> np.ndarray | None:
    """The ``steps`` hourly values of series ``series_id`` ending at the epoch hour ``origin``, from fwgym's
    packaged data (either domain; checked by sha256 when loaded), or ``None`` when that series or window is
    not in the data."""
    global _SERIES
    from fwgym.core.series import load_series
    from fwgym.domains import DOMAINS

    if _SERIES is None:
        _SERIES = {sid: s for d in DOMAINS for sid, s in load_series(d).items()}
    series = _SERIES.get(str(series_id))
    if series is None:
        return None
    start = int(origin) - int(steps) + 1
    if start < series.start_hour or int(origin) >= series.end_hour:
        return None
    return np.asarray(series.window(start, int(steps)), dtype=np.float64)


def _rows(model) -> list[tuple[int, int]]:
    return [(si, r) for si, sh in enumerate(model.shards) for r in range(sh.rows)]


def recompute_rows(store, forecaster: QuantileForecaster, n: int, rng: np.random.Generator,
                   context_of: Callable[[str, int, int], np.ndarray | None] = context_from_data) -> dict:
    """Recompute ``n`` rows of ``forecaster``'s model (drawn without replacement by ``rng``; all rows when
    the model has fewer) and compare them with the stored values bit for bit.

    Args:
        store: an open :class:`~fwgym.forecasters.store.read.ForecastStore` holding the model.
        forecaster: the forecaster (checked against the model's fingerprint first).
        n: rows to recompute (>= 1).
        rng: the random generator that draws them.
        context_of: ``(series_id, origin, steps) -> context or None`` (default: fwgym's packaged data).

    Returns:
        ``{"model", "rows" (stored), "checked", "equal", "different": [{"series_id", "origin",
        "context_steps", "horizon", "max_abs_diff"}], "unbuildable": [...] (rows whose context is not in the
        data, or whose context digest differs from the stored one), "errors": [...] (the forecaster raised),
        "torch_threads"}``.

    Raises:
        fwgym.forecasters.store.format.StoreMismatch: the forecaster is not the one the model was built with.
        fwgym.forecasters.store.format.StoreIntegrityError: a shard differs from the manifest.
    """
    store.check(forecaster)
    model = store._prepared[forecaster.name]
    keys: dict[tuple[int, int], tuple[str, int, int, int]] = {}  # (shard, row) -> (series, origin, context, horizon)
    for (c, h), by_series in model.index.items():
        for sid, origins in by_series.items():
            for origin, code in origins.items():
                keys[(code >> 32, code & 0xFFFFFFFF)] = (sid, origin, c, h)
    rows = _rows(model)
    pick = rows if n >= len(rows) else [rows[i] for i in sorted(rng.choice(len(rows), size=n, replace=False))]
    threads = _build_threads(model.entry)
    out: dict[str, Any] = {"model": forecaster.name, "rows": len(rows), "checked": 0, "equal": 0, "different": [], "unbuildable": [],
           "errors": [], "torch_threads": threads}
    forecaster.load()
    with _torch_threads(threads):
        for si, r in pick:
            sid, origin, c, h = keys[(si, r)]
            where = {"series_id": sid, "origin": int(origin), "context_steps": int(c), "horizon": int(h)}
            context = context_of(sid, origin, c)
            if context is None or context_digest(context) != model.shards[si].digests[r].tobytes():
                out["unbuildable"].append(where)
                continue
            out["checked"] += 1
            try:
                fresh = forecaster.predict_quantiles(context, h)
            except Exception as exc:  # noqa: BLE001 - reported, the command fails
                out["errors"].append({**where, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                continue
            diff = difference(model.shards[si].values[r], fresh)
            if diff is None:
                out["equal"] += 1
            else:
                out["different"].append({**where, "max_abs_diff": diff})
    return out


def _build_threads(entry: dict) -> int | None:
    builds = entry.get("builds") or []
    threads = {b.get("torch_threads") for b in builds if b.get("torch_threads")}
    return threads.pop() if len(threads) == 1 else None


class _torch_threads:
    """Run with torch's intra-op thread count set to ``n`` (when torch is loaded and ``n`` is given)."""

    def __init__(self, n: int | None):
        self.n, self.before = n, None

    def __enter__(self):
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and self.n:
            self.before = torch.get_num_threads()
            torch.set_num_threads(int(self.n))
        return self

    def __exit__(self, *exc):
        import sys

        if self.before is not None:
            sys.modules["torch"].set_num_threads(self.before)
