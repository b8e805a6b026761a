"""Faulty forecast backends: errors come back as results, the charge rule holds, the episode continues."""
import json
import time

import numpy as np
import pytest

from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.base import ModelUnavailable, QuantileForecaster

CASE = "elec-ISNE-2024-07-19-day_ahead"


class Faulty(QuantileForecaster):
    name = "chronos_bolt_tiny"

    def __init__(self, mode):
        self.mode = mode

    def _predict(self, context, horizon):
        if self.mode == "raise":
            raise RuntimeError("GPU on fire")
        if self.mode == "nan":
            return np.full((horizon, 9), np.nan)
        if self.mode == "shape":
            return np.zeros((horizon, 3))
        if self.mode == "slow":
            time.sleep(2.0)
        return np.tile(np.linspace(1, 2, 9), (horizon, 1)) * context.mean()


class Unloadable(QuantileForecaster):
    name = "chronos_bolt_tiny"

    def load(self):
        raise ModelUnavailable("chronos_bolt_tiny: weights not found; set FWGYM_CHRONOS_BOLT_TINY_PATH")


@pytest.mark.parametrize("mode,needle", [("raise", "GPU on fire"), ("nan", "NaN"), ("shape", "shape"), ("slow", "within")])
def test_backend_fault_is_an_error_result_and_charge_stands(mode, needle):
    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty(mode)}, forecast_timeout=0.5)
    env.reset(options={"case_id": CASE})
    obs, r, term, _, info = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    res = json.loads(obs["last_result"])
    assert not term and res["error"]["code"] == "backend_error" and needle in res["error"]["message"]
    assert "charge stands" in res["error"]["message"]
    assert info["credits"] == 8452 and info["calls"] == 1
    _, _, term, _, info = env.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"] and info["credits"] == 8452


def test_working_fake_backend_for_contrast():
    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("ok")})
    env.reset(options={"case_id": CASE})
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    assert json.loads(obs["last_result"])["ok"]


def test_unavailable_model_is_refused_free():
    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Unloadable()})
    env.reset(options={"case_id": CASE})
    obs, _, _, _, info = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    err = json.loads(obs["last_result"])["error"]
    assert err["code"] == "model_unavailable" and "nothing was charged" in err["message"] and info["credits"] == 0


def test_replay_refuses_future_origin_free_and_scores_visible_steps_only():
    env = FWBenchEnv("electricity", split="test")
    env.reset(options={"case_id": CASE})
    case = env.episode.case
    from fwgym.core.series import hour_to_iso

    obs, _, _, _, info = env.step({"tool": "replay", "args": {"model": "seasonal_empirical", "origin": hour_to_iso(case.as_of)}})
    assert json.loads(obs["last_result"])["error"]["code"] == "out_of_range" and info["credits"] == 0
    origin = case.last_visible - 10
    obs, _, _, _, info = env.step({"tool": "replay", "args": {"model": "seasonal_empirical", "origin": hour_to_iso(origin),
                                                               "context_steps": 168, "horizon": 24}})
    res = json.loads(obs["last_result"])["result"]
    assert res["observed_steps"] == 10 and res["complete"] is False and info["credits"] == 400
    # by hand: seasonal quantiles at origin are the values one week before each step
    hist = np.asarray(case.history)
    i = len(hist) - 11  # index of origin
    ctx = hist[i - 167 : i + 1]
    actual = hist[i + 1 : i + 11]
    q = ctx[0:10]  # step j is in phase with context position j-1 (one value per phase: every level equals it)
    e = actual - q
    levels = np.arange(1, 10) / 10
    pin = np.mean(np.maximum(levels[None] * e[:, None], (levels[None] - 1) * e[:, None]))
    assert res["mean_pinball_loss"] == pytest.approx(pin)
    assert res["mean_pinball_loss_scaled"] == pytest.approx(pin / case.scale)


