"""Run directories that nothing vouches for: a deleted manifest.json is refused by ``fwgym leaderboard``,
``report`` and ``plot`` (one line naming the directory, exit 2) unless ``--allow-unverified``, whose output
says NOT HASH-CHECKED; a records file with lines deleted or added says which records are missing or extra."""
import csv
import io
import json
import shutil

import pytest

from fwgym.cli import main
from fwgym.evaluation.verify import RunSettings, rescore


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("unverified") / "run"
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(out),
                 "--policies", "weekday_empirical", "hour_of_day_empirical", "perfect_demand"]) == 0
    return out


def _records(d):
    return [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]


def _write(d, records):
    (d / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def _out(capsys, argv, code):
    capsys.readouterr()
    assert main(argv) == code
    return capsys.readouterr()


@pytest.fixture(scope="module")
def forged(run, tmp_path_factory):
    """The trial's attack: weekday_empirical's submissions replaced by the hindsight plan, its scores
    re-computed so that re-scoring agrees (S = 0), the manifest (with the record hashes) deleted."""
    d = tmp_path_factory.mktemp("forged") / "run"
    shutil.copytree(run, d)
    settings = json.loads((d / "manifest.json").read_text())["settings"]
    rs = RunSettings(suite=settings["suite"], sigma=settings["sigma"], budget=settings["budget"],
                     scenario_seed=settings["scenario_seed"], credit_weight=settings["credit_weight"])
    records = _records(d)
    perfect = {r["case_id"]: r for r in records if r["policy"] == "perfect_demand"}
    for r in records:
        if r["policy"] == "weekday_empirical":
            r["levels"] = perfect[r["case_id"]]["levels"]
            fresh = rescore(r, rs)
            r.update({k: fresh[k] for k in ("loss", "floor", "R", "S")})
            assert r["S"] == 0.0
    _write(d, records)
    (d / "manifest.json").unlink()
    return d


def test_leaderboard_refuses_a_run_without_its_manifest(forged, capsys):
    err = _out(capsys, ["leaderboard", str(forged), "--format", "markdown", "--n-boot", "100"], 2).err.strip()
    assert err.splitlines() == [err] and err.startswith(f"fwgym: error: run directory {forged} has no manifest.json")
    assert "--allow-unverified" in err and "Traceback" not in err


def test_allow_unverified_ranks_it_marked_unverified(forged, capsys):
    flags = ["--n-boot", "100", "--allow-unverified", "--allow-partial"]
    got = _out(capsys, ["leaderboard", str(forged), "--format", "markdown", *flags], 0)
    header = got.out.splitlines()[0]
    assert header.startswith("fwgym leaderboard (**NOT HASH-CHECKED**, **PARTIAL**):")
    assert "re-scored, NOT hash-checked" in header
    assert f"NOT HASH-CHECKED: {forged} has no manifest.json" in header and "and hash-checked" not in header
    assert got.err.startswith(f"warning: NOT HASH-CHECKED: {forged} has no manifest.json")
    for fmt in ("csv", "json"):  # formats without a header still warn
        got = _out(capsys, ["leaderboard", str(forged), "--format", fmt, *flags], 0)
        assert got.err.startswith("warning: NOT HASH-CHECKED")
    doc = json.loads(got.out)
    assert doc["notes"][0].startswith(f"NOT HASH-CHECKED: {forged}")


def test_a_verified_run_says_so(run, capsys):
    header = _out(capsys, ["leaderboard", str(run), "--format", "markdown", "--n-boot", "100"], 0).out.splitlines()[0]
    assert "NOT HASH-CHECKED" not in header and "re-scored and hash-checked" in header and "and verified" not in header


def test_plot_and_report_refuse_it_too(forged, tmp_path, capsys):
    err = _out(capsys, ["plot", "tools", str(forged), "-o", str(tmp_path / "t.svg")], 2).err.strip()
    assert err.startswith(f"fwgym: error: run directory {forged} has no manifest.json") and len(err.splitlines()) == 1
    assert not (tmp_path / "t.svg").exists()
    got = _out(capsys, ["plot", "tools", str(forged), "-o", str(tmp_path / "t.svg"), "--allow-unverified"], 0)
    assert got.err.startswith("warning: NOT HASH-CHECKED") and (tmp_path / "t.svg").is_file()
    err = _out(capsys, ["report", str(forged), "-o", str(tmp_path / "rep"), "--episodes", "0", "--no-replay",
                        "--no-progress"], 2).err.strip()
    assert err.startswith(f"fwgym: error: run directory {forged} has no manifest.json") and len(err.splitlines()) == 1
    got = _out(capsys, ["report", str(forged), "-o", str(tmp_path / "rep"), "--episodes", "0", "--no-replay",
                        "--no-progress", "--allow-unverified"], 0)
    assert f"note: NOT HASH-CHECKED: {forged}" in got.err
    index = (tmp_path / "rep" / "index.html").read_text()
    assert "<h1>NOT HASH-CHECKED, PARTIAL: fwgym benchmark report" in index and "has no manifest.json" in index


def test_a_deleted_record_is_named_missing(run, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(run, d)
    records = _records(d)
    gone = records.pop(4)
    _write(d, records)
    err = _out(capsys, ["leaderboard", str(d)], 2).err.strip()
    assert err == (f"fwgym: error: {d / 'results.jsonl'}: 1 record(s) missing (the manifest counts 12 records, the file "
                   f"has 11): the run's record(s) 5 (by line) are not in the file: policy {gone['policy']!r} on case "
                   f"{gone['case_id']!r}; it was truncated or lines were deleted")
    assert "differs from the one the run wrote" not in err


def test_an_added_record_is_named_extra(run, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(run, d)
    records = _records(d)
    records.insert(2, records[7])
    _write(d, records)
    err = _out(capsys, ["leaderboard", str(d)], 2).err.strip()
    assert err == (f"fwgym: error: {d / 'results.jsonl'}: 1 record(s) the run did not write (the manifest counts 12 "
                   f"records, the file has 13): line(s) 3, e.g. policy {records[2]['policy']!r} on case "
                   f"{records[2]['case_id']!r}; lines were added")


def test_an_edit_beside_a_deletion_is_an_edit(run, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(run, d)
    records = _records(d)
    del records[0]
    records[0]["wall_s"] = 123.0  # a field the re-scoring cannot see
    _write(d, records)
    err = _out(capsys, ["leaderboard", str(d)], 2).err.strip()
    assert err.startswith(f"fwgym: error: {d / 'results.jsonl'}:1: record of policy {records[0]['policy']!r}")
    assert err.endswith("differs from the one the run wrote (its sha256 is not the manifest's); the manifest counts "
                        "12 records, the file has 11; the file was edited")


def test_csv_marks_every_row_verified_or_not(run, forged, tmp_path, capsys):
    """CSV has no header line: the NOT HASH-CHECKED and PARTIAL marks travel as columns, on stdout and in --csv."""
    flags = ["--n-boot", "100", "--allow-unverified", "--allow-partial"]
    other = tmp_path / "other"  # a verified run of another policy on the same cases, merged with the forged one
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(other),
                 "--policies", "lead_matched_selector"]) == 0
    got = _out(capsys, ["leaderboard", str(forged), str(other), "--format", "csv", "--csv", str(tmp_path / "lb.csv"),
                        *flags, "--allow-mixed-versions"], 0)  # a bare file has no version
    rows = list(csv.DictReader(io.StringIO(got.out)))
    assert {r["policy"]: r["hash_checked"] for r in rows} == {"weekday_empirical": "false", "hour_of_day_empirical": "false",
                                                          "perfect_demand": "false", "lead_matched_selector": "true"}
    assert {r["partial"] for r in rows} == {"true"}  # --limit 2: not the whole split
    assert list(csv.DictReader(io.StringIO((tmp_path / "lb.csv").read_text()))) == rows
    rows = list(csv.DictReader(io.StringIO(_out(capsys, ["leaderboard", str(run), "--format", "csv", "--n-boot",
                                                         "100"], 0).out)))
    assert len(rows) == 3 and {(r["hash_checked"], r["partial"]) for r in rows} == {("true", "true")}


@pytest.mark.parametrize("ext", [".png", ".pdf", ".svg"])
def test_figures_of_unverified_runs_say_so_in_the_figure_and_its_metadata(run, forged, tmp_path, capsys, ext):
    out = tmp_path / f"f{ext}"
    _out(capsys, ["plot", "frontier", str(forged), "-o", str(out), "--n-boot", "50", "--allow-unverified"], 0)
    data = out.read_bytes()
    if ext == ".png":
        from PIL import Image

        info = Image.open(out).text
        assert info["Title"] == ("NOT HASH-CHECKED: no run manifest; PARTIAL: not the whole split (4 of "
                                 "1259 cases)")  # every mark of the header, in the figure too
        assert info["Description"].startswith(f"NOT HASH-CHECKED: {forged} has no manifest.json")
    elif ext == ".pdf":
        assert b"/Title (NOT HASH-CHECKED: no run manifest" in data and b"/Subject (NOT HASH-CHECKED: " in data
    else:
        text = data.decode()
        assert text.count("NOT HASH-CHECKED: no run manifest") >= 2  # drawn (svg.fonttype none) + title
        assert f"NOT HASH-CHECKED: {forged} has no manifest.json" in text
    clean = tmp_path / f"clean{ext}"
    _out(capsys, ["plot", "frontier", str(run), "-o", str(clean), "--n-boot", "50"], 0)
    assert b"NOT HASH-CHECKED" not in clean.read_bytes() and b"PARTIAL" in clean.read_bytes()


def test_the_partial_error_names_its_flag(forged, capsys):
    err = _out(capsys, ["leaderboard", str(forged), "--n-boot", "100", "--allow-unverified"], 2).err.strip()
    assert err.splitlines()[-1].startswith("fwgym: error: partial result set: it covers 4 of the 1259 cases")
    assert err.endswith("evaluate the full split, or allow a partial table explicitly with --allow-partial "
                        "(allow_partial=True; the table then says PARTIAL)")
