"""The tool registry: every tool's name, description, JSON schema of its arguments, handler and call
accounting (DESIGN §6). One :class:`~fwgym.tools.actions.Tool` per action of the vocabulary;
:data:`REGISTRY` maps names to them, in menu order. The OpenAI-style function schemas
(:meth:`~fwgym.tools.actions.Tool.schema`) are what chat agents see.

The argument schemas (JSON Schema, draft 2020-12 subset) describe what the handlers accept: every
call that validates against a tool's schema passes the handler's *structural* argument checks (no
``invalid_arguments`` refusal); what the schema cannot know is refused with a content code
(``out_of_range`` dates outside the visible window, ``not_found`` forecast ids, ``invalid_plan``
off-grid or ramp-violating plans, ``insufficient_budget``, ``model_unavailable``). Rules between
arguments are compact JSON Schema keywords beside the flat ``properties``: "exactly one of" as
``oneOf`` of ``required`` lists (``plan``, ``evaluate_plan``, ``submit``), "``last`` or
``start``/``end``" as ``not``, the per-model minimum context as ``if``/``then``; the properties are
listed once, because chat templates paste the schemas into the prompt (all ten: about 1,830
SmolLM2 tokens). Grammar-constrained servers that do not read these keywords still constrain each
argument; a call that breaks a rule is refused as a counted call. Beyond JSON Schema: a
calendar-invalid date that matches the ISO pattern (``2024-02-30T00:00:00Z``), a decision id
given twice in ``decisions`` records, and a ``replay`` context longer than the visible hours before
its ``origin``.

``submit`` takes different arguments by task (:func:`tool_parameters`): ``decisions`` or ``levels``
in decision envs, ``quantiles`` or ``samples`` in forecast envs; the registry's own ``submit`` schema
is the union of both.

OpenAI *strict* function calling (``"strict": true``) accepts only flat object schemas whose every
property is required (optional ones nullable) with ``additionalProperties: false`` everywhere and
no rules between arguments. :func:`strict_parameters` gives such a schema where the format allows (7 of the
10 tools: ``catalog``, ``history`` (``last`` only), ``classical_plan``, ``quote``, ``forecast``,
``replay`` (``context_steps`` from the largest minimum context of the pool, 168 in the protocol's,
since a strict schema cannot branch on the model), ``abstain``), each accepting a subset of what the
handler accepts once ``null`` values are dropped (:func:`drop_null_arguments`); ``plan``,
``evaluate_plan`` and ``submit`` need "exactly one of" and are sent non-strict.

**Schemas per pool.** The priced tools (``quote``, ``forecast``, ``replay``) take a ``model`` of the
env's forecast pool, and each model has its own context limits. :func:`tool_pool` reads them, once per
env, from the forecasters that serve the pool (an env's ``forecasters=`` override, else the
process-wide instance, whose ``min_context`` is a plug-in spec's when it sets one: the one rule the
handlers apply) and the tariff (the largest context bucket a model is priced for); every schema
function takes that ``pool`` (default: the protocol's, :func:`protocol_pool`). The ``model`` enum is
the pool; ``context_steps`` spans the pool's widest range, and each model whose range is narrower gets
an ``if``/``then`` rule (``allOf`` of them when there are several), with ``context_steps`` required
when the model cannot take the default context (336 hours; a plug-in priced only up to 96).
:func:`pool_facts` is the JSON form of a pool the env puts into ``info["episode"]["pool"]`` (with each
model's tariff rows), and :func:`pool_from_facts` reads it back on the agent's side, so a chat agent
builds the same schemas as the env without access to the env.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from fwgym.core.cases import HISTORY_HOURS
from fwgym.core.contract import DECISION_IDS, GRID, MAX_FORECAST_SAMPLES, N_BLOCKS, TARGET_HOURS
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS, check_models, get_forecaster
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.core.tariff import HORIZON_BUCKETS, tariff_rows
from fwgym.tools import answer, info, planning, purchase
from fwgym.tools.actions import Tool

__all__ = ["REGISTRY", "DEFAULT_TOOLS", "ANSWER_TOOLS", "TASKS", "ISO_HOUR_PATTERN", "STRICT_KEYWORDS", "PRICED_TOOLS",
           "PoolModel", "tool_pool", "protocol_pool", "pool_facts", "pool_from_facts",
           "tool_parameters", "strict_parameters", "drop_null_arguments"]

#: the env tasks whose ``submit`` arguments differ
TASKS: tuple[str, ...] = ("decision", "forecast")
#: a time-zone-aware ISO 8601 hour as the handlers read it (``2024-07-20T13:00:00Z``, ``...T13:00+01:00``);
#: offsets are whole hours so that the instant is on a UTC hour. Short on purpose (chat templates paste
#: schemas into the prompt): calendar validity (month 13, hour 24, 30 February) is the handler's check.
ISO_HOUR_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:00(:00)?(Z|[+-]\d\d:00)$"
#: the JSON Schema keywords OpenAI strict mode accepts (structure, annotations and the supported constraints)
STRICT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf",
                             "description", "title", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                             "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "$defs", "$ref", "const"})

_ISO = {"type": "string", "pattern": ISO_HOUR_PATTERN, "description": "ISO hour, e.g. 2024-07-20T13:00:00Z"}
_DECISION_RECORD = {
    "type": "object",
    "properties": {"decision_id": {"type": "string", "enum": list(DECISION_IDS)}, "value": {"type": "number"}},
    "required": ["decision_id", "value"],
    "additionalProperties": False,
}
_DECISIONS_SCHEMA = {
    "type": "array", "minItems": N_BLOCKS, "maxItems": N_BLOCKS, "items": _DECISION_RECORD,
    "description": "8 records, one for each of b00..b07, with physical capacities (scale x a grid level)",
}
_LEVELS_SCHEMA = {
    "type": "array", "minItems": N_BLOCKS, "maxItems": N_BLOCKS,
    "items": {"type": "number", "minimum": float(GRID[0]), "maximum": float(GRID[-1])},
    "description": "alternative to decisions: 8 normalised grid levels 0.40..2.00 (step 0.05), b00..b07",
}
_QUANTILES_SCHEMA = {
    "type": "array", "minItems": TARGET_HOURS, "maxItems": TARGET_HOURS,
    "items": {"type": "array", "minItems": len(QUANTILE_LEVELS), "maxItems": len(QUANTILE_LEVELS),
              "items": {"type": "number"}},
    "description": "24 rows (target hours) of 9 non-decreasing values at quantile levels 0.1..0.9",
}
_SAMPLES_SCHEMA = {
    "type": "array", "minItems": 2, "maxItems": MAX_FORECAST_SAMPLES,
    "items": {"type": "array", "minItems": TARGET_HOURS, "maxItems": TARGET_HOURS, "items": {"type": "number"}},
    "description": f"2..{MAX_FORECAST_SAMPLES} sample paths, each 24 values (one per target hour)",
}
_METHOD_SCHEMA = {"type": "string", "enum": list(CLASSICAL_METHODS)}
_FORECAST_ID = {"type": "string", "description": "id of a forecast bought in this episode (f1, f2, ...)"}
_HORIZON = {"type": "integer", "minimum": 1, "maximum": HORIZON_BUCKETS[-1]}
def _obj(properties: Mapping, required: tuple[str, ...] = (), **rules: Any) -> dict:
    out = {"type": "object", "properties": dict(properties), "additionalProperties": False}
    if required:
        out["required"] = list(required)
    out.update(rules)
    return out


def _exactly_one(*keys: str) -> dict:
    """``{"oneOf": [{"required": [k]}, ...]}``: exactly one of ``keys`` is given (the others are absent)."""
    return {"oneOf": [{"required": [k]} for k in keys]}


#: the tools whose arguments name a model of the pool
PRICED_TOOLS: tuple[str, ...] = ("quote", "forecast", "replay")


@dataclass(frozen=True)
class PoolModel:
    """What the argument schemas know of one model of an env's forecast pool.

    Attributes:
        model: the name the tools take.
        min_context: the smallest ``context_steps`` the model accepts (its forecaster's ``min_context``).
        max_context: the largest ``context_steps`` it is priced for (its largest tariff context bucket:
            336, or 96 for a plug-in priced only up to 96).
    """

    model: str
    min_context: int
    max_context: int


def tool_pool(models: Sequence[str] | None = None, forecasters: Mapping | None = None) -> tuple[PoolModel, ...]:
    """The :class:`PoolModel` of each model of a forecast pool, in pool order.

    Args:
        models: the pool (``None``: the protocol's, :data:`~fwgym.forecasters.registry.PRICED_MODELS`).
        forecasters: ``{model: QuantileForecaster}`` overriding the process-wide instances (an env's
            ``forecasters=``); a model's ``min_context`` is read from the forecaster that serves it.

    Raises:
        ValueError: an unknown model. fwgym.forecasters.PluginError: a plug-in's factory fails.
    """
    out = []
    for m in check_models(models):
        f = (forecasters or {}).get(m) or get_forecaster(m)
        out.append(PoolModel(m, int(f.min_context), int(min(max(tariff_rows(m)), HISTORY_HOURS))))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def protocol_pool() -> tuple[PoolModel, ...]:
    """:func:`tool_pool` of the protocol's pool with the process-wide forecasters (the schemas' default)."""
    return tool_pool(PRICED_MODELS)


def pool_facts(pool: Sequence[PoolModel]) -> list[dict]:
    """The JSON form of a pool (``info["episode"]["pool"]``): ``[{"model", "min_context", "max_context",
    "tariff": {context bucket as str: [credits per horizon bucket 24/64/96/192/240/336]}}]``."""
    return [{"model": p.model, "min_context": p.min_context, "max_context": p.max_context,
             "tariff": {str(c): [int(x) for x in row] for c, row in sorted(tariff_rows(p.model).items())}}
            for p in pool]


def pool_from_facts(facts: Any) -> tuple[PoolModel, ...] | None:
    """The pool of :func:`pool_facts` output (``None`` when ``facts`` is ``None``: no facts, the caller's default).

    Raises:
        ValueError: ``facts`` is not a list of such entries.
    """
    if facts is None:
        return None
    try:
        pool = tuple(PoolModel(str(e["model"]), int(e["min_context"]), int(e["max_context"])) for e in facts)
    except (TypeError, KeyError, ValueError):
        raise ValueError("the episode's pool must be a list of {model, min_context, max_context} entries") from None
    return pool


def _context_rules(pool: Sequence[PoolModel], lo: int, hi: int) -> list[dict]:
    """One ``if``/``then`` per group of models whose context range is narrower than ``lo..hi`` (the
    handler checks each model's range): ``then`` narrows ``context_steps`` and requires it when the
    model cannot take the default context (:data:`~fwgym.core.cases.HISTORY_HOURS`)."""
    groups: dict[tuple[int, int], list[str]] = {}
    for p in pool:
        if (p.min_context, p.max_context) != (lo, hi):
            groups.setdefault((p.min_context, p.max_context), []).append(p.model)
    rules = []
    for (a, b), names in groups.items():
        bound = {**({"minimum": a} if a != lo else {}), **({"maximum": b} if b != hi else {})}
        then: dict[str, Any] = {"properties": {"context_steps": bound}}
        if b < HISTORY_HOURS:
            then["required"] = ["context_steps"]
        rules.append({"if": {"properties": {"model": {"enum": names}}, "required": ["model"]}, "then": then})
    return rules


def _request(pool: Sequence[PoolModel], extra: Mapping | None = None, required: tuple[str, ...] = ("model",)) -> dict:
    """quote / forecast / replay: the pool's models, the per-model context range as ``if``/``then``
    (the handlers check it per model)."""
    lo = min((p.min_context for p in pool), default=2)
    hi = max((p.max_context for p in pool), default=HISTORY_HOURS)
    rules = _context_rules(pool, lo, hi)
    keywords: dict[str, Any] = {}
    if len(rules) == 1:
        keywords = dict(rules[0])
    elif rules:
        keywords = {"allOf": rules}
    return _obj({"model": {"type": "string", "enum": [p.model for p in pool]},
                 "context_steps": {"type": "integer", "minimum": lo, "maximum": hi,
                                   "description": f"default {HISTORY_HOURS}"},
                 "horizon": {**_HORIZON, "description": "default: covers the target"},
                 **dict(extra or {})}, required, **keywords)


_REQUEST_EXTRA = {"replay": ({"origin": _ISO}, ("model", "origin"))}


_SUBMIT_BY_TASK = {
    "decision": _obj({"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA}, **_exactly_one("decisions", "levels")),
    "forecast": _obj({"quantiles": _QUANTILES_SCHEMA, "samples": _SAMPLES_SCHEMA}, **_exactly_one("quantiles", "samples")),
}

REGISTRY: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("catalog", "Case, contract (grid, ramp, shortage weights), methods, tariff, budget and call status. Free.",
             _obj({}), info.catalog),
        Tool("history", "Visible history: the last N hours (last, 1..336, default 48) or an inclusive start/end range of ISO hours. Free.",
             _obj({"last": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS}, "start": _ISO, "end": _ISO},
                  **{"not": {"required": ["last"], "anyOf": [{"required": ["start"]}, {"required": ["end"]}]}}),
             info.history),
        Tool("classical_plan", "Optimal plan under a free classical method's predictive distribution, with its expected loss. Free.",
             _obj({"method": _METHOD_SCHEMA}, ("method",)), planning.classical_plan),
        Tool("plan", "Optimal plan under a bought forecast (forecast_id) or a classical method (method): exactly one. Free.",
             _obj({"method": _METHOD_SCHEMA, "forecast_id": _FORECAST_ID}, **_exactly_one("method", "forecast_id")),
             planning.plan),
        Tool("evaluate_plan", "Expected loss of your plan (decisions or levels) under a bought forecast (forecast_id) "
                              "or a classical method (method). Free.",
             _obj({"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA, "method": _METHOD_SCHEMA,
                   "forecast_id": _FORECAST_ID},
                  allOf=[_exactly_one("decisions", "levels"), _exactly_one("method", "forecast_id")]),
             planning.evaluate_plan),
        Tool("quote", "Price of a forecast request (model, context_steps <= 336, horizon <= 336; defaults: full context, covering horizon) and whether it is affordable and available. Free.",
             _request(protocol_pool()), purchase.quote),
        Tool("forecast", "Buy a quantile forecast (9 quantiles 0.1..0.9 per step from the step after the last visible hour). Charged at the tariff; refused free if unaffordable or unavailable.",
             _request(protocol_pool()), purchase.forecast),
        Tool("replay", "Backtest a model inside the visible history: forecast from origin (ISO hour before the last visible hour) and score the mean pinball loss on visible steps. Charged at the tariff.",
             _request(protocol_pool(), *_REQUEST_EXTRA["replay"]), purchase.replay),
        Tool("abstain", "End the episode without an answer (scored as invalid), recording why, e.g. a harness "
                        "that cannot continue. Does not count toward the call limit.",
             _obj({"reason": {"type": "string"}}), answer.abstain, counts_as_call=False),
        Tool("submit", "Submit the final answer (ends the episode): decisions or levels in decision envs; quantiles "
                       "(24 x 9) or samples (n x 24) in forecast envs. Does not count toward the call limit.",
             _obj({**_SUBMIT_BY_TASK["decision"]["properties"], **_SUBMIT_BY_TASK["forecast"]["properties"]},
                  **_exactly_one("decisions", "levels", "quantiles", "samples")), answer.submit, counts_as_call=False),
    )
}

#: every registered tool, in menu order (an env's default ``tools``)
DEFAULT_TOOLS: tuple[str, ...] = tuple(REGISTRY)
#: the tools that end an episode; every env offers them whatever its ``tools`` list says
ANSWER_TOOLS: tuple[str, ...] = ("submit", "abstain")


def tool_parameters(name: str, task: str = "decision", pool: Sequence[PoolModel] | None = None) -> dict:
    """The argument schema of tool ``name`` in an env of ``task`` and forecast ``pool`` (a copy): ``submit``
    takes ``decisions``/``levels`` in decision envs and ``quantiles``/``samples`` in forecast envs; the
    priced tools take the pool's models with their context ranges (module docstring); every other tool
    has its registry schema.

    Args:
        name: a tool of :data:`REGISTRY`. task: ``"decision"`` or ``"forecast"``.
        pool: the env's :func:`tool_pool` (``None``: the protocol's, :func:`protocol_pool`).

    Raises:
        KeyError: unknown tool. ValueError: unknown task.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {list(TASKS)}")
    if name == "submit":
        return copy.deepcopy(_SUBMIT_BY_TASK[task])
    if name in PRICED_TOOLS and pool is not None:
        REGISTRY[name]  # noqa: B018 - KeyError for an unknown name first
        return _request(pool, *_REQUEST_EXTRA.get(name, ()))
    return copy.deepcopy(REGISTRY[name].parameters)


# narrower flat variants for strict mode where the registry schema branches
_STRICT_HISTORY = _obj({"last": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS,
                                 "description": "the last N visible hours (null: 48)"}})


def _strict_request(name: str, pool: Sequence[PoolModel]) -> dict | None:
    """The flat strict variant of a priced tool: ``context_steps`` in the range EVERY model of the pool
    accepts (``None`` when there is none), nullable (the default, all 336 visible hours) only when every
    model takes the default."""
    lo = max((p.min_context for p in pool), default=2)
    hi = min((p.max_context for p in pool), default=HISTORY_HOURS)
    if lo > hi:
        return None
    ctx = {"type": "integer", "minimum": lo, "maximum": hi,
           "description": f"context length (null: all {HISTORY_HOURS} visible hours)" if hi >= HISTORY_HOURS
           else "context length"}
    extra, required = _REQUEST_EXTRA.get(name, ({}, ("model",)))
    if hi < HISTORY_HOURS:  # a model cannot take the default: the length is always given
        required = (*required, "context_steps")
    return _obj({"model": {"type": "string", "enum": [p.model for p in pool]}, "context_steps": ctx,
                 "horizon": {**_HORIZON, "description": "steps after the context (null: the covering horizon)"},
                 **extra}, required)


def _strict_base(name: str, task: str, pool: Sequence[PoolModel] | None) -> dict | None:
    """The schema :func:`strict_parameters` strictifies (``None``: no flat variant exists)."""
    if name == "history":
        return _STRICT_HISTORY
    if name in PRICED_TOOLS:
        return _strict_request(name, protocol_pool() if pool is None else pool)
    return tool_parameters(name, task)


#: root keywords that strict mode cannot express (rules between arguments)
_BRANCHING = frozenset({"anyOf", "oneOf", "allOf", "not", "if", "then", "else"})


def _nullable(schema: dict) -> dict:
    out = dict(schema)
    t = out.get("type")
    out["type"] = [*(t if isinstance(t, list) else [t]), "null"]
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def _strictify(schema: dict) -> dict:
    out = dict(schema)
    if out.get("type") == "object":
        props = out.get("properties", {})
        req = set(out.get("required", ()))
        out["properties"] = {k: (_strictify(v) if k in req else _nullable(_strictify(v))) for k, v in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False
    if isinstance(out.get("items"), dict):
        out["items"] = _strictify(out["items"])
    return out


def strict_parameters(name: str, task: str = "decision", pool: Sequence[PoolModel] | None = None) -> dict | None:
    """An OpenAI strict-mode argument schema for tool ``name``, or ``None`` where the format does not
    allow one (``plan``, ``evaluate_plan``, ``submit``: "exactly one of" is a rule between arguments;
    a priced tool whose pool has no context length every model accepts).

    Every property is required; properties the handler treats as optional are nullable (``null``
    means "use the default": drop them with :func:`drop_null_arguments` before the call). Every
    instance of the strict schema is, after dropping nulls, an instance of :func:`tool_parameters`
    (``history`` offers only ``last``; ``quote``/``forecast``/``replay`` ask a ``context_steps`` that
    every model of ``pool`` accepts: >= 168 in the protocol's pool).

    Raises:
        KeyError: unknown tool. ValueError: unknown task.
    """
    REGISTRY[name]  # noqa: B018 - KeyError for an unknown name
    base = _strict_base(name, task, pool)
    if base is None or _BRANCHING & set(base):
        return None
    return _strictify(copy.deepcopy(base))


def drop_null_arguments(name: str, args: Mapping[str, Any], task: str = "decision",
                        pool: Sequence[PoolModel] | None = None) -> dict:
    """``args`` without the ``null`` values of properties that :func:`strict_parameters` made nullable
    (strict mode's way of leaving an optional argument out); other keys and values unchanged."""
    schema = strict_parameters(name, task, pool) if name in REGISTRY else None
    if schema is None:
        return dict(args)
    base = _strict_base(name, task, pool) or {}
    optional = set(base.get("properties", {})) - set(base.get("required", ()))
    return {k: v for k, v in args.items() if not (v is None and k in optional)}
