"""Scenario families (Context is Key's context types, DESIGN §8): what each event does to the target, and the
core sentences that announce it, per writing pool (:mod:`fwgym.context.phrasing`).

A family is a :class:`Family`: a name, its domain, its CiK context types and skills, a ``draw(case, rng)``
that fixes the event (region of interest, effect operations, bounds, parameters) from the case's
visible facts and the parameter stream only, and its core sentences per pool. The text is rendered
afterwards from the drawn values (:mod:`fwgym.context.scenarios`), so no wording changes an effect.
A domain declares its families as a tuple of :class:`Family` (:data:`ELECTRICITY_FAMILIES`,
:data:`CYCLE_HIRE_FAMILIES`); :func:`fwgym.context.scenarios.register_families` accepts more.

Effect operations (applied in order to the realised 24-hour target, :func:`apply_ops`):
``("scale", mask, v)`` y *= v (v a number or a (24,) array); ``("shift", mask, v)`` y = max(y + v, 0);
``("cap", mask, v)`` y = min(y, v); ``("set", mask, values)`` y = values (24,) where mask;
``("move", mask, (to_mask, share))`` a share of y leaves the mask hours and is spread evenly over
``to_mask`` hours (energy conserved).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fwgym.core.cases import Case
from fwgym.core.contract import TARGET_HOURS

__all__ = ["Family", "Draw", "apply_ops", "ELECTRICITY_FAMILIES", "CYCLE_HIRE_FAMILIES", "CONTEXT_TYPES", "SKILLS"]

#: Context is Key's context types: intemporal, historical, covariate, future, causal
CONTEXT_TYPES = ("c_i", "c_h", "c_cov", "c_f", "c_causal")
#: CiK's skill tags used here
SKILLS = ("forecasting", "natural language processing", "instruction following", "retrieval: context",
          "reasoning: math", "reasoning: deduction", "reasoning: causal")


@dataclass
class Draw:
    """One drawn event: ``roi`` bool (24,), ``ops`` (effect operations), ``upper``/``lower`` (24,) or None,
    ``params`` (for analysis), ``slots`` (the values the text states), ``qty`` ``(kind, value)`` or None,
    ``span`` ``(i0, i1)`` target indices of the announced hours, extra ``context_types``/``skills``."""

    roi: np.ndarray
    ops: list
    params: dict
    span: tuple[int, int]
    qty: tuple[str, float] | None = None
    slots: dict = field(default_factory=dict)
    upper: np.ndarray | None = None
    lower: np.ndarray | None = None
    context_types: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()


@dataclass(frozen=True)
class Family:
    """A scenario family: ``draw(case, rng, local_hours) -> Draw`` and its core sentences per pool
    (templates with ``{place}``, ``{date}``, ``{span}``, ``{qty}`` and the family's own slots)."""

    name: str
    domain: str
    context_types: tuple[str, ...]
    skills: tuple[str, ...]
    draw: Callable[[Case, np.random.Generator, np.ndarray], Draw]
    cores: dict[str, tuple[str, ...]]
    event: str  # a short description, for distractor sentences about another place or date


def apply_ops(target: np.ndarray, ops: list, integer: bool) -> np.ndarray:
    """The target after the effect operations (float64 (24,); rounded to integers when ``integer``)."""
    y = np.array(target, dtype=np.float64)
    for op, m, v in ops:
        if op == "scale":
            y[m] = y[m] * (v[m] if np.ndim(v) else v)
        elif op == "shift":
            y[m] = np.maximum(y[m] + v, 0.0)
        elif op == "cap":
            y[m] = np.minimum(y[m], v)
        elif op == "set":
            y[m] = np.asarray(v)[m]
        elif op == "move":
            to, share = v
            moved = share * y[m]
            y[m] -= moved
            y[to] += moved.sum() / max(int(to.sum()), 1)
        else:  # pragma: no cover - operations are closed
            raise ValueError(f"unknown effect operation {op!r}")
        y = np.maximum(y, 0.0)
    return np.rint(y) if integer else y


def window(lh: np.ndarray, rng: np.random.Generator, starts: tuple[int, int], lengths: tuple[int, int]) -> tuple[int, int]:
    """``(i0, i1)``: a block of target hours starting at a local clock hour drawn from ``starts`` (cut at the end)."""
    start = int(rng.integers(starts[0], starts[1] + 1))
    length = int(rng.integers(lengths[0], lengths[1] + 1))
    hits = np.flatnonzero(lh == start)
    i0 = int(hits[0]) if len(hits) else int(np.argmin(np.abs(lh - start)))
    return i0, min(i0 + length, TARGET_HOURS)


def mask(i0: int, i1: int) -> np.ndarray:
    m = np.zeros(TARGET_HOURS, dtype=bool)
    m[i0:i1] = True
    return m


def _round(v: float, big: bool) -> float:
    return float(np.round(v, -1 if big else 0))


# ---------------------------------------------------------------------------------------------
# electricity


def _temperature_advisory(case, rng, lh):
    summer = case.target_date.month in (5, 6, 7, 8, 9)
    i0, i1 = window(lh, rng, (12, 15) if summer else (6, 8), (4, 6))
    pct = float(rng.choice([10, 12, 15, 20, 25]))
    m = mask(i0, i1)
    what = "heat advisory" if summer else "arctic cold snap"
    load = "air-conditioning" if summer else "heating"
    return Draw(m, [("scale", m, 1 + pct / 100)], {"pct": pct}, (i0, i1), ("pct_up", pct),
                {"what": what, "a_what": ("a " if summer else "an ") + what, "load": load})


def _industrial_outage(case, rng, lh):
    i0, i1 = window(lh, rng, (6, 14), (4, 8))
    mw = max(_round(case.scale * rng.uniform(0.04, 0.10), case.scale > 2000), 1.0)
    m = mask(i0, i1)
    return Draw(m, [("shift", m, -mw)], {"mw": mw}, (i0, i1), ("mw_down", mw))


def _hist(case) -> np.ndarray:
    return np.asarray(case.history, dtype=np.float64)


def _typical(case, m) -> float:
    """Mean of the visible history at the hours of day of the mask's target hours."""
    hist = _hist(case).reshape(14, 24)
    offset = (case.target_hours[m] - case.history_start) % 24
    return float(hist[:, offset].mean())


def _transmission_limit(case, rng, lh):
    i0, i1 = window(lh, rng, (13, 17), (3, 5))
    m = mask(i0, i1)
    big = case.scale > 2000
    if rng.random() < 0.5:  # stated in MW
        cap = _round(_typical(case, m) * rng.uniform(0.88, 0.97), big)
        return Draw(m, [("cap", m, cap)], {"cap": cap, "relative": False}, (i0, i1), ("mw_cap", cap),
                    upper=np.where(m, cap, np.nan))
    # c_h: stated relative to the peak of the same hours on a reference day in the visible history
    k = _reference_lag(case, m, weekday=None, rng=rng)
    ref_values = _hist(case)[case.target_hours[m] - 24 * k - case.history_start]
    pct = float(rng.choice([85, 90, 95]))
    cap = float(pct / 100 * ref_values.max())
    return Draw(m, [("cap", m, cap)], {"cap": cap, "relative": True, "lag_days": k, "pct": pct}, (i0, i1),
                ("pct_of_ref", pct), {"ref_lag": k}, upper=np.where(m, cap, np.nan), context_types=("c_h",),
                skills=("reasoning: math", "reasoning: deduction"))


def _reference_lag(case, m, weekday: int | None, rng) -> int:
    """Days k back such that the mask's target hours minus k days are visible (and, with ``weekday``, the
    reference day is that weekday, the most recent one); otherwise a random visible lag."""
    hours = case.target_hours[m]
    ok = [k for k in range(1, 15) if hours.min() - 24 * k >= case.history_start and hours.max() - 24 * k <= case.last_visible]
    if weekday is not None:
        wd = [k for k in ok if (case.target_date.weekday() - k) % 7 == weekday]
        if wd:
            return min(wd)
    return int(rng.choice(ok))


def _analog_day(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 9), (9, 12))
    m = mask(i0, i1)
    target_wd = case.target_date.weekday()
    ref_wd = 6 if target_wd < 5 else 2  # a weekday target looks like a Sunday, a weekend one like a Wednesday
    k = _reference_lag(case, m, ref_wd, rng)
    values = np.zeros(TARGET_HOURS)
    values[m] = _hist(case)[case.target_hours[m] - 24 * k - case.history_start]
    factor = float(rng.choice([1.0, 0.9, 1.1]))
    ops = [("set", m, values)] + ([("scale", m, factor)] if factor != 1.0 else [])
    return Draw(m, ops, {"lag_days": k, "factor": factor}, (i0, i1), None, {"ref_lag": k, "factor": factor})


