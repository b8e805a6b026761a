"""``fwgym evaluate --pool protocol|extended``: the env's forecast pool, the default policies, the manifest,
and ``--resume`` refusing another pool."""
import json

import pytest

from fwgym.baselines import registry
from fwgym.cli import main
from fwgym.forecasters.registry import EXTENDED_MODELS, PRICED_MODELS


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def extended_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool") / "ext"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--pool", "extended", "--policies", "ets", "hour_of_day_empirical"]) == 0
    return out


def test_extended_pool_is_a_setting_of_the_run(extended_run):
    m = _manifest(extended_run)
    assert m["settings"]["env_kwargs"] == {"models": list(EXTENDED_MODELS)}
    assert m["settings"]["forecast_pool"] == list(EXTENDED_MODELS) and m["args"]["pool"] == "extended"
    recs = [json.loads(x) for x in (extended_run / "results.jsonl").read_text().splitlines()]
    ets = next(r for r in recs if r["policy"] == "ets")
    assert ets["valid"] and ets["credits"] > 0 and ets["tool_counts"].get("forecast") == 1  # it bought an ETS forecast


def test_protocol_pool_is_the_default_and_unchanged(tmp_path):
    out = tmp_path / "p"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--policies", "hour_of_day_empirical"]) == 0
    m = _manifest(out)
    assert m["settings"]["env_kwargs"] == {} and m["settings"]["forecast_pool"] == list(PRICED_MODELS)
    assert m["args"]["pool"] == "protocol"


def test_extended_policies_need_the_extended_pool(tmp_path, capsys):
    for policy in ("ets", "catalog_oracle_extended"):
        assert main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--out", str(tmp_path / policy),
                     "--policies", policy]) == 2
        assert f"policies ['{policy}'] buy models of the extended forecast pool; run them with --pool extended" in \
            capsys.readouterr().err


def test_resume_refuses_another_pool(extended_run, capsys):
    assert main(["evaluate", "--resume", str(extended_run), "--pool", "protocol", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--pool: the run has \"extended\", this command gives \"protocol\"" in err
    assert main(["evaluate", "--resume", str(extended_run), "--no-progress"]) == 0  # complete: nothing to play


@pytest.mark.parametrize("pool", ["protocol", "extended"])
def test_default_policies_follow_the_pool(monkeypatch, tmp_path, pool):
    seen = {}

    def fake(suite, include_tsfm=True, pool="protocol"):
        seen.update(suite=suite, pool=pool)
        return ["hour_of_day_empirical"], {}

    monkeypatch.setattr(registry, "suite_policies", fake)
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(tmp_path / pool), "--pool", pool, "--suite", "context", "--no-tsfm"]) == 0
    assert seen == {"suite": "context", "pool": pool}
