"""fwgym.core.series: epoch-hour arithmetic and ISO rendering (checked against datetime/strftime)."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwgym.core.series import datetime_to_hour, hour_to_datetime, hour_to_iso, utc_hour_of_day, utc_weekday

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=-17_000_000, max_value=70_000_000))  # years ~1 .. 9955
def test_hour_to_iso_matches_strftime(hour):
    expected = (EPOCH + timedelta(hours=hour)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if hour < 0 and expected[0] != "-" and len(expected.split("-")[0]) < 4:  # strftime does not zero-pad years < 1000
        expected = expected.zfill(20)
    assert hour_to_iso(hour) == expected
    assert hour_to_iso(np.int64(hour)) == expected
    assert datetime_to_hour(hour_to_datetime(hour)) == hour


def test_known_hours():
    assert hour_to_iso(0) == "1970-01-01T00:00:00Z"
    assert hour_to_iso(-1) == "1969-12-31T23:00:00Z"
    assert hour_to_iso(473_469) == "2024-01-05T21:00:00Z"  # 19,727 days + 21 h
    assert hour_to_iso(datetime_to_hour(datetime(2024, 2, 29, 13, tzinfo=timezone.utc))) == "2024-02-29T13:00:00Z"
    assert utc_weekday(0) == 3 and utc_hour_of_day(25) == 1  # 1970-01-01 was a Thursday


def test_hour_to_iso_takes_any_integer_and_its_errors_do_not_depend_on_the_cache():
    assert hour_to_iso(np.array(5)) == hour_to_iso(np.int32(5)) == hour_to_iso(5.0) == "1970-01-01T05:00:00Z"
    hour_to_iso(5)  # cached now: a complex 5 must still be refused, as int() refuses it
    with pytest.raises(TypeError):
        hour_to_iso(5 + 0j)
    with pytest.raises(TypeError):
        hour_to_iso([5])
    with pytest.raises((OverflowError, ValueError)):
        hour_to_iso(10**30)
    with pytest.raises(ValueError):
        hour_to_iso(float("nan"))


def test_datetime_to_hour_errors():
    with pytest.raises(ValueError, match="time zone"):
        datetime_to_hour(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="on the hour"):
        datetime_to_hour(datetime(2024, 1, 1, 0, 30, tzinfo=timezone.utc))


def test_iso_to_hour_reads_every_canonical_time_back_exactly_and_refuses_malformed_ones():
    from datetime import datetime

    from fwgym.core.series import datetime_to_hour, hour_to_iso, iso_to_hour

    rng = np.random.default_rng(0)
    for h in [0, -1, 23, 24, 478189, -200000, 300000, *rng.integers(-300000, 400000, 2000).tolist()]:
        assert iso_to_hour(hour_to_iso(h)) == h  # the canonical form, read by slicing
    assert iso_to_hour("2024-07-20T13:00:00+00:00") == datetime_to_hour(datetime.fromisoformat("2024-07-20T13:00:00+00:00"))
    for bad in ["2024-13-20T13:00:00Z", "2024-07-20T25:00:00Z", "2024x07-20T13:00:00Z", "2024-07-20T13:30:00Z",
                "2024-07-24T 9:00:00Z", "+024-07-24T21:00:00Z", "2_24-07-24T21:00:00Z", "2024-07-24T9 :00:00Z",
                "\u0662\u0660\u0662\u0664-07-24T21:00:00Z"]:
        with pytest.raises(ValueError):
            iso_to_hour(bad)


def test_iso_to_hour_reads_offsets_and_refuses_non_strings_and_naive_times():
    from fwgym.core.series import iso_to_hour

    assert iso_to_hour("2015-10-01T12:00:00+01:00") == iso_to_hour("2015-10-01T11:00:00Z")
    with pytest.raises(TypeError):
        iso_to_hour(123)
    with pytest.raises(ValueError, match="no time zone"):
        iso_to_hour("2024-07-20T13:00:00")


def test_date_to_hour_is_midnight_utc():
    from datetime import date, datetime, timezone

    from fwgym.core.series import date_to_hour, datetime_to_hour

    for d in (date(1970, 1, 1), date(2015, 10, 1), date(2024, 2, 29), date(1969, 12, 31)):
        assert date_to_hour(d) == datetime_to_hour(datetime(d.year, d.month, d.day, tzinfo=timezone.utc))
