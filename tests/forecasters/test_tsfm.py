"""TSFM adapters with tiny random models built from config and loaded like real weights."""
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="the tsfm extra (torch, chronos-forecasting, timesfm) is not installed")
pytest.importorskip("chronos")
pytest.importorskip("timesfm")

from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters import Chronos2, ChronosBoltTiny, ModelUnavailable, TimesFM25
from fwgym.forecasters.cache import FORECAST_CACHE

from tiny_models import build_bolt, build_chronos2, build_timesfm, plant_in_hf_cache, tiny_timesfm_class


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {"bolt": build_bolt(root / "bolt"), "chronos2": build_chronos2(root / "c2"), "timesfm": build_timesfm(root / "tfm")}


@pytest.fixture(scope="module")
def forecasters(tiny_dirs):
    return {
        "chronos_bolt_tiny": ChronosBoltTiny(local_dir=tiny_dirs["bolt"]),
        "chronos2": Chronos2(local_dir=tiny_dirs["chronos2"]),
        "timesfm25": TimesFM25(local_dir=tiny_dirs["timesfm"], model_class=tiny_timesfm_class()),
    }


def _context(n):
    t = np.arange(n)
    return 1000 + 200 * np.sin(2 * np.pi * t / 24) + 5 * t / n


@pytest.mark.parametrize("name", ["chronos_bolt_tiny", "chronos2", "timesfm25"])
@pytest.mark.parametrize("ctx", [96, 336])
@pytest.mark.parametrize("horizon", [50, 194])
def test_shape_order_finiteness(forecasters, name, ctx, horizon):
    q = forecasters[name].predict_quantiles(_context(ctx), horizon)
    assert q.shape == (horizon, 9) and q.dtype == np.float64
    assert np.all(np.isfinite(q)) and np.all(np.diff(q, axis=1) >= 0)


@pytest.mark.parametrize("name", ["chronos_bolt_tiny", "chronos2", "timesfm25"])
def test_nan_and_constant_context_give_finite_output(forecasters, name):
    x = _context(336)
    x[10:20] = np.nan
    assert np.all(np.isfinite(forecasters[name].predict_quantiles(x, 50)))
    assert np.all(np.isfinite(forecasters[name].predict_quantiles(np.full(336, 7.0), 50)))


def test_deterministic(forecasters):
    f = forecasters["chronos2"]
    np.testing.assert_array_equal(f.predict_quantiles(_context(336), 50), f.predict_quantiles(_context(336), 50))


def test_hf_cache_path_with_real_repo_ids(tiny_dirs, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    plant_in_hf_cache(tiny_dirs["bolt"], hub, "amazon/chronos-bolt-tiny")
    plant_in_hf_cache(tiny_dirs["chronos2"], hub, "amazon/chronos-2")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(hub))
    for cls in (ChronosBoltTiny, Chronos2):
        f = cls()
        av = f.availability()
        assert av.available and av.source == "hf-cache", av
        assert f.predict_quantiles(_context(200), 50).shape == (50, 9)


def test_env_var_local_dir(tiny_dirs, monkeypatch):
    monkeypatch.setenv("FWGYM_CHRONOS2_PATH", str(tiny_dirs["chronos2"]))
    assert Chronos2().availability().source == str(tiny_dirs["chronos2"])


