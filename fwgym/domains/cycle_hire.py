"""The cycle-hire domain: TfL Santander Cycles hourly departures of 100 London docking stations, 2015.

Target days start at local London midnight (Europe/London, DST-aware). Test: 2015-10-01, 10-05, 10-09,
10-13 (cohort cycle_hire-october); dev: 2015-08-03 .. 08-06 (cohort cycle_hire-august); the evaluation
splits use the 20 stations with most departures in the train period, the train split all 100. A case
whose visible history holds a complete local day without a departure (a station out of service) is
skipped. The context states the four weeks before the visible history and England's public holidays.
"""
from __future__ import annotations

from datetime import date

from fwgym.domains.rules import BusiestSeries, NoInactiveLocalDay
from fwgym.domains.spec import DataFile, Domain, HolidayCalendar, WeeksBeforeHistory

__all__ = ["CYCLE_HIRE"]

CYCLE_HIRE = Domain(
    name="cycle_hire", env_name="CycleHire", id_prefix="cycle", title="TfL cycle-hire hourly departures",
    unit="departures/hour", quantity="departures", series_file=DataFile("data/tfl_cycle_hire.parquet"),
    time_zone="Europe/London",
    calendars={
        "test": {"cycle_hire-october": tuple(date(2015, 10, d) for d in (1, 5, 9, 13))},
        "dev": {"cycle_hire-august": tuple(date(2015, 8, d) for d in (3, 4, 5, 6))},
        # no target hour inside a prompt window of another case of the split (tests/core/test_sealed.py)
        "sealed": {"cycle_hire-october": {"day_ahead": (date(2015, 10, 7), date(2015, 10, 8)),
                                          "week_ahead": tuple(date(2015, 10, d) for d in range(7, 15))}},
    },
    eval_series=BusiestSeries(20), quality_rules=(NoInactiveLocalDay(),),
    series_text=("hourly bike-hire departures (trips started per hour) at the Santander Cycles docking station "
                 "{name} (TfL station {sid}), London; local time zone Europe/London"),
    history_facts=WeeksBeforeHistory(4), holidays=HolidayCalendar("UK", "England", subdiv="ENG"),
    scenario_families=("station_closure", "event_surge", "heavy_rain"),
    reference_sigma=0.04340576638915502, target_label="realised departures (hindsight)",
    calendar_note="TfL, 2015, 100 stations; the train split uses all of them",
    protocol=True,
)
