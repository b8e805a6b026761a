"""``fwgym profile RUN``: the per-episode resource profile of a run (the FWBench paper's Table 3) by policy,
cohort and lead (:mod:`fwgym.evaluation.profile`): wall and CPU time, peak RSS and PSS, tokens, tool calls
and model requests per episode, from the figures every record carries.

The records are read and checked as ``fwgym leaderboard`` reads them (re-scored, hash-checked); the
header carries the same marks (``PARTIAL``, ``NOT HASH-CHECKED``, ``EXPOSED``) and says how the figures were measured and on
which machine (the run manifest's platform and CPU count, its sessions' workers and concurrency).

``--format``: ``table`` (terminal, fitted to its width; ``--wide``), ``markdown`` (default in a file or
pipe), ``csv`` (every statistic), ``latex`` or ``json``.
"""
from __future__ import annotations

import argparse
import json
import sys

from fwgym.cli.tables import AUTO, MARKDOWN, TABLE

NAME = "profile"
HELP = "per-episode resource profile of runs (wall, CPU, peak memory, tokens, calls) by cohort and lead"
FORMATS = (AUTO, TABLE, MARKDOWN, "csv", "latex", "json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym profile``."""
    p.add_argument("results", nargs="+", help="run directories or results.jsonl files (merged)")
    p.add_argument("--format", choices=FORMATS, default=AUTO,
                   help="table (default on a terminal), markdown (default in a file or pipe), csv, latex or json")
    p.add_argument("--no-breakdown", action="store_true", help="only one row per policy (no cohort and lead rows)")
    p.add_argument("--wide", action="store_true", help="print every column at its full width")
    p.add_argument("--allow-unverified", action="store_true",
                   help="accept result sources without a manifest.json (marked NOT HASH-CHECKED)")
    p.add_argument("--allow-mixed-versions", action="store_true", help="accept runs of different fwgym versions")


def _machine(rs) -> list[str]:
    """Facts of where the runs were measured (from their manifests)."""
    out = []
    for src in rs.sources:
        m = src.manifest or {}
        env = m.get("environment") or {}
        sessions = m.get("sessions") or []
        how = sorted({f"workers {s.get('workers')}, concurrency {s.get('concurrency')}" for s in sessions
                      if s.get("workers") is not None})
        if env or how:
            out.append(f"{src.run_dir}: {env.get('platform', '?')}, python {env.get('python', '?')}"
                       + (f", {'; '.join(how)}" if how else ""))
    return out


def run(args) -> int:
    """Print the profile (see the module docstring)."""
    from fwgym.cli.leaderboard import warn_unverified
    from fwgym.cli.progress import phase
    from fwgym.cli.tables import left_out_note, output_width, print_table, resolve_format
    from fwgym.evaluation import load_results
    from fwgym.evaluation.formats import format_csv, latex_table
    from fwgym.evaluation.header import make_header, result_set_marks
    from fwgym.evaluation.profile import profile, profile_table

    with phase("reading and re-scoring the results"):
        rs = load_results(args.results, allow_partial=True, allow_unverified=args.allow_unverified,
                          allow_mixed_versions=args.allow_mixed_versions)
    warn_unverified(rs)
    if not rs.records:
        raise ValueError(f"no result records in {args.results}")
    rows = profile(rs.records, by=() if args.no_breakdown else ("cohort", "lead"))
    header = make_header(rs.records, title="fwgym profile", suite=rs.settings.get("suite") or "decision",
                         formula="per-episode resources, plain statistics over episodes", marks=result_set_marks(rs),
                         notes=list(rs.notes) + _machine(rs),
                         checked="re-scored and hash-checked" if not rs.unverified else "re-scored, NOT hash-checked",
                         row_marks=rs.marks)
    fmt = resolve_format(args.format)
    if fmt == "csv":
        sys.stdout.write(format_csv(header.csv_rows(rows)))
        return 0
    if fmt == "json":
        print(json.dumps({**header.json_fields(), "rows": header.csv_rows(rows)}, indent=1, ensure_ascii=False,
                         allow_nan=False))
        return 0
    table = profile_table(rows, groups=not args.no_breakdown)
    if fmt == "latex":
        print(latex_table(table, header.latex_comment()))
        return 0
    width = output_width(wide=args.wide) if fmt == TABLE else None
    print("\n".join(header.lines(width)) if fmt == TABLE else header.markdown())
    print()
    note = left_out_note(print_table(table, fmt, width=width), width)
    if note:
        print(note)
    import textwrap

    foot = ("wall: the episode loop's (env.reset to the record); CPU: the evaluating process's and an isolated agent's "
            "worker's; peak RSS: per episode (Linux VmHWM reset at each episode's start); PSS: episodes of >= 0.5 s")
    print("\n" + ("\n".join(textwrap.wrap(foot, width)) if width else foot))
    return 0


__all__ = ["NAME", "HELP", "FORMATS", "add_arguments", "run"]
