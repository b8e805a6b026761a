"""The action grammar of fwgym's tools (DESIGN §6): what an agent sends, what a tool is, what comes back.

An action is one JSON tool call ``{"tool": NAME, "args": {...}}``, given as a string (or bytes) or an
already parsed dict. :func:`parse_action` turns any input into a :class:`ToolCall` or a
:class:`~fwgym.errors.ToolError` saying what is wrong; it never raises. A name resolves to a
:class:`Tool` (the registered ones: :data:`fwgym.tools.registry.REGISTRY`). The handlers read the ``args``
with the argument checks below (:func:`check_keys`, :func:`int_arg`, :func:`time_arg`), each refusing with
``invalid_arguments`` and a message that names the argument and what it must be.

A result is a JSON-safe dict, ``{"tool": NAME, "ok": true, "result": {...}}`` or
``{"tool": NAME, "ok": false, "error": {"code": ..., "message": ...}}`` (:func:`error_result`), typed by
:class:`~fwgym.tools.results.ToolResult`; :func:`result_json` is its compact ASCII JSON, what the
``last_result`` observation carries.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from fwgym.core.contract import names_text, safe_repr
from fwgym.core.series import iso_to_hour
from fwgym.errors import ToolError
from fwgym.tools.results import ToolResult
from fwgym.validation import is_mapping, is_number

__all__ = ["MAX_ACTION_CHARS", "ToolCall", "Tool", "ToolError", "loads_strict", "parse_action", "check_keys", "int_arg",
           "time_arg", "error_result", "result_json"]

#: longest action string read (characters); a longer one is an ``invalid_action`` error result
MAX_ACTION_CHARS = 100_000


@dataclass(frozen=True)
class ToolCall:
    """A well-formed action: the tool's name (not yet checked against the registry) and its args."""

    tool: str
    args: dict


@dataclass(frozen=True)
class Tool:
    """A tool of the vocabulary.

    Attributes:
        name: the action's ``"tool"`` value.
        description: one line for agents (and the function schema).
        parameters: JSON schema of ``"args"``.
        handler: ``handler(episode, args) -> result body`` (an :class:`~fwgym.tools.episode.Episode`; the
            body becomes the ``result`` of the call's :class:`~fwgym.tools.results.ToolResult`); it raises :class:`~fwgym.errors.ToolError` or :class:`~fwgym.core.contract.PlanError` to refuse.
        counts_as_call: ``True``: every call counts toward the call limit, refused or not.
            ``False`` (the answer tools): an accepted call does not count; a refused one counts like
            any call. :meth:`fwgym.tools.episode.Episode.apply` reads this flag.
    """

    name: str
    description: str
    parameters: dict
    handler: Callable[[Any, dict[str, Any]], Mapping[str, Any]]
    counts_as_call: bool = True

    def schema(self) -> dict:
        """OpenAI-style function schema ``{"type": "function", "function": {...}}``."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and duplicate object keys (raises ValueError)."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def parse_action(action: Any) -> ToolCall | ToolError:
    """Turn an agent's action (JSON string or dict) into a :class:`ToolCall`, or a :class:`ToolError`
    explaining what is wrong. Never raises."""
    try:
        if isinstance(action, (bytes, bytearray)):
            action = action.decode("utf-8")
        if isinstance(action, str):
            if len(action) > MAX_ACTION_CHARS:
                return ToolError("invalid_action", f"action is {len(action)} characters long; the limit is {MAX_ACTION_CHARS}")
            try:
                action = loads_strict(action)
            except RecursionError:
                return ToolError("invalid_json", "action JSON is nested too deeply")
            except ValueError as exc:
                return ToolError("invalid_json", f"action is not valid JSON: {exc}"[:500])
        if not is_mapping(action):
            return ToolError(
                "invalid_action",
                f'an action must be a JSON object {{"tool": NAME, "args": {{...}}}}, got {type(action).__name__}',
            )
        extra = [k for k in action if k not in ("tool", "args")]
        if extra:
            return ToolError("invalid_action", f'unexpected action keys {names_text(extra)}; an action has only "tool" and "args"')
        tool = action.get("tool")
        if not isinstance(tool, str):
            return ToolError("invalid_action", f'"tool" must be a tool name string, got {safe_repr(tool, 100)}')
        args = action.get("args", {})
        if args is None:
            args = {}
        if not is_mapping(args):
            return ToolError("invalid_arguments", f'"args" must be a JSON object, got {type(args).__name__}')
        return ToolCall(tool=tool, args=dict(args))
    except Exception as exc:  # pragma: no cover - defensive: parse_action must never raise
        return ToolError("invalid_action", f"could not read the action: {type(exc).__name__}")


def check_keys(args: dict, allowed: set[str], tool: str) -> None:
    """Refuse argument names outside ``allowed``."""
    extra = [k for k in args if k not in allowed]
    if extra:
        raise ToolError("invalid_arguments", f"{tool}: unknown argument(s) {names_text(extra)}; allowed: {sorted(allowed)}")


def int_arg(args: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    """``args[key]`` as an int in ``lo..hi`` (an integral float is accepted, a bool is not); ``default``
    when absent (``None``: the argument is required)."""
    if key not in args:
        if default is None:
            raise ToolError("invalid_arguments", f"missing required argument {key!r}")
        return default
    v = args[key]
    if not is_number(v) or (isinstance(v, float) and not v.is_integer()):
        raise ToolError("invalid_arguments", f"{key!r} must be an integer, got {safe_repr(v, 100)}")
    v = int(v)
    if not lo <= v <= hi:
        raise ToolError("invalid_arguments", f"{key!r} must be in {lo}..{hi}, got {safe_repr(v, 60)}")
    return v


def time_arg(args: dict, key: str) -> int:
    """``args[key]``, a time-zone-aware ISO 8601 hour, as an epoch hour (UTC)."""
    v = args[key]
    if not isinstance(v, str):
        raise ToolError("invalid_arguments", f"{key!r} must be an ISO 8601 timestamp string, got {safe_repr(v, 100)}")
    try:
        return iso_to_hour(v)
    except (ValueError, OverflowError) as exc:
        raise ToolError(
            "invalid_arguments",
            f"{key!r}: {safe_repr(v, 60)} is not a time-zone-aware ISO 8601 hour such as '2024-07-20T13:00:00Z' ({exc})",
        ) from None


def error_result(tool: str, exc: ToolError) -> ToolResult:
    """The result of a refused or failed call of ``tool`` (the name cut to 60 characters: it may be
    an unknown name the agent sent)."""
    return {"tool": str(tool)[:60], "ok": False, "error": {"code": exc.code, "message": exc.message}}


def result_json(result: ToolResult) -> str:
    """Compact ASCII JSON of a tool result (what the ``last_result`` observation carries)."""
    return json.dumps(result, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_json_default)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
