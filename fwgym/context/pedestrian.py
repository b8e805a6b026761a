"""Scenario families of the opt-in ``pedestrian`` domain (Auckland city-centre pedestrian counts,
:mod:`fwgym.domains.pedestrian`): five :class:`~fwgym.context.families.Family` objects, registered for the
domain by :mod:`fwgym.context.scenarios` like fwgym's other families (:data:`PEDESTRIAN_FAMILIES`). Their notes
are written as every other family's (:mod:`fwgym.context.notes`: register frames, span, date and length forms of
the case's writing pool, distractors); the words that name the domain's world (sender, place, distractor and
filler sentences) are the domain's :attr:`~fwgym.domains.Domain.note_text`.

Families (hours in Auckland local time; the target window starts at local midnight):

* ``event_crowd`` (c_f): a concert or sports event at a city-centre venue ends at 20:00-22:00; for the next
  2-3 hours footfall is a stated multiple (1.5x-3x) of normal.
* ``street_closure`` (c_f): works close the footpath at the counter for 3-6 daytime hours: zero counts
  (an upper bound of 0 over those hours).
* ``rain_warning`` (c_f): a heavy-rain warning over 3-6 daytime hours: footfall falls to a stated share (60-80 %).
* ``public_holiday`` (c_f, c_h; fits weekday targets that are not already public holidays): a one-off holiday:
  from 07:00/08:00 to 18:00-20:00 each hour is the normal count times that local hour's ratio of the most
  recent whole Sunday to the most recent whole day of the target's weekday in the visible history (counts + 1
  in both, so an empty hour gives a finite ratio) -- a pattern the reader must find in the history.
* ``cruise_ship`` (c_f, c_causal; fits October-April, the cruise season): N passengers are ashore from
  08:00/09:00 to 16:00-18:00 and one in n of them (by the counter's part of town) passes the counter once,
  evenly over those hours: ``round(N / n / hours)`` people are added to each of them.

A family that fits only some cases says so in :attr:`~fwgym.context.families.Family.fits`; a case's family
is drawn among those that fit it. Values stay non-negative integers (the domain's ``integer_values``).
"""
from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np

from fwgym.context.families import Draw, Family, mask, window
from fwgym.context.phrasing import number_words
from fwgym.context.text import holidays_between
from fwgym.context.zones import local_zone
from fwgym.core.cases import Case
from fwgym.core.contract import TARGET_HOURS
from fwgym.core.series import datetime_to_hour
from fwgym.domains import get_domain

__all__ = ["PEDESTRIAN_FAMILIES", "CRUISE_MONTHS", "holiday_ratio", "cruise_season", "one_off_holiday_fits"]

_P = "pedestrian"
#: the cruise season's months (Auckland's cruise ships call from October to April)
CRUISE_MONTHS = frozenset({10, 11, 12, 1, 2, 3, 4})

_VENUES = {
    "the waterfront": ("Spark Arena", "the Viaduct Events Centre"),
    "lower Queen Street": ("Spark Arena", "the Viaduct Events Centre"),
    "the mid-city": ("the Aotea Centre", "Auckland Town Hall"),
    "upper Queen Street": ("The Civic", "Auckland Town Hall", "the Aotea Centre"),
    "Karangahape Road": ("the Powerstation", "Auckland Town Hall"),
}
_EVENTS = ("a sold-out concert", "a basketball final", "a comedy festival gala", "a symphony concert",
           "a boxing title fight", "a music festival night")
_WORKS = ("water main repairs", "paving renewal", "a crane lift for a building site", "fibre cable installation",
          "stormwater drain works", "a shop-front scaffold installation")
_REASONS = ("a national day of mourning", "a state memorial service", "a national day of celebration",
            "the national team's victory parade")
_SHIPS = ("MS Aurora Pacific", "Southern Star", "Island Voyager", "Coral Meridian", "Pacific Harmony")
_WHARVES = ("Princes Wharf", "Queens Wharf")
#: one passenger in n passes the counter, by part of town
_CRUISE_ONE_IN = {"the waterfront": (4, 5), "lower Queen Street": (3, 4), "the mid-city": (8, 10),
                  "upper Queen Street": (10, 12), "Karangahape Road": (20, 25)}
