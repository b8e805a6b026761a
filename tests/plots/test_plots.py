"""Figures: fwgym.plots and the `fwgym plot` command.

Files are written (PNG, SVG, PDF); paper-style figures are 3.3 or 7.0 in wide with no text under
7 pt, no text outside the figure and no two point labels overlapping; PDFs embed TrueType fonts
(never Type 3). The equal-S lines of every suite follow its score formula, the intervals are those of
fwgym.evaluation.paired_bootstrap, the case view draws the scored target (and the raw series where a
scenario changed it), the submitted forecast and the forecasts bought in a trace.
"""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from fwgym import plots  # noqa: E402
from fwgym.cli import main  # noqa: E402
from fwgym.evaluation import SUITES, evaluate, paired_bootstrap, run_meta, write_results  # noqa: E402
from fwgym.core.scoring import BUDGET, aggregate  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    recs = evaluate(["weekday_empirical", "hour_of_day_empirical", "seasonal_empirical", "backtest_selector_4",
                     "free_menu_oracle", "catalog_oracle", "perfect_demand"], split="test", limit=4, progress=False)
    out = tmp_path_factory.mktemp("run")
    write_results(recs, out)
    return out, recs


@pytest.fixture(scope="module")
def forecast_dir(tmp_path_factory):
    pols = ["context_hour_of_day_empirical", "hour_of_day_empirical_samples"]
    recs = evaluate(pols, split="test", limit=3, progress=False, env_kwargs=SUITES["forecast"])
    out = tmp_path_factory.mktemp("forecast")
    write_results(recs, out, {**run_meta("test", pols, 1), "suite": "forecast"})
    return out, recs


@pytest.fixture(scope="module")
def context_recs():
    return evaluate(["context_hour_of_day_empirical", "hour_of_day_empirical"], split="test", limit=3, progress=False,
                    env_kwargs=SUITES["context"])


def _is_image(path, ext):
    data = path.read_bytes()
    assert len(data) > 1000
    if ext == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    elif ext == "pdf":
        assert data.startswith(b"%PDF")
    else:
        assert b"<svg" in data[:2000]


def _texts(fig):
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return [(t, t.get_window_extent(r)) for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())]


def _check_paper(fig, width):
    """Width, minimum font size, every text inside the figure."""
    assert fig.get_size_inches()[0] == pytest.approx(width)
    sizes = plots.text_sizes(fig)
    assert sizes and min(s for _, s in sizes) >= plots.MIN_FONT_PT, [t for t in sizes if t[1] < plots.MIN_FONT_PT]
    fig.canvas.draw()
    tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches; what is drawn, texts included
    w, h = fig.get_size_inches()
    assert tight.x0 >= -0.01 and tight.y0 >= -0.01 and tight.x1 <= w + 0.01 and tight.y1 <= h + 0.01, (tight, (w, h))


def _point_labels(fig):
    return [(t.get_gid().split(":", 1)[1], bb) for t, bb in _texts(fig) if (t.get_gid() or "").startswith("point-label:")]


def _pdf_fonts_ok(path):
    data = path.read_bytes()
    assert b"/Type3" not in data and b"/FontFile2" in data  # embedded TrueType, no Type 3 font
    if shutil.which("pdffonts"):
        out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
        rows = out.splitlines()[2:]
        assert rows and all("TrueType" in r and " yes " in r for r in rows), out


@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_plot_commands_write_images(run_dir, tmp_path, ext, capsys):
    out, recs = run_dir
    cid = recs[0]["case_id"]
    for args in (["frontier", str(out)], ["tools", str(out)],
                 ["case", str(out), "--case-id", cid, "--policy", "seasonal_empirical"],
                 ["case", str(out), "--case-id", cid, "--policy", "catalog_oracle", "--hours", "48"]):
        target = tmp_path / f"{args[0]}-{len(args)}.{ext}"
        assert main(["plot", *args, "-o", str(target)]) == 0
        _is_image(target, ext)
        if ext == "pdf":
            _pdf_fonts_ok(target)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("columns", [1, 2])
