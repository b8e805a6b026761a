"""Sigma calibration (fwgym.evaluation.calibration): the frozen fwgym/config/sigma.json is what the calibration computes."""
import json

import pytest

from fwgym.evaluation.calibration import CALIBRATION_SPLITS, SIGMA_POLICY, calibrate_sigma, sigma_config
from fwgym.evaluation import evaluate
from fwgym.core.scoring import REFERENCE_SIGMA, SIGMA_PATH, aggregate, load_sigma


@pytest.fixture(scope="module")
def dev():
    return calibrate_sigma("dev", progress=False)


def test_the_frozen_sigma_file_is_reproduced(dev):
    frozen = json.loads(SIGMA_PATH.read_text())
    made = json.loads(sigma_config(dev))
    assert made["sigma"] == pytest.approx(frozen["sigma"], rel=1e-12, abs=0)
    assert {k: v for k, v in made.items() if k != "sigma"} == {k: v for k, v in frozen.items() if k != "sigma"}
    assert made["command"] == "fwgym calibrate-sigma --split dev" and made["reference_fwbench_paper"] == REFERENCE_SIGMA
    assert sigma_config(dev).endswith("}\n") and load_sigma() == pytest.approx(dev["sigma"], rel=1e-12, abs=0)


def test_sigma_is_the_weighted_mean_excess_loss_of_the_sigma_policy(dev):
    assert SIGMA_POLICY == "hour_of_day_empirical" and dev["policy"] == SIGMA_POLICY and dev["split"] == "dev"
    recs = evaluate([SIGMA_POLICY], split="dev", domains=["cycle_hire"], progress=False)
    assert dev["cases"]["cycle_hire"] == len(recs) == 160
    # R = (loss - floor) / sigma, so with the frozen sigma the weighted mean R of the sigma policy is 1
    assert aggregate(recs, fields=("R",))["R"] == pytest.approx(dev["sigma"]["cycle_hire"] / load_sigma()["cycle_hire"])
    excess = [{**r, "x": r["loss"] - r["floor"]} for r in recs]
    assert dev["sigma"]["cycle_hire"] == aggregate(excess, fields=("x",))["x"]


def test_no_calibration_on_the_test_split():
    assert CALIBRATION_SPLITS == ("train", "dev")
    with pytest.raises(ValueError, match="before the test period"):
        calibrate_sigma("test", progress=False)


def test_the_command_prints_the_calibration(dev, capsys, tmp_path):
    from fwgym.cli import main

    out = tmp_path / "sigma.json"
    assert main(["calibrate-sigma", "--no-progress", "--write", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(sigma_config(dev)) and f"wrote {out}" in printed
    assert out.read_text() == sigma_config(dev) and load_sigma(out) == dev["sigma"]
