"""The persisted forecast store (fwgym.forecasters.store): build, verify, serve identical forecasts, refuse."""
import hashlib
import json
import pickle
import shutil

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from fwgym.agents import run_episode
from fwgym.baselines.forecast import FixedForecastAgent
from fwgym.baselines.oracles import MenuOracle, oracle_grant, priced_candidate
from fwgym.core.cases import get_case
from fwgym.cli.forecasts import store_requests
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import select_cases
from fwgym.forecasters import ETS, SeasonalEmpirical
from fwgym.forecasters.base import ForecastBackendError
from fwgym.forecasters.cache import FORECAST_CACHE
from fwgym.forecasters.registry import get_forecaster
from fwgym.forecasters.store import (ForecastRequest, StoreError, StoreIntegrityError, StoreMismatch, build_store,
                                     open_store, use_store)
from fwgym.rl.macro import MacroActionWrapper, SequentialMacroWrapper

torch = pytest.importorskip("torch", reason="the tsfm extra (torch, chronos-forecasting) is not installed")
pytest.importorskip("chronos")

from tiny_models import build_bolt, build_chronos2, build_timesfm, tiny_timesfm_class  # noqa: E402

from fwgym.forecasters import Chronos2, ChronosBoltTiny, TimesFM25  # noqa: E402
from fwgym.evaluation.records import stable_record  # noqa: E402

POOL = ("seasonal_empirical", "chronos_bolt_tiny", "chronos2", "ets")
CASES = [cid for _, cid in select_cases("dev", limit=3)]  # 3 electricity + 3 cycle-hire cases, both leads


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {"bolt": build_bolt(root / "bolt"), "chronos2": build_chronos2(root / "c2")}


@pytest.fixture(scope="module")
def forecasters(tiny_dirs):
    return {"chronos_bolt_tiny": ChronosBoltTiny(local_dir=tiny_dirs["bolt"]),
            "chronos2": Chronos2(local_dir=tiny_dirs["chronos2"]), "ets": get_forecaster("ets"),
            "seasonal_empirical": get_forecaster("seasonal_empirical")}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, forecasters):
    root = tmp_path_factory.mktemp("store") / "s"
    cases = [get_case(c) for c in CASES]
    for m in POOL:
        rec = build_store(root, forecasters[m], store_requests(cases, m), batch_size=4)
        assert rec["stored"] == 2 * len(CASES) and rec["failed"] == 0
    return root


def _env(forecasters, store=None, **kw):
    return FWBenchEnv(("electricity", "cycle_hire"), split="dev", models=POOL, forecasters=forecasters,
                      forecast_store=store, **kw)


def _plain(x):
    if isinstance(x, np.ndarray):
        return {"array": x.dtype.str, "bytes": hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()}
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    raise TypeError(type(x))


def _trace(forecasters, store):
    """Records and full traces of scripted agents, the catalog oracle and both macro wrappers on CASES."""
    FORECAST_CACHE.clear()  # nothing computed before counts
    out = []
    env = _env(forecasters, store)
    agents = [FixedForecastAgent(m) for m in POOL] + [MenuOracle("catalog", models=POOL, forecasters=forecasters)]
    for cid in CASES:
        for agent in agents:
            res = run_episode(env, agent, options={"case_id": cid}, keep_actions=True, hindsight=oracle_grant(agent))
            out.append(json.dumps([stable_record(res.record), res.total_reward, res.actions], sort_keys=True,
                                  default=_plain))  # not the measured times and memory
    seq = SequentialMacroWrapper(_env(forecasters, store, text_observations=False, reward="dense"))
    single = MacroActionWrapper(_env(forecasters, store, text_observations=False, reward="dense"))
    names = [e.name for e in seq.menu]
    for cid in CASES:
        for m in POOL:
            obs, info = seq.reset(options={"case_id": cid})
            steps = [obs.tobytes().hex(), info["action_mask"].tolist()]
            for entry in (f"replay:{m}", f"buy:{m}", f"buy_plan_submit:{m}", "plan_submit:weekday_empirical"):
                if not seq.action_masks()[names.index(entry)]:
                    continue
                obs, r, term, trunc, info = seq.step(names.index(entry))
                steps.append([entry, obs.tobytes().hex(), r, term, trunc, info])
                if term:
                    break
            out.append(json.dumps(steps, sort_keys=True, default=_plain))
            single.reset(options={"case_id": cid})
            obs, r, term, trunc, info = single.step([e.name for e in single.menu].index(f"buy_plan_submit:{m}"))
            out.append(json.dumps([obs.tobytes().hex(), r, term, info], sort_keys=True, default=_plain))
    return out


