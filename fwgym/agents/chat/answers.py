"""The one answer grammar of ``submit`` calls and text answers (issue 9): numbers, decision records, grid
levels and forecasts, normalised to canonical ``submit`` arguments or refused with a code and a message
meant for the model. Pure functions, no I/O; values are never rounded or snapped.

:func:`normalise_answer` is what :mod:`fwgym.agents.chat.parsing` applies to a text answer and what the
chat session applies to a ``submit`` call's arguments, so both routes score alike.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

from fwgym.core.contract import DECISION_IDS, MAX_FORECAST_SAMPLES, TARGET_HOURS, PlanError, decision_values
from fwgym.errors import CodedError

#: A strict JSON number (RFC 8259): no sign ``+``, no leading zeros, no hex, no spaces.
NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: the answer keys (the ``submit`` arguments) of each task
ANSWER_KEYS: dict[str, tuple[str, str]] = {"decision": ("decisions", "levels"), "forecast": ("quantiles", "samples")}
#: Integers with more digits than this are rejected (a capacity never needs them).
MAX_INT_DIGITS = 30

_NUMBER_HINT = ("values must be plain JSON numbers such as 12345.6 (or a string holding exactly one): "
                "no units, thousands separators, arithmetic, words or rounding marks")
_FORMAT_HINT = ('answer with one JSON object {"decisions": [{"decision_id": "b00", "value": <number>}, ..., '
                '{"decision_id": "b07", "value": <number>}]} or {"levels": [<8 grid levels>]}')
_FORECAST_HINT = ('answer with one JSON object {"quantiles": [[<9 values at levels 0.1..0.9>], ... 24 rows, one per '
                  'target hour]} or {"samples": [[<24 values>], ... at least 2 rows]}')


def answer_hint(task: str = "decision") -> str:
    """The one-sentence answer format of ``task`` used in the parser's messages."""
    return _FORECAST_HINT if task == "forecast" else _FORMAT_HINT


class AnswerError(CodedError, ValueError):
    """A reply (or a decisions payload) that cannot be used.

    Attributes:
        code: stable machine-readable reason, e.g. ``"ambiguous_candidates"``.
        message: explanation addressed to the model.
    """


def parse_number(value: Any, where: str = "value") -> float:
    """A decision value as a finite float.

    Args:
        value: a JSON number (int or float, not bool) or a string matching :data:`NUMBER_RE` exactly.
        where: label used in the error message (e.g. ``"b03"``).

    Returns:
        ``float(value)``.

    Raises:
        AnswerError: ``not_a_number`` (bool, null, object, list, units, arithmetic, commas, spaces...),
            ``non_finite`` (NaN, Infinity, overflow), ``huge_number`` (more than 30 integer digits).
    """
    if isinstance(value, bool) or value is None:
        raise AnswerError("not_a_number", f"{where}: {json.dumps(value)} is not a number; {_NUMBER_HINT}")
    if isinstance(value, int):
        if len(str(abs(value))) > MAX_INT_DIGITS:
            raise AnswerError("huge_number", f"{where}: the integer has more than {MAX_INT_DIGITS} digits")
        return float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AnswerError("non_finite", f"{where}: {value} is not a finite number")
        return value
    if isinstance(value, str):
        if not NUMBER_RE.fullmatch(value):
            raise AnswerError("not_a_number", f"{where}: {value[:60]!r} is not a plain number; {_NUMBER_HINT}")
        digits = re.match(r"-?([0-9]*)", value).group(1)
        if len(digits) > MAX_INT_DIGITS:
            raise AnswerError("huge_number", f"{where}: {value[:40]!r}... has more than {MAX_INT_DIGITS} integer digits")
        v = float(value)
        if not math.isfinite(v):
            raise AnswerError("non_finite", f"{where}: {value[:60]!r} is not a finite number")
        return v
    raise AnswerError("not_a_number", f"{where}: a {type(value).__name__} is not a number; {_NUMBER_HINT}")


def normalise_decisions(decisions: Any, what: str = '"decisions"') -> list[dict]:
    """Normalise a ``decisions`` payload to 8 canonical records.

    Args:
        decisions: a list of ``{"decision_id", "value"}`` records (extra record keys dropped) or an
            object keyed exactly ``b00..b07``.

    Returns:
        ``[{"decision_id": "b00", "value": float}, ..., {"decision_id": "b07", ...}]``.

    Raises:
        AnswerError: ``bad_record``, ``unknown_decision_id``, ``duplicate_decision``, ``missing_decision``,
            ``not_an_answer`` or any :func:`parse_number` code.
    """
    if not isinstance(decisions, (Mapping, list)):
        raise AnswerError("not_an_answer", f'{what} is a {_json_type(decisions)}; {_FORMAT_HINT}')
    try:
        values = decision_values(decisions)  # the contract's reader: same structure rules as the env
    except PlanError as exc:
        code = "bad_record" if exc.code == "bad_format" else exc.code
        raise AnswerError(code, f"{what}: {exc.message}") from None
    return [{"decision_id": d, "value": parse_number(v, d)} for d, v in zip(DECISION_IDS, values)]


