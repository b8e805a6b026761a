"""Free information tools: ``catalog`` (case, contract, methods, tariff, models, budget, calls) and
``history`` (the visible window only: nothing at or after ``as_of - 2 h``)."""
from __future__ import annotations

from typing import Any, Sequence

from fwgym.core.cases import HISTORY_HOURS
from fwgym.core.contract import ALPHA, BLOCK_HOURS, DECISION_IDS, GRID, LEVEL_LABELS, N_BLOCKS, RAMP
from fwgym.errors import ToolError
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.covering import covering_credits
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.core.series import hour_to_iso
from fwgym.core.tariff import TARIFF, tariff_rows
from fwgym.tools.actions import check_keys, int_arg, time_arg
from fwgym.tools.episode import Episode
from fwgym.tools.results import Catalog, CatalogBlock, CatalogModel

__all__ = ["catalog", "history"]

_TARIFF_ROWS = tuple((m, tuple((str(cb), p) for cb, p in t.items())) for m, t in TARIFF.items())  # JSON keys


def _tariff(models: Sequence[str]) -> dict[str, dict[str, list[int]]]:
    """The protocol's tariff table, then the rows of every pool model outside it (extended or plug-in)."""
    table = {m: {cb: list(p) for cb, p in rows} for m, rows in _TARIFF_ROWS}
    for m in models:
        if m not in table:
            table[m] = {str(cb): list(p) for cb, p in tariff_rows(m).items()}
    return table


def catalog(ep: Episode, args: dict[str, Any]) -> Catalog:
    """``catalog``: the case summary, the contract, the free methods, the tariff, the forecast pool
    (availability, price of the covering request), the budget and the call status (:class:`~fwgym.tools.results.Catalog`)."""
    check_keys(args, set(), "catalog")
    c = ep.case
    bounds = [hour_to_iso(c.target_start + BLOCK_HOURS * b) for b in range(N_BLOCKS + 1)]
    blocks: list[CatalogBlock] = [{"decision_id": d, "start": bounds[b], "end": bounds[b + 1]}
                                  for b, d in enumerate(DECISION_IDS)]
    return {
        "case": c.summary(),
        "contract": {
            "blocks": blocks,
            "scale": c.scale,
            "normalised_grid": list(LEVEL_LABELS),
            "capacity_grid": (GRID * c.scale).tolist(),
            "unit": c.series.unit,
            "ramp": RAMP,
            "surplus_price": ALPHA,
            "shortage_weights": c.shortage.tolist(),
            "loss": "mean over the 24 target hours of 0.3*max(a-y,0) + w_h*max(y-a,0), a and y divided by scale",
        },
        "methods": list(CLASSICAL_METHODS),
        "tariff": _tariff(ep.models),
        "models": [_model_entry(ep, m) for m in ep.models],
        "budget": {"budget": ep.budget, "spent": ep.spent, "remaining": ep.budget_left},
        "calls": {"limit": ep.max_calls, "used": ep.calls, "remaining": ep.calls_left},
        "tools": list(ep.tools),
        "task": ep.task,
    }


def _model_entry(ep: Episode, model: str) -> CatalogModel:
    f = ep.forecaster(model)
    av = f.availability()
    credits = covering_credits(model, ep.case)
    out: CatalogModel = {"model": model, "available": av.available, "quantile_levels": list(QUANTILE_LEVELS),
                         "min_context": f.min_context, "credits_full_context_covering_horizon": credits,
                         "affordable": credits <= ep.budget_left}
    if not av.available:
        out["unavailable_reason"] = av.reason
    if model == "chronos_bolt_tiny":
        out["note"] = "native horizon 64; longer horizons are a heuristic extension"
    return out


def history(ep: Episode, args: dict[str, Any]) -> dict[str, Any]:
    """``history``: timestamps and values of the last ``last`` visible hours (default 48) or of an
    inclusive ``start``/``end`` range inside the visible window."""
    check_keys(args, {"last", "start", "end"}, "history")
    c = ep.case
    if "start" in args or "end" in args:
        if "last" in args:
            raise ToolError("invalid_arguments", "history: give either 'last' or 'start'/'end', not both")
        start = time_arg(args, "start") if "start" in args else c.history_start
        end = time_arg(args, "end") if "end" in args else c.last_visible
        if not (c.history_start <= start <= c.last_visible and c.history_start <= end <= c.last_visible):
            raise ToolError(
                "out_of_range",
                f"history: visible hours are {hour_to_iso(c.history_start)} .. {hour_to_iso(c.last_visible)} "
                "(inclusive); the hours from as_of - 2 h on are never visible",
            )
        if end < start:
            raise ToolError("invalid_arguments", "history: 'end' is before 'start'")
    else:
        n = int_arg(args, "last", 1, HISTORY_HOURS, default=48)
        start, end = c.last_visible - n + 1, c.last_visible
    i0, i1 = start - c.history_start, end - c.history_start + 1
    return {
        "series_id": c.series_id,
        "unit": c.series.unit,
        "timestamps": [hour_to_iso(h) for h in range(start, end + 1)],
        "values": [float(v) for v in c.history[i0:i1]],
    }
