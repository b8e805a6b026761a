"""Results files (fwgym.evaluation.results): every schema field round-trips, the manifest pins the records,
files of fwgym 0.1.0 (core fields only) still read, malformed files are refused with file:line."""
import json

import pytest
from scripted_agents import BuyThenSubmitQuantiles, GiveUp

from fwgym.evaluation import (CORE_FIELDS, FORECAST_TASK_FIELDS, RECORD_FIELDS, SUITES, evaluate, leaderboard,
                              read_results, write_results)
from fwgym.evaluation.records import ACCOUNTING_FIELDS, ENV_FIELDS, RESOURCE_FIELDS, RUN_FIELDS
from fwgym.jsonl import write_jsonl


def test_results_roundtrip_and_leaderboard(tmp_path):
    recs = evaluate(["weekday_empirical", "perfect_demand"], split="dev", limit=10, progress=False)
    paths = write_results(recs, tmp_path / "run", {"k": 1})
    back = read_results([tmp_path / "run"])
    assert back == recs and len(back) == 40
    rows = leaderboard(back)
    assert [r["policy"] for r in rows] == ["perfect_demand", "weekday_empirical"]
    assert rows[0]["S"] == 0.0 and rows[1]["S"] > 0
    assert paths["csv"].read_text().startswith("policy,")
    md = paths["markdown"].read_text()  # the one header (its marks), then the table
    assert md.startswith("fwgym leaderboard (**PARTIAL**): suite=decision") and "\n\n| policy | S |" in md
    manifest = json.loads(paths["manifest"].read_text())
    assert manifest["extra"]["k"] == 1 and manifest["records"]["count"] == 40 and manifest["status"] == "complete"
    assert manifest["coverage"]["cases"] == 20 and manifest["settings"]["suite"] == "decision"
    assert not (tmp_path / "run" / "meta.json").exists()  # one manifest per run directory
    with pytest.raises(ValueError, match="duplicate"):
        read_results([tmp_path / "run", tmp_path / "run"])


def test_forecast_suite_results_file_keeps_every_field(tmp_path):
    # the forecast suite's records (purchased forecasts scored, RCRPS, CRPS, alpha, the scenario) are complete
    # in results.jsonl and come back exactly, field for field
    recs = evaluate([BuyThenSubmitQuantiles, "hour_of_day_empirical_samples", GiveUp], split="test", limit=3,
                    progress=False, env_kwargs=SUITES["forecast"])
    bought = [r for r in recs if r["policy"] == "buy_then_submit_quantiles"]
    assert all(r["valid"] and r["credits"] > 0 and r["forecast_crps"]["f1"]["model"] == "seasonal_empirical"
               for r in bought)
    assert all(r["crps"] == pytest.approx(r["forecast_crps"]["f1"]["crps"], rel=1e-5) for r in bought)
    assert all(r["crps"] is None and r["rcrps"] == 5.0 for r in recs if r["policy"] == "give_up")
    assert all(set(r) == set(RECORD_FIELDS) for r in recs)
    write_results(recs, tmp_path / "fc", {"suite": "forecast"})
    lines = [json.loads(line) for line in (tmp_path / "fc" / "results.jsonl").read_text().splitlines()]
    assert all(sorted(line) == sorted(RECORD_FIELDS) for line in lines)  # every field of the schema is stored
    back = read_results([tmp_path / "fc"])
    assert back == recs
    for a, b in zip(recs, back):
        for field in RECORD_FIELDS:
            assert type(a[field]) is type(b[field]) and a[field] == b[field], field
    assert lines[-1]["reason"] == "nothing to say ü"


def test_decision_suite_results_file_holds_the_env_fields(tmp_path):
    recs = evaluate(["seasonal_empirical"], split="test", limit=2, progress=False)
    write_results(recs, tmp_path / "d")
    line = json.loads((tmp_path / "d" / "results.jsonl").read_text().splitlines()[0])
    assert set(line) == {"policy", *ENV_FIELDS, *RUN_FIELDS, *ACCOUNTING_FIELDS, *RESOURCE_FIELDS, "exposed"} - set(
        FORECAST_TASK_FIELDS)
    assert line["scenario"] is None and line["budget_left"] == 113_726 - line["credits"]
    assert line["forecast_crps"]["f1"]["model"] == "seasonal_empirical" and line["forecast_crps"]["f1"]["crps"] > 0
    assert read_results([tmp_path / "d"]) == recs


def test_results_of_fwgym_0_1_0_still_read(tmp_path):
    # fwgym 0.1.0 wrote only the core fields (and None for absent ones): such files read, the leaderboard is the same
    recs = evaluate(["weekday_empirical", "hour_of_day_empirical"], split="test", limit=2, progress=False)
    write_results(recs, tmp_path / "new")
    old = tmp_path / "old"  # a run directory of fwgym 0.1.0: results.jsonl and meta.json, no manifest
    write_jsonl(old / "results.jsonl", [{k: r.get(k) for k in CORE_FIELDS} for r in recs], sort_keys=True)
    (old / "meta.json").write_text(json.dumps({"suite": "decision", "split": "test"}))
    with pytest.raises(ValueError, match=r"run directory .*old has no manifest.json.*--allow-unverified"):
        read_results([old])  # nothing vouches for its records: refused unless asked for
    back = read_results([old], allow_unverified=True)
    assert [set(r) for r in back] == [set(CORE_FIELDS)] * len(recs)
    assert leaderboard(back, reference="auto") == leaderboard(read_results([tmp_path / "new"]), reference="auto")


def test_meta_pins_the_records_and_declared_subsets(tmp_path):
    real = evaluate(["weekday_empirical"], split="test", limit=3, progress=False)
    run = tmp_path / "run"
    write_results(real, run)
    assert len(read_results([run], allow_partial=False)) == 6  # the run declared its subset (limit 3)
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"1 record\(s\) missing \(the manifest counts 6 records, the file has 5\): "
                                         r"the run's record\(s\) 6 \(by line\)"):
        read_results([run])
    # a bare results file claims the whole split
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="partial result set"):
        read_results([bare], allow_partial=False, allow_unverified=True)
    assert len(read_results([bare], allow_unverified=True)) == 6
    with pytest.raises(FileNotFoundError, match="no results file"):
        read_results([tmp_path / "nowhere"])


def test_malformed_records_are_refused_with_file_and_line(tmp_path):
    real = evaluate(["weekday_empirical"], split="test", limit=1, progress=False)
    lines = [json.dumps(r, sort_keys=True) for r in real]
    p = tmp_path / "r.jsonl"
    p.write_text(lines[0] + "\n" + lines[1][:40] + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: not a JSON line"):
        read_results([p], allow_unverified=True)
    p.write_text(lines[0] + "\n\n" + json.dumps({k: v for k, v in real[1].items() if k != "S"}) + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:3: result record of policy 'weekday_empirical' .* lacks \['S'\]"):
        read_results([p], allow_unverified=True)
    p.write_text(lines[0] + "\n" + json.dumps({**real[1], "bonus": 1}) + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: .* does not name \['bonus'\]"):
        read_results([p], allow_unverified=True)
    p.write_text(lines[0] + "\n[1, 2]\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: expected a JSON object, got a list"):
        read_results([p], allow_unverified=True)
    with pytest.raises(ValueError, match="lacks"):  # a record without the env's fields is not written
        write_results([{k: r[k] for k in CORE_FIELDS} for r in real], tmp_path / "w")
    assert not (tmp_path / "w").exists()
