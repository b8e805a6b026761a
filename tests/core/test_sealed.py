"""The sealed split (fwgym/core/cases.py, DESIGN §11): no case's target hour lies in a prompt window of another
case of the split, of any series of its domain, checked by brute force over every pair of cases; its cohorts
and weights are the test split's; its calendar is maximal (no (date, lead) of the cohort months can join).

The overlap counts of the test split (the finding of issue 25) are re-measured here the same way.
"""
from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from fwgym.context.text import prompt_windows
from fwgym.core.cases import LEADS, SPLITS, build_cases, case_quality, get_case, target_start_hour
from fwgym.data import load_series

DOMAINS = ("electricity", "cycle_hire")


def _overlaps(cases, windows=lambda c: ((c.history_start, c.last_visible + 1),), same_series: bool = False,
              whole: bool = False) -> np.ndarray:
    """``hit[a]``: case a's target (any hour; ``whole``: all 24 hours) lies in a window of another case (of its own
    series with ``same_series``). Every pair is compared (n x n)."""
    t0 = np.array([c.target_start for c in cases])[:, None]  # target a: [t0, t0 + 24)
    sid = np.array([c.series_id for c in cases])
    hit = np.zeros(len(cases), dtype=bool)
    spans = [windows(c) for c in cases]
    for k in range(max(len(s) for s in spans)):
        w0 = np.array([s[k][0] for s in spans])[None, :]
        w1 = np.array([s[k][1] for s in spans])[None, :]
        inside = (w0 <= t0) & (t0 + 24 <= w1) if whole else (w0 < t0 + 24) & (t0 < w1)
        np.fill_diagonal(inside, False)
        if same_series:
            inside &= sid[:, None] == sid[None, :]
        hit |= inside.any(axis=1)
    return hit


@pytest.mark.parametrize("domain", DOMAINS)
def test_sealed_split_has_no_target_inside_another_cases_prompt(domain):
    cases = build_cases(domain, "sealed")
    assert _overlaps(cases).sum() == 0  # visible histories, any series of the domain, any hour of the target
    assert _overlaps(cases, prompt_windows).sum() == 0  # also the window the context text quotes statistics of
    # the brute force itself finds overlaps where they exist: the test split's
    assert _overlaps(build_cases(domain, "test")).sum() > 0


def test_test_split_overlap_counts_of_the_finding():
    """Issue 25: 878 of 1,102 electricity and 117 of 157 cycle-hire test cases have their whole target inside
    another test case's visible history of the same series."""
    elec, cyc = build_cases("electricity", "test"), build_cases("cycle_hire", "test")
    assert (len(elec), len(cyc)) == (1102, 157)
    assert _overlaps(elec, same_series=True, whole=True).sum() == 878
    assert _overlaps(cyc, same_series=True, whole=True).sum() == 117
    # any hour of the target, inside the visible history of a case of any series of the domain
    assert _overlaps(elec).sum() == 915
    assert _overlaps(cyc).sum() == 117


@pytest.mark.parametrize("domain, n", [("electricity", 1680), ("cycle_hire", 200)])
def test_sealed_case_counts_and_cohorts_are_the_test_splits(domain, n):
    sealed, test = build_cases(domain, "sealed"), build_cases(domain, "test")
    assert len(sealed) == n
    assert {c.cohort for c in sealed} == {c.cohort for c in test}
    assert {c.series_id for c in sealed} <= {c.series_id for c in test} | set(load_series(domain))
    for cohort in {c.cohort for c in sealed}:  # both leads in every cohort (groups series x lead, as test)
        assert {c.lead for c in sealed if c.cohort == cohort} == set(LEADS)
    for c in sealed:
        assert c.split == "sealed" and case_quality(c.series, c.target_start, c.lead) is None
        assert get_case(c.case_id, split="sealed") is c
    assert len({c.case_id for c in sealed}) == n


def _candidates(domain: str):
    """(date, lead) of the test split's cohort months in the held-back period with at least one complete case."""
    months = {c.target_date.month for c in build_cases(domain, "test")}
    year = build_cases(domain, "test")[0].target_date.year
    d = date(year, min(months), 1)
    while d.year == year and d.month <= max(months):
        if d.month in months:
            yield from ((d, lead) for lead in LEADS)
        d += timedelta(days=1)


@pytest.mark.parametrize("domain", DOMAINS)
def test_sealed_calendar_is_maximal(domain):
    """No (target date, lead) of the cohort months with a complete case of an evaluated series can join the split
    without putting some target inside another case's prompt window (benchmarks/sealed_split.py shows it is
    also the maximum, by an integer program)."""
    sealed = build_cases(domain, "sealed")
    have = {(c.target_date, c.lead) for c in sealed}
    series = {c.series_id: c.series for c in build_cases(domain, "test")}
    probe = sealed[0]
    for d, lead in _candidates(domain):
        if (d, lead) in have:
            continue
        start = target_start_hour(domain, d)
        s = next((s for s in series.values() if case_quality(s, start, lead) is None), None)
        if s is None:
            continue
        extra = type(probe)("probe", domain, s, lead, d, start, "sealed", probe.cohort)
        assert _overlaps((*sealed, extra), prompt_windows).sum() > 0, (d, lead)


def test_sealed_is_a_split_everywhere():
    assert "sealed" in SPLITS
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv("cycle_hire", split="sealed")
    ids = {c.case_id for c in build_cases("cycle_hire", "sealed")}
    assert {c.case_id for c in env.cases} == ids
    _, info = env.reset(seed=0)
    assert info["case_id"] in ids