_FACTOR_WORDS = {1.5: "one and a half times", 2.0: "twice", 2.5: "two and a half times", 3.0: "three times"}
_SHARE_FEWER_WORDS = {0.6: "two fifths", 0.7: "three tenths", 0.75: "a quarter", 0.8: "a fifth"}


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _area(case: Case) -> str:
    """The counter's part of town (the domain's ``series_facts``), ``"the city centre"`` when it has none."""
    facts = get_domain(case.domain).series_facts
    return str((facts(case.series_id) if facts is not None else {}).get("area", "the city centre"))


def _street(name: str) -> str:
    """The street of a counter's address (``"45 Queen Street"`` -> ``"Queen Street"``)."""
    street = " ".join(w for w in name.split() if not w[0].isdigit())
    return street.replace("K Road", "Karangahape Road").replace(" EW", "").replace(" NS", "")


def _hours_from(lh: np.ndarray, start: int, stop: int) -> tuple[int, int]:
    """``(i0, i1)``: target hours from the first at local hour ``start`` for ``stop - start`` hours (cut at the end)."""
    hits = np.flatnonzero(lh == start)
    i0 = int(hits[0]) if len(hits) else int(np.argmin(np.abs(lh - start)))
    return i0, min(i0 + stop - start, TARGET_HOURS)


def _whole_local_days(case: Case, weekday: int) -> list[int]:
    """Epoch hours of the local midnights of the whole 24-hour local days with ``weekday`` (Monday 0) inside the
    visible history, most recent first."""
    tz = local_zone(case)
    first = datetime.fromtimestamp(case.history_start * 3600, tz).date()
    d = datetime.fromtimestamp(case.last_visible * 3600, tz).date()
    out = []
    while d >= first:
        a = datetime_to_hour(datetime(d.year, d.month, d.day, tzinfo=tz))
        e = d + timedelta(days=1)
        b = datetime_to_hour(datetime(e.year, e.month, e.day, tzinfo=tz))
        if d.weekday() == weekday and a >= case.history_start and b <= case.last_visible + 1 and b - a == 24:
            out.append(a)
        d -= timedelta(days=1)
    return out


def holiday_ratio(case: Case) -> np.ndarray | None:
    """float64 (24,) by local clock hour: ``(Sunday + 1) / (same weekday + 1)`` of the most recent whole Sunday
    and the most recent whole day of the target's weekday in the visible history, or None where either is missing."""
    sundays = _whole_local_days(case, 6)
    same = _whole_local_days(case, case.target_date.weekday())
    if not sundays or not same:
        return None
    hist = np.asarray(case.history, dtype=np.float64)
    sun = hist[sundays[0] - case.history_start:][:24]
    day = hist[same[0] - case.history_start:][:24]
    return (sun + 1.0) / (day + 1.0)


def cruise_season(case: Case) -> bool:
    """``cruise_ship`` fits a target day in the cruise season (:data:`CRUISE_MONTHS`)."""
    return case.target_date.month in CRUISE_MONTHS


def one_off_holiday_fits(case: Case) -> bool:
    """``public_holiday`` fits a weekday target that is not already a public holiday of the domain's calendar, with
    a whole Sunday and a whole day of its weekday in the visible history."""
    d: date = case.target_date
    return d.weekday() < 5 and not holidays_between(case.domain, d, d) and holiday_ratio(case) is not None


def _event_crowd(case, rng, lh):
    i0, i1 = window(lh, rng, (20, 22), (2, 3))
    factor = float(_pick(rng, (1.5, 2.0, 2.5, 3.0)))
    area = _area(case)
    venue = _pick(rng, _VENUES.get(area, _VENUES["the mid-city"]))
    event = _pick(rng, _EVENTS)
    m = mask(i0, i1)
    return Draw(m, [("scale", m, factor)], {"factor": factor}, (i0, i1), None,
                {"event": event, "venue": venue, "area": area, "factor_x": f"{factor:g}x",
                 "factor_times": f"{factor:g} times", "factor_words": _FACTOR_WORDS[factor],
                 "factor_more": f"{(factor - 1) * 100:.0f}% more", "factor_pct": f"{factor * 100:.0f}%"})


def _street_closure(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 14), (3, 6))
    m = mask(i0, i1)
    return Draw(m, [("scale", m, 0.0)], {"factor": 0.0}, (i0, i1), None,
                {"works": _pick(rng, _WORKS), "street": _street(case.series.name)}, upper=np.where(m, 0.0, np.nan))


