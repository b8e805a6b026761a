"""The shape check of trace records read by ``fwgym show-trace`` (a JSON object per line is not yet a trace).

:func:`check_traces` refuses, with the episode named, a record whose fields have JSON types that the
transcript renderer (:func:`fwgym.cli.show_trace.render_trace`) cannot read, so a foreign or edited
file ends as ``fwgym show-trace: error: ...`` (exit 2) instead of a traceback. Missing fields are
fine (they print as ``-``); wrong types are not. A file none of whose lines has ``messages`` or
``trace_version`` (which every trace line has: e.g. a results file) holds no traces and is refused.

The JSON types checked are those of :class:`fwgym.traces.Trace` (the one definition of a trace's fields), for
the fields the renderer reads as containers.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Sequence, cast

from fwgym.traces import Trace
from fwgym.validation import is_number

__all__ = ["trace_problem", "check_traces"]


def _json_container(annotation: Any) -> type:
    """``dict`` or ``list``: the JSON container of a field's type (``X | None``: of ``X``; a TypedDict is an object)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for t in typing.get_args(annotation) if union else (annotation,):
        origin = typing.get_origin(t) or t
        if typing.is_typeddict(origin) or origin is dict:
            return dict
        if origin is list:
            return list
    raise TypeError(f"{annotation} is no JSON object or list")


#: the top-level fields the renderer reads as containers, and their JSON types from :class:`~fwgym.traces.Trace`
#: (``None`` allowed for each)
_HINTS = typing.get_type_hints(Trace)
_FIELDS: dict[str, type] = {k: _json_container(_HINTS[k])
                            for k in ("score", "settings", "final_plan", "usage", "replies", "steps", "messages")}


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number" if is_number(v) else type(v).__name__)


def trace_problem(t: Any) -> str | None:
    """What makes ``t`` unreadable as a trace record, or ``None`` when its shape is fine."""
    if not isinstance(t, dict):
        return f"is {_kind(t)}, not a JSON object"
    for check in (_fields_problem, _replies_problem, _messages_problem, _steps_problem):
        problem = check(t)
        if problem:
            return problem
    return None


def _fields_problem(t: dict) -> str | None:
    """A top-level field of the wrong JSON type, or final_plan.levels not a list of numbers."""
    for key, typ in _FIELDS.items():
        if t.get(key) is not None and not isinstance(t[key], typ):
            return f"field {key!r} is {_kind(t[key])}, expected {_kind(typ())}"
    levels = (t.get("final_plan") or {}).get("levels")
    if levels is not None and not (isinstance(levels, list) and all(is_number(x) for x in levels)):
        return "final_plan.levels is not a list of numbers"
    return None


def _replies_problem(t: dict) -> str | None:
    for i, r in enumerate(t.get("replies") or []):
        if not isinstance(r, dict):
            return f"replies[{i}] is {_kind(r)}, expected an object"
        if r.get("attempts") is not None and not is_number(r["attempts"]):
            return f"replies[{i}].attempts is {_kind(r['attempts'])}, expected a number"
    return None


def _messages_problem(t: dict) -> str | None:
    for i, m in enumerate(t.get("messages") or []):
        if not isinstance(m, dict):
            return f"messages[{i}] is {_kind(m)}, expected an object"
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return f"messages[{i}].tool_calls is {_kind(calls)}, expected a list"
        for j, tc in enumerate(calls or []):
            if not isinstance(tc, dict) or not isinstance(tc.get("function", {}), dict):
                return f"messages[{i}].tool_calls[{j}] is not an object with a 'function' object"
    return None


def _steps_problem(t: dict) -> str | None:
    for i, s in enumerate(t.get("steps") or []):
        if not isinstance(s, dict):
            return f"steps[{i}] is {_kind(s)}, expected an object"
        if s.get("kind") in ("error", "abandon"):
            err = s.get("error")
            if not (isinstance(err, dict) and "code" in err and (s["kind"] != "abandon" or "message" in err)):
                return f"steps[{i}] ({s['kind']}) has no 'error' object with a code" + (
                    " and message" if s["kind"] == "abandon" else "")
        elif s.get("kind") != "answer" and s.get("source") != "native" and not isinstance(s.get("action"), dict):
            return f"steps[{i}] has no 'action' object"
    return None


def check_traces(traces: Sequence[Any], path: str) -> list[Trace]:
    """Refuse the first trace record of ``traces`` (read from ``path``) whose shape is unreadable.

    Returns:
        ``traces`` as :class:`~fwgym.traces.Trace` records (the same objects, in order).

    Raises:
        ValueError: ``"<path>: episode [i] is not a trace record of fwgym: <problem>"``; ``"<path> holds no
            traces"`` for a file without any line.
    """
    if not traces:
        raise ValueError(f"{path} holds no traces (no line)")
    if not any(isinstance(t, dict) and ("messages" in t or "trace_version" in t) for t in traces):
        first = traces[0]
        looks = (" (its lines are result records: this is a results file; the traces of a run are in its "
                 "traces.jsonl)") if isinstance(first, dict) and "case_id" in first and "S" in first else ""
        raise ValueError(f"{path} holds no traces: none of its {len(traces)} lines has 'messages' or "
                         f"'trace_version'{looks}")
    for i, t in enumerate(traces):
        problem = trace_problem(t)
        if problem:
            raise ValueError(f"{path}: episode [{i}] is not a trace record of fwgym: {problem}")
    return [cast(Trace, t) for t in traces]