def _temperature_table(case, rng, lh):
    """c_cov: an hourly temperature table (3 visible days observed, the target day forecast). The history's
    temperatures are generated so that demand relates to them as ``y = b (1 + g (T - T0))`` (b: the visible
    hour-of-day mean, T0: the normal profile), the target day's temperatures independently of the target;
    the target is scaled by ``1 + g (T - T0)`` with the table's printed values."""
    month = case.target_date.month
    summer, winter = month in (6, 7, 8, 9), month in (12, 1, 2)
    base, amp = (25.0, 5.0) if summer else (1.0, 4.0) if winter else (13.0, 5.0)
    g = float(rng.choice([0.02, 0.025, 0.03])) * (1 if not winter else -1)
    i0, i1 = window(lh, rng, (11, 14), (5, 7))
    m = mask(i0, i1)
    anomaly = float(rng.choice([4.0, 6.0, 8.0])) * (1 if not winter else -1)
    hist = _hist(case)
    hod = hist.reshape(14, 24).mean(axis=0)
    n_obs = 72
    obs_idx = np.arange(len(hist) - n_obs, len(hist))
    obs_local = np.array([int(x) for x in _local_hours_of(case, case.history_start + obs_idx)])
    t0_obs = base + amp * np.cos(2 * np.pi * (obs_local - 15) / 24)
    ratio = hist[obs_idx] / np.maximum(hod[obs_idx % 24], 1e-9) - 1
    t_obs = np.round(t0_obs + np.clip(ratio / g, -15, 15) + rng.normal(0, 0.3, n_obs), 1)
    t0_tgt = base + amp * np.cos(2 * np.pi * (lh - 15) / 24)
    bump = np.where(m, anomaly, 0.0)
    t_tgt = np.round(t0_tgt + bump + rng.normal(0, 0.3, TARGET_HOURS), 1)
    factor = 1 + g * (t_tgt - np.round(t0_tgt, 1))
    every = np.ones(TARGET_HOURS, dtype=bool)
    return Draw(m, [("scale", every, factor)], {"gamma": g, "anomaly": anomaly, "base": base, "amp": amp}, (i0, i1),
                None, {"t_obs": t_obs, "obs_hours": case.history_start + obs_idx, "t_tgt": t_tgt,
                       "t0_tgt": np.round(t0_tgt, 1), "t0_obs": np.round(t0_obs, 1)})


