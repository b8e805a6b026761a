"""``fwgym rl``: build, verify and list the RL envs' outcome tables (:mod:`fwgym.rl.outcomes`).

``fwgym rl build --split train`` plays every case of the split x every macro menu entry once through the real env
and stores the outcomes (default: the table directory ``gym.make_vec("FWBench-RL-Macro-v0")`` and
``make_rl_env`` read, under ``$FWGYM_OUTCOME_TABLES`` or ``~/.cache/fwgym/outcome-tables``); ``--workers N`` runs
processes (``--backend ray``: Ray tasks); an interrupted build resumes where it stopped. ``fwgym rl verify DIR``
checks a table's files and says whether the running code would read it (current or stale); with ``--recompute N``
it also plays N cases drawn by a seeded generator through the env again and compares every row with the table
(:func:`fwgym.rl.outcomes.verify.recompute_cases`: a table edited and re-hashed fails it). ``fwgym rl list`` lists
the default tables.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fwgym.cli.args import (add_backend_arguments, add_output_argument, add_progress_argument, add_recompute_arguments,
                            add_split_argument, positive_int)
from fwgym.forecasters.registry import POOLS

NAME = "rl"
HELP = "build, verify or list the RL envs' outcome tables (precomputed macro outcomes read at training time)"

__all__ = ["NAME", "HELP", "add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``fwgym rl build ...``, ``fwgym rl verify DIR``, ``fwgym rl list``."""
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="play every case x menu entry of a split once and store the outcomes")
    what = b.add_argument_group("table", "the cases and env whose outcomes are stored")
    add_split_argument(what, required=True, help="the split whose cases are played (train for training)")
    what.add_argument("--variant", choices=("macro", "sequential"), default="macro",
                      help="macro (FWBench-RL-Macro-v0, default) or sequential (the first step of each sequential entry)")
    what.add_argument("--pool", choices=tuple(POOLS), default="protocol",
                      help="forecast pool of the env: protocol (default, the RL ids'), extended (+ statsmodels models) "
                           "or no_tsfm (the priced classical forecaster only)")
    what.add_argument("--limit", type=positive_int, default=None, help="at most N cases per domain (a partial table)")
    out = b.add_argument_group("output")
    add_output_argument(out, metavar="DIR", default=None,
                        help="table directory (default: the default table of these settings)")
    out.add_argument("--overwrite", action="store_true", help="replace a table or partial build of other settings at --out")
    ops = b.add_argument_group("operational")
    ops.add_argument("--workers", type=positive_int, default=1, help="processes (or Ray CPUs with --backend ray)")
    add_backend_arguments(ops, what="local processes (default) or Ray tasks")
    ops.add_argument("--chunk-size", type=positive_int, default=1024,
                     help="cases per chunk: the unit of work and of resuming")
    add_progress_argument(ops)
    v = sub.add_parser("verify", help="check a table's files against its manifest and whether this code reads it; with "
                                      "--recompute N also play N random cases through the env and compare")
    v.add_argument("table", help="table directory")
    add_recompute_arguments(v, what="cases", how="each played through the env again, every row compared bit for bit")
    sub.add_parser("list", help="list the default tables and whether this code reads them")


def run(args) -> int:
    """Run ``build``, ``verify`` or ``list``; returns the exit code (``verify``: 1 for a stale table, or a row
    ``--recompute`` found different)."""
    return {"build": _build, "verify": _verify, "list": _list}[args.action](args)


def _env_kwargs(pool: str) -> dict:
    return {} if pool == "protocol" else {"models": list(POOLS[pool])}


def _build(args) -> int:
    from fwgym.rl.outcomes import build_table

    rec = build_table(args.split, args.variant, args.out, workers=args.workers, backend=args.backend,
                      ray_address=args.ray_address, chunk_size=args.chunk_size, limit=args.limit, overwrite=args.overwrite,
                      progress=not args.no_progress, env_kwargs=_env_kwargs(args.pool))
    if rec.get("skipped"):
        print(f"{args.variant}/{args.split}: the table is built and current ({rec.get('cases')} cases); nothing to do")
        return 0
    if rec.get("partial") and args.out is None:
        print(f"note: a partial table (--limit {args.limit}) in the default table's directory: envs over the whole split "
              "do not read it (said once, they play live); those whose case pool it holds do")
    print(f"{args.variant}/{args.split}: {rec['cases']:,} cases x {rec['entries']} entries ({rec['rows']:,} rows: each "
          f"case's reset and entries, and the empty row) in "
          f"{rec['seconds']:,.0f} s ({rec['cases_per_second']:,.1f} cases/s while playing, {rec['workers']} {rec['backend']} "
          f"worker(s)); {rec['bytes'] / 1e6:,.1f} MB")
    return 0


