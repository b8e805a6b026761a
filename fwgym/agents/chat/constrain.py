"""Constrained replies (``--constrain json-schema|grammar``): a JSON schema or a GBNF grammar of the episode's own
replies, for servers that constrain decoding (llama.cpp, vLLM, the OpenAI API), so that small models can answer.

A constrained reply is one JSON value, either a tool call ``{"tool": NAME, "args": {...}}`` of one of the
episode's tools or the final answer, exactly what fwgym's text mode reads (:mod:`fwgym.agents.chat.parsing`); both
are built from the episode's facts (``info["episode"]``), never from constants:

* the answer: in decision episodes ``{"levels": [8 levels]}`` with each level one of the contract's 33 grid
  levels (``normalised_grid``); the GBNF grammar also encodes the ramp (adjacent levels at most ``ramp`` apart,
  the contract's 0.30 = 6 grid steps), which JSON Schema cannot express; in forecast episodes
  ``{"quantiles": [24 rows of 9 numbers]}`` (the 24 x 9 shape; the non-decreasing order is the env's check);
* the tool calls: the argument schemas of the episode's pool (:func:`fwgym.tools.registry.tool_parameters`); the
  grammar writes the arguments of the tools whose arguments it can spell (enums, integers, the ISO hour, the
  plan's "exactly one of"); ``submit`` is the answer itself.

What the grammar cannot encode (an integer's range, a model's minimum context) the env still refuses as a
counted call, as always.
"""
from __future__ import annotations

import itertools
import json
from typing import Any, Callable, Mapping, Sequence

from fwgym.core.contract import DECISION_IDS, GRID, RAMP, TARGET_HOURS
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.tools.registry import PoolModel, tool_parameters

__all__ = ["reply_json_schema", "decodable_schema", "reply_grammar", "answer_example", "answer_lengths", "ANSWER_SCALE",
           "GRAMMAR_TOOLS"]

#: the tools whose arguments the grammar spells (the answer stands for ``submit``)
GRAMMAR_TOOLS = ("catalog", "history", "classical_plan", "plan", "quote", "forecast")


def _grid(facts: Mapping) -> list[float]:
    contract = facts.get("contract") or {}
    return [float(x) for x in (contract.get("normalised_grid") or GRID.tolist())]


def _level_text(x: float) -> str:
    return repr(round(float(x), 2))


def _answer_schema(facts: Mapping, task: str) -> dict:
    if task == "forecast":
        row = {"type": "array", "items": {"type": "number"}, "minItems": len(QUANTILE_LEVELS),
               "maxItems": len(QUANTILE_LEVELS)}
        prop = {"quantiles": {"type": "array", "items": row, "minItems": TARGET_HOURS, "maxItems": TARGET_HOURS}}
    else:
        n = len((facts.get("contract") or {}).get("decision_ids") or DECISION_IDS)
        levels = [round(x, 2) for x in _grid(facts)]
        prop = {"levels": {"type": "array", "items": {"enum": levels}, "minItems": n, "maxItems": n}}
    return {"type": "object", "properties": prop, "required": list(prop), "additionalProperties": False}


#: validation-only keywords that schema-to-grammar converters cannot spell (llama.cpp, llama-cpp-python); the
#: env checks them (a counted call)
_VALIDATION_ONLY = ("not", "if", "then", "else")


