"""ChatOptions: the chat session's options, built once (the command line or Python) and carried unchanged by the
factory and the agent to the session and its prompts."""
import argparse

import pytest

from fwgym.agents.chat import ChatAgent, ChatOptions, ChatSession
from fwgym.agents.chat.options import as_options
from fwgym.agents.openai import OpenAIChatAgent
from fwgym.cli.agent_kinds import openai as openai_kind
from fwgym.cli.agent_kinds import transformers as transformers_kind


def test_defaults_validation_and_json_round_trip():
    o = ChatOptions()
    assert (o.native_tools, o.compact_results, o.constrain, o.tools) == (True, False, None, None)
    o2 = ChatOptions(tools=["catalog", "submit"], compact_results=1, constrain="grammar", history_hours=24)
    assert o2.tools == ("catalog", "submit") and o2.compact_results is True
    assert ChatOptions.from_json(o2.to_json()) == o2 and o2.to_json()["tools"] == ["catalog", "submit"]
    for bad in ({"tool_results_as": "system"}, {"max_argument_chars": 1}, {"constrain": "regex"},
                {"history_hours": 0}, {"tools": "catalog"}):
        with pytest.raises(ValueError):
            ChatOptions(**bad)
    with pytest.raises(ValueError, match="unknown chat options"):
        ChatOptions.from_json({"compact": True})
    with pytest.raises(TypeError, match="unknown chat option"):
        as_options(None, compact=True)
    assert as_options(o2, strict_tools=True) == o2.replace(strict_tools=True)
    assert as_options({"direct_prompt": True}) == as_options(direct=True) == ChatOptions(direct_prompt=True)


def test_what_the_options_mean_for_the_session():
    assert ChatSession(ChatOptions(direct_prompt=True)).native_tools is False
    assert ChatSession(ChatOptions(constrain="json-schema")).native_tools is False  # constrained: JSON in text
    assert ChatSession(ChatOptions(constrain="json-schema")).text_tool_calls is True
    assert ChatSession(native_tools=False, text_tool_calls=False).text_tool_calls is True  # text mode reads them


def test_one_object_from_the_command_line_to_the_session(tmp_path):
    """The openai kind builds the options once; the factory holds their JSON; the agent and every episode's
    session carry the same ChatOptions (nothing copied field by field on the way)."""
    p = argparse.ArgumentParser()
    openai_kind.add_arguments(p)
    transformers_kind.add_arguments(p)
    args = p.parse_args(["--model", "m", "--compact-results", "--history-hours", "24", "--strict-tools",
                         "--tool-results-as", "user", "--trace-out", str(tmp_path / "t.jsonl")])
    factory = openai_kind.build(args)
    assert factory["options"] == ChatOptions(compact_results=True, history_hours=24, strict_tools=True,
                                             tool_results_as="user").to_json()
    agent = factory()
    assert isinstance(agent, OpenAIChatAgent) and agent.options == ChatOptions.from_json(factory["options"])
    agent._begin({"history": [1.0] * 336, "context": "x", "calls_left": 12, "budget_left": [100.0]})
    assert agent.session.options is agent.options
    assert agent.describe()["compact_results"] is True and agent.describe()["tool_results_as"] == "user"


def test_the_older_keyword_spelling_still_works():
    a = ChatAgent("x", compact_results=True, native_tools=False, max_turns=3)
    assert a.options == ChatOptions(compact_results=True, native_tools=False) and a.max_turns == 3
    b = ChatAgent("y", options=ChatOptions(history_hours=12), compact_results=True)
    assert b.options == ChatOptions(history_hours=12, compact_results=True)
