"""Figures from result records (DESIGN §9): the loss-credits frontier, a case view and the tool-use mix.

Matplotlib is an optional dependency (``pip install fwgym[plots]``). Figures are drawn on
``matplotlib.figure.Figure`` objects with the Agg canvas, so importing this module never changes the
global pyplot backend. The output format follows the file extension: ``.png``, ``.svg`` or ``.pdf``.

* :func:`plot_frontier` — aggregate decision loss (y) against mean credits per case (x), one point per
  policy, with lines of equal score ``S = 0.5 * ((loss - F) / sigma + credits / B)``; oracles,
  selectors and priced policies get their own markers. One panel for all cases and, when several
  domains are present, one per domain (within a domain the lines are exact; across domains the
  aggregate R is not a function of the aggregate loss, so the all-cases panel uses the effective
  ``sigma = (loss - F) / R`` of the median policy and says so).
* :func:`plot_case` — one case: the tail of the visible history, the as-of time and the unseen
  hours, an optional forecast quantile band, the submitted capacities as steps, the perfect-demand
  plan, the realised demand (hindsight) and optional Region-of-Interest shading.
* :func:`plot_tools` — mean tool calls per case of every policy, stacked by tool.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from fwgym.scoring import BUDGET, aggregate

FORMATS = (".png", ".svg", ".pdf")
ORACLE_NAMES = ("perfect_demand", "catalog_oracle", "free_menu_oracle")


def _figure(width: float, height: float):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("fwgym.plots needs matplotlib: pip install 'fwgym[plots]'") from exc
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _check_path(path: str | Path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"output file {p} must end in one of {list(FORMATS)} (the format follows the extension)")
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    return p


def _save(fig, path: Path) -> Path:
    fig.savefig(path, metadata={"Software": "fwgym"} if path.suffix.lower() == ".png" else None)
    return path


def policy_kind(name: str, credits: float = 0.0) -> str:
    """``"oracle"``, ``"selector"``, ``"priced"`` (mean credits > 0) or ``"fixed"`` (display category)."""
    if name in ORACLE_NAMES or "oracle" in name:
        return "oracle"
    if "selector" in name:
        return "selector"
    return "priced" if credits > 0 else "fixed"


_STYLE = {  # kind -> (marker, colour, size, label)
    "fixed": ("o", "#1f77b4", 42, "fixed free policy"),
    "priced": ("s", "#ff7f0e", 46, "priced forecast policy"),
    "selector": ("D", "#2ca02c", 46, "backtest selector"),
    "oracle": ("*", "#d62728", 150, "hindsight oracle"),
    "agent": ("^", "#9467bd", 60, "agent"),
}


def _points(records: Sequence[dict]) -> list[dict]:
    out = []
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by[r["policy"]].append(r)
    for p, recs in by.items():
        a = aggregate(recs)
        out.append({"policy": p, **a})
    return out


def plot_frontier(records: Sequence[dict], path: str | Path, title: str | None = None,
                  budget: float = BUDGET, agents: Sequence[str] = (), n_lines: int = 6,
                  domain_panels: bool = True) -> Path:
    """Loss-credits frontier of result records.

    Args:
        records: result records (:data:`fwgym.evaluation.RECORD_FIELDS`) of one or more policies on the
            same cases.
        path: output file (``.png``, ``.svg`` or ``.pdf``).
        title: figure title (default: split and case count).
        budget: B of the score (credits term), default 113,726.
        agents: policy names to draw as agents (purple triangles) rather than by name pattern.
        n_lines: number of equal-S lines per panel.
        domain_panels: add one panel per domain when several are present (``False``: the all-cases panel only).

    Returns:
        The path written.

    Raises:
        ValueError: no records, bad extension, or policies on different cases.
    """
    from fwgym.evaluation import check_result_set

    p = _check_path(path)
    check_result_set(records)
    domains = sorted({r["domain"] for r in records})
    panels = [("all cases" if len(domains) > 1 else domains[0], list(records))] + ([(d, [r for r in records if r["domain"] == d]) for d in domains]
                                               if len(domains) > 1 and domain_panels else [])
    fig = _figure(6.2 * len(panels), 5.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    handles = {}
    for ax, (label, recs) in zip(axes, panels):
        pts = _points(recs)
        floor = pts[0]["floor"]  # policy-independent
        ratios = sorted((q["loss"] - q["floor"]) / q["R"] for q in pts if q["R"] > 1e-12)
        sigma = ratios[len(ratios) // 2] if ratios else 1.0
        exact = len({r["domain"] for r in recs}) == 1
        xs = np.array([q["credits"] for q in pts])
        xmax = max(float(xs.max()) * 1.12, 0.02 * budget)
        x = np.linspace(-0.02 * xmax, xmax, 50)
        s_vals = np.array([q["S"] for q in pts])
        levels = np.unique(np.round(np.linspace(0.0, max(float(s_vals.max()), 0.05), n_lines), 3))
        for s in levels:
            y = floor + sigma * (2 * s - x / budget)
            ax.plot(x, y, color="0.75", lw=0.8, ls="--", zorder=1)
            xl = x[0] + 0.55 * (x[-1] - x[0])
            ax.annotate(f"S={s:g}", (xl, floor + sigma * (2 * s - xl / budget)), fontsize=7, color="0.45",
                        ha="center", va="bottom")
        ys = np.array([q["loss"] for q in pts])
        yr = float(ys.max() - min(ys.min(), floor)) or 1.0
        label_y = _spread(xs, ys, gap=0.045 * yr, xtol=0.1 * (x[-1] - x[0]))
        for q, ly in zip(pts, label_y):
            kind = "agent" if q["policy"] in agents else policy_kind(q["policy"], q["credits"])
            marker, colour, size, name = _STYLE[kind]
            h = ax.scatter(q["credits"], q["loss"], marker=marker, s=size, color=colour, edgecolor="black",
                           linewidth=0.5, zorder=3)
            handles.setdefault(name, h)
            moved = abs(ly - q["loss"]) > 1e-3 * yr
            right = q["credits"] > x[0] + 0.7 * (x[-1] - x[0])  # near the right edge: label on the left
            dx = (-0.03 if right else 0.03) * (x[-1] - x[0])
            ax.annotate(q["policy"], (q["credits"], q["loss"]), xytext=(q["credits"] + dx, ly), textcoords="data",
                        fontsize=7, va="center", ha="right" if right else "left", zorder=4,
                        arrowprops=dict(arrowstyle="-", lw=0.6, color="0.35", shrinkA=0, shrinkB=3) if moved else None)
        ax.set_xlim(x[0], x[-1])
        lo_y = min(float(ys.min()), floor)
        ax.set_ylim(lo_y - 0.04 * yr, max(float(label_y.max()), float(ys.max())) + 0.05 * yr)
        ax.set_xlabel("mean credits spent per case (credits)")
        ax.set_ylabel("aggregate decision loss (mean hourly cost, scale-normalised)")
        note = "exact" if exact else "effective"
        ax.set_title(f"{label} ({len({r['case_id'] for r in recs})} cases)\n"
                     f"dashed: equal S, sigma={sigma:.4f} ({note}), B={budget:,.0f}", fontsize=9)
        ax.grid(alpha=0.25)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=len(handles), fontsize=8)
    split = sorted({r.get("split") for r in records if r.get("split")})
    fig.suptitle(title or f"Loss vs credits ({'/'.join(split) or 'results'}): lower-left is better", fontsize=11)
    return _save(fig, p)


def _spread(xs: np.ndarray, ys: np.ndarray, gap: float, xtol: float) -> np.ndarray:
    """Label heights: points within ``xtol`` of their x-neighbour form a column; inside a column, labels
    are taken in increasing y and each is raised to at least ``gap`` above the previous one."""
    out = ys.astype(float).copy()
    order = list(np.argsort(xs, kind="stable"))
    cols = [[order[0]]]
    for i in order[1:]:
        if xs[i] - xs[cols[-1][-1]] <= xtol:
            cols[-1].append(i)
        else:
            cols.append([i])
    for col in cols:
        prev = -np.inf
        for i in sorted(col, key=lambda i: (ys[i], i)):
            out[i] = max(ys[i], prev + gap)
            prev = out[i]
    return out


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    out, start = [], None
    for i, v in enumerate(list(mask) + [False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            out.append((start, i))
            start = None
    return out


def _band_for(case, policy: str) -> tuple[np.ndarray, str] | None:
    """(24, 3) quantiles 0.1/0.5/0.9 of a fixed policy's distribution on the target hours, or None."""
    from fwgym.forecasters.classical import CLASSICAL_METHODS, classical_distribution

    if policy in CLASSICAL_METHODS:
        s = classical_distribution(policy, case.history, case.history_hours, case.target_hours)
        return np.quantile(s, [0.1, 0.5, 0.9], axis=1).T, f"{policy} samples, 10-90%"
    from fwgym.forecasters.covering import covering_forecast, target_quantiles
    from fwgym.forecasters.registry import PRICED_MODELS, get_forecaster

    if policy in PRICED_MODELS:
        f = get_forecaster(policy)
        if not f.availability().available:
            return None
        try:
            f.load()
            q = covering_forecast(case, f)  # what the policy buys: the forecast tool's request and cache entry
        except Exception:
            return None
        return target_quantiles(case, q)[:, [0, 4, 8]], f"{policy} quantiles 0.1-0.9"
    return None


