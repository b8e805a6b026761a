"""Constrained replies (--constrain json-schema|grammar): the schema and the GBNF grammar are built from the episode's
own contract (grid, ramp, block ids, 24 x 9 forecasts, the pool's tool arguments); a reply they admit is one the
harness reads; the grammar (unlike JSON Schema) also keeps the ramp. Checked by matching with a small GBNF matcher
(below) and jsonschema; and how a request carries them per server."""
import argparse
import json
import re
from functools import lru_cache

import pytest

jsonschema = pytest.importorskip("jsonschema")

from fwgym.agents.chat.constrain import reply_grammar, reply_json_schema  # noqa: E402
from fwgym.agents.chat.parsing import parse_reply_text  # noqa: E402
from fwgym.agents.openai import OpenAIChatAgent, constraint_fields  # noqa: E402
from fwgym.agents import run_episode  # noqa: E402
from fwgym.core.contract import GRID  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.errors import HarnessError  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, completion  # noqa: E402

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[A-Za-z0-9_-]+|[()|?*+])')


def gbnf(text: str):
    """A matcher of the GBNF subset fwgym writes (literals, classes, references, groups, ``| ? * +``):
    ``match(s)`` is True when the root rule derives exactly ``s``."""
    rules = {}
    for line in text.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        rules[name.strip()] = [t for t in _TOKEN.findall(body)]
    trees = {n: _parse_alternatives(toks)[0] for n, toks in rules.items()}
    return lambda s: _derives(trees, s)


def _parse_alternatives(tokens, i=0):
    """``(node, i)``: the alternatives from ``tokens[i]`` to the closing ``)`` (or the end); node:
    ``("alt", (seq, ...))`` with seq ``((atom, op), ...)``, an atom a token or a nested node, op ``"" ? * +``."""
    alts, seq = [], []
    while i < len(tokens) and tokens[i] != ")":
        t = tokens[i]
        if t == "|":
            alts.append(tuple(seq))
            seq = []
            i += 1
            continue
        if t == "(":
            atom, i = _parse_alternatives(tokens, i + 1)
            i += 1
        else:
            atom, i = t, i + 1
        op = tokens[i] if i < len(tokens) and tokens[i] in "?*+" else ""
        i += bool(op)
        seq.append((atom, op))
    alts.append(tuple(seq))
    return ("alt", tuple(alts)), i


def _derives(trees, s: str) -> bool:
    """Whether the rule ``root`` of ``trees`` derives exactly ``s`` (the sets of end positions each atom reaches)."""
    @lru_cache(maxsize=None)
    def atom_ends(atom, pos):
        if isinstance(atom, tuple):
            return node_ends(atom, pos)
        if atom.startswith('"'):
            lit = json.loads(atom)
            return frozenset([pos + len(lit)]) if s.startswith(lit, pos) else frozenset()
        if atom.startswith("["):
            return frozenset([pos + 1]) if pos < len(s) and re.fullmatch(atom, s[pos]) else frozenset()
        return node_ends(trees[atom], pos)

    def node_ends(node, pos):
        out = set()
        for seq in node[1]:
            ends = {pos}
            for atom, op in seq:
                ends = set().union(*(_repeated_ends(atom_ends, atom, op, e) for e in ends))
            out |= ends
        return frozenset(out)

    return len(s) in node_ends(trees["root"], 0)


def _repeated_ends(atom_ends, atom, op, pos):
    """The end positions of ``atom`` under ``op`` (``""`` once, ``?`` at most once, ``*`` any number, ``+`` at least
    once) from ``pos``."""
    once = atom_ends(atom, pos)
    out = set(once) | ({pos} if op in ("?", "*") else set())
    if op in ("*", "+"):
        frontier = set(once)
        while frontier:
            frontier = {f for x in frontier for f in atom_ends(atom, x)} - out
            out |= frontier
    return out


@pytest.fixture(scope="module")
def episode():
    env = FWBenchEnv("electricity", split="dev")
    obs, info = env.reset(seed=0)
    return info["episode"]


def _levels(idx):
    return json.dumps({"levels": [round(float(GRID[i]), 2) for i in idx]}, separators=(",", ":"))


def test_the_grammar_keeps_the_grid_and_the_ramp(episode):
    match = gbnf(reply_grammar(episode["tools"], "decision", episode))
    assert match(_levels([12] * 8)) and match(_levels([0, 6, 12, 18, 24, 30, 32, 26]))  # 6 steps: the ramp's limit
    assert not match(_levels([0, 7] + [7] * 6))  # 7 grid steps: over the ramp
    assert not match(_levels([12] * 7))  # 7 blocks
    assert not match('{"levels":[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.02]}')  # off the grid
    import random

    rng, ok = random.Random(0), 0
    for k in range(300):  # random walks of steps up to 8 (some over the ramp) and plans of random levels
        idx = [rng.randrange(33)]
        for _ in range(7):
            idx.append(min(32, max(0, idx[-1] + rng.randint(-8, 8))) if k % 2 else rng.randrange(33))
        feasible = all(abs(a - b) <= 6 for a, b in zip(idx, idx[1:]))
        assert match(_levels(idx)) == feasible, idx
        ok += feasible
    assert 20 < ok < 280
    # every answer the grammar admits is a valid plan for the env
    text = _levels([20, 18, 14, 10, 10, 14, 18, 20])
    parsed = parse_reply_text(text, task="decision")
    assert parsed.kind == "answer"


