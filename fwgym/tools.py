"""The tool registry and per-episode state: the action vocabulary of every fwgym environment (DESIGN §6).

An action is one JSON tool call ``{"tool": NAME, "args": {...}}``, given as a string or an already
parsed dict. :func:`parse_action` turns any input into a :class:`ToolCall` or a :class:`ToolError`
(it never raises); :meth:`Episode.execute` runs a call and returns a JSON-safe result dict:
``{"tool": NAME, "ok": true, "result": {...}}`` or ``{"tool": NAME, "ok": false, "error": {"code", "message"}}``.

Every call except a successful ``submit`` or ``abstain`` counts toward the call limit, errors included. Nothing in a result
ever carries a value at or after ``as_of - 2 h``: the history tool reads only the visible window.
"""
from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

import numpy as np

from fwgym.cases import HISTORY_HOURS, Case
from fwgym.contract import (
    ALPHA,
    BLOCK_HOURS,
    CodedError,
    DECISION_IDS,
    GRID,
    N_BLOCKS,
    RAMP,
    ForecastSubmission,
    Plan,
    PlanError,
    is_mapping,
    names_text,
    safe_repr,
    validate_decisions,
    validate_forecast,
    validate_levels,
)
from fwgym.forecasters.base import ForecastBackendError, ModelUnavailable, QuantileForecaster
from fwgym.forecasters.classical import CLASSICAL_METHODS, method_samples
from fwgym.forecasters.registry import FORECAST_CACHE, PRICED_MODELS, get_forecaster
from fwgym.optimizer import QUANTILE_LEVELS, QUANTILE_MASSES, PlanResult, optimal_plan, plan_loss
from fwgym.scoring import BUDGET
from fwgym.series import datetime_to_hour, hour_to_iso
from fwgym.tariff import HORIZON_BUCKETS, TARIFF, credits_for, price

MAX_CALLS = 12
MAX_ACTION_CHARS = 100_000


class ToolError(CodedError):
    """A refused or failed tool call; becomes ``{"error": {"code", "message"}}`` in the result."""


@dataclass(frozen=True)
class ToolCall:
    tool: str
    args: dict


