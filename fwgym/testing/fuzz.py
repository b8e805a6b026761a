"""Fuzzing helpers shared by the test suite and ``benchmarks/fuzz_actions.py`` (needs ``hypothesis``).

:func:`action_strategy` generates agent actions: random text, random JSON values (NaN, infinities,
huge integers, unicode, nesting), tool calls with random arguments, and JSON strings of them.
:func:`play_fuzzed` plays a sequence through an env and asserts the episode invariants.
:func:`feasible_index_paths` generates ramp-feasible plans (8 grid indices).
"""
from __future__ import annotations

import json
import math

__all__ = ["action_strategy", "feasible_index_paths", "play_fuzzed"]

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
