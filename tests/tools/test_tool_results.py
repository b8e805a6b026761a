"""The tool results' TypedDicts (fwgym.tools.results) hold what the env returns, key by key and value by value."""
import json

import pytest
from json_shapes import assert_shape, shape_problems

from fwgym.core.cases import CaseSummary, get_case
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.tools import Catalog, ToolResult
from fwgym.tools.results import CatalogContract, CatalogModel

CASE_ID = "elec-ISNE-2024-07-19-day_ahead"


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv("electricity", split="test", models=("seasonal_empirical", "chronos2"))


def _step(env, action):
    obs, reward, terminated, truncated, info = env.step(action)
    result = info["tool_result"]
    assert_shape(result, ToolResult)
    assert json.loads(obs["last_result"]) == result  # the observation's JSON is the same result
    assert ("result" in result) != ("error" in result) and ("result" in result) == result["ok"]
    return result, terminated


def test_every_kind_of_result_fits_the_tool_result(env):
    env.reset(options={"case_id": CASE_ID})
    catalog, _ = _step(env, {"tool": "catalog"})
    bought, _ = _step(env, {"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336}})
    assert bought["ok"] and bought["result"]["forecast_id"] == "f1" and bought["result"]["credits"] == 1027
    refused, _ = _step(env, {"tool": "forecast", "args": {"model": "chronos2", "horizon": 336}})
    assert refused["error"]["code"] == "insufficient_budget" and refused["tool"] == "forecast"  # 116,839 credits
    unreadable, _ = _step(env, "{not json")
    assert unreadable["tool"] == "invalid" and unreadable["error"]["code"] == "invalid_json"
    unknown, _ = _step(env, {"tool": "nope"})
    assert unknown["error"]["code"] == "unknown_tool"
    plan, _ = _step(env, {"tool": "plan", "args": {"forecast_id": "f1"}})
    end, terminated = _step(env, {"tool": "submit", "args": {"decisions": plan["result"]["plan"]["decisions"]}})
    assert terminated and end == {"tool": "submit", "ok": True, "result": {"status": "submitted"}}


def test_the_catalog_fits_catalog_in_field_order(env):
    env.reset(options={"case_id": CASE_ID})
    result, _ = _step(env, {"tool": "catalog"})
    cat = result["result"]
    assert_shape(cat, Catalog)
    assert list(cat) == list(Catalog.__annotations__)  # the writer's order is the type's
    assert list(cat["contract"]) == list(CatalogContract.__annotations__)
    assert cat["case"] == get_case(CASE_ID).summary() and list(cat["case"]) == list(CaseSummary.__annotations__)
    assert [m["model"] for m in cat["models"]] == ["seasonal_empirical", "chronos2"]
    assert set(cat["models"][0]) == CatalogModel.__required_keys__  # available: no reason, no note
    assert cat["models"][0]["credits_full_context_covering_horizon"] == 1027
    assert cat["budget"] == {"budget": 113_726, "spent": 0, "remaining": 113_726}


def test_the_shape_check_reports_what_does_not_fit():
    good = {"tool": "catalog", "ok": False, "error": {"code": "x", "message": "y"}}
    assert shape_problems(good, ToolResult) == []
    assert shape_problems({"tool": "catalog", "ok": 1}, ToolResult) == ["$.ok: 1 is not a bool"]
    assert shape_problems({"ok": True, "extra": 2}, ToolResult) == ["$: ToolResult lacks 'tool'",
                                                                   "$: 'extra' is not a field of ToolResult"]
    bad = {**good, "error": {"code": "x"}}
    assert shape_problems(bad, ToolResult) == ["$.error: ToolErrorInfo lacks 'message'"]
    assert shape_problems({"blocks": [{"decision_id": 3}]}, CatalogContract)[-3:] == [
        "$.blocks[0]: CatalogBlock lacks 'end'", "$.blocks[0]: CatalogBlock lacks 'start'",
        "$.blocks[0].decision_id: 3 is not a string"]
