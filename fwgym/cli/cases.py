"""``fwgym cases``: case counts per cohort and lead of a split; ``fwgym cases export``: the cases as Parquet.

``fwgym cases export --split S --suite SUITE -o DIR`` writes what an agent of that suite sees, so a
forecasting model can run offline (:mod:`fwgym.evaluation.export`; the schema is in ``fwgym cases export --help``
and README "Commands"); its forecasts are then submitted through the forecast suite
(``fwgym evaluate --suite forecast --agent FILE.py:FACTORY``) and scored there.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from collections import Counter

from fwgym.core.cases import LEADS, SEALED_SPLIT, TEST_SPLIT
from fwgym.cli.args import (add_domain_argument, add_lead_argument, add_output_argument, add_progress_argument,
                            add_split_argument, positive_int)
from fwgym.cli.tables import AUTO, MARKDOWN, TABLE
from fwgym.suites import SUITE_NAMES

NAME = "cases"
HELP = "case counts per cohort and lead; `cases export`: the cases as Parquet for offline forecasting"
SUITES = SUITE_NAMES


def _export_help() -> str:
    from fwgym.evaluation.export import SCHEMA

    lines = textwrap.wrap("Write the cases of a split, as the suite's env shows them, to DIR as Parquet (pyarrow) with "
                          "a manifest.json (split, suite, case count, the sha256 of the case-id list, and the sha256, "
                          "size and rows of every file). Timestamps are UTC hour starts.", 100) + [""]
    for name, cols in SCHEMA.items():
        extra = " (train/dev; test and sealed only with --include-test-targets)" if name == "targets.parquet" else ""
        lines.append(f"{name}{extra}:")
        lines += [f"  {col}: {desc}" for col, desc in cols.items()]
        lines.append("")
    lines += textwrap.wrap("Submit forecasts of your own model through the forecast suite: fwgym evaluate --suite "
                           "forecast --split S --agent my_forecasts.py:make (README, Commands).", 100)
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym cases`` and of ``fwgym cases export``."""
    add_split_argument(p)
    add_domain_argument(p)
    p.add_argument("-v", "--verbose", action="store_true", help="also print the split calendar")
    p.add_argument("--format", choices=(AUTO, TABLE, MARKDOWN), default=AUTO,
                   help="aligned table on a terminal, Markdown elsewhere (default auto)")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    e = sub.add_parser("export", help="write the cases as Parquet (history, context, metadata, scenarios; targets "
                                      "for train/dev)", description=_export_help(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sel = e.add_argument_group("cases", "which cases are exported")
    add_split_argument(sel, required=True)
    sel.add_argument("--suite", required=True, choices=SUITES,
                     help="whose context text and scenarios: decision, context or forecast")
    add_domain_argument(sel)
    add_lead_argument(sel)
    sel.add_argument("--limit", type=positive_int, default=None,
                     help="at most N cases per domain, evenly spaced (as fwgym evaluate --limit)")
    out = e.add_argument_group("output")
    add_output_argument(out, metavar="DIR", required=True, aliases=("--output",),
                        help="export directory (must not exist or be empty)")
    out.add_argument("--overwrite", action="store_true", help="replace an export in DIR")
    out.add_argument("--include-test-targets", action="store_true",
                     help="also write the TEST split's targets: the benchmark's answer key (a warning is printed)")
    out.add_argument("--no-targets", action="store_true", help="do not write targets.parquet (train/dev)")
    add_progress_argument(out)
    e.set_defaults(func=run_export)


def run(args) -> int:
    """Print a table of case counts (cohort x lead) and the total."""
    from fwgym.core.cases import SPLIT_DOC, build_cases, split_doc
    from fwgym.domains import DOMAINS
    from fwgym.cli.tables import print_table
    from fwgym.evaluation.leaderboard import Table

    rows = []
    total = 0
    for d in args.domain:
        counts = Counter((c.cohort, c.lead) for c in build_cases(d, args.split))
        for cohort in sorted({k[0] for k in counts}):
            row = [counts[(cohort, lead)] for lead in LEADS]
            rows.append((cohort, *map(str, row), str(sum(row))))
            total += sum(row)
    rows.append(("total",) + ("",) * len(LEADS) + (str(total),))
    print(f"split={args.split}")
    print_table(Table(None, ("cohort", *LEADS, "total"), ("l",) + ("r",) * (len(LEADS) + 1), tuple(rows)), args.format)
    print()
    if args.verbose:
        others = tuple(d for d in args.domain if d not in DOMAINS)
        print(SPLIT_DOC + (split_doc(others) if others else ""))  # the protocol's calendars, and any other asked for
    return 0


def run_export(args) -> int:
    """``fwgym cases export``: write the Parquet files and the manifest; print what was written."""
    from fwgym.evaluation.export import export_cases

    held_out = args.split in (TEST_SPLIT, SEALED_SPLIT)  # the benchmark's answer keys
    targets = not args.no_targets if not held_out else args.include_test_targets
    if held_out and args.include_test_targets:
        print(f"warning: --include-test-targets writes the {args.split.upper()} split's targets, the benchmark's answer key: keep them "
              "away from any model, prompt or tuning run, or the test scores no longer measure forecasting",
              file=sys.stderr)
    manifest = export_cases(args.out, args.split, args.suite, domains=args.domain, lead=args.lead, limit=args.limit,
                            targets=targets, overwrite=args.overwrite, progress=not args.no_progress,
                            command=["fwgym", *(getattr(args, "argv", None) or [])])
    for name, info in manifest["files"].items():
        print(f"wrote {args.out}/{name}: {info['rows']:,} rows, {info['bytes']:,} bytes, sha256 {info['sha256']}")
    print(f"wrote {args.out}/manifest.json: {manifest['n_cases']:,} cases of {args.split}/{args.suite}"
          + ("" if manifest["targets"] else " (no targets)"))
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run", "run_export"]
