"""The objective ablation (``--objective score|loss``, issue 30.3): the loss-only prompts differ from the
protocol's in the objective sentence only, in the system message and in the case context; the setting
reaches the session through the agent and is recorded with the agent's settings."""
import difflib

import pytest

from fwgym.agents.chat.prompts import first_user_message, objective_paragraph, system_prompt
from fwgym.agents.chat.session import ChatSession
from fwgym.context.text import objective_line
from fwgym.envs.fwbench import FWBenchEnv


def _messages(objective):
    env = FWBenchEnv("electricity", split="test")
    obs, info = env.reset(options={"case_id": env.cases[5].case_id})
    return ChatSession(objective=objective).start(obs, info["episode"])


def _changed(a: str, b: str, sep: str) -> tuple[list[str], list[str]]:
    """The units (paragraphs or lines) of ``a`` and ``b`` that differ."""
    x, y = a.split(sep), b.split(sep)
    sm = difflib.SequenceMatcher(a=x, b=y, autojunk=False)
    old, new = [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            old += x[i1:i2]
            new += y[j1:j2]
    return old, new


def test_loss_prompts_differ_in_the_objective_sentence_only():
    score, loss = _messages("score"), _messages("loss")
    assert [m["role"] for m in score] == [m["role"] for m in loss] == ["system", "user"]
    old, new = _changed(score[0]["content"], loss[0]["content"], "\n\n")  # system message: one paragraph differs
    assert len(old) == len(new) == 1 and old[0].startswith("Objective: minimise S = 0.5 * ((loss - best possible")
    assert new == [objective_paragraph(113_726, "loss")]
    assert new[0].startswith("Objective: minimise the loss: the mean over the 24 target hours of 0.3 x surplus")
    for word in ("S =", "sigma", "credit", "best possible"):
        assert word not in new[0], word
    # the loss definition is the same words in both
    assert new[0].split("minimise the loss: ")[1].split(" In words")[0] in old[0]
    old, new = _changed(score[1]["content"], loss[1]["content"], "\n")  # the case context: one line differs
    assert old == [objective_line(113_726)] == ["Objective: minimise S = 0.5*((loss - best possible loss)/sigma + "
                                                "credits spent/113726)."]
    assert new == ["Objective: minimise the loss."]


def test_objective_refusals():
    with pytest.raises(ValueError, match="objective must be one of"):
        ChatSession(objective="profit")
    with pytest.raises(ValueError, match="decision task"):
        system_prompt(max_calls=12, budget=113_726, tools=["submit"], native_tools=True, task="forecast", objective="loss")
    with pytest.raises(ValueError, match="does not state the protocol's objective"):
        first_user_message({"context": "no objective here", "history": [1.0] * 24, "budget_left": [113_726],
                            "calls_left": [12]}, objective="loss")


def test_the_agent_kind_and_factory_carry_the_objective():
    from fwgym.cli import build_parser
    from fwgym.cli.agent_kinds.llm import chat_options
    from fwgym.agents.openai import OpenAIChatAgent

    args = build_parser().parse_args(["evaluate", "--agent", "openai", "--model", "m", "--objective", "loss"])
    assert chat_options(args)["objective"] == "loss"
    assert build_parser().parse_args(["evaluate"]).objective == "score"
    agent = OpenAIChatAgent("m", base_url="http://127.0.0.1:9/v1", objective="loss")
    assert agent.describe()["objective"] == "loss" and agent.options.objective == "loss"


def test_the_objective_is_a_chat_option():
    from fwgym.agents.chat.options import ChatOptions

    opts = ChatOptions(objective="loss")
    assert ChatOptions.from_json(opts.to_json()) == opts and ChatOptions().objective == "score"
    assert ChatSession(opts).objective == "loss" == ChatSession(objective="loss").options.objective
    with pytest.raises(ValueError, match="objective must be one of"):
        ChatOptions(objective="profit")
