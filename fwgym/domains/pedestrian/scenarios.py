"""Scenario families of the pedestrian domain: announced events that change a case's real 24-hour target
(Context is Key, Williams et al. 2024), with notes written many ways (``notes.json``).

Families (hours in Auckland local time; the target window starts at local midnight):

* ``event_crowd`` (c_f): a concert or sports event at a city-centre venue ends at 20:00-22:00; for the next
  2-3 hours footfall is a stated multiple (1.5x-3x) of normal.
* ``street_closure`` (c_f): works close the footpath at the counter for 3-6 daytime hours: zero counts
  (an upper bound of 0 over those hours).
* ``rain_warning`` (c_f): a heavy-rain warning over 3-6 daytime hours: footfall falls to a stated share (60-80 %).
* ``public_holiday`` (c_f, c_h; weekday targets that are not already holidays): a one-off holiday: between
  07:00/08:00 and 18:00-20:00 each hour is the normal count times that local hour's ratio of the most
  recent whole Sunday to the most recent whole day of the target's weekday in the visible history (counts
  + 1 in both, so an empty hour gives a finite ratio) -- a pattern the reader must find in the history.
* ``cruise_ship`` (c_f, c_causal; October-April, the cruise season): N passengers are ashore from 08:00/09:00
  to 16:00-18:00 and a stated share of them (by the counter's part of town) passes the counter once, evenly
  over those hours: ``round(N x share / hours)`` people are added to each of them.

Every note may carry a distractor sentence (an event elsewhere or on another day: no effect). Notes of the
test and sealed splits use only held-out skeletons (``"heldout": true``), train and dev only the others.
Counts stay non-negative integers.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fwgym.domains.pedestrian.source import AUCKLAND, SENSORS, hour_to_datetime, local_midnight_hour

__all__ = ["FAMILIES", "HELDOUT_SPLITS", "NOTES_PATH", "notes", "LocalTime", "Count", "Factor", "Share", "Ratio", "Passengers",
           "PedestrianScenario", "apply_effect", "holidays_on", "eligible_families", "draw", "PedestrianFamily", "PLUGINS",
           "make_scenario"]

FAMILIES: tuple[str, ...] = ("event_crowd", "street_closure", "rain_warning", "public_holiday", "cruise_ship")
#: splits whose notes use the held-out skeletons only
HELDOUT_SPLITS: frozenset[str] = frozenset({"test", "sealed"})
NOTES_PATH = Path(__file__).resolve().parent / "notes.json"
_TARGET_HOURS = 24
_CRUISE_MONTHS = frozenset({10, 11, 12, 1, 2, 3, 4})

_NUM_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


@lru_cache(maxsize=1)
def notes() -> dict[str, Any]:
    """The parsed ``notes.json`` (families -> context types and skeletons; distractors)."""
    return json.loads(NOTES_PATH.read_text(encoding="utf-8"))


class LocalTime:
    """A local clock hour 0..24 that formats as ``24`` (``"19:00"``), ``12`` (``"7 pm"``), ``ampm`` (``"7pm"``)
    or ``words`` (``"seven in the evening"``); 0 and 24 are midnight (``"24:00"`` as an end in ``24``), 12 is noon."""

    def __init__(self, hour: int):
        self.hour = int(hour)

    def __format__(self, spec: str) -> str:
        h = self.hour
        if spec in ("", "24"):
            return f"{h:02d}:00"
        if h in (0, 24):
            return "midnight"
        if h == 12:
            return "noon"
        if spec in ("12", "ampm"):
            return f"{h % 12}{' ' if spec == '12' else ''}{'am' if h < 12 else 'pm'}"
        if spec == "words":
            part = "in the morning" if h < 12 else "in the afternoon" if h < 18 else "in the evening"
            return f"{_NUM_WORDS[h % 12]} {part}"
        raise ValueError(f"unknown time format {spec!r}")


class Count:
    """A small whole number: ``""`` -> ``"3"``, ``words`` -> ``"three"``."""

    def __init__(self, n: int):
        self.n = int(n)

    def __format__(self, spec: str) -> str:
        if spec == "":
            return str(self.n)
        if spec == "words":
            return _NUM_WORDS[self.n]
        raise ValueError(f"unknown count format {spec!r}")


_FACTOR_WORDS = {1.5: "one and a half times", 2.0: "twice", 2.5: "two and a half times", 3.0: "three times"}


class Factor:
    """A multiple of normal: ``x`` (``"2.5x"``), ``num`` (``"2.5"``), ``words`` (``"two and a half times"``),
    ``pct`` (``"250%"``), ``more`` (``"150% more"``)."""

    def __init__(self, f: float):
        self.f = float(f)

    def __format__(self, spec: str) -> str:
        f = self.f
        if spec == "x":
            return f"{f:g}x"
        if spec in ("num", ""):
            return f"{f:g}"
        if spec == "words":
            return _FACTOR_WORDS[f]
        if spec == "pct":
            return f"{f * 100:.0f}%"
        if spec == "more":
            return f"{(f - 1) * 100:.0f}% more"
        raise ValueError(f"unknown factor format {spec!r}")


_SHARE_WORDS = {0.6: ("three fifths", "two fifths"), 0.7: ("seven tenths", "three tenths"),
                0.75: ("three quarters", "a quarter"), 0.8: ("four fifths", "a fifth")}


class Share:
    """A share of normal: ``pct`` (``"70%"``), ``words`` (``"seven tenths"``), ``fewer`` (``"30% fewer"``),
    ``fewer_words`` (``"three tenths fewer"``), ``cut`` (``"cut by 30 percent"``)."""

    def __init__(self, s: float):
        self.s = float(s)

    def __format__(self, spec: str) -> str:
        s = self.s
        if spec in ("pct", ""):
            return f"{s * 100:.0f}%"
        if spec == "words":
            return _SHARE_WORDS[s][0]
        if spec == "fewer":
            return f"{(1 - s) * 100:.0f}% fewer"
        if spec == "fewer_words":
            return f"{_SHARE_WORDS[s][1]} fewer"
        if spec == "cut":
            return f"cut by {(1 - s) * 100:.0f} percent"
        raise ValueError(f"unknown share format {spec!r}")


class Ratio:
    """One in ``n``: ``words`` (``"one in four"``), ``pct`` (``"25%"``), ``out_of`` (``"one passenger in every four"``)."""

    def __init__(self, n: int):
        self.n = int(n)

    def __format__(self, spec: str) -> str:
        if spec in ("words", ""):
            return f"one in {_NUM_WORDS[self.n] if self.n < len(_NUM_WORDS) else self.n}"
        if spec == "pct":
            return f"{100 / self.n:g}%"
        if spec == "out_of":
            return f"one passenger in every {_NUM_WORDS[self.n] if self.n < len(_NUM_WORDS) else self.n}"
        raise ValueError(f"unknown ratio format {spec!r}")


class Passengers:
    """A passenger count: ``""`` (``"4,200"``), ``k`` (``"4.2 thousand"``)."""

    def __init__(self, n: int):
        self.n = int(n)

    def __format__(self, spec: str) -> str:
        if spec == "":
            return f"{self.n:,}"
        if spec == "k":
            return f"{self.n / 1000:g} thousand"
        raise ValueError(f"unknown passenger format {spec!r}")


@dataclass(frozen=True)
class PedestrianScenario:
    """An announced event and its effect on the target (the parts :mod:`fwgym.context.scenarios` wraps in its
    ``Scenario``: :class:`fwgym.domains.ScenarioPlugin`).

    Attributes:
        family: one of :data:`FAMILIES`. text: the note shown to agents. roi: bool (24,), the hours it names.
        lower, upper: float (24,) bounds (NaN where unbounded) or None.
        params: the effect (``op``: ``scale`` by ``factor``, ``zero``, ``scale_by_hour`` by ``by_hour`` (24,),
            ``add`` ``extra_per_hour``) and its inputs, the CiK ``context_types`` (``c_f``, ``c_h``, ``c_causal``,
            ``distractor``), the skeleton's ``register`` and index ``skeleton`` in ``notes.json`` (for analysis;
            not shown to agents).
    """

    family: str
    text: str
    roi: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    params: dict = field(default_factory=dict)

    @property
    def context_types(self) -> tuple[str, ...]:
        return tuple(self.params.get("context_types", ()))

    @property
    def register(self) -> str:
        return str(self.params.get("register", ""))

    @property
    def skeleton(self) -> int:
        return int(self.params.get("skeleton", -1))

    def apply(self, target: np.ndarray) -> np.ndarray:
        """The scenario's target (float64 (24,), non-negative integers): the realised target transformed."""
        return apply_effect(self, target)


