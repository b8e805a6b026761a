"""The outputs a person reads (issue 30.7): the printed leaderboard fits an 80-column terminal without cutting
a policy name, ONE header (fwgym.evaluation.header) carries the marks into every artefact, and every output of
a ``--limit`` run says PARTIAL: evaluate's own table, leaderboard.md and .csv, ``fwgym leaderboard`` in every
format (and its loss-weight sensitivity table), the figures and the HTML report."""
import csv
import io
import json
import re

import pytest

from fwgym.cli import main

LONG = ["level_adjusted_weekly", "recent_week_empirical", "hour_of_day_empirical", "lead_matched_selector",
        "backtest_selector_4", "calendar_residual", "free_menu_oracle"]


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A --limit run (2 cases of each domain, 7 policies with the longest names of the default rows) and what
    fwgym evaluate printed."""
    import contextlib

    out = tmp_path_factory.mktemp("outputs") / "run"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(out), "--format",
                     "table", "--policies", *LONG]) == 0
    return out, buf.getvalue()


def _out(capsys, argv, code=0):
    capsys.readouterr()
    assert main(argv) == code
    return capsys.readouterr()


def test_an_80_column_leaderboard_keeps_every_policy_name_whole(limited, capsys, monkeypatch):
    run, _ = limited
    monkeypatch.setenv("COLUMNS", "80")
    text = _out(capsys, ["leaderboard", str(run), "--format", "table", "--n-boot", "200"]).out
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    assert "…" not in text and "..." not in text  # nothing cut
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("policy "))):]
    for name in LONG:  # every name whole, at the start of its row, in the main table and each breakdown
        assert sum(ln.split()[0] == name for ln in table if ln.strip()) >= 3, name
    head = next(ln for ln in lines if ln.startswith("policy "))
    assert head.split()[:2] == ["policy", "S"] and "ΔS [95% CI]" in head  # kept first by priority
    assert "(left out to fit 80 columns: " in text and "--wide shows every column" in " ".join(lines)
    assert "policy - hour_of_day_empirical" in text  # the short header's reference is named in the header line
    wide = _out(capsys, ["leaderboard", str(run), "--format", "table", "--n-boot", "200", "--wide"]).out
    head = next(ln for ln in wide.splitlines() if ln.startswith("policy "))
    assert max(len(ln) for ln in wide.splitlines()) > 80 and "left out" not in wide
    assert re.findall(r"ΔS vs hour_of_day_empirical \[95% CI\]|calls|valid|Δloss vs hour_of_day_empirical", head) == [
        "calls", "valid", "ΔS vs hour_of_day_empirical [95% CI]", "Δloss vs hour_of_day_empirical"]


def test_every_output_of_a_limit_run_says_partial(limited, capsys, tmp_path):
    run, printed = limited
    assert "fwgym leaderboard (PARTIAL): suite=decision" in printed and "PARTIAL: 4 of the 1259 cases" in printed
    assert (run / "leaderboard.md").read_text().startswith("fwgym leaderboard (**PARTIAL**): suite=decision")
    assert {r["partial"] for r in csv.DictReader(io.StringIO((run / "leaderboard.csv").read_text()))} == {"true"}
    flags = ["--n-boot", "100"]
    for fmt in ("table", "markdown", "latex"):
        assert "PARTIAL: 4 of the 1259 cases" in _out(capsys, ["leaderboard", str(run), "--format", fmt, *flags]).out
    rows = list(csv.DictReader(io.StringIO(_out(capsys, ["leaderboard", str(run), "--format", "csv", *flags]).out)))
    assert len(rows) == len(LONG) and {r["partial"] for r in rows} == {"true"}
    doc = json.loads(_out(capsys, ["leaderboard", str(run), "--format", "json", *flags]).out)
    assert [m["code"] for m in doc["marks"]] == ["PARTIAL"] and {r["partial"] for r in doc["rows"]} == {True}
    assert "fwgym leaderboard: loss-weight sensitivity (**PARTIAL**)" in _out(
        capsys, ["leaderboard", str(run), "--loss-weight", "0.25", "0.75", *flags]).out
    assert "(W=0.25, PARTIAL)" in _out(capsys, ["leaderboard", str(run), "--loss-weight", "0.25", "--format", "table",
                                                *flags]).out
    from PIL import Image

    for what, extra in (("frontier", ["--n-boot", "50"]), ("tools", []),
                        ("case", ["--case-id", _a_case(run), "--policy", LONG[0]])):
        png = tmp_path / f"{what}.png"
        _out(capsys, ["plot", what, str(run), "-o", str(png), *extra])
        assert Image.open(png).text["Title"] == "PARTIAL: not the whole split (4 of 1259 cases)", what
    site = tmp_path / "site"
    _out(capsys, ["report", str(run), "-o", str(site), "--episodes", "0", "--no-replay", "--n-boot", "50",
                  "--no-progress"])
    assert "<h1>PARTIAL: fwgym benchmark report" in (site / "index.html").read_text()
    assert {r["partial"] for r in csv.DictReader(io.StringIO((site / "leaderboard.csv").read_text()))} == {"true"}


def _a_case(run) -> str:
    return json.loads((run / "results.jsonl").read_text().splitlines()[0])["case_id"]


def test_loss_weight_rescores_the_saved_decisions_and_says_so_in_every_format(limited, capsys):
    from fwgym.core.scoring import aggregate, load_sigma
    from fwgym.evaluation import by_policy, read_results
    from fwgym.evaluation.weights import reweight

    run, _ = limited
    flags = ["--n-boot", "100", "--loss-weight", "0.25"]
    rows = list(csv.DictReader(io.StringIO(_out(capsys, ["leaderboard", str(run), "--format", "csv", *flags]).out)))
    want = {p: aggregate(rs)["S"] for p, rs in by_policy(reweight(read_results([run]), 0.25, load_sigma())).items()}
    assert {r["policy"]: float(r["S"]) for r in rows} == pytest.approx(want, abs=1e-15)
    assert {r["loss_weight"] for r in rows} == {"0.25"}
    doc = json.loads(_out(capsys, ["leaderboard", str(run), "--format", "json", *flags]).out)
    assert doc["loss_weight"] == 0.25 and doc["formula"] == "S = 0.25·R + 0.75·c/B, R = (loss − F)/σ"
    assert [m["code"] for m in doc["marks"]] == ["W=0.25", "PARTIAL"]
    tex = _out(capsys, ["leaderboard", str(run), "--format", "latex", *flags]).out
    assert "% fwgym leaderboard (W=0.25, PARTIAL): suite=decision (S = 0.25·R + 0.75·c/B" in tex
    md = _out(capsys, ["leaderboard", str(run), "--loss-weight", "0.5", "--n-boot", "100"]).out
    assert md == _out(capsys, ["leaderboard", str(run), "--n-boot", "100"]).out  # 0.5 is the protocol's S
    assert "W=" not in md.splitlines()[0]
    # the sensitivity table shows the intervals its header announces, one column per weight
    for fmt in ("markdown", "table", "latex"):
        text = _out(capsys, ["leaderboard", str(run), "--format", fmt, "--wide", "--n-boot", "100", "--loss-weight",
                             "0.25", "0.75"]).out
        assert "intervals: paired series-cluster bootstrap, 100 draws" in " ".join(text.replace("\n%", "\n").split()), fmt
        assert text.count("(reference)") == 2 and text.count("[95") >= 2, fmt
    md = _out(capsys, ["leaderboard", str(run), "--reference", "none", "--loss-weight", "0.25", "0.75"]).out
    assert "intervals" not in md and "95% CI" not in md and "(reference)" not in md
    err = _out(capsys, ["leaderboard", str(run), "--loss-weight", "1.5"], 2).err
    assert "the loss weight W must be a number in [0, 1], got 1.5" in err
