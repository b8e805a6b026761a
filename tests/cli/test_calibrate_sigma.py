"""``fwgym calibrate-sigma``: never on the test split; prints and (with --write) writes the calibration."""
import json

import pytest

import fwgym.evaluation.calibration
from fwgym.cli import main


def test_refuses_the_test_split(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate-sigma", "--split", "test"])
    assert "invalid choice: 'test'" in capsys.readouterr().err


def test_prints_and_writes_the_calibration(monkeypatch, tmp_path, capsys):
    calls = []

    def fake(split, workers, progress):
        calls.append((split, workers, progress))
        return {"split": split, "sigma": {"electricity": 0.05, "cycle_hire": 0.04}}

    monkeypatch.setattr(fwgym.evaluation.calibration, "calibrate_sigma", fake)
    out = tmp_path / "sigma.json"
    assert main(["calibrate-sigma", "--split", "train", "--workers", "3", "--no-progress", "--write", "--output",
                 str(out)]) == 0
    assert calls == [("train", 3, False)]
    written = json.loads(out.read_text())
    assert written["sigma"] == {"electricity": 0.05, "cycle_hire": 0.04}
    assert written["command"] == "fwgym calibrate-sigma --split train" and "electricity" in written["reference_fwbench_paper"]
    assert f"wrote {out}" in capsys.readouterr().out
