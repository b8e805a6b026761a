"""Run every fwgym benchmark in sequence and print their output (from the repository root)::

    python benchmarks/run_all.py            # ~8-10 min on 2 cores
    python benchmarks/run_all.py --quick    # smoke test (~1.5-2 min)

Steps: the optimizer self-check (NumPy references == fwgym, quick mode), the optimizer benchmark
(targets: <= 20 us per 9-quantile plan, >= 50x the straightforward NumPy DP, growth in n, first call),
the env benchmark (free-tool episode vs CartPole-v1), memory (one env < 300 MB, shared series),
forecast adapters, RL wrappers and PPO (RL step vs CartPole-v1), the native macro vector env (vs
CartPoleVectorEnv and SyncVectorEnv, PPO on each), batch evaluation (the main job in 1
and 2 processes, identical results, < 60 s), LLM concurrency (--concurrency 32 >= 10x --concurrency 1 against
a 200 ms server), isolated agents vs in-process (identical records). Each runs in its own interpreter (so first-call and
import figures are clean); the machine is printed by each; the exit status is non-zero if any step fails.
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
        ("memory", [HERE / "bench_memory.py", *(["--episodes", "2000"] if args.quick else [])]),
        ("forecast adapters", [HERE / "bench_forecasters.py"]),
        ("forecast store", [HERE / "bench_store.py", *quick]),
        ("RL wrappers and PPO", [HERE / "bench_rl.py", *quick]),
        ("native vector env", [HERE / "bench_vector.py", *quick]),
        ("batch evaluation", [HERE / "bench_evaluate.py", *quick]),
        ("LLM concurrency", [HERE / "bench_llm_concurrency.py", *quick]),
        ("isolated agents", [HERE / "bench_isolation.py", *quick]),
    ]
    failed, targets = [], []
    t0 = time.perf_counter()
    for title, cmd in steps:
        print(f"\n######## {title}: python {' '.join(str(c.relative_to(ROOT)) if isinstance(c, Path) else c for c in cmd)}", flush=True)
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *map(str, cmd)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:  # echo the output and collect the target verdicts
            print(line, end="", flush=True)
            if "MET" in line and ("target" in line.lower() or "<=" in line or ">=" in line):
                targets.append(f"[{title}] {line.strip()}")
        rc = proc.wait()
        print(f"######## {title}: exit {rc}, {time.perf_counter() - t:.1f} s", flush=True)
        if rc:
            failed.append(title)
    print("\nTargets measured in this run (the scripts print MET / NOT MET; see benchmarks/README.md):")
    for line in targets:
        print(f"  {line}")
    print(f"\nall benchmarks: {time.perf_counter() - t0:.1f} s" + (f"; FAILED: {', '.join(failed)}" if failed else "; all scripts ran")
          + " (the exit status reports scripts that failed, not targets missed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
