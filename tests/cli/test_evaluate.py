"""``fwgym evaluate``: results files, the leaderboard print-out, warnings and clear errors."""
import json

import pytest

from fwgym.cli import main


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
