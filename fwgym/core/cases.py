"""Benchmark cases (one case = one episode) and the temporal splits (DESIGN §2), by the rules of each
domain's spec (:class:`fwgym.domains.Domain`).

A case is identified by (domain, series, target date, lead):

* ``target_start``: local midnight of the target date in the domain's ``time_zone`` (electricity: UTC;
  cycle hire: Europe/London, DST-aware).
* ``as_of`` (decision time) = ``target_start - lead_days x 24 h`` (day-ahead 1, week-ahead 7).
* visible history: 336 consecutive hours ending at ``last_visible = as_of - 3 h`` (hours
  ``as_of - 2 h`` and ``as_of - 1 h`` are never visible). Forecast step 1 = ``last_visible + 1 h``,
  so the 24 target hours are steps 27..50 (day-ahead) or 171..194 (week-ahead).
* ``scale`` = mean of the visible history (must be > 0).

Quality filters: every history and target hour present, finite and >= 0; scale > 0; then the domain's
own rules (cycle hire: no complete local day with zero departures inside the history). Gaps are never
imputed: such cases are skipped.

Splits are by date and temporal: the evaluation splits (dev, test, sealed) are the domain's calendar, whose
cohorts are the aggregation's groups; every train window ends before the first dev, test or sealed window
begins. See :func:`split_doc` for the calendars.

The ``sealed`` split is for agents with memory (DESIGN §11): its windows come from the held-back period of the test
split, with its cohorts and weights, and no case's target hour lies in the visible history (or in the
4-week window before it whose statistics the context text quotes) of any case of the split, of any series of its
domain, so no prompt of the split hands over the answer of another of its cases. The test split keeps the
protocol's overlapping windows (about 80 % of its targets lie inside another test case's history). Its calendar
(lead-specific dates: the most cases the data allows, found by an integer program in
``benchmarks/sealed_split.py``) is each domain's spec's; ``tests/core/test_sealed.py`` checks it by brute force.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import cached_property, lru_cache
from typing import TypedDict
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.core.contract import TARGET_HOURS, shortage_weights
from fwgym.core.series import Series, datetime_to_hour, hour_to_iso, load_series
from fwgym.domains import DOMAINS, Domain, domain_of_prefix, get_domain
from fwgym.domains.spec import CohortDates

__all__ = ["HISTORY_HOURS", "GAP_HOURS", "LEADS", "HORIZONS", "TRAIN_SPLIT", "DEV_SPLIT", "TEST_SPLIT", "TRAINING_SPLITS",
           "SEALED_SPLIT", "SPLITS",
           "CHART_HISTORY_HOURS", "SPLIT_DOC", "split_doc", "target_start_hour", "Case", "CaseSummary", "make_case_id",
           "parse_case_id", "case_quality", "eval_series", "busiest_stations", "build_cases", "get_case"]

HISTORY_HOURS = 336
GAP_HOURS = 2  #: hours between the last visible hour and as_of (as_of-2h, as_of-1h are never visible)
LEADS: dict[str, int] = {"day_ahead": 1, "week_ahead": 7}
#: steps from the first forecast step needed to cover the target: 50 (day-ahead), 194 (week-ahead)
HORIZONS: dict[str, int] = {lead: 24 * days + GAP_HOURS + 1 + TARGET_HOURS - 1 for lead, days in LEADS.items()}
TRAIN_SPLIT, DEV_SPLIT, TEST_SPLIT, SEALED_SPLIT = "train", "dev", "test", "sealed"
SPLITS: tuple[str, ...] = (TRAIN_SPLIT, DEV_SPLIT, TEST_SPLIT, SEALED_SPLIT)
#: the splits a policy may be trained and selected on; the others are held out (reported once, through fwgym evaluate)
TRAINING_SPLITS: tuple[str, ...] = (TRAIN_SPLIT, DEV_SPLIT)
#: hours of visible history an episode chart shows by default (one week of the 336 visible)
CHART_HISTORY_HOURS = 168


def _eval_splits(spec: Domain) -> tuple[str, ...]:
    """The domain's evaluation splits that fwgym plays (its calendar's, among :data:`SPLITS`)."""
    return tuple(s for s in SPLITS if s != TRAIN_SPLIT and s in spec.calendars)


def _last_train_day(spec: Domain) -> date:
    cutoff = _first_eval_window_start(spec.name)
    d = min(d for s in _eval_splits(spec) for d in spec.split_dates(s))
    while target_start_hour(spec.name, d) + TARGET_HOURS > cutoff:
        d -= timedelta(days=1)
    return d


def _dates_text(dates: CohortDates) -> str:
    """Dates by month (``"Feb 2024 3, 11, 19, 27"``), or per lead when the cohort's dates are lead-specific."""
    if not isinstance(dates, tuple):
        return "; ".join(f"{lead.replace('_', '-')} {_dates_text(ds)}" for lead, ds in dates.items())
    by_month: dict[tuple[int, int], list[int]] = {}
    for d in sorted(dates):
        by_month.setdefault((d.year, d.month), []).append(d.day)
    return ", ".join(f"{date(y, m, 1):%b %Y} {' '.join(str(x) for x in days)}" for (y, m), days in by_month.items())


