"""Fuzzing helpers shared by the test suite and ``benchmarks/fuzz_actions.py`` (needs ``hypothesis``).

:func:`action_strategy` generates agent actions: random text, random JSON values (NaN, infinities,
huge integers, unicode, nesting), tool calls with random arguments, and JSON strings of them.
:func:`play_fuzzed` plays a sequence through an env and asserts the episode invariants.
:func:`feasible_index_paths` generates ramp-feasible plans (8 grid indices).
:func:`schema_values` generates instances of a tool's argument schema (the JSON Schema subset of
:mod:`fwgym.tools.registry`; needs ``jsonschema`` for the rules between arguments).
"""
from __future__ import annotations

import json
import math

__all__ = ["action_strategy", "feasible_index_paths", "play_fuzzed", "schema_values"]

_TOOLS = ["catalog", "history", "classical_plan", "plan", "evaluate_plan", "quote", "forecast", "replay", "submit",
          "abstain", "nope", ""]
_KEYS = ["last", "start", "end", "method", "decisions", "levels", "forecast_id", "model", "context_steps", "horizon",
         "origin", "quantiles", "samples", "reason", "x"]


def action_strategy():
    """A hypothesis strategy of agent actions (str or dict)."""
    from hypothesis import strategies as st

    leaf = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**320)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
            | st.sampled_from(["2024-07-10T00:00:00Z", "2015-10-01T12:00:00+01:00", "hour_of_day_empirical",
                               "seasonal_empirical", "chronos2", "f1", "1e309", "NaN"]))
    values = st.recursive(leaf, lambda ch: st.lists(ch, max_size=6) | st.dictionaries(st.text(max_size=10), ch, max_size=5),
                          max_leaves=25)
    args = st.dictionaries(st.sampled_from(_KEYS), values, max_size=4)
    calls = st.builds(lambda t, a: {"tool": t, "args": a}, st.sampled_from(_TOOLS), args)
    return st.one_of(
        st.text(max_size=300),
        values,
        calls,
        st.builds(lambda c: json.dumps(c, allow_nan=True), calls),
        st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 5000)),  # deep nesting
        st.builds(lambda t: '{"tool": "%s", "tool": "catalog"}' % t, st.sampled_from(_TOOLS)),  # duplicate keys
    )


def feasible_index_paths():
    """A hypothesis strategy of ramp-feasible plans: lists of 8 grid indices in 0..32 whose adjacent
    entries differ by at most 6 (a random start, then random steps in -6..6 clipped to the grid)."""
    from hypothesis import strategies as st

    def walk(start, steps):
        path = [start]
        for s in steps:
            path.append(min(32, max(0, path[-1] + s)))
        return path

    return st.builds(walk, st.integers(0, 32), st.lists(st.integers(-6, 6), min_size=7, max_size=7))


def play_fuzzed(env, actions, seed: int) -> int:
    """Play ``actions`` on ``env`` (reset with ``seed``) and assert the invariants: no exception escapes,
    observations stay in the space, rewards are finite, credits stay in [0, budget], the call counter
    is exact and every error names what was wrong. Returns the number of steps taken."""
    obs, info = env.reset(seed=seed)
    unwrapped = env.unwrapped
    expected_calls, steps = 0, 0
    for action in actions:
        before = unwrapped.episode.calls
        obs, reward, terminated, truncated, info = env.step(action)
        steps += 1
        assert env.observation_space.contains(obs), "observation outside the space"
        assert math.isfinite(reward)
        assert 0 <= info["credits"] <= unwrapped.budget
        assert info["calls"] in (before, before + 1)
        if not terminated:
            result = json.loads(obs["last_result"])
            is_submit = result.get("tool") in ("submit", "abstain")
            if not is_submit or not result["ok"]:
                expected_calls += 1
            if not result["ok"]:
                assert result["error"]["code"] and len(result["error"]["message"]) >= 10
            assert info["calls"] == expected_calls
        else:
            assert info["status"] in ("submitted", "invalid_submission", "call_limit_exceeded", "abstained")
            break
    return steps


def _iso_hours():
    from datetime import datetime, timedelta, timezone

    from hypothesis import strategies as st

    t0 = datetime(2023, 1, 1, tzinfo=timezone.utc)
    return st.builds(lambda h, fmt: (t0 + timedelta(hours=h)).strftime(fmt), st.integers(0, 3 * 365 * 24),
                     st.sampled_from(["%Y-%m-%dT%H:00:00Z", "%Y-%m-%dT%H:00Z", "%Y-%m-%dT%H:00:00+00:00"]))


def schema_values(schema: dict):
    """A hypothesis strategy of instances of ``schema``: the JSON Schema subset of fwgym's tool schemas
    (types, enums, bounds, arrays, ``anyOf``, objects whose optional properties are drawn or left out;
    rules between arguments, ``oneOf`` / ``not`` / ``if``-``then`` / ``allOf``, by filtering with
    ``jsonschema``). ISO-hour strings are drawn as real hours in three spellings.

    Raises:
        AssertionError: a schema construct outside that subset.
    """
    import jsonschema
    from hypothesis import strategies as st

    from fwgym.tools.registry import ISO_HOUR_PATTERN

    if "anyOf" in schema:
        return st.one_of([schema_values(b) for b in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if isinstance(t, list):
        return st.one_of([schema_values({**schema, "type": x}) for x in t])
    if t == "null":
        return st.none()
    if t == "integer":
        return st.integers(schema.get("minimum", -10**6), schema.get("maximum", 10**6))
    if t == "number":
        lo, hi = schema.get("minimum", -1e12), schema.get("maximum", 1e12)
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False) | st.integers(math.ceil(lo), math.floor(hi))
    if t == "string":
        if schema.get("pattern") == ISO_HOUR_PATTERN:
            return _iso_hours()
        return st.text(max_size=12) | st.sampled_from(["f1", "f2", "hour_of_day_empirical"])
    if t == "array":
        lo, hi = schema.get("minItems", 0), schema.get("maxItems", 12)
        return st.lists(schema_values(schema.get("items", {})), min_size=lo, max_size=min(hi, max(lo, 12)))
    if t == "object":
        props, req = schema.get("properties", {}), set(schema.get("required", ()))
        valid = jsonschema.Draft202012Validator(schema).is_valid  # rules between arguments

        @st.composite
        def obj(draw):
            return {k: draw(schema_values(v)) for k, v in props.items() if k in req or draw(st.booleans())}
        return obj().filter(valid)
    raise AssertionError(f"schema construct not covered: {schema}")