@dataclass(frozen=True)
class Tool:
    """A registered tool: name, description, JSON schema of its args, handler, and call accounting."""

    name: str
    description: str
    parameters: dict
    handler: Callable[["Episode", dict], dict]
    counts_as_call: bool = True

    def schema(self) -> dict:
        """OpenAI-style function schema ``{"type": "function", "function": {...}}``."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and duplicate object keys (raises ValueError)."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def parse_action(action: Any) -> ToolCall | ToolError:
    """Turn an agent's action (JSON string or dict) into a :class:`ToolCall`, or a :class:`ToolError`
    explaining what is wrong. Never raises."""
    try:
        if isinstance(action, (bytes, bytearray)):
            action = action.decode("utf-8")
        if isinstance(action, str):
            if len(action) > MAX_ACTION_CHARS:
                return ToolError("invalid_action", f"action is {len(action)} characters long; the limit is {MAX_ACTION_CHARS}")
            try:
                action = loads_strict(action)
            except RecursionError:
                return ToolError("invalid_json", "action JSON is nested too deeply")
            except ValueError as exc:
                return ToolError("invalid_json", f"action is not valid JSON: {exc}"[:500])
        if not is_mapping(action):
            return ToolError(
                "invalid_action",
                f'an action must be a JSON object {{"tool": NAME, "args": {{...}}}}, got {type(action).__name__}',
            )
        extra = [k for k in action if k not in ("tool", "args")]
        if extra:
            return ToolError("invalid_action", f'unexpected action keys {names_text(extra)}; an action has only "tool" and "args"')
        tool = action.get("tool")
        if not isinstance(tool, str):
            return ToolError("invalid_action", f'"tool" must be a tool name string, got {safe_repr(tool, 100)}')
        args = action.get("args", {})
        if args is None:
            args = {}
        if not is_mapping(args):
            return ToolError("invalid_arguments", f'"args" must be a JSON object, got {type(args).__name__}')
        return ToolCall(tool=tool, args=dict(args))
    except Exception as exc:  # pragma: no cover - defensive: parse_action must never raise
        return ToolError("invalid_action", f"could not read the action: {type(exc).__name__}")


# ---------------------------------------------------------------------------------------------
# argument helpers


def _check_keys(args: dict, allowed: set[str], tool: str) -> None:
    extra = [k for k in args if k not in allowed]
    if extra:
        raise ToolError("invalid_arguments", f"{tool}: unknown argument(s) {names_text(extra)}; allowed: {sorted(allowed)}")


def _int_arg(args: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    if key not in args:
        if default is None:
            raise ToolError("invalid_arguments", f"missing required argument {key!r}")
        return default
    v = args[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ToolError("invalid_arguments", f"{key!r} must be an integer, got {safe_repr(v, 100)}")
    v = int(v)
    if not lo <= v <= hi:
        raise ToolError("invalid_arguments", f"{key!r} must be in {lo}..{hi}, got {safe_repr(v, 60)}")
    return v


def _time_arg(args: dict, key: str) -> int:
    v = args[key]
    if not isinstance(v, str):
        raise ToolError("invalid_arguments", f"{key!r} must be an ISO 8601 timestamp string, got {safe_repr(v, 100)}")
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        return datetime_to_hour(dt)
    except (ValueError, OverflowError) as exc:
        raise ToolError(
            "invalid_arguments",
            f"{key!r}: {safe_repr(v, 60)} is not a time-zone-aware ISO 8601 hour such as '2024-07-20T13:00:00Z' ({exc})",
        ) from None


def _method_arg(args: dict) -> str:
    m = args.get("method")
    if not isinstance(m, str) or m not in CLASSICAL_METHODS:
        raise ToolError("invalid_arguments", f"'method' must be one of {list(CLASSICAL_METHODS)}, got {safe_repr(m, 100)}")
    return m


# ---------------------------------------------------------------------------------------------
# episode state


@dataclass
class Episode:
    """State of one episode: the case, the ledger, the call counter and the submission.

    Attributes:
        case: the :class:`~fwgym.cases.Case` being played.
        budget: credits available (default 113,726).
        max_calls: tool-call limit (default 12; ``submit`` does not count).
        tools: names of the tools this episode allows.
        spent: credits charged so far (never above ``budget``).
        calls: counted tool calls so far.
    """

    case: Case
    budget: int = BUDGET
    max_calls: int = MAX_CALLS
    tools: tuple[str, ...] = ()
    spent: int = 0
    calls: int = 0
    tool_counts: Counter = field(default_factory=Counter)
    submission: Plan | ForecastSubmission | None = None
    abstain_reason: str | None = None
    task: str = "decision"
    scenario: Any = None
    models: tuple[str, ...] = PRICED_MODELS
    forecast_timeout: float | None = None
    forecasters: dict = field(default_factory=dict, repr=False)
    forecasts: dict = field(default_factory=dict, repr=False)
    _plans: dict = field(default_factory=dict, repr=False)
    _target: np.ndarray | None = field(default=None, repr=False)

    def target(self) -> np.ndarray:
        """HINDSIGHT (scorer only): the realised target, transformed by the scenario if any, float64 (24,)."""
        if self._target is None:
            t = self.case.target()
            self._target = self.scenario.apply(t) if self.scenario is not None else np.array(t)
        return self._target

    def forecaster(self, model: str) -> QuantileForecaster:
        """The forecaster serving ``model`` in this episode (env override or the process-wide one)."""
        return self.forecasters.get(model) or get_forecaster(model)

    def charge(self, credits: int) -> None:
        """Debit the ledger; the caller has checked affordability (spent never exceeds the budget)."""
        if credits < 0 or self.spent + credits > self.budget:
            raise AssertionError("ledger invariant violated")  # pragma: no cover - guarded by callers
        self.spent += int(credits)

    @property
    def budget_left(self) -> int:
        return self.budget - self.spent

    @property
    def calls_left(self) -> int:
        return max(0, self.max_calls - self.calls)

    def method_plan(self, method: str) -> PlanResult:
        """Optimal plan under a classical method's distribution (cached per episode)."""
        if method not in self._plans:
            self._plans[method] = classical_plan_result(self.case, method)
        return self._plans[method]

    def execute(self, call: ToolCall) -> dict:
        """Run one parsed call; returns the JSON-safe result dict (never raises for agent input)."""
        self.tool_counts[call.tool] += 1
        tool = REGISTRY.get(call.tool)
        if tool is None or call.tool not in self.tools:
            return _error(call.tool, ToolError("unknown_tool", f"unknown tool {safe_repr(call.tool, 60)}; available tools: {list(self.tools)}"))
        try:
            return {"tool": call.tool, "ok": True, "result": tool.handler(self, call.args)}
        except ToolError as exc:
            return _error(call.tool, exc)
        except PlanError as exc:
            return _error(call.tool, ToolError("invalid_plan", f"{exc.code}: {exc.message}"))
        except Exception as exc:  # a tool must never crash the episode
            return _error(call.tool, ToolError("internal_error", f"{call.tool} failed unexpectedly: {type(exc).__name__}: {str(exc)[:300]}"))


