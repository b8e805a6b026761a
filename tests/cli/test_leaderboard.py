"""``fwgym leaderboard``: the protocol's bootstrap defaults, the reference choice, the output formats
(table, Markdown, CSV, LaTeX, JSON) labelled for the suite, and clean errors for malformed inputs."""
import csv
import io
import json
import re
import shutil

import pytest

from fwgym.cli import build_parser, main
from fwgym.evaluation import BOOT_SEED, N_BOOT, leaderboard, read_results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("lb") / "decision"
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(out),
                 "--policies", "weekday_empirical", "hour_of_day_empirical"]) == 0
    return out


@pytest.fixture(scope="module")
def forecast_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("lb") / "forecast"
    assert main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--out", str(out),
                 "--suite", "forecast"]) == 0
    return out


def _out(capsys, argv, code=0):
    capsys.readouterr()
    assert main(argv) == code
    return capsys.readouterr()


def test_defaults_are_the_protocol_constants():
    args = build_parser().parse_args(["leaderboard", "r"])
    assert (args.n_boot, args.seed, args.reference, args.format) == (N_BOOT, BOOT_SEED, None, "auto") == (
        10_000, 1701, None, "auto")


def test_reference_default_none_and_unknown(results, capsys):
    out = _out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--no-breakdown"]).out
    assert "200 draws, seed 1701, policy - hour_of_day_empirical" in out and "PARTIAL" in out
    assert "intervals" not in _out(capsys, ["leaderboard", str(results), "--reference", "NONE",
                                            "--no-breakdown"]).out.splitlines()[0]
    assert "reference policy 'nobody' is not among the policies" in _out(
        capsys, ["leaderboard", str(results), "--reference", "nobody"], 2).err


def test_markdown_is_the_default_off_a_terminal_and_table_aligns(results, capsys):
    md = _out(capsys, ["leaderboard", str(results), "--n-boot", "200"]).out
    assert md == _out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--format", "markdown"]).out
    assert "suite=decision (S = (R + c/B)/2, R = (loss − F)/σ)" in md.splitlines()[0]
    assert "| policy | S | R | loss | credits | calls | valid | ΔS vs hour_of_day_empirical [95% CI] |" in md
    assert "\ndecision loss by cohort and lead:\n\n| policy |" in md
    table = _out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--format", "table"]).out
    assert "|" not in table and "\x1b[" not in table
    lines = table.splitlines()
    head = next(ln for ln in lines if ln.startswith("policy "))
    rows = [ln for ln in lines if ln.startswith(("hour_of_day_empirical ", "weekday_empirical "))][:2]
    # the S column is right-aligned under its header in both rows
    s_end = head.index(" S ") + 2
    for ln, row in zip(rows, ("hour_of_day_empirical", "weekday_empirical")):
        rec = next(r for r in leaderboard(read_results([results]), reference=None) if r["policy"] == row)
        assert ln.index(f"{rec['S']:.4f}") + 6 == s_end
    assert "decision loss by cohort and lead" in table


