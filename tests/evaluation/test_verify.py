"""Verified results (issue 17.4): every stored record is re-scored from the packaged data before a leaderboard,
edited records and runs of other settings are refused with a message naming the file:line or the difference."""
import json

import numpy as np
import pytest
from scripted_agents import BuyThenSubmitQuantiles

from fwgym.cli import main
from fwgym.core.contract import GRID
from fwgym.evaluation import SUITES, evaluate, load_results, read_results, write_results
from fwgym.evaluation.manifest import file_sha256, record_sha256
from fwgym.evaluation.verify import RunSettings, rescore
from fwgym.core.scoring import load_sigma

POLICIES = ["weekday_empirical", "perfect_demand", "seasonal_empirical"]


def _run(out, *extra, policies=POLICIES, limit="6"):
    rc = main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", limit, "--no-progress", "--out",
               str(out), "--policies", *policies, *extra])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("verify") / "run")


def _lines(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def _write(path, recs):
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))


def _copy(run_dir, tmp_path, name="copy"):
    dst = tmp_path / name
    dst.mkdir()
    for f in ("results.jsonl", "manifest.json"):
        (dst / f).write_bytes((run_dir / f).read_bytes())
    return dst


@pytest.mark.parametrize("suite", list(SUITES))
def test_rescoring_reproduces_every_honest_record_exactly(suite):
    policies = ([BuyThenSubmitQuantiles, "hour_of_day_empirical_samples", "context_hour_of_day_empirical"]
                if suite == "forecast" else ["weekday_empirical", "seasonal_empirical", "perfect_demand", "catalog_oracle"])
    recs = evaluate(policies, split="test", limit=4, progress=False, env_kwargs=SUITES[suite])
    settings = RunSettings(suite=suite, sigma=load_sigma(), budget=113_726, scenario_seed=0, credit_weight=0.0)
    for r in recs:
        fresh = rescore(r, settings)
        for f in fresh:  # bit for bit: the same scorer on the same inputs
            assert fresh[f] == r[f], (r["policy"], r["case_id"], f)
    assert sum(r["valid"] for r in recs) > 0 and any(r["credits"] > 0 for r in recs)


def test_an_honest_run_reads_and_its_manifest_pins_every_line(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    recs = read_results([run_dir])
    assert len(recs) == 18 == manifest["records"]["count"] and manifest["status"] == "complete"
    assert manifest["records"]["sha256"] == file_sha256(run_dir / "results.jsonl")
    assert manifest["records"]["sha256_by_line"] == [record_sha256(r) for r in _lines(run_dir)]


@pytest.mark.parametrize("field, value", [("S", 0.0), ("loss", None), ("R", -1.0), ("floor", 0.5)])
def test_an_edited_score_is_refused_naming_file_and_line(run_dir, tmp_path, capsys, field, value):
    run = _copy(run_dir, tmp_path)
    recs = _lines(run)
    k = 4  # line 5: weekday_empirical's 5th case
    recs[k][field] = recs[k][field] * 0.5 + 0.01 if value is None else value
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=rf"results.jsonl:5: record of policy 'weekday_empirical' on case "
                                         rf"'{recs[k]['case_id']}': stored {field} = .* but re-scored {field} ="):
        read_results([run])
    assert main(["leaderboard", str(run)]) == 2
    assert "results.jsonl:5: record of policy 'weekday_empirical'" in capsys.readouterr().err


def test_edited_levels_nan_and_a_consistent_forgery_are_refused(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    recs = _lines(run)
    k = next(i for i, r in enumerate(recs) if r["valid"] and r["levels"][0] > 0.5)
    original = [dict(r) for r in recs]
    recs[k]["levels"] = [float(GRID[np.searchsorted(GRID, x) - 1]) for x in recs[k]["levels"]]  # a step lower: valid
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=rf"results.jsonl:{k + 1}: .* stored loss = .* but re-scored loss"):
        read_results([run])
    # off the grid, or breaking the ramp: not a plan the env would have accepted
    recs[k]["levels"] = [0.4, 2.0] + original[k]["levels"][2:]
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=rf"results.jsonl:{k + 1}: .* are not a valid plan \(ramp_violation"):
        read_results([run])
    recs[k] = {**original[k], "S": float("nan")}
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=rf"results.jsonl:{k + 1}: .* S = nan is not a finite number"):
        read_results([run])
    # a forger who re-scores the edited plan consistently passes the re-scoring, not the manifest's line hash
    forged = {**original[k], "levels": [float(GRID[np.searchsorted(GRID, x) - 1]) for x in original[k]["levels"]]}
    settings = RunSettings(suite="decision", sigma=load_sigma(), budget=113_726)
    forged.update(rescore(forged, settings))
    recs[k] = forged
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=rf"results.jsonl:{k + 1}: record of policy .* differs from the one the run "
                                         "wrote"):
        read_results([run])
    # credits lowered (S consistent) are caught the same way; credits beyond the budget by the re-scoring
    recs[k] = {**original[k], "credits": original[k]["credits"] + 200_000}
    _write(run / "results.jsonl", recs)
    with pytest.raises(ValueError, match=r"credits 2\d+ is not an integer in \[0, 113726\]"):
        read_results([run])


