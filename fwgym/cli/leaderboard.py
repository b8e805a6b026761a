"""``fwgym leaderboard``: the leaderboard of merged results files, with paired bootstrap intervals.

Every record is re-scored from the packaged data first, checked against its run's manifest (hashes,
count, statuses), and runs of other settings are refused (:func:`fwgym.evaluation.load_results`): a
leaderboard only ever shows verified, comparable scores. A source without a manifest (deleted, or a
bare ``results.jsonl``) is refused unless ``--allow-unverified``; the header then says ``UNVERIFIED``
(and a warning goes to stderr in every format).
Columns are named for the suite of the runs (the forecast suite's loss is RCRPS:
:func:`fwgym.suites.suite_metric`).

``--format``:

* ``table`` (the default on a terminal): a header line, then aligned tables (main, by cohort and lead);
* ``markdown`` (the default in a file or pipe): the same as Markdown tables;
* ``csv``: every column of every row (breakdowns and interval bounds included), nothing else; the
  last two columns, ``verified`` and ``partial`` (``true``/``false`` on every row), carry the marks
  of the header (``UNVERIFIED``: records from a source without a manifest; ``PARTIAL``: not the
  whole split), as in ``--csv FILE``;
* ``latex``: the main table as a booktabs ``tabular`` for ``\\input`` in a paper's ``table`` float
  (needs ``\\usepackage{booktabs}``); the header line as ``%`` comments;
* ``json``: ``{"suite", "metric", "split", "coverage", "reference", "n_boot", "seed", "notes", "rows"}``
  with every column of every row.
"""
from __future__ import annotations

import argparse

from fwgym.cli.args import nonnegative_int, positive_int
from fwgym.cli.tables import AUTO, MARKDOWN, TABLE
from fwgym.evaluation import BOOT_SEED, N_BOOT

