"""Benchmark cases (one case = one episode) and the temporal train / dev / test splits (DESIGN §2).

A case is identified by (domain, series, target date, lead):

* ``target_start``: electricity 00:00 UTC of the target date; cycle hire local London midnight.
* ``as_of`` (decision time) = ``target_start - lead_days x 24 h`` (day-ahead 1, week-ahead 7).
* visible history: 336 consecutive hours ending at ``last_visible = as_of - 3 h`` (hours
  ``as_of - 2 h`` and ``as_of - 1 h`` are never visible). Forecast step 1 = ``last_visible + 1 h``,
  so the 24 target hours are steps 27..50 (day-ahead) or 171..194 (week-ahead).
* ``scale`` = mean of the visible history (must be > 0).

Quality filters: every history and target hour present, finite and >= 0; scale > 0; cycle hire:
no complete local (Europe/London) day with zero departures inside the history. Gaps are never
imputed: such cases are skipped.

Splits are by date and temporal; every train window ends before the first dev, test or sealed window
begins. See :data:`SPLIT_DOC` for the exact calendar.

The ``sealed`` split is for agents with memory (DESIGN §11): its windows come from the held-back period of the test
split, with its cohorts and weights, and no case's target hour lies in the visible history (or in the
4-week window before it whose statistics the context text quotes) of any case of the split, of any series of its
domain, so no prompt of the split hands over the answer of another of its cases. The test split keeps the
protocol's overlapping windows (about 80 % of its targets lie inside another test case's history).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import cached_property, lru_cache
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.core.contract import TARGET_HOURS, shortage_weights
from fwgym.data import load_series
from fwgym.core.series import Series, datetime_to_hour, hour_to_iso

__all__ = ["HISTORY_HOURS", "GAP_HOURS", "LEADS", "HORIZONS", "TRAIN_SPLIT", "DEV_SPLIT", "TEST_SPLIT",
           "SEALED_SPLIT", "SPLITS",
           "CHART_HISTORY_HOURS", "LONDON", "DOMAIN_PREFIX", "SPLIT_DOC", "target_start_hour", "Case", "make_case_id",
           "parse_case_id", "case_quality", "busiest_stations", "build_cases", "get_case"]

HISTORY_HOURS = 336
GAP_HOURS = 2  #: hours between the last visible hour and as_of (as_of-2h, as_of-1h are never visible)
LEADS: dict[str, int] = {"day_ahead": 1, "week_ahead": 7}
#: steps from the first forecast step needed to cover the target: 50 (day-ahead), 194 (week-ahead)
HORIZONS: dict[str, int] = {lead: 24 * days + GAP_HOURS + 1 + TARGET_HOURS - 1 for lead, days in LEADS.items()}
TRAIN_SPLIT, DEV_SPLIT, TEST_SPLIT, SEALED_SPLIT = "train", "dev", "test", "sealed"
SPLITS: tuple[str, ...] = (TRAIN_SPLIT, DEV_SPLIT, TEST_SPLIT, SEALED_SPLIT)
#: hours of visible history an episode chart shows by default (one week of the 336 visible)
CHART_HISTORY_HOURS = 168
LONDON = ZoneInfo("Europe/London")
DOMAIN_PREFIX = {"electricity": "elec", "cycle_hire": "cycle"}
_PREFIX_DOMAIN = {v: k for k, v in DOMAIN_PREFIX.items()}

SPLIT_DOC = """\
electricity (54 balancing authorities; a BA/date/lead enters only if its window is complete)
  test : target days 3, 11, 19, 27 of Feb, Jul and Aug 2024 (cohorts electricity-february/-july/-august)
  dev  : target days 3, 7, 11, 15, 19, 23, 27, 31 of Jan 2024 (cohort electricity-january)
  train: every target day from 2020 whose window ends before the first dev/test window begins
         (last train target day 2023-12-11)
cycle hire (TfL, 2015; test/dev: the 20 stations with most departures in the train period)
  test : target days 2015-10-01, 10-05, 10-09, 10-13 (cohort cycle_hire-october)
  dev  : target days 2015-08-03 .. 08-06 (cohort cycle_hire-august)
  train: every target day whose window ends before the first dev window begins, all 100 stations
