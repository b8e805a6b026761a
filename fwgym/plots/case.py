"""The case view: the tail of the visible history, the as-of time and the unseen hours, forecast bands
(the policy's own, those bought in a trace), the submitted capacities or the submitted forecast, the
perfect-demand plan and the scored target (and the raw series where a scenario changed it), with a
target-day zoom for week-ahead cases."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from fwgym.core.cases import CHART_HISTORY_HOURS
from fwgym.domains import get_domain
from fwgym.suites import DEFAULT_SUITE, get_suite, suite_metric
from fwgym.plots.data import CaseData, case_data
from fwgym.plots.forecast import forecast_band, policy_forecast_band, submitted_forecast
from fwgym.plots.style import (STYLES, check_path, figure_style, figure_width, freeze_ticks, legend_ncol, new_figure,
                               save_figure, wrap_text)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    out, start = [], None
    for i, v in enumerate(list(mask) + [False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            out.append((start, i))
            start = None
    return out


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


def format_time_axes(ax, zx, case) -> None:
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
        policy_band = policy_forecast_band(case, policy)
    zoom = (case.lead == "week_ahead") if zoom is None else bool(zoom)
    with figure_style(style):
        fs = float(STYLES[style]["font.size"])
        width = figure_width(style, columns)
        fig = new_figure(width, height or (width * (0.5 if columns == 2 else 0.95)))
        if zoom:
            if columns == 2:
                ax, zx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.7, 1.0]})
            else:
                ax, zx = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.0, 1.0]})
        else:
            ax, zx = fig.subplots(), None
        legend = draw_case(ax, zx, data, rec, history_hours=history_hours, bands=bands, policy_band=policy_band,
                           submitted=submitted, roi=roi, fs=fs)
        format_time_axes(ax, zx, case)
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
        fig.suptitle(title or wrap_text(fig, parts, fs + 0.5, width - 0.1), fontsize=fs + 0.5)
        labels = [e["label"] for e in legend]
        fig.legend([e["artist"] for e in legend], labels, loc="outside lower center",
                   ncol=legend_ncol(fig, labels, fs, width, max_ncol=4), frameon=False)
        freeze_ticks(fig, style)
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
    p = check_path(path)
    fig = case_figure(records, case_id, policy, roi=roi, quantiles=quantiles, history_hours=history_hours,
                      suite=suite, traces=traces, zoom=zoom, style=style, columns=columns, title=title, height=height)
    return save_figure(fig, p, style, mark=mark, description=description)


# ---------------------------------------------------------------------------------------------
# tool use