def _status(table, root: Path | None = None) -> str:
    """``current ...`` or ``stale (...)`` for the running code; with ``root`` (``rl list``), also whether the table
    is its settings' default table there and whether it holds the whole split (an env reads a default table only
    when it holds every case of the env's pool)."""
    from fwgym.rl.outcomes import TableStale
    from fwgym.rl.outcomes.build import table_env
    from fwgym.rl.outcomes.format import table_dir
    from fwgym.rl.outcomes.identity import table_fingerprint

    from fwgym.rl.outcomes.verify import table_env_kwargs

    ident = table.identity
    env = table_env(ident["split"], ident["variant"], table_env_kwargs(ident))
    try:
        table.check(ident, table_fingerprint(env, [e.name for e in env.menu], table.features))
        split_cases = len(env.unwrapped.cases)
    except TableStale as exc:
        return f"stale: {exc}"
    finally:
        env.close()
    status = "current (this code reads it)"
    if root is None:
        return status
    if Path(table.path).resolve() != table_dir(root, ident).resolve():
        return status[:-1] + "; not its settings' default table: envs read it by path only)"
    if len(table.case_ids) < split_cases:
        return status[:-1] + f"; partial: {len(table.case_ids):,} of the split's {split_cases:,} cases: an env reads it only "\
                             "when its case pool is among them)"
    return status


def _verify(args) -> int:
    from fwgym.rl.outcomes import OutcomeTable

    table = OutcomeTable(args.table)  # reads and hashes every file
    b = table.manifest.get("build", {})
    print(f"{table.path}: {table.identity['variant']}/{table.identity['split']}, {len(table.case_ids):,} cases x "
          f"{table.entries} entries, {b.get('bytes', 0) / 1e6:,.1f} MB, built {b.get('created')} in {b.get('seconds')} s; "
          f"manifest sha256 {table.digest}")
    print("every file matches its sha256 and row count")
    status = _status(table)
    print(status)
    if status.startswith("stale"):
        if args.recompute is not None:
            print(f"fwgym: error: outcome table {table.path}: stale, so its outcomes cannot be recomputed by this code "
                  "(rebuild it)", file=sys.stderr)
        return 1
    return 0 if args.recompute is None else _recompute(table, args.recompute, args.seed)


def _recompute(table, n: int, seed: int | None) -> int:
    """``--recompute N``: N random cases played again through the env; 1 on any row that differs."""
    import numpy as np

    from fwgym.cli.args import recompute_seed
    from fwgym.rl.outcomes.verify import recompute_cases

    seed = recompute_seed(seed)
    print(f"recomputing {min(n, len(table.case_ids))} random cases through the env (seed {seed}):")
    got = recompute_cases(table, n, np.random.default_rng(seed))
    print(f"  {got['checked']} of {got['cases']} cases x {table.entries + 1} rows (reset and each entry) played: "
          f"{got['equal']} equal, {got['checked'] - got['equal']} different")
    for d in got["different"][:10]:
        print(f"    {d['case_id']} {d['entry']}: {', '.join(d['fields'])} differ", file=sys.stderr)
    if got["different"]:
        print(f"fwgym: error: outcome table {table.path}: {len(got['different'])} row(s) differ from what the env "
              "returns: the table is not the env's outcomes (edited and re-hashed?); do not train on it (rebuild it)",
              file=sys.stderr)
        return 1
    print("every recomputed row equals the table's bit for bit")
    return 0


def _list(args) -> int:
    from fwgym.rl.outcomes import OutcomeTable, TableError, default_root

    root = default_root()
    if root is None:
        print("default tables are off (FWGYM_OUTCOME_TABLES=off)")
        return 0
    dirs = sorted(p for p in Path(root).glob("*") if (p / "manifest.json").is_file()) if Path(root).is_dir() else []
    if not dirs:
        print(f"no outcome tables under {root} (build one: fwgym rl build --split train)")
    for d in dirs:
        try:
            t = OutcomeTable(d)
            print(f"{d.name}: {len(t.case_ids):,} cases, {t.manifest['build'].get('bytes', 0) / 1e6:,.1f} MB; "
                  f"{_status(t, Path(root))}")
        except TableError as exc:
            print(f"{d.name}: unreadable ({exc})")
    return 0
