"""Tests for fwgym/forecasters/classical.py: the eight free classical methods (protocol §3.1).

Each method is compared with a brute-force implementation written here with datetime objects
and plain loops (and an independent least-squares fit for calendar_residual).
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from fwgym.forecasters import CLASSICAL_METHODS, classical_distribution

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
METHODS = [
    "weekday_empirical",
    "weekly_repeat",
    "all_hour_empirical",
    "calendar_residual",
    "recent_week_empirical",
    "recent_day_empirical",
    "hour_of_day_empirical",
    "level_adjusted_weekly",
]
K = {
    "weekday_empirical": 2,
    "weekly_repeat": 1,
    "all_hour_empirical": 336,
    "calendar_residual": 336,
    "recent_week_empirical": 168,
    "recent_day_empirical": 24,
    "hour_of_day_empirical": 14,
    "level_adjusted_weekly": 1,
}


def dt(hour: int) -> datetime:
    return EPOCH + timedelta(hours=int(hour))


def make_case(last_visible: datetime, lead_days: int, seed: int, n: int = 336):
    """Synthetic history of n hours ending at ``last_visible`` (inclusive) and the 24 target hours,
    which start at as_of + lead_days, with as_of = last_visible + 3 h (DESIGN §2)."""
    rng = np.random.default_rng(seed)
    lv = int((last_visible - EPOCH).total_seconds() // 3600)
    hours = np.arange(lv - n + 1, lv + 1, dtype=np.int64)
    t = np.arange(n)
    hist = 1000 + 300 * np.sin(2 * np.pi * t / 24) + 100 * np.cos(2 * np.pi * t / 168) + rng.normal(0, 50, n)
    # target starts as_of + lead days; as_of = last_visible + 3 h
    target_start = lv + 3 + 24 * lead_days
    return hist, hours, np.arange(target_start, target_start + 24, dtype=np.int64)


CASES = [
    (datetime(2024, 7, 9, 21, tzinfo=UTC), 1, 0),  # electricity day-ahead timing
    (datetime(2024, 7, 3, 21, tzinfo=UTC), 7, 1),  # electricity week-ahead timing
    (datetime(2015, 9, 29, 20, tzinfo=UTC), 1, 2),  # cycle hire in BST (23:00 UTC target start)
    (datetime(2015, 1, 5, 21, tzinfo=UTC), 7, 3),
    (datetime(2023, 3, 1, 5, tzinfo=UTC), 1, 4),  # odd hour
]


# ------------------------------------------------------------------------------------------------
# brute-force references


def bf_same_weekday_hour(hist, hours, u):
    tu = dt(u)
    return [v for v, h in zip(hist, hours) if dt(h).weekday() == tu.weekday() and dt(h).hour == tu.hour]


def bf_weekday_empirical(hist, hours, target):
    return [bf_same_weekday_hour(hist, hours, u) for u in target]


def bf_weekly_repeat(hist, hours, target):
    out = []
    for u in target:
        cands = [(h, v) for v, h in zip(hist, hours) if dt(h).weekday() == dt(u).weekday() and dt(h).hour == dt(u).hour]
        out.append([max(cands)[1]])  # most recent
    return out


def bf_hour_of_day(hist, hours, target):
    return [[v for v, h in zip(hist, hours) if dt(h).hour == dt(u).hour] for u in target]


def bf_level_adjusted(hist, hours, target):
    last_day = sum(hist[-24:]) / 24.0
    week_before = sum(hist[len(hist) - 192 : len(hist) - 168]) / 24.0
    return [[max(0.0, r[0] + last_day - week_before)] for r in bf_weekly_repeat(hist, hours, target)]


def bf_regressors(t: float) -> list[float]:
    row = [1.0, t / 336.0]
    for k in (1, 2, 3):
        for period in (24.0, 168.0):
            row.append(math.sin(2 * math.pi * k * t / period))
            row.append(math.cos(2 * math.pi * k * t / period))
    return row


def bf_calendar_residual(hist, hours, target):
    t0 = dt(hours[0])
    ts = [(dt(h) - t0).total_seconds() / 3600.0 for h in hours]
    X = np.array([bf_regressors(t) for t in ts])
    assert X.shape == (336, 14)
    # solve via QR (normal-equation free); independent of the implementation's lstsq call
    q, r = np.linalg.qr(X)
    beta = np.linalg.solve(r, q.T @ np.asarray(hist))
    resid = np.asarray(hist) - X @ beta
    out = []
    for u in target:
        pred = float(np.dot(bf_regressors((dt(u) - t0).total_seconds() / 3600.0), beta))
        out.append([max(0.0, pred + e) for e in resid])
    return out, beta, resid


def sorted_rows(a):
    return np.sort(np.asarray(a, dtype=float), axis=1)


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_weekday_empirical(case):
    hist, hours, target = make_case(*case)
    got = classical_distribution("weekday_empirical", hist, hours, target)
    ref = bf_weekday_empirical(hist, hours, target)
    assert got.shape == (24, 2)
    assert all(len(r) == 2 for r in ref)
    np.testing.assert_array_equal(np.sort(got, axis=1), sorted_rows(ref))


@pytest.mark.parametrize("case", CASES)
def test_weekly_repeat(case):
    hist, hours, target = make_case(*case)
    got = classical_distribution("weekly_repeat", hist, hours, target)
    assert got.shape == (24, 1)
    np.testing.assert_array_equal(got, bf_weekly_repeat(hist, hours, target))


@pytest.mark.parametrize("case", CASES)
def test_hour_of_day_empirical(case):
    hist, hours, target = make_case(*case)
    got = classical_distribution("hour_of_day_empirical", hist, hours, target)
    ref = bf_hour_of_day(hist, hours, target)
    assert got.shape == (24, 14)
    assert all(len(r) == 14 for r in ref)
    np.testing.assert_array_equal(np.sort(got, axis=1), sorted_rows(ref))


@pytest.mark.parametrize("case", CASES)
def test_all_recent_empirical(case):
    hist, hours, target = make_case(*case)
    for method, src in (
        ("all_hour_empirical", list(hist)),
        ("recent_week_empirical", list(hist[168:])),
        ("recent_day_empirical", list(hist[312:])),
    ):
        got = classical_distribution(method, hist, hours, target)
        assert got.shape == (24, len(src))
        for row in got:
            np.testing.assert_array_equal(np.sort(row), np.sort(src))


@pytest.mark.parametrize("case", CASES)
def test_level_adjusted_weekly(case):
    hist, hours, target = make_case(*case)
    got = classical_distribution("level_adjusted_weekly", hist, hours, target)
    assert got.shape == (24, 1)
    np.testing.assert_allclose(got, bf_level_adjusted(hist, hours, target), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_calendar_residual(case):
    hist, hours, target = make_case(*case)
    got = classical_distribution("calendar_residual", hist, hours, target)
    ref, _, _ = bf_calendar_residual(hist, hours, target)
    assert got.shape == (24, 336)
    # residual order is the history order in both
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8 * float(np.abs(hist).max()))


def test_calendar_residual_exact_fit():
    # history exactly in the model space: residuals 0, prediction = the formula at the target hour
    lv = datetime(2024, 2, 1, 21, tzinfo=UTC)
    _, hours, target = make_case(lv, 1, 0)
    t = np.arange(336.0)
    beta = [500.0, 30.0, 40.0, -20.0, 10.0, 5.0, 3.0, -2.0, 1.0, 0.5, 0.25, -0.5, 0.1, 0.2]
    hist = np.array([np.dot(bf_regressors(x), beta) for x in t])
    got = classical_distribution("calendar_residual", hist, hours, target)
    for i, u in enumerate(target):
        expected = float(np.dot(bf_regressors(float(u - hours[0])), beta))
        np.testing.assert_allclose(got[i], expected, rtol=1e-8, atol=1e-7)


def test_hand_example_weekly_repeat_and_hour_of_day():
    # history = its own epoch hour: the sample value tells which hour was chosen
    lv = datetime(2024, 7, 9, 21, tzinfo=UTC)  # Tuesday 21:00Z
    _, hours, target = make_case(lv, 1, 0)
    hist = hours.astype(float)
    # target day 2024-07-11 (Thursday) 00:00Z..23:00Z; most recent Thursday 00:00Z in the history is 2024-07-04
    assert dt(target[0]) == datetime(2024, 7, 11, 0, tzinfo=UTC)
    wr = classical_distribution("weekly_repeat", hist, hours, target)
    assert dt(wr[0, 0]) == datetime(2024, 7, 4, 0, tzinfo=UTC)
    assert dt(wr[23, 0]) == datetime(2024, 7, 4, 23, tzinfo=UTC)
    wd = classical_distribution("weekday_empirical", hist, hours, target)
    assert sorted(dt(x) for x in wd[5]) == [datetime(2024, 6, 27, 5, tzinfo=UTC), datetime(2024, 7, 4, 5, tzinfo=UTC)]
    hod = classical_distribution("hour_of_day_empirical", hist, hours, target)
    # 14 values at 22:00Z: 2024-06-25 22:00 is the first history hour ... 2024-07-08 22:00 the last at 22h
    assert sorted(dt(x) for x in hod[22]) == [datetime(2024, 6, 25, 22, tzinfo=UTC) + timedelta(days=i) for i in range(14)]
    # hour 21:00Z: last visible hour is 2024-07-09 21:00 -> 2024-06-26 .. 2024-07-09
    assert sorted(dt(x) for x in hod[21]) == [datetime(2024, 6, 26, 21, tzinfo=UTC) + timedelta(days=i) for i in range(14)]


def test_hand_example_level_adjusted():
    lv = datetime(2024, 7, 9, 21, tzinfo=UTC)
    _, hours, target = make_case(lv, 1, 0)
    hist = np.full(336, 100.0)
    hist[-24:] = 130.0  # last day +30
    hist[-192:-168] = 90.0  # the same 24 h one week earlier -10 -> shift = 130 - 90 = 40
    got = classical_distribution("level_adjusted_weekly", hist, hours, target)
    wr = classical_distribution("weekly_repeat", hist, hours, target)
    np.testing.assert_allclose(got, wr + 40.0)
    # target 2024-07-11 00..23Z; weekly repeat reads 2024-07-04 00..23Z which is positions
    # -162..-139 of the history (all 100) -> 140
    np.testing.assert_allclose(got, 140.0)


# ------------------------------------------------------------------------------------------------
# clipping at 0


def test_level_adjusted_clipped_at_zero():
    _, hours, target = make_case(datetime(2024, 7, 9, 21, tzinfo=UTC), 1, 0)
    hist = np.full(336, 10.0)
    hist[-24:] = 0.0
    hist[-192:-168] = 500.0  # shift = 0 - 500 = -500 -> 10 - 500 < 0 -> clipped
    got = classical_distribution("level_adjusted_weekly", hist, hours, target)
    np.testing.assert_array_equal(got, np.zeros((24, 1)))


def test_calendar_residual_clipped_at_zero():
    _, hours, target = make_case(datetime(2024, 7, 9, 21, tzinfo=UTC), 1, 0)
    rng = np.random.default_rng(9)
    hist = np.abs(rng.normal(5, 50, 336))  # large noise around a small level -> negative samples
    got = classical_distribution("calendar_residual", hist, hours, target)
    ref, beta, resid = bf_calendar_residual(hist, hours, target)
    assert got.min() == 0.0
    assert (got == 0).sum() > 0
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8 * float(np.abs(hist).max()))


def test_empirical_methods_keep_values_as_is():
    # empirical methods never invent values: every sample is a history value
    hist, hours, target = make_case(*CASES[0])
    for m in ("weekday_empirical", "weekly_repeat", "hour_of_day_empirical", "all_hour_empirical",
              "recent_week_empirical", "recent_day_empirical"):
        got = classical_distribution(m, hist, hours, target)
        assert np.isin(got, hist).all()


# ------------------------------------------------------------------------------------------------
# shapes, registry, errors


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES[:2])
def test_output_shape_dtype(method, case):
    hist, hours, target = make_case(*case)
    got = classical_distribution(method, hist, hours, target)
    assert got.shape == (24, K[method])
    assert got.dtype == np.float64
    assert np.all(np.isfinite(got))
    assert got.flags.c_contiguous


def test_registry_has_the_eight_methods():
    assert sorted(CLASSICAL_METHODS) == sorted(METHODS)


def test_unknown_method():
    hist, hours, target = make_case(*CASES[0])
    with pytest.raises(ValueError):
        classical_distribution("seasonal_naive", hist, hours, target)
    with pytest.raises(ValueError):
        classical_distribution("", hist, hours, target)


@pytest.mark.parametrize("n", [0, 24, 168, 335, 337])
def test_short_or_ragged_history(n):
    lv = datetime(2024, 7, 9, 21, tzinfo=UTC)
    lvh = int((lv - EPOCH).total_seconds() // 3600)
    hours = np.arange(lvh - n + 1, lvh + 1)
    hist = np.ones(n)
    target = np.arange(lvh + 27, lvh + 51)
    for m in METHODS:
        with pytest.raises(ValueError):
            classical_distribution(m, hist, hours, target)


def test_bad_history_hours():
    hist, hours, target = make_case(*CASES[0])
    with pytest.raises(ValueError):
        classical_distribution("weekly_repeat", hist, hours[:-1], target)  # length mismatch
    gappy = hours.copy()
    gappy[100:] += 1
    with pytest.raises(ValueError):
        classical_distribution("weekly_repeat", hist, gappy, target + 1)  # not consecutive
    with pytest.raises(ValueError):
        classical_distribution("weekly_repeat", hist, hours, hours[-24:])  # target inside history


@pytest.mark.parametrize("method", ["weekday_empirical", "hour_of_day_empirical", "weekly_repeat"])
def test_three_week_history(method):
    # 504 hours (a whole number of weeks) is accepted; counts scale with the weeks
    hist, hours, target = make_case(datetime(2024, 7, 9, 21, tzinfo=UTC), 1, 5, n=504)
    got = classical_distribution(method, hist, hours, target)
    ref = {"weekday_empirical": bf_weekday_empirical, "hour_of_day_empirical": bf_hour_of_day,
           "weekly_repeat": bf_weekly_repeat}[method](hist, hours, target)
    assert got.shape == (24, len(ref[0]))
    if method == "weekly_repeat":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_array_equal(np.sort(got, axis=1), sorted_rows(ref))


@pytest.mark.parametrize("case_id", ["elec-ISNE-2024-07-19-day_ahead", "cycle-14-2015-10-05-week_ahead",
                                     "elec-CISO-2024-02-03-week_ahead"])
def test_method_samples_equal_the_checked_distribution_on_real_cases(case_id):
    from fwgym.core.cases import get_case
    from fwgym.forecasters.classical import method_samples

    c = get_case(case_id)
    for m in CLASSICAL_METHODS:
        got = method_samples(m, c.history, c.history_hours, c.target_hours)
        assert got.flags.c_contiguous and got.dtype == np.float64
        np.testing.assert_array_equal(got, classical_distribution(m, c.history, c.history_hours, c.target_hours))
    # calendar_residual's cached pseudo-inverse is ordinary least squares (np.linalg.lstsq on the design)
    def design(t):
        return np.stack([np.ones_like(t), t / 336] + [f(2 * np.pi * k * t / p) for p in (24, 168) for k in (1, 2, 3)
                                                     for f in (np.sin, np.cos)], axis=1)

    coef = np.linalg.lstsq(design(np.arange(336.0)), c.history, rcond=None)[0]
    resid = c.history - design(np.arange(336.0)) @ coef
    pred = design((c.target_hours - c.history_hours[0]).astype(float)) @ coef
    got = method_samples("calendar_residual", c.history, c.history_hours, c.target_hours)
    np.testing.assert_allclose(got, np.maximum(pred[:, None] + resid[None, :], 0.0), rtol=1e-9, atol=1e-9 * c.scale)


def test_method_samples_unknown_method_is_a_value_error():
    from fwgym.forecasters.classical import method_samples

    h = np.ones(336)
    with pytest.raises(ValueError, match="unknown classical method"):
        method_samples("nope", h, np.arange(336), np.arange(400, 424))
