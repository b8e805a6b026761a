"""The ``fwgym`` command line: one module per subcommand, agent kinds as plug-ins.

``fwgym evaluate`` (:mod:`~fwgym.cli.evaluate`), ``fwgym cases`` (:mod:`~fwgym.cli.cases`; ``cases export``
writes them as Parquet), ``fwgym leaderboard`` (:mod:`~fwgym.cli.leaderboard`), ``fwgym compare``
(:mod:`~fwgym.cli.compare`), ``fwgym profile`` (:mod:`~fwgym.cli.profile`), ``fwgym plot``
(:mod:`~fwgym.cli.plot`), ``fwgym show-trace`` (:mod:`~fwgym.cli.show_trace`), ``fwgym report``
(:mod:`~fwgym.cli.report`), ``fwgym verify`` (:mod:`~fwgym.cli.verify`; ``--replay`` re-executes every
episode), ``fwgym calibrate-sigma`` (:mod:`~fwgym.cli.calibrate_sigma`),
``fwgym forecasts build|verify`` (:mod:`~fwgym.cli.forecasts`), ``fwgym rl build|verify|list``
(:mod:`~fwgym.cli.rl`), ``fwgym list`` (:mod:`~fwgym.cli.listing`), ``fwgym mcp serve`` (:mod:`~fwgym.cli.mcp`),
``fwgym import-inspect`` (:mod:`~fwgym.cli.import_inspect`). Each subcommand module defines ``NAME``, ``HELP``,
``add_arguments(parser)``
and ``run(args) -> exit code``; heavy imports happen in ``run``. The agent kinds of
``fwgym evaluate --agent KIND`` are plug-ins: :mod:`fwgym.cli.agent_kinds`.

Also runnable as ``python -m fwgym`` or ``python -m fwgym.cli``; ``fwgym --version`` prints the version.

Exit codes common to every subcommand (:func:`main`): 0 success; 2 a usage error (two lines on stderr,
``fwgym evaluate: error: <message>`` and ``see 'fwgym evaluate --help'``: :class:`fwgym.cli.args.Parser`) or a user error (:data:`USER_ERRORS`: a bad argument value, a missing, unreadable or
malformed input file, a tampered data file), reported as one line ``fwgym: error: ...`` on stderr without
a traceback (``fwgym --traceback ...`` shows it); 130 interrupted (Ctrl-C); 141 (128 + SIGPIPE, what ``cat`` or ``git``
return) when the reader of stdout went away, e.g. ``fwgym leaderboard RUN | head``: the command stops
quietly. Any other exception is a bug and keeps its traceback. Subcommands add their own codes
(``fwgym evaluate``: 1 an incomplete run).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from fwgym.cli import (calibrate_sigma, cases, compare, evaluate, forecasts, import_inspect, leaderboard, listing, mcp,
                       plot, profile, report, rl, show_trace, verify)
from fwgym.cli.args import Parser
from fwgym.data import DataIntegrityError
from fwgym.forecasters.base import ModelUnavailable
from fwgym.forecasters.registry import PluginError

#: the subcommand modules, in the order of ``fwgym --help``
COMMANDS = (evaluate, verify, compare, profile, cases, leaderboard, plot, show_trace, report, calibrate_sigma, forecasts,
            rl, listing, mcp, import_inspect)

#: exceptions that are the user's input, not a bug of fwgym: bad argument values and file contents
#: (``ValueError``, which includes ``json.JSONDecodeError``, ``UnicodeDecodeError`` and the forecast
#: store's errors), files that are missing or cannot be opened, a packaged data file that fails its
#: sha256 check, a forecaster plug-in that does not load, model weights that are not there
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
                                                PermissionError, FileExistsError, DataIntegrityError, PluginError,
                                                ModelUnavailable)
#: exit codes of :func:`main` (besides the subcommands' own)
EXIT_USER_ERROR, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 130, 141


def _version() -> str:
    from fwgym.version import __version__

    return f"fwgym {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The ``fwgym`` argument parser with every subcommand of :data:`COMMANDS`."""
    p = Parser(prog="fwgym", description="FWBench gym: budgeted forecast purchasing and capacity "
                                                          "decisions on real data")
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--traceback", action="store_true",
                   help="show the traceback of a user error (bad argument or input file) instead of one line")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sp = sub.add_parser(command.NAME, help=command.HELP, description=getattr(command, "DESCRIPTION", None),
                            formatter_class=getattr(command, "FORMATTER", argparse.HelpFormatter))
        command.add_arguments(sp)
        sp.set_defaults(func=command.run)
    return p


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (so a ``BrokenPipeError`` came from
    writing our output, not from a worker's pipe). Where this cannot be told, assume it is stdout."""
    try:
        import select

        fd = sys.__stdout__.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), stdout replaced or closed
        return True


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's final flush does not fail again
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fwgym`` command (``argv``: the arguments, default ``sys.argv[1:]``).

    Returns:
        the exit code: the subcommand's; 2 for a user error (:data:`USER_ERRORS`; the message goes to
        stderr as ``fwgym: error: ...``); 130 on Ctrl-C; 141 when stdout's reader closed the pipe.

    Raises:
        SystemExit: argparse's usage errors (code 2), ``--help`` and ``--version`` (code 0).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = [a for a in argv if a != "--traceback"]  # the command line, for the run manifest and ``--resume``
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("fwgym: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except USER_ERRORS as exc:
        if args.traceback:
            raise
        print(f"fwgym: error: {_message(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR


def _message(exc: BaseException) -> str:
    """One line for a user error (an ``OSError`` without a message gets its file name)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


__all__ = ["main", "build_parser", "COMMANDS", "USER_ERRORS", "EXIT_USER_ERROR", "EXIT_INTERRUPTED",
           "EXIT_BROKEN_PIPE"]
