"""``fwgym plot``: every figure option reaches fwgym.plots, and one figure per command end to end (paper
size, TrueType fonts)."""
import re

import pytest

from fwgym import plots
from fwgym.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plot") / "run"
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(out), "--policies",
                 "hour_of_day_empirical", "weekday_empirical", "seasonal_empirical", "perfect_demand"]) == 0
    return out


@pytest.fixture
def calls(monkeypatch):
    got = {}

    def recorder(name):
        def fn(records, *args, **kwargs):
            got[name] = {"records": records, "args": args, "kwargs": kwargs}
            return args[-1] if args else kwargs.get("path")
        return fn

    for name in ("plot_frontier", "plot_case", "plot_tools"):
        monkeypatch.setattr(plots, name, recorder(name))
    return got


def test_frontier_options_reach_plot_frontier(run, calls, tmp_path):
    assert main(["plot", "frontier", str(run), "-o", str(tmp_path / "f.pdf")]) == 0
    kw = calls["plot_frontier"]["kwargs"]
    assert {k: kw[k] for k in ("style", "height", "suite", "panels", "labels", "reference", "n_boot", "seed", "title",
                               "agents")} == {"style": "paper", "height": None, "suite": "decision", "panels": "auto",
                                              "labels": "auto", "reference": "auto", "n_boot": 10_000, "seed": 1701,
                                              "title": None, "agents": ()}
    assert "columns" not in kw  # the function's default: 1 for one panel, else 2
    assert len(calls["plot_frontier"]["records"]) == 16
    assert main(["plot", "frontier", str(run), "-o", str(tmp_path / "f.pdf"), "--style", "screen", "--columns", "1",
                 "--height", "2.5", "--suite", "context", "--panels", "domains", "--labels", "numbers", "--reference",
                 "none", "--n-boot", "500", "--seed", "7", "--title", "T", "--agents", "weekday_empirical"]) == 0
    kw = calls["plot_frontier"]["kwargs"]
    assert (kw["style"], kw["columns"], kw["height"], kw["suite"], kw["panels"], kw["labels"], kw["reference"],
            kw["n_boot"], kw["seed"], kw["title"], kw["agents"]) == (
        "screen", 1, 2.5, "context", "domains", "numbers", None, 500, 7, "T", ["weekday_empirical"])
    main(["plot", "frontier", str(run), "-o", str(tmp_path / "f.pdf"), "--reference", "weekday_empirical"])
    assert calls["plot_frontier"]["kwargs"]["reference"] == "weekday_empirical"


def test_case_options_reach_plot_case(run, calls, tmp_path):
    from fwgym.evaluation import read_results

    cid = read_results([run])[0]["case_id"]
    base = ["plot", "case", str(run), "--case-id", cid, "--policy", "weekday_empirical", "-o", str(tmp_path / "c.pdf")]
    assert main(base) == 0
    c = calls["plot_case"]
    assert c["args"][:2] == (cid, "weekday_empirical")
    kw = c["kwargs"]
    assert (kw["style"], kw["height"], kw["suite"], kw["traces"], kw["zoom"], kw["title"], kw["history_hours"]) == (
        "paper", None, "decision", None, None, None, 168) and "columns" not in kw
    traces = tmp_path / "t.jsonl"
    assert main(base + ["--style", "screen", "--columns", "1", "--height", "4", "--suite", "forecast", "--traces",
                        str(traces), str(traces), "--no-zoom", "--title", "X", "--hours", "48"]) == 0
    kw = calls["plot_case"]["kwargs"]
    assert (kw["style"], kw["columns"], kw["height"], kw["suite"], kw["traces"], kw["zoom"], kw["title"],
            kw["history_hours"]) == ("screen", 1, 4.0, "forecast", [str(traces)] * 2, False, "X", 48)
    assert main(base + ["--zoom"]) == 0 and calls["plot_case"]["kwargs"]["zoom"] is True


def test_tools_options_reach_plot_tools(run, calls, tmp_path):
    assert main(["plot", "tools", str(run), "-o", str(tmp_path / "t.pdf"), "--columns", "2", "--height", "3",
                 "--style", "screen", "--title", "Y"]) == 0
    kw = calls["plot_tools"]["kwargs"]
    assert (kw["style"], kw["columns"], kw["height"], kw["title"]) == ("screen", 2, 3.0, "Y")


def test_agents_that_match_no_policy_are_an_error(run, calls, tmp_path, capsys):
    """A typo in ``--agents`` names the results' policies and draws nothing (it drew the figure without
    the agent before)."""
    out = tmp_path / "f.pdf"
    assert main(["plot", "frontier", str(run), "-o", str(out), "--agents", "weekday_empirical", "nope"]) == 2
    err = capsys.readouterr().err
    assert err == ("fwgym: error: --agents: no policy 'nope' in the results; their policies: hour_of_day_empirical, "
                   "weekday_empirical, seasonal_empirical, perfect_demand\n")
    assert "plot_frontier" not in calls and not out.exists()
    assert main(["plot", "frontier", str(run), "-o", str(out), "--agents", "perfect_demand"]) == 0
    assert calls["plot_frontier"]["kwargs"]["agents"] == ["perfect_demand"]


def test_case_and_reference_names_that_match_no_policy_are_errors(run, tmp_path, capsys):
    from fwgym.evaluation import read_results

    out = tmp_path / "f.pdf"
    cid = read_results([run])[0]["case_id"]
    assert main(["plot", "case", str(run), "-o", str(out), "--case-id", cid, "--policy", "nope"]) == 2
    assert "no record of policy 'nope'" in capsys.readouterr().err
    assert main(["plot", "case", str(run), "-o", str(out), "--case-id", "nope", "--policy", "weekday_empirical"]) == 2
    assert "(case not in the results)" in capsys.readouterr().err
    assert main(["plot", "frontier", str(run), "-o", str(out), "--reference", "nope"]) == 2
    assert "reference policy 'nope' is not among the policies" in capsys.readouterr().err
    assert not out.exists()


def _pdf_size_in(path):
    box = re.search(rb"/MediaBox \[ *0 0 ([0-9.]+) ([0-9.]+) *\]", path.read_bytes())
    return float(box.group(1)) / 72, float(box.group(2)) / 72


@pytest.mark.parametrize("argv, width", [
    (["frontier", "--columns", "1", "--n-boot", "200", "--panels", "all", "--labels", "numbers"], 3.3),
    (["frontier", "--columns", "2", "--n-boot", "200", "--height", "3"], 7.0),
    (["case", "--policy", "seasonal_empirical", "--zoom", "--title", "case view"], 7.0),
    (["tools", "--columns", "1"], 3.3),
])
def test_one_paper_figure_per_command(run, tmp_path, argv, width, capsys):
    from fwgym.evaluation import read_results

    target = tmp_path / "fig.pdf"
    extra = ["--case-id", read_results([run])[0]["case_id"]] if argv[0] == "case" else []
    assert main(["plot", argv[0], str(run), *argv[1:], *extra, "-o", str(target)]) == 0
    assert capsys.readouterr().out == f"wrote {target}\n"
    data = target.read_bytes()
    assert data.startswith(b"%PDF") and b"/Type3" not in data and b"/FontFile2" in data  # TrueType, no Type 3
    w, h = _pdf_size_in(target)
    assert w == pytest.approx(width, abs=0.01)
    if "--height" in argv:
        assert h == pytest.approx(3.0, abs=0.01)