NAME = "leaderboard"
HELP = "leaderboard from results files (merged), with bootstrap intervals"
FORMATS = (AUTO, TABLE, MARKDOWN, "csv", "latex", "json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym leaderboard``."""
    p.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    p.add_argument("--reference", default=None,
                   help="policy the paired bootstrap intervals compare against (default: hour_of_day_empirical "
                        "when present; 'none' for no intervals)")
    p.add_argument("--format", choices=FORMATS, default=AUTO,
                   help="table (aligned; default on a terminal), markdown (default in a file or pipe), csv, latex "
                        "(booktabs tabular) or json")
    p.add_argument("--csv", default=None, help="also write the rows (all columns) to this CSV file")
    p.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    p.add_argument("--seed", type=nonnegative_int, default=BOOT_SEED, help=f"bootstrap seed (default {BOOT_SEED})")
    p.add_argument("--allow-partial", action="store_true",
                   help="accept result files that cover only part of the split without declaring it")
    p.add_argument("--common-cases", action="store_true",
                   help="rank on the cases every policy has (e.g. a --limit agent run beside the full baseline run); "
                        "the header says so")
    p.add_argument("--allow-mixed-versions", action="store_true",
                   help="accept runs of different fwgym versions (the header names them)")
    p.add_argument("--no-breakdown", action="store_true", help="omit the per-cohort and per-lead tables")
    add_allow_unverified(p)


def add_allow_unverified(p: argparse.ArgumentParser) -> None:
    """``--allow-unverified`` (shared by ``fwgym leaderboard``, ``report`` and ``plot``)."""
    p.add_argument("--allow-unverified", action="store_true",
                   help="accept result sources without a manifest.json (deleted, or a bare results.jsonl): their "
                        "records are re-scored from their submissions but not checked against the run's hashes, "
                        "count and statuses; the output says UNVERIFIED")


def warn_unverified(rs) -> None:
    """One ``warning: UNVERIFIED ...`` line on stderr when ``rs`` (a :class:`~fwgym.evaluation.ResultSet`)
    holds sources without a manifest."""
    import sys

    if rs.unverified:
        print(f"warning: {rs.notes[0]}", file=sys.stderr)


def run(args) -> int:
    """Print the leaderboard in ``args.format`` (see the module docstring); optionally write it as CSV.

    Raises:
        ValueError: no records, or ``--reference`` names no policy of the results.
    """
    import sys

    from fwgym.cli.tables import print_table, resolve_format
    from fwgym.evaluation import AUTO as AUTO_REFERENCE
    from fwgym.evaluation import coverage, leaderboard, load_results, reference_policy, write_csv
    from fwgym.evaluation.leaderboard import (breakdown_tables, format_csv, format_json,
                                              format_latex, leaderboard_table, mark_rows)
    from fwgym.suites import suite_metric

    rs = load_results(args.results, allow_partial=args.allow_partial, common_cases=args.common_cases,
                      allow_mixed_versions=args.allow_mixed_versions,
                      allow_unverified=getattr(args, "allow_unverified", False))
    warn_unverified(rs)
    records = rs.records
    if not records:
        raise ValueError(f"no result records in {args.results}")
    suite = rs.settings.get("suite") or "decision"
    policies = list(dict.fromkeys(r["policy"] for r in records))
    try:
        ref = reference_policy(policies, AUTO_REFERENCE if args.reference is None else args.reference)
    except ValueError as exc:
        raise ValueError(f"--reference: {exc}") from None
    rows = leaderboard(records, reference=ref, n_boot=args.n_boot, seed=args.seed)
    credit_weight = rs.settings.get("credit_weight")  # the manifest's (S is never inverted to recover it)
    metric = suite_metric(suite, credit_weight)
    cov = coverage([r for r in records if r["policy"] == policies[0]])
    parts = ", ".join(f"{k} {a}/{b}" for k, (a, b) in cov["by_domain"].items())
    checked = "re-scored, NOT hash-checked" if rs.unverified else "re-scored and verified"
    header = (f"fwgym leaderboard{' (UNVERIFIED)' if rs.unverified else ''}: suite={suite} ({metric.formula}), "
              f"{len(policies)} policies x {cov['cases']} cases "
              f"({parts}{'' if cov['complete'] else '; PARTIAL: not the whole split'}); {len(records)} records "
              f"{checked}" + "".join(f"; {n}" for n in rs.notes)
              + (f"; intervals: paired series-cluster bootstrap, {args.n_boot:,} draws, seed {args.seed}, "
                 f"policy - {ref}" if ref else ""))
    fmt = resolve_format(args.format)
    unverified = {r["policy"] for src in rs.sources if not src.verified for r in src.records}
    csv_rows = mark_rows(rows, unverified, partial=not cov["complete"])  # CSV has no header to say so
    if fmt == "csv":
        sys.stdout.write(format_csv(csv_rows))
    elif fmt == "json":
        print(format_json(rows, suite, credit_weight, split=rs.settings.get("split"),
                          coverage={"cases": cov["cases"], "complete": cov["complete"],
                                    "by_domain": {k: list(v) for k, v in cov["by_domain"].items()}},
                          reference=ref, n_boot=args.n_boot if ref else None, seed=args.seed if ref else None,
                          notes=list(rs.notes)))
    elif fmt == "latex":
        print(format_latex(rows, suite, comment=header + "\nper-cohort and per-lead tables: --format markdown or csv"))
    else:
        print(header + "\n")
        print_table(leaderboard_table(rows, suite), fmt)
        if not args.no_breakdown:
            for table in breakdown_tables(rows, suite):
                print()
                print(table.title)
                if fmt == MARKDOWN:
                    print()
                print_table(table.__class__(None, table.columns, table.align, table.rows), fmt)
    if args.csv:
        print(f"\nwrote {write_csv(csv_rows, args.csv)}", file=sys.stderr if fmt in ("csv", "json", "latex") else sys.stdout)
    return 0


__all__ = ["NAME", "HELP", "FORMATS", "add_arguments", "add_allow_unverified", "warn_unverified", "run"]