def _error(tool: str, exc: ToolError) -> dict:
    return {"tool": str(tool)[:60], "ok": False, "error": {"code": exc.code, "message": exc.message}}


#: process-wide LRU of classical plans, (case_id, method) -> PlanResult (~7 KB each: the cost table)
_PLAN_CACHE: OrderedDict[tuple[str, str], PlanResult] = OrderedDict()
#: 4,096 entries (~29 MB) hold every plan of a case chunk in evaluation and of the cases an RL run
#: revisits soon; the bound keeps a long run on a 140k-case train split from growing without limit.
_PLAN_CACHE_MAX = 4096
_PLAN_LOCK = threading.Lock()


def classical_plan_result(case: Case, method: str) -> PlanResult:
    """Optimal plan under ``method``'s distribution for ``case`` (bounded process-wide LRU cache;
    deterministic, so a hit equals a recomputation)."""
    key = (case.case_id, method)
    with _PLAN_LOCK:
        hit = _PLAN_CACHE.get(key)
        if hit is not None:
            _PLAN_CACHE.move_to_end(key)
            return hit
    samples = method_samples(method, case.history, case.history_hours, case.target_hours)  # a Case's arrays hold the invariants
    hit = optimal_plan(samples, case.scale, case.shortage)
    for a in (hit.plan.indices, hit.plan.levels, hit.plan.values, hit.cost):
        a.flags.writeable = False  # shared by every later hit: nobody may change it
    with _PLAN_LOCK:
        _PLAN_CACHE[key] = hit
        while len(_PLAN_CACHE) > _PLAN_CACHE_MAX:
            _PLAN_CACHE.popitem(last=False)
    return hit


_LEVEL_LABELS: tuple[float, ...] = tuple(round(float(g), 2) for g in GRID)  # GRID as printed (0.4, 0.45, ...)


def plan_payload(case: Case, plan: Plan) -> dict:
    """JSON form of a plan: canonical decisions (physical) and normalised levels."""
    return {
        "decisions": [{"decision_id": d, "value": v} for d, v in zip(DECISION_IDS, plan.values.tolist())],
        "levels": [_LEVEL_LABELS[i] for i in plan.indices.tolist()],
        "unit": case.series.unit,
    }


def _plan_from_args(ep: Episode, args: dict, tool: str) -> Plan:
    has_d, has_l = "decisions" in args, "levels" in args
    if has_d == has_l:
        raise ToolError("invalid_arguments", f"{tool}: give exactly one of 'decisions' (physical capacities) or 'levels' (normalised grid levels)")
    if has_d:
        return validate_decisions(args["decisions"], ep.case.scale, ep.case.series.unit)
    return validate_levels(args["levels"], ep.case.scale)


# ---------------------------------------------------------------------------------------------
# handlers


_TARIFF_ROWS = tuple((m, tuple((str(cb), p) for cb, p in t.items())) for m, t in TARIFF.items())  # JSON keys


