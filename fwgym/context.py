"""Plain-language case context shown to agents (the ``context`` observation).

States what the series is, units, place, as_of, the target window, the contract, the objective,
budget, call limit and tools. It never contains a value at or after ``as_of - 2 h``.
"""
from __future__ import annotations

from fwgym.cases import Case
from fwgym.contract import ALPHA, RAMP
from fwgym.series import hour_to_iso

_DOMAIN_TEXT = {
    "electricity": (
        "hourly electricity demand (MW, hourly integrated mean) of the {name} ({sid}) balancing authority, "
        "U.S. EIA Form EIA-930"
    ),
    "cycle_hire": (
        "hourly bike-hire departures (completed trips started per hour) at the Santander Cycles docking station "
        "{name} (TfL station {sid}), London"
    ),
}


def render_context(case: Case, budget: int, max_calls: int, tools: tuple[str, ...]) -> str:
    """Context text of ``case`` (ASCII, newline-separated)."""
    what = _DOMAIN_TEXT[case.domain].format(name=case.series.name, sid=case.series_id)
    s = case.scale
    lines = [
        f"Series: {what}. Timestamps are UTC hour starts.",
        f"Decision time (as_of): {hour_to_iso(case.as_of)}. Visible history: 336 hours "
        f"{hour_to_iso(case.history_start)} .. {hour_to_iso(case.last_visible)}; the 2 hours before as_of are not yet known.",
        f"Target window ({case.lead.replace('_', '-')}): {hour_to_iso(case.target_start)} to "
        f"{hour_to_iso(case.target_start + 24)} (target date {case.target_date.isoformat()}, "
        f"{case.target_date.strftime('%A')}), forecast steps {case.target_steps[0]}..{case.target_steps[1]} after the last visible hour.",
        f"Contract: choose 8 capacities b00..b07, one per 3-hour block of the target window, each equal to "
        f"scale x level with level in {{0.40, 0.45, ..., 2.00}} and scale = {s:.6g} {case.series.unit} (mean of the visible history). "
        f"Adjacent blocks may differ by at most {RAMP:.2f} in level (6 grid steps).",
        f"Loss: mean over the 24 target hours of {ALPHA}*max(a-y,0) + w_h*max(y-a,0) with a and y divided by scale; "
        f"shortage weights w_h for this day: {', '.join(f'{w:g}' for w in case.shortage[::6])} for hours 0-5, 6-11, 12-17, 18-23.",
        f"Objective: minimise S = 0.5*((loss - best possible loss)/sigma + credits spent/{budget}). "
        f"Forecast budget: {budget} credits. Tool-call limit: {max_calls} (submit does not count; call {max_calls + 1} ends the episode as invalid).",
        f"Tools: {', '.join(tools)}. Submit with {{\"tool\": \"submit\", \"args\": {{\"decisions\": "
        f"[{{\"decision_id\": \"b00\", \"value\": <capacity>}}, ...]}}}}.",
    ]
    return "\n".join(lines)
