"""The pedestrian calendars: held-back years, cohorts, the sealed split's no-overlap property by brute force, and the
case counts of the shipped data (every history and target hour present)."""
from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from fwgym.domains import pedestrian as D

LEADS = {"day_ahead": 1, "week_ahead": 7}


def _history(d: date, lead: str) -> tuple[int, int]:
    """[first, last + 1) visible hour of a case: 336 hours ending at as_of - 3 h."""
    as_of = D.local_midnight_hour(d) - 24 * LEADS[lead]
    return as_of - 2 - 336, as_of - 2


def _complete(s, start: int, n: int) -> bool:
    i = start - s.start_hour
    return 0 <= i and i + n <= len(s.values) and bool(np.isfinite(s.values[i:i + n]).all())


def _count(pairs) -> int:
    series = D.load_series()
    n = 0
    for s in series.values():
        for d, lead in pairs:
            a, _ = _history(d, lead)
            t = D.local_midnight_hour(d)
            n += _complete(s, a, 336) and _complete(s, t, 24) and s.values[a - s.start_hour:][:336].mean() > 0
    return n


def test_held_back_years_and_cohorts():
    assert {d.year for d in D.CALENDARS["test"]} == {2025} and {d.year for d in D.CALENDARS["dev"]} == {2024}
    assert {d.year for ds in D.SEALED_DATES.values() for d in ds} == {2025}
    for split in ("test", "dev"):
        assert sorted({d.month for d in D.CALENDARS[split]}) == sorted(D.COHORTS) == [2, 7, 11]
        assert [d.day for d in D.CALENDARS[split]] == [3, 11, 19, 27] * 3
    assert {d.month for ds in D.SEALED_DATES.values() for d in ds} == set(D.COHORTS)
    # every sealed cohort holds both leads (the test split's groups)
    for m in D.COHORTS:
        assert all(any(d.month == m for d in D.SEALED_DATES[lead]) for lead in LEADS)
    assert not set(D.CALENDARS["test"]) & set(D.CALENDARS["dev"])


def test_sealed_targets_lie_in_no_visible_history():
    """Brute force over every pair of sealed cases (any sensor: the windows are the same for all)."""
    pairs = [(d, lead) for lead, ds in D.SEALED_DATES.items() for d in ds]
    for d, lead in pairs:
        t = D.local_midnight_hour(d)
        for d2, lead2 in pairs:
            if (d2, lead2) == (d, lead):
                continue
            a, b = _history(d2, lead2)
            assert not (a < t + 24 and t < b), (d, lead, d2, lead2)


def test_test_targets_overlap_histories():
    """The test split keeps the protocol's overlapping windows (the sealed split exists because of this)."""
    pairs = [(d, lead) for d in D.CALENDARS["test"] for lead in LEADS]
    hit = sum(any(a < D.local_midnight_hour(d) + 24 and D.local_midnight_hour(d) < b
                  for a, b in (_history(d2, l2) for d2, l2 in pairs if (d2, l2) != (d, lead)))
              for d, lead in pairs)
    assert hit > len(pairs) // 2


@pytest.mark.parametrize("split,expected", [("test", 432), ("dev", 431), ("sealed", 666)])
def test_case_counts(split, expected):
    if split == "sealed":
        pairs = [(d, lead) for lead, ds in D.SEALED_DATES.items() for d in ds]
    else:
        pairs = [(d, lead) for d in D.CALENDARS[split] for lead in LEADS]
    assert _count(pairs) == expected


def test_train_count_and_cutoff():
    first = min(_history(d, lead)[0] for lead in LEADS for d in D.CALENDARS["dev"] + D.CALENDARS["test"]
                + D.SEALED_DATES[lead])
    days, d = [], date(2019, 1, 1)
    while D.local_midnight_hour(d) + 24 <= first:
        days.append(d)
        d += timedelta(days=1)
    assert days[-1] == date(2024, 1, 11)
    assert _count([(d, lead) for d in days for lead in LEADS]) == 60916
