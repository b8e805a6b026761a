"""Records cross-checked against the traces of their episodes (DESIGN §9 trust; SECURITY.md, "What a re-hash can fool").

A run's manifest hashes its records, not its traces, and a hash is no signature: whoever edits ``results.jsonl``
can recompute the manifest's sha256s. Re-scoring (:mod:`fwgym.evaluation.verify`) then sees a consistent record (a
better submission with its true score), and a replay (:mod:`fwgym.evaluation.replay`) sees a legal episode when the
recorded calls were typed in consistently. What the forger did not rewrite is the episode's trace: an LLM agent (and
``fwgym mcp serve``, ``fwgym import-inspect``) writes one line per episode to the run's ``traces.jsonl`` with the
model's replies, the env actions it took (``steps``, the ``submit`` among them), the record the env gave it
(``record``) and its score (``score``). :func:`check_traces` refuses a record that contradicts its episode's trace:

* a scored record without a trace of its episode (same ``episode_id``; a record without one: the last trace of its
  policy and case), for an LLM policy of ``fwgym evaluate`` (:func:`traced_policies`) and for any policy that has
  traces in the file;
* a trace of another policy or case than the record's;
* the trace's ``score`` (S, R, loss, floor, credits, calls, valid, status) or ``record`` (those, the levels, the
  submission, the tool counts and every recorded call) other than the record's;
* the trace's last ``submit`` action (``steps``) other than the record's last ``submit`` call, or its final plan's
  levels other than the record's levels.

A trace cut to its size bound (``truncated``) is compared without its submission, calls and steps (they may be
cut); the counts say how many. A record of a killed session (status ``running`` in the manifest's ``sessions``) may
lack its trace honestly: the record is written before the agent's ``end_episode`` writes the trace, and a kill can
fall between them; such records are counted (``untraced``), not refused, and ``fwgym verify`` says how many. What this cannot see is a forgery of the records, the traces and the manifest
together: without a signature the files are only as trustworthy as whoever last wrote them (SECURITY.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from fwgym.evaluation.records import FORECAST_TASK_FIELDS, SCORE_VALUE_FIELDS, is_scored
from fwgym.evaluation.rundir import TRACES_FILE
from fwgym.evaluation.verify import same_value
from fwgym.jsonl import iter_jsonl

__all__ = ["TRACED_KINDS", "TraceCheck", "traced_policies", "check_traces"]

#: the agent kinds (a run manifest's ``settings.agents.<policy>.kind``) that always write one trace per episode to the
#: run directory's ``traces.jsonl``: the LLM agents of ``fwgym evaluate`` (unless ``--trace-out`` sends them
#: elsewhere). ``fwgym mcp serve`` and ``fwgym import-inspect`` write traces too, but their API
#: (:func:`fwgym.integrations.runs.add_episodes`) may add episodes without: their records are checked where their
#: policy has traces in the file
TRACED_KINDS: tuple[str, ...] = ("openai", "transformers")
#: the record fields a trace's ``record`` must repeat (numbers with the re-scorer's tolerance)
_OUTCOME = ("status", "valid", "levels", "credits", "calls", "tool_counts", *SCORE_VALUE_FIELDS, *FORECAST_TASK_FIELDS,
            "submission", "tool_calls")
#: what a size-bounded trace may have cut
_CUTTABLE = ("submission", "tool_calls")
#: the trace ``score`` fields compared (its ``reason`` is text a trace may scrub)
_SCORE = ("S", "R", "loss", "floor", "credits", "calls", "valid", "status")


@dataclass
class TraceCheck:
    """What :func:`check_traces` compared: per policy, records cross-checked with their trace, and how many of those
    traces were size-bounded (compared without submission, calls and steps); ``elsewhere``: traced policies whose
    traces the run wrote to another file (``--trace-out``), not cross-checked; ``untraced``: records of killed sessions
    without a trace."""

    checked: dict[str, int] = field(default_factory=dict)
    truncated: dict[str, int] = field(default_factory=dict)
    elsewhere: list[str] = field(default_factory=list)
    #: records of killed sessions without a trace (not cross-checked), per policy
    untraced: dict[str, int] = field(default_factory=dict)


def traced_policies(manifest: Mapping | None) -> tuple[list[str], list[str]]:
    """``(in the run directory, elsewhere)``: the policies of a run manifest whose agents always write a trace per
    episode (:data:`TRACED_KINDS`): to the run's ``traces.jsonl``, or to another file (``--trace-out``)."""
    st = (manifest or {}).get("settings") or {}
    found = st.get("agents")
    agents: Mapping = found if isinstance(found, Mapping) else {}
    traced = sorted(p for p, d in agents.items() if isinstance(d, Mapping) and d.get("kind") in TRACED_KINDS)
    args = (manifest or {}).get("args") or {}
    if isinstance(args, Mapping) and args.get("trace_out"):
        return [], traced
    return traced, []


def _action(action: Any) -> Any:
    """An action as data (a JSON text parsed; anything else as it is)."""
    if isinstance(action, str):
        try:
            return json.loads(action)
        except ValueError:
            return action
    return action


def _last_submit(actions: Sequence[Any]) -> Any:
    """The arguments of the last ``submit`` among ``actions`` (``None``: none)."""
    for a in reversed([_action(x) for x in actions]):
        if isinstance(a, Mapping) and a.get("tool") == "submit":
            return a.get("args")
    return None