def plot_case(records: Sequence[dict], case_id: str, policy: str, path: str | Path, roi=None,
              quantiles: np.ndarray | None = None, history_hours: int = 168) -> Path:
    """Case view of one (case, policy) record.

    Args:
        records: result records holding the (case, policy) pair.
        case_id, policy: which record.
        path: output file (``.png``, ``.svg`` or ``.pdf``).
        roi: Region of Interest to shade: a bool mask of the 24 target hours, or ``[(start, stop), ...]``
            hour offsets from the target start (stop exclusive). Default: none.
        quantiles: forecast band to draw, shape (24, Q) with Q >= 2 (first and last columns are the band
            edges, a middle column the median). Default: the policy's own distribution when it is a
            fixed classical or available priced policy, else none.
        history_hours: hours of visible history shown before the cut-off (1..336).

    Returns:
        The path written.

    Raises:
        ValueError: no such record, bad extension or arguments.
    """
    from fwgym.cases import HISTORY_HOURS, get_case
    from fwgym.optimizer import perfect_demand_plan

    p = _check_path(path)
    rec = next((r for r in records if r["case_id"] == case_id and r["policy"] == policy), None)
    if rec is None:
        have = sorted({r["policy"] for r in records if r["case_id"] == case_id})
        raise ValueError(f"no record of policy {policy!r} on case {case_id!r}"
                         + (f" (policies on that case: {have})" if have else " (case not in the results)"))
    if not 1 <= history_hours <= HISTORY_HOURS:
        raise ValueError(f"history_hours must be in 1..{HISTORY_HOURS}, got {history_hours}")
    case = get_case(case_id)
    to_dt = lambda h: np.asarray(h, dtype="int64").astype("datetime64[h]")  # noqa: E731
    fig = _figure(11, 4.8)
    ax = fig.subplots()
    hist_h = case.history_hours[-history_hours:]
    ax.plot(to_dt(hist_h), case.history[-history_hours:], color="0.25", lw=1.0, label="visible history")
    ax.axvspan(to_dt(case.last_visible + 1), to_dt(case.as_of), color="0.85", alpha=0.6, lw=0,
               label="unseen hours before as_of")
    ax.axvline(to_dt(case.as_of), color="0.35", ls=":", lw=1.0)
    ax.annotate("as_of", (to_dt(case.as_of), 1.0), xycoords=("data", "axes fraction"), fontsize=8,
                ha="left", va="top", xytext=(3, -3), textcoords="offset points")
    edges = to_dt(np.arange(case.target_start, case.target_start + 25))
    centre = to_dt(case.target_hours)
    band = None
    if quantiles is not None:
        q = np.asarray(quantiles, dtype=np.float64)
        if q.ndim != 2 or q.shape[0] != 24 or q.shape[1] < 2:
            raise ValueError(f"quantiles must have shape (24, Q >= 2), got {q.shape}")
        band = (q[:, [0, q.shape[1] // 2, -1]], "forecast band")
    else:
        band = _band_for(case, policy)
    if band is not None:
        b, label = band
        ax.fill_between(centre, b[:, 0], b[:, 2], color="#1f77b4", alpha=0.18, lw=0, label=label)
        ax.plot(centre, b[:, 1], color="#1f77b4", lw=0.8, ls="--", label="forecast median")
    y = case.target()
    best = perfect_demand_plan(y, case.scale, case.shortage).plan
    ax.step(edges, np.append(np.repeat(best.values, 3), best.values[-1]), where="post", color="#2ca02c",
            lw=1.0, ls="--", label="perfect-demand plan")
    if rec.get("levels"):
        cap = np.repeat(np.asarray(rec["levels"], dtype=np.float64) * case.scale, 3)
        ax.step(edges, np.append(cap, cap[-1]), where="post", color="#d62728", lw=2.0,
                label=f"submitted capacities ({policy})")
    ax.plot(centre, y, color="black", lw=1.4, marker=".", ms=4, label="realised demand (hindsight)")
    if roi is not None:
        arr = np.asarray(roi)
        spans = _runs(arr) if arr.dtype == bool and arr.shape == (24,) else [tuple(map(int, s)) for s in roi]
        for k, (a, b_) in enumerate(spans):
            if not 0 <= a < b_ <= 24:
                raise ValueError(f"roi span {(a, b_)} is not inside the 24 target hours")
            ax.axvspan(edges[a], edges[b_], color="#ffbf00", alpha=0.22, lw=0,
                       label="region of interest" if k == 0 else None)
    status = "valid" if rec.get("valid") else f"INVALID ({rec.get('status')})"
    ax.set_title(f"{case_id} - {policy}: loss {rec['loss']:.4f} (floor {rec['floor']:.4f}), S {rec['S']:.3f}, "
                 f"credits {rec['credits']:,}, {status}", fontsize=10)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(case.series.unit)
    ax.grid(alpha=0.25)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    import matplotlib.dates as mdates

    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    return _save(fig, p)


def plot_tools(records: Sequence[dict], path: str | Path, title: str | None = None) -> Path:
    """Tool-use mix: mean calls per case of each tool (stacked bars, one bar per policy; ``submit``
    included, refused/invalid calls as ``invalid``).

    Raises:
        ValueError: no records or bad extension.
    """
    from fwgym.tools import REGISTRY

    p = _check_path(path)
    if not records:
        raise ValueError("no result records")
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by[r["policy"]].append(r)
    totals = {pol: Counter() for pol in by}
    for pol, recs in by.items():
        for r in recs:
            totals[pol].update(r.get("tool_counts") or {})
    seen = set().union(*[set(c) for c in totals.values()])
    tools = [t for t in REGISTRY if t in seen] + sorted(seen - set(REGISTRY))
    policies = sorted(by, key=lambda q: (-sum(totals[q].values()) / len(by[q]), q))
    fig = _figure(max(6.0, 0.55 * len(policies) + 3), 4.8)
    ax = fig.subplots()
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    bottom = np.zeros(len(policies))
    xs = np.arange(len(policies))
    fixed = {"submit": "0.78", "invalid": "#7f0000"}
    for k, t in enumerate(tools):
        h = np.array([totals[q][t] / len(by[q]) for q in policies])
        ax.bar(xs, h, bottom=bottom, color=fixed.get(t, cmap(k % 20)), edgecolor="white", lw=0.4, label=t)
        bottom += h
    ax.set_xticks(xs, policies, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("mean tool calls per case")
    ax.set_title(title or f"Tool-use mix ({len(next(iter(by.values())))} cases per policy)", fontsize=10)
    ax.legend(fontsize=7, title="tool", title_fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.25)
    return _save(fig, p)


__all__ = ["plot_frontier", "plot_case", "plot_tools", "policy_kind", "FORMATS"]