def test_the_grammar_spells_the_pools_tool_calls(episode):
    match = gbnf(reply_grammar(episode["tools"], "decision", episode))
    assert match('{"tool":"classical_plan","args":{"method":"weekday_empirical"}}')
    assert match('{"tool":"catalog","args":{}}') and match('{"tool":"history","args":{"last":48}}')
    assert match('{"tool":"forecast","args":{"model":"chronos2","horizon":50}}')
    assert match('{"tool":"plan","args":{"forecast_id":"f1"}}') and match('{"tool":"plan","args":{"method":"weekly_repeat"}}')
    assert not match('{"tool":"plan","args":{"method":"weekly_repeat","forecast_id":"f1"}}')  # exactly one of
    assert not match('{"tool":"forecast","args":{"model":"ets"}}')  # not in the protocol pool
    assert not match('{"tool":"teleport","args":{}}') and not match('{"tool":"classical_plan","args":{"method":"x"}}')
    ext = FWBenchEnv("electricity", split="dev", models=["seasonal_empirical", "ets"])
    facts = ext.reset(seed=0)[1]["episode"]
    from fwgym.tools.registry import pool_from_facts

    assert gbnf(reply_grammar(facts["tools"], "decision", facts, pool_from_facts(facts["pool"])))(
        '{"tool":"quote","args":{"model":"ets","context_steps":96}}')


def test_the_forecast_grammar_and_schema_have_the_24_by_9_shape():
    env = FWBenchEnv("electricity", split="dev", task="forecast", scenarios=True)
    facts = env.reset(seed=0)[1]["episode"]
    match = gbnf(reply_grammar(facts["tools"], "forecast", facts))
    rows = [[100.0 + k for k in range(9)]] * 24
    assert match(json.dumps({"quantiles": rows}, separators=(",", ":")))
    assert not match(json.dumps({"quantiles": rows[:23]}, separators=(",", ":")))
    schema = reply_json_schema(facts["tools"], "forecast", facts)
    jsonschema.validate({"quantiles": rows}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"quantiles": [r[:8] for r in rows]}, schema)