_SPLIT_NOTES = {SEALED_SPLIT: " (no target hour inside a prompt window of another case of the domain; the most cases "
                              "the data allows: benchmarks/sealed_split.py)"}


def split_doc(domains: tuple[str, ...] | None = None) -> str:
    """The split calendars of ``domains`` (default: the protocol's, :data:`fwgym.domains.DOMAINS`) in words,
    one block per domain: its note, each evaluation split's cohorts and target days, the train rule."""
    lines = []
    for name in DOMAINS if domains is None else domains:
        spec = get_domain(name)
        lines.append(f"{name.replace('_', ' ')} ({spec.calendar_note or spec.title}; evaluated: "
                     f"{spec.eval_series.describe(spec.quantity)})")
        for split in _eval_splits(spec):
            parts = [f"{cohort}: {_dates_text(ds)}" for cohort, ds in spec.calendars[split].items()]
            lines.append(f"  {split:6s}: target days " + "; ".join(parts) + _SPLIT_NOTES.get(split, ""))
        lines.append(f"  train : every target day whose window ends before the first {'/'.join(_eval_splits(spec))} "
                     f"window begins (last train target day {_last_train_day(spec).isoformat()}; cohort {name}-train)")
    return "\n".join(lines) + "\n"


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@lru_cache(maxsize=None)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def target_start_hour(domain: str, target_date: date) -> int:
    """Epoch hour of the target start: local midnight of ``target_date`` in the domain's ``time_zone``
    (00:00 UTC for electricity, London midnight for cycle hire).

    Raises:
        ValueError: unknown domain.
    """
    return _target_start(get_domain(domain), target_date)


@lru_cache(maxsize=1 << 16)
def _target_start(spec: Domain, target_date: date) -> int:
    tz = spec.time_zone
    local = datetime(target_date.year, target_date.month, target_date.day,
                     tzinfo=timezone.utc if tz == "UTC" else _zone(tz))
    return datetime_to_hour(local.astimezone(timezone.utc))


_SHORTAGE: tuple[np.ndarray, ...] = tuple(_read_only(shortage_weights(d)) for d in range(7))


class CaseSummary(TypedDict):
    """:meth:`Case.summary`: what a case says of itself before its end (JSON-safe; no value at or after the cut-off).

    Times are ISO 8601 UTC hour starts (``target_end`` exclusive); ``horizon`` and ``target_steps`` count
    forecast steps after the last visible hour; ``scale`` is the mean of the visible history (raw units).
    """

    case_id: str
    domain: str
    series_id: str
    series_name: str
    unit: str
    lead: str
    as_of: str
    last_visible: str
    target_start: str
    target_end: str
    horizon: int
    target_steps: list[int]
    scale: float
    split: str
    cohort: str


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

    def summary(self) -> CaseSummary:
        """JSON-safe description without any value at or after the cut-off (:class:`CaseSummary`)."""
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
    """Readable id embedding the TARGET date and the domain's id prefix, e.g. ``elec-ISNE-2024-07-25-day_ahead``."""
    return f"{get_domain(domain).id_prefix}-{series_id}-{target_date.isoformat()}-{lead}"


_ID_RE = re.compile(r"^([a-z][a-z0-9]*)-([A-Za-z0-9_]+)-(\d{4}-\d{2}-\d{2})-(day_ahead|week_ahead)$")


def parse_case_id(case_id: str) -> tuple[str, str, date, str]:
    """Inverse of :func:`make_case_id`: ``(domain, series_id, target_date, lead)``.

    Raises:
        ValueError: the id is not of the form ``<prefix>-<series>-<YYYY-MM-DD>-<day_ahead|week_ahead>`` with the
            id prefix of a registered domain (``elec``, ``cycle``, ...).
    """
    m = _ID_RE.fullmatch(case_id) if isinstance(case_id, str) else None
    spec = domain_of_prefix(m.group(1)) if m else None
    if not m or spec is None:
        raise ValueError(
            f"malformed case id {case_id!r}; expected e.g. 'elec-ISNE-2024-07-25-day_ahead' or 'cycle-191-2015-10-01-week_ahead'"
        )
    try:
        d = date.fromisoformat(m.group(3))
    except ValueError as exc:
        raise ValueError(f"malformed case id {case_id!r}: {exc}") from exc
    return spec.name, m.group(2), d, m.group(4)


def case_quality(series: Series, target_start: int, lead: str) -> str | None:
    """Return ``None`` when the case passes every quality filter (the common ones, then the domain's
    :attr:`~fwgym.domains.Domain.quality_rules`), else the reason it is skipped."""
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
    spec = get_domain(series.domain)
    for rule in spec.quality_rules:
        if rule.rejects(hist, hist_start, _zone(spec.time_zone)):
            return rule.reason
    return None


def _window_start(domain: str, d: date, lead: str) -> int:
    return target_start_hour(domain, d) - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS


