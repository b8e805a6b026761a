"""Figures from result records (DESIGN §9): the loss-credits frontier, a case view and the tool-use mix.

Matplotlib is an optional dependency (``pip install fwgym[plots]``). Figures are drawn on
``matplotlib.figure.Figure`` objects with the Agg canvas, so importing this module never changes the
global pyplot backend. The output format follows the file extension: ``.png``, ``.svg`` or ``.pdf``.

Styles (:data:`STYLES`): ``"paper"`` (the default) sizes a figure for one column (3.3 in wide) or two
columns / a page (7.0 in) with every text at least 7 pt at that size; ``"screen"`` is larger (the HTML
report's). Every style embeds TrueType (Type 42) fonts in PDF and PostScript, never Type 3.

Every figure names the metric of its suite (:func:`suite_metric`): the decision and context suites
score ``S = (R + c/B) / 2`` with ``R = (loss - F) / sigma`` (the context suite on the
scenario-transformed target), the forecast suite ``S = R + w * c/B`` with ``R = min(RCRPS, 5)``
(``w`` = the env's ``credit_weight``, as the run manifest states it).

* :func:`frontier_figure` / :func:`plot_frontier` — the suite's loss (decision loss, or capped RCRPS)
  against mean credits per case, one point per policy with paired bootstrap 95% intervals against a
  reference policy, and lines of equal S. Free policies (0 credits) sit in their own strip with a
  column of labels, priced ones on a logarithmic credits axis beside it (shared y-axis).
* :func:`case_figure` / :func:`plot_case` — one case: the tail of the visible history, the as-of time
  and the unseen hours, forecast bands (the policy's own, those bought in a trace), the submitted
  capacities or the submitted forecast, the perfect-demand plan and the scored target (and the raw
  series where a scenario changed it), with a target-day zoom for week-ahead cases.
* :func:`tools_figure` / :func:`plot_tools` — mean tool calls per case of every policy, stacked by tool.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from fwgym.core.cases import CHART_HISTORY_HOURS
from fwgym.domains import get_domain
from fwgym.suites import DEFAULT_SUITE, SUITE_NAMES, SuiteMetric, get_suite, suite_metric
from fwgym.core.scoring import BUDGET, aggregate

FORMATS = (".png", ".svg", ".pdf")
ORACLE_NAMES = ("perfect_demand", "catalog_oracle", "free_menu_oracle")

#: figure widths (inches) of the paper style: one column, two columns (a page)
PAPER_WIDTHS = {1: 3.3, 2: 7.0}
#: the smallest font size (points) of any text in a paper-style figure
MIN_FONT_PT = 7.0

_COMMON_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none", "svg.hashsalt": "fwgym",
              "font.family": ["DejaVu Sans", "sans-serif"], "axes.unicode_minus": True,
              "path.simplify": True, "savefig.dpi": 300, "figure.dpi": 100}
#: matplotlib settings of each style (fonts in points at the figure's printed size)
STYLES: dict[str, dict] = {
    "paper": {**_COMMON_RC, "font.size": 7.0, "axes.titlesize": 7.5, "axes.labelsize": 7.0,
              "xtick.labelsize": 7.0, "ytick.labelsize": 7.0, "legend.fontsize": 7.0, "figure.titlesize": 8.0,
              "axes.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6, "xtick.minor.width": 0.4,
              "ytick.minor.width": 0.4, "xtick.major.size": 2.5, "ytick.major.size": 2.5, "xtick.minor.size": 1.5,
              "ytick.minor.size": 1.5, "lines.linewidth": 1.0, "lines.markersize": 4.0, "grid.linewidth": 0.4,
              "legend.handlelength": 1.6, "legend.borderpad": 0.3, "legend.labelspacing": 0.3,
              "legend.columnspacing": 1.0, "legend.handletextpad": 0.4, "axes.titlepad": 3.0,
              "axes.labelpad": 2.0, "xtick.major.pad": 2.0, "ytick.major.pad": 2.0},
    "screen": {**_COMMON_RC, "font.size": 9.5, "axes.titlesize": 9.5, "axes.labelsize": 9.0,
               "xtick.labelsize": 8.5, "ytick.labelsize": 8.5, "legend.fontsize": 8.5, "figure.titlesize": 11.0,
               "lines.linewidth": 1.2},
}
#: figure widths (inches) of the screen style
SCREEN_WIDTHS = {1: 6.4, 2: 12.0}


# ---------------------------------------------------------------------------------------------
# suites and their metrics


def results_suite(paths: Iterable[str | Path] | str | Path) -> str | None:
    """The suite named by the run manifest (``manifest.json``; ``meta.json`` of fwgym 0.1.0 results) of
    result directories (or of ``results.jsonl`` files' folders); ``None`` when no source names one
    (results written without a suite are the decision suite's).

    Raises:
        ValueError: sources of different suites (their numbers are not comparable), or a malformed manifest.
    """
    from fwgym.evaluation.manifest import read_manifest

    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: dict[str, str] = {}
    for p in map(Path, paths):
        if p.is_file() and p.name != "results.jsonl":
            continue
        folder = p if p.is_dir() else p.parent
        manifest = read_manifest(folder)
        if manifest is not None:
            s = (manifest.get("settings") or {}).get("suite")
        else:
            try:
                s = json.loads((folder / "meta.json").read_text()).get("suite")
            except (OSError, ValueError, AttributeError):
                s = None
        if s is not None:
            found[str(p)] = str(s)
    suites = sorted(set(found.values()))
    if len(suites) > 1:
        raise ValueError(f"results of different suites cannot be merged: {found}")
    return suites[0] if suites else None


# ---------------------------------------------------------------------------------------------
# figure plumbing


def _mpl():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("fwgym.plots needs matplotlib: pip install 'fwgym[plots]'") from exc
    import matplotlib

    return matplotlib


@contextmanager
def figure_style(style: str = "paper"):
    """Context manager applying a style's matplotlib settings (:data:`STYLES`) and nothing global outside it.

    Raises:
        ValueError: an unknown style.
    """
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; expected one of {list(STYLES)}")
    mpl = _mpl()
    with mpl.rc_context(STYLES[style]):
        yield


def figure_width(style: str = "paper", columns: int = 1) -> float:
    """Figure width in inches: paper 3.3 (one column) or 7.0 (two columns); screen 6.4 or 12.

    Raises:
        ValueError: an unknown style or ``columns`` not 1 or 2.
    """
    if columns not in (1, 2):
        raise ValueError(f"columns must be 1 or 2, got {columns!r}")
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; expected one of {list(STYLES)}")
    return (PAPER_WIDTHS if style == "paper" else SCREEN_WIDTHS)[columns]


def _figure(width: float, height: float, layout: str | None = "constrained"):
    _mpl()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(fig)
    if layout == "constrained":
        fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.02, hspace=0.02)
    return fig


def _freeze_ticks(fig, style: str) -> None:
    """Store the style's tick settings on every axes, so ticks matplotlib creates at draw time (outside
    :func:`figure_style`, e.g. a caller's own ``fig.savefig``) look the same as the ones laid out."""
    rc = {**STYLES["screen"], **STYLES[style]} if style in STYLES else STYLES["screen"]
    import matplotlib as mpl

    base = mpl.rcParamsDefault
    for ax in fig.get_axes():
        for axis, name in (("x", "xtick"), ("y", "ytick")):
            for which in ("major", "minor"):
                ax.tick_params(axis=axis, which=which,
                               labelsize=rc.get(f"{name}.labelsize", base[f"{name}.labelsize"]),
                               pad=rc.get(f"{name}.{which}.pad", base[f"{name}.{which}.pad"]),
                               length=rc.get(f"{name}.{which}.size", base[f"{name}.{which}.size"]),
                               width=rc.get(f"{name}.{which}.width", base[f"{name}.{which}.width"]))


def _check_path(path: str | Path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"output file {p} must end in one of {list(FORMATS)} (the format follows the extension)")
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    return p


def mark_figure(fig, mark: str, style: str = "paper") -> None:
    """Put ``mark`` (e.g. ``"UNVERIFIED: ..."``: what nothing vouches for in the figure's data) at the
    top of the figure, in bold dark red, as the first line of its suptitle (a suptitle it already has
    follows on the next line; the constrained layout makes room for both), at the style's title
    size (>= :data:`MIN_FONT_PT` points in the paper style). A figure whose suptitle starts with
    ``mark`` already is left as it is. The figure must still have its layout engine (a frontier is
    marked by :func:`frontier_figure` itself, before it freezes its layout)."""
    if fig.get_suptitle().startswith(mark):
        return
    fs = max(float(STYLES[style]["figure.titlesize"]) if style in STYLES else MIN_FONT_PT, MIN_FONT_PT)
    old = fig.get_suptitle()
    if old:
        fs = max(fs, float(fig._suptitle.get_fontsize()))
    fig.suptitle(f"{mark}\n{old}" if old else mark, fontsize=fs, fontweight="bold", color="#a00000")


def save_figure(fig, path: str | Path, style: str = "paper", mark: str | None = None,
                description: str | None = None) -> Path:
    """Save ``fig`` under the style's settings (TrueType fonts in PDF). Returns the path.

    Args:
        mark: a warning drawn in the figure (:func:`mark_figure`, unless it carries it already) and written to the file's metadata as
            its title (PDF ``Title``, PNG and SVG ``Title``), e.g. ``"UNVERIFIED"`` for records of a
            source without a run manifest; ``None``: no mark.
        description: the longer text of the mark for the metadata (PDF ``Subject``, PNG and SVG
            ``Description``; default ``mark``).

    Raises:
        ValueError: an extension other than ``.png``, ``.svg``, ``.pdf``.
    """
    p = _check_path(path)
    ext = p.suffix.lower()
    meta = {"Creator": "fwgym"} if ext == ".pdf" else ({"Software": "fwgym"} if ext == ".png" else {})
    if mark:
        mark_figure(fig, mark, style)
        meta["Title"] = mark
        meta["Subject" if ext == ".pdf" else "Description"] = description or mark
    with figure_style(style):
        fig.savefig(p, metadata=meta or None)
    return p


def policy_kind(name: str, credits: float = 0.0) -> str:
    """``"oracle"``, ``"selector"``, ``"priced"`` (mean credits > 0) or ``"fixed"`` (display category)."""
    if name in ORACLE_NAMES or "oracle" in name:
        return "oracle"
    if "selector" in name:
        return "selector"
    return "priced" if credits > 0 else "fixed"


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


# ---------------------------------------------------------------------------------------------
# the frontier


def _panel_sets(records: Sequence[dict], panels: str) -> list[tuple[str, list[dict], bool]]:
    """``[(label, records, exact), ...]``: exact = one domain (equal-S lines exact)."""
    from fwgym.domains import domain_names

    present = {r["domain"] for r in records}
    domains = [d for d in domain_names() if d in present] + sorted(present - set(domain_names()))
    if panels not in ("auto", "all", "domains", "both"):
        raise ValueError(f"panels must be 'auto', 'all', 'domains' or 'both', got {panels!r}")
    one = [("all cases" if len(domains) > 1 else domains[0], list(records), len(domains) == 1)]
    per = [(d, [r for r in records if r["domain"] == d], True) for d in domains]
    if len(domains) == 1 or panels == "all":
        return one
    return per if panels == "domains" else one + per


def _intervals(recs: Sequence[dict], reference: str | None, field: str, n_boot: int, seed: int) -> dict[str, dict]:
    """``{policy: {field: (lo, hi), "credits": (lo, hi)}}``: the policy's aggregate plus the paired
    bootstrap interval of its difference to ``reference`` (:func:`fwgym.evaluation.paired_bootstrap`)."""
    from fwgym.evaluation import by_policy, paired_bootstrap

    groups = by_policy(recs)
    if reference is None or reference not in groups:
        return {}
    out = {}
    for p, prs in groups.items():
        agg = aggregate(prs, fields=(field, "credits"))
        if p == reference:
            out[p] = {field: (agg[field], agg[field]), "credits": (agg["credits"], agg["credits"])}
            continue
        bs = paired_bootstrap(recs, reference, p, n_boot=n_boot, seed=seed, metrics=(field, "credits"))
        out[p] = {m: (agg[m] - bs[m]["diff"] + bs[m]["lo"], agg[m] - bs[m]["diff"] + bs[m]["hi"])
                  for m in (field, "credits")}
    return out


def frontier_points(records: Sequence[dict], suite: str | None = None, reference: str | None = "auto",
                    n_boot: int | None = None, seed: int | None = None, budget: float = BUDGET,
                    credit_weight: float | None = None) -> list[dict]:
    """The numbers behind a frontier panel: one dict per policy with its aggregate ``S, R, loss,
    floor, credits, calls, n, valid``, ``y`` (the suite's frontier metric, :attr:`SuiteMetric.y_field`)
    and, with a reference, ``y_ci`` and ``credits_ci``: ``(lo, hi)`` = the policy's aggregate minus the
    paired bootstrap difference plus its 95% interval ends (:func:`fwgym.evaluation.paired_bootstrap`,
    ``policy - reference``; the reference's own interval is its point).

    Args:
        records: one suite's records of several policies on the same cases.
        suite, reference, n_boot, seed, budget, credit_weight: as :func:`plot_frontier`.

    Raises:
        ValueError: as :func:`fwgym.evaluation.check_result_set`; an unknown reference.
    """
    from fwgym.evaluation import BOOT_SEED, N_BOOT, check_result_set, reference_policy

    check_result_set(records)
    metric = suite_metric(suite or DEFAULT_SUITE, credit_weight)
    pts = _panel_points(records, metric)
    names = sorted(q["policy"] for q in pts)
    reference = reference_policy(names, reference)
    ci = _intervals(records, reference, metric.y_field, N_BOOT if n_boot is None else n_boot,
                    BOOT_SEED if seed is None else seed)
    for q in pts:
        got = ci.get(q["policy"])
        q["y_ci"] = got[metric.y_field] if got else None
        q["credits_ci"] = got["credits"] if got else None
    return pts


def _text_width_in(fig, texts: Iterable[str], fs: float) -> float:
    """Widest of ``texts`` in inches at font size ``fs`` (measured with the figure's renderer)."""
    from matplotlib.text import Text

    r = fig.canvas.get_renderer()
    w = 0.0
    for s in texts:
        t = Text(0, 0, s, fontsize=fs, figure=fig)
        w = max(w, t.get_window_extent(r).width / fig.dpi)
    return w


#: the free strip (inches): x of the three dodged columns of points (names mode: a label column
#: starts at ``_FREE_LABEL_X``; numbers mode: each number sits beside its point)
_FREE_X = {"names": (0.10, 0.19, 0.28), "numbers": (0.10, 0.33, 0.56)}
_FREE_LABEL_X = 0.40


def _legend_ncol(fig, labels: Sequence[str], fs: float, width_in: float, max_ncol: int = 6) -> int:
    """The most legend columns (filled column by column, as matplotlib does) that fit ``width_in``."""
    em = fs / 72
    widths = [_text_width_in(fig, str(s).split("\n"), fs) + 2.1 * em for s in labels]
    for ncol in range(min(max_ncol, len(labels)), 1, -1):
        per = math.ceil(len(labels) / ncol)
        cols = [widths[i:i + per] for i in range(0, len(widths), per)]
        if sum(max(c) for c in cols) + 0.9 * em * (len(cols) - 1) + 0.1 <= width_in:
            return ncol
    return 1


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
    sets = _panel_sets(records, panels)
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
        probe = _figure(width, 2.0, layout=None)
        panel_w = width / per_row - 0.55 - _text_width_in(probe, ["S=0.75"], fs)  # y-axis and S labels
        plans = []
        fits = True
        for label, recs, exact in sets:
            pts = _panel_points(recs, metric)
            free = [q for q in pts if q["credits"] <= 0]
            paid = [q for q in pts if q["credits"] > 0]
            name_w = _text_width_in(probe, [q["policy"] for q in free], fs) if free else 0.0
            paid_w = _text_width_in(probe, [q["policy"] for q in paid], fs) if paid else 0.0
            free_in = _FREE_LABEL_X + name_w + 0.05 if free else 0.0
            paid_in = panel_w - free_in
            fits &= (not paid or paid_in >= max(0.9, paid_w + 0.35)) and (not free or free_in <= panel_w)
            plans.append((label, recs, exact, pts, free, paid))
        mode = labels if labels != "auto" else ("names" if fits else "numbers")
        num_w = _text_width_in(probe, [str(len(order))], fs)
        if mode == "numbers":
            entries = {f"{number[p]}  {p}": _marker_handle(kinds[p], fs) for p in order}
        else:
            entries = {_STYLE[k][3]: _marker_handle(k, fs) for k in _STYLE if k in set(kinds.values())}
        entries[f"equal {metric.formula.split(',')[0]}"] = Line2D([], [], color="0.6", lw=0.8, ls="--")
        if reference is not None:
            entries[f"95% CI: paired bootstrap\nvs {reference}"] = Line2D([], [], color="0.35", lw=0.8,
                                                                           marker="|", ms=5)
        ncol = _legend_ncol(probe, list(entries), fs, width)
        legend_h = (math.ceil(len(entries) / ncol) + (reference is not None)) * fs * 1.45 / 72 + 0.1
        row_h = (height - legend_h) / rows if height else max(2.1, min(3.2, 0.8 + len(order) * fs * 1.35 / 72))
        fig = _figure(width, row_h * rows + legend_h + 0.2 * (bool(title) + bool(mark)))
        sub = fig.subfigures(rows, per_row, squeeze=False)
        handles: dict[str, Any] = {}
        placements = []
        for k, (label, recs, exact, pts, free, paid) in enumerate(plans):
            sf = sub[k // per_row][k % per_row]
            if mode == "names":
                free_in = _FREE_LABEL_X + _text_width_in(probe, [q["policy"] for q in free], fs) + 0.08
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
            fig.suptitle(title)
        if mark:
            mark_figure(fig, mark, style)
        # freeze the layout, then place the labels in display space (they need the final axes sizes)
        _freeze_ticks(fig, style)
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
        for place in placements:
            place()
    return fig


def _wrap(fig, parts: Sequence[str], fs: float, width_in: float) -> str:
    """``parts`` joined by spaces, with line breaks between parts where a line would exceed ``width_in``."""
    lines = [parts[0]]
    for p in parts[1:]:
        trial = f"{lines[-1]} {p}"
        if _text_width_in(fig, [trial], fs) <= width_in:
            lines[-1] = trial
        else:
            lines.append(p)
    return "\n".join(lines)


def _marker_handle(kind: str, fs: float):
    from matplotlib.lines import Line2D

    marker, colour, size, _ = _STYLE[kind]
    return Line2D([], [], ls="none", marker=marker, markersize=math.sqrt(size) * fs / 7.0, color=colour,
                  markeredgecolor="black", markeredgewidth=0.4)


def _panel_points(recs: Sequence[dict], metric: SuiteMetric) -> list[dict]:
    from fwgym.evaluation import by_policy

    out = []
    for p, prs in by_policy(recs).items():
        a = aggregate(prs)
        out.append({"policy": p, **a, "y": a[metric.y_field]})
    return out


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
    ci = _intervals(recs, reference, metric.y_field, n_boot, seed)
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
                    tw = _text_width_in(fig, [text], fs) * fig.dpi
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
            e.g. ``"UNVERIFIED"`` for records nothing vouches for.

    Returns:
        The path written.

    Raises:
        ValueError: no records, bad extension, style, columns, panels or labels, an unknown reference, or
            policies on different cases.
    """
    p = _check_path(path)
    fig = frontier_figure(records, title=title, budget=budget, agents=agents, n_lines=n_lines, panels=panels,
                          suite=suite, style=style, columns=columns, reference=reference, n_boot=n_boot, seed=seed,
                          credit_weight=credit_weight, height=height, labels=labels, mark=mark)
    return save_figure(fig, p, style, mark=mark, description=description)


# ---------------------------------------------------------------------------------------------
# the case view


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


@dataclass
class CaseData:
    """Hindsight data of one case as its suite scored it (for figures made after the run).

    Attributes:
        case: the :class:`~fwgym.core.cases.Case`. suite: the suite.
        target: float64 (24,) the SCORED target in raw units (scenario-transformed in the context and
            forecast suites). raw_target: float64 (24,) the series' realised values.
        perfect_levels: the perfect-demand plan's 8 normalised levels on ``target`` (decision suites),
            else ``None``.
        roi: bool (24,) Region of Interest of the scenario, or ``None``. scenario: its family or ``None``.
        lower, upper: float (24,) scenario bounds (NaN where unbounded) or ``None``.
        context: the context text the agent saw.
    """

    case: Any
    suite: str
    target: np.ndarray
    raw_target: np.ndarray
    perfect_levels: list[float] | None
    roi: np.ndarray | None
    scenario: str | None
    lower: np.ndarray | None
    upper: np.ndarray | None
    context: str

    @property
    def changed(self) -> bool:
        """The scenario changed the target (the raw series differs from what was scored)."""
        return not np.array_equal(self.target, self.raw_target)


_ENVS: dict = {}


def suite_env(domain: str, split: str, suite: str = "decision"):
    """The :class:`~fwgym.envs.fwbench.FWBenchEnv` of a suite (its :attr:`fwgym.suites.Suite.env_kwargs`),
    one per (domain, split, suite) in this process, for re-reading cases after a run.

    Raises:
        ValueError: an unknown suite, domain or split.
    """
    from fwgym.envs.fwbench import FWBenchEnv

    spec = get_suite(suite)
    key = (domain, split, suite)
    if key not in _ENVS:
        _ENVS[key] = FWBenchEnv(domain=domain, split=split, **spec.env_kwargs)
    return _ENVS[key]


def case_data(record: dict, suite: str = "decision") -> CaseData:
    """The scored view of a record's case: reset the suite's env on the case (cached per domain, split
    and suite) and read its hindsight (target, perfect plan, scenario).

    Args:
        record: a result record (``case_id``, ``domain``, ``split``).
        suite: the suite the record was scored in (:data:`fwgym.evaluation.SUITES`).

    Raises:
        ValueError: an unknown suite or case.
    """
    env = suite_env(record["domain"], record["split"], suite)
    env.reset(options={"case_id": record["case_id"]})
    h = env.hindsight()
    sc = env.episode.scenario
    case = env.episode.case
    return CaseData(case=case, suite=suite, target=np.asarray(h["target"], dtype=np.float64),
                    raw_target=np.asarray(case.target(), dtype=np.float64),
                    perfect_levels=[float(x) for x in h["perfect_plan"].levels] if suite != "forecast" else None,
                    roi=h.get("roi"), scenario=h.get("scenario"),
                    lower=None if sc is None or sc.lower is None else np.asarray(sc.lower, dtype=np.float64),
                    upper=None if sc is None or sc.upper is None else np.asarray(sc.upper, dtype=np.float64),
                    context=env.context)


def _as_forecast(obj) -> tuple[str, np.ndarray] | None:
    """``("quantiles", (24, 9))`` or ``("samples", (n, 24))`` from a submission object, else ``None``."""
    if not isinstance(obj, dict):
        return None
    if "kind" in obj and "values" in obj:
        obj = {obj["kind"]: obj["values"]}
    for kind in ("quantiles", "samples"):
        if obj.get(kind) is None:
            continue
        try:
            a = np.asarray(obj[kind], dtype=np.float64)
        except (TypeError, ValueError):
            return None
        if a.ndim != 2 or not np.all(np.isfinite(a)):
            return None
        if kind == "quantiles" and a.shape == (24, 9):
            return kind, a
        if kind == "samples" and a.shape[1] == 24 and a.shape[0] >= 1:
            return kind, a
    return None


def submitted_forecast(record: dict, actions: Iterable[Any] = ()) -> tuple[str, np.ndarray] | None:
    """The forecast an episode submitted: the record's own ``submission`` when it carries one, else
    the last ``submit`` action among ``actions`` (a trace's ``steps[*].action`` or a replay's actions).

    Returns:
        ``("quantiles", float64 (24, 9))`` (levels 0.1..0.9) or ``("samples", float64 (n, 24))``, or
        ``None`` (no forecast submitted, or one that is not a finite 24-step forecast).
    """
    got = _as_forecast(record.get("submission"))
    if got is not None:
        return got
    for a in reversed(list(actions)):
        if isinstance(a, str):
            try:
                a = json.loads(a)
            except ValueError:
                continue
        if isinstance(a, dict) and a.get("tool") == "submit":
            return _as_forecast(a.get("args"))
    return None


def forecast_band(forecast: tuple[str, np.ndarray]) -> np.ndarray:
    """(24, 3) quantiles 0.1 / 0.5 / 0.9 of a submitted forecast (:func:`submitted_forecast`): the
    quantile columns 0, 4, 8, or the empirical quantiles (``numpy.quantile``, linear) of samples."""
    kind, a = forecast
    if kind == "quantiles":
        return a[:, [0, 4, 8]]
    return np.quantile(a, [0.1, 0.5, 0.9], axis=0).T


def _to_dt(hours) -> np.ndarray:
    return np.asarray(hours, dtype="int64").astype("datetime64[h]")


BAND_COLOURS = ["#1f77b4", "#17becf", "#e377c2", "#8c564b", "#bcbd22"]


def fit_limits(values: Iterable, pad: float = 0.06) -> tuple[float, float]:
    """Axis limits around the finite ``values`` with ``pad`` (fraction of the range) on each side;
    never below 0 when every value is >= 0 (counts and MW are not negative)."""
    v = np.concatenate([np.ravel(np.asarray(x, dtype=np.float64)) for x in values]) if values else np.zeros(1)
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    span = hi - lo or max(abs(hi) * 0.1, 1.0)
    out_lo, out_hi = lo - pad * span, hi + pad * span
    if lo >= 0:
        out_lo = max(out_lo, 0.0)
    return out_lo, out_hi


def draw_case(ax, zx, data: CaseData, record: dict, *, history_hours: int = CHART_HISTORY_HOURS, bands: Sequence[dict] = (),  # noqa: C901 - matplotlib drawing: one branch per optional artist and legend key
              policy_band: tuple[np.ndarray, str] | None = None, submitted: tuple[str, np.ndarray] | None = None,
              roi=None, gid: str | None = None, fs: float = 7.0) -> list[dict]:
    """Draw a case onto an overview axes ``ax`` and/or a target-day axes ``zx`` (either may be ``None``).

    Overview: the last ``history_hours`` of visible history, the hidden hours before ``as_of``, bought
    forecast bands over their horizon, the target day. Both: the policy's own band, the submitted
    capacities (steps) or the submitted forecast (band and median), the perfect-demand plan (decision
    suites), the scored target and, where a scenario changed it, the raw series. Y-limits are fitted to
    what is drawn (:func:`fit_limits`).

    Args:
        data: :func:`case_data`. record: the episode's result record (``levels``: submitted normalised
            levels or ``None``).
        bands: bought forecasts ``[{"label", "start_hour", "quantiles": (H, Q)}]`` (Q >= 2; first and
            last columns the band edges, the middle column the median), drawn up to the target's end.
        policy_band: ``((24, Q) quantiles on the target hours, label)`` or ``None``.
        submitted: the submitted forecast (:func:`submitted_forecast`) or ``None``.
        roi: bool (24,) or ``[(start, stop), ...]`` hour offsets of the target day to shade (default:
            the scenario's Region of Interest).
        gid: prefix of SVG ids given to the scored-target line and the axes (``<gid>-target``,
            ``<gid>-axes``), for tests of the rendered page.

    Returns:
        Legend entries ``[{"label", "color", "style", "artist"}]`` in drawing order, ``style`` in
        ``"line"``, ``"dash"``, ``"thick"``, ``"band"``, ``"dots"``.

    Raises:
        ValueError: a ROI span outside the 24 target hours.
    """
    case = data.case
    t0, t_end = int(case.target_start), int(case.target_start) + 24
    edges = _to_dt(np.arange(t0, t_end + 1))
    centre = _to_dt(case.target_hours)
    y = data.target
    axes = [a for a in (ax, zx) if a is not None]
    legend: list[dict] = []
    shown: dict[Any, list] = {a: [] for a in axes}  # values drawn per axes (its y-limits are fitted to them)
    data_artists: dict[Any, list] = {a: [] for a in axes}

    def key(label, color, style, artist):
        if not any(e["label"] == label for e in legend):
            legend.append({"label": label, "color": color, "style": style, "artist": artist})

    n = max(1, min(int(history_hours), len(case.history)))
    if ax is not None:
        hist = case.history[-n:]
        art, = ax.plot(_to_dt(case.history_hours[-n:]), hist, color="#3a3a3a", lw=0.9)
        shown[ax].append(hist)
        data_artists[ax].append(art)
        key("visible history", "#3a3a3a", "line", art)
        art = ax.axvspan(_to_dt(case.last_visible + 1), _to_dt(case.as_of), color="#9a9a9a", alpha=0.5, lw=0)
        key("hidden hours before as_of", "#c2c2c2", "band", art)
        ax.axvline(_to_dt(case.as_of), color="#555555", ls=":", lw=0.9)
        ax.annotate("as_of", (_to_dt(case.as_of), 1.0), xycoords=("data", "axes fraction"), fontsize=fs,
                    ha="left", va="top", xytext=(2, -2), textcoords="offset points", color="#444444")
    for a_ in axes:
        art = a_.axvspan(edges[0], edges[-1], color="#fff6d5", alpha=0.8, lw=0, zorder=0)
    key("target day", "#fff0b8", "band", art)
    for k, b in enumerate(bands):
        q = np.asarray(b["quantiles"], dtype=np.float64)
        if q.ndim != 2 or q.shape[1] < 2 or not len(q):
            continue
        hours = int(b["start_hour"]) + np.arange(len(q))
        keep = hours < t_end
        if not keep.any():
            continue
        hours, q = hours[keep], q[keep]
        c = BAND_COLOURS[k % len(BAND_COLOURS)]
        for a_, sel in ((ax, slice(None)), (zx, hours >= t0)):
            if a_ is None or not np.any(np.ones(len(hours), bool)[sel]):
                continue
            xh = _to_dt(hours[sel])
            art = a_.fill_between(xh, q[sel, 0], q[sel, -1], color=c, alpha=0.2, lw=0)
            med, = a_.plot(xh, q[sel, q.shape[1] // 2], color=c, lw=0.8, ls="--")
            shown[a_] += [q[sel, 0], q[sel, -1]]
            data_artists[a_] += [art, med]
        key(f"{b['label']} 10-90%", c, "band", art)
        key(f"{b['label']} median", c, "dash", med)
    if policy_band is not None:
        pb, label = policy_band
        for a_ in axes:
            art = a_.fill_between(centre, pb[:, 0], pb[:, -1], color="#8c6bb1", alpha=0.2, lw=0)
            shown[a_] += [pb[:, 0], pb[:, -1]]
            data_artists[a_].append(art)
        key(label, "#8c6bb1", "band", art)
    if roi is None:
        roi = data.roi
    if roi is not None:
        arr = np.asarray(roi)
        spans = _runs(arr.astype(bool)) if arr.dtype == bool and arr.shape == (24,) else [tuple(map(int, s)) for s in roi]
        for a, b_ in spans:
            if not 0 <= a < b_ <= 24:
                raise ValueError(f"roi span {(a, b_)} is not inside the 24 target hours")
            for a_ in axes:
                art = a_.axvspan(edges[a], edges[b_], color="#ff9f1c", alpha=0.22, lw=0)
        if spans:
            key("region of interest", "#ffc680", "band", art)
    for bound, name in ((data.upper, "upper bound (scenario)"), (data.lower, "lower bound (scenario)")):
        if bound is not None and np.isfinite(bound).any():
            ext = np.append(bound, bound[-1])
            for a_ in axes:
                art, = a_.step(edges, ext, where="post", color="#a0522d", lw=0.9, ls=(0, (1, 1)))
                shown[a_].append(bound)
                data_artists[a_].append(art)
            key(name, "#a0522d", "dash", art)
    if submitted is not None:
        sb = forecast_band(submitted)
        for a_ in axes:
            art = a_.fill_between(centre, sb[:, 0], sb[:, 2], color="#d62728", alpha=0.18, lw=0)
            med, = a_.plot(centre, sb[:, 1], color="#d62728", lw=1.4)
            shown[a_] += [sb[:, 0], sb[:, 2]]
            data_artists[a_] += [art, med]
        key("submitted forecast 10-90%", "#d62728", "band", art)
        key("submitted forecast median", "#d62728", "thick", med)
    if data.perfect_levels is not None:
        best = np.repeat(np.asarray(data.perfect_levels, dtype=np.float64) * case.scale, 3)
        for a_ in axes:
            art, = a_.step(edges, np.append(best, best[-1]), where="post", color="#2ca02c", lw=1.0, ls="--")
            shown[a_].append(best)
            data_artists[a_].append(art)
        key("perfect-demand plan", "#2ca02c", "dash", art)
    if record.get("levels"):
        cap = np.repeat(np.asarray(record["levels"], dtype=np.float64) * case.scale, 3)
        for a_ in axes:
            art, = a_.step(edges, np.append(cap, cap[-1]), where="post", color="#d62728", lw=1.8)
            shown[a_].append(cap)
            data_artists[a_].append(art)
        key("submitted capacities", "#d62728", "thick", art)
    if data.changed:
        for a_ in axes:
            art, = a_.plot(centre, data.raw_target, color="#7f7f7f", lw=0.9, ls=(0, (3, 1.5)), marker="x",
                           ms=2.5 if a_ is zx else 1.5, mew=0.6)
            shown[a_].append(data.raw_target)
            data_artists[a_].append(art)
        key("raw series (no scenario)", "#7f7f7f", "dash", art)
    target_label = ("scored target (with scenario)" if data.scenario is not None
                    else get_domain(case.domain).target_label)
    for a_ in axes:
        art, = a_.plot(centre, y, color="black", lw=1.1, marker=".", ms=3.5 if a_ is zx else 2)
        shown[a_].append(y)
        if gid:
            panel = "zoom" if a_ is zx else "overview"
            art.set_gid(f"{gid}-{panel}-target")
            a_.patch.set_gid(f"{gid}-{panel}-axes")
            for k, d in enumerate(data_artists[a_]):
                d.set_gid(f"{gid}-{panel}-data{k}")
        a_.set_ylim(*fit_limits(shown[a_]))
        a_.grid(alpha=0.25, lw=0.4)
    key(target_label, "#000000", "dots", art)
    return legend


def _format_time_axes(ax, zx, case) -> None:
    import matplotlib.dates as mdates

    if ax is not None:
        loc = mdates.AutoDateLocator(minticks=3, maxticks=6)
        ax.xaxis.set_major_locator(loc)
        fmt = mdates.ConciseDateFormatter(loc, show_offset=False)
        fmt.formats = ["%Y", "%b", "%d %b", "%H:%M", "%H:%M", "%S.%f"]
        fmt.zero_formats = ["", "%Y", "%b", "%d %b", "%H:%M", "%H:%M"]
        ax.xaxis.set_major_formatter(fmt)
        ax.margins(x=0.01)
    if zx is not None:
        t0 = int(case.target_start)
        zx.set_xlim(_to_dt(t0), _to_dt(t0 + 24))
        zx.xaxis.set_major_locator(mdates.HourLocator(byhour=range(0, 24, 6)))
        zx.xaxis.set_minor_locator(mdates.HourLocator(byhour=range(0, 24, 3)))
        zx.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))


def case_figure(records: Sequence[dict], case_id: str, policy: str, roi=None, quantiles: np.ndarray | None = None,
                history_hours: int = CHART_HISTORY_HOURS, suite: str | None = None, traces=None, zoom: bool | None = None,
                style: str = "paper", columns: int = 2, title: str | None = None, height: float | None = None):
    """The case view as a matplotlib ``Figure`` (see :func:`plot_case` for the arguments)."""
    from fwgym.core.cases import HISTORY_HOURS

    rec = next((r for r in records if r["case_id"] == case_id and r["policy"] == policy), None)
    if rec is None:
        have = sorted({r["policy"] for r in records if r["case_id"] == case_id})
        raise ValueError(f"no record of policy {policy!r} on case {case_id!r}"
                         + (f" (policies on that case: {have})" if have else " (case not in the results)"))
    if not 1 <= history_hours <= HISTORY_HOURS:
        raise ValueError(f"history_hours must be in 1..{HISTORY_HOURS}, got {history_hours}")
    suite = get_suite(suite or DEFAULT_SUITE).name
    metric = suite_metric(suite)
    data = case_data(rec, suite)
    case = data.case
    bands, actions = [], []
    if traces is not None:
        from fwgym.traces import bands_from_calls, load_traces, trace_results

        tmap, _ = load_traces(traces)
        trace = tmap.get((policy, case_id))
        if trace is None:
            raise ValueError(f"no trace of policy {policy!r} on case {case_id!r} in {traces}")
        bands = bands_from_calls(trace_results(trace))
        actions = [s.get("action") for s in trace.get("steps") or [] if isinstance(s, dict)]
    submitted = submitted_forecast(rec, actions) if suite == "forecast" else None
    if quantiles is not None:
        q = np.asarray(quantiles, dtype=np.float64)
        if q.ndim != 2 or q.shape[0] != 24 or q.shape[1] < 2:
            raise ValueError(f"quantiles must have shape (24, Q >= 2), got {q.shape}")
        policy_band = (q[:, [0, q.shape[1] // 2, -1]], "forecast band")
    else:
        policy_band = _band_for(case, policy)
    zoom = (case.lead == "week_ahead") if zoom is None else bool(zoom)
    with figure_style(style):
        fs = float(STYLES[style]["font.size"])
        width = figure_width(style, columns)
        fig = _figure(width, height or (width * (0.5 if columns == 2 else 0.95)))
        if zoom:
            if columns == 2:
                ax, zx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.7, 1.0]})
            else:
                ax, zx = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.0, 1.0]})
        else:
            ax, zx = fig.subplots(), None
        legend = draw_case(ax, zx, data, rec, history_hours=history_hours, bands=bands, policy_band=policy_band,
                           submitted=submitted, roi=roi, fs=fs)
        _format_time_axes(ax, zx, case)
        ax.set_ylabel(case.series.unit)
        ax.set_xlabel(f"time (UTC): last {min(history_hours, len(case.history))} visible hours, target day")
        if zx is not None:
            zx.set_xlabel(f"target day {case.target_date.isoformat()} (UTC)")
            if columns == 1:
                zx.set_ylabel(case.series.unit)
        status = "valid" if rec.get("valid") else f"INVALID ({rec.get('status')})"
        if metric.has_floor:
            score = f"loss {rec['loss']:.4f} (floor {rec['floor']:.4f}), S {rec['S']:.3f}"
        else:
            score = f"RCRPS {rec['loss']:.4f}, S {rec['S']:.3f}"
        if suite == "forecast" and submitted is None:
            (zx or ax).set_title("submitted forecast: not in the record or a trace", loc="left", fontsize=fs,
                                 color="#b00020")
        parts = [case_id + (f" (scenario {data.scenario})" if data.scenario else ""), f"{policy}:",
                 f"{score}, {rec['credits']:,} credits, {status}"]
        fig.suptitle(title or _wrap(fig, parts, fs + 0.5, width - 0.1), fontsize=fs + 0.5)
        labels = [e["label"] for e in legend]
        fig.legend([e["artist"] for e in legend], labels, loc="outside lower center",
                   ncol=_legend_ncol(fig, labels, fs, width, max_ncol=4), frameon=False)
        _freeze_ticks(fig, style)
    return fig


def plot_case(records: Sequence[dict], case_id: str, policy: str, path: str | Path, roi=None,
              quantiles: np.ndarray | None = None, history_hours: int = CHART_HISTORY_HOURS, suite: str | None = None,
              traces=None, zoom: bool | None = None, style: str = "paper", columns: int = 2,
              title: str | None = None, height: float | None = None, mark: str | None = None,
              description: str | None = None) -> Path:
    """Case view of one (case, policy) record.

    Draws the tail of the visible history, the hidden hours before ``as_of``, the policy's own forecast
    band (a fixed classical or available priced policy, or ``quantiles``), the forecasts bought in the
    episode's trace (``traces``), the submitted capacities or (forecast suite) the submitted forecast,
    the perfect-demand plan (decision suites), the SCORED target (scenario-transformed in the context
    and forecast suites) and, where a scenario changed it, the raw series, labelled. Week-ahead cases
    get a target-day zoom panel.

    Args:
        records: result records holding the (case, policy) pair.
        case_id, policy: which record.
        path: output file (``.png``, ``.svg`` or ``.pdf``).
        roi: Region of Interest to shade: a bool mask of the 24 target hours, or ``[(start, stop), ...]``
            hour offsets from the target start (stop exclusive). Default: the scenario's, if any.
        quantiles: forecast band to draw, shape (24, Q) with Q >= 2 (first and last columns are the band
            edges, a middle column the median). Default: the policy's own distribution when it is a
            fixed classical or available priced policy, else none.
        history_hours: hours of visible history shown before the cut-off (1..336).
        suite: the record's suite, as its run manifest names it (default the decision suite).
        traces: agent trace JSONL file(s) (:mod:`fwgym.traces`): the forecasts the policy bought
            on this case are drawn, and in the forecast suite its submitted forecast.
        zoom: add a target-day panel (default: week-ahead cases only).
        style, columns: :data:`STYLES` and 1 or 2 columns (default 2: 7.0 in wide in the paper style).
        title: figure title (default: case, policy and score). height: inches (default from the width).
        mark, description: a warning drawn in the figure and put in its metadata (:func:`save_figure`).

    Returns:
        The path written.

    Raises:
        ValueError: no such record, no trace of it in ``traces``, bad extension or arguments.
        FileNotFoundError: a trace file is missing.
    """
    p = _check_path(path)
    fig = case_figure(records, case_id, policy, roi=roi, quantiles=quantiles, history_hours=history_hours,
                      suite=suite, traces=traces, zoom=zoom, style=style, columns=columns, title=title, height=height)
    return save_figure(fig, p, style, mark=mark, description=description)


# ---------------------------------------------------------------------------------------------
# tool use


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
        fig = _figure(width, height or max(2.0, 0.9 + len(policies) * fs * 1.6 / 72))
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
        _freeze_ticks(fig, style)
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
    p = _check_path(path)
    return save_figure(tools_figure(records, title=title, style=style, columns=columns, height=height), p, style,
                       mark=mark, description=description)


def text_sizes(fig) -> list[tuple[str, float]]:
    """``[(text, size in points), ...]`` of every visible non-empty text of a figure (tick labels
    included), for checking a style's minimum font size."""
    from matplotlib.text import Text

    fig.draw_without_rendering() if fig.get_layout_engine() is not None else None
    out = []
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible()):
            out.append((t.get_text(), float(t.get_fontsize())))
    return out


__all__ = ["plot_frontier", "plot_case", "plot_tools", "frontier_figure", "frontier_points", "case_figure", "tools_figure",
           "save_figure", "mark_figure", "figure_style", "figure_width", "policy_kind", "suite_metric", "SuiteMetric",
           "results_suite", "case_data", "CaseData", "draw_case",
           "submitted_forecast", "forecast_band", "fit_limits", "text_sizes", "suite_env", "FORMATS", "STYLES",
           "PAPER_WIDTHS", "MIN_FONT_PT", "SUITE_NAMES"]
