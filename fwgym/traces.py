"""Agent traces (JSONL): their shape (:class:`Trace`), reading them for the report and the figures, and turning
traces or replays into page data.

Trace schema (one JSON object per line, :class:`Trace`; any other field is ignored, so the richer traces written
by :class:`fwgym.agents.chat.ChatAgent` are read as they are):

* required: ``policy`` (str, the results' policy name), ``case_id`` (str) and ``messages``: a list of
  OpenAI-style chat messages ``{"role": "system" | "user" | "assistant" | "tool", "content": str | null}``,
  an assistant message optionally with ``tool_calls: [{"id", "function": {"name", "arguments"}}]``, a
  tool message optionally with ``tool_call_id``. ``content`` may also be a list of ``{"type": "text",
  "text": ...}`` parts.
* optional: ``steps``: one dict per env action, in order (:class:`TraceStep`): ``{"action": {"tool", "args"},
  "env_result": the env's result JSON (:class:`~fwgym.tools.results.ToolResult`) or null, "budget_left",
  "calls_left", "kind", "error": {"code", "message"}}``; ``score`` (:class:`TraceScore`: ``S, R, loss, floor,
  credits, calls, valid, status, reason``); ``agent_status`` and ``agent_status_detail``; ``replies``
  (:class:`TraceReply`: ``[{"turn", "reasoning", "finish_reason", "latency_s", "usage"}]``, matched to the n-th
  assistant message); ``backend``, ``settings``, ``turns``, ``wall_s``, ``usage``, ``started``.

A line without ``policy`` or ``case_id`` (an episode that never ended) is skipped with a warning; when
a (policy, case) pair appears twice, the last line wins (reruns append).

The writers: :mod:`fwgym.agents.chat.traces` (LLM agents), ``fwgym mcp`` and the inspect-ai log import; the check
of a file's shapes: :mod:`fwgym.cli.trace_shape`; the readers: this module and ``fwgym show-trace``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypedDict, cast

from fwgym.jsonl import iter_jsonl
from fwgym.core.series import iso_to_hour
from fwgym.tools.results import ToolErrorInfo, ToolResult


class TraceStep(TypedDict, total=False):
    """One env action of a trace (``steps``; :attr:`fwgym.agents.chat.session.ChatSession.steps`), in order.

    Every field may be absent in a file (``fwgym mcp`` writes ``action`` and ``env_result`` only).
    """

    #: the model reply it came from (1-based; 0 before the first reply)
    turn: int
    #: ``"native"`` (a native tool call), ``"text"`` (JSON in the reply text) or ``"agent"`` (the harness's own)
    source: str
    #: ``"tool"``, ``"answer"`` (submit), ``"error"`` (a reply that could not be used: one counted call),
    #: ``"abandon"`` (the agent gave up) or ``"direct_samples"`` (the direct prompt's submit)
    kind: str
    #: the env action ``{"tool", "args"}``
    action: dict[str, Any]
    #: the native tool call's id
    tool_call_id: str
    #: how the reply text was read (:meth:`fwgym.agents.chat.parsing.ParsedReply.to_json`)
    parse: dict[str, Any]
    #: why the reply was not used (``kind`` error) or why the agent gave up (``kind`` abandon)
    error: ToolErrorInfo | None
    #: argument names a strict tool call sent as null and the harness dropped
    dropped_null_arguments: list[str]
    #: the env's result of the action (``None``: the agent never saw one; a string: unreadable JSON)
    env_result: ToolResult | str | None
    #: the ledger after the action (``None`` when no result was seen)
    calls_left: int | None
    budget_left: int | None


class TraceReply(TypedDict, total=False):
    """One model reply of a trace (``replies``; :func:`fwgym.agents.chat.traces.reply_json`), then the backend's
    details (:attr:`fwgym.agents.chat.session.ModelReply.meta`: the fields below and any other the backend sets)."""

    turn: int
    content: str | None
    finish_reason: str | None
    #: ``[{"id", "name", "arguments", "original_chars" (when cut)}]``
    tool_calls: list[dict[str, Any]]
    reasoning: str
    # -- backend details
    latency_s: float
    requests: int
    attempts: int
    #: token counts (``prompt_tokens``, ``completion_tokens``, ...)
    usage: dict[str, int]
    #: the model the server says answered
    model: str
    cached: bool
    cached_prompt_tokens: int
    truncated_from_chars: int


class TraceScore(TypedDict, total=False):
    """The env record's score fields copied into a trace (``score``; ``None`` where the record has none)."""

    S: float | None
    R: float | None
    loss: float | None
    floor: float | None
    credits: int | None
    calls: int | None
    valid: bool | None
    status: str | None
    reason: str | None


