"""fwgym.tools.actions: the action grammar (parse_action, loads_strict), the Tool type and the result format."""
import json

import numpy as np
import pytest

from fwgym.errors import CodedError, MAX_MESSAGE_CHARS
from fwgym.tools import MAX_ACTION_CHARS, REGISTRY, ToolCall, ToolError, error_result, loads_strict, parse_action, result_json


@pytest.mark.parametrize("action,tool,args", [
    ('{"tool": "catalog"}', "catalog", {}),
    ('{"tool": "catalog", "args": null}', "catalog", {}),
    (b'{"tool": "history", "args": {"last": 3}}', "history", {"last": 3}),
    ({"tool": "teleport", "args": {"x": [1]}}, "teleport", {"x": [1]}),  # names are checked by the ledger, not here
])
def test_well_formed_actions_become_tool_calls(action, tool, args):
    call = parse_action(action)
    assert call == ToolCall(tool=tool, args=args)


@pytest.mark.parametrize("action,code,needle", [
    ("{not json", "invalid_json", "not valid JSON"),
    ('{"tool": "catalog", "tool": "history"}', "invalid_json", "duplicate key 'tool'"),
    ('{"tool": "submit", "args": {"levels": [NaN]}}', "invalid_json", "NaN is not a valid JSON number"),
    ('{"tool": "submit", "args": {"levels": [Infinity]}}', "invalid_json", "Infinity"),
    ("[" * 100_000 + "]" * 100_000, "invalid_action", "characters long"),  # 200,000 > MAX_ACTION_CHARS
    ("[" * 40_000 + "]" * 40_000, "invalid_json", "nested too deeply"),
    ("[1, 2]", "invalid_action", "got list"),
    (None, "invalid_action", "got NoneType"),
    ({"tool": 5}, "invalid_action", "tool name string"),
    ({"tool": "catalog", "extra": 1}, "invalid_action", "unexpected action keys ['extra']"),
    ({"tool": "catalog", "args": [1]}, "invalid_arguments", "got list"),
    (b"\xff", "invalid_action", "could not read"),  # not UTF-8
])
def test_malformed_actions_become_coded_errors_and_never_raise(action, code, needle):
    err = parse_action(action)
    assert isinstance(err, ToolError) and isinstance(err, CodedError)
    assert err.code == code and needle in err.message


def test_action_length_limit_is_exact():
    pad = " " * (MAX_ACTION_CHARS - len('{"tool": "catalog"}'))
    assert parse_action('{"tool": "catalog"}' + pad) == ToolCall("catalog", {})
    assert parse_action('{"tool": "catalog"}' + pad + " ").code == "invalid_action"


def test_loads_strict_refuses_what_json_loads_accepts():
    assert json.loads('{"a": 1, "a": 2}') == {"a": 2} and json.loads("NaN") != json.loads("NaN")
    for text in ('{"a": 1, "a": 2}', "NaN", "-Infinity", '{"x": {"b": 1, "b": 1}}'):
        with pytest.raises(ValueError):
            loads_strict(text)
    assert loads_strict('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


def test_coded_error_messages_are_capped():
    err = ToolError("invalid_arguments", "x" * 5000)
    assert len(err.message) == MAX_MESSAGE_CHARS and err.message.endswith("...[truncated]") and str(err) == err.message


def test_error_result_caps_the_echoed_tool_name():
    res = error_result("t" * 500, ToolError("unknown_tool", "no such tool"))
    assert res == {"tool": "t" * 60, "ok": False, "error": {"code": "unknown_tool", "message": "no such tool"}}


def test_result_json_is_compact_ascii_and_refuses_nan():
    res = {"tool": "history", "ok": True, "result": {"v": np.float32(1.5), "a": np.arange(2), "s": "\u00e9"}}
    assert result_json(res) == '{"tool":"history","ok":true,"result":{"v":1.5,"a":[0,1],"s":"\\u00e9"}}'
    with pytest.raises(ValueError):
        result_json({"v": float("nan")})
    with pytest.raises(TypeError, match="not JSON serialisable"):
        result_json({"v": object()})


def test_every_tool_schema_is_an_openai_function_with_an_object_schema():
    for name, tool in REGISTRY.items():
        s = tool.schema()
        assert s["type"] == "function" and s["function"]["name"] == name == tool.name
        assert s["function"]["parameters"]["type"] == "object" and s["function"]["parameters"]["additionalProperties"] is False
        assert s["function"]["description"] == tool.description
    assert list(REGISTRY) == ["catalog", "history", "classical_plan", "plan", "evaluate_plan", "quote", "forecast",
                              "replay", "abstain", "submit"]
    assert [t for t, tool in REGISTRY.items() if not tool.counts_as_call] == ["abstain", "submit"]
