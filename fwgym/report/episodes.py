"""Episode pages of the report: the scored view of a case (:class:`Cases`), the tool calls in order (from a
trace or a replay of a registered baseline), the block and hour tables, and the page itself
(:func:`episode_page`, run in this process or a worker)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from fwgym.plots import submitted_forecast
from fwgym.report import charts
from fwgym.report.templating import environment
from fwgym.traces import bands_from_calls, calls_from_log, calls_from_trace, trace_results, transcript

__all__ = ["Cases", "WORKER", "episode_page", "replay_calls"]


class Cases:
    """Hindsight data of a case under a suite's env settings (cached): :class:`fwgym.plots.CaseData`
    (the case, scored and raw target, perfect-demand plan, Region of Interest, scenario, context text)."""

    def __init__(self):
        self._data: dict = {}

    def env(self, domain: str, split: str, suite: str):
        from fwgym.plots import suite_env

        return suite_env(domain, split, suite)

    def get(self, rec: dict, suite: str):
        from fwgym.plots import case_data

        key = (rec["case_id"], suite)
        if key not in self._data:
            self._data[key] = case_data(rec, suite)
        return self._data[key]


def replay_calls(policy: str, rec: dict, cases: Cases, suite: str) -> tuple[list[dict] | None, str]:
    """Rerun a registered baseline on the case and log every tool call; the log is used only when
    the rerun reproduces the recorded score, credits and validity."""
    from fwgym.agents.base import run_episode
    from fwgym.baselines.oracles import oracle_grant
    from fwgym.baselines.registry import TSFM_POLICIES, make_policy
    from fwgym.wrappers.record import RecordToolCalls

    if policy in TSFM_POLICIES:
        return None, "TSFM policies are not replayed"
    try:
        agent = make_policy(policy)
    except (ValueError, KeyError):
        return None, ""

    env = RecordToolCalls(cases.env(rec["domain"], rec["split"], suite))
    try:
        out = run_episode(env, agent, options={"case_id": rec["case_id"]}, hindsight=oracle_grant(agent)).record
    except Exception as exc:  # a failing replay must not stop the report
        return None, f"replay failed: {type(exc).__name__}: {str(exc)[:200]}"
    same = (abs(float(out["S"]) - float(rec["S"])) <= 1e-9 * max(1.0, abs(float(rec["S"])))
            and float(out["credits"]) == float(rec["credits"]) and bool(out["valid"]) == bool(rec["valid"]))
    if not same:
        return None, (f"a replay of {policy} gave S {out['S']:.6f}, credits {out['credits']} "
                      f"(recorded S {rec['S']:.6f}, credits {rec['credits']}): the calls are not shown in order")
    return env.calls, ""


def _block_table(case, rec: dict, data) -> list[dict]:
    from fwgym.core.series import hour_to_iso

    y = data.target
    rows = []
    for b in range(8):
        h0 = int(case.target_start) + 3 * b
        lv = (rec.get("levels") or [None] * 8)[b]
        rows.append({"block": f"b{b:02d}", "start": hour_to_iso(h0)[11:16], "end": hour_to_iso(h0 + 3)[11:16],
                     "level": lv, "capacity": None if lv is None else lv * case.scale,
                     "perfect": data.perfect_levels[b] * case.scale, "demand_mean": float(y[3 * b: 3 * b + 3].mean()),
                     "demand_max": float(y[3 * b: 3 * b + 3].max())})
    return rows


def _hour_table(case, data, submitted) -> list[dict]:
    """Rows of the forecast suite's hourly table: the scored target, the raw series where a scenario
    changed it, the Region of Interest, bounds and the submitted forecast's 10/50/90% quantiles."""
    from fwgym.plots import forecast_band
    from fwgym.core.series import hour_to_iso

    band = forecast_band(submitted) if submitted is not None else None
    rows = []
    for h in range(24):
        rows.append({"hour": hour_to_iso(int(case.target_start) + h)[11:16], "target": float(data.target[h]),
                     "raw": float(data.raw_target[h]), "roi": bool(data.roi[h]) if data.roi is not None else False,
                     "upper": None if data.upper is None or not np.isfinite(data.upper[h]) else float(data.upper[h]),
                     "lower": None if data.lower is None or not np.isfinite(data.lower[h]) else float(data.lower[h]),
                     "q10": None if band is None else float(band[h, 0]), "q50": None if band is None else float(band[h, 1]),
                     "q90": None if band is None else float(band[h, 2])})
    return rows


def _policy_band(case, policy: str, calls: list[dict] | None):
    """The policy's own predictive band: its classical method, or the last classical method it planned with."""
    from fwgym.forecasters.classical import CLASSICAL_METHODS
    from fwgym.plots import policy_forecast_band

    method = policy if policy in CLASSICAL_METHODS else None
    for c in reversed(calls or []):
        if method is None and c["tool"] in ("classical_plan", "plan") and c["ok"]:
            m = re.search(r'"method": "([a-z_]+)"', c["args"])
            if m and m.group(1) in CLASSICAL_METHODS:
                method = m.group(1)
    if method is None:
        return None
    try:
        band = policy_forecast_band(case, method)
    except Exception:  # a band is a nicety
        return None
    return None if band is None else (band[0], f"{method} predictive 10-90%")


WORKER: dict = {}


def episode_page(job: dict) -> tuple[str, str]:
    """Write one episode page (runs in this process or a worker); returns ``(path, replay note)``."""
    if "cases" not in WORKER:
        WORKER["cases"], WORKER["env"] = Cases(), environment()
    cases = WORKER["cases"]
    p, rec, suite, trace = job["policy"], job["rec"], job["suite"], job["trace"]
    data = cases.get(rec, suite)
    case = data.case
    calls, bands, source, note, actions = None, [], "counts", "", []
    if trace is not None and trace.get("steps"):
        calls, source = calls_from_trace(trace, rec.get("credits")), "trace"
        bands = bands_from_calls(trace_results(trace))
        actions = [s.get("action") for s in trace["steps"] if isinstance(s, dict)]
    elif job["replay"] and trace is None:
        log, note = replay_calls(p, rec, cases, suite)
        if log is not None:
            calls, source = calls_from_log(log), "replay"
            bands = bands_from_calls([_loads(e["result"]) for e in log])
            actions = [e.get("action") for e in log]
    submitted = submitted_forecast(rec, actions) if suite == "forecast" else None
    chart = charts.episode_charts(data, rec, bands=bands, policy_band=_policy_band(case, p, calls),
                                  submitted=submitted, history_hours=job["history_hours"])
    html = WORKER["env"].get_template("episode.html").render(
        **job["context"], rec=rec, summary=case.summary(), case=case, data=data, suite=suite, chart=chart,
        blocks=_block_table(case, rec, data) if suite != "forecast" else [],
        hours=_hour_table(case, data, submitted) if suite == "forecast" else [], submitted=submitted,
        calls=calls, call_source=source, replay_note=note,
        tool_counts=sorted((rec.get("tool_counts") or {}).items()), trace=trace,
        messages=transcript(trace) if trace else None)
    path = Path(job["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return str(path), note


def _loads(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