def _local_hours_of(case, hours):
    from fwgym.core.series import hour_to_datetime

    from fwgym.context.zones import local_zone

    tz = local_zone(case)
    return [hour_to_datetime(int(h)).astimezone(tz).hour for h in hours]


def _peak_pricing(case, rng, lh):
    i0, i1 = window(lh, rng, (14, 17), (3, 4))
    j1 = min(i1 + 3, TARGET_HOURS)
    m, after = mask(i0, i1), mask(i1, j1)
    if not after.any():  # the event ends with the window: no rebound hours inside it
        i0, i1 = max(i0 - 3, 0), max(i1 - 3, 1)
        j1 = min(i1 + 3, TARGET_HOURS)
        m, after = mask(i0, i1), mask(i1, j1)
    share = float(rng.choice([10, 20, 25]))
    roi = m | after
    return Draw(roi, [("move", m, (after, share / 100))], {"share": share, "rebound_hours": int(after.sum())},
                (i0, i1), ("move_share", share), {"k": int(after.sum())})


# ---------------------------------------------------------------------------------------------
# cycle hire


def _station_closure(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 15), (3, 6))
    m = mask(i0, i1)
    return Draw(m, [("scale", m, 0.0)], {"factor": 0.0}, (i0, i1), None, upper=np.where(m, 0.0, np.nan))


