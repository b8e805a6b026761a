"""``fwgym cases``: case counts per cohort and lead (the numbers DESIGN §2 states for the test split)."""
import re

import pytest

from fwgym.core.cases import SPLIT_DOC
from fwgym.cli import main


def test_cases_command_prints_counts(capsys):
    assert main(["cases", "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("split=test\n| cohort | day_ahead | week_ahead | total |\n|---|---:|---:|---:|\n")
    assert "| electricity-february | 187 | 183 | 370 |" in out
    for cohort, total in (("electricity-july", 343), ("electricity-august", 389)):
        da, wa, n = map(int, re.search(rf"\| {cohort} \| (\d+) \| (\d+) \| (\d+) \|", out).groups())
        assert da + wa == n == total
    assert "| cycle_hire-october | 80 | 77 | 157 |" in out
    assert "| total | | | 1259 |" in out and SPLIT_DOC not in out


def test_cases_command_one_domain_and_the_calendar(capsys):
    assert main(["cases", "--split", "dev", "--domain", "cycle_hire", "-v"]) == 0
    out = capsys.readouterr().out
    assert "| cycle_hire-august | 80 | 80 | 160 |" in out and "| total | | | 160 |" in out and "electricity" not in out.split(
        "\n\n")[0]
    assert SPLIT_DOC in out


def test_cases_command_refuses_an_unknown_domain(capsys):
    with pytest.raises(SystemExit):
        main(["cases", "--domain", "gas"])
    assert "domain must be 'all' or one of" in capsys.readouterr().err


# --- fwgym cases export ---------------------------------------------------------------------------

import json  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from fwgym.data import sha256_file  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import SUITES, select_cases  # noqa: E402
from fwgym.evaluation.export import SCHEMA, read_manifest  # noqa: E402


def _utc(hour):
    return datetime.fromtimestamp(int(hour) * 3600, tz=timezone.utc)


@pytest.fixture(scope="module")
def dev_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "dev"
    assert main(["cases", "export", "--split", "dev", "--suite", "forecast", "--limit", "3", "-o", str(out),
                 "--no-progress"]) == 0
    return out


def test_export_matches_the_env_observations(dev_export):
    cases = pq.read_table(dev_export / "cases.parquet")
    assert cases.column_names == list(SCHEMA["cases.parquet"])
    rows = cases.to_pylist()
    assert [(r["domain"], r["case_id"]) for r in rows] == select_cases("dev", limit=3)
    hist = pq.read_table(dev_export / "history.parquet").to_pylist()
    tgt = pq.read_table(dev_export / "targets.parquet").to_pylist()
    assert len(hist) == 336 * len(rows) and len(tgt) == 24 * len(rows)
    envs = {d: FWBenchEnv(domain=d, split="dev", **SUITES["forecast"]) for d in {r["domain"] for r in rows}}
    for r in rows:
        env = envs[r["domain"]]
        obs, info = env.reset(options={"case_id": r["case_id"]})
        case, sc = env.episode.case, env.episode.scenario
        assert r["context"] == obs["context"] and "Context: " + r["scenario_text"] in r["context"]
        h = [x for x in hist if x["case_id"] == r["case_id"]]
        assert [x["position"] for x in h] == list(range(336))
        values = np.array([x["value"] for x in h])
        np.testing.assert_array_equal(values.astype(np.float32), obs["history"])
        np.testing.assert_array_equal(values, case.history)
        assert [x["timestamp"] for x in h] == [_utc(t) for t in case.history_hours]
        assert h[0]["timestamp"] == r["history_start"] and h[-1]["timestamp"] == r["last_visible"]
        s = info["episode"]["case"]
        for k in ("series_id", "series_name", "unit", "lead", "split", "cohort", "scale", "horizon"):
            assert r[k] == s[k], k
        assert r["as_of"].isoformat().replace("+00:00", "Z") == s["as_of"]
        assert r["target_end"].isoformat().replace("+00:00", "Z") == s["target_end"]
        assert [r["target_step_first"], r["target_step_last"]] == s["target_steps"]
        assert r["target_date"] == case.target_date and r["target_weekday"] == case.target_date.weekday()
        assert r["scenario"] == sc.family and r["roi"] == sc.roi.tolist() and r["shortage_weights"] is None
        for side, arr in (("lower", sc.lower), ("upper", sc.upper)):
            if arr is None:
                assert r[side] is None
            else:
                assert r[side] == [None if np.isnan(v) else v for v in arr]
        t = [x for x in tgt if x["case_id"] == r["case_id"]]
        hind = env.hindsight()
        np.testing.assert_array_equal([x["target"] for x in t], hind["target"])  # the scored target
        np.testing.assert_array_equal([x["observed"] for x in t], case.target())
        assert [x["timestamp"] for x in t] == [_utc(h) for h in case.target_hours]
        assert [x["step"] for x in t] == list(range(s["target_steps"][0], s["target_steps"][1] + 1))


def test_export_manifest_hashes_every_file(dev_export):
    m = read_manifest(dev_export)
    assert (m["format"], m["split"], m["suite"], m["targets"], m["n_cases"]) == ("fwgym-cases", "dev", "forecast", True, 6)
    assert set(m["files"]) == {"cases.parquet", "history.parquet", "targets.parquet"}
    for name, info in m["files"].items():
        assert info["sha256"] == sha256_file(dev_export / name) and info["rows"] == pq.read_metadata(
            dev_export / name).num_rows
    assert m["schema"] == SCHEMA


def test_test_split_targets_only_with_the_flag(tmp_path, capsys):
    plain = tmp_path / "test"
    assert main(["cases", "export", "--split", "test", "--suite", "decision", "--domain", "cycle_hire", "--limit",
                 "2", "-o", str(plain), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "(no targets)" in captured.out
    assert sorted(p.name for p in plain.iterdir()) == ["cases.parquet", "history.parquet", "manifest.json"]
    m = read_manifest(plain)
    assert m["targets"] is False and "targets.parquet" not in m["schema"]
    cols = pq.read_table(plain / "cases.parquet").to_pylist()
    assert all(r["scenario"] is None and r["roi"] is None and len(r["shortage_weights"]) == 24 for r in cols)
    for name in ("cases.parquet", "history.parquet"):  # no target value anywhere
        assert "target" not in pq.read_table(plain / name).column_names
    key = tmp_path / "key"
    assert main(["cases", "export", "--split", "test", "--suite", "decision", "--domain", "cycle_hire", "--limit",
                 "2", "-o", str(key), "--include-test-targets", "--no-progress"]) == 0
    assert "the benchmark's answer key" in capsys.readouterr().err
    assert pq.read_table(key / "targets.parquet").num_rows == 48
    # never replaced silently; --overwrite replaces an export (and nothing else)
    assert main(["cases", "export", "--split", "test", "--suite", "decision", "-o", str(key), "--limit", "1"]) == 2
    assert "exports are never replaced silently" in capsys.readouterr().err
    assert main(["cases", "export", "--split", "test", "--suite", "decision", "-o", str(key), "--limit", "1",
                 "--domain", "cycle_hire", "--overwrite", "--no-progress"]) == 0
    assert read_manifest(key)["n_cases"] == 1 and not (key / "targets.parquet").exists()
    (key / "notes.txt").write_text("mine")
    assert main(["cases", "export", "--split", "dev", "--suite", "decision", "-o", str(key), "--overwrite"]) == 2
    assert "holds files that are not an export's" in capsys.readouterr().err
    (plain / "history.parquet").write_bytes(b"changed")
    with pytest.raises(ValueError, match="sha256 differs"):
        read_manifest(plain)


AGENT = '''
"""Submit forecasts made offline from a `fwgym cases export` (README, Commands)."""
import pyarrow.parquet as pq


class FileForecasts:
    name = "offline-seasonal-naive"

    def __init__(self, path):
        self.quantiles = {}
        for row in pq.read_table(path).to_pylist():
            self.quantiles.setdefault(row["case_id"], [None] * 24)[row["hour"]] = row["quantiles"]

    def reset(self, info=None):
        self.case_id = info["case_id"]

    def act(self, observation):
        return {"tool": "submit", "args": {"quantiles": self.quantiles[self.case_id]}}


def make(path):
    return FileForecasts(path)
'''


def test_offline_forecasts_are_submitted_through_the_forecast_suite(dev_export, tmp_path, capsys):
    import pyarrow as pa

    from datetime import timedelta

    cases = pq.read_table(dev_export / "cases.parquet").to_pylist()
    hist = pq.read_table(dev_export / "history.parquet").to_pylist()
    rows = []
    for r in cases:  # a "model" run offline: the mean of the visible hours at the same UTC hour, +-10 %
        h = [x for x in hist if x["case_id"] == r["case_id"]]
        for hour in range(24):
            at = (r["target_start"] + timedelta(hours=hour)).hour
            base = float(np.mean([x["value"] for x in h if x["timestamp"].hour == at]))
            rows.append({"case_id": r["case_id"], "hour": hour,
                         "quantiles": [base * (0.9 + 0.025 * k) for k in range(9)]})
    forecasts = tmp_path / "forecasts.parquet"
    pq.write_table(pa.Table.from_pylist(rows), forecasts)
    (tmp_path / "my_forecasts.py").write_text(AGENT)
    out = tmp_path / "run"
    assert main(["evaluate", "--suite", "forecast", "--split", "dev", "--limit", "3", "--no-progress", "--out", str(out),
                 "--agent", f"{tmp_path / 'my_forecasts.py'}:make", "--agent-kwargs",
                 json.dumps({"path": str(forecasts)}), "--agent-read", str(forecasts)]) == 0
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in recs] == [c["case_id"] for c in cases]
    assert all(r["valid"] and r["status"] == "submitted" and r["policy"] == "offline-seasonal-naive" for r in recs)
    assert all(r["R"] == min(r["rcrps"], 5.0) and r["credits"] == 0 for r in recs)
