"""Memory: RSS of one env (data included), of many envs in one process (shared series), and of a
long RL run on the train split (bounded caches).

    python benchmarks/bench_memory.py [--episodes 20000]

Target (issue 8): one env < 300 MB RSS including data; extra envs add almost nothing because the
loaded series are shared (no copy per env). A long run must not grow without bound: nothing is
cached per case, the classical-plan cache keeps 4,096 plans (~29 MB) and the forecast cache 64 MiB.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="fwgym memory figures")
    ap.add_argument("--episodes", type=int, default=20000, help="macro episodes of the long RL run (default 20000)")
    args = ap.parse_args(argv)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    base = rss_mb()
    import fwgym  # noqa: F401
    from fwgym.envs.fwbench import FWBenchEnv

    after_import = rss_mb()
    env = FWBenchEnv(("electricity", "cycle_hire"), split="test")
    env.reset(seed=0)
    env.step({"tool": "classical_plan", "args": {"method": "calendar_residual"}})
    one = rss_mb()
    envs = [FWBenchEnv(("electricity", "cycle_hire"), split="test") for _ in range(20)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    many = rss_mb()
    shared = all(e.episode is not None for e in envs) and envs[0].cases[0].series is envs[1].cases[0].series
    train = FWBenchEnv("electricity", split="train")
    train.reset(seed=0)
    with_train = rss_mb()
    print(f"python alone:                         {base:7.1f} MB")
    print(f"after import fwgym:                   {after_import:7.1f} MB")
    print(f"one FWBench-v0 env (data loaded):     {one:7.1f} MB   target < 300 MB: {'MET' if one < 300 else 'NOT MET'}")
    print(f"+20 more envs:                        {many:7.1f} MB   ({(many - one) / 20:.2f} MB per extra env)")
    print(f"+ electricity train env (133,540 cases): {with_train:7.1f} MB")
    print(f"series arrays shared between envs: {shared}")

    import numpy as np

    from fwgym.tools import planning
    from fwgym.forecasters.cache import FORECAST_CACHE
    from fwgym.rl import make_rl_env

    rl = make_rl_env(domain="all", split="train", variant="macro", outcome_table=False)
    rng = np.random.default_rng(0)
    rl.reset(seed=0)
    print(f"\nlong RL run: make_rl_env(domain='all', split='train', variant='macro'), random allowed entries "
          f"(140k cases: nearly every episode is a new case)\n  start: {rss_mb():7.1f} MB")
    t = time.perf_counter()
    marks = {args.episodes // 4, args.episodes // 2, args.episodes}
    for i in range(1, args.episodes + 1):
        rl.step(int(rng.choice(np.flatnonzero(rl.action_masks()))))
        rl.reset()
        if i in marks:
            print(f"  after {i:6d} episodes: {rss_mb():7.1f} MB   plan cache {len(planning._PLAN_CACHE)} entries, forecast cache "
                  f"{len(FORECAST_CACHE._order)} entries / {FORECAST_CACHE.nbytes / 2**20:.1f} MiB   ({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