def test_missing_weights_are_reported_with_how_to(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    f = Chronos2(local_dir=tmp_path / "nothing")
    av = f.availability()
    assert not av.available and "FWGYM_CHRONOS2_PATH" in av.reason
    with pytest.raises(ModelUnavailable, match="chronos2"):
        f.load()


def test_env_buys_real_tsfm_forecasts_and_plans(forecasters):
    FORECAST_CACHE.clear()
    env = FWBenchEnv("electricity", split="test", forecasters=forecasters)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    obs, r, term, _, info = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    res = json.loads(obs["last_result"])["result"]
    assert res["credits"] == 8452 and info["credits"] == 8452 and len(res["quantiles"]) == 50
    obs, *_ = env.step({"tool": "plan", "args": {"forecast_id": res["forecast_id"]}})
    plan = json.loads(obs["last_result"])["result"]["plan"]
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos2"}})
    assert json.loads(obs["last_result"])["ok"] and env.episode.spent == 8452 + 103806
    obs, r, term, _, info = env.step({"tool": "submit", "args": {"decisions": plan["decisions"]}})
    assert term and info["valid"] and info["credits"] == 112258
    assert info["S"] == pytest.approx(0.5 * (info["R"] + 112258 / 113726))


def test_week_ahead_chronos2_twice_second_refused_free(forecasters):
    env = FWBenchEnv("electricity", split="test", forecasters=forecasters)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-week_ahead"})
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos2"}})
    assert json.loads(obs["last_result"])["result"]["credits"] == 113726
    obs, _, _, _, info = env.step({"tool": "forecast", "args": {"model": "chronos2"}})
    err = json.loads(obs["last_result"])["error"]
    assert err["code"] == "insufficient_budget" and info["credits"] == 113726 and info["budget_left"] == 0


def test_unreachable_hub_is_reported_at_once_and_a_reachable_one_is_tried(monkeypatch):
    import socket
    import time

    import huggingface_hub.constants as c

    from fwgym.forecasters import tsfm

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the connection is refused at once
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for v in tsfm._PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(c, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(tsfm, "_HUB_PROBES", {})
    t = time.perf_counter()
    av = Chronos2(model_id="fwgym-tests/not-in-any-cache").availability()
    assert not av.available and f"127.0.0.1:{port} is unreachable" in av.reason and "FWGYM_CHRONOS2_PATH" in av.reason
    with pytest.raises(ModelUnavailable, match="unreachable"):
        Chronos2(model_id="fwgym-tests/not-in-any-cache").load()
    assert time.perf_counter() - t < 2.0  # no download retries
    with socket.socket() as server:  # a host that answers: the download would be attempted
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(c, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert Chronos2(model_id="fwgym-tests/not-in-any-cache").availability().source == "hub"
    monkeypatch.setattr(c, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(tsfm, "_HUB_PROBES", {})
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # a proxy: nothing is probed, the download reports
    assert tsfm.hub_unreachable() is None and tsfm._HUB_PROBES == {}


def test_hub_probe_is_bounded_made_once_and_names_a_bad_endpoint(monkeypatch):
    import threading
    import time

    from fwgym.forecasters import tsfm

    for v in tsfm._PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(tsfm, "_HUB_PROBES", {})
    calls = []

    def slow_lookup(address, timeout=None):  # a name lookup that hangs (its own timeout does not cover it)
        calls.append(address)
        time.sleep(2.0)
        raise OSError("too late")

    monkeypatch.setattr(tsfm.socket, "create_connection", slow_lookup)
    answers = []
    t = time.perf_counter()
    threads = [threading.Thread(target=lambda: answers.append(tsfm.hub_unreachable("https://hub.invalid", timeout=0.3)))
               for _ in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert time.perf_counter() - t < 1.5 and len(calls) == 1  # one probe, the others waited for its answer
    assert answers == ["hub.invalid:443 did not answer within 0.3 s"] * 5
    assert "is not an http(s) URL with a host" in tsfm.hub_unreachable("huggingface.co")
    assert "is not a valid URL" in tsfm.hub_unreachable("http://[::1")


def test_hub_probe_answers_for_a_host_the_name_encoder_refuses(monkeypatch):
    from fwgym.forecasters import tsfm

    for v in tsfm._PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(tsfm, "_HUB_PROBES", {})
    answer = tsfm.hub_unreachable("https://" + "a" * 70 + ".com", timeout=2.0)
    assert "is unreachable (UnicodeError" in answer  # not "did not answer within 2 s"
