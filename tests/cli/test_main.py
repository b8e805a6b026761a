"""The ``fwgym`` command as a whole: subcommands, ``--version``, ``python -m fwgym`` / ``python -m fwgym.cli``,
user errors (one line, exit 2) against bugs (traceback), Ctrl-C, and the quiet exit on a closed pipe."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fwgym
from fwgym import cli
from fwgym.data import DataIntegrityError

ROOT = Path(__file__).resolve().parents[2]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("module", ["fwgym", "fwgym.cli"])
def test_python_dash_m_runs_the_command(module):
    out = subprocess.run([sys.executable, "-m", module, "cases", "--split", "dev", "--domain", "cycle_hire"],
                         capture_output=True, text=True, check=True, env=_env(), cwd=ROOT).stdout
    assert "| cycle_hire-august | 80 | 80 | 160 |" in out  # stdout is a pipe: Markdown


def test_every_subcommand_module_is_registered_once():
    names = [c.NAME for c in cli.COMMANDS]
    assert names == ["evaluate", "verify", "compare", "profile", "cases", "leaderboard", "plot", "show-trace", "report",
                     "calibrate-sigma", "forecasts", "rl", "list", "mcp", "import-inspect"]
    parser = cli.build_parser()
    for name in names:
        args = {"evaluate": [], "verify": ["r"], "compare": ["a", "b"], "profile": ["r"], "cases": [],
                "leaderboard": ["r"], "plot": ["tools", "r", "-o", "x.png"],
                "show-trace": ["t.jsonl"], "report": ["r", "-o", "x"], "calibrate-sigma": [],
                "forecasts": ["verify", "store"], "rl": ["list"], "list": [], "mcp": ["serve", "--case-id", "c"],
                "import-inspect": ["x.eval", "--out", "r"]}[name]
        ns = parser.parse_args([name, *args])
        assert ns.command == name and ns.func is next(c.run for c in cli.COMMANDS if c.NAME == name)


def test_console_entry_point_is_fwgym_cli_main():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'fwgym = "fwgym.cli:main"' in text and callable(cli.main)


def test_version_in_process_and_with_python_dash_m(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"fwgym {fwgym.__version__}\n"
    for module in ("fwgym", "fwgym.cli"):
        done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, env=_env(),
                              cwd=ROOT)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"fwgym {fwgym.__version__}\n", "")


def test_errors_exit_2_with_a_message(tmp_path, capsys):
    assert cli.main(["leaderboard", str(tmp_path / "nothing-here")]) == 2
    assert capsys.readouterr().err.startswith("fwgym: error: ")
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2


def _raising(monkeypatch, exc):
    def run(args):
        raise exc
    monkeypatch.setattr(cli.cases, "run", run)


@pytest.mark.parametrize("exc, message", [
    (ValueError("bad value"), "bad value"),
    (FileNotFoundError(2, "No such file or directory", "/x/y.jsonl"), "/x/y.jsonl: No such file or directory"),
    (IsADirectoryError(21, "Is a directory", "/x"), "/x: Is a directory"),
    (PermissionError(13, "Permission denied", "/root/z"), "/root/z: Permission denied"),
    (DataIntegrityError("data file x failed its sha256 check"), "data file x failed its sha256 check"),
    (json.JSONDecodeError("Expecting value", "{", 1), "Expecting value: line 1 column 2 (char 1)"),
])
def test_user_errors_are_one_line_and_exit_2(monkeypatch, capsys, exc, message):
    _raising(monkeypatch, exc)
    assert cli.main(["cases"]) == cli.EXIT_USER_ERROR == 2
    captured = capsys.readouterr()
    assert captured.err == f"fwgym: error: {message}\n" and "Traceback" not in captured.err


@pytest.mark.parametrize("exc", [TypeError("a bug"), KeyError("x"), AttributeError("y"), RuntimeError("z")])
def test_bugs_keep_their_traceback(monkeypatch, exc):
    _raising(monkeypatch, exc)
    with pytest.raises(type(exc)):
        cli.main(["cases"])


def test_traceback_option_shows_a_user_errors_traceback(monkeypatch, capsys):
    _raising(monkeypatch, ValueError("bad value"))
    with pytest.raises(ValueError, match="bad value"):
        cli.main(["--traceback", "cases"])


def test_ctrl_c_exits_130(monkeypatch, capsys):
    _raising(monkeypatch, KeyboardInterrupt())
    assert cli.main(["cases"]) == 130
    assert capsys.readouterr().err == "fwgym: interrupted\n"


def test_a_broken_pipe_that_is_not_stdout_is_a_bug(monkeypatch):
    # e.g. an isolated agent's worker pipe: stdout is fine, so the error is not swallowed
    _raising(monkeypatch, BrokenPipeError(32, "Broken pipe"))
    with pytest.raises(BrokenPipeError):
        cli.main(["cases"])


def _closed_pipe(args):
    """Run ``fwgym ARGS`` with stdout a pipe whose reader has gone before the first write."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone (``| head`` that has exited)
    try:
        done = subprocess.run([sys.executable, "-m", "fwgym", *args], stdout=w, stderr=subprocess.PIPE, text=True,
                              env=_env(), cwd=ROOT, timeout=300)
    finally:
        os.close(w)
    return done


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipe") / "run"
    assert cli.main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--out", str(out),
                     "--policies", "weekday_empirical", "hour_of_day_empirical"]) == 0
    return out


def test_leaderboard_into_a_closed_pipe_exits_quietly(small_run):
    done = _closed_pipe(["leaderboard", str(small_run), "--n-boot", "50"])
    assert (done.returncode, done.stderr) == (cli.EXIT_BROKEN_PIPE, "") and cli.EXIT_BROKEN_PIPE == 141


def test_show_trace_into_a_closed_pipe_exits_quietly(tmp_path):
    path = tmp_path / "traces.jsonl"
    line = {"policy": "p", "case_id": "elec-PJM-2024-02-11-day_ahead", "messages": [
        {"role": "user", "content": "x" * 5000}], "score": {"status": "submitted"}}
    path.write_text("\n".join(json.dumps(line) for _ in range(50)) + "\n")
    done = _closed_pipe(["show-trace", str(path), "--full"])
    assert (done.returncode, done.stderr) == (141, "")
    # the same file into a reader that takes 1 KB and leaves, as `| head -c 1024`
    proc = subprocess.Popen([sys.executable, "-m", "fwgym", "show-trace", str(path), "--full"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=ROOT)
    assert len(proc.stdout.read(1024)) == 1024
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=300), err) == (141, "")