def _event_surge(case, rng, lh):
    i0, i1 = window(lh, rng, (16, 21), (2, 3))
    m = mask(i0, i1)
    factor = float(rng.choice([2.0, 2.5, 3.0]))
    event = str(rng.choice(["a concert", "a football match", "an open-air festival", "a large conference"]))
    return Draw(m, [("scale", m, factor)], {"factor": factor}, (i0, i1), ("factor", factor), {"event": event})


def _heavy_rain(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 14), (3, 6))
    m = mask(i0, i1)
    pct = float(rng.choice([30, 40, 50, 60]))
    return Draw(m, [("scale", m, pct / 100)], {"factor": pct / 100}, (i0, i1), ("share", pct))


def _rain_table(case, rng, lh):
    """c_cov: hourly rainfall (mm/h; 3 visible days observed, the target day forecast), generated so that
    hires relate to it as ``y = b max(1 - k r, 0)`` in the history; the target is scaled by the same."""
    kappa = float(rng.choice([0.2, 0.25, 0.3]))
    i0, i1 = window(lh, rng, (8, 14), (3, 5))
    m = mask(i0, i1)
    hist = _hist(case)
    hod = hist.reshape(14, 24).mean(axis=0)
    n_obs = 72
    obs_idx = np.arange(len(hist) - n_obs, len(hist))
    b = hod[obs_idx % 24]
    shortfall = np.clip(1 - hist[obs_idx] / np.maximum(b, 1e-9), 0, 0.9)
    r_obs = np.round(np.where(b >= 1, shortfall / kappa, 0.0), 1)
    r_tgt = np.round(np.where(m, rng.uniform(1.0, 3.0, TARGET_HOURS), 0.0), 1)
    factor = np.maximum(1 - kappa * r_tgt, 0.0)
    every = np.ones(TARGET_HOURS, dtype=bool)
    return Draw(m, [("scale", every, factor)], {"kappa": kappa}, (i0, i1), None,
                {"r_obs": r_obs, "obs_hours": case.history_start + obs_idx, "r_tgt": r_tgt})


def _bike_shortage(case, rng, lh):
    i0, i1 = window(lh, rng, (7, 16), (2, 4))
    m = mask(i0, i1)
    empty = bool(rng.random() < 0.5)
    if empty:  # no bikes to hire: no departures
        return Draw(m, [("scale", m, 0.0)], {"mechanism": "empty"}, (i0, i1), None, {"mechanism": "empty"},
                    upper=np.where(m, 0.0, np.nan))
    return Draw(m, [], {"mechanism": "full"}, (i0, i1), None, {"mechanism": "full"})  # no free docks: departures go on


# ---------------------------------------------------------------------------------------------
# core sentences per pool (3 + 3 per family; the frames of phrasing.FRAMES multiply them by register)