sealed (agents with memory: no target hour of a case inside any prompt window of another case of the domain;
        the test split's cohorts and weights; the most cases the data allows, found by an integer program:
        benchmarks/sealed_split.py; week-ahead targets 1..7 days apart never lie in each other's history)
  electricity: day-ahead Feb 2, 3, 28, 29; Jul 1, 2, 26, 27; Aug 24, 25 2024
               week-ahead Feb 2..9; Jul 1..5; Jul 28..Aug 1; Aug 24..31 2024
  cycle hire : day-ahead 2015-10-07, 10-08; week-ahead 2015-10-07 .. 10-14 (cohort cycle_hire-october)
"""


@dataclass(frozen=True)
class _SplitCalendar:
    """Target dates of an evaluation split: ``dates`` for every lead, or ``by_lead`` (lead -> its own dates)."""

    dates: tuple[date, ...]
    cohort_of_month: dict[int, str]
    by_lead: dict[str, tuple[date, ...]] | None = None

    def pairs(self) -> list[tuple[date, str]]:
        """``(target date, lead)`` of every case of a series, by date then lead."""
        if self.by_lead is None:
            return [(d, lead) for d in self.dates for lead in LEADS]
        return sorted(((d, lead) for lead, ds in self.by_lead.items() for d in ds),
                      key=lambda p: (p[0], list(LEADS).index(p[1])))


def _days(year: int, month: int, first: int, last: int) -> tuple[date, ...]:
    return tuple(date(year, month, d) for d in range(first, last + 1))


#: the sealed split's (lead -> target dates): see SPLIT_DOC; checked by brute force in tests/core/test_sealed.py
_SEALED: dict[str, dict[str, tuple[date, ...]]] = {
    "electricity": {
        "day_ahead": (_days(2024, 2, 2, 3) + _days(2024, 2, 28, 29) + _days(2024, 7, 1, 2) + _days(2024, 7, 26, 27)
                      + _days(2024, 8, 24, 25)),
        "week_ahead": (_days(2024, 2, 2, 9) + _days(2024, 7, 1, 5) + _days(2024, 7, 28, 31) + _days(2024, 8, 1, 1)
                       + _days(2024, 8, 24, 31)),
    },
    "cycle_hire": {"day_ahead": _days(2015, 10, 7, 8), "week_ahead": _days(2015, 10, 7, 14)},
}


def _calendar(domain: str, split: str) -> _SplitCalendar:
    if split == SEALED_SPLIT and domain in _SEALED:
        test = _calendar(domain, TEST_SPLIT)
        by_lead = _SEALED[domain]
        return _SplitCalendar(tuple(sorted({d for ds in by_lead.values() for d in ds})), test.cohort_of_month, by_lead)
    if domain == "electricity":
        if split == "test":
            return _SplitCalendar(
                tuple(date(2024, m, d) for m in (2, 7, 8) for d in (3, 11, 19, 27)),
                {2: "electricity-february", 7: "electricity-july", 8: "electricity-august"},
            )
        if split == "dev":
            return _SplitCalendar(tuple(date(2024, 1, d) for d in range(3, 32, 4)), {1: "electricity-january"})
    elif domain == "cycle_hire":
        if split == "test":
            return _SplitCalendar(tuple(date(2015, 10, d) for d in (1, 5, 9, 13)), {10: "cycle_hire-october"})
        if split == "dev":
            return _SplitCalendar(tuple(date(2015, 8, d) for d in (3, 4, 5, 6)), {8: "cycle_hire-august"})
    raise ValueError(f"no fixed calendar for domain={domain!r} split={split!r}")


def target_start_hour(domain: str, target_date: date) -> int:
    """Epoch hour of the target start: 00:00 UTC (electricity) or local London midnight (cycle hire)."""
    if domain == "electricity":
        return datetime_to_hour(datetime(target_date.year, target_date.month, target_date.day, tzinfo=timezone.utc))
    if domain == "cycle_hire":
        local = datetime(target_date.year, target_date.month, target_date.day, tzinfo=LONDON)
        return datetime_to_hour(local.astimezone(timezone.utc))
    raise ValueError(f"unknown domain {domain!r}")


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_SHORTAGE: tuple[np.ndarray, ...] = tuple(_read_only(shortage_weights(d)) for d in range(7))


@dataclass(frozen=True)
class Case:
    """One benchmark case. Holds a reference to the shared :class:`~fwgym.core.series.Series`.

    Time attributes are epoch hours (UTC). ``history`` is visible to agents; ``target`` is
    hindsight data and must only be read by the scorer, oracles and plots.
    """

    case_id: str
    domain: str
    series: Series = field(repr=False)
    lead: str
    target_date: date
    target_start: int
    split: str
    cohort: str

    @property
    def series_id(self) -> str:
        return self.series.series_id

    @property
    def as_of(self) -> int:
        return self.target_start - 24 * LEADS[self.lead]

    @property
    def last_visible(self) -> int:
        return self.as_of - GAP_HOURS - 1

    @property
    def history_start(self) -> int:
        return self.last_visible - HISTORY_HOURS + 1

    @property
    def horizon(self) -> int:
        """Forecast steps needed to cover the target (50 or 194)."""
        return HORIZONS[self.lead]

    @property
    def target_steps(self) -> tuple[int, int]:
        """1-based first and last forecast step of the target window (27..50 or 171..194)."""
        return self.horizon - TARGET_HOURS + 1, self.horizon

    # The per-case arrays are built on access, not cached on the case: a train split has 140k cases
    # and an RL run visits most of them, so caching ~3 KB per case would grow a process by ~0.5 GB.
    # Only the scale (a float) is cached.

    @property
    def history(self) -> np.ndarray:
        """Visible history, float64 (336,), raw units: a read-only view of the shared series."""
        return self.series.window(self.history_start, HISTORY_HOURS)

    @property
    def history_hours(self) -> np.ndarray:
        """Epoch hours of the visible history, int64 (336,)."""
        return np.arange(self.history_start, self.last_visible + 1, dtype=np.int64)

    @property
    def target_hours(self) -> np.ndarray:
        """Epoch hours of the 24 target hours, int64 (24,)."""
        return np.arange(self.target_start, self.target_start + TARGET_HOURS, dtype=np.int64)

    @cached_property
    def scale(self) -> float:
        """Mean of the visible history (raw units), > 0 for every built case."""
        return float(np.add.reduce(self.history) / HISTORY_HOURS)  # == history.mean() bit for bit, without its wrapper

    @property
    def target_weekday(self) -> int:
        """Weekday (Monday = 0) of the target date (the local calendar date for cycle hire)."""
        return self.target_date.weekday()

    @property
    def shortage(self) -> np.ndarray:
        """Shortage weights (24,) of the target day (:func:`fwgym.core.contract.shortage_weights`);
        read-only, shared by every case with the same weekday."""
        return _SHORTAGE[self.target_date.weekday()]

    def target(self) -> np.ndarray:
        """HINDSIGHT: realised values of the 24 target hours, float64 (24,). Never shown to agents."""
        return self.series.window(self.target_start, TARGET_HOURS)

    def summary(self) -> dict:
        """JSON-safe description without any value at or after the cut-off."""
        return {
            "case_id": self.case_id,
            "domain": self.domain,
            "series_id": self.series_id,
            "series_name": self.series.name,
            "unit": self.series.unit,
            "lead": self.lead,
            "as_of": hour_to_iso(self.as_of),
            "last_visible": hour_to_iso(self.last_visible),
            "target_start": hour_to_iso(self.target_start),
            "target_end": hour_to_iso(self.target_start + TARGET_HOURS),
            "horizon": self.horizon,
            "target_steps": list(self.target_steps),
            "scale": self.scale,
            "split": self.split,
            "cohort": self.cohort,
        }


def make_case_id(domain: str, series_id: str, target_date: date, lead: str) -> str:
    """Readable id embedding the TARGET date, e.g. ``elec-ISNE-2024-07-25-day_ahead``."""
    return f"{DOMAIN_PREFIX[domain]}-{series_id}-{target_date.isoformat()}-{lead}"


_ID_RE = re.compile(r"^(elec|cycle)-([A-Za-z0-9_]+)-(\d{4}-\d{2}-\d{2})-(day_ahead|week_ahead)$")


def parse_case_id(case_id: str) -> tuple[str, str, date, str]:
    """Inverse of :func:`make_case_id`: ``(domain, series_id, target_date, lead)``.

    Raises:
        ValueError: the id is not of the form ``<elec|cycle>-<series>-<YYYY-MM-DD>-<day_ahead|week_ahead>``.
    """
    m = _ID_RE.fullmatch(case_id) if isinstance(case_id, str) else None
    if not m:
        raise ValueError(
            f"malformed case id {case_id!r}; expected e.g. 'elec-ISNE-2024-07-25-day_ahead' or 'cycle-191-2015-10-01-week_ahead'"
        )
    try:
        d = date.fromisoformat(m.group(3))
    except ValueError as exc:
        raise ValueError(f"malformed case id {case_id!r}: {exc}") from exc
    return _PREFIX_DOMAIN[m.group(1)], m.group(2), d, m.group(4)


@lru_cache(maxsize=None)
def _london_midnights() -> np.ndarray:
    start, stop = date(2014, 12, 1), date(2016, 2, 1)
    days = [start + timedelta(days=i) for i in range((stop - start).days + 1)]
    return np.array([target_start_hour("cycle_hire", d) for d in days], dtype=np.int64)


def _has_zero_local_day(series: Series, start: int, n_hours: int, values: np.ndarray) -> bool:
    mids = _london_midnights()
    i0 = int(np.searchsorted(mids, start, side="left"))
    csum = np.concatenate([[0.0], np.cumsum(values)])
    for i in range(i0, len(mids) - 1):
        a, b = int(mids[i]), int(mids[i + 1])
        if b > start + n_hours:
            break
        if csum[b - start] - csum[a - start] == 0:
            return True
    return False


def case_quality(series: Series, target_start: int, lead: str) -> str | None:
    """Return ``None`` when the case passes every quality filter, else the reason it is skipped."""
    as_of = target_start - 24 * LEADS[lead]
    hist_start = as_of - GAP_HOURS - HISTORY_HOURS
    if not series.is_complete(hist_start, HISTORY_HOURS):
        return "missing_history_hour"
    if not series.is_complete(target_start, TARGET_HOURS):
        return "missing_target_hour"
    hist = series.window(hist_start, HISTORY_HOURS)
    tgt = series.window(target_start, TARGET_HOURS)
    if not (np.all(np.isfinite(hist)) and np.all(np.isfinite(tgt))) or hist.min() < 0 or tgt.min() < 0:
        return "invalid_value"
    if not hist.mean() > 0:
        return "nonpositive_scale"
    if series.domain == "cycle_hire" and _has_zero_local_day(series, hist_start, HISTORY_HOURS, hist):
        return "inactive_history_day"
    return None


def _window_start(domain: str, d: date, lead: str) -> int:
    return target_start_hour(domain, d) - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS


def _first_eval_window_start(domain: str) -> int:
    starts = [_window_start(domain, d, "week_ahead") for s in (DEV_SPLIT, TEST_SPLIT, SEALED_SPLIT)
              for d in _calendar(domain, s).dates]
    return min(starts)


@lru_cache(maxsize=None)
def busiest_stations(n: int = 20) -> tuple[str, ...]:
    """The ``n`` cycle-hire stations with most departures before the first dev/test window
    (ties broken by lower numeric id)."""
    series = load_series("cycle_hire")
    cutoff = _first_eval_window_start("cycle_hire")
    totals = []
    for sid, s in series.items():
        v = s.values[: max(0, cutoff - s.start_hour)]
        totals.append((-float(np.nansum(v)), int(sid) if sid.isdigit() else 10**9, sid))
    return tuple(t[2] for t in sorted(totals)[:n])


def _eval_series(domain: str) -> list[str]:
    return sorted(load_series(domain)) if domain == "electricity" else sorted(busiest_stations(), key=int)


@lru_cache(maxsize=None)
def build_cases(domain: str, split: str) -> tuple[Case, ...]:
    """All cases of ``domain`` in ``split``, sorted by (cohort, series, target date, lead).

    Args:
        domain: ``"electricity"`` or ``"cycle_hire"``.
        split: ``"train"``, ``"dev"``, ``"test"`` or ``"sealed"`` (:data:`SPLIT_DOC`).

    Raises:
        ValueError: unknown domain or split.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    series = load_series(domain)
    out: list[Case] = []
    if split == "train":
        cutoff = _first_eval_window_start(domain)
        first = min(s.start_hour for s in series.values())
        d0 = (datetime(1970, 1, 1) + timedelta(hours=first)).date()
        days = []
        while target_start_hour(domain, d0) + TARGET_HOURS <= cutoff:
            days.append(d0)
            d0 += timedelta(days=1)
        starts = np.array([target_start_hour(domain, d) for d in days], dtype=np.int64)
        for sid in sorted(series):
            s = series[sid]
            for lead in LEADS:
                ok = _complete_mask(s, starts - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS, HISTORY_HOURS)
                ok &= _complete_mask(s, starts, TARGET_HOURS)
                for i in np.flatnonzero(ok):
                    # completeness is checked above (values are finite and >= 0 since load);
                    # the remaining filters (scale > 0, inactive days) run per case
                    _maybe_add(out, domain, s, days[i], lead, split, f"{domain}-train", quick=True)
    else:
        cal = _calendar(domain, split)
        for sid in _eval_series(domain):
            for d, lead in cal.pairs():
                _maybe_add(out, domain, series[sid], d, lead, split, cal.cohort_of_month[d.month])
    out.sort(key=lambda c: (c.cohort, c.series_id, c.target_date, c.lead))
    return tuple(out)


def _complete_mask(s: Series, starts: np.ndarray, n: int) -> np.ndarray:
    """Vectorised :meth:`Series.is_complete` for many window starts."""
    i = starts - s.start_hour
    inside = (i >= 0) & (i + n <= len(s.values))
    ic = np.clip(i, 0, len(s.values) - n)
    return inside & ((s._valid_cumsum[ic + n] - s._valid_cumsum[ic]) == n)


def _maybe_add(out: list, domain: str, s: Series, d: date, lead: str, split: str, cohort: str,
               quick: bool = False) -> None:
    start = target_start_hour(domain, d)
    if quick and domain == "electricity":
        ok = s.window(start - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS, HISTORY_HOURS).sum() > 0
    else:
        ok = case_quality(s, start, lead) is None
    if ok:
        out.append(Case(make_case_id(domain, s.series_id, d, lead), domain, s, lead, d, start, split, cohort))


@lru_cache(maxsize=None)
def _index(domain: str, split: str) -> dict[str, Case]:
    return {c.case_id: c for c in build_cases(domain, split)}


def get_case(case_id: str, domain: str | None = None, split: str | None = None) -> Case:
    """Look a case up by id (searching ``split`` or all splits of its domain).

    Raises:
        ValueError: malformed id, other domain than requested, or no such case (e.g. its window
            has a missing hour, or the date is in no split).
    """
    dom, sid, d, lead = parse_case_id(case_id)
    if domain is not None and dom != domain:
        raise ValueError(f"case {case_id!r} belongs to domain {dom!r}, not {domain!r}")
    for sp in ([split] if split else SPLITS):
        case = _index(dom, sp).get(case_id)
        if case is not None:
            return case
    where = f"split {split!r}" if split else "any split"
    raise ValueError(
        f"case {case_id!r} is not in {where} of {dom}: either the date is not in the split calendar "
        "or its window has a missing hour (see `fwgym cases`)"
    )
