"""Run every fwgym benchmark in sequence and print their output (from the repository root)::

    python benchmarks/run_all.py            # ~50 s on 2 cores
    python benchmarks/run_all.py --quick    # smoke test

Steps: the optimizer self-check (NumPy reference == fwgym, quick mode), the optimizer benchmark,
the env benchmark, memory, forecast adapters, RL wrappers. Each runs in its own interpreter (so first-call and import figures are clean);
the exit status is non-zero if any step fails.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run all fwgym benchmarks.")
    ap.add_argument("--quick", action="store_true", help="pass --quick to every script")
    args = ap.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    steps = [
        ("optimizer self-check", [HERE / "bench_optimizer.py", "--check", "--quick"]),
        ("optimizer benchmark", [HERE / "bench_optimizer.py", *quick]),
        ("env benchmark", [HERE / "bench_env.py", *quick]),
        ("memory", [HERE / "bench_memory.py"]),
        ("forecast adapters", [HERE / "bench_forecasters.py"]),
        ("RL wrappers and PPO", [HERE / "bench_rl.py", *quick]),
    ]
    failed = []
    t0 = time.perf_counter()
    for title, cmd in steps:
        print(f"\n######## {title}: python {' '.join(str(c.relative_to(ROOT)) if isinstance(c, Path) else c for c in cmd)}", flush=True)
        t = time.perf_counter()
        rc = subprocess.call([sys.executable, *map(str, cmd)], cwd=ROOT)
        print(f"######## {title}: exit {rc}, {time.perf_counter() - t:.1f} s", flush=True)
        if rc:
            failed.append(title)
    print(f"\nall benchmarks: {time.perf_counter() - t0:.1f} s" + (f"; FAILED: {', '.join(failed)}" if failed else "; all OK"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