_E = "electricity"
_C = "cycle_hire"
ELECTRICITY_FAMILIES: tuple[Family, ...] = (
    Family("temperature_advisory", _E, ("c_f",), ("instruction following",), _temperature_advisory, {
        "seen": ("{a_what} is in force for {place} {date}. {span} we expect {load} load to push demand {qty}.",
                 "{place}: {what} {date}, {span}; {load} demand {qty}.",
                 "Because of {a_what} {date}, demand in {place} should run {qty} {span}."),
        "held_out": ("Forecasters warn of {a_what} reaching {place} {date}: expect {load} to lift consumption to "
                     "{qty} {span}.",
                     "{span} {date} the {what} means the grid serving {place} will carry {qty}.",
                     "Weather desk: {what} for {place}. Load impact {date} {span}: {qty}."),
    }, "a heat advisory"),
    Family("industrial_outage", _E, ("c_f",), ("instruction following",), _industrial_outage, {
        "seen": ("A large industrial customer in {place} ({qty}) will be offline for planned maintenance {date} {span}; "
                 "demand will be lower by that amount during the outage.",
                 "Planned outage at a major plant in {place} {date}, {span}: {qty} off the system.",
                 "{place}: smelter maintenance {date} {span} removes {qty} from demand."),
        "held_out": ("The refinery that normally draws {qty} in {place} shuts down {date} {span} for inspection; "
                     "the rest of the load is unaffected.",
                     "Heads-up: {span} {date} a factory in {place} goes dark, taking {qty} with it.",
                     "Maintenance window {date} {span}: the {place} steelworks ({qty}) will not run."),
    }, "a planned industrial outage"),
    Family("transmission_limit", _E, ("c_f",), ("instruction following",), _transmission_limit, {
        "seen": ("Because of a transmission constraint into {place}, {qty} can be served {date} {span}; any load above "
                 "that will be curtailed.",
                 "Import limit into {place} {date} {span}: served load held to {qty}.",
                 "{place} will be capped at {qty} {span} {date} while a line is out."),
        "held_out": ("With a key line out of service {date}, the grid into {place} can deliver {qty} {span}; anything "
                     "beyond is shed.",
                     "Curtailment order for {place}: {span} {date} served demand is limited to {qty}.",
                     "Line work {date}. Between the hours given ({span}) {place} gets {qty}, no more."),
    }, "a transmission constraint"),
    Family("analog_day", _E, ("c_h", "c_f"), ("reasoning: deduction", "retrieval: context"), _analog_day, {
        "seen": ("A regional holiday closes most businesses in {place} {date}: {span} expect demand to look like it did "
                 "at the same hours {ref}{factor}.",
                 "{place} {date}, {span}: offices shut, so load should follow {ref}{factor}.",
                 "Holiday schedule {date} in {place}; {span} demand as {ref}{factor}."),
        "held_out": ("Schools and offices across {place} are closed {date}; {span} consumption should mirror the same "
                     "hours {ref}{factor}.",
                     "Expect a quiet day {date} in {place}: {span} the load profile repeats {ref}{factor}.",
                     "Civic holiday {date}. For {place}, {span}, take the values seen {ref}{factor}."),
    }, "a regional holiday"),
    Family("temperature_table", _E, ("c_cov", "c_f"), ("reasoning: deduction", "reasoning: math"), _temperature_table, {
        "seen": ("Hourly temperature for {place} (deg C, local time; observed for the past three days, forecast {date}): "
                 "{table}. Demand here responds to temperature.",
                 "Weather feed for {place}, deg C by local hour (last 3 days observed, then the forecast {date}): {table}.",
                 "Temperatures in {place}, hourly, local clock (3 observed days and {date} forecast): {table}."),
        "held_out": ("Attached: thermometer readings and the outlook for {place} {date}, in degrees Celsius per local "
                     "hour: {table}. Load tracks the weather.",
                     "Met data ({place}; C; local hours; recent days measured, {date} predicted): {table}",
                     "How warm will it be? {place}, local time, deg C, {date} last: {table}."),
    }, "a temperature forecast"),
    Family("peak_pricing", _E, ("c_causal", "c_f"), ("reasoning: causal", "reasoning: math"), _peak_pricing, {
        "seen": ("A critical-peak pricing event is called in {place} {date} {span}: customers on the tariff are expected "
                 "to shift {qty} out of the event hours, and that energy comes back evenly in the {k} hours after it.",
                 "Peak-price event {date} {span} in {place}: {qty} moves from the event to the next {k} hours.",
                 "{place} demand response {date}, {span}: {qty} is deferred to the {k} hours that follow."),
        "held_out": ("Prices spike {date} {span} in {place}; households pre-enrolled in the scheme will postpone {qty}, "
                     "running it instead spread evenly over the {k} hours once the event is over.",
                     "Event notice: {span} {date}, {place}. Deferred usage ({qty}) reappears across the subsequent "
                     "{k} hours.",
                     "Load shifting in {place}: during {span} {date} customers hold back {qty} and catch up in the "
                     "{k} hours after."),
    }, "a critical-peak pricing event"),
)

