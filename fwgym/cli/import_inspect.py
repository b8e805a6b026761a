"""``fwgym import-inspect LOG --out RUN``: the episodes of an inspect-ai log of a fwgym task as a fwgym run directory.

Example::

    inspect eval fwgym/decision --model fwgym/scripted --limit 10 --log-dir logs
    fwgym import-inspect logs/*.eval --out runs/inspect-scripted
    fwgym leaderboard runs/inspect-scripted runs/baselines --common-cases

Every scored sample is re-scored from its submission (a log whose scores were edited is refused); samples that
errored in inspect are recorded as ``harness_error`` (never scored: import the ``inspect eval-retry`` log into the
same RUN to finish it). The run directory's manifest names the log (path, sha256, eval id, model). Needs the
``inspect`` extra.
"""
from __future__ import annotations

import argparse
import sys

from fwgym.cli.args import add_output_argument, positive_int

NAME = "import-inspect"
HELP = "turn inspect-ai logs of the fwgym tasks into a fwgym run directory (re-scored; joins fwgym leaderboard)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym import-inspect``."""
    p.add_argument("logs", nargs="+", metavar="LOG", help="inspect log files (.eval or .json) of fwgym/decision, "
                                                          "fwgym/context or fwgym/forecast")
    add_output_argument(p, metavar="DIR", required=True,
                        help="the run directory (created; a directory of earlier imports takes more episodes)")
    p.add_argument("--policy-name", default=None, dest="policy_name",
                   help="row name of the episodes (default inspect:<model>)")
    p.add_argument("--epoch", type=positive_int, default=1, help="the epoch to import (default 1; one record per case)")


def run(args) -> int:
    """Import the logs; exit 0 when every episode is scored, 1 when some errored in inspect."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ValueError("fwgym import-inspect needs inspect-ai: pip install \"fwgym[inspect]\"") from None
    from fwgym.baselines.registry import check_policy_name
    from fwgym.integrations.inspect.logs import imported_settings, read_log
    from fwgym.integrations.inspect.tasks import _domains
    from fwgym.integrations.runs import add_episodes

    if args.policy_name is not None:
        check_policy_name(args.policy_name, flag="--policy-name")
    errored = 0
    for path in args.logs:
        imported = read_log(path, epoch=args.epoch, policy=args.policy_name)
        check_policy_name(imported.policy, flag="--policy-name")
        settings = imported_settings(imported, _domains(imported.origin["task_args"].get("domain")))
        counts = add_episodes(args.out, imported.records, settings=settings, origin=imported.origin,
                              session={"command": ["fwgym", *(getattr(args, "argv", None) or [])],
                                       "log": imported.origin["log"]}, traces=imported.traces)
        errored += imported.errored
        print(f"{path}: {len(imported.records)} episodes of {imported.policy} ({imported.suite} suite, split "
              f"{imported.split}) re-scored into {args.out}" + (f"; {imported.errored} errored in inspect "
                                                               "(harness_error, not scored)" if imported.errored else ""))
    print(f"{args.out}: {counts['scored']} of {counts['recorded']} episodes scored"
          + ("" if not errored else "; the run is incomplete until a retried log is imported (inspect eval-retry)"),
          file=sys.stderr)
    return 0 if not errored else 1


__all__ = ["NAME", "HELP", "add_arguments", "run"]