def _catalog(ep: Episode, args: dict) -> dict:
    _check_keys(args, set(), "catalog")
    c = ep.case
    bounds = [hour_to_iso(c.target_start + BLOCK_HOURS * b) for b in range(N_BLOCKS + 1)]
    blocks = [{"decision_id": d, "start": bounds[b], "end": bounds[b + 1]} for b, d in enumerate(DECISION_IDS)]
    return {
        "case": c.summary(),
        "contract": {
            "blocks": blocks,
            "scale": c.scale,
            "normalised_grid": list(_LEVEL_LABELS),
            "capacity_grid": (GRID * c.scale).tolist(),
            "unit": c.series.unit,
            "ramp": RAMP,
            "surplus_price": ALPHA,
            "shortage_weights": c.shortage.tolist(),
            "loss": "mean over the 24 target hours of 0.3*max(a-y,0) + w_h*max(y-a,0), a and y divided by scale",
        },
        "methods": list(CLASSICAL_METHODS),
        "tariff": {m: {cb: list(p) for cb, p in rows} for m, rows in _TARIFF_ROWS},
        "models": [_model_entry(ep, m) for m in ep.models],
        "budget": {"budget": ep.budget, "spent": ep.spent, "remaining": ep.budget_left},
        "calls": {"limit": ep.max_calls, "used": ep.calls, "remaining": ep.calls_left},
        "tools": list(ep.tools),
        "task": ep.task,
    }


def _model_entry(ep: Episode, model: str) -> dict:
    f = ep.forecaster(model)
    av = f.availability()
    credits = credits_for(model, HISTORY_HOURS, ep.case.horizon)
    out = {"model": model, "available": av.available, "quantile_levels": list(QUANTILE_LEVELS),
           "min_context": f.min_context, "credits_full_context_covering_horizon": credits,
           "affordable": credits <= ep.budget_left}
    if not av.available:
        out["unavailable_reason"] = av.reason
    if model == "chronos_bolt_tiny":
        out["note"] = "native horizon 64; longer horizons are a heuristic extension"
    return out


def _history(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"last", "start", "end"}, "history")
    c = ep.case
    if "start" in args or "end" in args:
        if "last" in args:
            raise ToolError("invalid_arguments", "history: give either 'last' or 'start'/'end', not both")
        start = _time_arg(args, "start") if "start" in args else c.history_start
        end = _time_arg(args, "end") if "end" in args else c.last_visible
        if not (c.history_start <= start <= c.last_visible and c.history_start <= end <= c.last_visible):
            raise ToolError(
                "out_of_range",
                f"history: visible hours are {hour_to_iso(c.history_start)} .. {hour_to_iso(c.last_visible)} "
                "(inclusive); the hours from as_of - 2 h on are never visible",
            )
        if end < start:
            raise ToolError("invalid_arguments", "history: 'end' is before 'start'")
    else:
        n = _int_arg(args, "last", 1, HISTORY_HOURS, default=48)
        start, end = c.last_visible - n + 1, c.last_visible
    i0, i1 = start - c.history_start, end - c.history_start + 1
    return {
        "series_id": c.series_id,
        "unit": c.series.unit,
        "timestamps": [hour_to_iso(h) for h in range(start, end + 1)],
        "values": [float(v) for v in c.history[i0:i1]],
    }


def _classical_plan(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"method"}, "classical_plan")
    m = _method_arg(args)
    res = ep.method_plan(m)
    return {"method": m, "plan": plan_payload(ep.case, res.plan), "expected_loss": res.expected_loss, "credits": 0}


def _forecast_plan(ep: Episode, args: dict, tool: str) -> tuple[str, PlanResult]:
    """``(label, PlanResult)`` for ``forecast_id`` or ``method`` (exactly one)."""
    if ("forecast_id" in args) == ("method" in args):
        raise ToolError("invalid_arguments", f"{tool}: give exactly one of 'forecast_id' (a bought forecast) or 'method' (a classical method)")
    if "method" in args:
        m = _method_arg(args)
        return m, ep.method_plan(m)
    fid = args["forecast_id"]
    fc = ep.forecasts.get(fid) if isinstance(fid, str) else None
    if fc is None:
        raise ToolError("not_found", f"{tool}: no forecast with id {safe_repr(fid, 60)} was bought in this episode (ids: {list(ep.forecasts)})")
    if fc["plan"] is None:
        c = ep.case
        raise ToolError(
            "horizon_too_short",
            f"{tool}: forecast {fid} covers steps 1..{fc['horizon']} but the target needs steps "
            f"{c.target_steps[0]}..{c.target_steps[1]} (horizon >= {c.horizon}); its credits stay charged",
        )
    return fid, fc["plan"]


