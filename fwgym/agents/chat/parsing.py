"""Reading a language model's text reply: a final answer, a JSON tool call, or a rejection (the answer
grammar itself, numbers, records, levels and forecasts, is :mod:`fwgym.agents.chat.answers`).

Pure functions, no I/O. The rules follow the FWBench terminal-answer normalisation (format-v1,
PROTOCOL §5.5) and issue 9: deterministic, gold-blind, no repair, no rounding or snapping to the
grid. Grid and ramp validity are *not* judged here: a well-formed plan goes to the env's ``submit``
tool, which alone decides whether it is valid.

Where the JSON may be (tried in this order):

1. the whole text (after stripping whitespace and a BOM) is one JSON value;
2. otherwise every complete JSON value amid prose (including inside Markdown fences) is a
   candidate. A candidate may start only at ``{`` or at ``[`` followed (after whitespace) by
   ``{``; values nested in a candidate are part of it. Exactly one candidate is allowed.

What a candidate may be:

* an answer, in the grammar of the ``submit`` tool's arguments for the episode's task (one grammar
  for text answers and ``submit`` calls, :func:`normalise_answer`):

  - decision episodes: ``{"decisions": ...}`` (a list of ``{"decision_id", "value"}`` records, or an
    object keyed exactly ``b00..b07``; other per-record keys such as ``forecast_id`` are dropped) or
    ``{"levels": [8 normalised grid levels]}``; in text also a bare list of decision records or an
    object keyed exactly ``b00..b07``;
  - forecast episodes: ``{"quantiles": [24 rows of 9 values at levels 0.1..0.9]}`` or
    ``{"samples": [2..10,000 rows of 24 values]}``;

  other top-level keys of a text answer (``"rationale"``) are ignored; both answer keys at once, or
  the other task's answer, are refused;
* a tool call (when ``allow_tool_calls``): ``{"tool": NAME, "args": {...}}`` (the env's own action
  format; ``args`` optional) or ``{"name": NAME, "arguments": {...} | "<json>"}`` (the common
  function-call format of open chat models).

Values are JSON numbers, or strings that match a strict JSON-number pattern (converted with
``float``). Everything else is rejected with a code and a message meant for the model.

=====  ==========================================================  ========  ================================
 #     input (abridged)                                             outcome   reason / code
=====  ==========================================================  ========  ================================
 1     ``{"decisions": [{"decision_id": "b00", "value": 1}, ...]}``  accept    whole text
 2     same, with leading/trailing whitespace or a BOM               accept    whitespace/BOM stripped
 3     ```` ```json\\n{"decisions": [...]}\\n``` ````                  accept    fenced block
 4     ``Here is my plan: {"decisions": [...]} Good luck.``          accept    one value amid prose
 5     ``[{"decision_id": "b00", "value": 1}, ...]``                 accept    bare list of records
 6     ``{"b00": 1, "b01": 2, ..., "b07": 8}``                       accept    object keyed b00..b07
 7     ``{"decisions": {"b00": 1, ..., "b07": 8}}``                  accept    decisions keyed b00..b07
 8     ``{"decisions": [...], "rationale": "..."}``                  accept    extra top-level keys ignored
 9     record with ``"forecast_id": "f1"``                           accept    extra record keys dropped
 10    ``"value": "1234.5"`` / ``"1e3"`` / ``"-0"``                  accept    strict numeric string
 11    ``{"tool": "classical_plan", "args": {"method": "..."}}``     tool      env action format
 12    ``{"name": "history", "arguments": "{\\"last\\": 24}"}``        tool      function-call format
 13    ``{"tool": "catalog"}``                                       tool      args default to {}
 14    empty text / only whitespace                                  reject    ``empty_reply``
 15    ``I would buy a forecast first.``                             reject    ``no_json``
 16    two JSON objects amid prose                                   reject    ``ambiguous_candidates``
 17    a fenced plan and the same plan again in prose                reject    ``ambiguous_candidates``
 18    ``{"decisions": [ ... `` (truncated)                          reject    ``malformed_decision_candidate``
 19    ``{'decisions': [...]}`` (single quotes)                      reject    ``malformed_decision_candidate``
 20    ``{"decisions": [..., ]}`` (trailing comma)                   reject    ``malformed_decision_candidate``
 21    ``{"decisions": [...], "decisions": [...]}``                  reject    ``duplicate_keys``
 22    ``"value": NaN`` / ``Infinity`` / ``1e999``                   reject    ``non_finite``
 23    ``"value": "1000 MW"``                                        reject    ``not_a_number`` (unit)
 24    ``"value": "2*500"``                                          reject    ``not_a_number`` (arithmetic)
 25    ``"value": "1,000"`` / ``" 12"`` / ``"0x10"`` / ``"+5"``      reject    ``not_a_number``
 26    ``"value": true`` / ``null``                                  reject    ``not_a_number``
 27    ``"value": 1`` followed by 400 digits                         reject    ``huge_number``
 28    a decision id twice                                           reject    ``duplicate_decision``
 29    7 decisions / ``b08`` / ``B00``                               reject    ``missing_decision`` / ``unknown_decision_id``
 30    ``{"b00": 1, ..., "b07": 8, "note": 1}``                      reject    ``unknown_decision_id``
 31    a record without ``value``                                    reject    ``bad_record``
 32    ``[1, 2, 3, 4, 5, 6, 7, 8]`` / ``{"plan": "..."}``            reject    ``not_an_answer``
 33    ``{"tool": "submit", "args": ..., "extra": 1}``               reject    ``malformed_tool_call``
 34    ``{"name": "history", "arguments": "{bad"}``                  reject    ``malformed_tool_call``
 35    ``{"levels": [1.0, 1.05, ..., 1.0]}`` (8 numbers)             accept    grid levels (as ``submit``)
 36    ``{"decisions": [...], "levels": [...]}``                     reject    ``ambiguous_answer``
 37    ``{"levels": [1.0, 1.0]}``                                    reject    ``bad_levels``
 38    forecast: ``{"quantiles": [[9 numbers] x 24]}``               accept    quantile forecast
 39    forecast: ``{"samples": [[24 numbers] x n]}``, 2 <= n         accept    sample forecast
 40    forecast: ``{"quantiles": [[9 numbers] x 23]}``               reject    ``bad_forecast_shape``
 41    forecast: a decisions answer / decision: a quantiles answer   reject    ``wrong_task_answer``
=====  ==========================================================  ========  ================================

Values are never rounded, snapped, or recovered from earlier tool results.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from fwgym.agents.chat.answers import (ANSWER_KEYS, MAX_INT_DIGITS, NUMBER_RE, AnswerError, _json_type, answer_hint,
                                      normalise_answer, normalise_decisions, normalise_forecast, normalise_levels,
                                      normalise_submit_args, parse_number)

#: Words whose presence marks a broken fragment as an attempted answer, by task.
ANSWER_MARKERS = ("decisions", "decision_id", "b00", "levels")
FORECAST_MARKERS = ("quantiles", "samples")
#: Replies longer than this are rejected unread.
MAX_REPLY_CHARS = 200_000


@dataclass(frozen=True)
class ParsedReply:
    """Outcome of :func:`parse_reply_text`.

    Attributes:
        kind: ``"answer"``, ``"tool_call"`` or ``"error"``.
        answer: for answers, the canonical ``submit`` arguments (:func:`normalise_answer`), e.g.
            ``{"decisions": [{"decision_id": "b00", "value": float}, ...]}`` (8 records in id order),
            ``{"levels": [8 floats]}``, ``{"quantiles": [24 x 9 floats]}`` or ``{"samples": [n x 24 floats]}``.
        tool: for tool calls, the tool name.
        args: for tool calls, the argument object.
        code: for errors, the reason code (see the module table).
        message: for errors, the explanation meant for the model.
        source: where the JSON was found: ``"whole"``, ``"fence"`` (a Markdown code fence) or
            ``"prose"`` (``None`` for errors).
    """

    kind: str
    answer: dict | None = None
    tool: str | None = None
    args: dict | None = None
    code: str | None = None
    message: str | None = None
    source: str | None = None

    @property
    def decisions(self) -> list | None:
        """The 8 canonical decision records of a ``decisions`` answer (``None`` otherwise)."""
        return (self.answer or {}).get("decisions")

    def action(self) -> dict | None:
        """The env action for an answer (a ``submit``) or a tool call; ``None`` for an error."""
        if self.kind == "answer":
            return {"tool": "submit", "args": _copy_answer(self.answer)}
        if self.kind == "tool_call":
            return {"tool": self.tool, "args": dict(self.args or {})}
        return None

    def to_json(self) -> dict:
        """JSON-safe summary (for traces)."""
        out: dict[str, Any] = {"kind": self.kind}
        for k in ("tool", "args", "code", "message", "source"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        if self.answer is not None:
            out["answer"] = _copy_answer(self.answer)
        return out


def _copy_answer(answer: Mapping) -> dict:
    return {k: [dict(x) if isinstance(x, Mapping) else list(x) if isinstance(x, list) else x for x in v]
            for k, v in answer.items()}


def _error(code: str, message: str) -> ParsedReply:
    return ParsedReply(kind="error", code=code, message=message)


# ---------------------------------------------------------------------------------------------
# JSON decoding that records (instead of hiding) non-standard content


@dataclass
class _Flags:
    duplicates: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    overflow: list = field(default_factory=list)


class _PairsDict(dict):
    """Marker type: a decoded JSON object."""


def _decoder(flags: _Flags) -> json.JSONDecoder:
    def pairs(items):
        out = _PairsDict()
        for k, v in items:
            if k in out:
                flags.duplicates.append(k)
            out[k] = v
        return out

    def constant(name):
        flags.constants.append(name)
        return float("nan")

    def parse_float(s):
        v = float(s)
        if not math.isfinite(v):
            flags.overflow.append(("non_finite", s[:40]))
        return v

    def parse_int(s):
        if len(s.lstrip("-")) > MAX_INT_DIGITS:
            flags.overflow.append(("huge_number", s[:40] + ("..." if len(s) > 40 else "")))
            return 0
        return int(s)

    return json.JSONDecoder(object_pairs_hook=pairs, parse_constant=constant, parse_float=parse_float,
                            parse_int=parse_int)


def _decode_at(text: str, start: int) -> tuple[Any, int, _Flags] | None:
    """Decode one JSON value starting at ``start``; ``(value, end, flags)`` or ``None``."""
    flags = _Flags()
    try:
        value, end = _decoder(flags).raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return value, end, flags


def _balanced_end(text: str, start: int) -> int:
    """End (exclusive) of the bracket span opening at ``start``, string-aware; ``len(text)`` if unclosed."""
    depth, in_str, esc = 0, False, False
    for j in range(start, len(text)):
        ch = text[j]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


@dataclass
class _Scan:
    candidates: list  # (value, flags, start, end)
    malformed: list  # fragment strings that contain an answer marker


def _is_start(text: str, i: int) -> bool:
    ch = text[i]
    if ch == "{":
        return True
    if ch == "[":
        j = i + 1
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        return j < len(text) and text[j] == "{"
    return False


def scan_json_values(text: str, markers: tuple[str, ...] = ANSWER_MARKERS) -> _Scan:
    """Complete JSON values amid prose, and broken fragments that look like answers.

    A value may start at ``{`` or at ``[`` followed by ``{``; after a value the scan resumes at its
    end (nested values are not separate candidates). Broken fragments (bracket span that does not
    decode) containing one of ``markers`` (default: ``decisions``, ``decision_id``, ``b00``,
    ``levels``) are reported as malformed.
    """
    candidates, malformed = [], []
    i, n = 0, len(text)
    marked = any(m in text for m in markers)
    while i < n:
        if not _is_start(text, i):
            i += 1
            continue
        got = _decode_at(text, i)
        if got is not None:
            value, end, flags = got
            candidates.append((value, flags, i, end))
            i = end
            continue
        if marked and not malformed:
            frag = text[i:_balanced_end(text, i)]
            if any(m in frag for m in markers):
                malformed.append(frag)
        i += 1
    return _Scan(candidates, malformed)


# ---------------------------------------------------------------------------------------------
# classification of one candidate


def _tool_call(value: Mapping) -> ParsedReply | None:
    """A tool call in one of the two accepted shapes, an error, or ``None`` (not a tool call)."""
    keys = set(value)
    if "tool" in keys:
        if not keys <= {"tool", "args"}:
            return _error("malformed_tool_call", f'a tool call has only "tool" and "args"; unexpected key(s) '
                          f'{sorted(keys - {"tool", "args"})[:5]}')
        name, args = value["tool"], value.get("args")
    elif keys == {"name", "arguments"}:
        name, args = value["name"], value["arguments"]
        if isinstance(args, str):
            flags = _Flags()
            try:
                args = _decoder(flags).decode(args)
            except (ValueError, RecursionError) as exc:
                return _error("malformed_tool_call", f'"arguments" of {str(name)[:40]!r} is not valid JSON: {exc}'[:300])
            if flags.duplicates or flags.constants or flags.overflow:
                return _error("malformed_tool_call", f'"arguments" of {str(name)[:40]!r} has duplicate keys or non-finite numbers')
    else:
        return None
    if not isinstance(name, str) or not name:
        return _error("malformed_tool_call", f"the tool name must be a non-empty string, got {json.dumps(name)[:40]}")
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return _error("malformed_tool_call", f'the arguments of {name[:40]!r} must be a JSON object, got a {_json_type(args)}')
    return ParsedReply(kind="tool_call", tool=name, args=_plain(args))


def _plain(v: Any) -> Any:
    """Decoded JSON with plain dicts (drops the marker type)."""
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def classify(value: Any, flags: _Flags | None = None, *, allow_tool_calls: bool = True, source: str = "whole",
             task: str = "decision") -> ParsedReply:
    """Classify one decoded JSON value as an answer (of ``task``), a tool call or an error (see module table)."""
    hint = answer_hint(task)
    if flags is not None:
        if flags.duplicates:
            return _error("duplicate_keys", f"the JSON has duplicate keys {sorted(set(map(str, flags.duplicates)))[:5]}; every key may appear once")
        if flags.constants:
            return _error("non_finite", f"the JSON contains {flags.constants[0]}, which is not a JSON number; use finite numbers only")
        if flags.overflow:
            code, num = flags.overflow[0]
            return _error(code, f"the JSON contains the number {num}, which is not a usable finite value")
    answer_keys = ANSWER_KEYS["decision"] + ANSWER_KEYS["forecast"]
    try:
        if isinstance(value, Mapping):
            if allow_tool_calls:
                call = _tool_call(value)
                if call is not None:
                    return replace(call, source=source) if call.kind == "tool_call" else call
            if any(k in value for k in answer_keys):
                return ParsedReply(kind="answer", answer=normalise_answer(value, task, extra_keys="ignore"), source=source)
            if task != "forecast" and any(isinstance(k, str) and re.fullmatch(r"[bB]\d\d", k) for k in value):
                return ParsedReply(kind="answer", answer={"decisions": normalise_decisions(value, "the answer object")},
                                   source=source)
            return _error("not_an_answer", f"the JSON object (keys {sorted(map(str, value))[:6]}) is neither a tool call nor an answer; "
                          + (hint if not allow_tool_calls else 'call a tool with {"tool": NAME, "args": {...}} or ' + hint))
        if task != "forecast" and isinstance(value, list) and value and all(isinstance(x, Mapping) for x in value):
            return ParsedReply(kind="answer", answer={"decisions": normalise_decisions(value, "the list")}, source=source)
        return _error("not_an_answer", f"the reply's JSON is a {_json_type(value)}, not an answer; {hint}")
    except AnswerError as exc:
        return _error(exc.code, exc.message)


# ---------------------------------------------------------------------------------------------
# the entry point


def parse_reply_text(text: Any, *, allow_tool_calls: bool = True, task: str = "decision") -> ParsedReply:
    """Read a model's text reply (see the module docstring for the accepted and rejected forms).

    Args:
        text: the reply text (``None`` counts as empty).
        allow_tool_calls: also accept ``{"tool": ..., "args": ...}`` and ``{"name": ..., "arguments": ...}``
            tool calls (otherwise such objects are "not an answer").
        task: the episode's task (``"decision"`` or ``"forecast"``): which answer grammar applies.

    Returns:
        :class:`ParsedReply` (``kind`` answer / tool_call / error). Never raises.
    """
    try:
        return _parse(text, allow_tool_calls, "forecast" if task == "forecast" else "decision")
    except Exception as exc:  # pragma: no cover - defensive: the parser must never crash an episode
        return _error("unreadable_reply", f"the reply could not be read ({type(exc).__name__})")


def _parse(text: Any, allow_tool_calls: bool, task: str) -> ParsedReply:
    hint = answer_hint(task)
    if text is None:
        text = ""
    if not isinstance(text, str):
        return _error("unreadable_reply", f"the reply is a {type(text).__name__}, not text")
    if len(text) > MAX_REPLY_CHARS:
        return _error("reply_too_long", f"the reply has {len(text)} characters; the limit is {MAX_REPLY_CHARS}")
    body = text.strip().lstrip("\ufeff").strip()
    if not body:
        return _error("empty_reply", "the reply is empty; " + hint)
    whole = _decode_at(body, 0)
    if whole is not None and whole[1] == len(body):
        return classify(whole[0], whole[2], allow_tool_calls=allow_tool_calls, source="whole", task=task)
    scan = scan_json_values(body, FORECAST_MARKERS if task == "forecast" else ANSWER_MARKERS)
    if scan.malformed:
        frag = scan.malformed[0]
        shown = frag if len(frag) <= 120 else frag[:100] + " ... " + frag[-15:]
        return _error("malformed_decision_candidate",
                      f"the reply contains broken JSON that looks like an answer: {shown!r}. Write strict JSON: "
                      "double-quoted keys, no trailing commas, no comments, complete brackets; " + hint)
    if len(scan.candidates) > 1:
        return _error("ambiguous_candidates",
                      f"the reply contains {len(scan.candidates)} separate JSON values; it must contain exactly one "
                      "(one tool call, or the final answer)")
    if not scan.candidates:
        if whole is not None:  # e.g. a bare number or string followed by prose
            return _error("no_json", "the reply has no JSON object; " + hint)
        return _error("no_json", "the reply has neither a tool call nor a JSON answer; "
                      + ('call a tool with {"tool": NAME, "args": {...}} or ' if allow_tool_calls else "") + hint)
    value, flags, start, _ = scan.candidates[0]
    source = "fence" if re.search(r"```[A-Za-z]*[ \t]*\r?\n?[ \t]*$", body[:start]) else "prose"
    return classify(value, flags, allow_tool_calls=allow_tool_calls, source=source, task=task)


__all__ = ["AnswerError", "ParsedReply", "parse_reply_text", "parse_number", "normalise_decisions", "normalise_levels",
           "normalise_forecast", "normalise_answer", "normalise_submit_args", "answer_hint", "scan_json_values",
           "classify", "NUMBER_RE", "ANSWER_KEYS"]
