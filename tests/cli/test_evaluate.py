"""``fwgym evaluate``: results files, the leaderboard print-out, warnings and clear errors."""
import json

import pytest

from fwgym.cli import main
from fwgym.evaluation.records import VOLATILE_FIELDS


def test_evaluate_command_writes_results(tmp_path, capsys):
    rc = main(["evaluate", "--split", "test", "--limit", "4", "--no-progress", "--out", str(tmp_path),
               "--policies", "weekday_empirical", "perfect_demand"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| perfect_demand | 0.0000 |" in out
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 16 and json.loads(lines[0])["policy"] == "weekday_empirical"
    assert main(["leaderboard", str(tmp_path)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_policy_asked_for_without_its_weights_is_run_with_a_warning(tmp_path, capsys):
    # the test process has no TSFM weights (HF_HUB_OFFLINE=1): chronos2 falls back on every case
    rc = main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--out", str(tmp_path),
               "--policies", "chronos2", "hour_of_day_empirical"])
    captured = capsys.readouterr()
    assert rc == 0 and captured.err.count("warning: policy") == 1
    assert "warning: policy chronos2 runs without its model (chronos2: weights of amazon/chronos-2" in captured.err
    assert "fall back to hour_of_day_empirical" in captured.err
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert list(manifest["policies_without_model"]) == ["chronos2"]
    assert "falling back to hour_of_day_empirical" in manifest["policies_without_model"]["chronos2"]
    assert manifest["models"]["chronos2"]["available"] is False  # the model provenance of the run
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    by = {(r["policy"], r["case_id"]): r["S"] for r in rows}
    assert all(by["chronos2", c] == by["hour_of_day_empirical", c] for p, c in by if p == "chronos2")


def test_unknown_policy_is_a_clear_error(capsys):
    assert main(["evaluate", "--policies", "nope", "--no-progress"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["weekday_empirical", "perfect_demand", "catalog_oracle"])
def test_decision_policy_in_the_forecast_suite_is_a_clear_error(policy, capsys):
    assert main(["evaluate", "--suite", "forecast", "--policies", policy, "--limit", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"['{policy}'] submit capacity decisions; the forecast task needs policies that submit forecasts" in err


# --- run directories: never replaced, numbered, resumed ------------------------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

from fwgym.errors import HarnessError  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, Step, completion, plan_then_answer, unused_url  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress"]
#: fields that differ between two runs of the same episodes (ids carry the session; times)
VOLATILE = ("episode_id", *VOLATILE_FIELDS)


def _records(d):
    return [json.loads(x) for x in (Path(d) / "results.jsonl").read_text().splitlines()]


def _stable(recs):
    return sorted((json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True) for r in recs))


def test_out_is_never_replaced_and_the_default_is_a_new_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = BASE + ["--limit", "1", "--policies", "weekday_empirical"]
    assert main(args) == 0 and main(args) == 0
    err = capsys.readouterr().err
    assert "run directory: results/test\n" in err and "run directory: results/test-2\n" in err
    assert len(_records("results/test")) == len(_records("results/test-2")) == 1
    assert main(args + ["--out", "results/test"]) == 2
    err = capsys.readouterr().err
    assert "--out results/test already holds a run (manifest.json); results are never replaced silently" in err
    assert "fwgym evaluate --resume results/test" in err and "--overwrite" in err
    assert main(args[:-2] + ["--policies", "perfect_demand", "--out", "results/test", "--overwrite"]) == 0
    assert {r["policy"] for r in _records("results/test")} == {"perfect_demand"}
    assert main(BASE + ["--limit", "1", "--suite", "context", "--policies", "weekday_empirical"]) == 0
    assert "run directory: results/test-context" in capsys.readouterr().err


def test_resume_checks_the_options_against_the_manifest(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(BASE + ["--limit", "2", "--policies", "weekday_empirical", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--limit", "3", "--split", "dev"]) == 2
    err = capsys.readouterr().err
    assert "these options differ from the run's manifest" in err and "--limit: the run has 2, this command gives 3" in err
    assert "--split" in err
    # the same options, and operational ones, are accepted; a complete run has nothing left to play, and a no-op
    # resume leaves it as it is (before: it added a session of 0 episodes and rewrote the leaderboard files)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["evaluate", "--resume", str(out), "--limit", "2", "--workers", "2", "--no-progress"]) == 0
    assert f"nothing to resume: the run in {out} is complete (2 of 2 episodes scored); no session was added" in (
        capsys.readouterr().err)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    m = json.loads((out / "manifest.json").read_text())
    assert [s["episodes"] for s in m["sessions"]] == [2] and m["status"] == "complete"
    assert m["history"]["sessions"] == 1 and m["command"][:2] == ["fwgym", "evaluate"]
    assert main(["evaluate", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "no manifest.json there" in capsys.readouterr().err


def test_the_manifest_records_the_run(tmp_path):
    out = tmp_path / "run"
    assert main(BASE + ["--limit", "2", "--policies", "weekday_empirical", "perfect_demand", "--out", str(out)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    st = m["settings"]
    assert st["suite"] == "decision" and st["split"] == "test" and st["domains"] == ["cycle_hire"] and st["limit"] == 2
    assert st["n_cases"] == 2 == len(st["cases"]) and st["policies"] == ["weekday_empirical", "perfect_demand"]
    assert st["budget"] == 113_726 and st["scenario_seed"] == 0 and set(st["sigma"]) == {"electricity", "cycle_hire"}
    assert st["forecast_pool"] == ["seasonal_empirical", "chronos_bolt_tiny", "chronos2", "timesfm25"]
    assert st["scorer_version"] == m["environment"]["scorer_version"] == "2"
    env = m["environment"]
    assert env["packages"]["numpy"] and env["packages"]["gymnasium"] and env["fwgym_version"] == "0.1.0"
    assert env["git"] is None or len(env["git"]["commit"]) == 40
    assert m["counts"]["by_status"] == {"submitted": 4} and m["records"]["count"] == 4
    assert set(m["models"]) == set(st["forecast_pool"]) and m["models"]["seasonal_empirical"]["available"]
    assert m["args"]["limit"] == 2 and "func" not in m["args"] and m["status"] == "complete"


# --- agents that fail: a fake agent kind (the kind's factory is what --agent builds) --------------------------------

class _Kind(types.ModuleType):
    """An agent kind whose agents plan with hour_of_day_empirical and submit; they fail on the cases in FAIL."""

    FAIL: dict = {}  # case id -> exception to raise
    PREFLIGHT = None  # exception to raise from preflight(), or None

    def __init__(self):
        super().__init__("fakekind")
        self.KIND, self.HELP = "fake", "a scripted agent"

    def add_arguments(self, group):
        group.add_argument("--fake-name", default="fake_agent")

    def build(self, args):
        return _Factory(args.fake_name)


class _Factory:
    def __init__(self, name):
        self.name = name

    def preflight(self):
        if _Kind.PREFLIGHT is not None:
            raise _Kind.PREFLIGHT
        return {"server_model": "fake-1", "seed_honoured": True}

    def __call__(self):
        return _FakeAgent(self.name)


class _FakeAgent:
    def __init__(self, name):
        self.name, self.k, self.case = name, 0, None

    def reset(self, info):
        self.case, self.k = info["case_id"], 0

    def act(self, obs):
        if self.case in _Kind.FAIL:
            raise _Kind.FAIL[self.case]
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}

    def episode_stats(self):
        return {"prompt_tokens": 1000, "completion_tokens": 50, "model_turns": 2, "requests": 2,
                "request_latency_s": [0.1, 0.1], "wall_s": 0.25}


@pytest.fixture
def fake_kind(monkeypatch):
    import fwgym.cli.evaluate as ev

    kinds = dict(ev.agent_kinds())
    kinds["fake"] = _Kind()
    monkeypatch.setattr(ev, "agent_kinds", lambda: kinds)
    _Kind.FAIL, _Kind.PREFLIGHT = {}, None
    yield
    _Kind.FAIL, _Kind.PREFLIGHT = {}, None


def test_harness_errors_are_not_scored_and_resume_finishes_the_run(fake_kind, tmp_path, capsys):
    from fwgym.evaluation import select_cases

    ids = [c for _, c in select_cases("test", ["cycle_hire"], limit=4)]
    _Kind.FAIL = {ids[1]: HarnessError("HTTP 503 after 3 retries", kind="http_5xx"),
                  ids[2]: HarnessError("connection refused", kind="transport")}
    out = tmp_path / "run"
    cmd = BASE + ["--limit", "4", "--agent", "fake", "--policies", "hour_of_day_empirical", "--out", str(out)]
    assert main(cmd) == 1
    err = capsys.readouterr().err
    assert "error: 2 episode(s) ended with harness_error" in err and "NOT scored" in err
    assert f"fwgym evaluate --resume {out}" in err and "Traceback" not in err
    recs = {(r["policy"], r["case_id"]): r for r in _records(out)}
    assert [recs["fake_agent", c]["status"] for c in ids] == ["submitted", "harness_error", "harness_error", "submitted"]
    assert recs["fake_agent", ids[1]]["S"] is None and recs["fake_agent", ids[1]]["harness_kind"] == "http_5xx"
    assert recs["fake_agent", ids[0]]["prompt_tokens"] == 1000  # episode_stats in the record
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "incomplete" and m["counts"]["harness_error"] == 2
    assert m["preflight"] == {"fake_agent": {"server_model": "fake-1", "seed_honoured": True}}
    assert not (out / "leaderboard.md").exists()
    for command in (["leaderboard", str(out)], ["report", str(out), "-o", str(tmp_path / "site")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"incomplete run {out}: status incomplete (2 harness_error episode(s), never scored)" in err
        assert f"`fwgym evaluate --resume {out}`" in err
    # the backend is back: the resume plays the two episodes and the run is complete
    _Kind.FAIL = {}
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    assert main(cmd[:-1] + [str(tmp_path / "straight")]) == 0
    assert _stable(_records(out)) == _stable(_records(tmp_path / "straight"))
    out_text = capsys.readouterr().out
    assert "tokens/case (prompt + completion)" in out_text and "1,000 + 50" in out_text
    assert len((out / "superseded.jsonl").read_text().splitlines()) == 2
    assert main(["leaderboard", str(out)]) == 0


def test_agent_exceptions_are_the_agents_failure_and_preflight_failures_run_nothing(fake_kind, tmp_path, capsys):
    from fwgym.evaluation import select_cases

    ids = [c for _, c in select_cases("test", ["cycle_hire"], limit=2)]
    _Kind.FAIL = {ids[0]: KeyError("decisions")}
    out = tmp_path / "run"
    assert main(BASE + ["--limit", "2", "--agent", "fake", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: 1 episode(s) ended because the agent raised an exception" in err
    rec = next(r for r in _records(out) if r["case_id"] == ids[0])
    assert rec["status"] == "abstained" and rec["reason"] == "agent_error: KeyError: 'decisions'" and rec["scored"]
    assert json.loads((out / "manifest.json").read_text())["counts"]["agent_error"] == 1
    _Kind.PREFLIGHT = HarnessError("http://127.0.0.1:9/v1 is unreachable: connection refused", kind="transport")
    out2 = tmp_path / "never"
    assert main(BASE + ["--limit", "2", "--agent", "fake", "--out", str(out2)]) == 1
    err = capsys.readouterr().err
    assert "fwgym: error: preflight failed (transport): http://127.0.0.1:9/v1 is unreachable" in err
    assert "nothing was run" in err and "Traceback" not in err
    assert not out2.exists() or not any(out2.iterdir())


# --- scripted OpenAI-compatible servers through --agent openai -----------------------------------------------------

def _openai(url, out, *extra, limit="2"):
    return BASE + ["--limit", limit, "--agent", "openai", "--base-url", url, "--model", "test-model", "--timeout", "5",
                   "--max-retries", "0", "--policies", "weekday_empirical", "--out", str(out), *extra]


def _agent_status(out):
    return [r["status"] for r in _records(out) if r["policy"] == "openai:test-model"]


def test_no_server_then_the_server_comes_back(tmp_path, capsys):
    url = unused_url()
    out = tmp_path / "run"
    assert main(_openai(url, out)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("harness_error" in err or "preflight failed" in err)
    if (out / "results.jsonl").exists():  # without an LLM preflight every agent episode is a harness error
        assert _agent_status(out) == ["harness_error"] * 2
        assert all(r["valid"] for r in _records(out) if r["policy"] == "weekday_empirical")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with ScriptedChatServer(respond=plan_then_answer("weekday_empirical"), port=port):
            assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
        assert _agent_status(out) == ["submitted"] * 2


def test_http_500s_are_harness_errors(tmp_path, capsys):
    with ScriptedChatServer(respond=lambda body: Step(status=500)) as srv:
        assert main(_openai(srv.url, tmp_path / "run")) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if (tmp_path / "run" / "results.jsonl").exists():
        assert _agent_status(tmp_path / "run") == ["harness_error"] * 2


def test_a_401_mid_run_ends_the_remaining_episodes_unscored(tmp_path, capsys):
    answers = plan_then_answer("weekday_empirical")
    n = {"k": 0}

    def respond(body):  # the preflight and the first episode (2 requests) are served, then the key is revoked
        if "tools" not in body or body.get("max_tokens") == 1:  # the preflight's probes (short completion, tools probe)
            return completion("ok")
        n["k"] += 1
        return answers(body) if n["k"] <= 2 else Step({"error": {"message": "invalid api key"}}, status=401)

    with ScriptedChatServer(respond=respond) as srv:
        assert main(_openai(srv.url, tmp_path / "run", limit="3")) == 1
    err = capsys.readouterr().err
    assert "error: 2 episode(s) ended with harness_error" in err and "Traceback" not in err
    recs = [r for r in _records(tmp_path / "run") if r["policy"] == "openai:test-model"]
    assert [r["status"] for r in recs] == ["submitted", "harness_error", "harness_error"]
    assert "HTTP 401" in recs[1]["reason"] and recs[1]["S"] is None and recs[0]["S"] is not None


class _DeadlineAgent:
    """A minimal chat agent for the slow-drip server: one HTTP request per turn with a real wall-clock
    deadline for the whole reply (not a per-read timeout); past it, a HarnessError of kind timeout."""

    name = "deadline_agent"

    def __init__(self, url, deadline):
        self.url, self.deadline = url, deadline

    def act(self, obs):
        import socket
        import urllib.request

        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": obs["last_result"]}]}).encode()
        req = urllib.request.Request(self.url + "/chat/completions", body, {"Content-Type": "application/json"})
        t_end = time.monotonic() + self.deadline
        try:
            with urllib.request.urlopen(req, timeout=self.deadline) as resp:
                data = b""
                while chunk := resp.read(1):
                    data += chunk
                    if time.monotonic() > t_end:
                        raise HarnessError(f"no complete reply within the {self.deadline} s deadline", kind="timeout")
        except (OSError, socket.timeout) as exc:
            raise HarnessError(f"transport: {exc}", kind="transport") from None
        msg = json.loads(data)["choices"][0]["message"]
        if msg.get("tool_calls"):
            f = msg["tool_calls"][0]["function"]
            return {"tool": f["name"], "args": json.loads(f["arguments"])}
        text = msg["content"]
        obj = json.loads(text[text.index("{"): text.rindex("}") + 1])
        return obj if "tool" in obj else {"tool": "submit", "args": obj}  # a JSON tool call in text, or the answer


def test_a_slow_drip_past_the_deadline_is_a_harness_error(tmp_path):
    from functools import partial

    from fwgym.evaluation import RunDir, evaluate
    from fwgym.evaluation.manifest import MANIFEST_VERSION

    answers = plan_then_answer("weekday_empirical")
    n = {"k": 0}

    def respond(body):  # the second episode's first reply trickles in at 20 bytes/s
        n["k"] += 1
        return Step(answers(body), drip=0.05) if n["k"] == 3 else answers(body)

    run = RunDir.create(tmp_path / "run", {"manifest_version": MANIFEST_VERSION})
    with ScriptedChatServer(respond=respond) as srv:
        t0 = time.perf_counter()
        recs = evaluate([partial(_DeadlineAgent, srv.url, 1.0)], split="test", domains=["cycle_hire"], limit=3,
                        progress=False, run=run)
        assert time.perf_counter() - t0 < 20
    run.finalize([(r["policy"], r["case_id"]) for r in recs])
    run.close()
    # the second episode played (cases are played in as_of order) is the slow one
    assert sorted(r["status"] for r in recs) == ["harness_error", "submitted", "submitted"]
    (bad,) = [r for r in recs if r["status"] == "harness_error"]
    assert bad["harness_kind"] == "timeout" and "1.0 s deadline" in bad["reason"] and bad["S"] is None


# --- kill a run (SIGINT, SIGKILL) after k episodes; --resume completes it; the records equal a straight run's --------

def _spawn(args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    code = "import sys; from fwgym.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=str(ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_records(out, k, proc, timeout=120):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        p = out / "results.jsonl"
        if p.exists() and sum(1 for x in p.read_text().splitlines() if '"openai:test-model"' in x) >= k:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("the run did not record enough episodes in time")


@pytest.mark.parametrize("sig, concurrency, n", [(signal.SIGINT, 1, 6), (signal.SIGKILL, 1, 6), (signal.SIGINT, 3, 12)])
def test_a_killed_run_resumes_to_the_records_of_a_straight_run(tmp_path, sig, concurrency, n):
    # with --concurrency, Ctrl-C starts no new episode and lets the ones in flight finish (they are recorded)
    with ScriptedChatServer(respond=plan_then_answer("weekday_empirical"), delay=0.15) as srv:
        straight = tmp_path / "straight"
        assert main(_openai(srv.url, straight, limit=str(n))) == 0
        out = tmp_path / "killed"
        proc = _spawn(_openai(srv.url, out, "--concurrency", str(concurrency), limit=str(n)))
        _wait_for_records(out, 2, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        m = json.loads((out / "manifest.json").read_text())
        if sig == signal.SIGINT:
            assert proc.returncode == 130 and "interrupted:" in err and f"--resume {out}" in err
            assert "Traceback" not in err and m["status"] == "interrupted"
        else:
            assert proc.returncode == -signal.SIGKILL and m["status"] == "running"
        kept = [r for r in _records(out) if r["policy"] == "openai:test-model"]
        assert 2 <= len(kept) < n
        assert main(["leaderboard", str(out)]) == 2  # unfinished: refused
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    final = _records(out)
    assert len(final) == 2 * n and _stable(final) == _stable(_records(straight))
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and [s["session"] for s in m["sessions"]] == [1, 2]
    # every agent record has its trace line, joined by the episode id
    traces = {json.loads(x)["episode_id"]: json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()}
    for r in final:
        if r["policy"] == "openai:test-model":
            assert traces[r["episode_id"]]["case_id"] == r["case_id"]
            assert traces[r["episode_id"]]["score"]["S"] == r["S"]


# --- agents may not take the name of a policy ----------------------------------------------------------------------

_AGENT_FILE = '''
import json


class Agent:
    name = "{name}"

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {{"tool": "classical_plan", "args": {{"method": "hour_of_day_empirical"}}}}
        return {{"tool": "submit", "args": {{"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}}}
'''


@pytest.mark.parametrize("class_name, argv, why", [
    ("perfect_demand", [], "the name of a policy of fwgym (fwgym list policies)"),
    ("mine", ["--agent-name", "catalog_oracle"], "the name of a policy of fwgym (fwgym list policies)"),
    ("mine", ["--agent-name", "chronos2"], "the name of a policy of fwgym (fwgym list policies)"),
    ("mine", ["--agent-name", "weekday_empirical", "--policies", "weekday_empirical"],
     "the name of another policy of this run (--policies)"),
])
def test_an_agent_named_like_a_policy_is_refused(tmp_path, capsys, class_name, argv, why):
    (tmp_path / "agent.py").write_text(_AGENT_FILE.format(name=class_name))
    out = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--agent", f"{tmp_path / 'agent.py'}:Agent", "--in-process", *argv]) == 2
    label = argv[1] if argv else class_name
    assert capsys.readouterr().err == (f"fwgym: error: the agent's policy name {label!r} is {why}; its row would pass "
                                       "for that policy's: name the agent with --agent-name NAME (or its class's name "
                                       "attribute)\n")
    assert not out.exists()


def test_an_agent_with_its_own_name_runs_beside_the_policies(tmp_path, capsys):
    (tmp_path / "agent.py").write_text(_AGENT_FILE.format(name="perfect_demand"))
    out = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--agent", f"{tmp_path / 'agent.py'}:Agent", "--agent-name", "my_agent",
                 "--policies", "hour_of_day_empirical", "perfect_demand"]) == 0  # isolated (the default kind)
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["policy"] for r in rows] == ["my_agent", "hour_of_day_empirical", "perfect_demand"]
    by = {r["policy"]: r for r in rows}
    assert by["my_agent"]["S"] == by["hour_of_day_empirical"]["S"] and by["perfect_demand"]["S"] == 0.0


@pytest.mark.parametrize("name, why", [
    ("perfect_demand\u200b", "holds characters that do not print (U+200B (Cf))"),
    ("perfect_demand ", "starts or ends with whitespace"),
    ("Perfect_Demand", "is the name of a policy of fwgym (fwgym list policies), 'perfect_demand', up to case"),
    ("a\nb", "holds characters that do not print (U+000A (Cc))"),
])
def test_an_agent_name_that_only_looks_like_a_policy_or_breaks_the_table_is_refused(tmp_path, capsys, name, why):
    (tmp_path / "agent.py").write_text(_AGENT_FILE.format(name="mine"))
    out = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--agent", f"{tmp_path / 'agent.py'}:Agent", "--in-process", "--agent-name", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fwgym: error: the agent's policy name {name!r} ") and why in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("extra", [[], ["--trace-out", "traces/deep/t.jsonl"]])
def test_a_refused_openai_agent_leaves_no_folder(tmp_path, monkeypatch, capsys, extra):
    monkeypatch.chdir(tmp_path)
    argv = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--agent",
            "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", "runs/oa", *extra]
    assert main(argv + ["--agent-name", "perfect_demand"]) == 2  # refused before the agent is built
    assert "is the name of a policy of fwgym" in capsys.readouterr().err
    assert main(argv + ["--policies", "no_such_policy"]) == 2  # refused after the agent made its trace folder
    assert "unknown policy 'no_such_policy'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_scenario_seed_is_a_setting_of_the_run(tmp_path, capsys):
    from fwgym.context.scenarios import make_scenario
    from fwgym.core.cases import get_case
    from fwgym.evaluation.results import load_results

    out = tmp_path / "run"
    assert main(["evaluate", "--suite", "forecast", "--split", "dev", "--limit", "4", "--scenario-seed", "7",
                 "--policies", "hour_of_day_empirical_samples", "--no-progress", "--out", str(out)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["settings"]["scenario_seed"] == 7 and m["settings"]["env_kwargs"]["scenario_seed"] == 7
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for r in recs:  # every record's note is the seed-7 draw (and the results reader re-scores it under seed 7)
        assert r["scenario"] == make_scenario(get_case(r["case_id"]), 7).family
    assert len(load_results([out]).records) == len(recs) == 8
    assert main(["evaluate", "--suite", "decision", "--scenario-seed", "3", "--limit", "1", "--out",
                 str(tmp_path / "bad")]) != 0
    assert "--scenario-seed applies to the context and forecast suites" in capsys.readouterr().err
