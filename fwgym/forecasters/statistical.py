"""Statistical forecasters from statsmodels, priced like every other model (issue 20, DESIGN §6).

Four models, each a :class:`~fwgym.forecasters.base.QuantileForecaster` returning the 9 quantile levels
0.1..0.9 for ``horizon`` steps after the context, shape ``(horizon, 9)``:

======== ===================================================================================================
name     model (statsmodels >= 0.14)
======== ===================================================================================================
ets      ``ETSModel(error="add", trend=None, seasonal="add", seasonal_periods=24,
         initialization_method="heuristic")``: ETS(A,N,A), daily seasonality; exact Gaussian predictive
         distribution (``get_prediction(...).var_pred_mean``, Hyndman et al. 2008, class 1 models).
theta    ``ThetaModel(period=24)`` with the library's defaults (seasonality test, classical multiplicative
         decomposition when every value is positive, else additive; SES + drift, theta = 2):
         ``forecast`` and ``prediction_intervals`` at alpha = 0.2, 0.4, 0.6, 0.8 (Hyndman & Billah 2003).
sarima   ``SARIMAX(order=(2, 0, 0), seasonal_order=(0, 1, 0, 24), concentrate_scale=True)``: an AR(2) on the
         day-over-day differences (seasonal ARIMA(2,0,0)(0,1,0)_24), maximum likelihood with at most
         ``maxiter`` L-BFGS iterations; Gaussian predictive distribution of the state-space forecast.
mstl_ets ``MSTL(periods=(24, 168), stl_kwargs={"seasonal_deg": 0})`` (Bandara et al. 2021), then
         ``ETSModel(error="add")`` (ETS(A,N,N)) on the seasonally adjusted series (trend + remainder); each
         seasonal component is continued by repeating its last cycle (as ``STLForecast``), added to the
         ETS Gaussian quantiles. A period is kept when the context holds two full cycles of it (336 steps
         for the weekly one): statsmodels' MSTL drops a period >= half the series (R's ``mstl`` rule),
         which would drop the weekly period at the protocol's 336-step context; with two cycles per
         cycle-subseries the local-constant seasonal smoother (``seasonal_deg=0``) estimates each weekly
         phase as the mean of its two values.
======== ===================================================================================================

Common rules (:class:`StatsmodelsForecaster`):

* **Scaling.** The context (after the optional ``transform``) is divided by its mean absolute value
  before fitting and the quantiles are multiplied back: every model here is scale-equivariant, and
  the optimisers and the state-space diffuse initialisation behave the same for MW in the tens of
  thousands and for a few departures per hour.
* **Non-negativity.** The quantiles are clipped at 0: the quantile at level p of ``max(Y, 0)`` is
  ``max(q_p(Y), 0)``, so the result is exactly the model's predictive distribution censored at zero.
  Demand (MW) and departures are non-negative, and the optimizer clips negative values at 0 anyway
  (DESIGN §4), so plans are unchanged by it; the replay pinball loss can only improve.
* **Transform.** ``transform="log1p"`` fits the model to ``log(1 + y)`` and maps the quantiles back
  with ``expm1`` (quantiles commute with a monotone map, so they are exact quantiles of the
  back-transformed distribution). Default ``None``. The context must then be >= 0.
* **Constant contexts.** A constant context (after the transform) has zero residual variance under
  every one of these models: the forecast is that value at every step and level (no fit is run).
* **Short contexts.** ``min_context = 48`` (two daily cycles: the heuristic ETS initialisation, the
  seasonal difference and the seasonal decompositions need them); the tools refuse shorter requests
  free of charge.
* **Time bound.** A fit runs at most ``maxiter`` optimiser iterations, and is abandoned when it has
  run ``time_limit`` seconds (wall clock, checked after every optimiser iteration and between
  stages): the tools turn that, and any statsmodels failure, into a ``backend_error`` result (the
  charge stands). Convergence warnings are not failures (the estimate at the last iteration is used).
* **Determinism.** No random numbers are drawn (the predictive distributions are analytical): the
  same context gives bit-identical quantiles in every process with the same library versions
  (``revision`` names the statsmodels version).
* statsmodels is imported on first use; without it :meth:`availability` says how to install it and
  the tools refuse the model free of charge.

* **One BLAS thread.** Every fit runs with the BLAS libraries limited to one thread
  (``threadpoolctl``): the state-space filters multiply small matrices, where multithreaded
  OpenBLAS only adds synchronisation (measured on a busy 2-core machine: Theta 1,361 ms of CPU per
  forecast with 2 BLAS threads, 90 ms with one), and the result must not depend on the machine's
  core count. The tariff is measured in the same setting.

statsmodels' warnings (convergence, starting parameters) are silenced during a fit; the fits of
one process are serialised by a lock, because ``warnings.catch_warnings`` and the BLAS thread limit
are process-wide.
"""
from __future__ import annotations

