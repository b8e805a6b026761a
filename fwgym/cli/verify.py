"""``fwgym verify RUN [...] [--replay]``: say what vouches for a run's records, and replay its episodes.

Without ``--replay``: every record is re-scored from its submission and the packaged data, checked against the
run manifest's hashes, count and statuses, and, for agents that write a trace per episode (LLM agents, ``fwgym
mcp``, inspect imports), cross-checked against its episode's trace in ``traces.jsonl`` (submit, submission, levels,
score: :mod:`fwgym.evaluation.trace_check`), what ``fwgym leaderboard`` does before ranking (a source without a
manifest only with ``--allow-unverified``). A record edited with the manifest re-hashed is refused when it
contradicts its trace; records, traces and manifest forged together are not detectable (SECURITY.md). With ``--replay``: every scored record's episode is also re-executed
through a fresh env from its recorded tool calls (:mod:`fwgym.evaluation.replay`): each tool result, the charges,
the calls counted, the submission and the score must come out as recorded, and fwgym's own named policies are
played again (deterministic) and must make the recorded calls. The outcome is written to the run directory's
``replay.json`` (for the very records file: its sha256), which the leaderboard's ``replayed`` mark reads. The
marks that no check can lift are printed as the leaderboard prints them (``EXPOSED``, ``RETRIED AFTER SPEND``,
``MIXED CODE``: :mod:`fwgym.evaluation.marks`), with the run's history.

Exit codes: 0 every check held; 1 a replay found records that do not replay (listed, ``file:line``); 2 a record
refused by re-scoring or the manifest (one line), or a bad argument.
"""
from __future__ import annotations

import argparse
import sys

NAME = "verify"
HELP = ("re-score a run's records, check them against its manifest and their episodes' traces; --replay re-executes "
        "every episode")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym verify``."""
    from fwgym.cli.args import add_progress_argument
    from fwgym.cli.leaderboard import add_allow_unverified

    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories (or results.jsonl files)")
    p.add_argument("--replay", action="store_true",
                   help="also re-execute every recorded episode through a fresh env (tool results, charges, "
                        "submission, score) and play fwgym's named policies again; writes RUN/replay.json")
    p.add_argument("--policies", nargs="+", default=None, metavar="POLICY", help="replay only these policies' rows")
    add_progress_argument(p)
    add_allow_unverified(p)


def run(args) -> int:
    """Verify each run (see the module docstring); print one line per run and policy."""
    import json

    from fwgym.evaluation.manifest import file_sha256, now
    from fwgym.evaluation.replay import REPLAY_FILE, replay_records
    from fwgym.evaluation.results import RESULTS_FILE, load_source
    from fwgym.version import __version__

    code = 0
    for path in args.runs:
        src = load_source(path, allow_unverified=getattr(args, "allow_unverified", False))
        checked = "and hash-checked against its manifest" if src.verified else "(NOT hash-checked: no manifest)"
        print(f"{src.path}: {len(src.records)} records re-scored from their submissions {checked}")
        _print_traces(src)
        _print_marks(src)
        if not args.replay:
            continue
        bar = None
        if not args.no_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(src.records), unit="episode", desc="replay", dynamic_ncols=True, file=sys.stderr)
        try:
            report = replay_records(src.records, src.lines, src.settings, str(src.path), src.manifest,
                                    progress=bar.update if bar is not None else None, policies=args.policies)
        finally:
            if bar is not None:
                bar.close()
        for p, n in report.episodes.items():
            skipped = report.skipped.get(p, 0)
            print(f"  {p}: {report.matched.get(p, 0)} of {n} episodes replayed identically"
                  + (f" ({skipped} harness_error records skipped)" if skipped else ""))
        for line in report.problems[:20]:
            print(f"  {line}")
        if len(report.problems) > 20:
            print(f"  ... and {len(report.problems) - 20} more")
        if src.path.name == RESULTS_FILE:
            doc = {"records_sha256": file_sha256(src.path), "created": now(), "fwgym_version": __version__,
                   "policies": {p: {"episodes": n, "matched": report.matched.get(p, 0),
                                    "skipped": report.skipped.get(p, 0)} for p, n in report.episodes.items()},
                   "problems": report.problems[:200]}
            (src.run_dir / REPLAY_FILE).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        if not report.ok:
            code = 1
    return code


def _print_marks(src) -> None:
    """What the checks above cannot vouch for, as the leaderboard marks it: records replayed after their target was
    sent (``EXPOSED``), scored after unscored attempts that made calls or spent credits (``RETRIED AFTER SPEND``),
    played by several code versions of fwgym (``MIXED CODE``); and the run's history line."""
    from fwgym.evaluation.marks import format_marks, history_line

    counts: dict[str, int] = {}
    for r in src.records:
        counts[r["policy"]] = counts.get(r["policy"], 0) + 1
    for line in format_marks(src.marks, counts):
        if line.startswith(("EXPOSED", "RETRIED AFTER SPEND", "MIXED CODE")):
            print(f"  {line}")
    history = history_line(src.manifest)
    if history:
        print(f"  {history}")


def _print_traces(src) -> None:
    """What the records were cross-checked against: their episodes' traces (LLM agents, mcp, inspect imports)."""
    t = src.traces
    if t is None:
        return
    for p, n in t.checked.items():
        cut = t.truncated.get(p, 0)
        print(f"  {p}: {n} records cross-checked against the traces of their episodes (submit, submission, score)"
              + (f"; {cut} size-bounded traces compared without submission and calls" if cut else ""))
    for p, n in t.untraced.items():
        print(f"  {p}: {n} records of killed sessions have no trace (a kill between the record and its trace): NOT "
              "cross-checked")
    for p in t.elsewhere:
        print(f"  {p}: NOT cross-checked against traces (the run wrote them to --trace-out, not {src.run_dir})")


__all__ = ["NAME", "HELP", "add_arguments", "run"]