def decodable_schema(schema: Mapping) -> dict:
    """``schema`` (a tool's argument schema) in the subset that schema-to-grammar converters decode.

    llama.cpp's and llama-cpp-python's converters read every ``oneOf`` / ``anyOf`` branch as a schema of its own, so
    a branch that only says ``{"required": [...]}`` (``plan``'s "exactly one of ``method`` / ``forecast_id``") is an
    "Unrecognized schema": llama.cpp refuses the request, llama-cpp-python silently decodes any JSON instead. Here
    such a ``oneOf`` becomes one complete object per branch (its own required property, none of the other branches'
    properties, so "exactly one" still holds; an ``allOf`` of several such rules, ``evaluate_plan``'s, one object per
    combination of their branches), and ``not`` / ``if`` / ``then`` / ``else`` are dropped (the env
    still refuses what they excluded, as a counted call). A pattern's ``\\d`` becomes ``[0-9]`` (the same ASCII
    digits in JSON Schema's ECMA-262 regexes): llama-cpp-python 0.3.36 copies ``\\d`` into a GBNF literal, which
    llama.cpp fails to parse (and the server crashed). Other schemas are returned as they are (copied).
    """
    out = {k: v for k, v in schema.items() if k not in _VALIDATION_ONLY}
    named_by_rules: set | None = None
    groups = out.get("allOf")
    if isinstance(groups, list) and groups and all(_required_choice(g) for g in groups) and "oneOf" not in out:
        # several "exactly one of" rules (evaluate_plan: decisions | levels, and method | forecast_id): one oneOf of
        # their combinations, expanded below like a single rule
        del out["allOf"]
        out["oneOf"] = [{"required": [p for b in combo for p in b["required"]]}
                        for combo in itertools.product(*(g["oneOf"] for g in groups))]
        named_by_rules = {p for g in groups for b in g["oneOf"] for p in b["required"]}
    if isinstance(out.get("pattern"), str):
        out["pattern"] = out["pattern"].replace(r"\d", "[0-9]")
    props = out.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {k: decodable_schema(v) if isinstance(v, Mapping) else v for k, v in props.items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = decodable_schema(out["items"])
    for key in ("oneOf", "anyOf"):
        branches = out.get(key)
        if not isinstance(branches, list):
            continue
        if isinstance(props, Mapping) and all(isinstance(b, Mapping) and set(b) == {"required"} for b in branches):
            del out[key]
            named = named_by_rules or {p for b in branches for p in b["required"]}
            alts = []
            for b in branches:
                keep = {k: v for k, v in out["properties"].items() if k in b["required"] or k not in named}
                req = list(dict.fromkeys([*out.get("required", []), *b["required"]]))
                alts.append({**out, "properties": keep, "required": req})
            return {"anyOf": alts}
        out[key] = [decodable_schema(b) if isinstance(b, Mapping) else b for b in branches]
    return out


def _required_choice(part: Any) -> bool:
    """Whether ``part`` is ``{"oneOf": [{"required": [...]}, ...]}`` (an "exactly one of" rule)."""
    return isinstance(part, Mapping) and set(part) == {"oneOf"} and isinstance(part["oneOf"], list) and all(
        isinstance(b, Mapping) and set(b) == {"required"} for b in part["oneOf"])


def reply_json_schema(tools: Sequence[str], task: str, facts: Mapping, pool: Sequence[PoolModel] | None = None) -> dict:
    """The JSON schema of one constrained reply: ``anyOf`` the answer and a tool call of each tool but
    ``submit`` and ``abstain`` (module docstring), each tool's arguments in the subset that schema-to-grammar
    converters decode (:func:`decodable_schema`)."""
    calls = [{"type": "object", "properties": {"tool": {"const": t},
                                               "args": decodable_schema(tool_parameters(t, task, pool))},
              "required": ["tool", "args"], "additionalProperties": False}
             for t in tools if t not in ("submit", "abstain")]
    return {"anyOf": [_answer_schema(facts, task), *calls]}


# -- GBNF ------------------------------------------------------------------------------------------------


def _lit(text: str) -> str:
    """A GBNF string literal of ``text``."""
    return json.dumps(text)


def _levels_rules(facts: Mapping) -> list[str]:
    """``levels ::= "[" ... "]"``: 8 grid levels, adjacent ones at most the ramp apart (a rule per position and level)."""
    grid = _grid(facts)
    ramp = float((facts.get("contract") or {}).get("ramp", RAMP))
    n = len((facts.get("contract") or {}).get("decision_ids") or DECISION_IDS)
    near = {g: [h for h in range(len(grid)) if abs(grid[h] - grid[g]) <= ramp + 1e-9] for g in range(len(grid))}
    rules = ["levels ::= \"[\" ws (" + " | ".join(f"p0g{g}" for g in range(len(grid))) + ") ws \"]\""]
    for k in range(n):
        for g in range(len(grid)):
            head = _lit(_level_text(grid[g]))
            if k == n - 1:
                rules.append(f"p{k}g{g} ::= {head}")
            else:
                nxt = " | ".join(f"p{k + 1}g{h}" for h in near[g])
                rules.append(f"p{k}g{g} ::= {head} \",\" ws ({nxt})")
    return rules


def _quantiles_rules() -> list[str]:
    row = "\"[\" ws " + " \",\" ws ".join(["num"] * len(QUANTILE_LEVELS)) + " ws \"]\""
    rows = " \",\" ws ".join(["row"] * TARGET_HOURS)
    return [f"quantiles ::= \"[\" ws {rows} ws \"]\"", f"row ::= {row}"]


def _value_rule(name: str, schema: Mapping) -> str:
    """A GBNF rule for one argument value (enum, integer, number, the ISO hour, a forecast id)."""
    if "enum" in schema:
        return f"{name} ::= " + " | ".join(_lit(json.dumps(v)) for v in schema["enum"])
    t = schema.get("type")
    if t == "integer":
        return f"{name} ::= [1-9] [0-9]? [0-9]?"
    if t == "number":
        return f"{name} ::= num"
    if schema.get("pattern"):
        return f"{name} ::= \"\\\"\" [0-9] [0-9] [0-9] [0-9] \"-\" [0-9] [0-9] \"-\" [0-9] [0-9] \"T\" [0-9] [0-9] \":00:00Z\\\"\""
    return f"{name} ::= \"\\\"f\" [1-9] \"\\\"\""  # a forecast id (f1, f2, ...)


def _tool_rules(tool: str, task: str, pool: Sequence[PoolModel] | None) -> list[str]:
    schema = tool_parameters(tool, task, pool)
    props = schema.get("properties", {})
    if tool == "history":  # last only: last and start/end together are refused
        props = {"last": props["last"]}
    rules, pairs = [], {}
    for key, sub in props.items():
        vname = f"v-{tool}-{key}".replace("_", "-")
        rules.append(_value_rule(vname, sub))
        pairs[key] = f"{_lit(json.dumps(key))} ws \":\" ws {vname}"
    one = schema.get("oneOf")
    if isinstance(one, list) and all(set(b) == {"required"} and len(b["required"]) == 1 for b in one):
        body = " | ".join(pairs[b["required"][0]] for b in one)  # exactly one of: one key at a time
    else:
        required = [k for k in schema.get("required", ()) if k in pairs]
        optional = [k for k in pairs if k not in required]
        if required:
            body = " \",\" ws ".join(pairs[k] for k in required) + "".join(f" (\",\" ws {pairs[k]})?" for k in optional)
        elif optional:  # any ordered subset of the optional arguments
            body = "(" + " | ".join(pairs[k] + "".join(f" (\",\" ws {pairs[o]})?" for o in optional[i + 1:])
                                    for i, k in enumerate(optional)) + ")?"
        else:
            body = ""
    args = f"\"{{\" ws ({body}) ws \"}}\"" if body else "\"{\" ws \"}\""
    name = f"call-{tool}".replace("_", "-")
    rules.insert(0, f"{name} ::= \"{{\" ws \"\\\"tool\\\"\" ws \":\" ws {_lit(json.dumps(tool))} ws \",\" ws "
                    f"\"\\\"args\\\"\" ws \":\" ws {args} ws \"}}\"")
    return rules


def reply_grammar(tools: Sequence[str], task: str, facts: Mapping, pool: Sequence[PoolModel] | None = None) -> str:
    """The GBNF grammar (llama.cpp's dialect) of one constrained reply: the answer (the levels with the grid and
    the ramp, or the 24 x 9 quantiles) or a tool call of the episode's tools of :data:`GRAMMAR_TOOLS`."""
    offered = [t for t in tools if t in GRAMMAR_TOOLS]
    key, answer_rules = ("quantiles", _quantiles_rules()) if task == "forecast" else ("levels", _levels_rules(facts))
    alternatives = [f"\"{{\" ws \"\\\"{key}\\\"\" ws \":\" ws {key} ws \"}}\""]
    rules: list[str] = []
    for t in offered:
        rules += _tool_rules(t, task, pool)
        alternatives.append(f"call-{t}".replace("_", "-"))
    head = [f"root ::= {' | '.join(alternatives)}", "ws ::= [ ]?", "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)?"]
    return "\n".join(head + answer_rules + rules) + "\n"


#: the series scale of :func:`answer_lengths` (values of 6 integer digits, as the largest electricity series')
ANSWER_SCALE = 100_000.0


def answer_example(task: str, facts: Mapping, *, direct: bool = False) -> str:
    """A typical final answer of the episode as text (what ``--max-tokens`` must hold): 8 levels, or 24 x 9
    quantiles written with the digits of values at the series' scale (``facts["case"]["scale"]``, default 1000)
    and one decimal; with ``direct`` (the direct prompt), a forecast is Context is Key's 24 ``(timestamp, value)``
    lines between ``<forecast>`` tags (:mod:`fwgym.agents.chat.direct`)."""
    if task == "forecast":
        scale = float((facts.get("case") or {}).get("scale") or 1000.0)
        v = round(scale * 1.137, 1)
        if direct:
            lines = [f"(2024-01-27 {h:02d}:00:00, {v})" for h in range(TARGET_HOURS)]
            return "<forecast>\n" + "\n".join(lines) + "\n</forecast>"
        rows = [[v] * len(QUANTILE_LEVELS)] * TARGET_HOURS
        return json.dumps({"quantiles": rows})
    grid = _grid(facts)
    return json.dumps({"levels": [round(grid[len(grid) // 2 + 1], 2)] * len(DECISION_IDS)})


def answer_lengths(count: Callable[[str], int], *, direct: bool = False) -> dict[str, int]:
    """Tokens of a typical final answer per task, ``{"decision": n, "forecast": n}``, counted by ``count`` (text ->
    tokens: a model's tokenizer, or a server's ``usage``) on :func:`answer_example` at :data:`ANSWER_SCALE`."""
    facts = {"case": {"scale": ANSWER_SCALE}}
    return {task: int(count(answer_example(task, facts, direct=direct))) for task in ("decision", "forecast")}


def constraint_payload(mode: str, tools: Sequence[str], task: str, facts: Mapping,
                       pool: Sequence[PoolModel] | None = None) -> Any:
    """The schema (``json-schema``) or grammar text (``grammar``) of a session's replies."""
    if mode == "json-schema":
        return reply_json_schema(tools, task, facts, pool)
    if mode == "grammar":
        return reply_grammar(tools, task, facts, pool)
    raise ValueError(f"unknown constrain mode {mode!r}")
