"""Tests for fwgym/core/cases.py: split calendars and counts, case timing, quality filters, ids.

Expected values are written by hand (dates, hours) or recomputed from the raw Parquet files with
pandas and the standard library (datetime / zoneinfo), independently of fwgym.
"""
from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

import fwgym.data as fdata
from fwgym.core.cases import (
    build_cases,
    busiest_stations,
    get_case,
    make_case_id,
    parse_case_id,
    target_start_hour,
)

UTC = timezone.utc
LONDON = ZoneInfo("Europe/London")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PKG_DATA = Path(fdata.__file__).resolve().parent


def eh(dt: datetime) -> int:
    """Epoch hour of an aware datetime (independent of fwgym.core.series)."""
    return int((dt - EPOCH).total_seconds() // 3600)


class Dense:
    """Hour -> value lookup for one series built with pandas/numpy (NaN where the row is absent)."""

    def __init__(self, hours: np.ndarray, values: np.ndarray):
        self.start = int(hours.min())
        self.values = np.full(int(hours.max()) - self.start + 1, np.nan)
        self.values[hours - self.start] = values

    def __contains__(self, hour: int) -> bool:
        i = hour - self.start
        return 0 <= i < len(self.values) and not np.isnan(self.values[i])

    def __getitem__(self, hour: int) -> float:
        if hour not in self:
            raise KeyError(hour)
        return float(self.values[hour - self.start])

    def window(self, start: int, n: int):
        i = start - self.start
        if i < 0 or i + n > len(self.values):
            return None
        w = self.values[i : i + n]
        return None if np.isnan(w).any() else w.copy()

    def total_before(self, hour: int) -> float:
        return float(np.nansum(self.values[: max(0, hour - self.start)]))


@pytest.fixture(scope="module")
def raw():
    """{domain: {series_id: Dense}} straight from pandas."""
    out = {}
    for domain, name in (("electricity", "eia930_demand.parquet"), ("cycle_hire", "tfl_cycle_hire.parquet")):
        df = pd.read_parquet(PKG_DATA / name)
        df["hour"] = (df["timestamp"] - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(hours=1)
        out[domain] = {
            str(sid): Dense(g["hour"].to_numpy(), g["value"].to_numpy(dtype=float))
            for sid, g in df.groupby("series_id", sort=False)
        }
    return out


def window_values(series_map: Dense, start: int, n: int):
    return series_map.window(start, n)


# ------------------------------------------------------------------------------------------------
# counts


def test_test_split_counts_per_cohort():
    elec = Counter(c.cohort for c in build_cases("electricity", "test"))
    assert elec == {"electricity-february": 370, "electricity-july": 343, "electricity-august": 389}
    cyc = build_cases("cycle_hire", "test")
    assert Counter(c.cohort for c in cyc) == {"cycle_hire-october": 157}
    assert Counter(c.lead for c in cyc) == {"day_ahead": 80, "week_ahead": 77}


def test_electricity_test_ids_match_independent_completeness(raw):
    """Target days 3/11/19/27 of Feb/Jul/Aug 2024 x 54 BAs x 2 leads, kept when complete (pandas)."""
    expected = set()
    for sid, m in raw["electricity"].items():
        for month in (2, 7, 8):
            for day in (3, 11, 19, 27):
                tgt = datetime(2024, month, day, tzinfo=UTC)
                for lead, days in (("day_ahead", 1), ("week_ahead", 7)):
                    as_of = tgt - timedelta(days=days)
                    hist = window_values(m, eh(as_of - timedelta(hours=338)), 336)
                    target = window_values(m, eh(tgt), 24)
                    if hist is not None and target is not None and hist.mean() > 0:
                        expected.add(f"elec-{sid}-{tgt.date().isoformat()}-{lead}")
    got = {c.case_id for c in build_cases("electricity", "test")}
    assert len(expected) == 370 + 343 + 389
    assert got == expected


def test_electricity_dev_calendar():
    dev = build_cases("electricity", "dev")
    assert {c.target_date for c in dev} <= {date(2024, 1, d) for d in (3, 7, 11, 15, 19, 23, 27, 31)}
    assert {c.cohort for c in dev} == {"electricity-january"}
    assert all(c.split == "dev" for c in dev)


def test_cycle_hire_test_stations_are_the_20_busiest(raw):
    # first dev/test window: dev target 2015-08-03 local midnight = 2015-08-02T23:00Z, week-ahead,
    # history starts 7 days + 2 h + 336 h earlier = 2015-07-12T21:00Z
    cutoff = eh(datetime(2015, 7, 12, 21, tzinfo=UTC))
    assert cutoff == eh(datetime(2015, 8, 2, 23, tzinfo=UTC)) - 7 * 24 - 2 - 336
    totals = sorted((-m.total_before(cutoff), int(sid)) for sid, m in raw["cycle_hire"].items())
    top = {str(t[1]) for t in totals[:20]}
    assert set(busiest_stations()) == top
    cyc = build_cases("cycle_hire", "test")
    assert {c.series_id for c in cyc} == top
    assert {c.target_date for c in cyc} == {date(2015, 10, d) for d in (1, 5, 9, 13)}


def test_cases_sorted():
    for domain in ("electricity", "cycle_hire"):
        cs = build_cases(domain, "test")
        keys = [(c.cohort, c.series_id, c.target_date, c.lead) for c in cs]
        assert keys == sorted(keys)
        assert len({c.case_id for c in cs}) == len(cs)


def test_unknown_split_or_domain():
    with pytest.raises(ValueError):
        build_cases("electricity", "validation")
    with pytest.raises(ValueError):
        build_cases("gas", "test")


# ------------------------------------------------------------------------------------------------
# timing of one case, by hand


def test_electricity_day_ahead_timing_by_hand(raw):
    c = get_case("elec-PJM-2024-07-11-day_ahead")
    assert (c.domain, c.series_id, c.lead, c.split, c.cohort) == (
        "electricity", "PJM", "day_ahead", "test", "electricity-july")
    assert c.target_date == date(2024, 7, 11)
    assert c.target_start == eh(datetime(2024, 7, 11, 0, tzinfo=UTC))
    assert c.as_of == eh(datetime(2024, 7, 10, 0, tzinfo=UTC))
    assert c.last_visible == eh(datetime(2024, 7, 9, 21, tzinfo=UTC))
    # 336 hours ending at 2024-07-09T21:00Z start 13 days 22 hours... i.e. at 2024-06-25T22:00Z
    assert c.history_start == eh(datetime(2024, 6, 25, 22, tzinfo=UTC))
    assert c.horizon == 50
    assert c.target_steps == (27, 50)
    # step k is last_visible + k hours: step 27 = target start, step 50 = last target hour
    assert c.last_visible + 27 == c.target_start
    assert c.last_visible + 50 == c.target_start + 23
    assert c.history.shape == (336,)
    assert c.history_hours.tolist() == list(range(c.history_start, c.history_start + 336))
    assert c.target_hours.tolist() == list(range(c.target_start, c.target_start + 24))
    m = raw["electricity"]["PJM"]
    hist = np.array([m[h] for h in range(eh(datetime(2024, 6, 25, 22, tzinfo=UTC)), eh(datetime(2024, 7, 9, 22, tzinfo=UTC)))])
    assert len(hist) == 336
    np.testing.assert_array_equal(c.history, hist)
    np.testing.assert_array_equal(c.target(), [m[eh(datetime(2024, 7, 11, tzinfo=UTC)) + i] for i in range(24)])
    assert c.scale == pytest.approx(sum(hist) / 336, rel=1e-12)
    # 2024-07-11 is a Thursday: pattern rotated by 3
    assert c.target_weekday == 3
    assert c.shortage.tolist() == [1.0] * 6 + [2.0] * 6 + [1.5] * 6 + [1.0] * 6
    s = c.summary()
    assert s["as_of"] == "2024-07-10T00:00:00Z"
    assert s["last_visible"] == "2024-07-09T21:00:00Z"
    assert s["target_start"] == "2024-07-11T00:00:00Z"
    assert s["target_end"] == "2024-07-12T00:00:00Z"
    assert s["horizon"] == 50 and s["target_steps"] == [27, 50]


def test_electricity_week_ahead_timing_by_hand():
    c = get_case("elec-PJM-2024-07-11-week_ahead", split="test")
    assert c.target_start == eh(datetime(2024, 7, 11, tzinfo=UTC))
    assert c.as_of == eh(datetime(2024, 7, 4, tzinfo=UTC))
    assert c.last_visible == eh(datetime(2024, 7, 3, 21, tzinfo=UTC))
    assert c.history_start == eh(datetime(2024, 6, 19, 22, tzinfo=UTC))
    assert c.horizon == 194
    assert c.target_steps == (171, 194)
    assert c.last_visible + 171 == c.target_start
    assert c.last_visible + 194 == c.target_start + 23


def test_cycle_hire_timing_bst_by_hand(raw):
    sid = sorted(busiest_stations(), key=int)[0]
    c = get_case(f"cycle-{sid}-2015-10-01-day_ahead")
    # 2015-10-01 local midnight is BST (UTC+1): 2015-09-30T23:00Z
    assert c.target_start == eh(datetime(2015, 9, 30, 23, tzinfo=UTC))
    assert c.as_of == eh(datetime(2015, 9, 29, 23, tzinfo=UTC))
    assert c.last_visible == eh(datetime(2015, 9, 29, 20, tzinfo=UTC))
    assert c.history_start == eh(datetime(2015, 9, 15, 21, tzinfo=UTC))
    assert c.target_steps == (27, 50)
    # the target weekday is the LOCAL date: 2015-10-01 is a Thursday
    assert c.target_weekday == 3
    assert c.shortage.tolist() == [1.0] * 6 + [2.0] * 6 + [1.5] * 6 + [1.0] * 6
    m = raw["cycle_hire"][sid]
    hist = np.array([m[h] for h in range(c.history_start, c.history_start + 336)])
    np.testing.assert_array_equal(c.history, hist)
    assert c.scale == pytest.approx(hist.mean(), rel=1e-12)
    assert c.summary()["target_start"] == "2015-09-30T23:00:00Z"


def test_cycle_hire_target_start_local_midnight():
    # BST (summer): 23:00 UTC the day before
    assert target_start_hour("cycle_hire", date(2015, 10, 13)) == eh(datetime(2015, 10, 12, 23, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 8, 3)) == eh(datetime(2015, 8, 2, 23, tzinfo=UTC))
    # GMT (winter): 00:00 UTC
    assert target_start_hour("cycle_hire", date(2015, 12, 1)) == eh(datetime(2015, 12, 1, 0, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 12, 25)) == eh(datetime(2015, 12, 25, 0, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 1, 20)) == eh(datetime(2015, 1, 20, 0, tzinfo=UTC))
    # DST switch days: 2015-03-29 starts in GMT, 2015-03-30 in BST; 2015-10-25 starts in BST, 10-26 in GMT
    assert target_start_hour("cycle_hire", date(2015, 3, 29)) == eh(datetime(2015, 3, 29, 0, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 3, 30)) == eh(datetime(2015, 3, 29, 23, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 10, 25)) == eh(datetime(2015, 10, 24, 23, tzinfo=UTC))
    assert target_start_hour("cycle_hire", date(2015, 10, 26)) == eh(datetime(2015, 10, 26, 0, tzinfo=UTC))
    # electricity: always 00:00 UTC
    assert target_start_hour("electricity", date(2024, 7, 11)) == eh(datetime(2024, 7, 11, tzinfo=UTC))
    with pytest.raises(ValueError):
        target_start_hour("gas", date(2024, 7, 11))


def test_cycle_hire_cases_start_at_local_midnight():
    for split in ("train", "dev", "test"):
        for c in build_cases("cycle_hire", split):
            local = (EPOCH + timedelta(hours=c.target_start)).astimezone(LONDON)
            assert (local.hour, local.minute) == (0, 0)
            assert local.date() == c.target_date
            assert c.target_weekday == c.target_date.weekday()
    jan = [c for c in build_cases("cycle_hire", "train") if c.target_date.month == 1]
    assert jan, "expected GMT train cases in January 2015"
    for c in jan:
        assert c.target_start % 24 == 0  # GMT: midnight UTC


def test_electricity_cases_at_utc_midnight():
    for split in ("dev", "test"):
        for c in build_cases("electricity", split):
            assert c.as_of % 24 == 0
            assert c.target_start == eh(datetime(c.target_date.year, c.target_date.month, c.target_date.day, tzinfo=UTC))


# ------------------------------------------------------------------------------------------------
# split separation and quality


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_train_windows_end_before_eval_windows_start(domain):
    train = build_cases(domain, "train")
    evals = build_cases(domain, "dev") + build_cases(domain, "test")
    assert train and evals
    max_train_end = max(c.target_start + 24 for c in train)
    min_eval_start = min(c.as_of - 2 - 336 for c in evals)
    assert max_train_end <= min_eval_start
    assert all(c.split == "train" for c in train)


def test_last_train_target_days_by_hand():
    # electricity: first eval window = dev 2024-01-03 week-ahead, history from 2023-12-12T22:00Z;
    # the last target day ending by then is 2023-12-11
    assert max(c.target_date for c in build_cases("electricity", "train")) == date(2023, 12, 11)
    # cycle hire: first eval window starts 2015-07-12T21:00Z -> last possible target day 2015-07-11
    assert max(c.target_date for c in build_cases("cycle_hire", "train")) <= date(2015, 7, 11)
    assert min(c.target_date for c in build_cases("electricity", "train")).year == 2020


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
@pytest.mark.parametrize("split", ["dev", "test"])
def test_eval_cases_complete_and_positive_scale(domain, split, raw):
    for c in build_cases(domain, split):
        h = c.history
        t = c.target()
        assert h.shape == (336,) and t.shape == (24,)
        assert np.all(np.isfinite(h)) and np.all(np.isfinite(t))
        assert h.min() >= 0 and t.min() >= 0
        assert c.scale > 0
        assert c.scale == pytest.approx(float(np.mean(h)), rel=1e-12)
        m = raw[domain][c.series_id]
        assert all(hh in m for hh in range(c.history_start, c.last_visible + 1))
        assert all(hh in m for hh in range(c.target_start, c.target_start + 24))
        assert c.horizon == {"day_ahead": 50, "week_ahead": 194}[c.lead]


@pytest.mark.parametrize("split", ["dev", "test"])
def test_cycle_hire_no_zero_local_day_in_history(split):
    for c in build_cases("cycle_hire", split):
        start = EPOCH + timedelta(hours=c.history_start)
        end = EPOCH + timedelta(hours=c.last_visible + 1)
        d = start.astimezone(LONDON).date()
        while True:
            lo = datetime(d.year, d.month, d.day, tzinfo=LONDON).astimezone(UTC)
            nxt = d + timedelta(days=1)
            hi = datetime(nxt.year, nxt.month, nxt.day, tzinfo=LONDON).astimezone(UTC)
            if hi > end:
                break
            if lo >= start:
                i0, i1 = eh(lo) - c.history_start, eh(hi) - c.history_start
                assert c.history[i0:i1].sum() > 0, (c.case_id, d)
            d = nxt


# ------------------------------------------------------------------------------------------------
# ids


def test_make_case_id_examples():
    assert make_case_id("electricity", "ISNE", date(2024, 7, 25), "day_ahead") == "elec-ISNE-2024-07-25-day_ahead"
    assert make_case_id("cycle_hire", "191", date(2015, 10, 1), "week_ahead") == "cycle-191-2015-10-01-week_ahead"
    assert parse_case_id("elec-ISNE-2024-07-25-day_ahead") == ("electricity", "ISNE", date(2024, 7, 25), "day_ahead")
    assert parse_case_id("cycle-191-2015-10-01-week_ahead") == ("cycle_hire", "191", date(2015, 10, 1), "week_ahead")


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_case_id_round_trip(domain):
    for split in ("dev", "test"):
        for c in build_cases(domain, split):
            parsed = parse_case_id(c.case_id)
            assert parsed == (c.domain, c.series_id, c.target_date, c.lead)
            assert make_case_id(*parsed) == c.case_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "elec-ISNE-2024-07-25",
        "gas-ISNE-2024-07-25-day_ahead",
        "elec-ISNE-2024-7-25-day_ahead",
        "elec-ISNE-2024-02-30-day_ahead",
        "elec-ISNE-2024-13-01-day_ahead",
        "elec-ISNE-2024-07-25-month_ahead",
        "elec--2024-07-25-day_ahead",
        "elec-IS NE-2024-07-25-day_ahead",
        " elec-ISNE-2024-07-25-day_ahead",
        "elec-ISNE-2024-07-25-day_ahead ",
        "ELEC-ISNE-2024-07-25-day_ahead",
        None,
        123,
    ],
)
def test_malformed_ids_raise(bad):
    with pytest.raises(ValueError):
        parse_case_id(bad)
    with pytest.raises(ValueError):
        get_case(bad)


