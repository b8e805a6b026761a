"""``python -m fwgym.testing.chat_server``: the scripted server a user can start to try the LLM harness."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fwgym.testing.chat_server", "--port", "0", "--fail-every", "3"],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stdout.readline()
    assert line.startswith("scripted OpenAI-compatible server at http://127.0.0.1:"), line
    yield line.split(" at ")[1].split()[0]
    proc.terminate()
    proc.wait(timeout=20)


def test_served_model_plans_and_its_faults_are_never_scored(server, tmp_path):
    from fwgym.cli import main

    out = tmp_path / "run"
    argv = ["evaluate", "--agent", "openai", "--base-url", server, "--model", "test-model", "--split", "dev",
            "--limit", "2", "--policies", "weekday_empirical", "--no-progress", "--out", str(out)]
    main(argv)
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    agent = [r for r in recs if r["policy"] == "openai:test-model"]
    base = {r["case_id"]: r["S"] for r in recs if r["policy"] == "weekday_empirical"}
    faults = [r for r in agent if r["status"] == "harness_error"]
    # every 3rd chat request is an HTTP 500 (not retried): with 2 requests per episode some episodes fail
    assert faults and all(not r["scored"] and r["S"] is None for r in faults)
    assert all(r["S"] == base[r["case_id"]] for r in agent if r["scored"])  # the scripted model plays weekday_empirical


def test_bad_options_are_usage_errors():
    r = subprocess.run([sys.executable, "-m", "fwgym.testing.chat_server", "--fail-every", "-1"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "--fail-every" in r.stderr


@pytest.fixture
def quiet_server():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fwgym.testing.chat_server", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stdout.readline()
    yield line.split(" at ")[1].split()[0]
    proc.terminate()
    proc.wait(timeout=20)


@pytest.mark.parametrize("extra", [[], ["--compact-results"], ["--no-native-tools"]])
def test_served_model_plays_the_forecast_suite_with_valid_forecasts(quiet_server, tmp_path, extra):
    # the offline route works for all three suites: forecast episodes submit the bought seasonal_empirical
    # quantiles (the note ignored), valid, and score exactly like the seasonal_empirical_quantiles policy
    from fwgym.cli import main

    out = tmp_path / "run"
    main(["evaluate", "--agent", "openai", "--base-url", quiet_server, "--model", "test-model", "--split", "dev",
          "--suite", "forecast", "--limit", "3", "--policies", "seasonal_empirical_quantiles", "--no-progress",
          "--out", str(out), *extra])
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    agent = [r for r in recs if r["policy"] == "openai:test-model"]
    base = {r["case_id"]: r for r in recs if r["policy"] == "seasonal_empirical_quantiles"}
    assert len(agent) == 3 * 2  # 3 cases per domain
    for r in agent:
        assert r["valid"] and r["status"] == "submitted" and r["submission"]["kind"] == "quantiles", r
        assert r["credits"] == base[r["case_id"]]["credits"] > 0
        assert r["rcrps"] == base[r["case_id"]]["rcrps"] and r["S"] == base[r["case_id"]]["S"]
        assert r["R"] == min(r["rcrps"], 5.0)
    assert sum(r["rcrps"] < 5.0 for r in agent) >= 4  # scored forecasts, not the invalid cap
