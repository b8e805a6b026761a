"""A forecast store's values, not only its hashes (issue 25 item 4): a store whose forecasts are replaced by the
realised future and whose manifest is re-hashed passes the hash checks, but ``verify --recompute`` and the audit
of store hits refuse it; the run manifest pins the store's sha256 (no merge, no resume across stores); the
store's fingerprint covers the forecaster's code (an edited forecaster is refused, its stale rows never kept)."""
import hashlib
import json
import shutil
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from fwgym.cli import main  # noqa: E402
from fwgym.core.cases import get_case  # noqa: E402
from fwgym.cli.forecasts import store_requests  # noqa: E402
from fwgym.evaluation import evaluate  # noqa: E402
from fwgym.forecasters import SeasonalEmpirical  # noqa: E402
from fwgym.forecasters.registry import get_forecaster  # noqa: E402
from fwgym.forecasters.store import (ForecastRequest, ForecastStore, StoreAuditError, StoreMismatch,  # noqa: E402
                                     build_store, open_store)
from fwgym.forecasters.store.verify import context_from_data, recompute_rows  # noqa: E402

BUILD = ["forecasts", "build", "--model", "seasonal_empirical", "--split", "test", "--domain", "cycle_hire",
         "--limit", "3", "--no-progress"]
EVAL = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "3", "--no-progress", "--policies",
        "seasonal_empirical"]


