"""Priced tools: ``quote`` (free), ``forecast`` and ``replay`` (charged at the tariff), and the
purchase rule they share (DESIGN §6):

1. a malformed request is refused free (``invalid_arguments`` / ``out_of_range``);
2. an unaffordable one is refused free (``insufficient_budget``), then one whose forecaster reports
   itself unavailable or cannot load (``model_unavailable``): :func:`buy`;
3. a request that passed these checks is charged BEFORE inference, and the charge stands if the backend
   then fails or times out (``backend_error``): :func:`infer`, which runs the forecast through the
   episode's forecast store and the process-wide cache (:func:`fwgym.forecasters.cache.cached_quantiles`) and, for a forecaster that
   is not ``bounded``, on a daemon thread abandoned after the episode's ``forecast_timeout`` seconds (a plug-in:
   in its worker process, killed at its deadline, :mod:`fwgym.forecasters.hosted`).
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from fwgym.core.cases import HISTORY_HOURS
from fwgym.core.contract import safe_repr
from fwgym.errors import DataIntegrityError, ToolError
from fwgym.forecasters.base import ForecastBackendError, ModelUnavailable, QuantileForecaster
from fwgym.forecasters.cache import cached_quantiles
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.core.series import hour_to_iso
from fwgym.core.tariff import HORIZON_BUCKETS, price
from fwgym.tools.actions import check_keys, int_arg, time_arg
from fwgym.tools.episode import Episode
from fwgym.validation import check_int

__all__ = ["quote", "forecast", "replay", "buy", "infer", "rounded_lists"]


def _model_arg(ep: Episode, args: dict) -> str:
    m = args.get("model")
    if not isinstance(m, str) or m not in ep.models:
        raise ToolError("invalid_arguments", f"'model' must be one of the forecast pool {list(ep.models)}, got {safe_repr(m, 60)}")
    return m


def _request(ep: Episode, args: dict, max_context: int, tool: str) -> tuple[str, int, int, dict]:
    """Validate (model, context_steps, horizon) and price it; raises ToolError (free refusal)."""
    model = _model_arg(ep, args)
    f = ep.forecaster(model)
    ctx = int_arg(args, "context_steps", 1, 10**9, default=max_context)
    horizon = int_arg(args, "horizon", 1, 10**9, default=ep.case.horizon)
    if max_context < f.min_context:
        raise ToolError("out_of_range", f"{tool}: only {max_context} visible hours precede this origin; {model} needs a context of >= {f.min_context}; nothing was charged")
    if ctx < f.min_context or ctx > max_context:
        raise ToolError("invalid_arguments", f"{tool}: context_steps for {model} must be in {f.min_context}..{max_context}, got {ctx}")
    if horizon > HORIZON_BUCKETS[-1]:
        raise ToolError("invalid_arguments", f"{tool}: horizon must be in 1..{HORIZON_BUCKETS[-1]}, got {horizon}")
    try:
        q = price(model, ctx, horizon)
    except ValueError as exc:
        raise ToolError("invalid_arguments", f"{tool}: {exc}") from None
    q["affordable"] = q["credits"] <= ep.budget_left
    return model, ctx, horizon, q


def quote(ep: Episode, args: dict) -> dict:
    """``quote``: the price of a request and whether it is affordable and available (free)."""
    check_keys(args, {"model", "context_steps", "horizon"}, "quote")
    model, ctx, horizon, q = _request(ep, args, HISTORY_HOURS, "quote")
    av = ep.forecaster(model).availability()
    return {**q, "available": av.available, **({"unavailable_reason": av.reason} if not av.available else {}),
            "budget_remaining": ep.budget_left}


def buy(ep: Episode, model: str, quote: dict, tool: str) -> QuantileForecaster:
    """Free checks (affordability, availability, loading), then charge before inference; returns the
    loaded forecaster. Raises ToolError (``insufficient_budget`` / ``model_unavailable``, nothing charged)."""
    if not quote["affordable"]:
        raise ToolError("insufficient_budget", f"{tool}: {model} at context {quote['context_steps']} / horizon "
                        f"{quote['horizon']} costs {quote['credits']} credits but only {ep.budget_left} remain; nothing was charged")
    f = ep.forecaster(model)
    av = f.availability()  # what quote and catalog report; a forecaster that says unavailable is never charged
    if not av.available:
        reason = av.reason or f"{tool}: {model} reports itself unavailable"
        raise ToolError("model_unavailable", f"{reason} (nothing was charged)")
    try:
        f.load()
    except ModelUnavailable as exc:
        raise ToolError("model_unavailable", f"{exc} (nothing was charged)") from None
    ep.charge(quote["credits"])
    return f


def rounded_lists(a: np.ndarray, digits: int) -> list:
    """``a`` as nested lists of Python floats, each value exactly ``round(float(v), digits)``
    (Python's correctly rounded decimal rounding, ties to even), in a few vectorised NumPy calls.

    ``numpy.rint(a * 10**digits) / 10**digits`` gives the same value except where the scaled value
    lies within a few ulps of a half-integer (the product's rounding may flip the decision), is too
    large for fractional digits, or overflows; those few values are rounded by Python.

    Args:
        a: real-valued array of any shape (bool, integer or float; converted to float64; NaN and
            +-inf stay as they are).
        digits: decimal digits, 0..15.

    Returns:
        ``a.tolist()`` with every value rounded (a float for a 0-d array).

    Raises:
        ValueError: ``digits`` is not an integer in 0..15.
        TypeError: complex, object or string array.
    """
    digits = check_int("digits", digits, minimum=0, maximum=15)
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"rounded_lists needs a real-valued array, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.ndim == 0:
        return round(float(a), digits)
    with np.errstate(over="ignore", invalid="ignore"):
        y = a * 10.0**digits
        out = np.rint(y) / 10.0**digits
        unsure = ~np.isfinite(out) | ~(np.abs(y - np.floor(y) - 0.5) > 4.0 * np.spacing(np.abs(y)))
    rows = out.tolist()
    for index in zip(*np.nonzero(unsure)):
        row = rows
        for i in index[:-1]:
            row = row[i]
        row[index[-1]] = round(float(a[index]), digits)
    return rows


def _bounded(f: QuantileForecaster, timeout: float | None):
    """How a forecast of ``f`` runs under the episode's ``timeout``:

    * a hosted plug-in (:class:`fwgym.forecasters.hosted.HostedForecaster`): in its worker process, killed at
      the deadline (``timeout``, or the plug-in's default deadline when the env sets none), whatever the
      plug-in declares;
    * a ``bounded`` forecaster, or no ``timeout``: ``f.predict_quantiles`` on this thread;
    * otherwise: on a daemon thread that is abandoned after ``timeout`` seconds (``ForecastBackendError``);
      a daemon thread, so a forecast that never returns cannot keep the process from exiting.
    """
    from fwgym.forecasters.hosted import HostedForecaster

    if isinstance(f, HostedForecaster):
        return functools.partial(f.predict_quantiles, timeout=timeout)
    if timeout is None or getattr(f, "bounded", False):  # a bounded forecaster cannot block: no thread
        return f.predict_quantiles

    def predict(context: np.ndarray, horizon: int) -> np.ndarray:
        done = threading.Event()
        value: list[np.ndarray] = []  # the thread's forecast, or
        error: list[BaseException] = []  # what it raised

        def run() -> None:
            try:
                value.append(f.predict_quantiles(context, horizon))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                error.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="fwgym-forecast", daemon=True).start()
        if not done.wait(timeout):  # abandoned: the thread runs on, the process may exit without it
            raise ForecastBackendError(f"{f.name}: no forecast within {timeout:g} s")
        if error:
            raise error[0]
        return value[0]

    return predict


def infer(ep: Episode, f: QuantileForecaster, context: np.ndarray, last_hour: int, horizon: int, tool: str) -> np.ndarray:
    """Run (or fetch from the cache) a forecast after the charge; any failure is a ``backend_error``
    result and the charge stands (DESIGN §6), except a :class:`~fwgym.errors.DataIntegrityError` (a
    packaged file failed its check), which propagates: it is never an agent's result."""
    try:
        return cached_quantiles(f, ep.case.series_id, context, last_hour, horizon, _bounded(f, ep.forecast_timeout),
                                ep.forecast_store)
    except DataIntegrityError:  # a corrupted packaged file is not a backend fault: never a result
        raise
    except Exception as exc:  # a faulty backend never crashes the episode
        raise ToolError("backend_error", f"{tool}: {exc} (the charge stands)") from None


def forecast(ep: Episode, args: dict) -> dict:
    """``forecast``: buy 9 quantiles per step from the step after the last visible hour; the episode keeps
    them (``ep.forecasts``) for ``plan`` / ``evaluate_plan``, which plan on them when first asked
    (:func:`fwgym.tools.planning.forecast_plan`)."""
    check_keys(args, {"model", "context_steps", "horizon"}, "forecast")
    c = ep.case
    model, ctx, horizon, q = _request(ep, args, HISTORY_HOURS, "forecast")
    f = buy(ep, model, q, "forecast")
    quantiles = infer(ep, f, c.history[-ctx:], c.last_visible, horizon, "forecast")  # charged even if this fails
    lo, hi = c.target_steps
    fid = f"f{len(ep.forecasts) + 1}"
    ep.forecasts[fid] = {"model": model, "horizon": horizon, "context_steps": ctx, "quantiles": quantiles}
    first = c.last_visible + 1
    return {
        "forecast_id": fid, "model": model, "context_steps": ctx, "horizon": horizon, "credits": q["credits"],
        "start": hour_to_iso(first), "end": hour_to_iso(first + horizon - 1), "unit": c.series.unit,
        "covers_target": horizon >= hi, "target_steps": [lo, hi],
        "quantile_levels": list(QUANTILE_LEVELS),
        "quantiles": rounded_lists(quantiles, 6),
        "budget_remaining": ep.budget_left,
    }


def replay(ep: Episode, args: dict) -> dict:
    """``replay``: buy a backtest from an ``origin`` before the last visible hour; returns the mean
    pinball loss over the visible steps it covers (raw units and divided by scale)."""
    check_keys(args, {"model", "origin", "context_steps", "horizon"}, "replay")
    c = ep.case
    if "origin" not in args:
        raise ToolError("invalid_arguments", "replay: missing required argument 'origin' (ISO hour <= the last visible hour)")
    origin = time_arg(args, "origin")
    if origin > c.last_visible:
        raise ToolError("out_of_range", f"replay: origin must be at or before the last visible hour {hour_to_iso(c.last_visible)}; nothing was charged")
    if origin >= c.last_visible:
        raise ToolError("out_of_range", "replay: an origin at the last visible hour leaves no visible step to score; nothing was charged")
    available = origin - c.history_start + 1
    if available < 1:
        raise ToolError("out_of_range", f"replay: origin must be inside the visible history (from {hour_to_iso(c.history_start)}); nothing was charged")
    model, ctx, horizon, q = _request(ep, args, min(HISTORY_HOURS, available), "replay")
    f = buy(ep, model, q, "replay")
    context = c.history[available - ctx : available]
    quantiles = infer(ep, f, context, origin, horizon, "replay")
    observed = min(horizon, c.last_visible - origin)
    actual = c.history[available : available + observed]
    e = actual[:, None] - quantiles[:observed]
    levels = np.asarray(QUANTILE_LEVELS)[None, :]
    pinball = float(np.mean(np.maximum(levels * e, (levels - 1) * e)))
    return {"model": model, "origin": hour_to_iso(origin), "context_steps": ctx, "horizon": horizon,
            "credits": q["credits"], "observed_steps": int(observed), "complete": observed == horizon,
            "mean_pinball_loss": pinball, "mean_pinball_loss_scaled": pinball / c.scale, "unit": c.series.unit,
            "budget_remaining": ep.budget_left}