def test_an_env_with_the_store_gives_the_traces_and_records_of_one_without(forecasters, store_dir):
    store = open_store(store_dir)
    live = _trace(forecasters, None)
    store.reset_counts()
    stored = _trace(forecasters, str(store_dir))
    assert stored == live
    counts = store.counts()
    assert set(counts) == set(POOL)
    for m in POOL:  # every priced request of the policies, the oracle and both menus was served by the store
        assert counts[m]["misses"] == 0 and counts[m]["hits"] > 0, counts
    assert store.hits == sum(c["hits"] for c in counts.values()) and store.misses == 0
    bought = sum('"tool": "forecast"' in t or '"tool": "replay"' in t for t in stored)
    assert bought > 0


def test_stored_rows_are_the_single_series_forecasts_bit_for_bit(forecasters, store_dir):
    store = open_store(store_dir)
    cases = [get_case(c) for c in CASES]
    for m in POOL:
        f = forecasters[m]
        for r in store_requests(cases, m)[: 3 if m == "ets" else None]:  # every row of the fast models
            got = store.get(f, r.series_id, r.context, r.origin, r.horizon)
            want = f.predict_quantiles(r.context, r.horizon)
            assert got is not None and got.dtype == np.float64 and not got.flags.writeable
            assert got.tobytes() == want.tobytes(), (m, r.case_id)
    shards = {m: [s["values"] for s in store.manifest["models"][m]["shards"]] for m in POOL}
    assert set(shards["chronos2"]) == {"float32"} and set(shards["chronos_bolt_tiny"]) == {"float32"}  # float32 outputs
    assert set(shards["ets"]) == {"float64"}


def test_batched_tsfm_forecasts_match_the_single_series_path(forecasters, tmp_path):
    tfm = TimesFM25(local_dir=build_timesfm(tmp_path / "tfm"), model_class=tiny_timesfm_class())
    cases = [get_case(c) for c in CASES]
    contexts = [c.history[-n:] for c in cases for n in (336, 168)]  # two lengths: separate backend calls
    for f, ctxs, horizons in ((forecasters["chronos_bolt_tiny"], contexts, (50, 194)),
                              (forecasters["chronos2"], contexts, (50, 194)), (tfm, contexts[:4], (50,))):
        for horizon in horizons:
            batch = f.predict_quantiles_batch(ctxs, horizon)
            assert len(batch) == len(ctxs)
            for ctx, q in zip(ctxs, batch):
                single = f.predict_quantiles(ctx, horizon)
                assert q.shape == (horizon, 9) and q.dtype == np.float64 and np.all(np.diff(q, axis=1) >= 0)
                # the documented tolerance of batched kernels: float32 rounding
                np.testing.assert_allclose(q, single, rtol=1e-5, atol=1e-6 * np.abs(single).max())
    assert forecasters["ets"].predict_quantiles_batch(contexts[:2], 50)[1].tobytes() == \
        forecasters["ets"].predict_quantiles(contexts[1], 50).tobytes()  # the default loop is the single path
    with pytest.raises(ValueError, match="context has 1 steps"):
        forecasters["chronos2"].predict_quantiles_batch([contexts[0], np.ones(1)], 50)