import importlib.util
import math
import threading
import time
import warnings
from importlib import metadata
from statistics import NormalDist

import numpy as np

from fwgym.forecasters.base import Availability, ForecastBackendError, ModelUnavailable, QuantileForecaster
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.validation import check_int

__all__ = ["DAY", "WEEK", "INSTALL_HINT", "REQUIRED", "Z_LEVELS", "IMPLEMENTATION", "TRANSFORMS", "FitTimeout",
           "statsmodels_version", "gaussian_quantiles", "StatsmodelsForecaster", "ETS", "Theta", "SARIMA", "MSTLETS",
           "STATISTICAL_FORECASTERS"]

DAY, WEEK = 24, 168
INSTALL_HINT = "statsmodels or threadpoolctl is not installed: pip install 'statsmodels>=0.14' 'threadpoolctl>=3'"
REQUIRED = ("statsmodels", "threadpoolctl")
#: standard normal quantiles at the 9 levels (float64, (9,))
Z_LEVELS = np.array([NormalDist().inv_cdf(p) for p in QUANTILE_LEVELS])
#: implementation version of these forecasters (part of ``revision``)
IMPLEMENTATION = "v1"
TRANSFORMS = (None, "log1p")
_FIT_LOCK = threading.Lock()
_BLAS = None  # threadpoolctl.ThreadpoolController, created at the first fit (after statsmodels loaded BLAS)
#: largest log1p-space quantile mapped back (expm1(700) ~ 1e304 is finite)
_LOG_MAX = 700.0


class FitTimeout(RuntimeError):
    """A fit ran past its time bound (raised from inside the optimiser's callback)."""


class _Deadline:
    """Wall-clock bound of one forecast; ``check`` is passed to the optimisers as their callback."""

    def __init__(self, name: str, seconds: float):
        self.name, self.seconds = name, seconds
        self.end = time.monotonic() + seconds

    def check(self, *_args) -> None:
        if time.monotonic() > self.end:
            raise FitTimeout(f"{self.name}: the fit exceeded its time bound of {self.seconds:g} s")


def statsmodels_version() -> str | None:
    """Installed statsmodels version, or ``None`` (read from the distribution metadata, no import)."""
    try:
        return metadata.version("statsmodels")
    except metadata.PackageNotFoundError:
        return None


def gaussian_quantiles(mean, variance) -> np.ndarray:
    """Quantiles 0.1..0.9 of independent normal marginals.

    Args:
        mean: (horizon,) predictive means.
        variance: (horizon,) predictive variances (negative rounding noise is treated as 0).

    Returns:
        float64 (horizon, 9): ``mean + sqrt(variance) * z_p``, non-decreasing along the level axis.
    """
    m = np.asarray(mean, dtype=np.float64).reshape(-1)
    sd = np.sqrt(np.maximum(np.asarray(variance, dtype=np.float64).reshape(-1), 0.0))
    return m[:, None] + sd[:, None] * Z_LEVELS[None, :]


