"""Forecasts in figures: the forecast an episode submitted (forecast suite), its 10/50/90% band, and the
predictive band of a fixed policy's own distribution on a case."""
from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np


def policy_forecast_band(case, policy: str) -> tuple[np.ndarray, str] | None:
    """(24, 3) quantiles 0.1/0.5/0.9 of a fixed policy's distribution on the target hours, or None."""
    from fwgym.forecasters.classical import CLASSICAL_METHODS, classical_distribution

    if policy in CLASSICAL_METHODS:
        s = classical_distribution(policy, case.history, case.history_hours, case.target_hours)
        return np.quantile(s, [0.1, 0.5, 0.9], axis=1).T, f"{policy} samples, 10-90%"
    from fwgym.forecasters.covering import covering_forecast, target_quantiles
    from fwgym.forecasters.registry import PRICED_MODELS, get_forecaster

    if policy in PRICED_MODELS:
        f = get_forecaster(policy)
        if not f.availability().available:
            return None
        try:
            f.load()
            q = covering_forecast(case, f)  # what the policy buys: the forecast tool's request and cache entry
        except Exception:
            return None
        return target_quantiles(case, q)[:, [0, 4, 8]], f"{policy} quantiles 0.1-0.9"
    return None


def _as_forecast(obj) -> tuple[str, np.ndarray] | None:
    """``("quantiles", (24, 9))`` or ``("samples", (n, 24))`` from a submission object, else ``None``."""
    if not isinstance(obj, dict):
        return None
    if "kind" in obj and "values" in obj:
        obj = {obj["kind"]: obj["values"]}
    for kind in ("quantiles", "samples"):
        if obj.get(kind) is None:
            continue
        try:
            a = np.asarray(obj[kind], dtype=np.float64)
        except (TypeError, ValueError):
            return None
        if a.ndim != 2 or not np.all(np.isfinite(a)):
            return None
        if kind == "quantiles" and a.shape == (24, 9):
            return kind, a
        if kind == "samples" and a.shape[1] == 24 and a.shape[0] >= 1:
            return kind, a
    return None


def submitted_forecast(record: dict, actions: Iterable[Any] = ()) -> tuple[str, np.ndarray] | None:
    """The forecast an episode submitted: the record's own ``submission`` when it carries one, else
    the last ``submit`` action among ``actions`` (a trace's ``steps[*].action`` or a replay's actions).

    Returns:
        ``("quantiles", float64 (24, 9))`` (levels 0.1..0.9) or ``("samples", float64 (n, 24))``, or
        ``None`` (no forecast submitted, or one that is not a finite 24-step forecast).
    """
    got = _as_forecast(record.get("submission"))
    if got is not None:
        return got
    for a in reversed(list(actions)):
        if isinstance(a, str):
            try:
                a = json.loads(a)
            except ValueError:
                continue
        if isinstance(a, dict) and a.get("tool") == "submit":
            return _as_forecast(a.get("args"))
    return None


def forecast_band(forecast: tuple[str, np.ndarray]) -> np.ndarray:
    """(24, 3) quantiles 0.1 / 0.5 / 0.9 of a submitted forecast (:func:`submitted_forecast`): the
    quantile columns 0, 4, 8, or the empirical quantiles (``numpy.quantile``, linear) of samples."""
    kind, a = forecast
    if kind == "quantiles":
        return a[:, [0, 4, 8]]
    return np.quantile(a, [0.1, 0.5, 0.9], axis=0).T