def _rain_warning(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 15), (3, 6))
    share = float(_pick(rng, (0.6, 0.7, 0.75, 0.8)))
    m = mask(i0, i1)
    cut = round((1 - share) * 100)
    return Draw(m, [("scale", m, share)], {"factor": share}, (i0, i1), None,
                {"share_pct": f"{share * 100:.0f}%", "share_fewer": f"{cut}% fewer people",
                 "share_fewer_words": _SHARE_FEWER_WORDS[share], "share_cut": f"cut by {number_words(cut)} percent"})


def _public_holiday(case, rng, lh):
    i0, i1 = _hours_from(lh, int(rng.integers(7, 9)), int(rng.integers(18, 21)))
    ratio = holiday_ratio(case)
    if ratio is None:  # pragma: no cover - the family fits only cases with both reference days (fits)
        raise ValueError(f"public_holiday does not fit case {case.case_id}: no whole reference days in its history")
    by_hour = ratio[lh]  # the reference days are whole 24-hour days from local midnight: index = local hour
    m = mask(i0, i1)
    return Draw(m, [("scale", m, by_hour)], {"ratio": ratio.tolist(), "by_hour": by_hour.tolist()}, (i0, i1), None,
                {"reason": _pick(rng, _REASONS), "weekday": f"{case.target_date:%A}"})


def _cruise_ship(case, rng, lh):
    i0, i1 = _hours_from(lh, int(rng.integers(8, 10)), int(rng.integers(16, 19)))
    passengers = int(_pick(rng, (1800, 2400, 3000, 3600, 4200, 4800, 5400)))
    one_in = int(_pick(rng, _CRUISE_ONE_IN.get(_area(case), (10, 12))))
    extra = float(np.rint(passengers / one_in / (i1 - i0)))
    m = mask(i0, i1)
    return Draw(m, [("shift", m, extra)], {"passengers": passengers, "one_in": one_in, "extra_per_hour": extra},
                (i0, i1), None,
                {"ship": _pick(rng, _SHIPS), "wharf": _pick(rng, _WHARVES), "passengers": f"{passengers:,}",
                 "passengers_k": f"{passengers / 1000:g} thousand", "one_in": f"one in {number_words(one_in)}",
                 "one_in_pct": f"{100 / one_in:g}%", "one_in_every": f"one passenger in every {number_words(one_in)}"})


