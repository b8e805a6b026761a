"""Reusable parts of a :class:`~fwgym.domains.spec.Domain`: series selections and quality rules.

* :class:`AllSeries`: the evaluation splits use every series (electricity: the 54 balancing authorities).
* :class:`BusiestSeries`: the ``n`` series with the largest total before the first evaluation window (cycle
  hire: the 20 stations with most departures in the train period; ties by lower numeric id, then id).
* :class:`NoInactiveLocalDay`: skip a case whose visible history holds a complete local day (midnight to
  midnight in the domain's zone, DST-aware) with a total of 0 (a docking station out of service).

A domain may define its own (any object with the protocol's methods: :class:`~fwgym.domains.spec.SeriesSelection`,
:class:`~fwgym.domains.spec.QualityRule`).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from typing import Mapping
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.domains.spec import SeriesValues

__all__ = ["AllSeries", "BusiestSeries", "NoInactiveLocalDay", "local_midnights"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class AllSeries:
    """Every series of the domain."""

    def select(self, series: Mapping[str, SeriesValues], cutoff_hour: int) -> tuple[str, ...]:
        return tuple(sorted(series))

    def describe(self, quantity: str) -> str:
        return "all series"


@dataclass(frozen=True)
class BusiestSeries:
    """The ``n`` series with the largest total ``quantity`` before ``cutoff_hour`` (missing hours count 0;
    ties broken by lower numeric id, then by id)."""

    n: int = 20

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"BusiestSeries.n must be an int >= 1, got {self.n!r}")

    def select(self, series: Mapping[str, SeriesValues], cutoff_hour: int) -> tuple[str, ...]:
        totals = []
        for sid, s in series.items():
            v = s.values[: max(0, cutoff_hour - s.start_hour)]
            totals.append((-float(np.nansum(v)), int(sid) if sid.isdigit() else 10**9, sid))
        return tuple(t[2] for t in sorted(totals)[: self.n])

    def describe(self, quantity: str) -> str:
        return f"the {self.n} series with most {quantity} before the first evaluation window"


@lru_cache(maxsize=64)
def _year_midnights(zone: str, year: int) -> np.ndarray:
    tz = ZoneInfo(zone)
    d, stop, out = date(year, 1, 1), date(year + 1, 1, 1), []
    while d < stop:
        local = datetime(d.year, d.month, d.day, tzinfo=tz)
        out.append(int((local - _EPOCH).total_seconds() // 3600))
        d += timedelta(days=1)
    a = np.array(out, dtype=np.int64)
    a.flags.writeable = False
    return a


def local_midnights(zone: str, first_hour: int, last_hour: int) -> np.ndarray:
    """Epoch hours of the local midnights of ``zone`` from the local day before ``first_hour`` to the day
    after ``last_hour`` (sorted int64; DST-aware: consecutive midnights are 23, 24 or 25 hours apart)."""
    y0 = (_EPOCH + timedelta(hours=int(first_hour) - 48)).year
    y1 = (_EPOCH + timedelta(hours=int(last_hour) + 48)).year
    return np.concatenate([_year_midnights(zone, y) for y in range(y0, y1 + 1)])


@dataclass(frozen=True)
class NoInactiveLocalDay:
    """Reject a visible history that holds a complete local day (in the domain's zone) whose values sum to 0."""

    reason: str = "inactive_history_day"

    def rejects(self, history: np.ndarray, history_start: int, zone: ZoneInfo) -> bool:
        n = len(history)
        mids = local_midnights(str(zone.key), history_start, history_start + n)
        i0 = int(np.searchsorted(mids, history_start, side="left"))
        csum = np.concatenate([[0.0], np.cumsum(history)])
        for i in range(i0, len(mids) - 1):
            a, b = int(mids[i]), int(mids[i + 1])
            if b > history_start + n:
                break
            if csum[b - history_start] - csum[a - history_start] == 0:
                return True
        return False