class TraceFinalPlan(TypedDict):
    """``final_plan``: the scored levels (``None`` when invalid) and the arguments of the last ``submit``."""

    levels: list[float] | None
    submitted: Any


class TraceHarnessError(TypedDict):
    """``harness_error``: the infrastructure failure that ended the episode unscored."""

    kind: str
    message: str


class TraceDirectSamples(TypedDict):
    """``direct_samples``: what the direct prompt's completions gave (CiK's sampling)."""

    requested: int
    completions: int
    valid: int
    rejected: dict[str, int]
    outcomes: list[str]


class Trace(TypedDict, total=False):
    """One trace line (module docstring), fields in the order :mod:`fwgym.agents.chat.traces` writes them.

    Every field may be absent in a file read (other writers write fewer; :mod:`fwgym.cli.trace_shape` checks the
    JSON types of those that are present).
    """

    trace_version: int
    #: a random hex id of the trace line
    trace_id: str
    #: the run layer's id of the episode (as in the run's records); ``None`` outside a run
    episode_id: str | None
    policy: str
    backend: str
    #: the agent's settings (:meth:`fwgym.agents.chat.ChatAgent.describe`)
    settings: dict[str, Any]
    native_tools: bool
    tools: list[str]
    #: ISO 8601 UTC time the episode started
    started: str
    case_id: str | None
    #: ``"running"``, ``"ok"``, an abandon status (``max_turns``, ``context_exhausted``, ...) or ``"harness_error"``
    agent_status: str
    agent_status_detail: str | None
    harness_error: TraceHarnessError | None
    replies: list[TraceReply]
    #: the chat, OpenAI-style message dicts
    messages: list[dict[str, Any]] | None
    steps: list[TraceStep] | None
    #: the env's final record (:class:`fwgym.evaluation.records.Record`)
    record: dict[str, Any] | None
    score: TraceScore | None
    final_plan: TraceFinalPlan | None
    direct_samples: TraceDirectSamples
    turns: int
    wall_s: float
    #: token counts summed over the replies
    usage: dict[str, int]
    #: :meth:`fwgym.agents.chat.ChatAgent.episode_stats`
    stats: dict[str, Any] | None
    notices: list[str]
    #: the line was cut to the trace-line bound (:func:`fwgym.agents.chat.traces.bound_trace`)
    truncated: bool


#: the fields of the env record copied into a trace's ``score`` (:class:`TraceScore`)
SCORE_FIELDS: tuple[str, ...] = tuple(TraceScore.__annotations__)


def trace_score(record: Mapping[str, Any]) -> TraceScore:
    """A trace's ``score``: the :data:`SCORE_FIELDS` of an env record, in order (``None`` where it has none)."""
    return cast(TraceScore, {k: record.get(k) for k in SCORE_FIELDS})

#: messages longer than this start collapsed (their first line is shown)
OPEN_CHARS = 2500


def load_traces(paths: Iterable[str | Path] | str | Path | None) -> tuple[dict[tuple[str, str], Trace], list[str]]:
    """Read trace files.

    Args:
        paths: JSONL files (one trace per line), a single path, or ``None``.

    Returns:
        ``({(policy, case_id): trace}, warnings)``.

    Raises:
        FileNotFoundError: a file does not exist. ValueError: a line is not a JSON object (file and
            line number given).
    """
    if paths is None:
        return {}, []
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: dict[tuple[str, str], Trace] = {}
    warnings: list[str] = []
    for p in map(Path, paths):
        if not p.is_file():
            raise FileNotFoundError(f"no trace file {p}")
        skipped = 0
        for n, t in iter_jsonl(p):
            pol, cid = t.get("policy"), t.get("case_id") or (t.get("record") or {}).get("case_id")
            if not isinstance(pol, str) or not isinstance(cid, str):
                skipped += 1
                continue
            if (pol, cid) in out:
                warnings.append(f"{p}:{n}: a second trace of {pol} on {cid}; the last one is shown")
            out[(pol, cid)] = t
        if skipped:
            warnings.append(f"{p}: {skipped} trace(s) without policy or case_id skipped (episodes that never ended)")
    return out, warnings


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for c in content:
            if isinstance(c, dict):
                parts.append(str(c.get("text", c.get("content", ""))) if c.get("type", "text") == "text"
                             else f"[{c.get('type')} part]")
            else:
                parts.append(str(c))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, indent=1)