def test_the_json_schema_has_the_grid_but_cannot_keep_the_ramp(episode):
    schema = reply_json_schema(episode["tools"], "decision", episode)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(_levels([12] * 8)), schema)
    jsonschema.validate(json.loads(_levels([0, 32] * 4)), schema)  # the ramp is the env's check here
    jsonschema.validate({"tool": "classical_plan", "args": {"method": "weekday_empirical"}}, schema)
    for bad in ({"levels": [1.02] * 8}, {"levels": [1.0] * 7}, {"tool": "classical_plan", "args": {"method": "x"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def _schema_nodes(schema):
    """Every subschema a schema-to-grammar converter visits as a schema of its own."""
    yield schema
    for key in ("anyOf", "oneOf", "allOf"):
        for b in schema.get(key, []):
            yield from _schema_nodes(b)
    for v in (schema.get("properties") or {}).values():
        yield from _schema_nodes(v)
    if isinstance(schema.get("items"), dict):
        yield from _schema_nodes(schema["items"])


@pytest.mark.parametrize("models", [None, ["seasonal_empirical", "ets", "theta"]])
def test_the_json_schema_is_one_a_grammar_converter_decodes(models):
    """llama.cpp / llama-cpp-python convert a schema to a grammar branch by branch: a type-less branch such as plan's
    ``{"required": ["method"]}`` is an "Unrecognized schema" there (llama-cpp-python then silently decoded any JSON:
    SmolLM2 wrote ``{"levels": [{"name": ...}]}`` under --constrain json-schema), and a pattern's ``\\d`` is copied
    into a GBNF literal llama.cpp cannot parse (the server crashed). Every node must be complete, with plan's
    "exactly one of method / forecast_id" and the ISO-hour pattern kept."""
    from fwgym.tools.registry import pool_from_facts

    facts = FWBenchEnv("electricity", split="dev", **({"models": models} if models else {})).reset(seed=0)[1]["episode"]
    schema = reply_json_schema(facts["tools"], "decision", facts, pool_from_facts(facts["pool"]))
    jsonschema.Draft202012Validator.check_schema(schema)
    for node in _schema_nodes(schema):
        assert {"type", "const", "enum", "anyOf", "oneOf"} & set(node), node
        assert not {"not", "if", "then", "else", "allOf"} & set(node), node  # evaluate_plan's allOf of 2 oneOf rules
        assert "\\d" not in node.get("pattern", ""), node  # llama-cpp-python writes it into a GBNF literal: no parse
    jsonschema.validate({"tool": "plan", "args": {"method": "weekly_repeat"}}, schema)
    jsonschema.validate({"tool": "plan", "args": {"forecast_id": "f1"}}, schema)
    for bad in ({"method": "weekly_repeat", "forecast_id": "f1"}, {}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"tool": "plan", "args": bad}, schema)
    jsonschema.validate({"tool": "history", "args": {"last": 48}}, schema)
    jsonschema.validate({"tool": "history", "args": {"start": "2024-07-20T13:00:00Z"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool": "history", "args": {"start": "2024-07-20T13:30:00Z"}}, schema)
    short = next(m["model"] for m in facts["pool"] if m["min_context"] <= 96)
    jsonschema.validate({"tool": "quote", "args": {"model": short, "context_steps": 96}}, schema)
    # evaluate_plan: exactly one of decisions | levels and exactly one of method | forecast_id, as 4 complete objects
    for args in ({"levels": [1.0] * 8, "method": "weekly_repeat"}, {"levels": [1.0] * 8, "forecast_id": "f1"}):
        jsonschema.validate({"tool": "evaluate_plan", "args": args}, schema)
    for args in ({"levels": [1.0] * 8}, {"method": "weekly_repeat"},
                 {"levels": [1.0] * 8, "method": "weekly_repeat", "forecast_id": "f1"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"tool": "evaluate_plan", "args": args}, schema)


@pytest.mark.parametrize("suite", ["decision", "context", "forecast"])
def test_llguidance_compiles_every_schema_and_grammar_without_a_warning(suite):
    """The transformers kind's engine (the constrain extra) reads the same payloads a server is sent, all of them:
    no unsupported keyword approximated (before the evaluate_plan expansion it warned "oneOf constraints are not
    supported")."""
    llg = pytest.importorskip("llguidance", reason="the constrain extra (llguidance) is not installed")
    from fwgym.agents.chat.constrain import constraint_payload
    from fwgym.agents.transformers_constrain import JSON_LAYOUT
    from fwgym.evaluation import SUITES

    facts = FWBenchEnv("electricity", split="dev", **SUITES[suite]).reset(seed=0)[1]["episode"]
    schema = constraint_payload("json-schema", facts["tools"], facts["task"], facts)
    grammar = constraint_payload("grammar", facts["tools"], facts["task"], facts)
    for compiled in (llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=JSON_LAYOUT),
                     llg.grammar_from("gbnf", grammar)):
        assert llg.LLMatcher.validate_grammar_with_warnings(compiled) == (False, [])


def test_each_server_gets_its_own_fields():
    assert constraint_fields("grammar", "root ::= x", "llama.cpp") == {"extra_body": {"grammar": "root ::= x"}}
    assert constraint_fields("grammar", "g", "vllm") == {"extra_body": {"guided_grammar": "g"}}
    assert constraint_fields("json-schema", {"a": 1}, "vllm") == {"extra_body": {"guided_json": {"a": 1}}}
    assert constraint_fields("json-schema", {"a": 1}, "llama-cpp-python") == {
        "response_format": {"type": "json_object", "schema": {"a": 1}}}
    assert constraint_fields("json-schema", {"a": 1}, "openai")["response_format"]["type"] == "json_schema"
    with pytest.raises(HarnessError, match="takes no grammar"):
        constraint_fields("grammar", "g", "openai")


def test_a_constrained_episode_end_to_end(plan_and_score, env, case_id):
    """The request carries the episode's grammar (server kind from GET /models: llama.cpp), no native tools; the
    reply is read in text mode; the policy name says the mode."""
    decisions, score = plan_and_score
    levels = [round(d["value"] / env.cases[0].scale, 2) for d in decisions]
    answer = json.dumps({"tool": "submit", "args": {"decisions": decisions}})
    with ScriptedChatServer([completion(answer)], models=None) as srv:
        agent = OpenAIChatAgent("m", base_url=srv.url, constrain="grammar", server_kind="llama.cpp")
        rec = run_episode(env, agent, options={"case_id": case_id}).record
        body = srv.posts()[0]["body"]
    assert agent.name == "openai:m+grammar" and "tools" not in body and body["grammar"].startswith("root ::=")
    assert gbnf(body["grammar"])(_levels([int(round((x - 0.4) / 0.05)) for x in levels]))
    assert rec["valid"] and rec["S"] == score


def test_max_tokens_must_hold_the_answer():
    from fwgym.cli.agent_kinds.llm import answer_tokens, check_max_tokens

    need, how = answer_tokens("forecast")
    assert need > 500 and "characters" in how and answer_tokens("decision")[0] < 40
    with pytest.raises(ValueError, match="cannot hold a forecast-suite answer"):
        check_max_tokens(argparse.Namespace(suite="forecast"), 256)
    check_max_tokens(argparse.Namespace(suite="decision"), 128)
