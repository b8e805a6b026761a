"""``fwgym cases``: case counts per cohort and lead of a split."""
from __future__ import annotations

import argparse
from collections import Counter

from fwgym.cases import SPLITS
from fwgym.cli.args import add_domain_argument

NAME = "cases"
HELP = "case counts per cohort and lead"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym cases``."""
    p.add_argument("--split", default="test", choices=SPLITS)
    add_domain_argument(p)
    p.add_argument("-v", "--verbose", action="store_true", help="also print the split calendar")


def run(args) -> int:
    """Print a Markdown table of case counts (cohort x lead) and the total."""
    from fwgym.cases import LEADS, SPLIT_DOC, build_cases

    total = 0
    print(f"split={args.split}")
    print("| cohort | " + " | ".join(LEADS) + " | total |\n|---|" + "---:|" * (len(LEADS) + 1))
    for d in args.domain:
        counts = Counter((c.cohort, c.lead) for c in build_cases(d, args.split))
        for cohort in sorted({k[0] for k in counts}):
            row = [counts[(cohort, lead)] for lead in LEADS]
            print(f"| {cohort} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
            total += sum(row)
    print(f"| total |{' |' * len(LEADS)} {total} |\n")
    if args.verbose:
        print(SPLIT_DOC)
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