def test_runs_of_other_settings_are_refused(run_dir, tmp_path, capsys):
    # a forecast run and a decision run do not share a leaderboard
    fc = _run(tmp_path / "fc", "--suite", "forecast", policies=["hour_of_day_empirical_samples"], limit="2")
    with pytest.raises(ValueError, match=r"runs differ in suite: .* has 'decision', .* has 'forecast'"):
        read_results([run_dir, fc])
    assert main(["leaderboard", str(run_dir), str(fc)]) == 2 and "runs differ in suite" in capsys.readouterr().err
    # another sigma: scored consistently under it (Python API run), then refused beside the packaged one
    sigma = {d: 10 * v for d, v in load_sigma().items()}
    recs = evaluate(["hour_of_day_empirical"], split="test", domains=["cycle_hire"], limit=6, progress=False,
                    sigma=sigma)
    write_results(recs, tmp_path / "sig", {"sigma": sigma})
    assert len(read_results([tmp_path / "sig"])) == 6  # alone it verifies under its own sigma
    assert "is not the packaged calibration" in load_results([tmp_path / "sig"]).notes[0]
    with pytest.raises(ValueError, match="runs differ in sigma"):
        read_results([run_dir, tmp_path / "sig"])
    # the manifest's sigma edited: its records no longer re-score
    bad = _copy(run_dir, tmp_path, "badsigma")
    m = json.loads((bad / "manifest.json").read_text())
    m["settings"]["sigma"] = sigma
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match=r"results.jsonl:1: .* stored R = .* but re-scored R"):
        read_results([bad])
    # another scorer version; another fwgym version (accepted only when asked, and then noted)
    m = json.loads((run_dir / "manifest.json").read_text())
    old = _copy(run_dir, tmp_path, "oldscorer")
    (old / "manifest.json").write_text(json.dumps({**m, "settings": {**m["settings"], "scorer_version": "0"}}))
    with pytest.raises(ValueError, match="scored by scorer version '0'"):
        read_results([old])
    other = tmp_path / "other"
    _run(other, policies=["hour_of_day_empirical"])
    mo = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**mo, "settings": {**mo["settings"], "fwgym_version": "0.0.9"}}))
    with pytest.raises(ValueError, match=r"runs differ in fwgym_version: .*--allow-mixed-versions"):
        read_results([run_dir, other])
    rs = load_results([run_dir, other], allow_mixed_versions=True)
    assert len(rs.records) == 24 and "MIXED fwgym versions 0.0.9, 0.1.0" in rs.notes[0]
    capsys.readouterr()
    assert main(["leaderboard", str(run_dir), str(other), "--allow-mixed-versions"]) == 0
    assert "MIXED fwgym versions 0.0.9, 0.1.0" in capsys.readouterr().out


def test_a_limit_run_ranks_beside_a_full_run_on_their_common_cases(run_dir, tmp_path, capsys):
    small = _run(tmp_path / "small", policies=["hour_of_day_empirical"], limit="2")
    with pytest.raises(ValueError, match="partial result set: policies were evaluated on different cases"):
        read_results([run_dir, small])
    common = {r["case_id"] for r in _lines(small)} & {r["case_id"] for r in _lines(run_dir)}
    assert len(common) == 2
    rs = load_results([run_dir, small], common_cases=True)
    assert rs.common_cases == 2 and len(rs.records) == 8 and {r["case_id"] for r in rs.records} == common
    assert rs.notes == ["restricted to the 2 cases common to every policy (--common-cases; 12 records of other "
                        "cases left out)"]
    capsys.readouterr()
    assert main(["leaderboard", str(run_dir), str(small), "--common-cases"]) == 0
    out = capsys.readouterr().out
    assert "restricted to the 2 cases common to every policy (--common-cases" in out.splitlines()[0]
    assert "| hour_of_day_empirical |" in out