def _first_eval_window_start(domain: str) -> int:
    spec = get_domain(domain)
    return min(_window_start(domain, d, "week_ahead") for s in spec.calendars for d in spec.split_dates(s))


def eval_series(domain: str) -> tuple[str, ...]:
    """The series the domain's evaluation splits use (its :attr:`~fwgym.domains.Domain.eval_series` applied
    to its series and the first evaluation window), sorted by id (numerically when every id is a number).

    Raises:
        ValueError: unknown domain.
    """
    return _eval_series(get_domain(domain))


@lru_cache(maxsize=None)
def _eval_series(spec: Domain) -> tuple[str, ...]:
    ids = spec.eval_series.select(load_series(spec.name), _first_eval_window_start(spec.name))
    return tuple(sorted(ids, key=int) if all(i.isdigit() for i in ids) else sorted(ids))


@lru_cache(maxsize=None)
def busiest_stations(n: int = 20) -> tuple[str, ...]:
    """The ``n`` cycle-hire stations with most departures before the first dev/test window
    (ties broken by lower numeric id), in that order (:class:`fwgym.domains.BusiestSeries`)."""
    from fwgym.domains import BusiestSeries

    return BusiestSeries(n).select(load_series("cycle_hire"), _first_eval_window_start("cycle_hire"))


def build_cases(domain: str, split: str) -> tuple[Case, ...]:
    """All cases of ``domain`` in ``split``, sorted by (cohort, series, target date, lead).

    Args:
        domain: a registered domain (:func:`fwgym.domains.domain_names`).
        split: ``"train"``, ``"dev"``, ``"test"`` or ``"sealed"`` (:data:`SPLITS`; the domain's calendar names
            the evaluation splits it has).

    Raises:
        ValueError: unknown domain or split, or a split the domain has no calendar for.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    return _build_cases(get_domain(domain), split)


@lru_cache(maxsize=None)
def _build_cases(spec: Domain, split: str) -> tuple[Case, ...]:
    domain = spec.name
    series = load_series(domain)
    out: list[Case] = []
    if split == TRAIN_SPLIT:
        cutoff = _first_eval_window_start(domain)
        first = min(s.start_hour for s in series.values())
        d0 = (datetime(1970, 1, 1) + timedelta(hours=first)).date()
        days = []
        while target_start_hour(domain, d0) + TARGET_HOURS <= cutoff:
            days.append(d0)
            d0 += timedelta(days=1)
        starts = np.array([target_start_hour(domain, d) for d in days], dtype=np.int64)
        quick = not spec.quality_rules
        for sid in sorted(series):
            s = series[sid]
            for lead in LEADS:
                ok = _complete_mask(s, starts - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS, HISTORY_HOURS)
                ok &= _complete_mask(s, starts, TARGET_HOURS)
                for i in np.flatnonzero(ok):
                    # completeness is checked above (values are finite and >= 0 since load);
                    # the remaining filters (scale > 0, the domain's rules) run per case
                    _maybe_add(out, domain, s, days[i], lead, split, f"{domain}-train", quick=quick)
    else:
        pairs = spec.calendar_pairs(split, tuple(LEADS))
        for sid in eval_series(domain):
            for cohort, d, lead in pairs:
                _maybe_add(out, domain, series[sid], d, lead, split, cohort)
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
    if quick:  # complete, finite and >= 0 are known; no rule of the domain's own: only scale > 0 is left
        ok = s.window(start - 24 * LEADS[lead] - GAP_HOURS - HISTORY_HOURS, HISTORY_HOURS).sum() > 0
    else:
        ok = case_quality(s, start, lead) is None
    if ok:
        out.append(Case(make_case_id(domain, s.series_id, d, lead), domain, s, lead, d, start, split, cohort))


def _index(domain: str, split: str) -> dict[str, Case]:
    return _spec_index(get_domain(domain), split)


@lru_cache(maxsize=None)
def _spec_index(spec: Domain, split: str) -> dict[str, Case]:
    return {c.case_id: c for c in build_cases(spec.name, split)}


def get_case(case_id: str, domain: str | None = None, split: str | None = None) -> Case:
    """Look a case up by id (searching ``split`` or all splits of its domain).

    Raises:
        ValueError: malformed id, other domain than requested, or no such case (e.g. its window
            has a missing hour, or the date is in no split).
    """
    dom, sid, d, lead = parse_case_id(case_id)
    if domain is not None and dom != domain:
        raise ValueError(f"case {case_id!r} belongs to domain {dom!r}, not {domain!r}")
    spec = get_domain(dom)
    for sp in ([split] if split else [s for s in SPLITS if s == TRAIN_SPLIT or s in spec.calendars]):
        case = _index(dom, sp).get(case_id)
        if case is not None:
            return case
    where = f"split {split!r}" if split else "any split"
    raise ValueError(
        f"case {case_id!r} is not in {where} of {dom}: either the date is not in the split calendar "
        "or its window has a missing hour (see `fwgym cases`)"
    )


#: the protocol domains' split calendars in words (``fwgym cases -v``; :func:`split_doc` for others)
SPLIT_DOC = split_doc()
