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
