"""Plain-language case context shown to agents (the ``context`` observation; DESIGN §7, CiK §3).

The text states intemporal facts (what the series is, balancing authority or station, place and time
zone, units), historical facts from outside the visible window (the same month of the previous year
for electricity, the four weeks before the visible window for cycle hire), calendar facts (weekday,
public holidays from the ``holidays`` package: U.S. federal for electricity, England for cycle hire),
the contract and objective, the budget and call limit, the tools, and, in Context/Forecast envs,
the scenario note. Which series description, history facts and holidays a domain's context states is its
spec's (:attr:`fwgym.domains.Domain.series_text`, ``history_facts``, ``holidays``). It never contains a value at or after ``as_of - 2 h``: every statistic is computed
from hours before the last visible hour.
"""
from __future__ import annotations

from datetime import date, timedelta
from functools import lru_cache

import numpy as np

from fwgym.core.cases import Case
from fwgym.core.contract import ALPHA, RAMP, VALUE_ABS_TOL, VALUE_REL_TOL, capacity_grid
from fwgym.core.series import date_to_hour, hour_to_datetime, hour_to_iso
from fwgym.domains import SameMonthLastYear, get_domain

__all__ = ["holidays_between", "historical_window", "prompt_windows", "historical_facts", "calendar_facts", "render_context",
           "OBJECTIVES", "objective_line", "capacity_grid_line", "compact_context", "SUBMIT_LINE", "COMPACT_SUBMIT_LINE",
           "COMPACT_GRID_LINE"]

#: what an agent can be told to minimise (the objective ablation: the protocol's S, or the decision loss only)
OBJECTIVES: tuple[str, ...] = ("score", "loss")


def objective_line(budget: int, objective: str = "score") -> str:
    """The context's objective sentence: the protocol's S (``"score"``, what every env states) or the loss
    only (``"loss"``, what a chat agent run with ``--objective loss`` is shown instead).

    Raises:
        ValueError: an unknown objective.
    """
    if objective == "score":
        return f"Objective: minimise S = 0.5*((loss - best possible loss)/sigma + credits spent/{budget})."
    if objective == "loss":
        return "Objective: minimise the loss."
    raise ValueError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")

#: the decision context's line saying how to submit (physical capacities)
SUBMIT_LINE = 'Submit with {"tool": "submit", "args": {"decisions": [{"decision_id": "b00", "value": <capacity>}, ...]}}.'
#: :data:`SUBMIT_LINE` in compact prompts (:func:`compact_context`): the levels answer
COMPACT_SUBMIT_LINE = 'Submit with {"tool": "submit", "args": {"levels": [<b00 level>, ..., <b07 level>]}}.'
#: :func:`capacity_grid_line` in compact prompts: the 33 levels say it (a capacity is scale x level)
COMPACT_GRID_LINE = ("Capacity grid: scale x level for the 33 levels 0.40, 0.45, ..., 2.00; answer with the levels (a "
                     "capacity must equal scale x level at full precision).")


def capacity_grid_line(scale: float, unit: str) -> str:
    """The decision context's capacity-grid line: the 33 grid values ``scale x level`` in ``unit`` at full precision
    (``repr``: up to 17 significant digits each, about 700 characters) and the matching tolerance."""
    return (f"Capacity grid ({unit}; scale x level for the 33 levels, full precision; a value v matches grid value g when "
            f"|v - g| <= {VALUE_ABS_TOL:g} + {VALUE_REL_TOL:g} x |g|): " + ", ".join(repr(v) for v in capacity_grid(scale)) + ".")


