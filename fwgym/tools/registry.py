"""The tool registry: every tool's name, description, JSON schema of its arguments, handler and call
accounting (DESIGN §6). One :class:`~fwgym.tools.actions.Tool` per action of the vocabulary;
:data:`REGISTRY` maps names to them, in menu order. The OpenAI-style function schemas
(:meth:`~fwgym.tools.actions.Tool.schema`) are what chat agents see.
"""
from __future__ import annotations

from fwgym.cases import HISTORY_HOURS
from fwgym.contract import DECISION_IDS
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS
from fwgym.tools import answer, info, planning, purchase
from fwgym.tools.actions import Tool

__all__ = ["REGISTRY", "DEFAULT_TOOLS", "ANSWER_TOOLS"]


_DECISIONS_SCHEMA = {
    "type": "array",
    "minItems": 8,
    "maxItems": 8,
    "description": "8 records b00..b07 with physical capacities from the capacity grid",
    "items": {
        "type": "object",
        "properties": {"decision_id": {"type": "string", "enum": list(DECISION_IDS)}, "value": {"type": "number"}},
        "required": ["decision_id", "value"],
    },
}
_LEVELS_SCHEMA = {"type": "array", "items": {"type": "number"}, "minItems": 8, "maxItems": 8,
                  "description": "alternative to decisions: 8 normalised grid levels 0.40..2.00"}
_METHOD_SCHEMA = {"type": "string", "enum": list(CLASSICAL_METHODS)}
_REQUEST_PROPS = {"model": {"type": "string", "enum": list(PRICED_MODELS)},
                  "context_steps": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS},
                  "horizon": {"type": "integer", "minimum": 1, "maximum": 336}}

REGISTRY: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("catalog", "Case, contract (grid, ramp, shortage weights), methods, tariff, budget and call status. Free.",
             {"type": "object", "properties": {}, "additionalProperties": False}, info.catalog),
        Tool("history", "Visible history: the last N hours (last, 1..336, default 48) or an inclusive start/end range of ISO hours. Free.",
             {"type": "object", "properties": {"last": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS},
                                               "start": {"type": "string"}, "end": {"type": "string"}},
              "additionalProperties": False}, info.history),
        Tool("classical_plan", "Optimal plan under a free classical method's predictive distribution, with its expected loss. Free.",
             {"type": "object", "properties": {"method": _METHOD_SCHEMA}, "required": ["method"], "additionalProperties": False},
             planning.classical_plan),
        Tool("plan", "Optimal plan under a bought forecast (forecast_id) or a classical method. Free.",
             {"type": "object", "properties": {"method": _METHOD_SCHEMA, "forecast_id": {"type": "string"}},
              "additionalProperties": False}, planning.plan),
        Tool("evaluate_plan", "Expected loss of your plan under a bought forecast (forecast_id) or a classical method. Free.",
             {"type": "object", "properties": {"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA,
                                               "method": _METHOD_SCHEMA, "forecast_id": {"type": "string"}},
              "additionalProperties": False}, planning.evaluate_plan),
        Tool("quote", "Price of a forecast request (model, context_steps <= 336, horizon <= 336; defaults: full context, covering horizon) and whether it is affordable and available. Free.",
             {"type": "object", "properties": _REQUEST_PROPS, "required": ["model"], "additionalProperties": False}, purchase.quote),
        Tool("forecast", "Buy a quantile forecast (9 quantiles 0.1..0.9 per step from the step after the last visible hour). Charged at the tariff; refused free if unaffordable or unavailable.",
             {"type": "object", "properties": _REQUEST_PROPS, "required": ["model"], "additionalProperties": False}, purchase.forecast),
        Tool("replay", "Backtest a model inside the visible history: forecast from origin (ISO hour before the last visible hour) and score the mean pinball loss on visible steps. Charged at the tariff.",
             {"type": "object", "properties": {**_REQUEST_PROPS, "origin": {"type": "string"}}, "required": ["model", "origin"],
              "additionalProperties": False}, purchase.replay),
        Tool("abstain", "End the episode without an answer (scored as invalid), recording why, e.g. a harness "
                        "that cannot continue. Does not count toward the call limit.",
             {"type": "object", "properties": {"reason": {"type": "string"}}, "additionalProperties": False},
             answer.abstain, counts_as_call=False),
        Tool("submit", "Submit the final answer (ends the episode): decisions or levels in decision envs; quantiles "
                       "(24 x 9) or samples (n x 24) in forecast envs. Does not count toward the call limit.",
             {"type": "object", "properties": {"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA,
                                               "quantiles": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                                               "samples": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
              "additionalProperties": False}, answer.submit, counts_as_call=False),
    )
}

#: every registered tool, in menu order (an env's default ``tools``)
DEFAULT_TOOLS: tuple[str, ...] = tuple(REGISTRY)
#: the tools that end an episode; every env offers them whatever its ``tools`` list says
ANSWER_TOOLS: tuple[str, ...] = ("submit", "abstain")
