"""Figure plumbing shared by every figure of :mod:`fwgym.plots`: styles, sizes, fonts, saving and marks.

Matplotlib is an optional dependency (``pip install fwgym[plots]``). Figures are drawn on
``matplotlib.figure.Figure`` objects with the Agg canvas, so importing this module never changes the
global pyplot backend. The output format follows the file extension: ``.png``, ``.svg`` or ``.pdf``.

Styles (:data:`STYLES`): ``"paper"`` (the default) sizes a figure for one column (3.3 in wide) or two
columns / a page (7.0 in) with every text at least 7 pt at that size; ``"screen"`` is larger (the HTML
report's). Every style embeds TrueType (Type 42) fonts in PDF and PostScript, never Type 3. A figure is
made at the dpi it is saved at (:data:`SAVE_DPI`), so every text measured for its layout (wrapped
titles, label columns, legend columns) is measured as it will be rendered.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Sequence


FORMATS = (".png", ".svg", ".pdf")
#: the resolution (dots per inch) raster figures are saved at
SAVE_DPI = 300

#: figure widths (inches) of the paper style: one column, two columns (a page)
PAPER_WIDTHS = {1: 3.3, 2: 7.0}
#: the smallest font size (points) of any text in a paper-style figure
MIN_FONT_PT = 7.0


_COMMON_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none", "svg.hashsalt": "fwgym",
              "font.family": ["DejaVu Sans", "sans-serif"], "axes.unicode_minus": True,
              "path.simplify": True, "savefig.dpi": SAVE_DPI, "figure.dpi": 100}
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


def require_matplotlib():
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
    mpl = require_matplotlib()
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


def new_figure(width: float, height: float, layout: str | None = "constrained"):
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=layout, dpi=SAVE_DPI)  # text is measured as it will be saved
    FigureCanvasAgg(fig)
    if layout == "constrained":
        fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.02, hspace=0.02)
    return fig


def freeze_ticks(fig, style: str) -> None:
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


def check_path(path: str | Path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"output file {p} must end in one of {list(FORMATS)} (the format follows the extension)")
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    return p


def mark_figure(fig, mark: str, style: str = "paper") -> None:
    """Put ``mark`` (e.g. ``"NOT HASH-CHECKED: ..."``: what nothing vouches for in the figure's data) at the
    top of the figure, in bold dark red, as the first line of its suptitle (a suptitle it already has
    follows on the next line; the constrained layout makes room for both), at the style's title
    size (>= :data:`MIN_FONT_PT` points in the paper style). A figure whose suptitle starts with
    ``mark`` already is left as it is. The mark is wrapped to the figure's width, a line per mark where
    they do not fit on one (``"; "`` separates marks). The figure must still have its layout engine (a frontier is
    marked by :func:`frontier_figure` itself, before it freezes its layout)."""
    fs = max(float(STYLES[style]["figure.titlesize"]) if style in STYLES else MIN_FONT_PT, MIN_FONT_PT)
    old = fig.get_suptitle()
    if old:
        fs = max(fs, float(fig._suptitle.get_fontsize()))
    segments = mark.split("; ")  # several marks: a line each where one line does not hold them
    lines = []
    for k, seg in enumerate(segments):
        text = seg + (";" if k < len(segments) - 1 else "")
        lines += wrap_text(fig, text.split(" "), fs, fig.get_figwidth() - 0.1, weight="bold").split("\n")
    drawn = "\n".join(lines)
    if old.startswith(drawn):
        return
    if old:  # the title under the mark is drawn bold too (one text): wrapped as such
        old = "\n".join(wrap_text(fig, line.split(" "), fs, fig.get_figwidth() - 0.1, weight="bold")
                        for line in old.split("\n"))
    fig.suptitle(f"{drawn}\n{old}" if old else drawn, fontsize=fs, fontweight="bold", color="#a00000")


def save_figure(fig, path: str | Path, style: str = "paper", mark: str | None = None,
                description: str | None = None) -> Path:
    """Save ``fig`` under the style's settings (TrueType fonts in PDF). Returns the path.

    Args:
        mark: a warning drawn in the figure (:func:`mark_figure`, unless it carries it already) and written to the file's metadata as
            its title (PDF ``Title``, PNG and SVG ``Title``), e.g. ``"NOT HASH-CHECKED"`` for records of a
            source without a run manifest; ``None``: no mark.
        description: the longer text of the mark for the metadata (PDF ``Subject``, PNG and SVG
            ``Description``; default ``mark``).

    Raises:
        ValueError: an extension other than ``.png``, ``.svg``, ``.pdf``.
    """
    p = check_path(path)
    ext = p.suffix.lower()
    meta = {"Creator": "fwgym"} if ext == ".pdf" else ({"Software": "fwgym"} if ext == ".png" else {})
    if mark:
        mark_figure(fig, mark, style)
        meta["Title"] = mark
        meta["Subject" if ext == ".pdf" else "Description"] = description or mark
    with figure_style(style):
        fig.savefig(p, metadata=meta or None)
    return p


def text_width_in(fig, texts: Iterable[str], fs: float, weight: str = "normal") -> float:
    """Widest of ``texts`` in inches at font size ``fs`` (measured with the figure's renderer)."""
    from matplotlib.text import Text

    r = fig.canvas.get_renderer()
    w = 0.0
    for s in texts:
        t = Text(0, 0, s, fontsize=fs, figure=fig, fontweight=weight)
        w = max(w, t.get_window_extent(r).width / fig.dpi)
    return w


#: the free strip (inches): x of the three dodged columns of points (names mode: a label column


def legend_ncol(fig, labels: Sequence[str], fs: float, width_in: float, max_ncol: int = 6) -> int:
    """The most legend columns (filled column by column, as matplotlib does) that fit ``width_in``."""
    em = fs / 72
    widths = [text_width_in(fig, str(s).split("\n"), fs) + 2.1 * em for s in labels]
    for ncol in range(min(max_ncol, len(labels)), 1, -1):
        # matplotlib's split (Legend._init_legend_box): the first n % ncol columns hold one entry more
        rows, large = divmod(len(labels), ncol)
        sizes = [rows + 1] * large + [rows] * (ncol - large)
        starts = [sum(sizes[:k]) for k in range(ncol)]
        cols = [widths[a: a + n] for a, n in zip(starts, sizes) if n]
        if sum(max(c) for c in cols) + 0.9 * em * (len(cols) - 1) + 0.1 <= width_in:
            return ncol
    return 1


def _split_long(fig, part: str, fs: float, width_in: float, weight: str = "normal") -> list[str]:
    """``part`` in pieces that each fit ``width_in`` (measured), cut after ``/``, ``-``, ``_``, ``:`` or ``.``
    where possible, else anywhere: a name longer than the figure is wide is never clipped."""
    if text_width_in(fig, [part], fs, weight) <= width_in:
        return [part]
    pieces, cur = [], ""
    for ch in part:
        if cur and text_width_in(fig, [cur + ch], fs, weight) > width_in:
            cut = max((cur.rfind(c) for c in "/-_:."), default=-1)
            if cut > 0:
                pieces.append(cur[: cut + 1])
                cur = cur[cut + 1:]
            else:
                pieces.append(cur)
                cur = ""
        cur += ch
    return pieces + ([cur] if cur else [])


def wrap_text(fig, parts: Sequence[str], fs: float, width_in: float, weight: str = "normal") -> str:
    """``parts`` joined by spaces, with line breaks between parts where a line would exceed ``width_in``
    (measured with the figure's renderer, at its dpi: the dpi it is saved at); a part wider than
    ``width_in`` on its own is cut into pieces that fit (:func:`_split_long`)."""
    pieces = [q for p in parts for q in _split_long(fig, p, fs, width_in, weight)]
    lines = [pieces[0]]
    for p in pieces[1:]:
        trial = f"{lines[-1]} {p}"
        if text_width_in(fig, [trial], fs, weight) <= width_in:
            lines[-1] = trial
        else:
            lines.append(p)
    return "\n".join(lines)


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
