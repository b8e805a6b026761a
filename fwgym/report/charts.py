"""Inline SVG figures of the HTML report (matplotlib, Agg canvas, text kept as SVG text).

:func:`svg_text` turns any figure file or figure into markup that can sit inside an HTML page: no XML
prolog or DOCTYPE, no RDF metadata and no namespace URLs (the HTML parser puts ``<svg>`` in the SVG
namespace by itself), no document-wide ``<style>`` and no fixed size (CSS scales it to its box).
:func:`episode_charts` draws one episode: the tail of the visible history, the unseen hours before
``as_of``, purchased forecast bands, the policy's own predictive band, the submitted capacities as
steps or the submitted forecast, the perfect-demand plan and the scored target (hindsight: the report
is made after the run).
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
def _rc() -> dict:
    from fwgym.plots import STYLES

    return {**STYLES["screen"], "svg.hashsalt": "fwgym-report"}


RC = _rc()

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


def episode_charts(data, record: dict, bands: Sequence[dict] = (), policy_band: tuple[np.ndarray, str] | None = None,
                   submitted: tuple[str, np.ndarray] | None = None, history_hours: int = 168) -> dict:
    """Inline SVG figures of one episode: an overview and the target day, with a shared legend.

    Drawn by :func:`fwgym.plots.draw_case` (the same drawing as ``fwgym plot case``): the overview shows
    the last ``history_hours`` of visible history, the hidden hours before ``as_of``, purchased
    forecast bands over their horizon and the target day; the target-day panel zooms on the 24 target
    hours. Both show the submitted capacities (decision suites) or the submitted forecast (forecast
    suite), the perfect-demand plan (decision suites), the scored target (hindsight: the report is
    made after the run) and, where a scenario changed it, the raw series. Y-limits are fitted to the
    drawn data (:func:`fwgym.plots.fit_limits`). Data artists carry SVG ids ``ep-<panel>-target``,
    ``ep-<panel>-data<k>`` and the axes ``ep-<panel>-axes`` (panel = ``overview`` or ``zoom``).

    Args:
        data: :class:`fwgym.plots.CaseData` of the episode's case in its suite.
        record: the episode's result record (``levels`` = submitted normalised levels, or ``None``).
        bands: purchased forecasts ``{"label", "start_hour", "quantiles": (H, Q)}``.
        policy_band: ``((24, Q) quantiles on the target hours, label)`` of the policy's own predictive
            distribution, or ``None``.
        submitted: the submitted forecast (:func:`fwgym.plots.submitted_forecast`) or ``None``.
        history_hours: hours of visible history shown.

    Returns:
        ``{"overview": svg, "target": svg, "legend": [{"label", "color", "style"}], "ylim":
        {"overview": (lo, hi), "zoom": (lo, hi)}}`` with ``style`` in ``"line"``, ``"dash"``,
        ``"thick"``, ``"band"``, ``"dots"`` (the legend is drawn in HTML so it wraps at any width).
    """
    from fwgym.plots import draw_case, format_time_axes

    case = data.case
    with report_style():
        fo, ax = _plain_figure(6.4, 3.4, (0.105, 0.12, 0.875, 0.8))
        fz, zx = _plain_figure(3.8, 3.4, (0.17, 0.12, 0.755, 0.8))
        legend = draw_case(ax, None, data, record, history_hours=history_hours, bands=bands, policy_band=policy_band,
                           submitted=submitted, gid="ep", fs=8.0)
        legend_z = draw_case(None, zx, data, record, history_hours=history_hours, bands=bands,
                             policy_band=policy_band, submitted=submitted, gid="ep", fs=8.0)
        for e in legend_z:
            if not any(x["label"] == e["label"] for x in legend):
                legend.append(e)
        format_time_axes(ax, zx, case)
        ax.set_ylabel(case.series.unit)
        n = max(1, min(int(history_hours), len(case.history)))
        ax.set_title(f"last {n} visible hours to the end of the target day (UTC)", fontsize=9, loc="left")
        zx.set_title(f"target day {case.target_date.isoformat()} (times UTC)", fontsize=9, loc="left")
        ylim = {"overview": tuple(map(float, ax.get_ylim())), "zoom": tuple(map(float, zx.get_ylim()))}
        return {"overview": svg_text(fo, label=f"{case.case_id}: visible history, forecasts and the target day"),
                "target": svg_text(fz, label=f"{case.case_id}: the target day"),
                "legend": [{k: e[k] for k in ("label", "color", "style")} for e in legend], "ylim": ylim}


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