# core sentences per pool (3 + 3 per family; the frames of phrasing.FRAMES multiply them by register). Seen cores
# state sizes as 2.5x / 2.5 times / 70% / 30% fewer / one in four / 4,200; held-out cores only as 150% more /
# 250% / three tenths fewer / cut by thirty percent / one passenger in every four / 4.2 thousand.
PEDESTRIAN_FAMILIES: tuple[Family, ...] = (
    Family("event_crowd", _P, ("c_f",), ("instruction following",), _event_crowd, {
        "seen": ("{event} at {venue} finishes {date}; {span} expect {factor_x} the usual number of people past "
                 "{place}.",
                 "{place} {date}, {span}: crowds leaving {event} at {venue}, footfall at {factor_times} normal.",
                 "After {event} at {venue} {date}, {area} should carry {factor_times} its usual foot traffic {span}, "
                 "{place} included."),
        "held_out": ("Once {event} lets out at {venue} {date}, {area} will carry {factor_more} walkers than usual "
                     "{span}; {place} sits right on the route.",
                     "Post-event dispersal ({event}, {venue}) {date}: {span} the pedestrian volume at {place} is "
                     "modelled at {factor_pct} of its baseline.",
                     "Crowds past {place} {span} {date}: {factor_more} than normal once {event} at {venue} is over."),
    }, "a large event"),
    Family("street_closure", _P, ("c_f",), ("instruction following",), _street_closure, {
        "seen": ("The footpath at {place} will be fenced off for {works} {date} {span}; the counter will record no "
                 "one while the fence is up.",
                 "{street} is closed to pedestrians at {place} {date} {span} ({works}): expected count 0.",
                 "Works notice: the footpath past {place} is shut for {works} {date}, {span}; nobody can walk past "
                 "the counter then."),
        "held_out": ("The walkway outside {place} is shut {span} {date} for {works}: there is no way through on "
                     "that side, so the sensor will sit at zero.",
                     "Pedestrian exclusion zone {date} {span} by {place} ({works}); no public access past the sensor.",
                     "Another round of works on {street} {date} ({works}): {span} the stretch by {place} is "
                     "completely fenced and will have nothing to count."),
    }, "a footpath closure for works"),
    Family("rain_warning", _P, ("c_f",), ("instruction following",), _rain_warning, {
        "seen": ("MetService has issued a heavy rain warning for Auckland {date} {span}; on such days {place} "
                 "records {share_pct} of its normal numbers while the rain lasts.",
                 "Heavy rain over the city centre {date} {span}: {share_fewer} than usual past {place}.",
                 "Rain warning {date}, {span}; footfall at {place} at {share_pct} of normal."),
        "held_out": ("A band of heavy rain sits over the city {date} {span}; storms like it left {share_fewer_words} "
                     "fewer people than usual on the footpaths by {place}.",
                     "Planning assumption for {place} {date}: pedestrian volume {share_cut} {span} (heavy rain "
                     "warning), unchanged before and after.",
                     "Washout expected {date}: {span} {place} sees {share_fewer_words} fewer walkers than on a dry "
                     "day."),
    }, "a heavy rain warning"),
    Family("public_holiday", _P, ("c_f", "c_h"), ("reasoning: deduction", "retrieval: context", "reasoning: math"),
           _public_holiday, {
        "seen": ("A one-off public holiday ({reason}) is declared {date}: {span} each hour's count at {place} will be "
                 "the usual {weekday} count times that hour's ratio of the most recent Sunday to the most recent "
                 "{weekday} in the visible history.",
                 "Public holiday {date} ({reason}): {span} {place} follows a normal {weekday} scaled hour by hour by "
                 "the ratio of last Sunday to last {weekday} in the counts.",
                 "Offices close for {reason} {date}; {span} foot traffic at {place} should differ from a normal "
                 "{weekday}, hour by hour, in the same proportion as the latest Sunday differed from the latest "
                 "{weekday}."),
        "held_out": ("The new one-off holiday for {reason} falls {date}: {span} take an ordinary {weekday} at {place} "
                     "and move every hour by the proportion that separated the last Sunday from the last {weekday}.",
                     "Gazetted holiday {date} ({reason}). Hourly volume at {place} {span} = the usual {weekday} "
                     "volume times that hour's ratio between the most recent Sunday and the most recent {weekday} "
                     "on record.",
                     "Few saw it coming, but most of the country has a day off {date} for {reason}; {span} each hour "
                     "at {place} should differ from an ordinary {weekday} by the factor between the latest Sunday "
                     "and the latest {weekday}."),
    }, "a one-off public holiday", fits=one_off_holiday_fits),
    Family("cruise_ship", _P, ("c_f", "c_causal"), ("reasoning: causal", "reasoning: math"), _cruise_ship, {
        "seen": ("{ship} berths at {wharf} {date} with {passengers} passengers ashore {span}; from past calls, "
                 "{one_in} of them walk past {place} once, spread evenly over those hours, on top of the usual "
                 "footfall.",
                 "Cruise day {date}: {ship} ({passengers} passengers) at {wharf}, ashore {span}; {one_in_pct} of them "
                 "pass {place} once, at a steady rate, in addition to the normal crowd.",
                 "{ship} brings {passengers} cruise passengers into the city {date} {span}; {one_in} of them stroll "
                 "past {place} once, evenly through the visit, as extra people."),
        "held_out": ("{ship} glides into {wharf} {date} with {passengers_k} on board, ashore {span}; going by past "
                     "visits, {one_in_every} will pass {place} once - a steady trickle added to the usual foot "
                     "traffic.",
                     "Cruise call {date}, {ship} at {wharf}, {passengers_k} passengers, shore leave {span}. Extra "
                     "pedestrians at {place}: {one_in_every}, one pass each, uniform over the shore-leave hours.",
                     "The cruise season's rhythm {date}: {passengers_k} passengers off {ship} at {wharf} {span}; "
                     "earlier visits suggest {one_in_every} pass {place} once, at an even pace, adding to whoever "
                     "else is about."),
    }, "a cruise ship call", fits=cruise_season),
)
