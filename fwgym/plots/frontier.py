"""The loss-credits frontier: the suite's loss (decision loss, or capped RCRPS) against mean credits per
case, one point per policy with paired bootstrap 95% intervals against a reference policy, and lines of
equal S. Free policies (0 credits) sit in their own strip with a column of labels, priced ones on a
logarithmic credits axis beside it (shared y-axis)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fwgym.suites import DEFAULT_SUITE, SuiteMetric, suite_metric
from fwgym.core.scoring import BUDGET, aggregate
from fwgym.plots.data import intervals, panel_points, panel_sets, policy_kind
from fwgym.plots.style import (STYLES, check_path, figure_style, figure_width, freeze_ticks, legend_ncol, mark_figure,
                               new_figure, save_figure, text_width_in, wrap_text)


_STYLE = {  # kind -> (marker, colour, size (points^2 at paper size), label)
    "fixed": ("o", "#1f77b4", 16, "fixed free policy"),
    "priced": ("s", "#ff7f0e", 16, "priced forecast policy"),
    "selector": ("D", "#2ca02c", 13, "backtest selector"),
    "oracle": ("*", "#d62728", 42, "hindsight oracle"),
    "agent": ("^", "#9467bd", 22, "agent"),
}


def _spread_1d(anchor: np.ndarray, gap: float, lo: float, hi: float) -> np.ndarray:
    """Positions near ``anchor`` at least ``gap`` apart and inside ``[lo, hi]`` (when they fit):
    adjacent labels that would overlap are merged into blocks centred on their anchors' mean
    (the least-squares placement; pool-adjacent-violators), then blocks are shifted inside the bounds."""
    a = np.asarray(anchor, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    blocks: list[list] = []  # [start position, members (sorted anchor indices)]
    for i in order:
        blocks.append([a[i], [i]])
        while len(blocks) > 1:
            (s0, m0), (s1, m1) = blocks[-2], blocks[-1]
            if s0 + gap * len(m0) <= s1 + 1e-12:
                break
            members = m0 + m1
            centre = float(np.mean([a[j] - gap * k for k, j in enumerate(members)]))
            blocks[-2:] = [[centre, members]]
    out = np.empty_like(a)
    pos = [(s, m) for s, m in blocks]
    # shift into bounds: from the top down, then from the bottom up
    ceiling = hi
    for k in range(len(pos) - 1, -1, -1):
        s, m = pos[k]
        s = min(s, ceiling - gap * (len(m) - 1))
        pos[k] = (s, m)
        ceiling = s - gap
    floor_ = lo
    for k in range(len(pos)):
        s, m = pos[k]
        s = max(s, floor_)
        pos[k] = (s, m)
        floor_ = s + gap * len(m)
    for s, m in pos:
        for k, j in enumerate(m):
            out[j] = s + gap * k
    return out


_FREE_X = {"names": (0.10, 0.19, 0.28), "numbers": (0.10, 0.33, 0.56)}
_FREE_LABEL_X = 0.40


def frontier_figure(records: Sequence[dict], title: str | None = None, budget: float = BUDGET,
                    agents: Sequence[str] = (), n_lines: int = 5, panels: str = "auto", suite: str | None = None,
                    style: str = "paper", columns: int | None = None, reference: str | None = "auto",
                    n_boot: int | None = None, seed: int | None = None, credit_weight: float | None = None,
                    height: float | None = None, labels: str = "auto", mark: str | None = None):
    """The loss-credits frontier as a matplotlib ``Figure`` (see :func:`plot_frontier` for the arguments;
    ``mark`` is drawn here, before the layout is frozen: :func:`mark_figure`)."""
    from matplotlib.lines import Line2D

    from fwgym.evaluation import BOOT_SEED, N_BOOT, by_policy, check_result_set, reference_policy

    check_result_set(records)
    metric = suite_metric(suite or DEFAULT_SUITE, credit_weight)
    groups = by_policy(records)
    totals = {p: aggregate(rs, fields=("S", "credits")) for p, rs in groups.items()}
    order = sorted(groups, key=lambda p: (totals[p]["S"], p))  # rank by S: the key's numbers
    number = {p: i + 1 for i, p in enumerate(order)}
    reference = reference_policy(order, reference)
    if n_lines < 0:
        raise ValueError(f"n_lines must be >= 0, got {n_lines}")
    if labels not in ("auto", "names", "numbers"):
        raise ValueError(f"labels must be 'auto', 'names' or 'numbers', got {labels!r}")
    if panels == "auto" and columns == 1:
        panels = "all"
    sets = panel_sets(records, panels)
    if columns is None:
        columns = 1 if len(sets) == 1 else 2
    width = figure_width(style, columns)
    n_boot = N_BOOT if n_boot is None else n_boot
    seed = BOOT_SEED if seed is None else seed
    kinds = {p: ("agent" if p in agents else policy_kind(p, totals[p]["credits"])) for p in order}
    with figure_style(style):
        fs = float(STYLES[style]["font.size"])
        per_row = max(1, min(len(sets), 3 if columns == 2 else 1))
        rows = math.ceil(len(sets) / per_row)
        probe = new_figure(width, 2.0, layout=None)
        panel_w = width / per_row - 0.55 - text_width_in(probe, ["S=0.75"], fs)  # y-axis and S labels
        plans = []
        fits = True
        for label, recs, exact in sets:
            pts = panel_points(recs, metric)
            free = [q for q in pts if q["credits"] <= 0]
            paid = [q for q in pts if q["credits"] > 0]
            name_w = text_width_in(probe, [q["policy"] for q in free], fs) if free else 0.0
            paid_w = text_width_in(probe, [q["policy"] for q in paid], fs) if paid else 0.0
            free_in = _FREE_LABEL_X + name_w + 0.05 if free else 0.0
            paid_in = panel_w - free_in
            fits &= (not paid or paid_in >= max(0.9, paid_w + 0.35)) and (not free or free_in <= panel_w)
            plans.append((label, recs, exact, pts, free, paid))
        mode = labels if labels != "auto" else ("names" if fits else "numbers")
        num_w = text_width_in(probe, [str(len(order))], fs)
        if mode == "numbers":
            entries = {f"{number[p]}  {p}": _marker_handle(kinds[p], fs) for p in order}
        else:
            entries = {_STYLE[k][3]: _marker_handle(k, fs) for k in _STYLE if k in set(kinds.values())}
        entries[f"equal {metric.formula.split(',')[0]}"] = Line2D([], [], color="0.6", lw=0.8, ls="--")
        if reference is not None:
            entries[f"95% CI: paired bootstrap\nvs {reference}"] = Line2D([], [], color="0.35", lw=0.8,
                                                                           marker="|", ms=5)
        ncol = legend_ncol(probe, list(entries), fs, width)
        legend_h = (math.ceil(len(entries) / ncol) + (reference is not None)) * fs * 1.45 / 72 + 0.1
        top = 0.2 * (bool(title) + bool(mark))  # the title and mark lines (within a given height)
        row_h = (height - legend_h - top) / rows if height else max(2.1, min(3.2, 0.8 + len(order) * fs * 1.35 / 72))
        fig = new_figure(width, row_h * rows + legend_h + top)
        sub = fig.subfigures(rows, per_row, squeeze=False)
        handles: dict[str, Any] = {}
        placements = []
        for k, (label, recs, exact, pts, free, paid) in enumerate(plans):
            sf = sub[k // per_row][k % per_row]
            if mode == "names":
                free_in = _FREE_LABEL_X + text_width_in(probe, [q["policy"] for q in free], fs) + 0.08
            else:
                free_in = _FREE_X["numbers"][2] + num_w + 0.14
            free_in = free_in if free else 0.0
            placements.append(_frontier_panel(sf, label, recs, exact, pts, free, paid, metric, budget, kinds, number,
                                              mode, n_lines, reference, n_boot, seed, handles, fs, free_in, panel_w))
        for k in range(len(plans), rows * per_row):
            sub[k // per_row][k % per_row].set_visible(False)
        fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=ncol, frameon=False,
                   handletextpad=0.3, columnspacing=0.9)
        if title:
            fig.suptitle(wrap_text(probe, title.split(" "), float(STYLES[style]["figure.titlesize"]), width - 0.1))
        if mark:
            mark_figure(fig, mark, style)
        # freeze the layout, then place the labels in display space (they need the final axes sizes)
        freeze_ticks(fig, style)
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
        for place in placements:
            place()
    return fig


def _marker_handle(kind: str, fs: float):
    from matplotlib.lines import Line2D

    marker, colour, size, _ = _STYLE[kind]
    return Line2D([], [], ls="none", marker=marker, markersize=math.sqrt(size) * fs / 7.0, color=colour,
                  markeredgecolor="black", markeredgewidth=0.4)


def _frontier_panel(sf, label, recs, exact, pts, free, paid, metric: SuiteMetric, budget, kinds, number, mode,  # noqa: C901 - matplotlib drawing: one branch per optional artist and legend key
                    n_lines, reference, n_boot, seed, handles, fs, free_in, panel_w):
    """Draw one panel into subfigure ``sf``; returns a callable placing the point labels after layout."""
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullFormatter

    if metric.has_floor:
        floor = pts[0]["floor"]  # policy-independent
        ratios = sorted((q["loss"] - q["floor"]) / q["R"] for q in pts if abs(q["R"]) > 1e-12)
        sigma = ratios[len(ratios) // 2] if ratios else 1.0
    else:
        floor, sigma = 0.0, 1.0
    ci = intervals(recs, reference, metric.y_field, n_boot, seed)
    ys = np.array([q["y"] for q in pts] + [v for q in pts for v in ci.get(q["policy"], {}).get(metric.y_field, ())])
    y_lo = min(float(ys.min()), floor) if metric.has_floor else float(ys.min())
    y_hi = float(ys.max())
    span = (y_hi - y_lo) or max(abs(y_hi), 1e-3)
    ylim = (y_lo - 0.05 * span, y_hi + 0.07 * span)
    s_max = max(float(max(q["S"] for q in pts)), 1e-3)
    levels = [s for s in MaxNLocator(nbins=max(n_lines, 1), steps=[1, 2, 2.5, 5, 10]).tick_values(0, s_max)
              if s >= 0] if n_lines else []
    if free and paid:
        ax_f, ax_p = sf.subplots(1, 2, sharey=True, gridspec_kw={
            "width_ratios": [free_in, max(panel_w - free_in, 0.6)], "wspace": 0.0})
    elif free:
        ax_f, ax_p = sf.subplots(), None
    else:
        ax_f, ax_p = None, sf.subplots()
    axes = [a for a in (ax_f, ax_p) if a is not None]
    for ax in axes:
        ax.set_ylim(*ylim)
        ax.grid(alpha=0.3, lw=0.4)
        ax.set_axisbelow(True)
    x = None
    if paid:
        c = [q["credits"] for q in paid]
        lo_c = [v for q in paid if q["policy"] in ci for v in (ci[q["policy"]]["credits"][0],) if v > 0]
        hi_c = [ci[q["policy"]]["credits"][1] for q in paid if q["policy"] in ci]
        xmin = 10 ** math.floor(math.log10(max(min(c + lo_c) / 1.5, 1.0)))
        xmax = 10 ** math.ceil(math.log10(max(c + hi_c + [budget * 0.02]) * 1.5))
        ax_p.set_xscale("log")
        ax_p.set_xlim(xmin, xmax)
        x = np.geomspace(xmin, xmax, 60)
    # equal-S lines
    for s in levels:
        if ax_f is not None:
            ax_f.axhline(float(metric.equal_s_y(s, np.zeros(1), floor, sigma, budget)[0]), color="0.6", lw=0.7,
                         ls="--", zorder=1, label=f"_equal S={s:g}")
        if ax_p is not None:
            ax_p.plot(x, metric.equal_s_y(s, x, floor, sigma, budget), color="0.6", lw=0.7, ls="--", zorder=1,
                      label=f"_equal S={s:g}")
        edge = ax_p if ax_p is not None else ax_f
        x_edge = edge.get_xlim()[1] if edge is ax_p else 0.0
        y_edge = float(metric.equal_s_y(s, np.array([x_edge]), floor, sigma, budget)[0])
        if ylim[0] < y_edge < ylim[1]:
            edge.annotate(f"S={s:g}", (1.0, y_edge), xycoords=("axes fraction", "data"), xytext=(2, 0),
                          textcoords="offset points", fontsize=fs, color="0.4", va="center", ha="left",
                          annotation_clip=False)
    free_sorted = sorted(free, key=lambda q: (q["y"], q["policy"]))
    dodge = _FREE_X[mode]
    xpos = {q["policy"]: dodge[i % 3] for i, q in enumerate(free_sorted)}  # dodged: intervals side by side
    for q in pts:
        marker, colour, size, name = _STYLE[kinds[q["policy"]]]
        ax = ax_f if q["credits"] <= 0 else ax_p
        xq = xpos.get(q["policy"], q["credits"])
        if q["policy"] in ci:
            (ylo, yhi), (clo, chi) = ci[q["policy"]][metric.y_field], ci[q["policy"]]["credits"]
            xerr = None
            if ax is ax_p:
                clo = max(clo, ax_p.get_xlim()[0])
                xerr = [[max(xq - clo, 0)], [max(chi - xq, 0)]]
            ax.errorbar([xq], [q["y"]], yerr=[[max(q["y"] - ylo, 0)], [max(yhi - q["y"], 0)]], xerr=xerr,
                        fmt="none", ecolor=colour, elinewidth=0.7, capsize=0, alpha=0.75, zorder=2)
        ax.scatter([xq], [q["y"]], marker=marker, s=size * (fs / 7.0) ** 2, color=colour, edgecolor="black",
                   linewidth=0.4, zorder=3)
    if ax_f is not None:
        ax_f.set_xlim(0.0, free_in)
        ax_f.xaxis.set_major_locator(FixedLocator([dodge[1]]))
        ax_f.set_xticklabels(["0"])
        ax_f.xaxis.set_minor_formatter(NullFormatter())
        ax_f.set_ylabel(metric.y_label)
    if ax_f is not None and ax_p is not None:
        sf.supxlabel("mean credits per case", fontsize=fs)
    elif ax_p is not None:
        ax_p.set_xlabel("mean credits per case (log scale)")
    else:
        ax_f.set_xlabel("mean credits per case")
    if ax_p is not None:
        if ax_f is None:
            ax_p.set_ylabel(metric.y_label)
        else:
            ax_p.tick_params(axis="y", which="both", left=False)
            for side, a_ in (("right", ax_f), ("left", ax_p)):
                a_.spines[side].set_linestyle((0, (2, 2)))
                a_.spines[side].set_color("0.55")
    n_cases = len({r["case_id"] for r in recs})
    if metric.has_floor:
        note = f"σ = {sigma:.4f}" if exact else f"effective σ = {sigma:.4f}"
    else:
        note = f"w = {metric.credit_weight:g}"
    sf.suptitle(f"{label}: {n_cases:,} cases, {note}", fontsize=fs + 0.5)

    def place():
        fig = sf.figure
        gap_px = fs * 1.25 * fig.dpi / 72
        column = mode == "names"
        sets = [(ax_p, paid, False)]
        if ax_f is not None:
            sets += [(ax_f, free_sorted, True)] if column else [
                (ax_f, [q for q in free_sorted if xpos[q["policy"]] == d], False) for d in dodge]
        for ax, group, column in sets:
            if ax is None or not group:
                continue
            tr = ax.transData
            bb = ax.get_window_extent()
            xy = np.array([tr.transform((xpos.get(q["policy"], q["credits"]), q["y"])) for q in group])
            ly = _spread_1d(xy[:, 1], gap_px, bb.y0 + gap_px * 0.6, bb.y1 - gap_px * 0.6)
            for q, (px, py), y_lab in zip(group, xy, ly):
                text = q["policy"] if mode == "names" else str(number[q["policy"]])
                if column:
                    tx, ha = bb.x0 + _FREE_LABEL_X * fig.dpi, "left"
                else:
                    tw = text_width_in(fig, [text], fs) * fig.dpi
                    right = px + 5 + tw > bb.x1
                    tx, ha = (px - 5, "right") if right else (px + 5, "left")
                moved = abs(y_lab - py) > 0.5 or column
                inv = tr.inverted()
                ann = ax.annotate(text, inv.transform((px, py)), xytext=inv.transform((tx, y_lab)),
                                  textcoords="data", fontsize=fs, va="center", ha=ha, zorder=4, annotation_clip=False,
                                  arrowprops=dict(arrowstyle="-", lw=0.4, color="0.55", shrinkA=0, shrinkB=2.0)
                                  if moved else None)
                ann.set_gid(f"point-label:{q['policy']}")

    return place


def plot_frontier(records: Sequence[dict], path: str | Path, title: str | None = None,
                  budget: float = BUDGET, agents: Sequence[str] = (), n_lines: int = 5, panels: str = "auto",
                  suite: str | None = None, style: str = "paper", columns: int | None = None,
                  reference: str | None = "auto", n_boot: int | None = None, seed: int | None = None,
                  credit_weight: float | None = None, height: float | None = None, labels: str = "auto",
                  mark: str | None = None, description: str | None = None) -> Path:
    """Loss-credits frontier of result records.

    One point per policy at (mean credits per case, aggregate loss of the suite: the decision loss
    in the decision and context suites, ``R = min(RCRPS, 5)`` in the forecast suite), with the
    95% interval of the paired series-cluster bootstrap of its difference to ``reference``
    (:func:`fwgym.evaluation.paired_bootstrap`, both axes) drawn around the point, and dashed
    lines of equal S (:meth:`SuiteMetric.equal_s_y`). Free policies sit in a strip at 0 credits with
    a column of labels; priced ones on a logarithmic credits axis beside it (same y-axis). Within a
    domain the equal-S lines are exact; across domains the aggregate R is not a function of the
    aggregate loss, so an all-domains panel of a decision suite uses the effective
    ``sigma = (loss - F) / R`` of the median policy and says so.

    Args:
        records: result records (:data:`fwgym.evaluation.RECORD_FIELDS`) of one or more policies on the
            same cases, all of one suite.
        path: output file (``.png``, ``.svg`` or ``.pdf``).
        title: figure title (default none: papers caption their figures).
        budget: B of the score (credits term), default 113,726.
        agents: policy names to draw as agents (purple triangles) rather than by name pattern.
        n_lines: about this many equal-S lines per panel (0: none).
        panels: ``"all"`` (one panel of every case), ``"domains"`` (one per domain), ``"both"``, or
            ``"auto"`` (``"all"`` in one column, else the all-cases panel plus one per domain when
            several are present).
        suite: the records' suite, as their run manifest names it (:attr:`fwgym.evaluation.ResultSet.settings`,
            :func:`results_suite`; default the decision suite).
        style: ``"paper"`` or ``"screen"`` (:data:`STYLES`). columns: 1 (3.3 in wide in the paper
            style) or 2 (7.0 in); default 1 for one panel, else 2.
        reference: policy the intervals are paired with (``"auto"``: hour_of_day_empirical or its
            samples variant when present; ``None``: no intervals).
        n_boot, seed: bootstrap draws and seed (default the protocol's 10,000 and 1701).
        credit_weight: the forecast suite's ``w``, as the run manifest states it (default 0).
        height: figure height in inches (default from the number of policies).
        labels: ``"names"`` (policy names beside the points), ``"numbers"`` (each point numbered by
            its rank by S, the names in the legend) or ``"auto"`` (names when they fit the width).
        mark, description: a warning drawn in the figure and put in its metadata (:func:`save_figure`),
            e.g. ``"NOT HASH-CHECKED"`` for records no manifest vouches for.

    Returns:
        The path written.

    Raises:
        ValueError: no records, bad extension, style, columns, panels or labels, an unknown reference, or
            policies on different cases.
    """
    p = check_path(path)
    fig = frontier_figure(records, title=title, budget=budget, agents=agents, n_lines=n_lines, panels=panels,
                          suite=suite, style=style, columns=columns, reference=reference, n_boot=n_boot, seed=seed,
                          credit_weight=credit_weight, height=height, labels=labels, mark=mark)
    return save_figure(fig, p, style, mark=mark, description=description)
