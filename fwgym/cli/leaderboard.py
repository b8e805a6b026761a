"""``fwgym leaderboard``: the leaderboard of merged results files, with paired bootstrap intervals.

Every record is re-scored from the packaged data first and runs of other settings are refused
(:func:`fwgym.evaluation.load_results`): a leaderboard only ever shows verified, comparable scores.
"""
from __future__ import annotations

import argparse

from fwgym.evaluation import BOOT_SEED, N_BOOT

NAME = "leaderboard"
HELP = "leaderboard from results files (merged), with bootstrap intervals"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym leaderboard``."""
    p.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    p.add_argument("--reference", default=None,
                   help="policy the paired bootstrap intervals compare against (default: hour_of_day_empirical "
                        "when present; 'none' for no intervals)")
    p.add_argument("--csv", default=None, help="also write the rows (all columns) to this CSV file")
    p.add_argument("--n-boot", type=int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    p.add_argument("--seed", type=int, default=BOOT_SEED, help=f"bootstrap seed (default {BOOT_SEED})")
    p.add_argument("--allow-partial", action="store_true",
                   help="accept result files that cover only part of the split without declaring it")
    p.add_argument("--common-cases", action="store_true",
                   help="rank on the cases every policy has (e.g. a --limit agent run beside the full baseline run); "
                        "the header says so")
    p.add_argument("--allow-mixed-versions", action="store_true",
                   help="accept runs of different fwgym versions (the header names them)")
    p.add_argument("--no-breakdown", action="store_true", help="omit the per-cohort and per-lead tables")


def run(args) -> int:
    """Print the leaderboard (and the per-cohort and per-lead tables); optionally write it as CSV.

    Raises:
        ValueError: no records, or ``--reference`` names no policy of the results.
    """
    from fwgym.evaluation import (AUTO, coverage, format_breakdowns, format_leaderboard, leaderboard,
                                  load_results, reference_policy, write_csv)

    rs = load_results(args.results, allow_partial=args.allow_partial, common_cases=args.common_cases,
                      allow_mixed_versions=args.allow_mixed_versions)
    records = rs.records
    if not records:
        raise ValueError(f"no result records in {args.results}")
    policies = list(dict.fromkeys(r["policy"] for r in records))
    try:
        ref = reference_policy(policies, AUTO if args.reference is None else args.reference)
    except ValueError as exc:
        raise ValueError(f"--reference: {exc}") from None
    rows = leaderboard(records, reference=ref, n_boot=args.n_boot, seed=args.seed)
    cov = coverage([r for r in records if r["policy"] == policies[0]])
    parts = ", ".join(f"{k} {a}/{b}" for k, (a, b) in cov["by_domain"].items())
    print(f"fwgym leaderboard: suite={rs.settings['suite']}, {len(policies)} policies x {cov['cases']} cases ({parts}"
          f"{'' if cov['complete'] else '; PARTIAL: not the whole split'}); {len(records)} records re-scored and "
          "verified" + "".join(f"; {n}" for n in rs.notes)
          + (f"; intervals: paired series-cluster bootstrap, {args.n_boot:,} draws, seed {args.seed}, "
             f"policy - {ref}" if ref else "") + "\n")
    print(format_leaderboard(rows))
    if not args.no_breakdown:
        print("\n" + format_breakdowns(rows))
    if args.csv:
        print(f"\nwrote {write_csv(rows, args.csv)}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