def _pretty_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return json.dumps(args, ensure_ascii=False, indent=1) if not isinstance(args, str) else args


def transcript(trace: Trace) -> list[dict]:
    """Page data of a trace's messages: ``[{"role", "content", "tool_calls", "tool_call_id", "reasoning",
    "meta", "open", "preview", "chars", "turn"}]`` (the system message and long messages start closed)."""
    replies = [r for r in trace.get("replies") or [] if isinstance(r, dict)]
    by_turn = {r.get("turn"): r for r in replies}
    out, turn = [], 0
    for m in trace.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", "?"))
        content = _text(m.get("content"))
        calls = []
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc) if isinstance(tc, dict) else {}
            calls.append({"id": tc.get("id") if isinstance(tc, dict) else None, "name": fn.get("name"),
                          "arguments": _pretty_args(fn.get("arguments"))})
        reasoning, meta = None, []
        if role == "assistant":
            turn += 1
            r = by_turn.get(turn) or (replies[turn - 1] if turn - 1 < len(replies) and "turn" not in replies[turn - 1] else {})
            reasoning = r.get("reasoning")
            if r.get("finish_reason"):
                meta.append(f"finish: {r['finish_reason']}")
            if r.get("latency_s") is not None:
                meta.append(f"{r['latency_s']} s")
            usage = r.get("usage") or {}
            if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                meta.append(f"{usage.get('prompt_tokens', '?')} → {usage['completion_tokens']} tokens")
        size = len(content) + sum(len(c["arguments"] or "") for c in calls)
        first = next((ln.strip() for ln in content.splitlines() if ln.strip()), "")
        if not first and calls:
            first = ", ".join(f"{c['name']}(…)" for c in calls)
        out.append({"role": role, "content": content, "tool_calls": calls, "tool_call_id": m.get("tool_call_id"),
                    "reasoning": reasoning, "meta": meta, "turn": turn if role == "assistant" else None,
                    "open": role != "system" and size <= OPEN_CHARS, "chars": size,
                    "preview": first[:140] + ("…" if len(first) > 140 else "")})
    return out


def brief(value: Any, limit: int = 220) -> str:
    """Compact one-line JSON of a tool argument or result: long lists become ``[N values]``."""
    def shrink(v, depth=0):
        if (isinstance(v, list) and v and all(isinstance(x, dict) and set(x) == {"decision_id", "value"} for x in v)):
            return {str(x["decision_id"]): shrink(x["value"]) for x in v}  # a plan's decisions, compactly
        if isinstance(v, list):
            if len(v) > 8 or (v and isinstance(v[0], list)):
                return f"[{len(v)} values]"
            return [shrink(x, depth + 1) for x in v]
        if isinstance(v, dict):
            return {k: shrink(x, depth + 1) for k, x in v.items()}
        if isinstance(v, float):
            return float(f"{v:.6g}")
        return v

    s = json.dumps(shrink(value), ensure_ascii=False, separators=(", ", ": "))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def iso_hour_or_none(text: str) -> int | None:
    """Epoch hour of an ISO time such as ``"2024-07-24T21:00:00Z"`` (``None`` when unparsable)."""
    try:
        return iso_to_hour(text)
    except (TypeError, ValueError, OverflowError):
        return None


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(value)


def _action(a: Any) -> dict:
    if isinstance(a, str):
        try:
            a = json.loads(a)
        except ValueError:
            return {"tool": "invalid", "args": a[:200]}
    return a if isinstance(a, dict) else {"tool": "invalid", "args": str(a)[:200]}


