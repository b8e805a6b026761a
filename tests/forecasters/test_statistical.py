"""The statsmodels forecasters (fwgym/forecasters/statistical.py): shapes, order, finiteness, the
censoring at zero, agreement with statsmodels' own predictive distributions, constant and short
contexts, the time bound, determinism across processes, and the tools' charge rule."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fwgym.core.cases import get_case
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.base import ForecastBackendError, ModelUnavailable
from fwgym.forecasters.registry import EXTENDED_MODELS, STATISTICAL_MODELS, get_forecaster
from fwgym.forecasters.statistical import ETS, MSTLETS, SARIMA, STATISTICAL_FORECASTERS, Z_LEVELS, Theta, gaussian_quantiles

CASES = ("elec-ISNE-2024-07-19-day_ahead", "elec-CISO-2024-02-11-week_ahead",
         "cycle-101-2015-10-05-day_ahead", "cycle-101-2015-10-13-week_ahead")
CLASSES = list(STATISTICAL_FORECASTERS.values())


@pytest.fixture(scope="module")
def cases():
    return {cid: get_case(cid) for cid in CASES}


def _ok(q: np.ndarray, horizon: int) -> None:
    assert q.shape == (horizon, 9) and q.dtype == np.float64
    assert np.all(np.isfinite(q))
    assert np.all(np.diff(q, axis=1) >= 0)  # monotone in the level
    assert np.all(q >= 0)  # censored at zero (demand and departures)


def test_names_and_pool():
    assert STATISTICAL_MODELS == ("ets", "theta", "sarima", "mstl_ets")
    assert EXTENDED_MODELS[:4] == ("seasonal_empirical", "chronos_bolt_tiny", "chronos2", "timesfm25")
    assert EXTENDED_MODELS[4:] == STATISTICAL_MODELS
    for name, cls in STATISTICAL_FORECASTERS.items():
        f = get_forecaster(name)
        assert type(f) is cls and f.name == name and f.min_context == 48 and not f.bounded
        assert f.availability().available
        assert f.revision.startswith("v1+statsmodels-0.") or f.revision.startswith("v1+statsmodels-1.")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("case_id", CASES)
def test_real_cases_covering_horizon_full_context(cls, case_id, cases):
    case = cases[case_id]
    q = cls().predict_quantiles(case.history, case.horizon)
    _ok(q, case.horizon)
    assert np.all(q[:, 8] > q[:, 0])  # a real spread: the noise of a real series is not zero
    lo, hi = case.target_steps
    target = case.target()
    # a sane centre: the target-window median forecast is within a factor 3 of the realised mean level
    assert target.mean() / 3 < q[lo - 1:hi, 4].mean() + 1.0 < 3 * target.mean() + 3.0


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("ctx, horizon", [(48, 24), (49, 1), (96, 64), (97, 336), (200, 194)])
def test_short_and_bucket_edge_contexts(cls, ctx, horizon, cases):
    for case_id in (CASES[0], CASES[2]):
        _ok(cls().predict_quantiles(cases[case_id].history[-ctx:], horizon), horizon)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_below_min_context_is_refused(cls, cases):
    with pytest.raises(ValueError, match="at least 48"):
        cls().predict_quantiles(cases[CASES[0]].history[-47:], 24)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("value", [0.0, 7.0, 31250.5])
def test_constant_context_is_a_degenerate_forecast(cls, value):
    q = cls().predict_quantiles(np.full(200, value), 50)
    assert q.shape == (50, 9) and np.all(q == value)
    q = cls(transform="log1p").predict_quantiles(np.full(100, value), 5)
    assert np.allclose(q, value, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_nearly_constant_and_gappy_contexts_do_not_crash(cls, cases):
    spike = np.zeros(96)
    spike[40] = 3.0  # one departure burst in four days of zeros
    try:
        _ok(cls().predict_quantiles(spike, 50), 50)
    except ForecastBackendError:
        pass  # allowed: a backend error (charged), never another exception
    gappy = cases[CASES[2]].history.astype(float).copy()
    gappy[100:110] = np.nan  # filled by the base class's interpolation
    _ok(cls().predict_quantiles(gappy, 50), 50)


def test_gaussian_quantiles_reference_values():
    # standard normal quantiles (scipy.stats.norm.ppf): 0.1 -> -1.2815515655446004, 0.3 -> -0.5244005127080407
    assert Z_LEVELS[0] == pytest.approx(-1.2815515655446004, abs=1e-15)
    assert Z_LEVELS[2] == pytest.approx(-0.5244005127080407, abs=1e-15)
    assert Z_LEVELS[4] == 0.0 and np.allclose(Z_LEVELS, -Z_LEVELS[::-1], atol=1e-15)
    q = gaussian_quantiles([10.0, 20.0], [4.0, -1e-18])
    assert np.allclose(q[0], 10.0 + 2.0 * Z_LEVELS) and np.all(q[1] == 20.0)


def _scaled(case):
    y = case.history.astype(np.float64)
    s = float(np.mean(np.abs(y)))
    return y / s, s


def test_ets_is_statsmodels_predictive_distribution(cases):
    import pandas as pd
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    case = cases[CASES[0]]
    z, s = _scaled(case)
    res = ETSModel(pd.Series(z), error="add", trend=None, seasonal="add", seasonal_periods=24,
                   initialization_method="heuristic").fit(disp=False, maxiter=200)
    pi = res.get_prediction(start=336, end=336 + 49).pred_int(alpha=0.2)  # the central 80 % interval
    q = ETS().predict_quantiles(case.history, 50)
    assert np.allclose(q[:, 0], np.maximum(np.asarray(pi)[:, 0] * s, 0), rtol=1e-9)
    assert np.allclose(q[:, 8], np.asarray(pi)[:, 1] * s, rtol=1e-9)


def test_sarima_is_statsmodels_predictive_distribution(cases):
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    case = cases[CASES[1]]
    z, s = _scaled(case)
    res = SARIMAX(z, order=(2, 0, 0), seasonal_order=(0, 1, 0, 24), concentrate_scale=True).fit(disp=False, maxiter=50)
    fc = res.get_forecast(194)
    ci = fc.conf_int(alpha=0.4)  # levels 0.2 and 0.8
    q = SARIMA().predict_quantiles(case.history, 194)
    assert np.allclose(q[:, 1], np.maximum(ci[:, 0] * s, 0), rtol=1e-9)
    assert np.allclose(q[:, 7], ci[:, 1] * s, rtol=1e-9)
    assert np.allclose(q[:, 4], fc.predicted_mean * s, rtol=1e-9)


def test_theta_is_statsmodels_prediction_intervals(cases):
    from statsmodels.tsa.forecasting.theta import ThetaModel

    case = cases[CASES[0]]
    z, s = _scaled(case)
    res = ThetaModel(z, period=24).fit()
    q = Theta().predict_quantiles(case.history, 50)
    for k, alpha in enumerate((0.2, 0.4, 0.6, 0.8)):
        pi = res.prediction_intervals(50, alpha=alpha)
        assert np.allclose(q[:, k], np.maximum(np.asarray(pi["lower"]) * s, 0), rtol=1e-9)
        assert np.allclose(q[:, 8 - k], np.asarray(pi["upper"]) * s, rtol=1e-9)
    assert np.allclose(q[:, 4], np.asarray(res.forecast(50)) * s, rtol=1e-9)


def test_mstl_keeps_the_weekly_period_with_two_cycles(cases):
    from statsmodels.tsa.seasonal import MSTL

    from fwgym.forecasters.statistical import _mstl_class

    z, _ = _scaled(cases[CASES[0]])
    two_cycle = _mstl_class()
    assert tuple(two_cycle(z, periods=(24, 168)).periods) == (24, 168)
    assert tuple(two_cycle(z[1:], periods=(24, 168)).periods) == (24,)  # 335 steps: one weekly cycle short
    with pytest.warns(UserWarning, match="larger than half"):
        assert tuple(MSTL(z, periods=(24, 168)).periods) == (24,)  # the library's own rule drops it
    # the weekly component enters the forecast
    q336 = MSTLETS().predict_quantiles(cases[CASES[0]].history, 194)
    daily = MSTLETS()
    daily.periods = (24,)  # the same model without the weekly component
    assert not np.allclose(q336, daily.predict_quantiles(cases[CASES[0]].history, 194))


def test_log1p_transform_maps_the_quantiles_exactly(cases):
    y = cases[CASES[2]].history.astype(np.float64)
    for cls in CLASSES:
        q = cls(transform="log1p").predict_quantiles(y, 50)
        _ok(q, 50)
        assert np.array_equal(q, np.maximum(np.expm1(cls().predict_quantiles(np.log1p(y), 50)), 0.0))
    with pytest.raises(ValueError, match="non-negative"):
        ETS(transform="log1p").predict_quantiles(np.r_[-1.0, y[1:]], 5)  # never silently a NaN


def test_constructor_arguments_are_checked():
    for bad in ({"transform": "log"}, {"time_limit": 0}, {"time_limit": float("inf")}, {"maxiter": 0},
                {"maxiter": 2.5}, {"maxiter": True}):
        with pytest.raises(ValueError):
            ETS(**bad)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_time_bound_is_a_backend_error(cls, cases):
    with pytest.raises(ForecastBackendError, match="time bound"):
        cls(time_limit=1e-9).predict_quantiles(cases[CASES[0]].history, 50)


def test_time_bound_in_the_env_is_a_charged_backend_error():
    env = FWBenchEnv("electricity", split="test", models=EXTENDED_MODELS, forecasters={"sarima": SARIMA(time_limit=1e-9)})
    env.reset(options={"case_id": CASES[0]})
    _, _, term, _, info = env.step({"tool": "forecast", "args": {"model": "sarima"}})
    res = info["tool_result"]
    assert not term and not res["ok"] and res["error"]["code"] == "backend_error"
    assert "time bound" in res["error"]["message"] and "charge stands" in res["error"]["message"]
    assert info["credits"] > 0 and info["calls"] == 1  # the charge stands (DESIGN §6)


def test_missing_statsmodels_is_refused_free(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "statsmodels" else real(name, *a))
    f = ETS()
    av = f.availability()
    assert not av.available and "pip install 'statsmodels>=0.14'" in av.reason
    with pytest.raises(ModelUnavailable):
        f.load()
    env = FWBenchEnv("electricity", split="test", models=EXTENDED_MODELS, forecasters={"ets": f})
    env.reset(options={"case_id": CASES[0]})
    _, _, _, _, info = env.step({"tool": "forecast", "args": {"model": "ets"}})
    assert info["tool_result"]["error"]["code"] == "model_unavailable" and info["credits"] == 0


_SCRIPT = """
import hashlib, json, sys
import numpy as np
from fwgym.core.cases import get_case
from fwgym.forecasters.registry import get_forecaster
out = {}
for cid in sys.argv[1:]:
    c = get_case(cid)
    for m in ("ets", "theta", "sarima", "mstl_ets"):
        out[cid + "/" + m] = hashlib.sha256(np.ascontiguousarray(get_forecaster(m).predict_quantiles(c.history, c.horizon)).tobytes()).hexdigest()
print(json.dumps(out))
"""


def test_deterministic_across_processes():
    ids = [CASES[1], CASES[2]]
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
        p = subprocess.run([sys.executable, "-c", _SCRIPT, *ids], capture_output=True, text=True, env=env, check=True)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1] and len(runs[0]) == 8
    here = {f"{cid}/{m}": hashlib.sha256(np.ascontiguousarray(get_forecaster(m).predict_quantiles(
        get_case(cid).history, get_case(cid).horizon)).tobytes()).hexdigest() for cid in ids for m in STATISTICAL_MODELS}
    assert here == runs[0]  # and equal to this process (bit for bit)
