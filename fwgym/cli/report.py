"""``fwgym report``: the static HTML report of results files (:func:`fwgym.report.build_report`).

The records are re-scored and checked against their run's manifest first; a source without a manifest
is refused unless ``--allow-unverified`` (the report's title and notes then say ``NOT HASH-CHECKED``)."""
from __future__ import annotations

import argparse
import sys

from fwgym.core.cases import CHART_HISTORY_HOURS, HISTORY_HOURS
from fwgym.cli.args import add_output_argument, add_progress_argument, int_range, nonnegative_int, positive_int
from fwgym.cli.leaderboard import add_allow_unverified
from fwgym.evaluation import BOOT_SEED, N_BOOT
from fwgym.report import DEFAULT_EPISODE_PAGES

NAME = "report"
HELP = "static HTML report (leaderboard, figures, episode pages) from results files"


def episodes(value: str) -> int | None:
    """``--episodes``: ``"all"`` (``None``) or an integer >= 0.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError("--episodes must be 'all' or an integer >= 0")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym report``."""
    inputs = p.add_argument_group("inputs", "the results and traces the report reads")
    inputs.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    inputs.add_argument("--traces", nargs="+", default=None, metavar="FILE",
                        help="LLM trace JSONL files (transcripts and the tool calls in order on episode pages; "
                             "default: the traces.jsonl of each run directory given, where there is one)")
    inputs.add_argument("--no-traces", action="store_true", help="do not read any trace file")
    add_allow_unverified(inputs)
    stats = p.add_argument_group("intervals", "the paired bootstrap intervals")
    stats.add_argument("--reference", default=None,
                       help="policy of the paired bootstrap intervals (default: hour_of_day_empirical when present; "
                            "'none' for no intervals)")
    stats.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    stats.add_argument("--seed", type=nonnegative_int, default=BOOT_SEED, help=f"bootstrap seed (default {BOOT_SEED})")
    out = p.add_argument_group("output", "the report folder and its pages")
    add_output_argument(out, metavar="DIR", required=True, aliases=("--output",),
                        help="the report folder (open <folder>/index.html)")
    out.add_argument("--title", default=None, help="report title")
    out.add_argument("--episodes", type=episodes, default=DEFAULT_EPISODE_PAGES,
                     help=f"episode pages per policy: the worst, best and random by S (default "
                          f"{DEFAULT_EPISODE_PAGES}), or 'all'")
    out.add_argument("--hours", type=int_range(1, HISTORY_HOURS), default=CHART_HISTORY_HOURS,
                     help=f"hours of visible history in episode charts (default {CHART_HISTORY_HOURS})")
    out.add_argument("--no-replay", action="store_true",
                     help="do not replay baselines to list their tool calls in order (faster)")
    ops = p.add_argument_group("operational")
    ops.add_argument("--workers", type=positive_int, default=1, help="processes writing episode pages (default 1)")
    add_progress_argument(ops)


def run_traces(results) -> list[str]:
    """The ``traces.jsonl`` files of the run directories among ``results`` (a run directory, or the folder
    of a ``results.jsonl`` file given), where they exist: what ``fwgym report`` reads by default."""
    from pathlib import Path

    from fwgym.evaluation import RESULTS_FILE, TRACES_FILE

    out = []
    for r in map(Path, results):
        folder = r if r.is_dir() else r.parent if r.name == RESULTS_FILE else None
        if folder is not None and (folder / TRACES_FILE).is_file() and str(folder / TRACES_FILE) not in out:
            out.append(str(folder / TRACES_FILE))
    return out


def run(args) -> int:
    """Build the report and print where it is."""
    from fwgym.cli.progress import phase
    from fwgym.evaluation import AUTO
    from fwgym.report import build_report

    ref = AUTO if args.reference is None else args.reference
    traces = None if getattr(args, "no_traces", False) else (args.traces or run_traces(args.results) or None)
    rep = build_report(args.results, args.out, traces=traces, max_episode_pages=args.episodes,
                       reference=ref, n_boot=args.n_boot, seed=args.seed, replay=not args.no_replay,
                       history_hours=args.hours, title=args.title, progress=not args.no_progress,
                       workers=args.workers, allow_unverified=getattr(args, "allow_unverified", False),
                       phase=None if args.no_progress else phase)
    for w in rep.warnings:
        print(f"note: {w}", file=sys.stderr)
    print(f"wrote {len(rep.pages)} pages ({len(rep.policy_pages)} policies, {len(rep.episode_pages)} episodes) "
          f"in {rep.seconds:.1f} s" + (f"; intervals vs {rep.reference}" if rep.reference else "")
          + (f"; traces: {', '.join(traces)}" if traces else "") + f"\nopen {rep.index.resolve()}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run", "episodes", "run_traces"]
