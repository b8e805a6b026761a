"""Determinism: identical results files from two separate processes and from several workers."""
import hashlib
import os
import subprocess
import sys


def _run(out, hashseed, workers):
    env = {**os.environ, "PYTHONHASHSEED": str(hashseed), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "fwgym.cli", "evaluate", "--split", "test", "--limit", "12", "--no-progress",
                    "--no-tsfm", "--workers", str(workers), "--out", str(out),
                    "--policies", "weekday_empirical", "calendar_residual", "seasonal_empirical", "perfect_demand"],
                   check=True, env=env, capture_output=True)
    return hashlib.sha256((out / "results.jsonl").read_bytes()).hexdigest()


def test_results_identical_across_processes_and_workers(tmp_path):
    a = _run(tmp_path / "a", 1, 1)
    b = _run(tmp_path / "b", 2, 1)
    c = _run(tmp_path / "c", 3, 2)
    assert a == b == c
