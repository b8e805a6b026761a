"""``fwgym forecasts build|verify`` and ``fwgym evaluate --forecast-store``; the requests a store holds."""
import json

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from fwgym.core.cases import get_case
from fwgym.cli import main
from fwgym.cli.forecasts import store_requests
from fwgym.evaluation import evaluate
from fwgym.forecasters.cache import FORECAST_CACHE
from fwgym.forecasters.store import open_store

DAY, WEEK = get_case("elec-ISNE-2024-07-19-day_ahead"), get_case("elec-ISNE-2024-07-19-week_ahead")


def test_the_requests_are_the_covering_forecast_and_the_macro_replay(monkeypatch):
    got = [(r.case_id, *r.key) for r in store_requests([DAY, WEEK], "chronos2")]
    lv, wv = DAY.last_visible, WEEK.last_visible
    assert got == [(DAY.case_id, "ISNE", lv, 336, 50), (DAY.case_id, "ISNE", lv - 50, 286, 50),
                   (WEEK.case_id, "ISNE", wv, 336, 194), (WEEK.case_id, "ISNE", wv - 168, 168, 168)]
    day = store_requests([DAY], "chronos2")
    assert np.array_equal(day[0].context, DAY.history) and np.array_equal(day[1].context, DAY.history[:286])
    import fwgym.rl.macro as macro

    monkeypatch.setattr(macro, "REPLAY_MAX_HORIZON", 24)  # read from the menu's definition, not retyped
    assert [r.key for r in store_requests([WEEK], "ets")][1] == ("ISNE", wv - 24, 312, 24)
    assert [r.key for r in store_requests([DAY, WEEK], "ets", context_steps=96, horizon=64)] == [
        ("ISNE", lv, 96, 64), ("ISNE", wv, 96, 64)]
    assert [r.key for r in store_requests([WEEK], "ets", context_steps=96)] == [("ISNE", wv, 96, 194)]
    with pytest.raises(ValueError, match="context_steps"):
        store_requests([DAY], "ets", context_steps=400)
    with pytest.raises(ValueError, match="unknown models"):
        store_requests([DAY], "no_such_model")


def test_build_verify_and_evaluate_with_the_store(tmp_path, capsys):
    out = tmp_path / "store"
    rc = main(["forecasts", "build", "--model", "seasonal_empirical", "ets", "--split", "dev", "--limit", "2",
               "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0 and "seasonal_empirical: 8 requests, 8 distinct, 0 already stored, 8 stored, 0 failed" in text
    assert "ets: 8 requests" in text and f"store: {out}" in text
    doc = json.loads((out / "manifest.json").read_text())
    build = doc["models"]["ets"]["builds"][0]
    assert build["info"]["split"] == "dev" and build["info"]["cases"] == 4
    assert set(build["info"]["data_sha256"]) == {"eia930_demand.parquet", "tfl_cycle_hire.parquet"}
    assert main(["forecasts", "build", "--model", "ets", "--split", "dev", "--limit", "2", "--out", str(out),
                 "--no-progress"]) == 0
    assert "8 already stored, 0 stored" in capsys.readouterr().out
    assert main(["forecasts", "verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "seasonal_empirical: 8 forecasts in 2 shards" in text and "every shard matches" in text

    kw = dict(policies=["seasonal_empirical", "catalog_oracle"], split="dev", limit=2, progress=False)
    FORECAST_CACHE.clear()
    live = evaluate(**kw)
    store = open_store(out)
    FORECAST_CACHE.clear()
    stored = evaluate(env_kwargs={"forecast_store": str(out)}, **kw)
    from fwgym.evaluation.records import stable_record

    assert json.dumps([stable_record(r) for r in stored], sort_keys=True) == json.dumps(
        [stable_record(r) for r in live], sort_keys=True)
    assert store.counts()["seasonal_empirical"]["hits"] == 4 + sum(r["credits"] > 0 for r in stored
                                                                    if r["policy"] == "catalog_oracle")
    assert main(["evaluate", "--split", "dev", "--limit", "1", "--policies", "seasonal_empirical", "--no-progress",
                 "--forecast-store", str(out), "--out", str(tmp_path / "res")]) == 0
    assert main(["evaluate", "--split", "dev", "--limit", "1", "--policies", "seasonal_empirical", "--no-progress",
                 "--forecast-store", str(tmp_path / "nothing"), "--out", str(tmp_path / "res2")]) == 2
    assert "no manifest.json" in capsys.readouterr().err

    shard = out / doc["models"]["ets"]["shards"][0]["file"]
    shard.write_bytes(shard.read_bytes()[:-1] + b"\0")
    assert main(["forecasts", "verify", str(out)]) == 2
    assert str(shard) in capsys.readouterr().err


def test_a_model_without_weights_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FWGYM_CHRONOS2_PATH", str(tmp_path / "no-weights"))
    from fwgym.forecasters.registry import set_forecaster

    set_forecaster("chronos2", None)  # a fresh instance reads the variable
    try:
        assert main(["forecasts", "build", "--model", "chronos2", "--split", "dev", "--limit", "1", "--out",
                     str(tmp_path / "s"), "--no-progress"]) == 2
        assert "FWGYM_CHRONOS2_PATH" in capsys.readouterr().err and not (tmp_path / "s").exists()
    finally:
        set_forecaster("chronos2", None)