def compact_context(context: str, scale: float | None, unit: str | None) -> str:
    """``context`` without what the grid levels already say (the compact prompts of a chat agent): the line of the 33
    full-precision grid values (:func:`capacity_grid_line` of ``scale`` and ``unit``, the episode's contract facts)
    becomes :data:`COMPACT_GRID_LINE` and the capacities' :data:`SUBMIT_LINE` the levels' :data:`COMPACT_SUBMIT_LINE`.
    A context without these lines (the forecast task, another env's text, no ``scale``) is returned unchanged."""
    if scale is not None and unit is not None:
        context = context.replace(capacity_grid_line(float(scale), str(unit)), COMPACT_GRID_LINE)
    return context.replace(SUBMIT_LINE, COMPACT_SUBMIT_LINE)


@lru_cache(maxsize=8)
def _holiday_calendar(domain: str, year: int):
    import holidays

    cal = get_domain(domain).holidays
    return holidays.country_holidays(cal.country, subdiv=cal.subdiv, years=[year - 1, year, year + 1])


def holidays_between(domain: str, first: date, last: date) -> list[tuple[date, str]]:
    """Public holidays in ``[first, last]`` of the domain's calendar (:attr:`fwgym.domains.Domain.holidays`:
    U.S. federal, England), sorted."""
    cal = _holiday_calendar(domain, last.year)
    out, d = [], first
    while d <= last:
        if d in cal:
            out.append((d, cal.get(d)))
        d += timedelta(days=1)
    return out


def _fmt(x: float, unit: str) -> str:
    return f"{x:,.0f} {unit}" if x >= 100 else f"{x:.1f} {unit}"


def historical_window(case: Case) -> tuple[int, int]:
    """Epoch hours ``[h0, h1)`` whose statistics :func:`historical_facts` quotes, by the domain's
    :attr:`~fwgym.domains.Domain.history_facts`: the same calendar month of the previous year (electricity),
    the weeks before the visible history (cycle hire: 4); the quoted hours stop at the last visible hour."""
    facts = get_domain(case.domain).history_facts
    if isinstance(facts, SameMonthLastYear):
        td = case.target_date
        start = date(td.year - 1, td.month, 1)
        end = date(td.year - 1 + (td.month == 12), td.month % 12 + 1, 1)
        h0, h1 = date_to_hour(start), date_to_hour(end)
    else:
        h1 = case.history_start
        h0 = h1 - facts.weeks * 7 * 24
    return h0, min(h1, case.last_visible + 1)


def prompt_windows(case: Case) -> tuple[tuple[int, int], ...]:
    """Every span ``[h0, h1)`` of epoch hours whose values (or statistics of them) the case's prompt, tools and
    observations may carry: the visible history and the :func:`historical_window`. What the sealed split
    keeps free of its other cases' targets, and what the evaluation's exposure check reads."""
    return (case.history_start, case.last_visible + 1), historical_window(case)


def historical_facts(case: Case) -> str:
    """A sentence of statistics from outside the visible window (and before it)."""
    s = case.series
    spec = get_domain(case.domain)
    unit = spec.unit
    h0, h1 = historical_window(case)
    if isinstance(spec.history_facts, SameMonthLastYear):
        label = f"In {hour_to_datetime(h0):%B %Y} (same month last year)"
    else:
        label = (f"In the {spec.history_facts.weeks} weeks before the visible history ({hour_to_datetime(h0):%d %b} "
                 f"to {hour_to_datetime(h1 - 1):%d %b %Y})")
    i0, i1 = max(h0 - s.start_hour, 0), max(h1 - s.start_hour, 0)
    vals = s.values[i0:i1]
    vals = vals[np.isfinite(vals)]
    if len(vals) < 24:
        return "No data from outside the visible window is available for comparison."
    return (f"{label} the series averaged {_fmt(float(vals.mean()), unit)} with a peak of "
            f"{_fmt(float(vals.max()), unit)} ({len(vals)} hours observed).")