CYCLE_HIRE_FAMILIES: tuple[Family, ...] = (
    Family("station_closure", _C, ("c_f",), ("instruction following",), _station_closure, {
        "seen": ("The {place} docking station will be closed for dock repairs {date} {span}; no bikes can be hired "
                 "there while it is closed.",
                 "{place} station closed {date} {span} (dock repairs): no hires.",
                 "Dock repairs at {place} {date}, {span}: the station is shut."),
        "held_out": ("Engineers take {place} out of service {date} {span}; the terminal and every dock are switched off.",
                     "Nobody will be able to take a bike from {place} {span} {date}: the docks are locked for works.",
                     "Works notice: {place} unavailable {date}, {span}."),
    }, "a station closure"),
    Family("event_surge", _C, ("c_f",), ("instruction following",), _event_surge, {
        "seen": ("{event} near the {place} docking station ends {date}; {span} we expect {qty} from this station.",
                 "{event} by {place} {date}: {span}, {qty}.",
                 "After {event} {date}, {place} should see {qty} {span}."),
        "held_out": ("Crowds leaving {event} next to {place} {date} will mean {qty} {span}.",
                     "Expect a rush at {place} once {event} finishes {date}: {span}, {qty}.",
                     "Event traffic at {place} {date} ({event}): {span} brings {qty}."),
    }, "an event nearby"),
    Family("heavy_rain", _C, ("c_f",), ("instruction following",), _heavy_rain, {
        "seen": ("The Met Office forecasts heavy rain over central London {date} {span}. On such days hires at {place} "
                 "typically fall to {qty} during the rain.",
                 "Heavy rain {date} {span}: {place} hires at {qty}.",
                 "Rain warning {date}, {span}; expect {place} at {qty}."),
        "held_out": ("A band of persistent downpours crosses London {date} {span}; riders at {place} stay away, {qty} "
                     "compared with a dry day.",
                     "Wet spell {span} {date}. {place} usage: {qty}.",
                     "Umbrella weather at {place} {date} ({span}), meaning {qty} in hires."),
    }, "heavy rain"),
    Family("analog_day", _C, ("c_h", "c_f"), ("reasoning: deduction", "retrieval: context"), _analog_day, {
        "seen": ("A bank-holiday-style timetable applies around {place} {date}: {span} expect hires like those at the "
                 "same hours {ref}{factor}.",
                 "{place} {date}, {span}: offices closed, so hires should follow {ref}{factor}.",
                 "Holiday pattern {date} at {place}; {span} hires as {ref}{factor}."),
        "held_out": ("With offices nearby shut {date}, {place} will behave as it did at the same hours {ref}{factor}, "
                     "{span}.",
                     "Quiet day {date} near {place}: {span} departures repeat {ref}{factor}.",
                     "For {place} {span} {date}, copy what happened {ref}{factor}."),
    }, "a holiday timetable"),
    Family("rain_table", _C, ("c_cov", "c_f"), ("reasoning: deduction", "reasoning: math"), _rain_table, {
        "seen": ("Hourly rainfall near {place} (mm per hour, London time; observed for the past three days, forecast "
                 "{date}): {table}. Hires here respond to rain.",
                 "Rain gauge for {place}, mm/h by London hour (last 3 days observed, then the forecast {date}): {table}.",
                 "Precipitation at {place}, hourly, local clock (3 observed days and {date} forecast): {table}."),
        "held_out": ("Attached: the rain record and the outlook around {place} {date}, millimetres per local hour: "
                     "{table}. Riding tracks the weather.",
                     "Met data ({place}; mm/h; London hours; recent days measured, {date} predicted): {table}",
                     "Will it rain? {place}, local time, mm per hour, {date} last: {table}."),
    }, "a rain forecast"),
    Family("bike_shortage", _C, ("c_causal", "c_f"), ("reasoning: causal",), _bike_shortage, {
        "seen": ("Redistribution notice for {place} {date} {span}: {mechanism}.",
                 "{place} {date}, {span}: {mechanism}.",
                 "Fleet update {date}: {mechanism} at {place} {span}."),
        "held_out": ("The balancing crew reports for {place} {date} {span}: {mechanism}.",
                     "Operations, {date}: {span} {place} will see this: {mechanism}.",
                     "Dock status forecast, {place}, {span} {date}: {mechanism}."),
    }, "a fleet redistribution"),
)

#: the mechanisms of bike_shortage in words, per pool ("empty": no bikes to hire; "full": no free docks)
MECHANISMS = {
    "seen": {"empty": "the van removes every bike from the station and returns them only at the end of that time",
             "full": "the station will be completely full, with no free docks for returning bikes"},
    "held_out": {"empty": "all bicycles are collected from the docks and none are put back until the period ends",
                 "full": "every dock stays occupied, so riders arriving there cannot return a bike"},
}