class StatsmodelsForecaster(QuantileForecaster):
    """Base class of the statsmodels forecasters (the common rules of the module docstring).

    Args:
        transform: ``None`` (default) or ``"log1p"``.
        time_limit: seconds a forecast may take before it fails with :class:`ForecastBackendError`.
        maxiter: optimiser iterations per fit.

    Subclasses implement :meth:`_quantiles` on the scaled context.

    Raises:
        ValueError: unknown transform, non-positive time limit or iteration count.
    """

    min_context = 2 * DAY
    bounded = False  # a statsmodels fit takes milliseconds to a fraction of a second: the tools' timeout applies
    store_audit = 0.05  # deterministic and cheap enough: 1 in 20 store hits (and the first) is recomputed
    fingerprint_packages = ("scipy", "statsmodels")  # the optimisers' and filters' versions (forecast store)
    default_maxiter = 100

    def __init__(self, transform: str | None = None, time_limit: float = 20.0, maxiter: int | None = None):
        if transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {list(TRANSFORMS)}, got {transform!r}")
        if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit) and time_limit > 0):
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        maxiter = check_int("maxiter", self.default_maxiter if maxiter is None else maxiter, minimum=1)
        self.transform, self.time_limit, self.maxiter = transform, float(time_limit), maxiter

    @property
    def revision(self) -> str:  # type: ignore[override]
        """``"<implementation>+statsmodels-<version>[+log1p]"``: what a cached or stored forecast depends on."""
        return f"{IMPLEMENTATION}+statsmodels-{statsmodels_version()}" + (f"+{self.transform}" if self.transform else "")

    def availability(self) -> Availability:
        if any(importlib.util.find_spec(m) is None for m in REQUIRED):
            return Availability(False, f"{self.name}: {INSTALL_HINT}")
        return Availability(True, source="statsmodels")

    def load(self) -> None:
        if any(importlib.util.find_spec(m) is None for m in REQUIRED):
            raise ModelUnavailable(f"{self.name}: {INSTALL_HINT}")

    def _predict(self, context: np.ndarray, horizon: int) -> np.ndarray:
        if self.transform == "log1p":
            if np.any(context < 0):
                raise ValueError(f"{self.name}: transform 'log1p' needs a non-negative context")
            x = np.log1p(context)
        else:
            x = context
        if np.ptp(x) == 0.0:  # zero residual variance under every model here
            q = np.full((horizon, len(QUANTILE_LEVELS)), x[0])
        else:
            s = float(np.mean(np.abs(x)))
            deadline = _Deadline(self.name, self.time_limit)
            try:
                with _FIT_LOCK, warnings.catch_warnings(), _one_blas_thread():
                    warnings.simplefilter("ignore")
                    q = np.asarray(self._quantiles(x / s, horizon, deadline), dtype=np.float64) * s
            except FitTimeout as exc:
                raise ForecastBackendError(str(exc)) from None
        if self.transform == "log1p":
            q = np.expm1(np.minimum(q, _LOG_MAX))
        return np.maximum(q, 0.0)

    def _quantiles(self, z: np.ndarray, horizon: int, deadline: _Deadline) -> np.ndarray:  # pragma: no cover - abstract
        """Quantiles (horizon, 9) of the model fitted to the scaled context ``z`` (mean |z| = 1)."""
        raise NotImplementedError


def _one_blas_thread():
    """Context manager limiting every loaded BLAS library to one thread (called under ``_FIT_LOCK``)."""
    global _BLAS
    if _BLAS is None:
        import statsmodels.tsa.statespace.sarimax  # noqa: F401  (loads scipy's BLAS before the controller looks)
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def _series(z: np.ndarray):
    import pandas as pd

    # ETSModel.get_prediction needs an indexed endog (statsmodels 0.15 reads ``.index`` of its mean)
    return pd.Series(z, index=pd.RangeIndex(len(z)))


def _ets_quantiles(results, n: int, horizon: int) -> np.ndarray:
    pred = results.get_prediction(start=n, end=n + horizon - 1)
    return gaussian_quantiles(np.asarray(pred.predicted_mean), np.asarray(pred.var_pred_mean))


class ETS(StatsmodelsForecaster):
    """``ets``: ETS(A,N,A) with daily seasonality (module docstring)."""

    name = "ets"
    default_maxiter = 200

    def _quantiles(self, z, horizon, deadline):
        from statsmodels.tsa.exponential_smoothing.ets import ETSModel

        model = ETSModel(_series(z), error="add", trend=None, seasonal="add", seasonal_periods=DAY,
                         initialization_method="heuristic")
        res = model.fit(disp=False, maxiter=self.maxiter, callback=deadline.check)
        deadline.check()
        return _ets_quantiles(res, len(z), horizon)


