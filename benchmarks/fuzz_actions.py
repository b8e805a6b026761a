"""Long fuzz run: >= 10,000 generated actions across every registered env id (issue 7).

    python benchmarks/fuzz_actions.py [--actions 10000]

Prints the number of episodes and actions tried per env id; exits non-zero on the first violated invariant.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fwgym
from fwgym.testing import action_strategy, play_fuzzed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--actions", type=int, default=10_000)
    args = p.parse_args()
    counts = {i: [0, 0] for i in fwgym.ENV_IDS}
    envs = {i: gym.make(i, disable_env_checker=True, split="test") for i in fwgym.ENV_IDS}
    ids = sorted(envs)
    t0 = time.perf_counter()
    total = [0]

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seq=st.lists(action_strategy(), min_size=1, max_size=14), seed=st.integers(0, 10**6), which=st.integers(0, 10**6))
    def run(seq, seed, which):
        if total[0] >= args.actions:
            return
        env_id = ids[which % len(ids)]
        n = play_fuzzed(envs[env_id], seq, seed)
        counts[env_id][0] += 1
        counts[env_id][1] += n
        total[0] += n

    while total[0] < args.actions:
        run()
    print(f"fuzzed {total[0]} actions in {sum(c[0] for c in counts.values())} episodes, {time.perf_counter() - t0:.1f} s")
    for env_id, (eps, acts) in sorted(counts.items()):
        print(f"  {env_id:34s} episodes {eps:6d}  actions {acts:7d}")
    print("all invariants held")


if __name__ == "__main__":
    main()