def _plan(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"method", "forecast_id"}, "plan")
    label, res = _forecast_plan(ep, args, "plan")
    key = "forecast_id" if label in ep.forecasts else "method"
    return {key: label, "plan": plan_payload(ep.case, res.plan), "expected_loss": res.expected_loss, "credits": 0}


def _evaluate_plan(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"decisions", "levels", "method", "forecast_id"}, "evaluate_plan")
    label, res = _forecast_plan(ep, args, "evaluate_plan")
    plan = _plan_from_args(ep, args, "evaluate_plan")
    key = "forecast_id" if label in ep.forecasts else "method"
    return {key: label, "expected_loss": plan_loss(res.cost, plan.indices), "optimal_expected_loss": res.expected_loss}


# -- priced tools ------------------------------------------------------------------------------


def _model_arg(ep: Episode, args: dict) -> str:
    m = args.get("model")
    if not isinstance(m, str) or m not in ep.models:
        raise ToolError("invalid_arguments", f"'model' must be one of the forecast pool {list(ep.models)}, got {safe_repr(m, 60)}")
    return m


def _request(ep: Episode, args: dict, max_context: int, tool: str) -> tuple[str, int, int, dict]:
    """Validate (model, context_steps, horizon) and price it; raises ToolError (free refusal)."""
    model = _model_arg(ep, args)
    f = ep.forecaster(model)
    ctx = _int_arg(args, "context_steps", 1, 10**9, default=max_context)
    horizon = _int_arg(args, "horizon", 1, 10**9, default=ep.case.horizon)
    if max_context < f.min_context:
        raise ToolError("out_of_range", f"{tool}: only {max_context} visible hours precede this origin; {model} needs a context of >= {f.min_context}; nothing was charged")
    if ctx < f.min_context or ctx > max_context:
        raise ToolError("invalid_arguments", f"{tool}: context_steps for {model} must be in {f.min_context}..{max_context}, got {ctx}")
    if horizon > HORIZON_BUCKETS[-1]:
        raise ToolError("invalid_arguments", f"{tool}: horizon must be in 1..{HORIZON_BUCKETS[-1]}, got {horizon}")
    try:
        quote = price(model, ctx, horizon)
    except ValueError as exc:
        raise ToolError("invalid_arguments", f"{tool}: {exc}") from None
    quote["affordable"] = quote["credits"] <= ep.budget_left
    return model, ctx, horizon, quote


def _quote(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"model", "context_steps", "horizon"}, "quote")
    model, ctx, horizon, quote = _request(ep, args, HISTORY_HOURS, "quote")
    av = ep.forecaster(model).availability()
    return {**quote, "available": av.available, **({"unavailable_reason": av.reason} if not av.available else {}),
            "budget_remaining": ep.budget_left}


def _buy(ep: Episode, model: str, quote: dict, tool: str) -> QuantileForecaster:
    """Free checks (affordability, availability, loading), then charge before inference."""
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
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or not 0 <= digits <= 15:
        raise ValueError(f"digits must be an integer in 0..15, got {digits!r}")
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


def _infer(ep: Episode, f: QuantileForecaster, context: np.ndarray, last_hour: int, horizon: int, tool: str) -> np.ndarray:
    """Run (or fetch from the cache) a forecast after the charge; any failure is a ``backend_error``
    result and the charge stands (DESIGN §6)."""
    key = (ep.case.series_id, int(last_hour), len(context), int(horizon))

    def compute():
        if ep.forecast_timeout is None or getattr(f, "bounded", False):  # a bounded forecaster cannot block: no thread
            return f.predict_quantiles(context, horizon)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fwgym-forecast")
        try:
            return pool.submit(f.predict_quantiles, context, horizon).result(timeout=ep.forecast_timeout)
        except FutureTimeout:
            raise ForecastBackendError(f"{f.name}: no forecast within {ep.forecast_timeout:g} s") from None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a timed-out (or interrupted) forecast's thread is abandoned

    try:
        return FORECAST_CACHE.get_or_compute(f, key, compute)
    except Exception as exc:  # a faulty backend never crashes the episode
        raise ToolError("backend_error", f"{tool}: {exc} (the charge stands)") from None


