"""Infrastructure failures are never scored as the agent's (issue 25.6), and bad files are one line, not a traceback.

* an ``--agent-worker-command`` interpreter without numpy: one line before any episode, exit 2, no run directory
  (before: every episode agent_error, S 15.09, exit 0);
* ``--reply-cache`` naming a file, and a malformed reply-cache entry: one line before any episode (before: the
  FileExistsError and TypeError were scored as the agent's); an entry that turns malformed during a run ends its
  episode as harness_error;
* deep nesting (100,000 brackets) in a results, traces, manifest or reply-cache file: one line naming file:line;
* SIGTERM ends a run as Ctrl-C does (records kept, manifest interrupted, one line saying how to resume);
* a reply whose ``model`` is not the requested one: one warning, and ``served_model`` in every record.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from fwgym.cli import main
from fwgym.testing.chat_server import ScriptedChatServer, completion, plan_then_answer

ROOT = Path(__file__).resolve().parents[2]
BASE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress"]
DEEP = "[" * 100_000 + "]" * 100_000

_AGENT = '''
import json


class Agent:
    name = "mine"

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
'''


def _one_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    errors = [x for x in err if x.startswith("fwgym") and ": error: " in x]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


def test_a_worker_interpreter_without_numpy_fails_before_any_episode(tmp_path, capsys):
    from fwgym.agents.isolation import WORKER_SCRIPT

    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # an interpreter without numpy
    (tmp_path / "agent.py").write_text(_AGENT)
    out = tmp_path / "run"
    code = main([*BASE, "--limit", "2", "--agent", f"{tmp_path / 'agent.py'}:Agent", "--agent-worker-command",
                 f"{bare / 'bin' / 'python'} {WORKER_SCRIPT}", "--out", str(out)])
    assert code == 2
    _one_line(capsys, "--agent-worker-command", "cannot import numpy", "No module named 'numpy'", "nothing was run")
    assert not out.exists()


def test_a_reply_cache_that_is_a_file_fails_before_any_episode(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    out = tmp_path / "run"
    with ScriptedChatServer(respond=plan_then_answer()) as srv:
        code = main([*BASE, "--limit", "2", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                     "--reply-cache", str(cache), "--out", str(out)])
    assert code == 2
    _one_line(capsys, f"--reply-cache {cache} is a file, not a folder")
    assert not out.exists()


def _malformed(cache: Path, body) -> Path:
    entry = cache / "ab" / ("ab" + "0" * 62 + ".json")
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(body if isinstance(body, str) else json.dumps(body))
    return entry


@pytest.mark.parametrize("body, why", [({"version": 1, "response": {"choices": "x"}}, "malformed entry"),
                                       (DEEP, "JSON nested deeper than 256 levels")])
def test_a_malformed_reply_cache_entry_fails_before_any_episode(tmp_path, capsys, body, why):
    entry = _malformed(tmp_path / "cache", body)
    out = tmp_path / "run"
    with ScriptedChatServer(respond=plan_then_answer()) as srv:
        code = main([*BASE, "--limit", "2", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                     "--reply-cache", str(tmp_path / "cache"), "--out", str(out)])
    assert code == 2
    _one_line(capsys, str(entry), why)
    assert not out.exists()


def test_an_entry_that_turns_malformed_mid_run_is_a_harness_error(tmp_path):
    from fwgym.agents import run_episode
    from fwgym.agents.openai import OpenAIChatAgent
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv("cycle_hire", split="test")
    cid = env.cases[0].case_id
    with ScriptedChatServer(respond=plan_then_answer()) as srv:
        agent = OpenAIChatAgent("test-model", base_url=srv.url, reply_cache=tmp_path / "cache", max_retries=0)
        assert run_episode(env, agent, options={"case_id": cid}, agent_errors="score").record["status"] == "submitted"
        for f in (tmp_path / "cache").glob("??/*.json"):  # every entry edited to a body that is no completion
            f.write_text(json.dumps({"version": 1, "response": {"choices": [{"message": 3}]}}))
        rec = run_episode(env, agent, options={"case_id": cid}, agent_errors="score").record
    assert rec["status"] == "harness_error" and rec["harness_kind"] == "reply_cache" and rec["S"] is None
    assert "is malformed" in rec["reason"]


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    (tmp_path / "agent.py").write_text(_AGENT)
    assert main([*BASE, "--limit", "2", "--agent", f"{tmp_path / 'agent.py'}:Agent", "--in-process", "--policies",
                 "weekday_empirical", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("argv", [["leaderboard"], ["report", "--out", "REPORT"], ["verify"],
                                  ["evaluate", "--no-progress", "--resume"]])
def test_deep_nesting_in_results_is_one_line(finished, capsys, argv):
    lines = (finished / "results.jsonl").read_text().splitlines()
    (finished / "results.jsonl").write_text("\n".join([lines[0], DEEP, *lines[1:]]) + "\n")
    args = [a.replace("REPORT", str(finished.parent / "report")) for a in argv]
    capsys.readouterr()
    assert main([*args, str(finished)] if argv[0] != "report" else [args[0], str(finished), *args[1:]]) == 2
    _one_line(capsys, f"{finished / 'results.jsonl'}:2", "nested deeper than 256 levels")


def test_deep_nesting_in_a_manifest_is_one_line_with_its_line(finished, capsys):
    m = json.loads((finished / "manifest.json").read_text())
    text = json.dumps(m, indent=1).replace('"status": "complete"', f'"status": "complete", "x": {DEEP}', 1)
    (finished / "manifest.json").write_text(text)
    line = text[: text.index("[[[")].count("\n") + 1
    capsys.readouterr()
    assert main(["leaderboard", str(finished)]) == 2
    _one_line(capsys, f"{finished / 'manifest.json'}:{line}", "nested deeper")


def test_deep_nesting_in_traces_is_one_line(tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    path.write_text('{"episode_id": "1:a:b"}\n' + DEEP + "\n")
    assert main(["show-trace", str(path), "--list"]) == 2
    _one_line(capsys, f"{path}:2", "nested deeper")


def _spawn(args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    code = "import sys; from fwgym.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=str(ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_sigterm_ends_a_run_like_ctrl_c(tmp_path):
    out = tmp_path / "run"
    with ScriptedChatServer(respond=plan_then_answer(), delay=0.2) as srv:
        proc = _spawn([*BASE, "--limit", "8", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                       "--out", str(out)])
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end:
            p = out / "results.jsonl"
            if p.exists() and len(p.read_text().splitlines()) >= 2:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        m = json.loads((out / "manifest.json").read_text())
        assert m["status"] == "interrupted" and m["sessions"][-1]["status"] == "interrupted"
        lines = [x for x in err.splitlines() if x.startswith("terminated (SIGTERM):")]
        assert len(lines) == 1 and f"`fwgym evaluate --resume {out}`" in lines[0] and "Traceback" not in err
        kept = len((out / "results.jsonl").read_text().splitlines())
        assert 2 <= kept < 8
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 8


def test_a_reply_of_another_model_is_warned_once_and_recorded(tmp_path, recwarn):
    answers = plan_then_answer()

    def respond(body):
        reply = answers(body)
        return {**reply, "model": "another-model"}

    out = tmp_path / "run"
    with ScriptedChatServer(respond=respond) as srv:
        assert main([*BASE, "--limit", "3", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                     "--out", str(out)]) == 0
    said = [w for w in recwarn if "answered a request for model 'test-model' with a reply of model 'another-model'"
            in str(w.message)]
    assert len(said) == 1 and said[0].category is RuntimeWarning
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["served_model"] for r in recs] == ["another-model"] * 3
    with ScriptedChatServer(respond=answers) as srv:
        assert main([*BASE, "--limit", "1", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                     "--out", str(tmp_path / "same")]) == 0
    assert json.loads((tmp_path / "same" / "results.jsonl").read_text())["served_model"] is None
    assert completion("x")["model"] == "test-model"
