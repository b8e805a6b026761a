"""Inline SVG figures of the HTML report (matplotlib, Agg canvas, text kept as SVG text).

:func:`svg_text` turns any figure file or figure into markup that can sit inside an HTML page: no XML
prolog or DOCTYPE, no RDF metadata and no namespace URLs (the HTML parser puts ``<svg>`` in the SVG
namespace by itself), no document-wide ``<style>`` and no fixed size (CSS scales it to its box).
:func:`episode_charts` draws one episode: the tail of the visible history, the unseen hours before
``as_of``, purchased forecast bands, the policy's own predictive band, the submitted capacities as
steps, the perfect-demand plan and the realised demand (hindsight: the report is made after the run).
:func:`histogram_svg` draws a small histogram (the S distribution of a policy).
"""
from __future__ import annotations

import io
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np

#: matplotlib settings of every report figure: text as text (small files, sharp at any zoom) and
#: stable element ids (the same input gives the same SVG)
RC = {"svg.fonttype": "none", "svg.hashsalt": "fwgym-report", "font.size": 9.5,
      "font.family": ["DejaVu Sans", "sans-serif"]}

_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_META = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_STYLE = re.compile(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_SIZE = re.compile(r'\s+(width|height)="[\d.]+pt"')


@contextmanager
def report_style():
    """Context manager applying :data:`RC` (and nothing global outside it)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def svg_text(source, label: str | None = None) -> str:
    """SVG markup ready to inline in HTML.

    Args:
        source: an SVG file path, SVG text, or a matplotlib ``Figure`` (saved as SVG with :data:`RC`).
        label: accessible name (``role="img"`` and ``aria-label``).

    Returns:
        ``<svg ...>...</svg>`` with a ``viewBox``, no ``width``/``height`` attributes and a CSS
        ``max-width`` of 1.2 times the figure's natural size.

    Raises:
        ValueError: the source holds no ``<svg`` element.
    """
    if hasattr(source, "savefig"):
        buf = io.StringIO()
        with report_style():
            source.savefig(buf, format="svg")
        text = buf.getvalue()
    elif isinstance(source, Path) or (isinstance(source, str) and "<svg" not in source):
        text = Path(source).read_text(encoding="utf-8")
    else:
        text = str(source)
    if "<svg" not in text:
        raise ValueError("no <svg> element in the figure")
    text = _PROLOG.sub("", text, count=1)
    text = _META.sub("", text, count=1)
    text = _STYLE.sub("", text, count=1)
    head, sep, rest = text.partition(">")
    width = re.search(r'\swidth="([\d.]+)pt"', head)
    head = _SIZE.sub("", _XMLNS.sub("", head))
    if width:  # scales with its box, up to 1.2 x its natural size (1 pt = 4/3 CSS px)
        head += f' style="max-width: {float(width.group(1)) * 4 / 3 * 1.2:.0f}px"'
    if label:
        from markupsafe import escape

        head += f' role="img" aria-label="{escape(label)}"'
    return (head + sep + rest).strip()


def _plain_figure(width: float, height: float, rect: Sequence[float]):
    """A figure with one axes at a fixed ``rect`` (no constrained layout: about twice as fast to draw)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_axes(rect)


def _to_dt(hours) -> np.ndarray:
    return np.asarray(hours, dtype="int64").astype("datetime64[h]")


def episode_charts(case, record: dict, target: np.ndarray, perfect_levels: Sequence[float] | None,
                   bands: Sequence[dict] = (), policy_band: tuple[np.ndarray, str] | None = None,
                   roi: np.ndarray | None = None, history_hours: int = 168) -> dict:
    """Inline SVG figures of one episode: an overview and the target day, with a shared legend.

    The overview shows the last ``history_hours`` of visible history, the hidden hours before
    ``as_of``, purchased forecast bands over their horizon and the target day; the target-day panel
    zooms on the 24 target hours. Both show the submitted capacities as steps, the perfect-demand plan
    and the realised demand (hindsight).

    Args:
        case: the :class:`~fwgym.cases.Case`.
        record: the episode's result record (``levels`` = submitted normalised levels, or ``None``).
        target: realised demand of the 24 target hours (raw units; the scenario-transformed target in
            the context suite).
        perfect_levels: the perfect-demand plan's 8 levels (``None`` to omit it).
        bands: purchased forecasts ``{"label", "start_hour", "quantiles": (H, Q)}`` (Q >= 2: first and
            last columns are the band edges, the middle column the median), drawn up to the target's end.
        policy_band: ``((24, Q) quantiles on the target hours, label)`` of the policy's own predictive
            distribution (first and last columns drawn), or ``None``.
        roi: bool mask (24,) of the scenario's Region of Interest, or ``None``.
        history_hours: hours of visible history shown.

    Returns:
        ``{"overview": svg, "target": svg, "legend": [{"label", "color", "style"}]}`` with ``style`` in
        ``"line"``, ``"dash"``, ``"thick"``, ``"band"``, ``"dots"`` (the legend is drawn in HTML so it
        wraps at any width).
    """
    import matplotlib.dates as mdates

    from fwgym.plots import _runs

    t0, t_end = int(case.target_start), int(case.target_start) + 24
    edges = _to_dt(np.arange(t0, t_end + 1))
    centre = _to_dt(case.target_hours)
    y = np.asarray(target, dtype=np.float64)
    cuts = []
    for b in bands:
        q = np.asarray(b["quantiles"], dtype=np.float64)
        if q.ndim != 2 or q.shape[1] < 2 or not len(q):
            continue
        hours = int(b["start_hour"]) + np.arange(len(q))
        keep = hours < t_end
        if keep.any():
            cuts.append((b["label"], hours[keep], q[keep]))
    legend: list[dict] = []

    def key(label, color, style):
        if not any(e["label"] == label for e in legend):
            legend.append({"label": label, "color": color, "style": style})

    with report_style():
        fo, ax = _plain_figure(6.4, 3.4, (0.105, 0.12, 0.875, 0.8))
        fz, zx = _plain_figure(3.8, 3.4, (0.17, 0.12, 0.755, 0.8))
        n = max(1, min(int(history_hours), len(case.history)))
        ax.plot(_to_dt(case.history_hours[-n:]), case.history[-n:], color="#3a3a3a", lw=1.0)
        key("visible history", "#3a3a3a", "line")
        ax.axvspan(_to_dt(case.last_visible + 1), _to_dt(case.as_of), color="#9a9a9a", alpha=0.5, lw=0)
        key("hidden hours before as_of", "#c2c2c2", "band")
        ax.axvline(_to_dt(case.as_of), color="#555555", ls=":", lw=1.0)
        ax.annotate("as_of", (_to_dt(case.as_of), 1.0), xycoords=("data", "axes fraction"), fontsize=8,
                    ha="left", va="top", xytext=(3, -3), textcoords="offset points", color="#444444")
        for a_ in (ax, zx):
            a_.axvspan(edges[0], edges[-1], color="#fff6d5", alpha=0.7, lw=0, zorder=0)
        key("target day", "#fff0b8", "band")
        for k, (label, hours, q) in enumerate(cuts):
            c = _BAND_COLOURS[k % len(_BAND_COLOURS)]
            for a_, sel in ((ax, slice(None)), (zx, hours >= t0)):
                x = _to_dt(hours[sel])
                a_.fill_between(x, q[sel, 0], q[sel, -1], color=c, alpha=0.2, lw=0)
                a_.plot(x, q[sel, q.shape[1] // 2], color=c, lw=0.9, ls="--")
            key(f"{label} 10-90%", c, "band")
            key(f"{label} median", c, "dash")
        if policy_band is not None:
            pb, label = policy_band
            for a_ in (ax, zx):
                a_.fill_between(centre, pb[:, 0], pb[:, -1], color="#8c6bb1", alpha=0.2, lw=0)
            key(label, "#8c6bb1", "band")
        if roi is not None and np.asarray(roi).any():
            for a, b_ in _runs(np.asarray(roi, dtype=bool)):
                for a_ in (ax, zx):
                    a_.axvspan(edges[a], edges[b_], color="#ff9f1c", alpha=0.22, lw=0)
            key("region of interest", "#ffc680", "band")
        best = cap = None
        if perfect_levels is not None:
            best = np.repeat(np.asarray(perfect_levels, dtype=np.float64) * case.scale, 3)
            for a_ in (ax, zx):
                a_.step(edges, np.append(best, best[-1]), where="post", color="#2ca02c", lw=1.2, ls="--")
            key("perfect-demand plan", "#2ca02c", "dash")
        if record.get("levels"):
            cap = np.repeat(np.asarray(record["levels"], dtype=np.float64) * case.scale, 3)
            for a_ in (ax, zx):
                a_.step(edges, np.append(cap, cap[-1]), where="post", color="#d62728", lw=2.0)
            key("submitted capacities", "#d62728", "thick")
        for a_ in (ax, zx):
            a_.plot(centre, y, color="black", lw=1.3, marker=".", ms=4 if a_ is zx else 2)
            a_.grid(alpha=0.25)
            a_.set_ylim(bottom=0)
        key("realised demand (hindsight)", "#000000", "dots")
        ax.set_ylabel(case.series.unit)
        loc = mdates.AutoDateLocator(minticks=3, maxticks=7)
        ax.xaxis.set_major_locator(loc)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, show_offset=False))
        ax.margins(x=0.01)
        ax.set_title(f"last {n} visible hours to the end of the target day (UTC)", fontsize=9, loc="left")
        zx.set_xlim(edges[0], edges[-1])
        zx.xaxis.set_major_locator(mdates.HourLocator(byhour=range(0, 24, 6)))
        zx.xaxis.set_minor_locator(mdates.HourLocator(byhour=range(0, 24, 3)))
        zx.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
        zx.set_title(f"target day {case.target_date.isoformat()} (times UTC)", fontsize=9, loc="left")
        top = max([float(y.max()), float(cap.max()) if cap is not None else 0.0,
                   float(best.max()) if best is not None else 0.0,
                   float(np.max(policy_band[0][:, -1])) if policy_band is not None else 0.0]
                  + [float(np.max(q[hours >= t0, -1])) for _, hours, q in cuts if (hours >= t0).any()])
        zx.set_ylim(0, top * 1.08 if top > 0 else 1.0)
        return {"overview": svg_text(fo, label=f"{case.case_id}: visible history, forecasts and the target day"),
                "target": svg_text(fz, label=f"{case.case_id}: capacities and realised demand on the target day"),
                "legend": legend}


_BAND_COLOURS = ["#1f77b4", "#17becf", "#e377c2", "#8c564b", "#bcbd22"]


def histogram_svg(values: Sequence[float], xlabel: str, label: str, invalid: int = 0) -> str:
    """Small histogram of per-episode values (e.g. S), as inline SVG."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    with report_style():
        fig, ax = _plain_figure(6.0, 2.6, (0.1, 0.2, 0.87, 0.68))
        if len(v):
            hi = float(np.quantile(v, 0.99)) if len(v) > 20 else float(v.max())
            ax.hist(np.clip(v, None, hi if hi > v.min() else None), bins=40, color="#4c78a8", edgecolor="white", lw=0.3)
        ax.set_xlabel(xlabel + (" (top 1% clipped)" if len(v) > 20 else ""))
        ax.set_ylabel("episodes")
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if invalid:
            ax.set_title(f"{invalid} invalid episode(s) included", fontsize=8, color="#b00020")
        ax.grid(alpha=0.25)
        return svg_text(fig, label=label)


__all__ = ["episode_charts", "histogram_svg", "svg_text", "report_style", "RC"]
