"""Argument types (fwgym.cli.args) and the options that use them: counts >= 1, seeds >= 0, hours in 1..336,
inches > 0; a bad value is argparse's usage error (exit 2, the option named) before anything runs."""
import argparse

import pytest

from fwgym.cli import build_parser, main
from fwgym.cli.args import int_range, nonnegative_int, positive_float, positive_int


def test_positive_int():
    assert positive_int("1") == 1 and positive_int("12") == 12 and positive_int("007") == 7
    for bad in ("0", "-1", "1.5", "x", "", "1e3", "0x10"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_int(bad)


def test_nonnegative_int_int_range_positive_float():
    assert nonnegative_int("0") == 0 and nonnegative_int("1701") == 1701
    with pytest.raises(argparse.ArgumentTypeError, match=">= 0"):
        nonnegative_int("-1")
    hours = int_range(1, 336)
    assert hours("1") == 1 and hours("336") == 336
    for bad in ("0", "337", "-5", "a"):
        with pytest.raises(argparse.ArgumentTypeError):
            hours(bad)
    assert positive_float("2.5") == 2.5 and positive_float("3") == 3.0
    for bad in ("0", "-1", "nan", "inf", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_float(bad)


@pytest.mark.parametrize("argv, option", [
    (["evaluate", "--workers", "0"], "--workers"),
    (["evaluate", "--workers", "-2"], "--workers"),
    (["evaluate", "--concurrency", "0"], "--concurrency"),
    (["evaluate", "--limit", "0"], "--limit"),
    (["leaderboard", "r", "--n-boot", "0"], "--n-boot"),
    (["leaderboard", "r", "--seed", "-1"], "--seed"),
    (["report", "r", "-o", "x", "--workers", "0"], "--workers"),
    (["report", "r", "-o", "x", "--n-boot", "-3"], "--n-boot"),
    (["report", "r", "-o", "x", "--hours", "337"], "--hours"),
    (["calibrate-sigma", "--workers", "0"], "--workers"),
    (["forecasts", "build", "--model", "ets", "--split", "dev", "--batch-size", "0"], "--batch-size"),
    (["forecasts", "build", "--model", "ets", "--split", "dev", "--limit", "-1"], "--limit"),
    (["forecasts", "build", "--model", "ets", "--split", "dev", "--workers", "0"], "--workers"),
    (["plot", "frontier", "r", "-o", "x.pdf", "--n-boot", "0"], "--n-boot"),
    (["plot", "frontier", "r", "-o", "x.pdf", "--height", "0"], "--height"),
    (["plot", "case", "r", "-o", "x.pdf", "--case-id", "c", "--policy", "p", "--hours", "0"], "--hours"),
    (["cases", "export", "--split", "dev", "--suite", "forecast", "-o", "d", "--limit", "0"], "--limit"),
    (["evaluate", "--agent-timeout", "0"], "--agent-timeout"),
    (["evaluate", "--agent-start-timeout", "-5"], "--agent-start-timeout"),
    (["evaluate", "--episode-timeout", "nan"], "--episode-timeout"),
    (["evaluate", "--timeout", "-1"], "--timeout"),
    (["evaluate", "--agent", "openai", "--temperature", "-3"], "--temperature"),
    (["evaluate", "--agent", "openai", "--temperature", "inf"], "--temperature"),
    (["evaluate", "--agent", "openai", "--top-p", "0"], "--top-p"),
    (["evaluate", "--agent", "openai", "--top-p", "1.5"], "--top-p"),
    (["evaluate", "--agent", "openai", "--max-tokens", "0"], "--max-tokens"),
    (["evaluate", "--agent", "openai", "--samples", "0"], "--samples"),
    (["evaluate", "--agent", "openai", "--history-hours", "337"], "--history-hours"),
    (["evaluate", "--agent", "openai", "--max-tool-chars", "-1"], "--max-tool-chars"),
    (["evaluate", "--agent", "transformers", "--max-context", "-5"], "--max-context"),
])
def test_bad_counts_are_usage_errors(argv, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "Traceback" not in err


def test_sampling_options_keep_their_valid_range():
    ns = build_parser().parse_args(["evaluate", "--agent", "openai", "--temperature", "0", "--top-p", "1",
                                    "--history-hours", "336", "--max-tokens", "1"])
    assert (ns.temperature, ns.top_p, ns.history_hours, ns.max_tokens) == (0.0, 1.0, 336, 1)


def test_good_values_parse_to_ints():
    ns = build_parser().parse_args(["evaluate", "--workers", "2", "--concurrency", "8", "--limit", "5"])
    assert (ns.workers, ns.concurrency, ns.limit) == (2, 8, 5)
    ns = build_parser().parse_args(["leaderboard", "r", "--n-boot", "100", "--seed", "0"])
    assert (ns.n_boot, ns.seed) == (100, 0)


def test_json_object_option():
    from fwgym.cli.args import json_object

    assert json_object(None, "--x") is None and json_object("", "--x") is None
    assert json_object('{"a": [1, 2]}', "--x") == {"a": [1, 2]}
    with pytest.raises(ValueError, match=r"^--extra-body is not valid JSON: "):
        json_object("{a", "--extra-body")
    with pytest.raises(ValueError, match=r"^--agent-kwargs must be a JSON object$"):
        json_object("[1]", "--agent-kwargs")


def test_shared_options_are_added_once():
    import argparse

    from fwgym.cli.args import add_arguments_once

    parser = argparse.ArgumentParser()
    opts = [(("--agent-name",), {"default": None, "dest": "agent_name"}), (("--k",), {"type": int, "default": 3})]
    add_arguments_once(parser, opts)
    add_arguments_once(parser, opts)  # a second kind with the same options: no conflict
    assert vars(parser.parse_args(["--agent-name", "me"])) == {"agent_name": "me", "k": 3}
    assert sum(a.dest == "agent_name" for a in parser._actions) == 1
