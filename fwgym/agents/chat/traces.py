"""LLM-agent traces: one JSON record per episode, appended to a JSONL file (schema version :data:`TRACE_VERSION`).

A trace holds every message, every env action with its result (:attr:`ChatSession.steps
<fwgym.agents.chat.session.ChatSession.steps>`), the model replies (text, tool calls, reasoning,
latency, token usage), the agent's status, the final plan and the score (from the env's record).
Fields, in order (:class:`fwgym.traces.Trace`, where every writer's and reader's field is named): ``trace_version``, ``trace_id``, ``episode_id`` (the run layer's id of the
episode, the same as in the run's records; ``None`` outside a run), ``policy``, ``backend``,
``settings``, ``native_tools``, ``tools``, ``started``, ``case_id``, ``agent_status``,
``agent_status_detail``, ``harness_error`` (``{"kind", "message"}`` when the episode ended on an
infrastructure failure, else ``None``), ``replies``, ``messages``, ``steps``, ``record``, ``score``,
``final_plan``, then ``turns``, ``wall_s``, ``usage`` (summed token counts), ``stats``
(:meth:`ChatAgent.episode_stats <fwgym.agents.chat.agent.ChatAgent.episode_stats>`), ``notices`` and
``truncated`` when the trace is finished.

Bounds and secrets: a trace line never exceeds :data:`MAX_TRACE_CHARS` characters (configurable per
agent): :func:`bound_trace` cuts the longest strings (with a notice ``...[fwgym: N characters cut]``)
until it fits, and sets ``truncated``. :func:`scrub` replaces every secret (the API key) in every
string with ``[redacted]``; the agent applies it to everything it writes. Credentials are never
part of a trace. :mod:`fwgym.traces` and ``fwgym show-trace`` read these files.
"""
from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence, cast

from fwgym.agents.chat.session import ChatSession, ModelReply
from fwgym.jsonl import append_jsonl, read_jsonl
from fwgym.traces import SCORE_FIELDS, Trace, TraceReply, trace_score
from fwgym.validation import is_number

TRACE_VERSION = 2
#: longest trace line written (characters of its JSON); :func:`bound_trace`
MAX_TRACE_CHARS = 2_000_000
#: what a secret is replaced with
REDACTED = "[redacted]"


def read_traces(path: str | os.PathLike) -> list[dict]:
    """All trace records of a JSONL file, in order (:func:`fwgym.jsonl.read_jsonl`).

    Raises:
        FileNotFoundError: no such file. ValueError: a line is not a JSON object (``path:line`` given).
    """
    return read_jsonl(path)


def new_trace(policy: str, backend: str, settings: Mapping, native_tools: bool, tools: Sequence[str],
              episode_id: str | None = None, case_id: str | None = None) -> Trace:
    """The trace of an episode that starts now (status ``"running"``, no replies yet)."""
    return {
        "trace_version": TRACE_VERSION, "trace_id": uuid.uuid4().hex, "episode_id": episode_id, "policy": policy,
        "backend": backend, "settings": dict(settings), "native_tools": native_tools, "tools": list(tools),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "case_id": case_id,
        "agent_status": "running", "agent_status_detail": None, "harness_error": None, "replies": [],
        "messages": None, "steps": None, "record": None, "score": None, "final_plan": None,
    }


def reply_json(turn: int, reply: ModelReply) -> TraceReply:
    """One model reply as a trace entry: turn, content, finish reason, tool calls, reasoning, backend meta."""
    out: dict[str, Any] = {"turn": turn, "content": reply.content, "finish_reason": reply.finish_reason,
           "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                           **({"original_chars": c.original_chars} if c.original_chars is not None else {})}
                          for c in reply.tool_calls]}
    if reply.reasoning:
        out["reasoning"] = reply.reasoning
    out.update(reply.meta or {})  # the backend's details: any keys it sets
    return cast(TraceReply, out)


def add_record(trace: Trace, record: Mapping, submitted: Any) -> None:
    """Store the env's final ``record`` in ``trace``: ``record``, ``case_id``, ``score`` (:data:`SCORE_FIELDS`)
    and ``final_plan`` (the scored ``levels`` and the ``submitted`` arguments)."""
    rec = dict(record)
    trace["record"] = rec
    trace["case_id"] = rec.get("case_id") or trace.get("case_id")
    trace["score"] = trace_score(rec)
    trace["final_plan"] = {"levels": rec.get("levels"), "submitted": submitted}


