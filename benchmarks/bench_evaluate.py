"""Batch evaluation: the main job (``fwgym evaluate --split test``, every default policy on all 1,259
test cases) in 1 and N local worker processes, optionally on a local Ray cluster, with the wall time
of each and a check that the result files agree record for record, field for field.

Run from the repository root::

    python benchmarks/bench_evaluate.py              # workers 1 and 2 (~70 s on 2 cores)
    python benchmarks/bench_evaluate.py --ray        # also --backend ray (starts a local Ray cluster)
    python benchmarks/bench_evaluate.py --quick      # --limit 40 cases per domain

Each run is the CLI in a fresh interpreter (imports, case building, numba cache load and the
leaderboard with its bootstrap intervals included), writing to a temporary directory. Target
(issue 8): the full test-split evaluation of the free policies in under 60 s on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fwgym.evaluation import read_results

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 60.0


def run(out: Path, extra: list[str], quick: bool) -> float:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "fwgym.cli", "evaluate", "--split", "test", "--no-progress", "--out", str(out), *extra]
    if quick:
        cmd += ["--limit", "40"]
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"{' '.join(cmd[2:])} failed with exit status {out.returncode}")
    return time.perf_counter() - t


def records(out: Path) -> dict:
    return {(r["policy"], r["case_id"]): r for r in read_results([out])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="fwgym evaluate: 1 vs N workers (and Ray), same results")
    ap.add_argument("--workers", type=int, default=2, help="parallel workers to compare with 1 (default 2)")
    ap.add_argument("--ray", action="store_true", help="also run --backend ray (local cluster)")
    ap.add_argument("--quick", action="store_true", help="40 cases per domain")
    args = ap.parse_args(argv)
    print(f"== fwgym evaluate benchmark == {platform.platform()} | python {platform.python_version()} | "
          f"{os.cpu_count()} CPUs")
    runs = [("1 process", ["--workers", "1"]), (f"{args.workers} worker processes", ["--workers", str(args.workers)])]
    if args.ray:
        runs.append((f"Ray, local cluster, {args.workers} CPUs", ["--backend", "ray", "--workers", str(args.workers)]))
    with tempfile.TemporaryDirectory(prefix="fwgym-bench-eval-") as tmp:
        results, times = {}, {}
        for name, extra in runs:
            out = Path(tmp) / name.replace(" ", "_").replace(",", "")
            times[name] = run(out, extra, args.quick)
            results[name] = records(out)
        base = results["1 process"]
        n = len(base)
        print(f"\n{'run':<36}{'wall s':>9}{'episodes/s':>12}  results")
        for name in times:
            same = results[name] == base  # every field of every record
            print(f"{name:<36}{times[name]:>9.1f}{n / times[name]:>12.0f}  "
                  f"{'identical to 1 process' if same else 'DIFFERENT from 1 process'} ({n} records)")
            if not same:
                return 1
    policies = len({k[0] for k in base})
    best = min(times.values())
    if args.quick:
        print(f"\n{policies} policies x {n // policies} cases (--quick: 40 cases per domain; process start-up dominates, "
              f"so neither the speed-up nor the target is measured): best {best:.1f} s")
    else:
        print(f"\n{policies} policies x {n // policies} cases (full test split). Target: full test split < {TARGET_S:.0f} s "
              f"on 2 cores: best {best:.1f} s {'MET' if best < TARGET_S else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
