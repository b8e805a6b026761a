"""The tool schemas the chat agents send match what the handlers accept (fwgym.tools.registry): hypothesis
draws schema-valid arguments for every tool and task and plays them on the real env; none may be refused as
``invalid_arguments`` (content refusals such as an off-grid plan or an unknown forecast id are allowed). The
strict-mode variants are OpenAI strict compatible and accept a subset of what the handlers accept."""
import copy
import json
from datetime import datetime

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="the schema tests validate with jsonschema")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.testing.fuzz import schema_values  # noqa: E402
from fwgym.tools import REGISTRY  # noqa: E402
from fwgym.tools.registry import (STRICT_KEYWORDS, TASKS, drop_null_arguments, strict_parameters,  # noqa: E402
                                  tool_parameters)

#: refusals that depend on the episode's content, which a schema cannot know
CONTENT_CODES = {"out_of_range", "not_found", "invalid_plan", "insufficient_budget", "model_unavailable",
                 "horizon_too_short", "backend_error"}


@pytest.fixture(scope="module")
def envs():
    return {t: FWBenchEnv("electricity", split="dev", task=t, invalid_submission="error", call_limit="error")
            for t in TASKS}


def _play(env, tool, args):
    env.reset(options={"case_id": env.cases[0].case_id})
    _, _, term, _, info = env.step({"tool": tool, "args": args})
    res = info.get("tool_result") or {}
    if res.get("ok") or (term and info.get("valid")):
        return "ok"
    err = res.get("error", {})
    if tool == "replay" and "context_steps" in args and "must be in" in err.get("message", ""):
        # beyond JSON Schema: a replay's context is at most the visible hours before its origin
        case = env.episode.case
        from fwgym.core.series import datetime_to_hour

        origin = datetime_to_hour(datetime.fromisoformat(args["origin"].replace("Z", "+00:00")))
        assert args["context_steps"] > origin - case.history_start + 1, (args, err)
        return "ok"
    return err


CASES = [(name, task) for name in REGISTRY for task in (TASKS if name == "submit" else ("decision",))]


@pytest.mark.parametrize("name,task", CASES)
def test_schema_valid_arguments_pass_the_handlers_structural_checks(envs, name, task):
    schema = tool_parameters(name, task)
    jsonschema.Draft202012Validator.check_schema(schema)

    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(schema_values(schema))
    def check(args):
        jsonschema.validate(args, schema)
        out = _play(envs[task], name, args)
        assert out == "ok" or out.get("code") in CONTENT_CODES | {"abstained"}, (name, task, json.dumps(args)[:300], out)

    check()


@pytest.mark.parametrize("name,args", [
    ("history", {"last": 5, "start": "2024-07-01T00:00:00Z"}),  # last and start/end: both
    ("history", {"start": "yesterday"}),  # not an ISO hour
    ("plan", {}), ("plan", {"method": "hour_of_day_empirical", "forecast_id": "f1"}),  # exactly one source
    ("evaluate_plan", {"levels": [1.0] * 8}),  # no source
    ("evaluate_plan", {"levels": [1.0] * 8, "decisions": [], "method": "hour_of_day_empirical"}),
    ("quote", {"model": "seasonal_empirical", "context_steps": 100}),  # seasonal needs a week
    ("replay", {"model": "chronos2", "origin": "2024-07-01T00:30:00Z"}),  # not on the hour
    ("submit", {"quantiles": [[1.0] * 9] * 24}),  # a forecast in a decision env
    ("submit", {"levels": [1.0] * 8, "decisions": []}),
])
def test_the_six_mismatches_of_issue_19_are_schema_invalid_now(name, args):
    """Calls the handlers refuse as invalid_arguments are refused by the schemas too."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, tool_parameters(name, "decision"))


def test_submit_schema_follows_the_task():
    assert set(tool_parameters("submit", "decision")["properties"]) == {"decisions", "levels"}
    assert set(tool_parameters("submit", "forecast")["properties"]) == {"quantiles", "samples"}
    assert set(REGISTRY["submit"].parameters["properties"]) == {"decisions", "levels", "quantiles", "samples"}
    with pytest.raises(ValueError, match="unknown task"):
        tool_parameters("submit", "poetry")


def _walk(schema, path=()):
    yield path, schema
    for k, v in schema.get("properties", {}).items():
        yield from _walk(v, path + (k,))
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], path + ("[]",))
    for i, b in enumerate(schema.get("anyOf", ())):
        yield from _walk(b, path + (f"anyOf{i}",))


def test_strict_variants_are_openai_strict_compatible():
    strict = {n: strict_parameters(n) for n in REGISTRY}
    assert sorted(n for n, s in strict.items() if s is not None) == sorted(
        ["catalog", "history", "classical_plan", "quote", "forecast", "replay", "abstain"])
    assert {n for n, s in strict.items() if s is None} == {"plan", "evaluate_plan", "submit"}
    for name, s in strict.items():
        if s is None:
            continue
        assert "anyOf" not in s and s["type"] == "object"
        for path, node in _walk(s):
            assert set(node) <= STRICT_KEYWORDS, (name, path, set(node) - STRICT_KEYWORDS)
            if node.get("type") == "object":
                assert node["additionalProperties"] is False and node["required"] == list(node["properties"]), (name, path)
        try:  # the SDK's own strict-schema normaliser leaves a strict schema unchanged
            from openai.lib._pydantic import _ensure_strict_json_schema
        except ImportError:  # pragma: no cover - the llm extra is not installed
            continue
        again = copy.deepcopy(s)
        assert _ensure_strict_json_schema(again, path=(), root=again) == s, name


@pytest.mark.parametrize("name", ["catalog", "history", "classical_plan", "quote", "forecast", "replay", "abstain"])
def test_strict_instances_are_accepted_once_nulls_are_dropped(envs, name):
    schema = strict_parameters(name)

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(schema_values(schema))
    def check(args):
        jsonschema.validate(args, schema)
        plain = drop_null_arguments(name, args)
        assert None not in plain.values()
        jsonschema.validate(plain, tool_parameters(name))
        out = _play(envs["decision"], name, plain)
        assert out == "ok" or out.get("code") in CONTENT_CODES | {"abstained"}, (name, plain, out)

    check()
    assert drop_null_arguments("history", {"last": None}) == {}
    assert drop_null_arguments("plan", {"method": None}) == {"method": None}  # not a strict tool: unchanged