def _extract(trace: Mapping) -> dict:
    """What a trace line says about its episode's outcome (the rest is not kept)."""
    rec = trace.get("record") if isinstance(trace.get("record"), Mapping) else None
    steps = trace.get("steps") if isinstance(trace.get("steps"), list) else None
    plan = trace.get("final_plan") if isinstance(trace.get("final_plan"), Mapping) else None
    return {"policy": trace.get("policy"), "case_id": trace.get("case_id"), "truncated": bool(trace.get("truncated")),
            "score": trace.get("score") if isinstance(trace.get("score"), Mapping) else None,
            "record": {k: rec[k] for k in _OUTCOME if k in rec} if rec is not None else None,
            "submit": _last_submit([s.get("action") for s in steps if isinstance(s, Mapping)]) if steps else None,
            "has_steps": bool(steps), "levels": plan.get("levels") if plan is not None else None,
            "has_plan": plan is not None and "levels" in plan}


def _differences(record: Mapping, t: Mapping) -> list[str]:
    """What the trace ``t`` (:func:`_extract`) says otherwise than ``record``."""
    out = []
    if t["policy"] != record.get("policy") or t["case_id"] != record.get("case_id"):
        out.append(f"the trace is of policy {t['policy']!r} on case {t['case_id']!r}")
    if t["score"] is None and t["record"] is None:
        out.append("the trace holds no outcome (no score, no record): it is the trace of an attempt that was not "
                   "scored, which cannot vouch for a scored record")
    score = t["score"] or {}
    out += [f"{k} {record.get(k)!r} recorded, {score.get(k)!r} in the trace's score" for k in _SCORE
            if k in score and not same_value(record.get(k), score.get(k))]
    if t["record"] is not None:
        keys = [k for k in _OUTCOME if not (t["truncated"] and k in _CUTTABLE)]
        out += [f"{k} {str(record.get(k))[:120]} recorded, {str(t['record'].get(k))[:120]} in the trace's record"
                for k in keys if (k in record or k in t["record"]) and not same_value(record.get(k), t["record"].get(k))]
    if t["has_plan"] and not same_value(record.get("levels"), t["levels"]):
        out.append(f"levels {record.get('levels')!r} recorded, {t['levels']!r} in the trace's final plan")
    if t["has_steps"] and not t["truncated"]:
        mine = _last_submit([c.get("action") if isinstance(c, Mapping) else c for c in record.get("tool_calls") or []])
        if record.get("tool_calls") and not same_value(mine, t["submit"]):
            out.append(f"the recorded submit {json.dumps(mine)[:160]} is not the trace's submit "
                       f"{json.dumps(t['submit'])[:160]}")
    return out


def check_traces(records_path: Path, manifest: Mapping | None, records: Sequence[Mapping],
                 lines: Sequence[int]) -> TraceCheck:
    """Cross-check every scored record of a traced policy against its episode's trace (module docstring).

    Args:
        records_path: the run's ``results.jsonl`` (``traces.jsonl`` beside it is read, line by line).
        manifest: the run's manifest (:func:`traced_policies`). records, lines: the records and their line numbers.

    Returns:
        the :class:`TraceCheck` counts.

    Raises:
        ValueError: naming ``results.jsonl:line`` and ``traces.jsonl:line`` and what differs (the first record).
    """
    required, elsewhere = traced_policies(manifest)
    path = records_path.parent / TRACES_FILE
    report = TraceCheck(elsewhere=elsewhere)
    traces: dict[Any, tuple[int, dict]] = {}
    if path.is_file():
        for n, t in iter_jsonl(path):
            ex = _extract(t)
            if t.get("episode_id") is not None:
                traces[("episode", t["episode_id"])] = (n, ex)
            traces[("pair", ex["policy"], ex["case_id"])] = (n, ex)
    present = {k[1] for k in traces if k[0] == "pair"}
    must = (set(required) | present) - set(elsewhere)
    killed = {str(x.get("session")) for x in (manifest or {}).get("sessions") or []
              if isinstance(x, Mapping) and x.get("status") == "running"}
    for n, r in zip(lines, records):
        p = r["policy"]
        if p not in must or not is_scored(r):
            continue
        head = f"{records_path}:{n}: record of policy {p!r} on case {r.get('case_id')!r}"
        eid = r.get("episode_id")
        found = traces.get(("episode", eid)) if eid is not None else traces.get(("pair", p, r.get("case_id")))
        if found is None and str(eid or "").partition(":")[0] in killed:
            report.untraced[p] = report.untraced.get(p, 0) + 1
            continue
        if found is None:
            raise ValueError(f"{head}: its episode {eid!r} has no trace in {path} (policy {p!r} writes one per "
                             "episode); refused: the records or the traces were edited, or a trace was deleted")
        tn, t = found
        bad = _differences(r, t)
        if bad:
            raise ValueError(f"{head} contradicts the trace of its episode ({path}:{tn}): " + "; ".join(bad[:3])
                             + "; refused: the record was edited (and the manifest re-hashed)")
        report.checked[p] = report.checked.get(p, 0) + 1
        if t["truncated"]:
            report.truncated[p] = report.truncated.get(p, 0) + 1
    return report
