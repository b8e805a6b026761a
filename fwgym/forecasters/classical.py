"""The eight free classical predictive distributions of FWBench (protocol §3.1, DESIGN §6).

Every method maps the visible history (336 hourly values, UTC hour index) to a sample set per
target hour with equal weights. Weekly/daily phase is matched in UTC hours: a history hour ``t``
is "the same weekday and hour" as a target hour ``u`` when ``(u - t) mod 168 == 0`` (``mod 24`` for
the hour of day).

=========================  ==================================================================  =========
method                     samples for target hour u                                           K
=========================  ==================================================================  =========
weekday_empirical          history values at the same UTC weekday and hour                     2
weekly_repeat              the most recent same-weekday-and-hour value                         1
all_hour_empirical         all history values                                                  336
calendar_residual          OLS fit (intercept, trend t/336, sin/cos 2*pi*k*t/24 and            336
                           2*pi*k*t/168 for k = 1, 2, 3) predicted at u, plus every in-sample
                           residual, clipped at 0
recent_week_empirical      the last 168 values                                                 168
recent_day_empirical       the last 24 values                                                  24
hour_of_day_empirical      history values at the same UTC hour                                 14
level_adjusted_weekly      weekly_repeat + (mean of the last 24 h - mean of the 24 h one week  1
                           earlier, positions -192..-169), clipped at 0
=========================  ==================================================================  =========
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

__all__ = ["WEEK", "DAY", "weekday_empirical", "weekly_repeat", "all_hour_empirical", "calendar_residual",
           "recent_week_empirical", "recent_day_empirical", "hour_of_day_empirical", "level_adjusted_weekly",
           "CLASSICAL_METHODS", "classical_distribution", "method_samples"]

WEEK = 168
DAY = 24


def _phase_samples(history: np.ndarray, history_hours: np.ndarray, target_hours: np.ndarray, period: int) -> np.ndarray:
    n = len(history)
    reps = n // period
    # history hours are consecutive: the hour of the last period in phase with target hour u sits at
    # position n - period + (u - history_hours[n - period]) mod period; earlier periods step back by period
    first = (n - period) + (target_hours - history_hours[n - period]) % period  # (24,)
    return history[first[:, None] + np.arange(-period * (reps - 1), 1, period)[None, :]]


def weekday_empirical(history, history_hours, target_hours):
    return _phase_samples(history, history_hours, target_hours, WEEK)


def weekly_repeat(history, history_hours, target_hours):
    return _phase_samples(history, history_hours, target_hours, WEEK)[:, -1:]


def all_hour_empirical(history, history_hours, target_hours):
    return np.broadcast_to(history, (len(target_hours), len(history)))


def _calendar_design(t: np.ndarray, n: int) -> np.ndarray:
    cols = [np.ones_like(t, dtype=np.float64), t / n]
    for period in (DAY, WEEK):
        for k in (1, 2, 3):
            ang = 2.0 * np.pi * k * t / period
            cols += [np.sin(ang), np.cos(ang)]
    return np.stack(cols, axis=1)


@lru_cache(maxsize=64)
def _calendar_fit(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(X, pinv(X))`` of the calendar design on history positions 0..n-1 (read-only; the design
    depends only on n because the regressors use hours relative to the first history hour)."""
    X = _calendar_design(np.arange(n, dtype=np.float64), n)
    P = np.linalg.pinv(X)
    X.flags.writeable = P.flags.writeable = False
    return X, P


def calendar_residual(history, history_hours, target_hours):
    n = len(history)
    X, P = _calendar_fit(n)
    coef = P @ history  # least squares (X has full column rank for n >= 2 weeks), as np.linalg.lstsq
    resid = history - X @ coef
    pred = _calendar_design((target_hours - history_hours[0]).astype(np.float64), n) @ coef
    return np.maximum(pred[:, None] + resid[None, :], 0.0)


def recent_week_empirical(history, history_hours, target_hours):
    return np.broadcast_to(history[-WEEK:], (len(target_hours), WEEK))


def recent_day_empirical(history, history_hours, target_hours):
    return np.broadcast_to(history[-DAY:], (len(target_hours), DAY))


def hour_of_day_empirical(history, history_hours, target_hours):
    return _phase_samples(history, history_hours, target_hours, DAY)


def level_adjusted_weekly(history, history_hours, target_hours):
    shift = history[-DAY:].mean() - history[-WEEK - DAY : -WEEK].mean()
    return np.maximum(weekly_repeat(history, history_hours, target_hours) + shift, 0.0)


#: name -> function(history (336,), history_hours (336,), target_hours (24,)) -> samples (24, K); the
#: functions assume consecutive history hours and do not check (:func:`classical_distribution` does)
CLASSICAL_METHODS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "weekday_empirical": weekday_empirical,
    "weekly_repeat": weekly_repeat,
    "all_hour_empirical": all_hour_empirical,
    "calendar_residual": calendar_residual,
    "recent_week_empirical": recent_week_empirical,
    "recent_day_empirical": recent_day_empirical,
    "hour_of_day_empirical": hour_of_day_empirical,
    "level_adjusted_weekly": level_adjusted_weekly,
}


def classical_distribution(method: str, history: np.ndarray, history_hours: np.ndarray, target_hours: np.ndarray) -> np.ndarray:
    """Equal-weight samples per target hour from a free classical method.

    Args:
        method: one of :data:`CLASSICAL_METHODS`.
        history: visible values, float64 (336,), raw units, all finite.
        history_hours: epoch hours of ``history``, int64 (336,), consecutive.
        target_hours: epoch hours to forecast, int64 (24,), all after the history.

    Returns:
        float64 array (24, K), C-contiguous, raw units (K per method, see the module table).

    Raises:
        ValueError: unknown method, or a history shorter than two weeks / not consecutive.
    """
    if method not in CLASSICAL_METHODS:  # before any conversion: the cheap check first
        raise ValueError(f"unknown classical method {method!r}; expected one of {sorted(CLASSICAL_METHODS)}")
    h = np.asarray(history, dtype=np.float64)
    hh = np.asarray(history_hours, dtype=np.int64)
    th = np.asarray(target_hours, dtype=np.int64)
    if h.shape != hh.shape or len(h) < 2 * WEEK or len(h) % WEEK or np.any(np.diff(hh) != 1):
        raise ValueError("history must be a whole number of consecutive weeks (e.g. 336 hours) with matching hours")
    if np.any(th <= hh[-1]):
        raise ValueError("target hours must come after the history")
    return method_samples(method, h, hh, th)


def method_samples(method: str, history: np.ndarray, history_hours: np.ndarray, target_hours: np.ndarray) -> np.ndarray:
    """:func:`classical_distribution` without the input checks, for callers whose inputs hold the
    invariants by construction (a :class:`~fwgym.core.cases.Case`'s arrays, the selectors' backtest
    windows): float64 ``history`` (n,), consecutive int64 ``history_hours`` (n,), ``target_hours``
    after them. Returns C-contiguous float64 (24, K).

    Raises:
        ValueError: unknown method.
    """
    fn = CLASSICAL_METHODS.get(method)
    if fn is None:
        raise ValueError(f"unknown classical method {method!r}; expected one of {sorted(CLASSICAL_METHODS)}")
    return np.ascontiguousarray(fn(history, history_hours, target_hours), dtype=np.float64)