def test_trailing_newline_id_rejected():
    with pytest.raises(ValueError):
        parse_case_id("elec-ISNE-2024-07-25-day_ahead\n")


def test_get_case_unknown_and_incomplete(raw):
    with pytest.raises(ValueError):
        get_case("elec-XXXX-2024-07-11-day_ahead")
    with pytest.raises(ValueError):
        get_case("cycle-99999-2015-10-01-day_ahead")
    # a date in no split calendar (2024-07-12 is not a test/dev day and is after train)
    with pytest.raises(ValueError):
        get_case("elec-ISNE-2024-07-12-day_ahead")
    # a test-calendar (BA, date, lead) whose window has a missing hour (found with pandas)
    incomplete = None
    for sid, m in sorted(raw["electricity"].items()):
        for month in (2, 7, 8):
            for day in (3, 11, 19, 27):
                tgt = datetime(2024, month, day, tzinfo=UTC)
                if window_values(m, eh(tgt) - 24 - 338, 336) is None or window_values(m, eh(tgt), 24) is None:
                    incomplete = f"elec-{sid}-2024-{month:02d}-{day:02d}-day_ahead"
                    break
            if incomplete:
                break
        if incomplete:
            break
    assert incomplete is not None
    with pytest.raises(ValueError):
        get_case(incomplete, split="test")
    with pytest.raises(ValueError):
        get_case(incomplete)


def test_get_case_domain_and_split_mismatch():
    cid = "elec-PJM-2024-07-11-day_ahead"
    assert get_case(cid, domain="electricity", split="test").case_id == cid
    with pytest.raises(ValueError):
        get_case(cid, domain="cycle_hire")
    with pytest.raises(ValueError):
        get_case(cid, split="dev")
    with pytest.raises(ValueError):
        get_case(cid, split="train")