def test_frontier_paper_style(run_dir, tmp_path, columns):
    _, recs = run_dir
    fig = plots.frontier_figure(recs, columns=columns, n_boot=300)
    _check_paper(fig, plots.PAPER_WIDTHS[columns])
    labels = _point_labels(fig)
    panels = 1 if columns == 1 else 3  # all cases + one per domain
    assert len(labels) == panels * len({r["policy"] for r in recs})
    for i, (p, a) in enumerate(labels):  # no two labels overlap (0.5 px tolerance)
        for q, b in labels[i + 1:]:
            assert (a.x1 <= b.x0 + 0.5 or b.x1 <= a.x0 + 0.5 or a.y1 <= b.y0 + 0.5 or b.y1 <= a.y0 + 0.5), (p, q, a, b)
    # too many long names for the width: each point is numbered by its rank by S, the names are in the legend
    ranked = sorted({r["policy"] for r in recs},
                    key=lambda p: (aggregate([r for r in recs if r["policy"] == p])["S"], p))
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert all(f"{k + 1}  {p}" in legend for k, p in enumerate(ranked)), legend
    assert {lab.get_text() for lab, _ in _texts(fig) if (lab.get_gid() or "").startswith("point-label:")} == {
        str(k + 1) for k in range(len(ranked))}
    assert any("paired bootstrap" in t and "hour_of_day_empirical" in t for t in legend)
    pdf = plots.save_figure(fig, tmp_path / f"f{columns}.pdf")
    _pdf_fonts_ok(pdf)
    box = re.search(rb"/MediaBox \[ 0 0 ([\d.]+) ([\d.]+) \]", pdf.read_bytes())
    assert float(box.group(1)) == pytest.approx(plots.PAPER_WIDTHS[columns] * 72)  # 237.6 / 504 pt


def test_frontier_names_mode_on_a_wide_figure(run_dir):
    _, recs = run_dir
    elec = [r for r in recs if r["domain"] == "electricity"]
    fig = plots.frontier_figure(elec, columns=2, labels="auto", n_boot=200)
    _check_paper(fig, 7.0)
    names = {p for p, _ in _point_labels(fig)}
    assert names == {r["policy"] for r in elec}
    shown = {t.get_text() for t, _ in _texts(fig)}
    assert names <= shown  # the names themselves are drawn beside the points
    with pytest.raises(ValueError, match="labels"):
        plots.frontier_figure(elec, labels="bogus")