def apply_effect(scenario, target: np.ndarray) -> np.ndarray:
    """The target of a pedestrian scenario (any object with ``roi`` and ``params``; float64 (24,)).

    Raises:
        ValueError: an unknown ``op``.
    """
    y = np.array(target, dtype=np.float64)
    m, p = np.asarray(scenario.roi, dtype=bool), scenario.params
    op = p.get("op")
    if op == "scale":
        y[m] = np.rint(y[m] * float(p["factor"]))
    elif op == "zero":
        y[m] = 0.0
    elif op == "scale_by_hour":
        y[m] = np.rint(y[m] * np.asarray(p["by_hour"], dtype=np.float64)[m])
    elif op == "add":
        y[m] = y[m] + float(p["extra_per_hour"])
    else:
        raise ValueError(f"unknown pedestrian scenario effect {op!r}")
    return y


def _local_hours(target_start: int) -> np.ndarray:
    """Local clock hour of each of the 24 target hours (int (24,))."""
    return np.array([hour_to_datetime(target_start + i).astimezone(AUCKLAND).hour for i in range(_TARGET_HOURS)])


def _roi(lh: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Target hours whose local clock hour is in ``[start, stop)`` (stop 24 = midnight)."""
    return (lh >= start) & (lh < stop)


def _area(series_id: str) -> str:
    return SENSORS[series_id][1] if series_id in SENSORS else "the city centre"


def _street(address: str) -> str:
    words = address.split()
    street = " ".join(w for w in words if not w[0].isdigit())
    return street.replace("K Road", "Karangahape Road").replace(" EW", "").replace(" NS", "")


_VENUES = {
    "the waterfront": (("Spark Arena", "SPK"), ("the Viaduct Events Centre", "VEC")),
    "lower Queen Street": (("Spark Arena", "SPK"), ("the Viaduct Events Centre", "VEC")),
    "the mid-city": (("the Aotea Centre", "AOT"), ("Auckland Town Hall", "ATH")),
    "upper Queen Street": (("The Civic", "CIV"), ("Auckland Town Hall", "ATH"), ("the Aotea Centre", "AOT")),
    "Karangahape Road": (("the Powerstation", "PWR"), ("Auckland Town Hall", "ATH")),
}
_EVENTS = ("a sold-out concert", "a basketball final", "a comedy festival gala", "a symphony concert",
           "a boxing title fight", "a music festival night")
_WORKS = ("water main repairs", "paving renewal", "a crane lift for a building site", "fibre cable installation",
          "stormwater drain works", "a shop-front scaffold installation")
_REASONS = ("a national day of mourning", "a state memorial service", "a national day of celebration",
            "the national team's victory parade")
_SHIPS = ("MS Aurora Pacific", "Southern Star", "Island Voyager", "Coral Meridian", "Pacific Harmony")
_WHARVES = (("Princes Wharf", "PW"), ("Queens Wharf", "QW"))
#: one passenger in n passes the counter, by part of town
_CRUISE_RATIO = {"the waterfront": (4, 5), "lower Queen Street": (3, 4), "the mid-city": (8, 10),
                 "upper Queen Street": (10, 12), "Karangahape Road": (20, 25)}


def _whole_local_days(history_start: int, last_visible: int, weekday: int) -> list[int]:
    """Local midnights (epoch hours) of the whole 24-hour local days with ``weekday`` inside the visible
    history, most recent first."""
    first = hour_to_datetime(history_start).astimezone(AUCKLAND).date()
    last = hour_to_datetime(last_visible).astimezone(AUCKLAND).date()
    out, d = [], last
    while d >= first:
        a, b = local_midnight_hour(d), local_midnight_hour(d + timedelta(days=1))
        if d.weekday() == weekday and a >= history_start and b <= last_visible + 1 and b - a == 24:
            out.append(a)
        d -= timedelta(days=1)
    return out


def _holiday_ratio(case) -> np.ndarray | None:
    """(24,) ratio by local clock hour of the most recent whole Sunday to the most recent whole day of the
    target's weekday in the visible history (counts + 1), or None where either day is missing."""
    sundays = _whole_local_days(case.history_start, case.last_visible, 6)
    same = _whole_local_days(case.history_start, case.last_visible, case.target_date.weekday())
    if not sundays or not same:
        return None
    hist = np.asarray(case.history, dtype=np.float64)
    sun = hist[sundays[0] - case.history_start:][:24]
    wd = hist[same[0] - case.history_start:][:24]
    return (sun + 1.0) / (wd + 1.0)


@lru_cache(maxsize=8)
def _holiday_calendar(year: int):
    import holidays

    return holidays.NZ(subdiv="AUK", years=[year - 1, year, year + 1])


def holidays_on(day: date) -> list[str]:
    """Names of the public holidays in Auckland on ``day`` (national and Auckland Anniversary Day;
    the ``holidays`` package's New Zealand calendar, subdivision AUK)."""
    name = _holiday_calendar(day.year).get(day)
    return [] if name is None else [n.strip() for n in str(name).split(";")]


def eligible_families(case) -> tuple[str, ...]:
    """Families that fit ``case``: cruise ships only in the cruise season (October-April), a one-off public
    holiday only on a weekday that is not already one (with a whole Sunday and weekday in the history)."""
    out = ["event_crowd", "street_closure", "rain_warning"]
    td = case.target_date
    if td.weekday() < 5 and not holidays_on(td) and _holiday_ratio(case) is not None:
        out.append("public_holiday")
    if td.month in _CRUISE_MONTHS:
        out.append("cruise_ship")
    return tuple(out)


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _family_params(fam: str, case, rng: np.random.Generator, lh: np.ndarray) -> tuple[dict, dict, np.ndarray]:
    """``(format fields, params, roi)`` of family ``fam``."""
    area = _area(case.series.series_id)
    if fam == "event_crowd":
        start, n = int(rng.integers(20, 23)), int(rng.integers(2, 4))
        stop = min(start + n, 24)
        factor = float(_pick(rng, (1.5, 2.0, 2.5, 3.0)))
        venue, code = _pick(rng, _VENUES.get(area, _VENUES["the mid-city"]))
        roi = _roi(lh, start, stop)
        fields = {"event": _pick(rng, _EVENTS), "venue": venue, "venue_code": code, "factor": Factor(factor)}
        return fields, {"op": "scale", "factor": factor}, roi
    if fam == "street_closure":
        start, n = int(rng.integers(7, 15)), int(rng.integers(3, 7))
        stop = start + n
        works = _pick(rng, _WORKS)
        roi = _roi(lh, start, stop)
        fields = {"works": works, "works_title": works[0].upper() + works[1:], "street": _street(case.series.name)}
        return fields, {"op": "zero", "factor": 0.0}, roi
    if fam == "rain_warning":
        start, n = int(rng.integers(7, 16)), int(rng.integers(3, 7))
        stop = start + n
        share = float(_pick(rng, (0.6, 0.7, 0.75, 0.8)))
        roi = _roi(lh, start, stop)
        return {"share": Share(share)}, {"op": "scale", "factor": share}, roi
    if fam == "public_holiday":
        start, stop = int(rng.integers(7, 9)), int(rng.integers(18, 21))
        ratio = _holiday_ratio(case)
        roi = _roi(lh, start, stop)
        by_hour = ratio[lh]  # the reference days are whole 24-hour days from local midnight: index = local hour
        fields = {"reason": _pick(rng, _REASONS)}
        return fields, {"op": "scale_by_hour", "ratio": ratio.tolist(), "by_hour": by_hour.tolist()}, roi
    # cruise_ship
    start, stop = int(rng.integers(8, 10)), int(rng.integers(16, 19))
    passengers = int(_pick(rng, (1800, 2400, 3000, 3600, 4200, 4800, 5400)))
    one_in = int(_pick(rng, _CRUISE_RATIO.get(area, (10, 12))))
    roi = _roi(lh, start, stop)
    extra = float(np.rint(passengers / one_in / max(int(roi.sum()), 1)))
    wharf, code = _pick(rng, _WHARVES)
    fields = {"ship": _pick(rng, _SHIPS), "wharf": wharf, "wharf_code": code, "passengers": Passengers(passengers),
              "ratio": Ratio(one_in)}
    return fields, {"op": "add", "passengers": passengers, "one_in": one_in, "extra_per_hour": extra}, roi


def _window_text(fam_fields: dict, case, roi: np.ndarray, lh: np.ndarray) -> dict:
    idx = np.flatnonzero(roi)
    a, b = case.target_start + int(idx[0]), case.target_start + int(idx[-1]) + 1
    start, stop = int(lh[idx[0]]), int(lh[idx[-1]]) + 1
    td: date = case.target_date
    other = td + timedelta(days=int(2 + zlib.crc32(case.case_id.encode()) % 5))
    return {
        **fam_fields,
        "start": LocalTime(start), "stop": LocalTime(stop), "hours": Count(len(idx)),
        "utc": f"{hour_to_datetime(a):%H:%M}-{hour_to_datetime(b):%H:%M} UTC",
        "sensor": case.series.name, "sensor_id": case.series.series_id, "area": _area(case.series.series_id),
        "day": f"{td:%A} {td.day} {td:%B %Y}", "weekday": f"{td:%A}", "weekday_short": f"{td:%a}",
        "date_short": f"{td.day} {td:%b}", "date_iso": td.isoformat(),
        "other_day": f"{other:%A} {other.day} {other:%B}",
    }


def draw(case, fam: str, rng: np.random.Generator) -> PedestrianScenario:
    """The scenario of family ``fam`` for ``case``, drawn with ``rng`` (the note's skeleton from the case's split:
    held-out ones for test and sealed)."""
    lh = _local_hours(case.target_start)
    fam_fields, params, roi = _family_params(fam, case, rng, lh)
    heldout = case.split in HELDOUT_SPLITS
    spec = notes()["families"][fam]
    choices = [i for i, s in enumerate(spec["skeletons"]) if s["heldout"] == heldout]
    k = int(_pick(rng, choices))
    fields = _window_text(fam_fields, case, roi, lh)
    text = spec["skeletons"][k]["text"].format(**fields)
    types = list(spec["context_types"])
    if rng.random() < 1 / 3:
        extra = [d for d in notes()["distractors"] if d["heldout"] == heldout]
        text += " " + _pick(rng, extra)["text"].format(**fields)
        types.append("distractor")
    params.update(context_types=types, register=spec["skeletons"][k]["register"], skeleton=k)
    upper = np.where(roi, 0.0, np.nan) if fam == "street_closure" else None
    return PedestrianScenario(fam, text, roi, None, upper, params)


@dataclass(frozen=True)
class PedestrianFamily:
    """One family as a :class:`fwgym.domains.ScenarioPlugin` (the domain's ``scenario_plugins``)."""

    name: str

    def eligible(self, case) -> bool:
        return self.name in eligible_families(case)

    def draw(self, case, rng: np.random.Generator) -> PedestrianScenario:
        return draw(case, self.name, rng)

    def apply(self, scenario, target: np.ndarray) -> np.ndarray:
        return apply_effect(scenario, target)


#: the domain's scenario plugins, in :data:`FAMILIES` order
PLUGINS: tuple[PedestrianFamily, ...] = tuple(PedestrianFamily(f) for f in FAMILIES)


def make_scenario(case, seed: int = 0, family: str | None = None) -> PedestrianScenario:
    """The scenario of a pedestrian ``case``, as :func:`fwgym.context.scenarios.make_scenario` draws it (the same
    family choice among the eligible ones and the same generator: deterministic in ``case.case_id`` and ``seed``).

    Raises:
        ValueError: ``family`` unknown or not eligible for the case.
    """
    fams = eligible_families(case)
    key = zlib.crc32(f"{case.case_id}|{seed}".encode())
    rng = np.random.default_rng(key)
    fam = family or fams[key % len(fams)]
    if fam not in fams:
        raise ValueError(f"scenario family {fam!r} does not fit case {case.case_id} (eligible: {list(fams)})")
    return draw(case, fam, rng)
