"""The ``fwgym`` command as a whole: subcommands, ``python -m fwgym`` / ``python -m fwgym.cli``, exit codes."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym import cli

ROOT = Path(__file__).resolve().parents[2]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("module", ["fwgym", "fwgym.cli"])
def test_python_dash_m_runs_the_command(module):
    out = subprocess.run([sys.executable, "-m", module, "cases", "--split", "dev", "--domain", "cycle_hire"],
                         capture_output=True, text=True, check=True, env=_env(), cwd=ROOT).stdout
    assert "| cycle_hire-august | 80 | 80 | 160 |" in out


def test_every_subcommand_module_is_registered_once():
    names = [c.NAME for c in cli.COMMANDS]
    assert names == ["evaluate", "cases", "leaderboard", "plot", "show-trace", "report", "calibrate-sigma", "forecasts"]
    parser = cli.build_parser()
    for name in names:
        args = {"evaluate": [], "cases": [], "leaderboard": ["r"], "plot": ["tools", "r", "-o", "x.png"],
                "show-trace": ["t.jsonl"], "report": ["r", "-o", "x"], "calibrate-sigma": [],
                "forecasts": ["verify", "store"]}[name]
        ns = parser.parse_args([name, *args])
        assert ns.command == name and ns.func is next(c.run for c in cli.COMMANDS if c.NAME == name)


def test_console_entry_point_is_fwgym_cli_main():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'fwgym = "fwgym.cli:main"' in text and callable(cli.main)


def test_errors_exit_2_with_a_message(tmp_path, capsys):
    assert cli.main(["leaderboard", str(tmp_path / "nothing-here")]) == 2
    assert capsys.readouterr().err.startswith("fwgym: error: ")
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
