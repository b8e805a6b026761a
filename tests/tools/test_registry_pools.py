"""Tool schemas per forecast pool (fwgym.tools.registry): the priced tools' schemas (native and strict) and the
prompt's tool listing are built from the env's own pool and each forecaster's context range, so a model that
follows the schema can buy every model the env sells and nothing else; fuzzed schema <=> handler agreement over
the protocol, extended and plug-in pools."""
import json

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="the schema tests validate with jsonschema")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from fwgym.agents.chat import ChatSession  # noqa: E402
from fwgym.core.series import hour_to_iso, iso_to_hour  # noqa: E402
from fwgym.agents.chat.prompts import describe_args, tool_lines, tool_schemas  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.forecasters import register_forecaster, unregister_forecaster  # noqa: E402
from fwgym.forecasters.registry import EXTENDED_MODELS, PRICED_MODELS  # noqa: E402
from fwgym.forecasters.seasonal import SeasonalEmpirical  # noqa: E402
from pool_plugins import ShortContext  # noqa: E402  (tests/tools/pool_plugins.py: a worker can import it)
from fwgym.testing.fuzz import schema_values  # noqa: E402
from fwgym.tools import REGISTRY  # noqa: E402
from fwgym.tools.registry import (PRICED_TOOLS, PoolModel, drop_null_arguments, pool_facts,  # noqa: E402
                                  pool_from_facts, protocol_pool, strict_parameters, tool_parameters, tool_pool)

#: refusals that depend on the episode's content (a schema cannot know them)
CONTENT_CODES = {"out_of_range", "insufficient_budget", "model_unavailable", "backend_error"}
ROWS_96 = {96: [500, 510, 520, 530, 540, 550]}
ROWS = {96: [900, 900, 950, 1000, 1100, 1200], 336: [1000, 1001, 1050, 1100, 1200, 1300]}


@pytest.fixture(scope="module")
def plugins():
    register_forecaster("toy96", ShortContext, ROWS_96, min_context=24, replace=True)  # priced only up to 96 hours
    register_forecaster("toy_week", SeasonalEmpirical, ROWS, min_context=180, replace=True)
    yield ("toy96", "toy_week")
    unregister_forecaster("toy96")
    unregister_forecaster("toy_week")


POOLS = {"protocol": None, "extended": EXTENDED_MODELS,
         "plugin": EXTENDED_MODELS + ("toy96", "toy_week"), "short": ("chronos_bolt_tiny", "toy96")}


@pytest.fixture(scope="module")
def envs(plugins):
    """One env per pool; budget 0: every structurally valid request reaches the affordability check (a content
    refusal, free) without running a forecaster, so the fuzz stays fast and measures the structural checks only."""
    return {name: FWBenchEnv("electricity", split="dev", models=models, budget=0, call_limit="error")
            for name, models in POOLS.items()}


def _beyond_schema(env, tool, args) -> bool:
    """A replay whose context is longer than the visible hours before its origin (what no schema can know)."""
    if tool != "replay" or "context_steps" not in args:
        return False
    case = env.cases[0]
    return args["context_steps"] > iso_to_hour(args["origin"]) - case.history_start + 1


def _play(env, tool, args):
    env.reset(options={"case_id": env.cases[0].case_id})
    _, _, _, _, info = env.step({"tool": tool, "args": args})
    res = info["tool_result"]
    if res["ok"] or _beyond_schema(env, tool, args):
        return "ok"
    return res["error"]


def _visible_origins(env) -> list[str]:
    case = env.cases[0]
    return [hour_to_iso(h) for h in range(case.history_start, case.last_visible)]


def test_the_pool_comes_from_the_forecasters_and_the_tariff(plugins):
    pool = tool_pool(PRICED_MODELS + EXTENDED_MODELS[4:] + plugins)
    got = {p.model: (p.min_context, p.max_context) for p in pool}
    assert got == {"seasonal_empirical": (168, 336), "chronos_bolt_tiny": (2, 336), "chronos2": (2, 336),
                   "timesfm25": (2, 336), "ets": (48, 336), "theta": (48, 336), "sarima": (48, 336),
                   "mstl_ets": (48, 336), "toy96": (24, 96), "toy_week": (180, 336)}
    assert protocol_pool() == tool_pool(PRICED_MODELS) == tool_pool(None)
    # an env's forecaster override serves the model: its min_context is the one the handler checks
    over = ShortContext()
    assert tool_pool(["seasonal_empirical"], {"seasonal_empirical": over}) == (PoolModel("seasonal_empirical", 2, 336),)
    assert pool_from_facts(pool_facts(pool)) == pool and pool_from_facts(None) is None
    with pytest.raises(ValueError, match="pool must be a list"):
        pool_from_facts([{"model": "x"}])


def test_the_protocol_schemas_are_the_registrys():
    for name in PRICED_TOOLS:
        assert tool_parameters(name, pool=protocol_pool()) == tool_parameters(name) == REGISTRY[name].parameters
        assert strict_parameters(name, pool=protocol_pool()) == strict_parameters(name)