def _equal_s_lines(fig):
    out = {}
    for ax in fig.get_axes():
        if ax.get_xscale() != "log":
            continue
        for ln in ax.get_lines():
            m = re.fullmatch(r"_equal S=(.+)", ln.get_label())
            if m:
                out[float(m.group(1))] = (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
    return out


def test_equal_s_lines_follow_each_suites_formula(run_dir, forecast_dir):
    # decision, one domain: y = F + sigma * (2 S - c/B); every policy lies on its own line
    _, recs = run_dir
    elec = [r for r in recs if r["domain"] == "electricity"]
    pts = plots.frontier_points(elec, reference=None)
    floor = pts[0]["floor"]
    priced = next(q for q in pts if q["credits"] > 0)
    sigma = (priced["loss"] - floor) / priced["R"]
    m = plots.suite_metric("decision")
    for q in pts:
        assert m.equal_s_y(q["S"], np.array([q["credits"]]), floor, sigma, BUDGET)[0] == pytest.approx(q["loss"], rel=1e-9)
    lines = _equal_s_lines(plots.frontier_figure(elec, reference=None))
    assert lines
    for s, (x, y) in lines.items():
        np.testing.assert_allclose(y, floor + sigma * (2 * s - x / BUDGET), rtol=1e-12)
    # forecast: y = R = S - w c/B (a priced variant with w = 0.5: half the slope of 1/sigma... not the decision line)
    _, frecs = forecast_dir
    variant = [{**r, "policy": "priced_variant", "credits": 5000, "S": r["R"] + 0.5 * 5000 / BUDGET} for r in frecs
               if r["policy"] == "hour_of_day_empirical_samples"]
    allf = frecs + variant
    fig = plots.frontier_figure(allf, suite="forecast", credit_weight=0.5, reference=None, panels="all")
    lines = _equal_s_lines(fig)
    assert lines
    for s, (x, y) in lines.items():
        np.testing.assert_allclose(y, s - 0.5 * x / BUDGET, rtol=1e-12)
    fm = plots.suite_metric("forecast", 0.5)
    assert (fm.y_field, fm.r_weight, fm.credit_weight, fm.has_floor) == ("R", 1.0, 0.5, False)
    assert "RCRPS" in fm.y_label and fm.formula.startswith("S = R + 0.5")
    assert any(a.get_ylabel() == fm.y_label for a in fig.get_axes())
    # the weight is the manifest's, never recovered from S: without it the lines are those of w = 0 (S = R)
    for s, (x, y) in _equal_s_lines(plots.frontier_figure(allf, suite="forecast", reference=None, panels="all")).items():
        np.testing.assert_allclose(y, np.full_like(x, s), rtol=1e-12)


def test_frontier_intervals_are_the_paired_bootstrap(run_dir):
    _, recs = run_dir
    pts = {q["policy"]: q for q in plots.frontier_points(recs, n_boot=500, seed=7)}
    assert pts["hour_of_day_empirical"]["y_ci"] == (pts["hour_of_day_empirical"]["loss"],) * 2  # the reference
    for p in ("seasonal_empirical", "perfect_demand"):
        bs = paired_bootstrap(recs, "hour_of_day_empirical", p, n_boot=500, seed=7, metrics=("loss", "credits"))
        q = pts[p]
        assert q["y_ci"] == pytest.approx((q["loss"] - bs["loss"]["diff"] + bs["loss"]["lo"],
                                           q["loss"] - bs["loss"]["diff"] + bs["loss"]["hi"]), rel=1e-12)
        assert q["credits_ci"][0] <= q["credits"] <= q["credits_ci"][1]
    assert all(q["y_ci"] is None for q in plots.frontier_points(recs, reference=None))
    with pytest.raises(ValueError, match="reference"):
        plots.frontier_points(recs, reference="nobody")


def test_case_figure_decision_zoom_and_fitted_axes(run_dir):
    _, recs = run_dir
    week = next(r for r in recs if r["lead"] == "week_ahead" and r["domain"] == "electricity"
                and r["policy"] == "seasonal_empirical")
    day = next(r for r in recs if r["lead"] == "day_ahead" and r["policy"] == "seasonal_empirical")
    fig = plots.case_figure(recs, week["case_id"], "seasonal_empirical")
    _check_paper(fig, 7.0)
    ax, zx = fig.get_axes()[:2]
    data = plots.case_data(week, "decision")
    t0 = np.datetime64(int(data.case.target_start), "h")
    import matplotlib.dates as mdates

    assert mdates.num2date(zx.get_xlim()[0]).replace(tzinfo=None) == t0.astype("datetime64[s]").item()
    lo, hi = zx.get_ylim()
    assert lo > 0.3 * data.target.min()  # fitted to the data, not from 0 (electricity load is far above 0)
    assert lo <= data.target.min() and hi >= data.target.max()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "realised demand (hindsight)" in labels and "raw series (no scenario)" not in labels
    assert "submitted capacities" in labels and "perfect-demand plan" in labels
    assert len(plots.case_figure(recs, day["case_id"], "seasonal_empirical").get_axes()) == 1  # day-ahead: no zoom
    assert len(plots.case_figure(recs, day["case_id"], "seasonal_empirical", zoom=True).get_axes()) == 2
    one = plots.case_figure(recs, week["case_id"], "seasonal_empirical", columns=1)
    _check_paper(one, 3.3)


def test_case_figure_context_draws_scored_and_raw_target(context_recs):
    rec = None
    for r in context_recs:
        if plots.case_data(r, "context").changed:
            rec = r
            break
    assert rec is not None, "some context case has a scenario that changes the target"
    data = plots.case_data(rec, "context")
    assert not np.array_equal(data.target, data.raw_target)
    np.testing.assert_array_equal(data.raw_target, data.case.target())
    fig = plots.case_figure(context_recs, rec["case_id"], rec["policy"], suite="context")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "scored target (with scenario)" in labels and "raw series (no scenario)" in labels
    ax = fig.get_axes()[0]
    ys = [np.asarray(ln.get_ydata(), float) for ln in ax.get_lines()]
    assert any(len(y) == 24 and np.array_equal(y, data.target) for y in ys)
    assert any(len(y) == 24 and np.array_equal(y, data.raw_target) for y in ys)
    assert "scenario" in fig._suptitle.get_text()


def _forecast_trace(path, rec, quantiles):
    """A trace of the case: a bought forecast (the env's result format) and a quantile submission."""
    from fwgym.core.series import hour_to_iso

    data = plots.case_data(rec, "forecast")
    case = data.case
    start = int(case.last_visible) + 1
    bought = np.linspace(900, 1100, case.horizon)[:, None] + np.linspace(-50, 50, 9)[None, :]
    steps = [{"action": {"tool": "forecast", "args": {"model": "seasonal_empirical"}},
              "env_result": {"tool": "forecast", "ok": True, "result": {
                  "forecast_id": "f1", "model": "seasonal_empirical", "start": hour_to_iso(start),
                  "quantiles": bought.tolist()}}, "budget_left": 100000, "calls_left": 11},
             {"action": {"tool": "submit", "args": {"quantiles": quantiles.tolist()}}, "env_result": None}]
    line = {"policy": rec["policy"], "case_id": rec["case_id"], "messages": [], "steps": steps}
    path.write_text(json.dumps(line) + "\n")
    return bought


def test_case_figure_forecast_submission_and_traces(forecast_dir, tmp_path):
    out, recs = forecast_dir
    assert plots.results_suite(out) == "forecast" and plots.results_suite(out / "results.jsonl") == "forecast"
    rec = next(r for r in recs if r["policy"] == "hour_of_day_empirical_samples" and r["lead"] == "week_ahead")
    assert plots.submitted_forecast(rec)[0] == rec["submission"]["kind"]  # records carry what was submitted
    bare = {**rec, "submission": None}  # a record without it (fwgym 0.1.0 results): said, not hidden
    fig = plots.case_figure([bare], rec["case_id"], rec["policy"], suite="forecast")
    assert any("not in the record" in a.get_title(loc="left") for a in fig.get_axes())
    # a record that carries its submission in the submit tool's form
    q = np.sort(np.random.default_rng(3).normal(1500, 80, size=(24, 9)), axis=1)
    rec2 = {**rec, "submission": {"quantiles": q.tolist()}}
    assert plots.submitted_forecast(rec2)[0] == "quantiles"
    fig = plots.case_figure([rec2], rec["case_id"], rec["policy"], suite="forecast")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "submitted forecast median" in labels and "submitted capacities" not in labels
    zx = fig.get_axes()[1]
    assert any(np.allclose(np.asarray(ln.get_ydata(), float), q[:, 4]) for ln in zx.get_lines())
    # traces: the bought forecast and the submission from the trace's steps
    trace = tmp_path / "t.jsonl"
    _forecast_trace(trace, rec, q + 10)
    bare_recs = [{**r, "submission": None} for r in recs]  # the trace's submit is the one shown
    fig = plots.case_figure(bare_recs, rec["case_id"], rec["policy"], suite="forecast", traces=[trace])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "f1 seasonal_empirical 10-90%" in labels and "submitted forecast 10-90%" in labels
    assert any(np.allclose(np.asarray(ln.get_ydata(), float), q[:, 4] + 10) for ln in fig.get_axes()[1].get_lines())
    p = plots.plot_case(recs, rec["case_id"], rec["policy"], tmp_path / "c.pdf", suite="forecast", traces=trace)
    _pdf_fonts_ok(p)
    with pytest.raises(ValueError, match="no trace"):
        plots.case_figure(recs, rec["case_id"], "context_hour_of_day_empirical", traces=[trace])
    # the decision view refuses nothing but shows no forecast submission
    assert plots.submitted_forecast({"levels": [1.0] * 8}, [{"tool": "submit", "args": {"levels": [1.0] * 8}}]) is None


def test_submitted_forecast_and_band():
    q = np.tile(np.arange(9.0), (24, 1))
    assert plots.submitted_forecast({}, ['{"tool": "submit", "args": {"quantiles": %s}}' % json.dumps(q.tolist())])[0] == "quantiles"
    np.testing.assert_array_equal(plots.forecast_band(("quantiles", q)), q[:, [0, 4, 8]])
    s = np.arange(10.0)[:, None] * np.ones((1, 24))
    np.testing.assert_allclose(plots.forecast_band(("samples", s))[0], [0.9, 4.5, 8.1])  # numpy linear quantiles
    assert plots.submitted_forecast({"submission": {"kind": "samples", "values": s.tolist()}})[0] == "samples"
    assert plots.submitted_forecast({"submission": {"quantiles": [[1.0] * 9] * 23}}) is None  # not 24 steps
    assert plots.submitted_forecast({"submission": {"quantiles": [[float("nan")] * 9] * 24}}) is None
    assert plots.fit_limits([np.array([800.0, 900.0])]) == pytest.approx((794.0, 906.0))
    assert plots.fit_limits([np.array([0.0, 10.0])])[0] == 0.0  # counts never get a negative axis


def test_suite_helpers(tmp_path, run_dir):
    out, recs = run_dir
    with pytest.raises(ValueError, match="unknown suite"):
        plots.frontier_points(recs, suite="nope")
    assert plots.results_suite(out) == "decision"  # the manifest of results written without a suite names the decision suite
    for name, suite in (("a", "forecast"), ("b", "context")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text(json.dumps({"suite": suite}))
    with pytest.raises(ValueError, match="different suites"):
        plots.results_suite([tmp_path / "a", tmp_path / "b"])
    d = plots.suite_metric("decision")
    assert d.formula == "S = (R + c/B)/2, R = (loss − F)/σ" and d.y_field == "loss"
    assert "scenario-transformed" in plots.suite_metric("context").loss_label


def test_tools_figure_paper(run_dir, tmp_path):
    _, recs = run_dir
    _check_paper(plots.tools_figure(recs), 3.3)
    _check_paper(plots.tools_figure(recs, columns=2), 7.0)
    _pdf_fonts_ok(plots.plot_tools(recs, tmp_path / "t.pdf"))


def test_a_mark_is_drawn_at_paper_size_inside_the_figure_and_in_the_metadata(run_dir, tmp_path):
    from PIL import Image

    _, recs = run_dir
    tools = plots.tools_figure(recs)
    plots.mark_figure(tools, "UNVERIFIED: not checked")
    for fig in (tools, plots.frontier_figure(recs, n_boot=50, mark="UNVERIFIED: not checked"),
                plots.frontier_figure(recs, n_boot=50, mark="UNVERIFIED: not checked", title="t", columns=2)):
        assert fig.get_suptitle().split("\n")[0] == "UNVERIFIED: not checked"
        assert min(size for text, size in plots.text_sizes(fig) if text.startswith("UNVERIFIED")) >= 8.0  # title size
        _check_paper(fig, fig.get_size_inches()[0])
        fig.canvas.draw()  # the mark overlaps no axes
        r = fig.canvas.get_renderer()
        box = fig._suptitle.get_window_extent(r)
        assert all(not box.overlaps(ax.get_tightbbox(r)) for ax in fig.get_axes() if ax.get_visible())
        titles = [sf._suptitle for sf in fig.subfigs if sf._suptitle is not None] + [ax.title for ax in fig.get_axes()]
        assert titles and all(not box.overlaps(t.get_window_extent(r)) for t in titles if t.get_text())  # panel titles
    out = plots.plot_tools(recs, tmp_path / "t.png", mark="UNVERIFIED", description="a.jsonl has no manifest.json")
    assert Image.open(out).text == {"Software": "fwgym", "Title": "UNVERIFIED",
                                    "Description": "a.jsonl has no manifest.json"}
    out = plots.plot_case(recs, recs[0]["case_id"], recs[0]["policy"], tmp_path / "c.png", mark="UNVERIFIED")
    assert Image.open(out).text == {"Software": "fwgym", "Title": "UNVERIFIED", "Description": "UNVERIFIED"}
    assert Image.open(plots.plot_tools(recs, tmp_path / "u.png")).text == {"Software": "fwgym"}
    _pdf_fonts_ok(plots.plot_tools(recs, tmp_path / "t.pdf", mark="UNVERIFIED"))


def test_plot_functions_options_and_errors(run_dir, tmp_path):
    _, recs = run_dir
    cid = recs[0]["case_id"]
    q = np.sort(np.random.default_rng(0).normal(1000, 50, size=(24, 9)), axis=1)
    roi = np.zeros(24, dtype=bool)
    roi[6:12] = True
    p = plots.plot_case(recs, cid, "weekday_empirical", tmp_path / "c.svg", roi=roi, quantiles=q)
    _is_image(p, "svg")
    _is_image(plots.plot_case(recs, cid, "weekday_empirical", tmp_path / "c2.png", roi=[(0, 3), (20, 24)]), "png")
    _is_image(plots.plot_frontier([r for r in recs if r["domain"] == "electricity"], tmp_path / "f.png",
                                  agents=["backtest_selector_4"], n_boot=100, style="screen"), "png")
    with pytest.raises(ValueError, match="must end in"):
        plots.plot_tools(recs, tmp_path / "t.jpg")
    with pytest.raises(ValueError, match="no record of policy"):
        plots.plot_case(recs, cid, "nobody", tmp_path / "x.png")
    with pytest.raises(ValueError, match="roi span"):
        plots.plot_case(recs, cid, "weekday_empirical", tmp_path / "x.png", roi=[(20, 30)])
    with pytest.raises(ValueError, match="style"):
        plots.frontier_figure(recs, style="poster")
    with pytest.raises(ValueError, match="columns"):
        plots.tools_figure(recs, columns=3)
    with pytest.raises(ValueError, match="panels"):
        plots.frontier_figure(recs, panels="some")
    assert plots.policy_kind("catalog_oracle") == "oracle" and plots.policy_kind("seasonal_empirical", 2000) == "priced"


def test_plot_command_reports_errors(run_dir, tmp_path, capsys):
    out, _ = run_dir
    assert main(["plot", "case", str(out), "--case-id", "elec-NOPE-2024-02-03-day_ahead", "--policy", "x",
                 "-o", str(tmp_path / "x.png")]) == 2
    assert "no record" in capsys.readouterr().err


def _outside_at_save_dpi(fig):
    """Figure-level texts (titles, marks, legends, axis labels) that reach outside the figure when it is drawn at
    the dpi it is saved at."""
    from matplotlib.text import Text

    fig.set_dpi(plots.SAVE_DPI)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    w, h = fig.bbox.width, fig.bbox.height
    ticks = {id(t) for ax in fig.get_axes() for axis in (ax.xaxis, ax.yaxis) for tick in
             axis.get_major_ticks() + axis.get_minor_ticks() for t in (tick.label1, tick.label2)}
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or id(t) in ticks:
            continue  # tick labels (some lie outside the view and are not drawn): checked by the paper-size tests
        if t.axes is not None and t not in (t.axes.xaxis.label, t.axes.yaxis.label, t.axes.title):
            continue  # annotations inside the axes
        b = t.get_window_extent(r)
        if b.x0 < -1 or b.x1 > w + 1 or b.y0 < -1 or b.y1 > h + 1:
            out.append((t.get_text()[:60], round(b.x0), round(b.x1), round(w)))
    return out


@pytest.mark.parametrize("columns", [1, 2])
def test_titles_fit_the_figure_at_the_dpi_it_is_saved_at(run_dir, columns):
    """PNGs are saved at 300 dpi: their titles were wrapped by text measured at 100 dpi and cut at the edges
    (e.g. a case title with a 25-character agent name in one column); a figure is now made at the save dpi, a
    name wider than the figure is cut into pieces, and marks and long frontier titles are wrapped."""
    _, recs = run_dir
    base = recs[0]
    assert plots.case_figure(recs, base["case_id"], base["policy"]).dpi == plots.SAVE_DPI == 300
    for n in (25, 46, 49, 64, 90):
        name = ("openai:Qwen/Qwen3-30B-A3B-Instruct-2507-FP8-thinking-extra-long-name-for-testing" * 2)[:n]
        fig = plots.case_figure([{**base, "policy": name}], base["case_id"], name, columns=columns)
        assert _outside_at_save_dpi(fig) == [], (n, columns)
    fig = plots.frontier_figure(recs, n_boot=50, columns=columns, title="a long title of a frontier figure " * 4,
                                mark="UNVERIFIED: not checked against a run manifest; PARTIAL: not the whole split "
                                     "(8 of 1259 cases)")
    assert _outside_at_save_dpi(fig) == []
    assert fig.get_suptitle().startswith("UNVERIFIED: not checked against a run manifest;")


def test_intervals_of_a_non_negative_metric_stop_at_zero():
    """The frontier draws aggregate + the paired interval of the difference: for a metric that cannot be negative
    (the decision loss, RCRPS, credits) the interval is clipped at 0 (it reached -0.5 here)."""
    series = ["ISNE", "PJM", "CISO", "ERCO"]

    def rec(policy, k, loss):
        return {"policy": policy, "case_id": f"elec-{series[k]}-2024-07-03-day_ahead", "domain": "electricity",
                "cohort": "electricity-july", "series_id": series[k], "lead": "day_ahead", "split": "test",
                "loss": loss, "floor": 0.0, "R": loss / 0.05, "S": loss / 0.1, "credits": 0, "calls": 1, "valid": True,
                "status": "submitted"}

    recs = [rec("hour_of_day_empirical", k, [0.0, 1.0, 0.0, 1.0][k]) for k in range(4)]
    recs += [rec("good", k, 0.0) for k in range(4)]
    pts = {q["policy"]: q for q in plots.frontier_points(recs, suite="decision", n_boot=400, seed=1)}
    lo, hi = pts["good"]["y_ci"]
    assert lo == 0.0 and 0.3 < hi <= 0.5  # unclipped: 0 - (-0.5) + [-1, 0] = [-0.5, 0.5]
    from fwgym.evaluation import paired_bootstrap

    bs = paired_bootstrap(recs, "hour_of_day_empirical", "good", n_boot=400, seed=1, metrics=("loss",))
    assert 0.0 - bs["loss"]["diff"] + bs["loss"]["lo"] < 0  # what the clipping removes
