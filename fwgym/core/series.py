"""Dense hourly series, UTC hour arithmetic, and a domain's series (:func:`load_series`).

Time is represented as integer *hours since 1970-01-01T00:00Z* ("epoch hours") everywhere on the
hot path; ISO strings are produced only when a tool renders a result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

import threading
from pathlib import Path

import numpy as np

__all__ = ["EPOCH", "hour_to_datetime", "hour_to_iso", "datetime_to_hour", "iso_to_hour", "date_to_hour", "utc_weekday",
           "utc_hour_of_day", "Series", "load_series"]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def hour_to_datetime(hour: int) -> datetime:
    """Epoch hour -> tz-aware UTC ``datetime``."""
    return EPOCH + timedelta(hours=int(hour))


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


_HOUR_SUFFIX: tuple[str, ...] = tuple(f"T{h:02d}:00:00Z" for h in range(24))


@lru_cache(maxsize=1 << 16)
def _iso_date(days: int) -> str:
    day = date.fromordinal(_EPOCH_ORDINAL + days)
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def hour_to_iso(hour: int) -> str:
    """Epoch hour -> ISO 8601 UTC string such as ``"2024-07-24T21:00:00Z"`` (hour start).

    Args:
        hour: an integer (Python or NumPy; anything ``int()`` accepts is converted first).

    Raises:
        OverflowError, ValueError: an hour outside years 1..9999.
        TypeError: not convertible to int.
    """
    return _hour_iso(int(hour))


@lru_cache(maxsize=1 << 14)
def _hour_iso(hour: int) -> str:
    """:func:`hour_to_iso` of an int, cached (tools render the same hours over and over: cases of
    different series share their times; ~3 MB when full); the date part is cached per day and
    formatted without ``strftime``."""
    days, h = divmod(hour, 24)
    return _iso_date(days) + _HOUR_SUFFIX[h]


def datetime_to_hour(dt: datetime) -> int:
    """tz-aware ``datetime`` on the hour -> epoch hour.

    Raises:
        ValueError: naive datetime, or not on an hour boundary.
    """
    if dt.tzinfo is None:
        raise ValueError(f"datetime {dt!r} has no time zone")
    seconds = (dt - EPOCH).total_seconds()
    if seconds % 3600:
        raise ValueError(f"datetime {dt.isoformat()} is not on the hour")
    return int(seconds // 3600)


@lru_cache(maxsize=1 << 14)
def iso_to_hour(text: str) -> int:
    """ISO 8601 time with a time zone (``"2024-07-24T21:00:00Z"``, ``"...+01:00"``) on the hour -> epoch hour.

    The env's canonical form ``YYYY-MM-DDTHH:00:00Z`` (:func:`hour_to_iso`) is read by slicing; any
    other form goes through :meth:`datetime.fromisoformat` (``Z`` read as ``+00:00``). Cached: cases of
    many series share their times.

    Raises:
        TypeError: not a string. ValueError: not ISO 8601, no time zone, or not on the hour.
        OverflowError: a time outside what ``datetime`` holds after the offset is applied.
    """
    if not isinstance(text, str):
        raise TypeError(f"an ISO 8601 time must be a string, got {type(text).__name__}")
    if (len(text) == 20 and text.isascii() and text[4] == text[7] == "-" and text[10] == "T" and text[13:] == ":00:00Z"
            and (text[0:4] + text[5:7] + text[8:10] + text[11:13]).isdigit()):
        hour = int(text[11:13])
        try:
            days = date(int(text[0:4]), int(text[5:7]), int(text[8:10])).toordinal() - _EPOCH_ORDINAL
        except ValueError:  # e.g. month 13: fromisoformat below names it
            pass
        else:
            if hour < 24:
                return days * 24 + hour
    return datetime_to_hour(datetime.fromisoformat(text.replace("Z", "+00:00")))


def date_to_hour(day: date) -> int:
    """Epoch hour of 00:00 UTC of ``day`` (a :class:`datetime.date`)."""
    return (day.toordinal() - _EPOCH_ORDINAL) * 24


def utc_weekday(hours: np.ndarray | int) -> np.ndarray | int:
    """Weekday (Monday = 0) of epoch hours in UTC (1970-01-01 was a Thursday, weekday 3)."""
    return (np.floor_divide(hours, 24) + 3) % 7


def utc_hour_of_day(hours: np.ndarray | int) -> np.ndarray | int:
    """Hour of day 0..23 of epoch hours in UTC."""
    return np.mod(hours, 24)


@dataclass(frozen=True, eq=False)
class Series:
    """One hourly series on a dense grid.

    Attributes:
        series_id: the series' id in its domain (EIA balancing-authority code ``"ISNE"``, TfL station ``"191"``).
        domain: the domain's name (:mod:`fwgym.domains`).
        name: human name (balancing authority or station).
        unit: the domain's unit (``"MW"``, ``"departures/hour"``).
        start_hour: epoch hour of ``values[0]``.
        values: float64 array, one value per hour from ``start_hour``; NaN where the hour is missing.
            Read-only and shared between all environments of a process.
    """

    series_id: str
    domain: str
    name: str
    unit: str
    start_hour: int
    values: np.ndarray
    _valid_cumsum: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        csum = np.concatenate([[0], np.cumsum(np.isfinite(self.values), dtype=np.int32)]).astype(np.int32)
        csum.flags.writeable = False
        object.__setattr__(self, "_valid_cumsum", csum)

    @property
    def end_hour(self) -> int:
        """Epoch hour one past the last value."""
        return self.start_hour + len(self.values)

    def is_complete(self, start_hour: int, n_hours: int) -> bool:
        """True when all ``n_hours`` hours from ``start_hour`` are present (O(1))."""
        i = start_hour - self.start_hour
        if i < 0 or i + n_hours > len(self.values):
            return False
        return int(self._valid_cumsum[i + n_hours] - self._valid_cumsum[i]) == n_hours

    def window(self, start_hour: int, n_hours: int) -> np.ndarray:
        """Read-only view of ``n_hours`` values from ``start_hour``.

        Raises:
            ValueError: the window leaves the series' span.
        """
        i = start_hour - self.start_hour
        if i < 0 or i + n_hours > len(self.values):
            raise ValueError(
                f"window [{hour_to_iso(start_hour)}, +{n_hours} h) is outside series {self.series_id}"
            )
        return self.values[i : i + n_hours]


_CACHE: dict[tuple[str, str], dict[str, Series]] = {}
_LOCK = threading.Lock()


def load_series(domain: str, data_dir: str | Path | None = None) -> dict[str, Series]:
    """Every series of ``domain``: its data file (:attr:`fwgym.domains.Domain.series_file`) read, verified
    and densified (:func:`fwgym.data.read_series_file`), named (the file's name column, else the domain's
    ``series_names``, else the id) and in the domain's unit.

    Args:
        domain: a registered domain's name (:func:`fwgym.domains.domain_names`).
        data_dir: directory holding the file (the same file name); defaults to the domain's file. The
            sha256 check applies to any directory.

    Returns:
        ``{series_id: Series}`` in sorted id order. Cached per (domain, directory), so many environments in
        one process share the same arrays (they are read-only).

    Raises:
        ValueError: unknown domain.
        DataIntegrityError: the file is missing, fails its sha256 check, cannot be parsed, or holds
            duplicate timestamps, non-hourly timestamps, or non-finite / negative values.
    """
    # imported here: this module (hour arithmetic, Series) is imported where the packaged data must not be
    # (an isolated agent's worker refuses fwgym.data, fwgym.agents.isolation_worker.DENIED_MODULES)
    from fwgym.data import read_series_file
    from fwgym.domains import get_domain

    spec = get_domain(domain)
    path, digest = spec.series_file.resolve(data_dir)
    key = (domain, str(path.resolve()))
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    raw = read_series_file(path, digest)
    names = dict(spec.series_names()) if spec.series_names is not None and any(r.name is None for r in raw.values()) \
        else {}
    out = {sid: Series(series_id=sid, domain=domain, name=r.name if r.name is not None else names.get(sid, sid),
                       unit=spec.unit, start_hour=r.start_hour, values=r.values) for sid, r in raw.items()}
    with _LOCK:
        return _CACHE.setdefault(key, out)