def _call_row(n: int, action: dict, res: ToolResult | str | None, charged: float | None, calls_left: Any, budget_left: Any,
              note: str = "") -> dict:
    tool = str(action.get("tool", "?"))
    args = action.get("args", {})
    short = brief(args)
    row = {"n": n, "tool": tool, "args": short, "args_full": _pretty_args(args) if short != _compact(args) else "",
           "credits": 0 if charged is None and tool == "submit" else charged, "calls_left": calls_left,
           "budget_left": budget_left, "ok": None, "result": "", "result_full": "", "note": note}
    if isinstance(res, dict):
        row["ok"] = bool(res.get("ok"))
        body = res.get("result") if res.get("ok") else res.get("error")
        row["result"] = brief(body)
        if row["result"] != _compact(body):
            row["result_full"] = json.dumps(body, ensure_ascii=False, indent=1)
        if not res.get("ok") and isinstance(body, dict):
            row["result"] = f"{body.get('code')}: {body.get('message', '')}"[:300]
            row["result_full"] = ""
    elif res is not None:
        row["result"] = str(res)[:300]
    return row


def calls_from_trace(trace: Trace, total_credits: float | None) -> list[dict]:
    """Tool calls of a trace in order (from ``steps``): tool, arguments, result, credits charged.

    Credits per call are differences of ``budget_left`` (the start budget is the last known
    ``budget_left`` plus the episode's total credits); without them, a result's own ``credits``.
    """
    steps = [s for s in trace.get("steps") or [] if isinstance(s, dict)]
    lefts = [s.get("budget_left") for s in steps if isinstance(s.get("budget_left"), (int, float))]
    prev = (lefts[-1] + total_credits) if lefts and isinstance(total_credits, (int, float)) else None
    rows = []
    for n, s in enumerate(steps, 1):
        action = _action(s.get("action"))
        res = s.get("env_result")
        left = s.get("budget_left")
        charged = None
        if isinstance(left, (int, float)) and prev is not None:
            charged, prev = prev - left, left
        elif isinstance(res, dict) and res.get("ok") and isinstance(res.get("result"), dict):
            charged = res["result"].get("credits") if action.get("tool") in ("forecast", "replay") else 0
        note, error = "", s.get("error")
        if s.get("kind") == "error" and isinstance(error, dict):
            note = f"reply not usable: {error.get('code')}"
        elif s.get("kind") == "abandon" and isinstance(error, dict):
            note = f"agent gave up: {error.get('code')}"
        if res is None and action.get("tool") == "submit":
            score: TraceScore = trace.get("score") or {}
            status = score.get("status")
            res = {"tool": "submit", "ok": bool(score.get("valid")), "result": {"status": status}} if status else None
        rows.append(_call_row(n, action, res, charged, s.get("calls_left"), left, note))
    return rows


def calls_from_log(log: Sequence[dict], budget: float | None = None) -> list[dict]:
    """Tool calls of a replayed episode: ``log`` = ``[{"action", "result" (last_result JSON text),
    "calls_left", "info"}, ...]``, one per env step; credits per call from the env's running total."""
    rows, prev = [], 0.0
    for n, e in enumerate(log, 1):
        raw, info = e.get("result"), e.get("info") or {}
        try:
            res = json.loads(raw) if raw else None
        except ValueError:
            res = raw
        spent = info.get("credits", prev)
        charged, prev = spent - prev, spent
        rows.append(_call_row(n, _action(e.get("action")), res, charged, e.get("calls_left"), info.get("budget_left")))
    return rows


def bands_from_calls(trace_or_log_results: Sequence[ToolResult | str | None]) -> list[dict]:
    """Purchased forecasts among tool results: ``[{"label", "start_hour", "quantiles"}]``."""
    out = []
    for res in trace_or_log_results:
        if not (isinstance(res, dict) and res.get("ok") and res.get("tool") == "forecast"):
            continue
        body = res.get("result") or {}
        q, start = body.get("quantiles"), iso_to_hour(body.get("start"))
        if q and start is not None:
            out.append({"label": f"{body.get('forecast_id', 'forecast')} {body.get('model', '')}".strip(),
                        "start_hour": start, "quantiles": q})
    return out


def trace_results(trace: Trace) -> list[ToolResult | str | None]:
    """The env results of a trace's steps, in order."""
    return [s.get("env_result") for s in trace.get("steps") or [] if isinstance(s, dict)]


__all__ = ["Trace", "TraceStep", "TraceReply", "TraceScore", "TraceFinalPlan", "TraceHarnessError", "TraceDirectSamples",
           "SCORE_FIELDS", "trace_score", "load_traces", "transcript", "calls_from_trace", "calls_from_log", "bands_from_calls", "trace_results",
           "brief", "iso_hour_or_none"]