def test_the_env_lists_its_pool_with_prices_and_the_schemas_follow_it(envs):
    env = envs["plugin"]
    _, info = env.reset(options={"case_id": env.cases[0].case_id})
    facts = info["episode"]["pool"]
    assert [e["model"] for e in facts] == list(POOLS["plugin"])
    by = {e["model"]: e for e in facts}
    assert by["toy96"] == {"model": "toy96", "min_context": 24, "max_context": 96, "tariff": {"96": ROWS_96[96]}}
    assert by["seasonal_empirical"]["tariff"]["336"] == [400, 1027, 1588, 3065, 3756, 5206]  # DESIGN §6
    assert info["episode"]["horizon_buckets"] == [24, 64, 96, 192, 240, 336]
    schema = tool_parameters("forecast", pool=env.tool_pool)
    assert schema["properties"]["model"]["enum"] == list(POOLS["plugin"])  # ets, theta, ..., plug-ins: buyable
    # the chat agent builds the same schemas from the facts alone
    s = ChatSession()
    s.start(env.reset(options={"case_id": env.cases[0].case_id})[0], info["episode"])
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in s.tool_schemas()}
    assert sent["forecast"] == schema and sent["quote"] == tool_parameters("quote", pool=env.tool_pool)
    assert tool_schemas(["replay"], pool=env.tool_pool)[0]["function"]["parameters"] == sent["replay"]
    # the prompt's listing states each model's rule (one rule, the spec's: toy_week's 180, not its class's 168)
    text = describe_args(schema)
    assert "context_steps in 24..96 (required) when model is toy96" in text
    assert "context_steps >= 180 when model is toy_week" in text
    assert "context_steps >= 48 when model is ets|theta|sarima|mstl_ets" in text
    assert "toy96" in tool_lines(["quote"], pool=env.tool_pool)
    assert "ets" not in describe_args(tool_parameters("forecast"))  # the protocol's listing is unchanged


@pytest.mark.parametrize("pool", list(POOLS))
@pytest.mark.parametrize("name", PRICED_TOOLS)
def test_schema_valid_arguments_pass_the_handlers_structural_checks(envs, pool, name):
    env = envs[pool]
    schema = tool_parameters(name, pool=env.tool_pool)
    jsonschema.Draft202012Validator.check_schema(schema)

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(schema_values(schema))
    def check(args):
        out = _play(env, name, args)
        assert out == "ok" or out["code"] in CONTENT_CODES, (pool, name, json.dumps(args), out)

    check()


@pytest.mark.parametrize("pool", list(POOLS))
@pytest.mark.parametrize("name", PRICED_TOOLS)
def test_what_the_handlers_refuse_the_schemas_refuse(envs, pool, name):
    """Fuzz the other direction: arguments drawn from a loose schema (any pool model name and any model the env
    lacks, any context and horizon); every call the handler refuses as invalid_arguments is schema-invalid."""
    env = envs[pool]
    schema = tool_parameters(name, pool=env.tool_pool)
    loose = {"type": "object", "properties": {
        "model": {"enum": sorted(set(EXTENDED_MODELS) | {"toy96", "toy_week", "nope"})},
        "context_steps": {"type": "integer", "minimum": 1, "maximum": 400},
        "horizon": {"type": "integer", "minimum": 1, "maximum": 400},
        **({"origin": {"enum": _visible_origins(env)}} if name == "replay" else {})},
        "required": ["model", "origin"] if name == "replay" else ["model"]}
    seen = {"refused": 0}

    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(schema_values(loose))
    def check(args):
        out = _play(env, name, args)
        if out != "ok" and out["code"] == "invalid_arguments":
            seen["refused"] += 1
            assert not jsonschema.Draft202012Validator(schema).is_valid(args), (pool, name, args, out)
        elif jsonschema.Draft202012Validator(schema).is_valid(args):
            assert out == "ok" or out["code"] in CONTENT_CODES, (pool, name, args, out)

    check()
    assert seen["refused"] > 0  # the loose draw does reach the handler's refusals


@pytest.mark.parametrize("pool,model,args", [
    ("protocol", "ets", {}),  # not in the pool
    ("extended", "ets", {"context_steps": 47}),  # statsmodels forecasters need 2 days
    ("extended", "seasonal_empirical", {"context_steps": 167}),
    ("plugin", "toy96", {}),  # priced only up to 96: the default (336) is refused, so the length is required
    ("plugin", "toy96", {"context_steps": 97}),
    ("plugin", "toy96", {"context_steps": 23}),  # the spec's 24, not the instance's 2
    ("plugin", "toy_week", {"context_steps": 179}),  # the spec's 180, not the class's 168
])
def test_each_models_rule_is_in_the_schema(envs, pool, model, args):
    env = envs[pool]
    call = {"model": model, **args}
    assert _play(env, "quote", call)["code"] == "invalid_arguments"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(call, tool_parameters("quote", pool=env.tool_pool))


@pytest.mark.parametrize("pool", list(POOLS))
@pytest.mark.parametrize("name", PRICED_TOOLS)
def test_strict_variants_per_pool(envs, pool, name):
    env = envs[pool]
    strict = strict_parameters(name, pool=env.tool_pool)
    if pool == "plugin":  # toy96 (at most 96) and seasonal_empirical (at least 168): no length suits every model
        assert strict is None
        return
    props = strict["properties"]
    assert props["model"]["enum"] == [p.model for p in env.tool_pool]
    lo = max(p.min_context for p in env.tool_pool)
    hi = min(p.max_context for p in env.tool_pool)
    assert (props["context_steps"]["minimum"], props["context_steps"]["maximum"]) == (lo, hi)
    assert ("null" in props["context_steps"]["type"]) == (hi == 336)  # null (the default) only where all take it

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(schema_values(strict))
    def check(args):
        plain = drop_null_arguments(name, args, pool=env.tool_pool)
        jsonschema.validate(plain, tool_parameters(name, pool=env.tool_pool))
        out = _play(env, name, plain)
        assert out == "ok" or out["code"] in CONTENT_CODES, (pool, name, plain, out)

    check()
