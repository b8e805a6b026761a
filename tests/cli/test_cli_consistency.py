"""One command line (issue 26): every option of every subcommand has help, one spelling for where a command
writes (``-o/--out``; older spellings kept as aliases), argument groups for ``fwgym evaluate``, short usage
errors (``fwgym <cmd>: error: ...`` and a ``--help`` hint, exit 2)."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.cli import build_parser, main
from fwgym.cli.args import OUTPUT_DEST, OUTPUT_FLAGS, Parser
from fwgym.cli.reference import option_rows, subcommands

ROOT = Path(__file__).resolve().parents[2]
#: spellings that name where a command writes: only ever an alias of -o/--out
OUTPUT_SPELLINGS = {"-o", "--out", "--output", "--csv", "--output-dir", "--out-dir", "--outdir"}
#: the commands that write somewhere, and the older spellings each keeps
WRITERS = {"fwgym evaluate": (), "fwgym cases export": ("--output",), "fwgym leaderboard": ("--csv",),
           "fwgym plot frontier": ("--output",), "fwgym plot case": ("--output",), "fwgym plot tools": ("--output",),
           "fwgym report": ("--output",), "fwgym calibrate-sigma": ("--output",), "fwgym forecasts build": (),
           "fwgym rl build": (), "fwgym mcp serve": (), "fwgym import-inspect": ()}


def _commands():
    return list(subcommands(build_parser()))


def test_every_option_of_every_subcommand_has_help():
    missing = [f"{name}: {spelling}" for name, p in _commands() for _, spelling, text in option_rows(p) if not text]
    assert missing == []


def test_the_reference_sees_every_subcommand():
    names = [n for n, _ in _commands()]
    for name in ("fwgym evaluate", "fwgym forecasts build", "fwgym plot case", "fwgym cases export", "fwgym rl build",
                 "fwgym mcp serve"):
        assert name in names


def _output_actions(p: argparse.ArgumentParser):
    return [a for a in p._actions if OUTPUT_SPELLINGS & set(a.option_strings)]


def test_output_locations_have_one_spelling_with_aliases():
    found = {}
    for name, p in _commands():
        for action in _output_actions(p):
            assert tuple(action.option_strings[:2]) == OUTPUT_FLAGS, (name, action.option_strings)
            assert action.dest == OUTPUT_DEST, (name, action.dest)
            found[name] = tuple(action.option_strings[2:])
    assert found == WRITERS


@pytest.mark.parametrize("name, aliases", sorted(WRITERS.items()))
def test_every_spelling_of_the_output_parses_to_args_out(name, aliases):
    argv = name.split()[1:]
    required = {"fwgym cases export": ["--split", "dev", "--suite", "forecast"], "fwgym plot case":
                ["r", "--case-id", "c", "--policy", "p"], "fwgym forecasts build": ["--model", "ets", "--split", "dev"],
                "fwgym rl build": ["--split", "train"], "fwgym mcp serve": ["--case-id", "c"],
                "fwgym import-inspect": ["x.eval"], "fwgym leaderboard": ["r"], "fwgym report": ["r"],
                "fwgym plot frontier": ["r"], "fwgym plot tools": ["r"]}.get(name, [])
    for spelling in (*OUTPUT_FLAGS, *aliases):
        ns = build_parser().parse_args([*argv, *required, spelling, "target"])
        assert ns.out == "target", spelling
    help_text = dict((n, p) for n, p in _commands())[name].format_help()
    assert "-o " in help_text and "--out " in help_text
    for alias in aliases:  # the help names the canonical spelling beside an older one
        assert f"{alias}: older spelling of --out" in " ".join(help_text.split())


def test_evaluate_has_its_argument_groups():
    p = dict(_commands())["fwgym evaluate"]
    groups = {g.title: {o for a in g._group_actions for o in a.option_strings} for g in p._action_groups}
    assert {"run settings", "agent", "LLM agents (--agent openai, --agent transformers)", "output",
            "operational", "--agent openai", "--agent transformers"} <= set(groups)
    assert {"--split", "--domain", "--lead", "--suite", "--pool", "--models", "--limit", "--policies",
            "--label"} <= groups["run settings"]
    assert {"--agent", "--repeat"} <= groups["agent"]
    assert {"--temperature", "--top-p", "--llm-seed", "--max-tokens", "--trace-out", "--episode-timeout",
            "--objective"} <= groups["LLM agents (--agent openai, --agent transformers)"]
    assert "--temperature" not in groups["--agent openai"] | groups["--agent transformers"]  # defined once
    assert {"--base-url", "--model"} <= groups["--agent openai"] and "--hf-model" in groups["--agent transformers"]
    assert {"-o", "--out", "--overwrite", "--resume", "--format"} <= groups["output"]
    assert {"--workers", "--concurrency", "--backend", "--ray-address", "--forecast-store",
            "--no-progress"} <= groups["operational"]
    # the help lists the groups in this order
    text = p.format_help()
    at = [text.index(f"\n{title}:\n") for title in ("run settings", "agent",
                                                    "LLM agents (--agent openai, --agent transformers)",
                                                    "--agent openai", "output", "operational")]
    assert at == sorted(at)


def test_evaluate_operational_options_are_the_operational_group():
    """``--resume`` lets exactly the options that do not change a score differ: those of the operational and
    output groups (and the agents' own timeouts), never a run setting."""
    from fwgym.cli.evaluate import OPERATIONAL

    p = dict(_commands())["fwgym evaluate"]
    by_group = {g.title: {a.dest for a in g._group_actions} for g in p._action_groups}
    assert by_group["operational"] <= set(OPERATIONAL)
    assert not by_group["run settings"] & set(OPERATIONAL)


def test_a_usage_error_is_two_short_lines_with_the_help_hint(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--lead", "next_year"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["fwgym evaluate: error: argument --lead: invalid choice: 'next_year' (choose from "
                                "'day_ahead', 'week_ahead')", "see 'fwgym evaluate --help'"]
    assert "usage:" not in err


@pytest.mark.parametrize("argv, prog", [
    (["forecasts", "build", "--split", "dev"], "fwgym forecasts build"),  # a nested subcommand
    (["plot", "frontier", "r"], "fwgym plot frontier"),
    (["leaderboard", "r", "--no-such-option"], "fwgym leaderboard"),
    ([], "fwgym"),
    (["no-such-command"], "fwgym"),
])
def test_usage_errors_name_the_command_and_its_help(argv, prog, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{prog}: error: ") and lines[1] == f"see '{prog} --help'"


def test_the_command_prints_the_short_error_from_a_subprocess():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "fwgym", "report", "results/test"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("fwgym report: error: the following arguments are required: -o/--out/--output\n"
                           "see 'fwgym report --help'\n")


def test_every_parser_is_the_short_error_parser():
    assert all(isinstance(p, Parser) for _, p in _commands())
