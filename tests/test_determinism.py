"""Determinism: identical results files, but for the measured times and memory (VOLATILE_FIELDS), from two
separate processes and from several workers."""
import hashlib
import json
import os
import subprocess
import sys

from fwgym.evaluation.records import VOLATILE_FIELDS, stable_record


def _run(out, hashseed, workers):
    env = {**os.environ, "PYTHONHASHSEED": str(hashseed), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "fwgym.cli", "evaluate", "--split", "test", "--limit", "12", "--no-progress",
                    "--no-tsfm", "--workers", str(workers), "--out", str(out),
                    "--policies", "weekday_empirical", "calendar_residual", "seasonal_empirical", "perfect_demand"],
                   check=True, env=env, capture_output=True)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["episode_wall_s"] > 0 and r["cpu_s"] >= 0 and r["peak_rss_mib"] > 0 for r in lines)
    assert set(VOLATILE_FIELDS) <= set(lines[0])
    return hashlib.sha256("".join(json.dumps(stable_record(r), sort_keys=True) + "\n" for r in lines).encode()).hexdigest()


def test_results_identical_across_processes_and_workers(tmp_path):
    a = _run(tmp_path / "a", 1, 1)
    b = _run(tmp_path / "b", 2, 1)
    c = _run(tmp_path / "c", 3, 2)
    assert a == b == c