def _forecast(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"model", "context_steps", "horizon"}, "forecast")
    c = ep.case
    model, ctx, horizon, quote = _request(ep, args, HISTORY_HOURS, "forecast")
    f = _buy(ep, model, quote, "forecast")
    q = _infer(ep, f, c.history[-ctx:], c.last_visible, horizon, "forecast")  # charged even if this fails
    lo, hi = c.target_steps
    fid = f"f{len(ep.forecasts) + 1}"
    plan = optimal_plan(q[lo - 1 : hi], c.scale, c.shortage, QUANTILE_MASSES) if horizon >= hi else None
    ep.forecasts[fid] = {"model": model, "horizon": horizon, "context_steps": ctx, "quantiles": q, "plan": plan}
    first = c.last_visible + 1
    return {
        "forecast_id": fid, "model": model, "context_steps": ctx, "horizon": horizon, "credits": quote["credits"],
        "start": hour_to_iso(first), "end": hour_to_iso(first + horizon - 1), "unit": c.series.unit,
        "covers_target": horizon >= hi, "target_steps": [lo, hi],
        "quantile_levels": list(QUANTILE_LEVELS),
        "quantiles": rounded_lists(q, 6),
        "budget_remaining": ep.budget_left,
    }


def _replay(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"model", "origin", "context_steps", "horizon"}, "replay")
    c = ep.case
    if "origin" not in args:
        raise ToolError("invalid_arguments", "replay: missing required argument 'origin' (ISO hour <= the last visible hour)")
    origin = _time_arg(args, "origin")
    if origin > c.last_visible:
        raise ToolError("out_of_range", f"replay: origin must be at or before the last visible hour {hour_to_iso(c.last_visible)}; nothing was charged")
    if origin >= c.last_visible:
        raise ToolError("out_of_range", "replay: an origin at the last visible hour leaves no visible step to score; nothing was charged")
    available = origin - c.history_start + 1
    if available < 1:
        raise ToolError("out_of_range", f"replay: origin must be inside the visible history (from {hour_to_iso(c.history_start)}); nothing was charged")
    model, ctx, horizon, quote = _request(ep, args, min(HISTORY_HOURS, available), "replay")
    f = _buy(ep, model, quote, "replay")
    context = c.history[available - ctx : available]
    q = _infer(ep, f, context, origin, horizon, "replay")
    observed = min(horizon, c.last_visible - origin)
    actual = c.history[available : available + observed]
    e = actual[:, None] - q[:observed]
    levels = np.asarray(QUANTILE_LEVELS)[None, :]
    pinball = float(np.mean(np.maximum(levels * e, (levels - 1) * e)))
    return {"model": model, "origin": hour_to_iso(origin), "context_steps": ctx, "horizon": horizon,
            "credits": quote["credits"], "observed_steps": int(observed), "complete": observed == horizon,
            "mean_pinball_loss": pinball, "mean_pinball_loss_scaled": pinball / c.scale, "unit": c.series.unit,
            "budget_remaining": ep.budget_left}


def _submit(ep: Episode, args: dict) -> dict:
    if ep.task == "forecast":
        _check_keys(args, {"quantiles", "samples"}, "submit")
        if ("quantiles" in args) == ("samples" in args):
            raise ToolError("invalid_arguments", "submit: give exactly one of 'quantiles' (24 rows of 9) or 'samples' (rows of 24)")
        ep.submission = validate_forecast(args, ep.case.scale)
        return {"accepted": True, "kind": ep.submission.kind}
    _check_keys(args, {"decisions", "levels"}, "submit")
    ep.submission = _plan_from_args(ep, args, "submit")
    return {"accepted": True, "kind": "plan"}  # the env ends the episode and returns its terminal result instead


def _abstain(ep: Episode, args: dict) -> dict:
    _check_keys(args, {"reason"}, "abstain")
    reason = args.get("reason", "")
    if not isinstance(reason, str):
        raise ToolError("invalid_arguments", "abstain: 'reason' must be a string")
    ep.abstain_reason = reason[:500] or "no reason given"
    return {"abstained": True}


