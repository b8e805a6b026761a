"""How the sealed split's calendar was chosen, and the overlap counts of every evaluation split.

The sealed split (fwgym.core.cases, DESIGN §11) takes its cases from the test split's cohort months
(electricity February, July, August 2024; cycle hire October 2015), every evaluated series, and chooses
which (target date, lead) pairs to use so that no target hour of a case lies in a prompt window
(fwgym.context.text.prompt_windows: the visible history and the window the context text quotes statistics
of) of any other case of the domain, with as many cases as possible. That is a maximum-weight independent
set over (date, lead) pairs (weight: the number of complete cases of the pair over the evaluated series;
a pair conflicts with an earlier date when that date's target lies in the pair's prompt windows), solved
exactly here as an integer program (scipy.optimize.milp), with every cohort holding both leads and, among
the optima, the most day-ahead cases. This script re-derives it and checks that fwgym's calendar has the
same number of cases.

    python benchmarks/sealed_split.py

Prints, per domain and split: cases, cases whose whole target lies in another case's visible history of the
same series (the count of issue 25), cases with any target hour in any case's prompt windows (any series),
and the optimum's case count next to fwgym's.
"""
from __future__ import annotations

import os
import platform
import sys
from datetime import date, timedelta

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: E402

from fwgym.context.text import prompt_windows  # noqa: E402
from fwgym.core.cases import (LEADS, Case, _eval_series, build_cases, case_quality, make_case_id,  # noqa: E402
                              target_start_hour)
from fwgym.data import load_series  # noqa: E402


def overlaps(cases, windows, same_series: bool = False, whole: bool = False) -> int:
    """Cases whose target (any hour; ``whole``: every hour) lies in a window of another case (of its series)."""
    t0 = np.array([c.target_start for c in cases])[:, None]
    sid = np.array([c.series_id for c in cases])
    hit = np.zeros(len(cases), dtype=bool)
    spans = [windows(c) for c in cases]
    for k in range(len(spans[0])):
        w0 = np.array([s[k][0] for s in spans])[None, :]
        w1 = np.array([s[k][1] for s in spans])[None, :]
        inside = (w0 <= t0) & (t0 + 24 <= w1) if whole else (w0 < t0 + 24) & (t0 < w1)
        np.fill_diagonal(inside, False)
        if same_series:
            inside &= sid[:, None] == sid[None, :]
        hit |= inside.any(axis=1)
    return int(hit.sum())


def history(c):
    return ((c.history_start, c.last_visible + 1),)


def optimum(domain: str) -> tuple[int, list[tuple[date, str, int]]]:
    """The integer program's choice of (date, lead, cases) and its case count."""
    test = build_cases(domain, "test")
    months = sorted({c.target_date.month for c in test})
    year = test[0].target_date.year
    series = load_series(domain)
    sids = _eval_series(domain)
    nodes = []  # (date, lead, complete cases, a probe case for its prompt windows)
    d = date(year, months[0], 1)
    while d.month <= months[-1] and d.year == year:
        if d.month in months:
            for lead in LEADS:
                start = target_start_hour(domain, d)
                ok = [s for s in sids if case_quality(series[s], start, lead) is None]
                if ok:
                    s = series[ok[0]]
                    probe = Case(make_case_id(domain, s.series_id, d, lead), domain, s, lead, d, start, "sealed", "")
                    nodes.append((d, lead, len(ok), probe))
        d += timedelta(days=1)
    dates = sorted({n[0] for n in nodes})
    di = {d: i for i, d in enumerate(dates)}
    nx, nu = len(nodes), len(dates)
    # objective: most cases, then most day-ahead cases
    c = np.zeros(nx + nu)
    c[:nx] = [-(n[2] * 1000 + (n[2] if n[1] == "day_ahead" else 0)) for n in nodes]
    rows, lo, hi = [], [], []

    def row(coefs, lb, ub):
        r = np.zeros(nx + nu)
        for i, v in coefs:
            r[i] += v
        rows.append(r)
        lo.append(lb)
        hi.append(ub)

    for i, (d, lead, _, probe) in enumerate(nodes):
        row([(i, 1), (nx + di[d], -1)], -np.inf, 0)  # a pair uses its date
        for d2 in dates:
            t = target_start_hour(domain, d2)
            if d2 != d and any(a < t + 24 and t < b for a, b in prompt_windows(probe)):
                row([(i, 1), (nx + di[d2], 1)], -np.inf, 1)  # d2's target in this pair's prompt: not both
    for d in dates:
        row([(nx + di[d], 1)] + [(i, -1) for i, n in enumerate(nodes) if n[0] == d], -np.inf, 0)
    for m in months:  # every cohort holds both leads (the test split's groups)
        for lead in LEADS:
            row([(i, 1) for i, n in enumerate(nodes) if n[0].month == m and n[1] == lead], 1, np.inf)
    res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=np.ones(nx + nu),
               bounds=Bounds(0, 1))
    chosen = [(n[0], n[1], n[2]) for i, n in enumerate(nodes) if res.x[i] > 0.5]
    return sum(n[2] for n in chosen), chosen


def main() -> int:
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{'domain':<12} {'split':<7} {'cases':>6} {'whole target in a same-series history':>38} "
          f"{'any target hour in any prompt window':>37}")
    ok = True
    for domain in ("electricity", "cycle_hire"):
        for split in ("dev", "test", "sealed"):
            cases = build_cases(domain, split)
            print(f"{domain:<12} {split:<7} {len(cases):>6} {overlaps(cases, history, True, True):>38} "
                  f"{overlaps(cases, prompt_windows):>37}")
        best, chosen = optimum(domain)
        have = len(build_cases(domain, "sealed"))
        ok &= best == have
        print(f"  integer program: {best} cases at the optimum, fwgym's sealed calendar {have}: "
              f"{'MET' if best == have else 'NOT MET'}")
        for lead in LEADS:
            print(f"    {lead}: " + ", ".join(str(d) for d, lead2, _ in chosen if lead2 == lead))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