def normalise_levels(levels: Any) -> list[float]:
    """8 normalised grid levels as floats (:func:`parse_number` rules; grid membership is the env's to judge).

    Raises:
        AnswerError: ``bad_levels`` (not a list of 8) or any :func:`parse_number` code.
    """
    if not isinstance(levels, list) or len(levels) != len(DECISION_IDS):
        raise AnswerError("bad_levels", f'"levels" must be a list of 8 normalised grid levels (0.40..2.00), got a '
                          f'{_json_type(levels)}' + (f" of {len(levels)}" if isinstance(levels, list) else ""))
    return [parse_number(v, f"levels[{i}]") for i, v in enumerate(levels)]


def normalise_forecast(kind: str, rows: Any) -> list[list[float]]:
    """A forecast answer's rows as floats: ``quantiles`` 24 rows of 9 values, ``samples`` 2..10,000 rows
    of 24 values (:func:`parse_number` rules; monotonicity of quantiles is the env's to judge).

    Raises:
        AnswerError: ``bad_forecast_shape`` or any :func:`parse_number` code.
    """
    q = kind == "quantiles"
    need = "24 rows (one per target hour) of 9 values (levels 0.1..0.9)" if q else \
        f"2..{MAX_FORECAST_SAMPLES} rows (sample paths) of 24 values (one per target hour)"
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise AnswerError("bad_forecast_shape", f'"{kind}" must be a list of rows: {need}; got a {_json_type(rows)}')
    if q and (len(rows) != TARGET_HOURS or any(len(r) != 9 for r in rows)) or \
            not q and (not 2 <= len(rows) <= MAX_FORECAST_SAMPLES or any(len(r) != TARGET_HOURS for r in rows)):
        shape = f"{len(rows)} rows of lengths {sorted({len(r) for r in rows})[:5]}" if rows else "no rows"
        raise AnswerError("bad_forecast_shape", f'"{kind}" must be {need}; got {shape}')
    return [[parse_number(v, f"{kind}[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(rows)]


def normalise_answer(args: Mapping, task: str = "decision", *, extra_keys: str = "refuse") -> dict:
    """The one answer grammar of text answers and ``submit`` calls: canonical ``submit`` arguments.

    Args:
        args: the answer object (``submit`` arguments, or a text answer's JSON object).
        task: ``"decision"`` (``decisions`` or ``levels``) or ``"forecast"`` (``quantiles`` or ``samples``).
        extra_keys: ``"refuse"`` (a ``submit`` call: other keys are an error) or ``"ignore"`` (a text
            answer: commentary keys such as ``"rationale"`` are dropped).

    Returns:
        ``{"decisions": 8 canonical records}``, ``{"levels": 8 floats}``, ``{"quantiles": 24 x 9
        floats}`` or ``{"samples": n x 24 floats}``. Values are never rounded or snapped.

    Raises:
        AnswerError: ``not_an_answer`` (no answer key), ``ambiguous_answer`` (both), ``wrong_task_answer``
            (the other task's answer), ``unknown_answer_key`` (extra keys with ``extra_keys="refuse"``),
            or the codes of :func:`normalise_decisions`, :func:`normalise_levels`, :func:`normalise_forecast`.
    """
    own = ANSWER_KEYS["forecast" if task == "forecast" else "decision"]
    other = ANSWER_KEYS["decision" if task == "forecast" else "forecast"]
    keys = [k for k in own if k in args]
    if not keys:
        if any(k in args for k in other):
            raise AnswerError("wrong_task_answer", f"this is a {task} episode: {answer_hint(task)}")
        raise AnswerError("not_an_answer", f"the answer has none of {list(own)}; {answer_hint(task)}")
    if len(keys) > 1:
        raise AnswerError("ambiguous_answer", f'give exactly one of "{own[0]}" or "{own[1]}", not both')
    extra = [k for k in args if k not in own]
    if extra and extra_keys == "refuse":
        raise AnswerError("unknown_answer_key", f"submit takes only {' or '.join(repr(k) for k in own)}; unexpected "
                          f"key(s) {sorted(map(str, extra))[:5]}")
    key = keys[0]
    if key == "decisions":
        return {"decisions": normalise_decisions(args["decisions"])}
    if key == "levels":
        return {"levels": normalise_levels(args["levels"])}
    return {key: normalise_forecast(key, args[key])}


def normalise_submit_args(args: Mapping, task: str = "decision") -> dict:
    """Format check of ``submit`` arguments: :func:`normalise_answer` with extra keys refused (no grid,
    ramp or monotonicity check: the env judges those).

    Raises:
        AnswerError: as :func:`normalise_answer`.
    """
    return normalise_answer(args, task, extra_keys="refuse")


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, Mapping):
        return "object"
    return type(v).__name__


__all__ = ["AnswerError", "parse_number", "normalise_decisions", "normalise_levels", "normalise_forecast",
           "normalise_answer", "normalise_submit_args", "answer_hint", "NUMBER_RE", "ANSWER_KEYS", "MAX_INT_DIGITS"]
