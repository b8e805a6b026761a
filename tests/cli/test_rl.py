"""``fwgym rl build | verify | list`` (fwgym.cli.rl)."""
from __future__ import annotations

import json

import pytest

from fwgym.cli import main


def test_build_verify_list(tmp_path, monkeypatch, capsys):
    out = tmp_path / "t"
    assert main(["rl", "build", "--split", "dev", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    assert "4 cases x 12 entries" in capsys.readouterr().out
    assert main(["rl", "build", "--split", "dev", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["rl", "verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "every file matches" in text and "current" in text
    doc = json.loads((out / "manifest.json").read_text())
    doc["identity"]["budget"] = 1  # a manifest edited by hand
    (out / "manifest.json").write_text(json.dumps(doc))
    assert main(["rl", "verify", str(out)]) == 2  # a user error: refused, one line
    assert "identity_sha256 does not match" in capsys.readouterr().err
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(tmp_path / "empty"))
    assert main(["rl", "list"]) == 0
    assert "no outcome tables" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(["rl", "build", "--split", "nope"])
    assert exc.value.code == 2


def _rehash(table, name, columns):
    """Rewrite one file of the table and its manifest entry (a forger who recomputes the sha256)."""
    from fwgym.rl.outcomes.format import write_arrow

    doc = json.loads((table / "manifest.json").read_text())
    doc["files"][name] = write_arrow(table / name, columns)
    (table / "manifest.json").write_text(json.dumps(doc, indent=1))


def test_verify_recompute_replays_cases_and_catches_a_rehashed_edit(tmp_path, capsys):
    import numpy as np

    from fwgym.rl.outcomes.format import read_arrow, unpack_rows

    out = tmp_path / "t"
    assert main(["rl", "build", "--split", "dev", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["rl", "verify", str(out), "--recompute", "4", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "recomputing 4 random cases through the env (seed 3):" in text
    assert "4 of 4 cases x 13 rows (reset and each entry) played: 4 equal, 0 different" in text
    assert "every recomputed row equals the table's bit for bit" in text
    record = np.array(read_arrow(out / "rows.arrow")["record"])  # a writable copy of the packed rows
    fields = unpack_rows(record, json.loads((out / "manifest.json").read_text())["layout"]["record"])
    row = 1 + 2 * 13 + 4  # case slot 2, menu entry 4: its reward improved, the file and manifest re-hashed
    fields["reward"][row] = fields["reward"][row] + 0.25
    _rehash(out, "rows.arrow", {"record": record})
    assert main(["rl", "verify", str(out)]) == 0  # every hash check passes the forgery
    assert "every file matches its sha256" in capsys.readouterr().out
    assert main(["rl", "verify", str(out), "--recompute", "4", "--seed", "3"]) == 1
    got = capsys.readouterr()
    assert "4 of 4 cases x 13 rows (reset and each entry) played: 3 equal, 1 different" in got.out
    assert ": reward differ" in got.err and "1 row(s) differ from what the env returns" in got.err, got.err
    assert main(["rl", "verify", str(out), "--recompute", "1"]) in (0, 1)  # a random draw: the seed is printed
    assert "(seed " in capsys.readouterr().out


def test_list_says_partial_and_not_default_tables_and_build_refuses_foreign_directories(tmp_path, monkeypatch, capsys):
    """A partial table in the default directory is said partial (an env over the whole split does not read it); a
    table elsewhere under the root is said to be read by path only; a build never writes into a non-empty directory
    that holds no table, nor over a file."""
    import shutil

    root = tmp_path / "root"
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(root))
    assert main(["rl", "build", "--split", "dev", "--limit", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "note: a partial table (--limit 2) in the default table's directory" in out
    assert "(53 rows: each case's reset and entries, and the empty row)" in out  # 4 cases x 13 + 1
    (default,) = [p for p in root.iterdir()]
    assert json.loads((default / "manifest.json").read_text())["build"]["partial"] is True
    shutil.copytree(default, root / "copy-elsewhere")
    assert main(["rl", "list"]) == 0
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines[0].startswith("copy-elsewhere: 4 cases") and "not its settings' default table: envs read it by path " \
        "only" in lines[0]
    assert lines[1].startswith(default.name) and "partial: 4 of the split's 911 cases" in lines[1]
    foreign = tmp_path / "mine"
    (foreign / "sub").mkdir(parents=True)
    (foreign / "important.txt").write_text("keep me")
    for extra in ([], ["--overwrite"]):
        assert main(["rl", "build", "--split", "dev", "--limit", "1", "--out", str(foreign), "--no-progress", *extra]) == 2
        assert "non-empty directory that holds no outcome table" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["important.txt", "sub"]
    (tmp_path / "afile").write_text("x")
    assert main(["rl", "build", "--split", "dev", "--limit", "1", "--out", str(tmp_path / "afile"), "--no-progress"]) == 2
    assert "is a file, not a table directory" in capsys.readouterr().err
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    assert main(["rl", "build", "--split", "dev", "--limit", "1", "--out", str(empty), "--no-progress"]) == 0


@pytest.mark.parametrize("pool", ["no_tsfm", "extended"])
def test_build_pool_is_the_registry_pool(pool, tmp_path, capsys):
    """``--pool NAME`` builds the table of the registry pool ``POOLS[NAME]`` (its identity's models)."""
    from fwgym.forecasters.registry import POOLS

    out = tmp_path / pool
    assert main(["rl", "build", "--split", "dev", "--limit", "1", "--pool", pool, "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "manifest.json").read_text())["identity"]["models"] == list(POOLS[pool])