def _rehash(root, model: str, rewrite) -> None:
    """Rewrite every shard of ``model`` with ``rewrite(series_id, origin, horizon, quantiles) -> quantiles`` and
    re-hash the manifest, as a forger would."""
    doc = json.loads((root / "manifest.json").read_text())
    for s in doc["models"][model]["shards"]:
        path = root / s["file"]
        batch = pa.ipc.open_file(pa.py_buffer(path.read_bytes())).get_batch(0)  # not mapped: the file is replaced
        h = s["horizon"]
        q = batch.column("quantiles").values.to_numpy(zero_copy_only=False).reshape(batch.num_rows, h, 9)
        new = np.stack([rewrite(sid, origin, h, q[i]) for i, (sid, origin) in
                        enumerate(zip(batch.column("series_id").to_pylist(), batch.column("origin").to_pylist()))])
        flat = pa.array(new.astype(q.dtype).reshape(-1), type=batch.column("quantiles").type.value_type)
        cols = [batch.column(i) for i in range(batch.num_columns - 1)]
        cols.append(pa.FixedSizeListArray.from_arrays(flat, h * 9))
        tmp = path.with_name(path.name + ".forged")
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(pa.record_batch(cols, schema=batch.schema))
        tmp.replace(path)  # as the builder does (a process that has the old file mapped keeps reading it)
        s["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        s["bytes"] = path.stat().st_size
    (root / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")


def _the_future(sid, origin, h, q):
    """Every quantile of every step replaced by the value that was realised at that step."""
    return np.repeat(context_from_data(sid, origin + h, h)[:, None], 9, axis=1)


def test_contexts_are_rebuilt_from_the_packaged_data_of_either_domain():
    for cid in ("cycle-101-2015-10-05-day_ahead", "elec-ISNE-2024-07-19-week_ahead"):
        case = get_case(cid)
        got = context_from_data(case.series_id, case.last_visible, 336)
        assert got.dtype == np.float64 and np.array_equal(got, case.history)
        start = case.series.start_hour
        assert context_from_data(case.series_id, start + 9, 10)[0] == case.series.window(start, 1)[0]
        assert context_from_data(case.series_id, start + 8, 10) is None  # starts before the series
        assert context_from_data(case.series_id, case.series.end_hour, 1) is None  # past its end
    assert context_from_data("no-such-series", 0, 1) is None


def test_a_store_of_the_realised_future_passes_the_hashes_but_not_recompute_nor_the_audit(tmp_path, capsys):
    out = tmp_path / "store"
    assert main([*BUILD, "--out", str(out)]) == 0
    assert main([*EVAL, "--forecast-store", str(out), "--out", str(tmp_path / "clean")]) == 0
    clean = [json.loads(x)["S"] for x in (tmp_path / "clean" / "results.jsonl").read_text().splitlines()]
    # copies (an env of this process keeps the store it was made with, memory-mapped: as a new process would,
    # the runs below open stores no env here has seen)
    forged, unaudited = tmp_path / "forged", tmp_path / "unaudited"
    for copy in (forged, unaudited):
        shutil.copytree(out, copy)
        _rehash(copy, "seasonal_empirical", _the_future)
    capsys.readouterr()
    assert main(["forecasts", "verify", str(forged)]) == 0  # the hashes say nothing about the values
    assert "every shard matches" in capsys.readouterr().out
    assert main(["forecasts", "verify", str(forged), "--recompute", "4", "--seed", "1"]) == 1
    captured = capsys.readouterr()
    assert "seasonal_empirical: 4 of 6 rows recomputed: 0 equal, 4 different" in captured.out
    assert "failed the recomputation" in captured.err
    # evaluation audits the first hit: the store is refused before a forecast of it is served
    assert main([*EVAL, "--forecast-store", str(forged), "--out", str(tmp_path / "tampered")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fwgym: error: forecast store ") and "differs from the one seasonal_empirical" in err[-1]
    # what the audit stops (issue 25: S 0.3342 -> 0.0075): without it the same store is served
    saved, SeasonalEmpirical.store_audit = SeasonalEmpirical.store_audit, 0.0
    try:
        served = evaluate(["seasonal_empirical"], split="test", domains=["cycle_hire"], limit=3, progress=False,
                          env_kwargs={"forecast_store": str(unaudited)})
    finally:
        SeasonalEmpirical.store_audit = saved
    assert len(served) == 3 and np.mean([r["S"] for r in served]) < 0.25 * np.mean(clean)


def test_recompute_passes_on_an_honest_store_and_names_rows_it_cannot_rebuild(tmp_path, capsys):
    out = tmp_path / "store"
    assert main([*BUILD, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["forecasts", "verify", str(out), "--recompute", "100"]) == 0
    text = capsys.readouterr().out
    assert "seasonal_empirical: 6 of 6 rows recomputed: 6 equal, 0 different" in text and "bit for bit" in text
    store = ForecastStore(out)
    got = recompute_rows(store, get_forecaster("seasonal_empirical"), 3, np.random.default_rng(0),
                         context_of=lambda sid, origin, steps: None)
    assert got["checked"] == 0 and len(got["unbuildable"]) == 3


def test_evaluation_audits_the_first_hit_of_a_model_and_a_fraction_of_the_rest(tmp_path):
    case = get_case("cycle-101-2015-10-05-day_ahead")
    f = get_forecaster("seasonal_empirical")
    build_store(tmp_path / "s", f, store_requests([case], "seasonal_empirical"))
    store = ForecastStore(tmp_path / "s")
    ctx = case.history[-336:]
    for _ in range(200):
        assert store.get(f, case.series_id, ctx, case.last_visible, case.horizon) is not None
    c = store.counts()["seasonal_empirical"]
    assert c["hits"] == 200 and 1 <= c["audited"] <= 40  # the first, then ~5 % (p < 1e-9 outside this range)
    assert SeasonalEmpirical.store_audit == 0.05 and get_forecaster("ets").store_audit == 0.05
    assert get_forecaster("chronos2").store_audit == 0.0  # too costly to recompute
    # one tampered row among honest ones is caught by the audit that draws it, and the store stays refused
    _rehash(tmp_path / "s", "seasonal_empirical", lambda sid, origin, h, q: q + 1.0)
    tampered = ForecastStore(tmp_path / "s")
    with pytest.raises(StoreAuditError, match="differs from the one seasonal_empirical computes now"):
        tampered.get(f, case.series_id, ctx, case.last_visible, case.horizon)
    with pytest.raises(StoreAuditError):
        tampered.get(f, case.series_id, ctx, case.last_visible, case.horizon)


def test_runs_with_different_stores_neither_merge_nor_resume(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*BUILD, "--out", str(a)]) == 0
    assert main([*BUILD, "--out", str(b), "--limit", "2"]) == 0
    assert main([*EVAL, "--forecast-store", str(a), "--out", str(tmp_path / "ra")]) == 0
    assert main([*EVAL[:-1], "weekday_empirical", "--forecast-store", str(b), "--out", str(tmp_path / "rb")]) == 0
    settings = json.loads((tmp_path / "ra" / "manifest.json").read_text())["settings"]
    assert settings["forecast_store"] == {"sha256": open_store(a).digest, "models": ["seasonal_empirical"]}
    capsys.readouterr()
    assert main(["leaderboard", str(tmp_path / "ra"), str(tmp_path / "rb")]) == 2
    assert "runs differ in forecast_store" in capsys.readouterr().err
    assert main(["evaluate", "--resume", str(tmp_path / "ra"), "--forecast-store", str(b), "--no-progress"]) == 2
    assert "forecast_store" in capsys.readouterr().err
    assert main(["evaluate", "--resume", str(tmp_path / "ra"), "--forecast-store", str(a), "--no-progress"]) == 0


_TOY = '''
import numpy as np
from fwgym.forecasters.base import QuantileForecaster


class EditedToy(QuantileForecaster):
    name = "edited_toy"
    min_context = 24
    bounded = True

    def _predict(self, context, horizon):
        return np.tile(np.quantile(context[-24:], np.linspace(0.1, 0.9, 9)), (horizon, 1)) * SCALE


SCALE = 1.0
'''


def test_the_fingerprint_covers_the_forecasters_code_and_an_edited_one_keeps_no_stale_rows(tmp_path, monkeypatch):
    (tmp_path / "fwgym_edited_toy.py").write_text(_TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fwgym_edited_toy

    case = get_case("cycle-101-2015-10-05-day_ahead")
    f = fwgym_edited_toy.EditedToy()
    assert set(f.fingerprint()["code"]) == {"fwgym.forecasters.base", "fwgym_edited_toy"}
    requests = [ForecastRequest(case.case_id, case.series_id, case.last_visible, case.history[-336:], case.horizon)]
    build_store(tmp_path / "s", f, requests)
    assert ForecastStore(tmp_path / "s").check(f)
    (tmp_path / "fwgym_edited_toy.py").write_text(_TOY.replace("SCALE = 1.0", "SCALE = 2.0"))  # edited in place
    with pytest.raises(StoreMismatch, match=r"code\.fwgym_edited_toy: store"):
        ForecastStore(tmp_path / "s").check(f)
    with pytest.raises(StoreMismatch, match="another forecaster"):  # rebuilding does not keep the stale rows
        build_store(tmp_path / "s", f, requests)
    sys.modules.pop("fwgym_edited_toy", None)
