"""The electricity domain: U.S. EIA Form EIA-930 hourly demand of 54 balancing authorities, 2020-2024, MW.

Target days start at 00:00 UTC. Test: target days 3, 11, 19, 27 of February, July and August 2024 (one
cohort per month); dev: days 3, 7, ..., 31 of January 2024; every balancing authority is evaluated (a
BA/date/lead enters only if its window is complete). The context names the balancing authority
(``data/balancing_authorities.csv``) and its region and local time zone
(``data/balancing_authority_zones.csv``, which also places the scenario windows), states the same month of
the previous year and U.S. federal holidays.
"""
from __future__ import annotations

from datetime import date
from functools import lru_cache

from fwgym.data import read_csv_rows
from fwgym.domains.rules import AllSeries
from fwgym.domains.spec import DataFile, Domain, HolidayCalendar, SameMonthLastYear

__all__ = ["ELECTRICITY", "ba_names", "ba_zones"]


def ba_names() -> dict[str, str]:
    """``{BA code: balancing-authority name}`` for the 54 balancing authorities (the sha256-checked file,
    read on every call: :func:`fwgym.core.series.load_series` calls it once per load)."""
    return {r["series_id"]: r["name"] for r in read_csv_rows("data/balancing_authorities.csv")}


@lru_cache(maxsize=None)
def ba_zones() -> dict[str, tuple[str, str]]:
    """``{BA code: (IANA time zone, region description)}`` for the 54 balancing authorities (sha256-checked file)."""
    return {r["series_id"]: (r["time_zone"], r["region"]) for r in read_csv_rows("data/balancing_authority_zones.csv")}


def _days(month: int, days) -> tuple[date, ...]:
    return tuple(date(2024, month, d) for d in days)


def _zone(series_id: str) -> str:
    return ba_zones()[series_id][0]


def _facts(series_id: str) -> dict[str, str]:
    tz, region = ba_zones()[series_id]
    return {"tz": tz, "region": region}


ELECTRICITY = Domain(
    name="electricity", env_name="Electricity", id_prefix="elec", title="EIA-930 hourly electricity demand",
    unit="MW", quantity="demand", series_file=DataFile("data/eia930_demand.parquet"), time_zone="UTC",
    calendars={
        "test": {"electricity-february": tuple(date(2024, 2, d) for d in (3, 11, 19, 27)),
                 "electricity-july": tuple(date(2024, 7, d) for d in (3, 11, 19, 27)),
                 "electricity-august": tuple(date(2024, 8, d) for d in (3, 11, 19, 27))},
        "dev": {"electricity-january": tuple(date(2024, 1, d) for d in range(3, 32, 4))},
        # no target hour inside a prompt window of another case of the split (tests/core/test_sealed.py); the most
        # cases the data allows (benchmarks/sealed_split.py); the test split's cohorts
        "sealed": {"electricity-february": {"day_ahead": _days(2, (2, 3, 28, 29)), "week_ahead": _days(2, range(2, 10))},
                   "electricity-july": {"day_ahead": _days(7, (1, 2, 26, 27)),
                                        "week_ahead": _days(7, (*range(1, 6), *range(28, 32)))},
                   "electricity-august": {"day_ahead": _days(8, (24, 25)), "week_ahead": _days(8, (1, *range(24, 32)))}},
    },
    eval_series=AllSeries(),
    series_text=("hourly electricity demand (MW, hourly integrated mean) of the {name} ({sid}) balancing authority "
                 "serving {region}, from U.S. EIA Form EIA-930; local time zone {tz}"),
    series_facts=_facts, series_zone=_zone, series_names=ba_names,
    history_facts=SameMonthLastYear(), holidays=HolidayCalendar("US", "U.S. federal"),
    scenario_families=("temperature_advisory", "industrial_outage", "transmission_limit"),
    reference_sigma=0.054206794827132906, target_label="realised demand (hindsight)",
    extra_files=(DataFile("data/balancing_authorities.csv"), DataFile("data/balancing_authority_zones.csv")),
    calendar_note="54 balancing authorities; a BA/date/lead enters only if its window is complete",
    protocol=True,
)
