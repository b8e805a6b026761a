"""``--max-tokens`` must hold the suite's final answer (issue 28.4): refused before the run with a stated estimate
(3 characters per token, a lower bound), then after the preflight with the answer measured in the model's tokenizer
(the openai kind: the server's usage of a prompt with a typical answer minus the same prompt without it; the
transformers kind: its tokenizer), for the decision, context and forecast suites and the direct prompt."""
import argparse
import json

import pytest

from fwgym.agents.chat.constrain import ANSWER_SCALE, answer_example, answer_lengths
from fwgym.cli import main
from fwgym.cli.agent_kinds.llm import answer_tokens, check_max_tokens
from fwgym.testing.chat_server import ScriptedChatServer, completion, play_every_suite

BASE = ["evaluate", "--split", "dev", "--domain", "electricity", "--limit", "1", "--no-progress"]


def _chars(text):
    return len(text)


def test_the_answers_and_the_estimate_per_suite():
    facts = {"case": {"scale": ANSWER_SCALE}}
    levels, quantiles = answer_example("decision", facts), answer_example("forecast", facts)
    direct = answer_example("forecast", facts, direct=True)
    assert json.loads(levels) == {"levels": [1.25] * 8} and len(json.loads(quantiles)["quantiles"]) == 24
    assert json.loads(quantiles)["quantiles"][0] == [113700.0] * 9
    assert direct.startswith("<forecast>\n(2024-01-27 00:00:00, 113700.0)\n") and direct.count("\n(") == 24
    assert answer_lengths(_chars) == {"decision": len(levels), "forecast": len(quantiles)} == {"decision": 60,
                                                                                              "forecast": 2223}
    assert answer_tokens("decision") == answer_tokens("context") and answer_tokens("decision")[0] == 20
    need, how = answer_tokens("forecast")
    assert need == 741 and "2223 characters / 3 per token, a lower bound" in how
    assert answer_tokens("forecast", direct=True)[0] == 264 and answer_tokens("forecast", _chars) == (2223, "the model's tokenizer")
    for suite, ok, too_few in (("decision", 20, 19), ("context", 20, 19), ("forecast", 741, 740)):
        check_max_tokens(argparse.Namespace(suite=suite), ok)
        with pytest.raises(ValueError, match=f"--max-tokens {too_few} cannot hold a {suite}-suite answer .* at least {ok}"):
            check_max_tokens(argparse.Namespace(suite=suite), too_few)
    check_max_tokens(argparse.Namespace(suite="forecast", direct_prompt=True), 264)


def _counting_server():
    """The scripted model, with a prompt_tokens of one token per character of the messages' text (a tokenizer that
    splits numbers into digits needs about as many)."""
    play = play_every_suite()

    def respond(body):
        text = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0 for m in body["messages"])
        reply = play(body) if body.get("max_tokens", 2) > 1 else completion("OK")
        return {**reply, "usage": {"prompt_tokens": text, "completion_tokens": 1, "total_tokens": text + 1}}

    return ScriptedChatServer(respond=respond)


def test_the_preflight_measures_the_answer_and_refuses_a_bound_that_cannot_hold_it(tmp_path, capsys):
    with _counting_server() as srv:
        agent = ["--agent", "openai", "--base-url", srv.url, "--model", "test-model"]
        # 1,024 passes the estimate (741) but not the measured 2,224 tokens: refused before any episode
        assert main([*BASE, "--suite", "forecast", *agent, "--max-tokens", "1024", "--out", str(tmp_path / "f")]) == 2
        err = capsys.readouterr().err
        assert "answer tokens: decision 61, forecast 2224 (max tokens 1024)" in err
        assert ("openai:test-model: --max-tokens 1024 cannot hold a forecast-suite answer (~2224 tokens, the server's "
                "usage") in err and "at least 2224; nothing was run" in err
        assert not (tmp_path / "f").exists()
        # the decision suite's answer fits 128 tokens: the run plays, the measurement is in the manifest
        assert main([*BASE, "--suite", "context", *agent, "--max-tokens", "128", "--out", str(tmp_path / "c")]) == 0
        (pre,) = json.loads((tmp_path / "c" / "manifest.json").read_text())["sessions"][0]["preflight"].values()
        assert pre["answer_tokens"] == {"decision": 61, "forecast": 2224} and pre["max_tokens"] == 128
        assert main([*BASE, "--suite", "decision", *agent, "--max-tokens", "60", "--out", str(tmp_path / "d")]) == 2
        assert "cannot hold a decision-suite answer (~61 tokens" in capsys.readouterr().err


def test_a_server_whose_usage_ignores_the_prompt_is_not_measured_and_warned_about(tmp_path, capsys):
    with ScriptedChatServer(respond=play_every_suite()) as srv:  # usage (100, 10) whatever the prompt
        assert main([*BASE, "--suite", "forecast", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                     "--max-tokens", "1024", "--out", str(tmp_path / "f")]) == 0
    err = capsys.readouterr().err
    assert "answer tokens" not in err
    assert ("warning: openai:test-model: the forecast-suite answer could not be measured with the model's tokenizer; "
            "a tokenizer that splits numbers into digits needs up to ~2223 tokens, above --max-tokens 1024") in err
    (pre,) = json.loads((tmp_path / "f" / "manifest.json").read_text())["sessions"][0]["preflight"].values()
    assert pre["answer_tokens"] is None


def test_the_transformers_kind_checks_its_bound_and_defaults_to_one_that_holds_a_forecast(tmp_path):
    from fwgym.cli.agent_kinds import openai, transformers

    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="decision")
    openai.add_arguments(p.add_argument_group("openai"))
    transformers.add_arguments(p.add_argument_group("transformers"))
    trace = ["--trace-out", str(tmp_path / "t.jsonl")]
    assert transformers.build(p.parse_args(["--hf-model", "/d", *trace]))["max_new_tokens"] == 512
    assert transformers.build(p.parse_args(["--hf-model", "/d", "--suite", "forecast", *trace]))["max_new_tokens"] == 4096
    # both kinds' forecast default holds SmolLM2's measured quantiles answer (2,165 tokens, docs/llm.md)
    assert openai.build(p.parse_args(["--model", "m", "--suite", "forecast", *trace]))["max_tokens"] == 4096 > 2165
    assert openai.build(p.parse_args(["--model", "m", *trace]))["max_tokens"] == 2048
    with pytest.raises(ValueError, match="--constrain cannot be used with --direct-prompt in the forecast suite"):
        openai.build(p.parse_args(["--model", "m", "--suite", "forecast", "--direct-prompt", "--constrain", "grammar",
                                   *trace]))
    assert openai.build(p.parse_args(["--model", "m", "--direct-prompt", "--constrain", "grammar", *trace]))
    with pytest.raises(ValueError, match="--max-tokens 256 cannot hold a forecast-suite answer"):
        transformers.build(p.parse_args(["--hf-model", "/d", "--suite", "forecast", "--max-tokens", "256", *trace]))
    with pytest.raises(ValueError, match="--max-tokens 16 cannot hold a context-suite answer"):
        transformers.build(p.parse_args(["--hf-model", "/d", "--suite", "context", "--max-tokens", "16", *trace]))
