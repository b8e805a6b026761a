"""The ``fwgym`` command line: one module per subcommand, agent kinds as plug-ins.

``fwgym evaluate`` (:mod:`~fwgym.cli.evaluate`), ``fwgym cases`` (:mod:`~fwgym.cli.cases`),
``fwgym leaderboard`` (:mod:`~fwgym.cli.leaderboard`), ``fwgym plot`` (:mod:`~fwgym.cli.plot`),
``fwgym show-trace`` (:mod:`~fwgym.cli.show_trace`), ``fwgym report`` (:mod:`~fwgym.cli.report`),
``fwgym calibrate-sigma`` (:mod:`~fwgym.cli.calibrate_sigma`), ``fwgym forecasts build|verify``
(:mod:`~fwgym.cli.forecasts`). Each subcommand module defines ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> exit code``; heavy imports happen in ``run``.
The agent kinds of ``fwgym evaluate --agent KIND`` are plug-ins: :mod:`fwgym.cli.agent_kinds`.

Also runnable as ``python -m fwgym`` or ``python -m fwgym.cli``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from fwgym.cli import calibrate_sigma, cases, evaluate, forecasts, leaderboard, plot, report, show_trace

#: the subcommand modules, in the order of ``fwgym --help``
COMMANDS = (evaluate, cases, leaderboard, plot, show_trace, report, calibrate_sigma, forecasts)


def build_parser() -> argparse.ArgumentParser:
    """The ``fwgym`` argument parser with every subcommand of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="fwgym", description="FWBench gym: budgeted forecast purchasing and capacity "
                                                          "decisions on real data")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        sp = sub.add_parser(command.NAME, help=command.HELP)
        command.add_arguments(sp)
        sp.set_defaults(func=command.run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fwgym`` command (``argv``: the arguments, default ``sys.argv[1:]``).

    Returns:
        the exit code: the subcommand's, or 2 for a bad argument or a missing file (the message goes to stderr).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # the command line, for the run manifest and ``evaluate --resume``
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"fwgym: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser", "COMMANDS"]
