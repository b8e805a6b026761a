"""LLM-agent traces: one JSON record per episode, appended to a JSONL file (schema version :data:`TRACE_VERSION`).

A trace holds every message, every env action with its result (:attr:`ChatSession.steps
<fwgym.agents.chat.session.ChatSession.steps>`), the model replies (text, tool calls, reasoning,
latency, token usage), the agent's status, the final plan and the score (from the env's record).
Fields, in order: ``trace_version``, ``trace_id``, ``policy``, ``backend``, ``settings``,
``native_tools``, ``tools``, ``started``, ``case_id``, ``agent_status``, ``agent_status_detail``,
``replies``, ``messages``, ``steps``, ``record``, ``score``, ``final_plan``, then ``turns``,
``wall_s`` and ``usage`` (summed token counts) when the trace is finished. Credentials are never
part of a trace. :mod:`fwgym.report.traces` and ``fwgym show-trace`` read these files.
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from fwgym.agents.chat.session import ChatSession, ModelReply
from fwgym.jsonl import append_jsonl, read_jsonl

TRACE_VERSION = 1
#: the fields of the env record copied into a trace's ``score``
SCORE_FIELDS = ("S", "R", "loss", "floor", "credits", "calls", "valid", "status", "reason")


def read_traces(path: str | os.PathLike) -> list[dict]:
    """All trace records of a JSONL file, in order (:func:`fwgym.jsonl.read_jsonl`).

    Raises:
        FileNotFoundError: no such file. ValueError: a line is not a JSON object (``path:line`` given).
    """
    return read_jsonl(path)


def new_trace(policy: str, backend: str, settings: Mapping, native_tools: bool, tools: Sequence[str]) -> dict:
    """The trace of an episode that starts now (status ``"running"``, no replies yet)."""
    return {
        "trace_version": TRACE_VERSION, "trace_id": uuid.uuid4().hex, "policy": policy, "backend": backend,
        "settings": dict(settings), "native_tools": native_tools, "tools": list(tools),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "case_id": None,
        "agent_status": "running", "agent_status_detail": None, "replies": [], "messages": None, "steps": None,
        "record": None, "score": None, "final_plan": None,
    }


def reply_json(turn: int, reply: ModelReply) -> dict:
    """One model reply as a trace entry: turn, content, finish reason, tool calls, reasoning, backend meta."""
    out = {"turn": turn, "content": reply.content, "finish_reason": reply.finish_reason,
           "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls]}
    if reply.reasoning:
        out["reasoning"] = reply.reasoning
    out.update(reply.meta or {})
    return out


def add_record(trace: dict, record: Mapping, submitted: Any) -> None:
    """Store the env's final ``record`` in ``trace``: ``record``, ``case_id``, ``score`` (:data:`SCORE_FIELDS`)
    and ``final_plan`` (the scored ``levels`` and the ``submitted`` arguments)."""
    rec = dict(record)
    trace["record"] = rec
    trace["case_id"] = rec.get("case_id")
    trace["score"] = {k: rec.get(k) for k in SCORE_FIELDS}
    trace["final_plan"] = {"levels": rec.get("levels"), "submitted": submitted}


def finish_trace(trace: dict, session: ChatSession, status: str, settings: Mapping, wall_s: float) -> None:
    """Complete ``trace`` from the episode's ``session``: agent status (unless already set), settings,
    messages, steps, turns, wall time (s) and the token usage summed over the replies."""
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
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                usage[k] = usage.get(k, 0) + v
    trace["usage"] = usage


__all__ = ["TRACE_VERSION", "SCORE_FIELDS", "append_jsonl", "read_traces", "new_trace", "reply_json", "add_record",
           "finish_trace"]
