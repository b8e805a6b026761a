"""examples/held_out_domain.py end to end on a tiny setting, in its own process (it registers the opt-in pedestrian
domain before importing fwgym.rl, as a user's script would): both pools trained, every row played on the pedestrian
test split, the dev-chosen reference, files written."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

ROOT = Path(__file__).resolve().parents[2]


def test_tiny_run(tmp_path):
    out = tmp_path / "held_out"
    cmd = [sys.executable, str(ROOT / "examples" / "held_out_domain.py"), "--train-cases", "8", "--steps", "256",
           "--seeds", "0", "--n-envs", "8", "--test-limit", "2", "--n-boot", "50", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["pool"] for r in summary["runs"]] == ["source", "target"]
    assert summary["runs"][0]["domains"] == ["electricity", "cycle_hire"] and summary["runs"][1]["domains"] == ["pedestrian"]
    assert summary["best_fixed_dev"] in summary["dev_S"]
    rows = summary["test"]
    for r in summary["runs"]:
        assert rows[r["name"]]["valid"] == 2  # --test-limit 2: two pedestrian test cases, each a valid episode
    assert {"weekday_empirical", "free_menu_oracle", "catalog_oracle"} <= set(rows)
    assert "zero-shot" in (out / "table.md").read_text()
