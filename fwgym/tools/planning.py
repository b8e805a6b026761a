"""Free planning tools: ``classical_plan``, ``plan`` and ``evaluate_plan``, the process-wide
cache of classical plans (:func:`classical_plan_result`), and plans as the tools read and write them
(:func:`plan_from_args`, :func:`plan_payload`).

A plan is the DP optimum of :func:`fwgym.core.optimizer.optimal_plan` under a predictive distribution: a
free classical method's samples, or a bought forecast's quantiles (planned once, the first time a tool
asks for it: :func:`forecast_plan`, :func:`fwgym.forecasters.covering.plan_on_forecast`).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from fwgym.core.cases import Case
from fwgym.core.contract import DECISION_IDS, LEVEL_LABELS, Plan, safe_repr, validate_decisions, validate_levels
from fwgym.errors import ToolError
from fwgym.forecasters.classical import CLASSICAL_METHODS, method_samples
from fwgym.forecasters.covering import plan_on_forecast
from fwgym.core.optimizer import PlanResult, optimal_plan, plan_loss
from fwgym.tools.actions import check_keys
from fwgym.tools.episode import Episode

__all__ = ["classical_plan_result", "method_plan", "forecast_plan", "plan_payload", "plan_from_args", "classical_plan",
           "plan", "evaluate_plan"]

#: process-wide LRU of classical plans, (case_id, method) -> PlanResult (~7 KB each: the cost table)
_PLAN_CACHE: OrderedDict[tuple[str, str], PlanResult] = OrderedDict()
#: 4,096 entries (~29 MB) hold every plan of a case chunk in evaluation and of the cases an RL run
#: revisits soon; the bound keeps a long run on a 140k-case train split from growing without limit.
_PLAN_CACHE_MAX = 4096
_PLAN_LOCK = threading.Lock()


def classical_plan_result(case: Case, method: str) -> PlanResult:
    """Optimal plan under ``method``'s distribution for ``case`` (bounded process-wide LRU cache;
    deterministic, so a hit equals a recomputation). The arrays of a result are read-only: every
    later hit shares them."""
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


def method_plan(ep: Episode, method: str) -> PlanResult:
    """Optimal plan under a classical method's distribution for the episode's case (memoised in
    ``ep.plans``, on top of the process-wide cache)."""
    res = ep.plans.get(method)
    if res is None:
        res = ep.plans[method] = classical_plan_result(ep.case, method)
    return res


def forecast_plan(ep: Episode, forecast_id: str) -> PlanResult | None:
    """Optimal plan under the bought forecast ``forecast_id`` of the episode (``None`` when its horizon
    stops short of the target), planned the first time it is asked for and memoised in
    ``ep.forecasts[forecast_id]["plan"]`` (deterministic: the plan does not depend on when it is made).

    Raises:
        KeyError: no such forecast in the episode.
    """
    fc = ep.forecasts[forecast_id]
    if "plan" not in fc:
        fc["plan"] = plan_on_forecast(ep.case, fc["quantiles"])
    return fc["plan"]


def plan_payload(case: Case, plan: Plan) -> dict:
    """JSON form of a plan: canonical decisions (physical) and normalised levels."""
    return {
        "decisions": [{"decision_id": d, "value": v} for d, v in zip(DECISION_IDS, plan.values.tolist())],
        "levels": [LEVEL_LABELS[i] for i in plan.indices.tolist()],
        "unit": case.series.unit,
    }


def plan_from_args(case: Case, args: dict, tool: str) -> Plan:
    """The plan given by exactly one of ``decisions`` (physical capacities) or ``levels`` (normalised);
    raises :class:`~fwgym.core.contract.PlanError` when it is not a valid plan."""
    has_d, has_l = "decisions" in args, "levels" in args
    if has_d == has_l:
        raise ToolError("invalid_arguments", f"{tool}: give exactly one of 'decisions' (physical capacities) or 'levels' (normalised grid levels)")
    if has_d:
        return validate_decisions(args["decisions"], case.scale, case.series.unit)
    return validate_levels(args["levels"], case.scale)


def _method_arg(args: dict) -> str:
    m = args.get("method")
    if not isinstance(m, str) or m not in CLASSICAL_METHODS:
        raise ToolError("invalid_arguments", f"'method' must be one of {list(CLASSICAL_METHODS)}, got {safe_repr(m, 100)}")
    return m


def classical_plan(ep: Episode, args: dict) -> dict:
    """``classical_plan``: the optimal plan under a free classical method, with its expected loss."""
    check_keys(args, {"method"}, "classical_plan")
    m = _method_arg(args)
    res = method_plan(ep, m)
    return {"method": m, "plan": plan_payload(ep.case, res.plan), "expected_loss": res.expected_loss, "credits": 0}


def _requested_plan(ep: Episode, args: dict, tool: str) -> tuple[str, PlanResult]:
    """``(label, PlanResult)`` for ``forecast_id`` or ``method`` (exactly one)."""
    if ("forecast_id" in args) == ("method" in args):
        raise ToolError("invalid_arguments", f"{tool}: give exactly one of 'forecast_id' (a bought forecast) or 'method' (a classical method)")
    if "method" in args:
        m = _method_arg(args)
        return m, method_plan(ep, m)
    fid = args["forecast_id"]
    fc = ep.forecasts.get(fid) if isinstance(fid, str) else None
    if fc is None:
        raise ToolError("not_found", f"{tool}: no forecast with id {safe_repr(fid, 60)} was bought in this episode (ids: {list(ep.forecasts)})")
    res = forecast_plan(ep, fid)
    if res is None:
        c = ep.case
        raise ToolError(
            "horizon_too_short",
            f"{tool}: forecast {fid} covers steps 1..{fc['horizon']} but the target needs steps "
            f"{c.target_steps[0]}..{c.target_steps[1]} (horizon >= {c.horizon}); its credits stay charged",
        )
    return fid, res


def plan(ep: Episode, args: dict) -> dict:
    """``plan``: the optimal plan under a bought forecast (``forecast_id``) or a classical method."""
    check_keys(args, {"method", "forecast_id"}, "plan")
    label, res = _requested_plan(ep, args, "plan")
    key = "forecast_id" if label in ep.forecasts else "method"
    return {key: label, "plan": plan_payload(ep.case, res.plan), "expected_loss": res.expected_loss, "credits": 0}


def evaluate_plan(ep: Episode, args: dict) -> dict:
    """``evaluate_plan``: the expected loss of the agent's plan under a bought forecast or a classical
    method, next to the optimum under it."""
    check_keys(args, {"decisions", "levels", "method", "forecast_id"}, "evaluate_plan")
    label, res = _requested_plan(ep, args, "evaluate_plan")
    p = plan_from_args(ep.case, args, "evaluate_plan")
    key = "forecast_id" if label in ep.forecasts else "method"
    return {key: label, "expected_loss": plan_loss(res.cost, p.indices), "optimal_expected_loss": res.expected_loss}
