"""Context scenarios (Context is Key, Williams et al. 2024): an announced event that changes the real target.

A :class:`Scenario` is a deterministic (seeded by case id and seed) transformation of a case's realised
24-hour target plus the operator's note that announces it, a region of interest (RoI, the hours the
note names) and optional bounds. The note states the event and its expected size, never realised
values. Families:

electricity (hours in the balancing authority's local time, with UTC in brackets)
  * ``temperature_advisory``: a heat advisory (May-Sep) or cold snap (Oct-Apr) raises demand by a
    stated percentage over stated hours;
  * ``industrial_outage``: a large customer of a stated size (MW) is offline over stated hours;
  * ``transmission_limit``: served load is capped at a stated MW over stated hours (upper bound).
cycle hire (London local time)
  * ``station_closure``: the station is closed over stated hours: zero departures (upper bound 0);
  * ``event_surge``: an event nearby ends at a stated time: departures multiply by a stated factor
    for the next hours;
  * ``heavy_rain``: heavy rain over stated hours: departures fall to a stated share of normal.

Cycle-hire values stay non-negative integers; electricity values stay >= 0.

A domain lists its families by name (:attr:`fwgym.domains.Domain.scenario_families`; :func:`families`
reads them). A domain outside fwgym may use its own families: :func:`register_scenario_family` adds one
(a function drawing the scenario of a case and one applying it to a target).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping
from zoneinfo import ZoneInfo

import numpy as np

from fwgym.core.cases import Case
from fwgym.core.contract import TARGET_HOURS
from fwgym.core.series import hour_to_datetime
from fwgym.domains import BUILTIN_DOMAINS, get_domain
from fwgym.domains.electricity import ba_zones

__all__ = ["BUILTIN_FAMILIES", "families", "fits", "ba_zones", "local_zone", "local_hours", "Scenario", "ScenarioFamily",
           "register_scenario_family", "make_scenario"]

#: the families of fwgym's domains (drawn and applied below)
BUILTIN_FAMILIES: tuple[str, ...] = ("temperature_advisory", "industrial_outage", "transmission_limit",
                                     "station_closure", "event_surge", "heavy_rain")


def families(domain: str) -> tuple[str, ...]:
    """The scenario families of a domain (its :attr:`~fwgym.domains.Domain.scenario_families`).

    Raises:
        ValueError: unknown domain.
    """
    return get_domain(domain).scenario_families


class _Families(Mapping[str, tuple[str, ...]]):
    """``{domain: its scenario families}`` of the registered domains, read through the registry."""

    def __getitem__(self, domain: str) -> tuple[str, ...]:
        try:
            return families(domain)
        except ValueError:
            raise KeyError(domain) from None

    def __iter__(self):
        from fwgym.domains import domain_names

        return iter(domain_names())

    def __len__(self) -> int:
        return len(list(iter(self)))


#: ``{domain: family names}`` of every registered domain (a read-only view of the domain specs)
FAMILIES: Mapping[str, tuple[str, ...]] = _Families()


@dataclass(frozen=True)
class ScenarioFamily:
    """A scenario family outside fwgym's own (:func:`register_scenario_family`).

    Attributes:
        name: the family's name (what a domain's ``scenario_families`` lists and a record's ``scenario`` holds).
        draw: ``(case, rng) -> Scenario``: the case's scenario of this family (``rng`` is a NumPy generator
            seeded by the case id and the scenario seed; use only it for randomness, and only the case's
            visible history for magnitudes); the scenario's ``family`` must be ``name``.
        apply: ``(scenario, target) -> target``: the scenario's target (float64 (24,)) from the realised one.
    """

    name: str
    draw: Callable[[Case, np.random.Generator], "Scenario"]
    apply: Callable[["Scenario", np.ndarray], np.ndarray]


_PLUGIN_FAMILIES: dict[str, ScenarioFamily] = {}


def register_scenario_family(family: ScenarioFamily, *, replace: bool = False) -> ScenarioFamily:
    """Add a scenario family a domain may list (returns it).

    Raises:
        ValueError: the name is a built-in family's, or registered already (unless ``replace``).
    """
    if family.name in BUILTIN_FAMILIES:
        raise ValueError(f"scenario family {family.name!r} is built in")
    if family.name in _PLUGIN_FAMILIES and not replace and _PLUGIN_FAMILIES[family.name] is not family:
        raise ValueError(f"scenario family {family.name!r} is already registered (replace=True replaces it)")
    _PLUGIN_FAMILIES[family.name] = family
    return family


def local_zone(case: Case) -> ZoneInfo:
    """Local time zone of the case's series (:meth:`fwgym.domains.Domain.zone_of`: the BA's zone for
    electricity, Europe/London for cycle hire)."""
    return ZoneInfo(get_domain(case.domain).zone_of(case.series_id))


def local_hours(case: Case) -> np.ndarray:
    """Local clock hour (0..23) of each of the 24 target hours, int (24,).

    When the UTC offset is the same at the first and the last target hour (every day but the two
    clock changes of a year) the hours are the first one plus 0..23 (mod 24); otherwise each hour
    is converted on its own."""
    tz = local_zone(case)
    hours = case.target_hours
    first = hour_to_datetime(int(hours[0])).astimezone(tz)
    last = hour_to_datetime(int(hours[-1])).astimezone(tz)
    if first.utcoffset() == last.utcoffset() and int(hours[-1]) - int(hours[0]) == len(hours) - 1:
        return (first.hour + np.arange(len(hours), dtype=np.int64)) % 24
    return np.array([hour_to_datetime(int(h)).astimezone(tz).hour for h in hours], dtype=np.int64)


@dataclass(frozen=True)
class Scenario:
    """An announced event and its effect on the target.

    Attributes:
        family: family name (a domain's :attr:`~fwgym.domains.Domain.scenario_families`).
        text: the operator's note shown to agents.
        roi: bool (24,), the target hours the note names.
        lower, upper: float (24,) bounds (NaN where unbounded) or None.
        params: the family's parameters (factor, MW, cap, ...) for analysis; not shown to agents.
    """

    family: str
    text: str
    roi: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    params: dict = field(default_factory=dict)

    def apply(self, target: np.ndarray) -> np.ndarray:
        """The scenario's target: the realised target transformed by the event (float64 (24,))."""
        y = np.array(target, dtype=np.float64)
        p, m = self.params, self.roi
        if self.family == "temperature_advisory":
            y[m] *= 1.0 + p["pct"] / 100.0
        elif self.family == "industrial_outage":
            y[m] = np.maximum(y[m] - p["mw"], 0.0)
        elif self.family == "transmission_limit":
            y[m] = np.minimum(y[m], p["cap"])
        elif self.family == "station_closure":
            y[m] = 0.0
        elif self.family in ("event_surge", "heavy_rain"):
            y[m] = np.rint(y[m] * p["factor"])
        elif self.family in _PLUGIN_FAMILIES:
            return np.asarray(_PLUGIN_FAMILIES[self.family].apply(self, y), dtype=np.float64)
        else:
            raise ValueError(f"unknown scenario family {self.family!r}")
        return y


def _fmt_hour(h: int) -> str:
    return f"{h % 24:02d}:00"


def _window(case: Case, rng: np.random.Generator, starts: tuple[int, int], lengths: tuple[int, int]) -> tuple[np.ndarray, int, int]:
    """A contiguous block of target hours starting at a local clock hour drawn from ``starts``.

    Returns ``(roi mask, local start hour, local end hour)`` where the end is the local hour just after
    the block (the block is cut at the end of the target window).
    """
    lh = local_hours(case)
    start = int(rng.integers(starts[0], starts[1] + 1))
    length = int(rng.integers(lengths[0], lengths[1] + 1))
    hits = np.flatnonzero(lh == start)
    i0 = int(hits[0]) if len(hits) else int(np.argmin(np.abs(lh - start)))
    i1 = min(i0 + length, TARGET_HOURS)
    roi = np.zeros(TARGET_HOURS, dtype=bool)
    roi[i0:i1] = True
    return roi, int(lh[i0]), int(lh[i1 - 1] + 1) % 24


def _utc_span(case: Case, roi: np.ndarray) -> str:
    idx = np.flatnonzero(roi)
    a, b = case.target_hours[idx[0]], case.target_hours[idx[-1]] + 1
    fa, fb = hour_to_datetime(a), hour_to_datetime(b)
    return f"{fa:%H:%M}-{fb:%H:%M} UTC"


def _register_domain_plugins(domain: str) -> None:
    """Register the families a domain brings itself (:attr:`fwgym.domains.Domain.scenario_plugins`), once."""
    for plugin in get_domain(domain).scenario_plugins:
        if _PLUGIN_FAMILIES.get(plugin.name) is not plugin:
            register_scenario_family(plugin, replace=True)


def fits(case: Case, family: str) -> bool:
    """Whether scenario ``family`` fits ``case`` (a domain's own family may fit only some cases, e.g. a cruise ship
    only in the cruise season; built-in and registered families without ``eligible`` fit every case)."""
    _register_domain_plugins(case.domain)
    return _eligible(family, case)


def _eligible(family: str, case: Case) -> bool:
    """Whether a family fits the case: built-in and registered families without ``eligible`` always do."""
    plugin = _PLUGIN_FAMILIES.get(family) if family not in BUILTIN_FAMILIES else None
    check = getattr(plugin, "eligible", None)
    return bool(check(case)) if check is not None else True


def make_scenario(case: Case, seed: int = 0, family: str | None = None) -> Scenario:
    """The scenario of ``case`` (deterministic in ``case.case_id`` and ``seed``).

    Args:
        case: the case (its visible history sets magnitudes such as caps; never its target).
        seed: scenario seed.
        family: force a family (default: chosen from the case id and seed).

    Raises:
        ValueError: unknown family for the case's domain.
    """
    fams = families(case.domain)
    if not fams:
        raise ValueError(f"domain {case.domain!r} has no scenario families (Domain.scenario_families): it has no "
                         "context or forecast suite")
    _register_domain_plugins(case.domain)
    fitting = tuple(f for f in fams if _eligible(f, case))
    key = zlib.crc32(f"{case.case_id}|{seed}".encode())
    rng = np.random.default_rng(key)
    fam = family or fitting[key % len(fitting)]
    if fam not in fams:
        raise ValueError(f"unknown scenario family {fam!r} for {case.domain}; expected one of {list(fams)}")
    if fam not in fitting:
        raise ValueError(f"scenario family {fam!r} does not fit case {case.case_id} (fitting: {list(fitting)})")
    plugin = _PLUGIN_FAMILIES.get(fam) if fam not in BUILTIN_FAMILIES else None
    if plugin is not None:
        sc = plugin.draw(case, rng)
        if not isinstance(sc, Scenario):  # a domain's own family returns the parts (fwgym.domains.ScenarioPlugin)
            sc = Scenario(fam, sc.text, np.asarray(sc.roi, dtype=bool), sc.lower, sc.upper, dict(sc.params))
        if sc.family != fam:
            raise ValueError(f"scenario family {fam!r}: draw() must return a Scenario of family {fam!r}")
        return sc
    if fam not in BUILTIN_FAMILIES:
        raise ValueError(f"scenario family {fam!r} of domain {case.domain!r} is not registered "
                         "(fwgym.context.scenarios.register_scenario_family)")
    owner = next((d for d in BUILTIN_DOMAINS.values() if fam in d.scenario_families), None)
    if owner is None or owner.name != case.domain:
        raise ValueError(f"scenario family {fam!r} is written for the {owner.name if owner else '?'} series (its notes "
                         f"name their places and data); domain {case.domain!r} needs families of its own "
                         "(fwgym.context.scenarios.register_scenario_family)")
    date = case.target_date.strftime("%A %d %B %Y")
    if case.domain == "electricity":
        region = ba_zones()[case.series_id][1]
        if fam == "temperature_advisory":
            summer = case.target_date.month in (5, 6, 7, 8, 9)
            roi, a, b = _window(case, rng, (12, 15) if summer else (6, 8), (4, 6))
            pct = int(rng.choice([8, 10, 12, 15, 18, 20]))
            what = ("The National Weather Service has issued a heat advisory" if summer
                    else "An arctic cold front is forecast to reach the area")
            load = "air-conditioning" if summer else "heating"
            text = (f"Operator note: {what} for {region} on {date}. From {_fmt_hour(a)} to {_fmt_hour(b)} local time "
                    f"({_utc_span(case, roi)}) we expect {load} load to push demand about {pct}% above what it would "
                    f"normally be at those hours.")
            return Scenario(fam, text, roi, params={"pct": pct})
        if fam == "industrial_outage":
            roi, a, b = _window(case, rng, (6, 14), (4, 8))
            mw = float(np.round(case.scale * rng.uniform(0.04, 0.10), -1 if case.scale > 2000 else 0))
            mw = max(mw, 1.0)
            text = (f"Operator note: a large industrial customer in {region} (about {mw:.0f} MW of steady load) "
                    f"will be offline for planned maintenance on {date} from {_fmt_hour(a)} to {_fmt_hour(b)} "
                    f"local time ({_utc_span(case, roi)}); demand will be lower by that amount during the outage.")
            return Scenario(fam, text, roi, params={"mw": mw})
        # transmission_limit: cap below the typical level of those hours in the visible history
        roi, a, b = _window(case, rng, (13, 17), (3, 5))
        hist = np.asarray(case.history).reshape(14, 24)  # 14 days x 24 hours, aligned to the history start
        offset = (case.target_hours[roi] - case.history_start) % 24
        typical = float(hist[:, offset].mean())
        cap = float(np.round(typical * rng.uniform(0.88, 0.97), -1 if typical > 2000 else 0))
        text = (f"Operator note: because of a transmission constraint into {region}, no more than {cap:.0f} MW "
                f"can be served on {date} between {_fmt_hour(a)} and {_fmt_hour(b)} local time "
                f"({_utc_span(case, roi)}); any load above that will be curtailed.")
        upper = np.where(roi, cap, np.nan)
        return Scenario(fam, text, roi, upper=upper, params={"cap": cap})
    station = case.series.name
    if fam == "station_closure":
        roi, a, b = _window(case, rng, (7, 15), (3, 6))
        text = (f"Maintenance note: the {station} docking station will be closed for dock repairs on {date} "
                f"from {_fmt_hour(a)} to {_fmt_hour(b)} ({_utc_span(case, roi)}); no bikes can be hired there "
                f"while it is closed.")
        return Scenario(fam, text, roi, upper=np.where(roi, 0.0, np.nan), params={"factor": 0.0})
    if fam == "event_surge":
        roi, end_hour, _ = _window(case, rng, (16, 21), (2, 3))
        n = int(roi.sum())
        factor = float(rng.choice([2.0, 2.5, 3.0]))
        event = str(rng.choice(["A concert", "A football match", "An open-air festival", "A large conference"]))
        text = (f"Events note: {event} near the {station} docking station ends at {_fmt_hour(end_hour)} on {date}. "
                f"For the {n} hours after it ends ({_utc_span(case, roi)}) we expect about {factor:g} times the "
                f"usual number of hires from this station.")
        return Scenario(fam, text, roi, params={"factor": factor})
    roi, a, b = _window(case, rng, (7, 14), (3, 6))
    pct = int(rng.choice([30, 40, 50, 60]))
    text = (f"Weather note: the Met Office forecasts heavy rain over central London on {date} from {_fmt_hour(a)} "
            f"to {_fmt_hour(b)} ({_utc_span(case, roi)}). On such days hires at {station} typically fall to "
            f"about {pct}% of normal during the rain.")
    return Scenario(fam, text, roi, params={"factor": pct / 100.0})
