"""The tool-use mix: mean tool calls per case of every policy, stacked by tool."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from fwgym.plots.style import STYLES, check_path, figure_style, figure_width, freeze_ticks, new_figure, save_figure


def tools_figure(records: Sequence[dict], title: str | None = None, style: str = "paper", columns: int = 1,
                 height: float | None = None):
    """The tool-use mix as a matplotlib ``Figure`` (see :func:`plot_tools`)."""
    from fwgym.tools import REGISTRY

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
    with figure_style(style):
        fs = float(STYLES[style]["font.size"])
        width = figure_width(style, columns)
        fig = new_figure(width, height or max(2.0, 0.9 + len(policies) * fs * 1.6 / 72))
        ax = fig.subplots()
        import matplotlib

        cmap = matplotlib.colormaps["tab20"]
        left = np.zeros(len(policies))
        ys = np.arange(len(policies))
        fixed = {"submit": "0.78", "invalid": "#7f0000"}
        for k, t in enumerate(tools):
            h = np.array([totals[q][t] / len(by[q]) for q in policies])
            ax.barh(ys, h, left=left, color=fixed.get(t, cmap(k % 20)), edgecolor="white", lw=0.3, label=t,
                    height=0.75)
            left += h
        ax.set_yticks(ys, policies)
        ax.invert_yaxis()
        ax.set_xlabel("mean actions per case (submit included)")
        n = len(next(iter(by.values())))
        if title is not False:
            ax.set_title(title or f"tool-use mix ({n:,} cases per policy)")
        fig.legend(loc="outside lower center", ncol=min(len(tools), 4 if columns == 1 else 8), frameon=False,
                   title=None)
        ax.grid(axis="x", alpha=0.3, lw=0.4)
        ax.set_axisbelow(True)
        freeze_ticks(fig, style)
    return fig


def plot_tools(records: Sequence[dict], path: str | Path, title: str | None = None, style: str = "paper",
               columns: int = 1, height: float | None = None, mark: str | None = None,
               description: str | None = None) -> Path:
    """Tool-use mix: mean calls per case of each tool (stacked horizontal bars, one per policy;
    ``submit`` included, refused/invalid calls as ``invalid``). ``mark``, ``description``: a warning
    drawn in the figure and put in its metadata (:func:`save_figure`).

    Raises:
        ValueError: no records, bad extension, style or columns.
    """
    p = check_path(path)
    return save_figure(tools_figure(records, title=title, style=style, columns=columns, height=height), p, style,
                       mark=mark, description=description)