def test_csv_json_and_latex_hold_the_rows(results, capsys):
    rows = leaderboard(read_results([results]), reference="hour_of_day_empirical", n_boot=200, seed=1701)
    text = _out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--format", "csv"]).out
    got = list(csv.DictReader(io.StringIO(text)))
    assert [g["policy"] for g in got] == [r["policy"] for r in rows]
    assert [float(g["S"]) for g in got] == [r["S"] for r in rows] and float(got[1]["dS_lo"]) == rows[1]["dS_lo"]
    doc = json.loads(_out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--format", "json"]).out)
    assert doc["suite"] == "decision" and doc["split"] == "test" and doc["reference"] == "hour_of_day_empirical"
    assert (doc["n_boot"], doc["seed"], doc["coverage"]["cases"], doc["coverage"]["complete"]) == (200, 1701, 4, False)
    assert doc["metric"]["formula"] == "S = (R + c/B)/2, R = (loss − F)/σ"
    from fwgym.evaluation.marks import MARK_COLUMNS

    assert [{k: v for k, v in r.items() if k not in (*MARK_COLUMNS, "partial")} for r in doc["rows"]] == rows
    assert {(r["hash_checked"], r["partial"]) for r in doc["rows"]} == {(True, True)}  # the marks, as in CSV
    assert [m["code"] for m in doc["marks"]] == ["PARTIAL"] and doc["header"].startswith("fwgym leaderboard (PARTIAL):")
    tex = _out(capsys, ["leaderboard", str(results), "--n-boot", "200", "--format", "latex"]).out
    body = [ln for ln in tex.splitlines() if not ln.startswith("%")]
    assert body[0] == r"\begin{tabular}{lrrrrrrrr}" and body[1] == r"\toprule" and body[3] == r"\midrule"
    assert body[-2:] == [r"\bottomrule", r"\end{tabular}"] and len(body) == 5 + len(rows) + 1
    assert body[2] == (r"policy & $S$ & $R$ & loss & credits & calls & valid & $\Delta S$ [95\% CI] & "
                       r"$\Delta$loss [95\% CI] \\")
    for ln, r in zip(body[4:-2], rows):
        cells = ln[: -len(r" \\")].split(" & ")
        assert len(cells) == 9 and cells[0] == r["policy"].replace("_", r"\_") and cells[1] == f"{r['S']:.4f}"
        assert not re.search(r"(?<!\\)[_%#&]", " ".join(cells))  # every special character escaped
    assert body[5].endswith(f"${rows[1]['dS']:+.4f}$ [${rows[1]['dS_lo']:+.4f}$, ${rows[1]['dS_hi']:+.4f}$] & "
                            f"${rows[1]['dloss']:+.5f}$ [${rows[1]['dloss_lo']:+.5f}$, ${rows[1]['dloss_hi']:+.5f}$] \\\\")
    assert "% needs \\usepackage{booktabs}" in tex and "% intervals: policy - hour_of_day_empirical" in tex


def test_forecast_suite_is_labelled_rcrps(forecast_results, capsys):
    md = _out(capsys, ["leaderboard", str(forecast_results), "--n-boot", "100"]).out
    assert "suite=forecast (S = R + 0·c/B, R = min(RCRPS, 5))" in md.splitlines()[0]
    ref = "hour_of_day_empirical_samples"
    # the RCRPS column is the capped mean, beside it without the violation term and CiK's fair estimator
    assert ("| policy | S | RCRPS (capped mean) | RCRPS w/o violation | RCRPS fair (CiK) | credits | calls | valid | "
            f"ΔS vs {ref} [95% CI] | ΔRCRPS vs {ref} [95% CI] | ΔRCRPS w/o violation vs {ref} [95% CI] |") in md
    assert "RCRPS by cohort and lead:" in md and "decision loss" not in md and "| loss |" not in md
    # the breakdown by scenario family and context type, with and without the violation term
    for title in ("RCRPS (capped mean) by scenario family:", "RCRPS (capped mean) by CiK context type:",
                  "RCRPS without the violation term (capped mean) by scenario family:",
                  "RCRPS without the violation term (capped mean) by CiK context type:"):
        assert title in md
    doc = json.loads(_out(capsys, ["leaderboard", str(forecast_results), "--format", "json", "--n-boot", "100"]).out)
    assert doc["metric"]["loss"] == "RCRPS" and doc["metric"]["R"] == "min(RCRPS, 5)"
    row = next(r for r in doc["rows"] if r["policy"] == ref)
    fam = next(k for k in row if k.startswith("R_no_violation[family:"))
    assert {"R", "R_no_violation", "R_fair", "dR", "dR_no_violation"} <= set(row) and "dloss" not in row
    assert any(b["policy"] == ref and f"R_no_violation[family:{b['group']}]" == fam for b in doc["breakdown"])
    tex = _out(capsys, ["leaderboard", str(forecast_results), "--format", "latex", "--n-boot", "100"]).out
    assert r"& RCRPS (capped mean) & " in tex and r"$\Delta$RCRPS [95\% CI]" in tex
    assert "% RCRPS without the violation term (capped mean) by CiK context type:" in tex
    assert tex.count(r"\begin{tabular}") == 5  # the main table and the 4 breakdown tables
    text = _out(capsys, ["leaderboard", str(forecast_results), "--format", "csv", "--n-boot", "100"]).out
    header = next(csv.reader(io.StringIO(text)))
    assert fam in header and "R_no_violation" in header and any(h.startswith("n[context_type:") for h in header)
    # the run directory's leaderboard.md is labelled for its suite too
    assert "RCRPS by cohort and lead:" in (forecast_results / "leaderboard.md").read_text()


def _edited(results, tmp_path, name, text=None, data=None):
    d = tmp_path / name
    shutil.copytree(results, d)
    if data is not None:
        (d / "results.jsonl").write_bytes(data)
    if text is not None:
        (d / "results.jsonl").write_text(text)
    return d


def test_malformed_inputs_are_clean_errors(results, tmp_path, capsys):
    first = json.loads((results / "results.jsonl").read_text().splitlines()[0])
    cases = {
        "missing": (tmp_path / "nothing", "no results file"),
        "not json": (_edited(results, tmp_path, "notjson", "{not json\n"), "results.jsonl:1: not a JSON line"),
        "a list": (_edited(results, tmp_path, "list", "[1, 2]\n"), "results.jsonl:1: expected a JSON object"),
        "not utf-8": (_edited(results, tmp_path, "bytes", data=b"\xff\xfe{}\n"), "results.jsonl:1: not UTF-8 text"),
        "empty": (_edited(results, tmp_path, "empty", ""), "8 record(s) missing (the manifest counts 8 records, "
                                                            "the file has 0)"),
        "fields missing": (_edited(results, tmp_path, "fields", json.dumps({"policy": "x"}) + "\n"), "lacks ["),
        "bad value": (_edited(results, tmp_path, "value", json.dumps({**first, "S": "x"}) + "\n"),
                      "S = 'x' is not a finite number"),
    }
    bare = tmp_path / "bare.jsonl"  # a results file outside a run directory
    bare.write_text("")
    cases["empty file"] = (bare, f"results file {bare} has no manifest.json")
    for what, (path, message) in cases.items():
        err = _out(capsys, ["leaderboard", str(path)], 2).err
        assert err.startswith("fwgym: error: ") and message in err and "Traceback" not in err, (what, err)
    err = _out(capsys, ["leaderboard", str(bare), "--allow-unverified"], 2).err
    assert err.splitlines()[-1].startswith("fwgym: error: no result records"), err
    for what, edit, message in (("settings", {"settings": 5}, "'settings' is a int, expected a JSON object"),
                                ("sigma", "sigma", "malformed run settings: sigma 5"),
                                ("not json", None, "not a JSON run manifest")):
        d = tmp_path / f"manifest-{what}"
        shutil.copytree(results, d)
        m = json.loads((d / "manifest.json").read_text())
        if edit is None:
            (d / "manifest.json").write_text("{oops")
        else:
            (d / "manifest.json").write_text(json.dumps({**m, **edit} if isinstance(edit, dict) else
                                                        {**m, "settings": {**m["settings"], "sigma": 5}}))
        err = _out(capsys, ["leaderboard", str(d)], 2).err
        assert err.startswith("fwgym: error: ") and message in err, (what, err)


def test_means_of_equal_values_print_as_those_values(tmp_path, capsys):
    # --limit 3: cohort weights 1/3 whose float sum is 0.9999999999999999; every episode makes 1 call
    out = tmp_path / "three"
    assert main(["evaluate", "--split", "test", "--limit", "3", "--no-progress", "--out", str(out),
                 "--policies", "weekday_empirical"]) == 0
    recs = read_results([out])
    assert {r["calls"] for r in recs} == {1} and {r["credits"] for r in recs} == {0}
    row = next(csv.DictReader(io.StringIO(_out(capsys, ["leaderboard", str(out), "--format", "csv"]).out)))
    assert (row["calls"], row["credits"]) == ("1.0", "0.0")
    doc = json.loads(_out(capsys, ["leaderboard", str(out), "--format", "json"]).out)
    assert (doc["rows"][0]["calls"], doc["rows"][0]["credits"]) == (1.0, 0.0)
    tex = _out(capsys, ["leaderboard", str(out), "--format", "latex"]).out
    assert " & 0.0 & 1.00 & 6/6" in tex  # credits, calls, valid of the one row
