"""A small toy domain built from outside the package: synthetic hourly series written to a Parquet file
in a test's directory, its spec, and a scenario family of its own (what ``docs/domains.md`` walks through).

The series are widget sales of three shops in Auckland, hourly in 2021 (UTC hour starts): a daily and a
weekly shape, seeded noise, shop ``east`` closed (zero sales) on 2021-09-13 local time, and shop
``south`` missing 2021-10-01 03:00..05:00 UTC. Target days start at local Auckland midnight (NZST/NZDT: the
clocks go forward on 2021-09-26, a test target day).
"""
from __future__ import annotations

import hashlib
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.context.scenarios import Scenario, ScenarioFamily, local_hours
from fwgym.domains import AllSeries, DataFile, Domain, HolidayCalendar, NoInactiveLocalDay, WeeksBeforeHistory

AUCKLAND = ZoneInfo("Pacific/Auckland")
SHOPS = {"north": 40.0, "south": 25.0, "east": 12.0}
START = datetime(2021, 1, 1, tzinfo=timezone.utc)
HOURS = 365 * 24
TOY_SIGMA = 0.05


def epoch_hour(dt: datetime) -> int:
    return int((dt - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds() // 3600)


def toy_values(shop: str) -> np.ndarray:
    """The shop's hourly sales (float64, HOURS values from START; NaN = a missing hour)."""
    rng = np.random.default_rng(sorted(SHOPS).index(shop) + 11)
    t = np.arange(HOURS)
    local_hour = np.array([(START + timedelta(hours=int(h))).astimezone(AUCKLAND).hour for h in t])
    weekday = np.array([(START + timedelta(hours=int(h))).astimezone(AUCKLAND).weekday() for h in t])
    shape = np.clip(np.sin((local_hour - 7) / 14 * np.pi), 0, None) * (1.0 + 0.3 * (weekday >= 5))
    v = np.rint(SHOPS[shop] * shape + rng.poisson(1.0, HOURS))
    if shop == "east":  # closed for a local day: no sale from local midnight to midnight
        a = epoch_hour(datetime(2021, 9, 13, tzinfo=AUCKLAND)) - epoch_hour(START)
        b = epoch_hour(datetime(2021, 9, 14, tzinfo=AUCKLAND)) - epoch_hour(START)
        v[a:b] = 0.0
    if shop == "south":
        a = epoch_hour(datetime(2021, 10, 1, 3, tzinfo=timezone.utc)) - epoch_hour(START)
        v[a:a + 3] = np.nan
    return v


def write_toy_data(directory: Path) -> tuple[Path, str]:
    """Write the shops' series as a long-format Parquet file (series_id, timestamp, value, name); returns
    (path, sha256)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids, stamps, values, names = [], [], [], []
    for shop in sorted(SHOPS):
        v = toy_values(shop)
        keep = np.flatnonzero(np.isfinite(v))
        ids += [shop] * len(keep)
        stamps += [START + timedelta(hours=int(h)) for h in keep]
        values += v[keep].tolist()
        names += [f"{shop.title()} Widgets"] * len(keep)
    table = pa.table({"series_id": ids, "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC")),
                      "value": values, "name": names})
    path = Path(directory) / "toy_widgets.parquet"
    pq.write_table(table, path)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _draw_festival(case, rng: np.random.Generator) -> Scenario:
    """A festival next to the shop: sales double for 3 hours from a local hour drawn in 10..16."""
    lh = local_hours(case)
    start = int(rng.integers(10, 17))
    i0 = int(np.flatnonzero(lh == start)[0]) if (lh == start).any() else 10
    roi = np.zeros(24, dtype=bool)
    roi[i0:i0 + 3] = True
    text = (f"Events note: a street festival next to {case.series.name} on {case.target_date:%A %d %B %Y} from "
            f"{start:02d}:00 to {start + 3:02d}:00 local time; we expect about twice the usual sales then.")
    return Scenario("toy_festival", text, roi, params={"factor": 2.0})


def _apply_festival(scenario: Scenario, target: np.ndarray) -> np.ndarray:
    y = np.array(target, dtype=np.float64)
    y[scenario.roi] = np.rint(y[scenario.roi] * scenario.params["factor"])
    return y


FESTIVAL = ScenarioFamily("toy_festival", draw=_draw_festival, apply=_apply_festival)


def make_toy_domain(data_path: Path, sha256: str, name: str = "toy") -> Domain:
    """The toy domain's spec for a data file written by :func:`write_toy_data`."""
    return Domain(
        name=name, env_name=name.title().replace("_", ""), id_prefix=name.replace("_", ""),
        title="toy widget sales (synthetic)", unit="widgets/hour", quantity="sales",
        series_file=DataFile(data_path, sha256), time_zone="Pacific/Auckland",
        calendars={"dev": {f"{name}-june": (date(2021, 6, 7), date(2021, 6, 14))},
                   "test": {f"{name}-september": (date(2021, 9, 26), date(2021, 9, 28)),
                            f"{name}-october": (date(2021, 10, 5), date(2021, 10, 12))}},
        eval_series=AllSeries(),
        quality_rules=(NoInactiveLocalDay(),),
        series_text="hourly widget sales of the shop {name} ({sid}), Auckland; local time zone Pacific/Auckland",
        history_facts=WeeksBeforeHistory(2), holidays=HolidayCalendar("NZ", "New Zealand"),
        scenario_families=("toy_festival",), sigma=TOY_SIGMA, target_label="realised sales (hindsight)",
        calendar_note="3 synthetic shops, 2021",
    )