class OffByOneUlp(SeasonalEmpirical):
    """A batch-native forecaster whose batches differ from its single-series path by one ulp in one
    row: ``(batch_no, row)``; records the batch sizes it was called with."""

    fingerprint_exclude = ("where", "calls", "batches")  # test bookkeeping, not settings of the forecast

    def __init__(self, where):
        self.where, self.calls, self.batches = where, 0, []

    def predict_quantiles_batch(self, contexts, horizon):
        out = [self.predict_quantiles(c, horizon).copy() for c in contexts]
        b, row = self.where
        if self.calls == b:
            out[row][0, 0] = np.nextafter(out[row][0, 0], np.inf)
        self.calls += 1
        self.batches.append(len(contexts))
        return out


@pytest.mark.parametrize("where", [(0, 2), (1, 1)])  # in the fully checked first batch; in a sampled later row
def test_a_batch_that_changes_a_bit_is_recomputed_one_series_at_a_time(tmp_path, where):
    cases = [get_case(c) for c in CASES]
    reqs = [ForecastRequest(c.case_id, c.series_id, c.last_visible, c.history[-336:], 50) for c in cases]
    f = OffByOneUlp(where)
    f.name = "seasonal_empirical"
    rec = build_store(tmp_path, f, reqs, batch_size=3)
    (g,) = rec["groups"]
    assert g["batch_mismatch"] == pytest.approx(np.spacing(1.0) / 2, rel=1) and g["mode"] == "single"
    assert g["batched_rows"] == 0 and g["single_rows"] >= len(reqs) and g["rows"] == len(reqs)
    store = open_store(tmp_path)
    ref = SeasonalEmpirical()
    for r in reqs:
        assert store.get(f, r.series_id, r.context, r.origin, 50).tobytes() == ref.predict_quantiles(r.context, 50).tobytes()


def test_batches_that_match_are_stored_batched_and_checked(tmp_path):
    cases = [get_case(c) for c in CASES]
    reqs = [ForecastRequest(c.case_id, c.series_id, c.last_visible, c.history[-336:], 50) for c in cases]
    f = OffByOneUlp((99, 0))
    f.name = "seasonal_empirical"
    rec = build_store(tmp_path / "a", f, reqs, batch_size=4)
    (g,) = rec["groups"]
    assert g["mode"] == "batched" and g["batched_rows"] == 6 and g["checked_rows"] == 4 + 1 and f.batches == [4, 2]
    rec = build_store(tmp_path / "b", OffByOneUlp((99, 0)), reqs, batch_size=4, check="all")
    assert rec["groups"][0]["checked_rows"] == 6


class FailsOnConstant(SeasonalEmpirical):
    def _predict(self, context, horizon):
        if np.ptp(context) == 0:
            raise ForecastBackendError("constant context")
        return super()._predict(context, horizon)


def test_failed_forecasts_are_not_stored_and_are_counted(tmp_path):
    c = get_case(CASES[0])
    reqs = [ForecastRequest(c.case_id, c.series_id, c.last_visible, c.history[-336:], 50),
            ForecastRequest("x", "flat", 1000, np.full(336, 5.0), 50)]
    rec = build_store(tmp_path, FailsOnConstant(), reqs)
    assert rec["stored"] == 1 and rec["failed"] == 1 and "constant context" in rec["failures"][0]
    assert open_store(tmp_path).keys("seasonal_empirical") == {(c.series_id, c.last_visible, 336, 50)}


def test_a_missing_or_stale_entry_falls_back_to_live_inference_and_is_counted(forecasters, store_dir, tmp_path):
    part = tmp_path / "part"
    cases = [get_case(c) for c in CASES]
    build_store(part, forecasters["ets"], store_requests(cases[:1], "ets"))
    store = open_store(part)
    FORECAST_CACHE.clear()
    env = _env(forecasters, part)
    agent = FixedForecastAgent("ets")
    got = [run_episode(env, agent, options={"case_id": c}, hindsight=oracle_grant(agent)).record for c in CASES[:2]]
    FORECAST_CACHE.clear()
    want = [run_episode(_env(forecasters), agent, options={"case_id": c}, hindsight=oracle_grant(agent)).record for c in CASES[:2]]
    assert [stable_record(r) for r in got] == [stable_record(r) for r in want]
    assert store.counts()["ets"] == {"rows": 2, "hits": 1, "misses": 1, "stale": 0, "refused": 0,
                                     "audited": 1, "audit_errors": 0}  # its first hit was recomputed: equal
    c = cases[0]
    changed = c.history.copy()
    changed[0] += 1.0  # same key (series, origin, context steps, horizon), other values
    assert store.get(forecasters["ets"], c.series_id, changed, c.last_visible, c.horizon) is None
    assert store.counts()["ets"]["stale"] == 1 and store.counts()["ets"]["misses"] == 2
    assert store.get(SeasonalEmpirical(), c.series_id, c.history, c.last_visible, c.horizon) is None  # not stored


