"""Memory: RSS of one env (data included) and of many envs in one process (shared series).

    python benchmarks/bench_memory.py

Target (issue 8): one env < 300 MB RSS including data; extra envs add almost nothing because the
loaded series are shared (no copy per env).
"""
from __future__ import annotations

import os
import platform
import resource

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
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
    print(f"one FWBench-v0 env (data loaded):     {one:7.1f} MB   target < 300 MB: {'OK' if one < 300 else 'MISSED'}")
    print(f"+20 more envs:                        {many:7.1f} MB   ({(many - one) / 20:.2f} MB per extra env)")
    print(f"+ electricity train env (133,540 cases): {with_train:7.1f} MB")
    print(f"series arrays shared between envs: {shared}")


if __name__ == "__main__":
    main()
