"""Issue 25's attacks by a code agent that never leaves the import guard, through ``fwgym evaluate`` (in a
subprocess: one attack kills its evaluator). With the sandbox none of them changes a row: the agent's rows are
exactly the no-information plan's and the run's files are untouched. Without it (``--agent-sandbox off``, what a
kernel without Landlock gives) the attack works, and the row is marked: ``isolation: process`` in the
manifest's agent description, a warning on stderr."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.isolation import sandbox

ROOT = Path(__file__).resolve().parents[2]
AGENTS = Path(__file__).with_name("attack_agents.py")
SANDBOXED = sandbox.status()["isolation"] == "sandbox"
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no full Landlock sandbox here: {sandbox.status()['reason']}")
BASELINE = "hour_of_day_empirical"


def evaluate(tmp_path, name, agent, kwargs, *extra, out="run"):
    """``fwgym evaluate`` of ``agent`` next to the no-information plan on 2 cycle-hire test cases."""
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "fwgym", "evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "2",
           "--no-progress", "--policies", BASELINE, "--agent", f"{AGENTS}:{agent}", "--agent-kwargs",
           json.dumps({"report": str(reports / f"{name}.jsonl"), **kwargs}), "--agent-write", str(reports),
           "--out", str(tmp_path / out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    report = reports / f"{name}.jsonl"
    lines = [json.loads(x) for x in report.read_text().splitlines()] if report.exists() else []
    return proc, lines


def rows(run: Path) -> dict:
    return {(r["policy"], r["case_id"]): r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}


def description(run: Path, policy: str) -> dict:
    return json.loads((run / "manifest.json").read_text())["settings"]["agents"][policy]


def assert_no_information(run: Path, policy: str) -> None:
    by = rows(run)
    cases = sorted({c for p, c in by if p == BASELINE})
    assert len(cases) == 2 and {p for p, _ in by} == {policy, BASELINE}, sorted(by)
    for c in cases:
        assert by[policy, c]["levels"] == by[BASELINE, c]["levels"] and by[policy, c]["S"] == by[BASELINE, c]["S"] > 0


@needs_sandbox
def test_an_agent_that_opens_the_packaged_parquet_gets_nothing_in_the_sandbox(tmp_path):
    proc, found = evaluate(tmp_path, "peek", "ParquetPeek", {})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_information(tmp_path / "run", "parquet_peek")
    assert found and all(not f["read"] and "PermissionError" in f["error"] for f in found), found
    assert description(tmp_path / "run", "parquet_peek")["isolation"] == "sandbox" and "WITHOUT" not in proc.stderr


def test_without_the_sandbox_the_parquet_gives_the_perfect_plan_and_the_row_is_marked(tmp_path):
    proc, found = evaluate(tmp_path, "peek", "ParquetPeek", {}, "--agent-sandbox", "off")
    assert proc.returncode == 0, proc.stderr[-3000:]
    peeked = [r for (p, _), r in rows(tmp_path / "run").items() if p == "parquet_peek"]
    assert len(peeked) == 2 and all(r["S"] == 0.0 and r["valid"] for r in peeked)  # the answer, read from the file
    assert found and all(f["read"] for f in found)
    d = description(tmp_path / "run", "parquet_peek")
    assert d["isolation"] == "process" and "turned off" in d["isolation_note"]
    assert "WITHOUT a sandbox" in proc.stderr and "isolation: process" in proc.stderr


@needs_sandbox
def test_an_agent_that_reads_the_evaluators_proc_and_forges_records_changes_nothing(tmp_path):
    run = tmp_path / "run"
    proc, found = evaluate(tmp_path, "forge", "ProcForge", {"run_dir": str(run)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_information(run, "proc_forge")
    assert len(found) == 2
    for f in found:
        for what in ("environ", "cmdline", "mem", "listdir"):
            assert not f[what]["ok"] and "PermissionError" in f[what]["error"], (what, f)
    assert not found[1]["forge"]["ok"] and "PermissionError" in found[1]["forge"]["error"]
    assert "forged_reference" not in (run / "results.jsonl").read_text()


def test_without_the_sandbox_the_proc_attack_reads_the_evaluator_and_the_row_is_marked(tmp_path):
    run = tmp_path / "run"
    proc, found = evaluate(tmp_path, "forge", "ProcForge", {"run_dir": str(run)}, "--agent-sandbox", "off")
    assert found and found[0]["cmdline"]["ok"] and "evaluate" in found[0]["cmdline"]["value"]
    assert found[0]["listdir"]["ok"] and "manifest.json" in found[0]["listdir"]["value"]
    root = os.geteuid() == 0
    assert found[0]["environ"]["ok"] == found[0]["mem"]["ok"] == root  # PR_SET_DUMPABLE 0 stops all but root
    assert found[1]["forge"]["ok"]  # it wrote into the run directory
    assert description(run, "proc_forge")["isolation"] == "process" and "WITHOUT a sandbox" in proc.stderr


@needs_sandbox
def test_an_agent_that_kills_its_evaluator_on_bad_episodes_cannot(tmp_path):
    proc, found = evaluate(tmp_path, "kill", "ParentKiller", {})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_information(tmp_path / "run", "parent_killer")
    assert len(found) == 2 and all(not f["kill"]["ok"] and "Operation not permitted" in f["kill"]["error"]
                                   for f in found), found
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "complete"


def test_without_the_sandbox_the_killer_ends_the_run_and_the_row_is_marked(tmp_path):
    proc, found = evaluate(tmp_path, "kill", "ParentKiller", {}, "--agent-sandbox", "off")
    assert proc.returncode == -9 and found and found[0]["kill"]["ok"]  # the evaluator was SIGKILLed
    assert description(tmp_path / "run", "parent_killer")["isolation"] == "process"