def finish_trace(trace: Trace, session: ChatSession, status: str, settings: Mapping, wall_s: float,
                 stats: Mapping | None = None) -> None:
    """Complete ``trace`` from the episode's ``session``: agent status (unless already set), settings,
    messages, steps, turns, wall time (s), the token usage summed over the replies, ``stats`` and the
    session's notices."""
    if trace["agent_status"] == "running":
        trace["agent_status"] = status
    trace["settings"] = dict(settings)
    trace["messages"] = session.messages
    trace["steps"] = session.steps
    trace["turns"] = session.turns
    trace["wall_s"] = round(wall_s, 3)
    usage: dict[str, int] = {}
    for r in trace["replies"]:
        for k, v in (r.get("usage") or {}).items():
            if is_number(v):
                usage[k] = usage.get(k, 0) + v
    trace["usage"] = usage
    trace["stats"] = dict(stats) if stats is not None else None
    trace["notices"] = list(session.notices)
    trace.setdefault("truncated", False)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON data) with every occurrence of each secret in every string (keys included)
    replaced by :data:`REDACTED`; secrets shorter than 4 characters are ignored."""
    secrets = [s for s in secrets if isinstance(s, str) and len(s) >= 4]
    if not secrets:
        return value

    def clean(v):
        if isinstance(v, str):
            for s in secrets:
                if s in v:
                    v = v.replace(s, REDACTED)
            return v
        if isinstance(v, dict):
            return {clean(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return clean(value)


def _size(trace: Mapping) -> int:
    return len(json.dumps(trace, ensure_ascii=False, default=str))


def _cut_strings(v: Any, limit: int) -> Any:
    if isinstance(v, str) and len(v) > limit:
        keep = max(limit - 40, 0)
        return v[:keep] + f"...[fwgym: {len(v) - keep} characters cut]"
    if isinstance(v, dict):
        return {k: _cut_strings(x, limit) for k, x in v.items()}
    if isinstance(v, list):
        return [_cut_strings(x, limit) for x in v]
    return v


def _cut_lists(v: Any, limit: int) -> Any:
    if isinstance(v, list) and len(v) > limit:
        return [_cut_lists(x, limit) for x in v[:limit]] + [f"[fwgym: {len(v) - limit} items cut]"]
    if isinstance(v, dict):
        return {k: _cut_lists(x, limit) for k, x in v.items()}
    if isinstance(v, list):
        return [_cut_lists(x, limit) for x in v]
    return v


def bound_trace(trace: Trace, max_chars: int = MAX_TRACE_CHARS) -> Trace:
    """``trace`` cut to at most ``max_chars`` characters of JSON (``trace`` itself when it fits).

    The longest strings are cut first (halving the string limit until the trace fits), then long
    lists (a submitted forecast of 10,000 sample paths), with notices in place; ``truncated`` is set
    to ``True``. The trace's fields and structure stay; only their long contents shrink.

    Raises:
        ValueError: ``max_chars`` < 10,000 (a trace's skeleton needs room).
    """
    if max_chars < 10_000:
        raise ValueError(f"max_chars must be >= 10,000, got {max_chars}")
    if _size(trace) <= max_chars:
        return trace
    out = trace.copy()
    limit = max_chars // 4
    while limit >= 64:
        out = _cut_strings(out, limit)
        if _size(out) <= max_chars:
            break
        limit //= 2
    n = 1024
    while _size(out) > max_chars and n >= 1:
        out = _cut_lists(out, n)
        n //= 4
    out["truncated"] = True
    if _size(out) > max_chars:  # pragma: no cover - the skeleton alone is larger: keep the identifying fields
        keep = ("trace_version", "trace_id", "episode_id", "policy", "backend", "case_id", "agent_status", "score")
        out = cast(Trace, {k: out.get(k) for k in keep} | {"truncated": True})
    return out


__all__ = ["TRACE_VERSION", "SCORE_FIELDS", "MAX_TRACE_CHARS", "REDACTED", "append_jsonl", "read_traces", "new_trace",
           "reply_json", "add_record", "finish_trace", "scrub", "bound_trace"]
