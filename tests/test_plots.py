"""Figures: fwgym.plots and the `fwgym plot` command write non-empty PNG and SVG files."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")

from fwgym import plots  # noqa: E402
from fwgym.cli import main  # noqa: E402
from fwgym.evaluation import evaluate, write_results  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    recs = evaluate(["weekday_empirical", "hour_of_day_empirical", "seasonal_empirical", "backtest_selector_4",
                     "free_menu_oracle", "catalog_oracle", "perfect_demand"], split="test", limit=4, progress=False)
    out = tmp_path_factory.mktemp("run")
    write_results(recs, out)
    return out, recs


def _is_image(path, ext):
    data = path.read_bytes()
    assert len(data) > 1000
    if ext == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert b"<svg" in data[:2000]


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plot_commands_write_images(run_dir, tmp_path, ext, capsys):
    out, recs = run_dir
    cid = recs[0]["case_id"]
    for args in (["frontier", str(out)], ["tools", str(out)],
                 ["case", str(out), "--case-id", cid, "--policy", "seasonal_empirical"],
                 ["case", str(out), "--case-id", cid, "--policy", "catalog_oracle", "--hours", "48"]):
        target = tmp_path / f"{args[0]}-{len(args)}.{ext}"
        assert main(["plot", *args, "-o", str(target)]) == 0
        _is_image(target, ext)
    assert "wrote" in capsys.readouterr().out


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
                                  agents=["backtest_selector_4"]), "png")
    with pytest.raises(ValueError, match="must end in"):
        plots.plot_tools(recs, tmp_path / "t.jpg")
    with pytest.raises(ValueError, match="no record of policy"):
        plots.plot_case(recs, cid, "nobody", tmp_path / "x.png")
    with pytest.raises(ValueError, match="roi span"):
        plots.plot_case(recs, cid, "weekday_empirical", tmp_path / "x.png", roi=[(20, 30)])
    assert plots.policy_kind("catalog_oracle") == "oracle" and plots.policy_kind("seasonal_empirical", 2000) == "priced"


def test_plot_command_reports_errors(run_dir, tmp_path, capsys):
    out, _ = run_dir
    assert main(["plot", "case", str(out), "--case-id", "elec-NOPE-2024-02-03-day_ahead", "--policy", "x",
                 "-o", str(tmp_path / "x.png")]) == 2
    assert "no record" in capsys.readouterr().err