_DECISIONS_SCHEMA = {
    "type": "array",
    "minItems": 8,
    "maxItems": 8,
    "description": "8 records b00..b07 with physical capacities from the capacity grid",
    "items": {
        "type": "object",
        "properties": {"decision_id": {"type": "string", "enum": list(DECISION_IDS)}, "value": {"type": "number"}},
        "required": ["decision_id", "value"],
    },
}
_LEVELS_SCHEMA = {"type": "array", "items": {"type": "number"}, "minItems": 8, "maxItems": 8,
                  "description": "alternative to decisions: 8 normalised grid levels 0.40..2.00"}
_METHOD_SCHEMA = {"type": "string", "enum": list(CLASSICAL_METHODS)}
_REQUEST_PROPS = {"model": {"type": "string", "enum": list(PRICED_MODELS)},
                  "context_steps": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS},
                  "horizon": {"type": "integer", "minimum": 1, "maximum": 336}}

REGISTRY: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("catalog", "Case, contract (grid, ramp, shortage weights), methods, tariff, budget and call status. Free.",
             {"type": "object", "properties": {}, "additionalProperties": False}, _catalog),
        Tool("history", "Visible history: the last N hours (last, 1..336, default 48) or an inclusive start/end range of ISO hours. Free.",
             {"type": "object", "properties": {"last": {"type": "integer", "minimum": 1, "maximum": HISTORY_HOURS},
                                               "start": {"type": "string"}, "end": {"type": "string"}},
              "additionalProperties": False}, _history),
        Tool("classical_plan", "Optimal plan under a free classical method's predictive distribution, with its expected loss. Free.",
             {"type": "object", "properties": {"method": _METHOD_SCHEMA}, "required": ["method"], "additionalProperties": False},
             _classical_plan),
        Tool("plan", "Optimal plan under a bought forecast (forecast_id) or a classical method. Free.",
             {"type": "object", "properties": {"method": _METHOD_SCHEMA, "forecast_id": {"type": "string"}},
              "additionalProperties": False}, _plan),
        Tool("evaluate_plan", "Expected loss of your plan under a bought forecast (forecast_id) or a classical method. Free.",
             {"type": "object", "properties": {"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA,
                                               "method": _METHOD_SCHEMA, "forecast_id": {"type": "string"}},
              "additionalProperties": False}, _evaluate_plan),
        Tool("quote", "Price of a forecast request (model, context_steps <= 336, horizon <= 336; defaults: full context, covering horizon) and whether it is affordable and available. Free.",
             {"type": "object", "properties": _REQUEST_PROPS, "required": ["model"], "additionalProperties": False}, _quote),
        Tool("forecast", "Buy a quantile forecast (9 quantiles 0.1..0.9 per step from the step after the last visible hour). Charged at the tariff; refused free if unaffordable or unavailable.",
             {"type": "object", "properties": _REQUEST_PROPS, "required": ["model"], "additionalProperties": False}, _forecast),
        Tool("replay", "Backtest a model inside the visible history: forecast from origin (ISO hour before the last visible hour) and score the mean pinball loss on visible steps. Charged at the tariff.",
             {"type": "object", "properties": {**_REQUEST_PROPS, "origin": {"type": "string"}}, "required": ["model", "origin"],
              "additionalProperties": False}, _replay),
        Tool("abstain", "End the episode without an answer (scored as invalid), recording why, e.g. a harness "
                        "that cannot continue. Does not count toward the call limit.",
             {"type": "object", "properties": {"reason": {"type": "string"}}, "additionalProperties": False},
             _abstain, counts_as_call=False),
        Tool("submit", "Submit the final answer (ends the episode): decisions or levels in decision envs; quantiles "
                       "(24 x 9) or samples (n x 24) in forecast envs. Does not count toward the call limit.",
             {"type": "object", "properties": {"decisions": _DECISIONS_SCHEMA, "levels": _LEVELS_SCHEMA,
                                               "quantiles": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                                               "samples": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
              "additionalProperties": False}, _submit, counts_as_call=False),
    )
}

DEFAULT_TOOLS: tuple[str, ...] = tuple(REGISTRY)


def result_json(result: Mapping) -> str:
    """Compact ASCII JSON of a tool result (what the ``last_result`` observation carries)."""
    return json.dumps(result, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_json_default)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