def test_a_tampered_shard_is_refused_naming_the_file(forecasters, store_dir, tmp_path):
    copy = tmp_path / "tampered"
    shutil.copytree(store_dir, copy)
    shard = copy / open_store(copy).manifest["models"]["chronos2"]["shards"][0]["file"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(StoreIntegrityError, match=str(shard)):
        _env(forecasters, copy)
    with pytest.raises(StoreIntegrityError, match="changed after the store was built"):
        open_store(copy).verify()
    _env({k: v for k, v in forecasters.items() if k != "chronos2"}, copy, )  # only what an env uses is checked
    env = FWBenchEnv("electricity", split="dev", models=("ets",), forecast_store=copy)
    assert "chronos2" not in env.forecast_store.counts()


def test_a_store_of_another_revision_or_other_weights_is_refused(forecasters, store_dir, tiny_dirs, tmp_path,
                                                                  monkeypatch):
    other = tmp_path / "bolt-copy"
    shutil.copytree(tiny_dirs["bolt"], other)
    cfg = other / "config.json"
    cfg.write_text(json.dumps(json.loads(cfg.read_text()), indent=4))  # same model, other bytes: other weights id
    with pytest.raises(StoreMismatch, match="weights: store .*sha256"):
        _env({**forecasters, "chronos_bolt_tiny": ChronosBoltTiny(local_dir=other)}, store_dir)
    with pytest.raises(StoreMismatch, match="settings.maxiter"):
        _env({**forecasters, "ets": ETS(maxiter=7)}, store_dir)
    import fwgym.forecasters.statistical as statistical

    monkeypatch.setattr(statistical, "statsmodels_version", lambda: "0.0.0")
    with pytest.raises(StoreMismatch, match=r"revision: store \"v1\+statsmodels-.*here \"v1\+statsmodels-0.0.0\""):
        _env({**forecasters, "ets": ETS()}, store_dir)
    with pytest.raises(StoreMismatch, match="another forecaster"):  # building into it is refused too
        build_store(store_dir, ETS(), store_requests([get_case(CASES[0])], "ets"))


def test_process_wide_store_serves_oracles_and_refuses_a_mismatch(forecasters, store_dir):
    case = get_case(CASES[1])
    store = open_store(store_dir)
    try:
        assert use_store(store_dir) is store
        FORECAST_CACHE.clear()
        before = store.counts()["ets"]["hits"]
        _credits, plan = priced_candidate(case, "ets", forecasters["ets"])
        assert store.counts()["ets"]["hits"] == before + 1
        FORECAST_CACHE.clear()
        use_store(None)
        assert priced_candidate(case, "ets", forecasters["ets"])[1].plan.indices.tolist() == plan.plan.indices.tolist()
        use_store(store_dir)
        with pytest.raises(StoreMismatch):  # an env verifies its forecasters against the process-wide store
            FWBenchEnv("electricity", split="dev", models=("ets",), forecasters={"ets": ETS(maxiter=7)})
        other = ETS(maxiter=7)  # first seen by a lookup (an oracle's own instance): served live, with a warning
        with pytest.warns(RuntimeWarning, match="settings.maxiter.*computed live"):
            got = priced_candidate(case, "ets", other)
        assert store.counts()["ets"]["refused"] == 1
        use_store(None)
        assert got is not None and got[1].expected_loss == priced_candidate(case, "ets", ETS(maxiter=7))[1].expected_loss
        use_store(store_dir)
        with pytest.raises(StoreMismatch):
            store.check(other)  # the explicit check still raises
    finally:
        use_store(None)


def test_builds_add_rows_skip_stored_keys_and_overwrite_on_request(tmp_path):
    cases = [get_case(c) for c in CASES]
    f = get_forecaster("seasonal_empirical")
    first = build_store(tmp_path, f, store_requests(cases[:2], "seasonal_empirical"))
    again = build_store(tmp_path, f, store_requests(cases, "seasonal_empirical") * 2)
    assert first["stored"] == 4 and again["requests"] == 24 and again["distinct"] == 12
    assert again["skipped_existing"] == 4 and again["stored"] == 8
    doc = json.loads((tmp_path / "manifest.json").read_text())
    entry = doc["models"]["seasonal_empirical"]
    assert len(entry["builds"]) == 2 and sum(s["rows"] for s in entry["shards"]) == 12
    assert doc["format"] == "fwgym-forecast-store" and doc["fwgym_version"] and entry["revision"] == "v1"
    for s in entry["shards"]:
        assert hashlib.sha256((tmp_path / s["file"]).read_bytes()).hexdigest() == s["sha256"]
    assert entry["fingerprint"]["settings"] == {} and entry["fingerprint"]["packages"]["numpy"] == np.__version__
    ets = tmp_path / "e"
    build_store(ets, ETS(), store_requests(cases[:1], "ets"))
    rec = build_store(ets, ETS(maxiter=7), store_requests(cases[:1], "ets"), overwrite=True)
    assert rec["stored"] == 2
    entry = json.loads((ets / "manifest.json").read_text())["models"]["ets"]
    assert entry["fingerprint"]["settings"]["maxiter"] == 7 and len(list((ets / "ets").glob("*.arrow"))) == 2


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_workers_and_ray_build_the_same_shards(tmp_path, backend):
    if backend == "ray":
        pytest.importorskip("ray")
    cases = [get_case(c) for c in CASES]
    reqs = store_requests(cases, "seasonal_empirical")
    build_store(tmp_path / "one", SeasonalEmpirical(), reqs, batch_size=2)
    build_store(tmp_path / "many", SeasonalEmpirical(), reqs, batch_size=2, workers=2, backend=backend)
    shards = [[(s["file"], s["sha256"]) for s in json.loads((tmp_path / d / "manifest.json").read_text())
               ["models"]["seasonal_empirical"]["shards"]] for d in ("one", "many")]
    assert shards[0] == shards[1] and len(shards[0]) == 4


def test_a_tsfm_forecaster_pickles_without_its_model(forecasters):
    f = forecasters["chronos2"]
    ctx = get_case(CASES[0]).history
    q = f.predict_quantiles(ctx, 50)
    g = pickle.loads(pickle.dumps(f))
    assert g._model is None and g.fingerprint() == f.fingerprint()
    assert g.predict_quantiles(ctx, 50).tobytes() == q.tobytes()


def test_bad_stores_and_arguments_are_refused(tmp_path, store_dir):
    with pytest.raises(StoreError, match="no manifest.json"):
        open_store(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(store_dir, bad)
    doc = json.loads((bad / "manifest.json").read_text())
    doc["format_version"] = 99
    (bad / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="format_version 99"):
        open_store(bad)
    doc["format_version"] = 1
    doc["models"]["ets"]["shards"][0]["file"] = "../../etc/passwd"
    (bad / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="not inside the model's folder"):
        open_store(bad)
    doc = json.loads((store_dir / "manifest.json").read_text())
    doc["models"]["ets"]["fingerprint"]["settings"]["maxiter"] = 7  # edited to pass for another forecaster
    (bad / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="fingerprint_sha256 does not match"):
        open_store(bad)
    with pytest.raises(StoreError, match="batch_size"):
        build_store(tmp_path / "x", SeasonalEmpirical(), [], batch_size=0)
    with pytest.raises(StoreError, match="directory path"):
        FWBenchEnv("electricity", split="dev", forecast_store=3)