def calendar_facts(case: Case) -> str:
    """Weekday of the target and public holidays on the target date and in the visible window."""
    td = case.target_date
    first = hour_to_datetime(case.history_start).date()
    hol = holidays_between(case.domain, first, td + timedelta(days=1))
    where = get_domain(case.domain).holidays.label
    on_target = [n for d, n in hol if d == td]
    text = f"The target date {td.isoformat()} is a {td:%A}"
    text += f" and a public holiday ({where}): {on_target[0]}." if on_target else f", not a public holiday ({where})."
    past = [f"{n} ({d:%a %d %b})" for d, n in hol if first <= d < td and d != td]
    if past:
        text += " Public holidays since the start of the visible history: " + "; ".join(past) + "."
    nxt = [f"{n} ({d:%a %d %b})" for d, n in hol if d == td + timedelta(days=1)]
    if nxt:
        text += f" The next day is a holiday too: {nxt[0]}."
    return text


@lru_cache(maxsize=8192)
def render_context(case: Case, budget: int, max_calls: int, tools: tuple[str, ...], scenario_text: str | None = None,
                   task: str = "decision") -> str:
    """Context text of ``case`` (printable ASCII, newline-separated); cached (RL replays the same cases).

    Args:
        case: the case. budget, max_calls, tools: the episode's limits and tool names.
        scenario_text: the operator's note of a Context/Forecast env scenario, if any.
        task: ``"decision"`` (submit 8 capacities) or ``"forecast"`` (submit a probabilistic forecast).
    """
    what = get_domain(case.domain).describe_series(case.series_id, case.series.name)
    s = case.scale
    lines = [
        f"Series: {what}. Timestamps are UTC hour starts.",
        f"Decision time (as_of): {hour_to_iso(case.as_of)}. Visible history: 336 hours "
        f"{hour_to_iso(case.history_start)} .. {hour_to_iso(case.last_visible)}; the 2 hours before as_of are not yet known.",
        f"Target window ({case.lead.replace('_', '-')}): {hour_to_iso(case.target_start)} to "
        f"{hour_to_iso(case.target_start + 24)}, forecast steps {case.target_steps[0]}..{case.target_steps[1]} after the last visible hour.",
        "Calendar: " + calendar_facts(case),
        "History: " + historical_facts(case),
    ]
    if scenario_text:
        lines.append("Context: " + scenario_text)
    if task == "decision":
        unit = case.series.unit
        lines += [
            f"Contract: choose 8 capacities b00..b07, one per 3-hour block of the target window, each equal to "
            f"scale x level with level in {{0.40, 0.45, ..., 2.00}} and scale = {s!r} {unit} (mean of the visible history, "
            f"full precision). Adjacent blocks may differ by at most {RAMP:.2f} in level (6 grid steps).",
            capacity_grid_line(s, unit),
            f"Loss: mean over the 24 target hours of {ALPHA}*max(a-y,0) + w_h*max(y-a,0) with a and y divided by scale; "
            f"shortage weights w_h for this day: {', '.join(f'{w:g}' for w in case.shortage[::6])} for hours 0-5, 6-11, 12-17, 18-23.",
            objective_line(budget),
            SUBMIT_LINE,
        ]
    else:
        lines += [
            "Task: forecast the 24 target hours. Submit either 9 quantiles (levels 0.1..0.9, non-decreasing) per hour "
            "as {\"tool\": \"submit\", \"args\": {\"quantiles\": [[q0.1, ..., q0.9], ... 24 rows]}} or samples as "
            "{\"tool\": \"submit\", \"args\": {\"samples\": [[24 values], ... at least 2 rows]}}.",
            "Score: Region-of-Interest CRPS (lower is better): the hours named in the context weigh half, bounds stated "
            "in the context are enforced by a penalty; credits spent may add a cost. Samples are scored as the "
            "distribution they form (equal weights); 9 quantiles as the same distribution: their 9 values as equally "
            "weighted atoms, exactly like the same numbers sent as 9 samples.",
        ]
    lines.append(f"Forecast budget: {budget} credits. Tool-call limit: {max_calls} (submit does not count; call "
                 f"{max_calls + 1} ends the episode as invalid). Tools: {', '.join(tools)}.")
    return "\n".join(lines)