def test_forecast_after_a_timeout_or_an_interrupt_is_not_held_up_by_the_abandoned_one():
    import signal

    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("slow")}, forecast_timeout=0.3)
    env.reset(options={"case_id": CASE})
    env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})  # times out: its thread is abandoned

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    slow = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("slow")}, forecast_timeout=10.0)
    slow.reset(options={"case_id": CASE})
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):  # a user's Ctrl-C is not turned into a tool result
            slow.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 23}})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # charged, but the call was not counted nor its dense reward paid: the episode cannot go on
    assert slow.episode.spent == 8452 and slow.episode.calls == 0
    with pytest.raises(RuntimeError, match=r"reset.*interrupted \(KeyboardInterrupt\)"):
        slow.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    slow.reset(options={"case_id": CASE})
    *_, term, _, info = slow.step({"tool": "submit", "args": {"levels": [1.0] * 8}})
    assert term and info["valid"] and info["credits"] == 0
    ok = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("ok")}, forecast_timeout=1.0)
    ok.reset(options={"case_id": CASE})
    t = time.perf_counter()
    obs, *_ = ok.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 24}})
    assert json.loads(obs["last_result"])["ok"] and time.perf_counter() - t < 0.9  # not queued behind either


def test_forecast_in_a_process_forked_after_forecasts():
    import multiprocessing as mp

    ok = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("ok")}, forecast_timeout=5.0)
    ok.reset(options={"case_id": CASE})
    ok.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 25}})
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        code, took = pool.apply(_forecast_in_child)
    assert code == "ok" and took < 4.0  # answered, not waited out to the 5 s timeout


def _forecast_in_child():
    t = time.perf_counter()
    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("ok")}, forecast_timeout=5.0)
    env.reset(options={"case_id": CASE})
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 26}})
    res = json.loads(obs["last_result"])
    return ("ok" if res["ok"] else res["error"]["message"]), time.perf_counter() - t


def test_bounded_forecaster_runs_on_the_calling_thread():
    import threading

    seen = []

    class Bounded(Faulty):
        bounded = True

        def _predict(self, context, horizon):
            seen.append(threading.current_thread() is threading.main_thread())
            return super()._predict(context, horizon)

    class Unbounded(Bounded):
        bounded = False

    for cls, on_main in ((Bounded, True), (Unbounded, False)):
        env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": cls("ok")}, forecast_timeout=5.0)
        env.reset(options={"case_id": CASE})
        obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 27}})
        assert json.loads(obs["last_result"])["ok"] and seen[-1] is on_main
    from fwgym.forecasters.registry import PRICED_MODELS, get_forecaster

    assert [get_forecaster(m).bounded for m in PRICED_MODELS] == [True, False, False, False]  # only seasonal_empirical


def test_forecaster_that_reports_itself_unavailable_is_refused_free():
    from fwgym.forecasters.base import Availability

    class SaysNo(Faulty):
        def availability(self):
            return Availability(False, "licence expired")

    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": SaysNo("ok")})
    env.reset(options={"case_id": CASE})
    obs, _, _, _, info = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    err = json.loads(obs["last_result"])["error"]
    assert err["code"] == "model_unavailable" and "licence expired" in err["message"] and "nothing was charged" in err["message"]
    assert info["credits"] == 0 and info["calls"] == 1


@pytest.mark.parametrize("timeout", [float("inf"), 1e10, float("nan"), 0, -1, "5", True, np.bool_(True), np.float16(-1)])
def test_forecast_timeout_must_be_seconds_a_thread_can_wait(timeout):
    with pytest.raises(ValueError, match="forecast_timeout must be None"):
        FWBenchEnv("electricity", split="test", forecast_timeout=timeout)


@pytest.mark.parametrize("timeout", [np.float32(5), np.float16(5), np.int64(5), 5])
def test_forecast_timeout_of_any_real_type_works(timeout):
    env = FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Faulty("ok")}, forecast_timeout=timeout)
    assert type(env.forecast_timeout) is float and env.forecast_timeout == 5.0
    env.reset(options={"case_id": CASE})
    obs, *_ = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 28}})
    assert json.loads(obs["last_result"])["ok"]  # a NumPy float32 timeout made every threaded forecast fail