class Theta(StatsmodelsForecaster):
    """``theta``: the Theta method with daily seasonality (module docstring)."""

    name = "theta"

    def _quantiles(self, z, horizon, deadline):
        from statsmodels.tsa.forecasting.theta import ThetaModel

        res = ThetaModel(z, period=DAY).fit()
        deadline.check()
        mid = np.asarray(res.forecast(horizon), dtype=np.float64)
        out = np.empty((horizon, len(QUANTILE_LEVELS)))
        out[:, 4] = mid
        for k in range(4):  # levels (0.1, 0.9), (0.2, 0.8), (0.3, 0.7), (0.4, 0.6): central intervals of 1 - alpha
            pi = res.prediction_intervals(horizon, alpha=round(1 - (QUANTILE_LEVELS[8 - k] - QUANTILE_LEVELS[k]), 10))
            out[:, k], out[:, 8 - k] = np.asarray(pi["lower"]), np.asarray(pi["upper"])
            deadline.check()
        return out


class SARIMA(StatsmodelsForecaster):
    """``sarima``: seasonal ARIMA(2,0,0)(0,1,0)_24 by maximum likelihood (module docstring).

    Args:
        order, seasonal_order: SARIMAX orders (defaults (2, 0, 0) and (0, 1, 0, 24)); other arguments
            as :class:`StatsmodelsForecaster` (``maxiter`` default 50).
    """

    name = "sarima"
    default_maxiter = 50

    def __init__(self, order=(2, 0, 0), seasonal_order=(0, 1, 0, DAY), **kwargs):
        super().__init__(**kwargs)
        self.order, self.seasonal_order = tuple(order), tuple(seasonal_order)

    def _quantiles(self, z, horizon, deadline):
        from statsmodels.tsa.statespace.sarimax import SARIMAX

        model = SARIMAX(z, order=self.order, seasonal_order=self.seasonal_order, concentrate_scale=True)
        res = model.fit(disp=False, maxiter=self.maxiter, callback=deadline.check)
        deadline.check()
        fc = res.get_forecast(horizon)
        return gaussian_quantiles(fc.predicted_mean, fc.var_pred_mean)


def _mstl_class():
    from statsmodels.tsa.seasonal import MSTL

    class TwoCycleMSTL(MSTL):
        """statsmodels' MSTL keeping every period with two full cycles in the series (2 * period <= nobs)."""

        def _process_periods_and_windows(self, periods, windows):
            periods = self._process_periods(periods)
            windows = self._process_windows(windows, num_seasons=len(periods))
            pairs = sorted(zip(periods, windows))
            keep = [(p, w) for p, w in pairs if 2 * p <= self.nobs]
            return tuple(p for p, _ in keep), tuple(w for _, w in keep)

    return TwoCycleMSTL


_MSTL = None


class MSTLETS(StatsmodelsForecaster):
    """``mstl_ets``: MSTL (periods 24 and 168) + ETS(A,N,N) on the seasonally adjusted series (module docstring)."""

    name = "mstl_ets"
    periods = (DAY, WEEK)
    default_maxiter = 200

    def _quantiles(self, z, horizon, deadline):
        global _MSTL
        from statsmodels.tsa.exponential_smoothing.ets import ETSModel

        if _MSTL is None:
            _MSTL = _mstl_class()
        n = len(z)
        mstl = _MSTL(z, periods=self.periods, stl_kwargs={"seasonal_deg": 0})
        periods = tuple(p for p in self.periods if 2 * p <= n)
        if tuple(mstl.periods) != periods:  # guards the override against a change of statsmodels' internals
            raise ForecastBackendError(f"{self.name}: statsmodels' MSTL kept periods {tuple(mstl.periods)}, "
                                       f"expected {periods} for a context of {n} steps")
        dec = mstl.fit()
        deadline.check()
        seasonal = np.asarray(dec.seasonal, dtype=np.float64).reshape(n, -1)
        adjusted = z - seasonal.sum(axis=1)  # trend + remainder
        res = ETSModel(_series(adjusted), error="add", trend=None, seasonal=None).fit(
            disp=False, maxiter=self.maxiter, callback=deadline.check)
        deadline.check()
        steps = np.arange(horizon)
        future = np.zeros(horizon)
        for k, p in enumerate(periods):  # each component's last cycle, repeated
            future += seasonal[n - p + steps % p, k]
        return _ets_quantiles(res, n, horizon) + future[:, None]


#: the statsmodels forecasters by name, in menu order
STATISTICAL_FORECASTERS: dict[str, type[StatsmodelsForecaster]] = {
    "ets": ETS, "theta": Theta, "sarima": SARIMA, "mstl_ets": MSTLETS}
