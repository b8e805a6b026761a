"""Throughput of the FWBench decision env for a free-tool episode, next to Gymnasium's CartPole-v1.

Run from the repository root::

    python benchmarks/bench_env.py              # ~15-25 s on 2 cores
    python benchmarks/bench_env.py --profile    # also profile one warm pass (pyinstrument call tree;
                                                # --profile cprofile: exact call counts)
    python benchmarks/bench_env.py --quick      # smoke test

Episode (what a scripted agent on the free menu does)::

    env.reset(options={"case_id": cid})                       # cycling through the test cases
    env.step('{"tool": "classical_plan", "args": {"method": "weekday_empirical"}}')
    decisions = json.loads(obs["last_result"])["result"]["plan"]["decisions"]
    env.step(json.dumps({"tool": "submit", "args": {"decisions": decisions}}))

on ``gymnasium.make("FWBench-Electricity-v0").unwrapped`` (test split). Each test case's classical
plan is cached process-wide by fwgym (``fwgym.tools.planning._PLAN_CACHE``), so the first pass over the
cases (plans computed: classical method + numba DP) and later passes (plan cache hits) are
reported separately. One warm-up episode (numba cache load etc.) is excluded and shown apart.

CartPole-v1 is measured in the same run with pre-drawn random actions (reset on termination or
truncation), both through ``gymnasium.make`` (default wrappers) and ``.unwrapped`` (like-for-like
with the FWBench figure), in chunks interleaved with the warm FWBench passes so that load from
other processes on a shared machine affects both sides of the ratio alike. The ratio compares the cost of one ``step`` call:
FWBench env time per episode / 2 steps (reset amortised into the steps) vs CartPole time per step.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import fwgym  # noqa: E402,F401  (registers the FWBench ids)

METHOD = "weekday_empirical"


def run_episode(env, case_id: str, method: str, clock: dict | None = None) -> float:
    """One free-tool episode; returns the terminal reward. ``clock`` accumulates per-phase seconds."""
    perf = time.perf_counter
    t0 = perf()
    env.reset(options={"case_id": case_id})
    t1 = perf()
    obs, _, term, _, _ = env.step(json.dumps({"tool": "classical_plan", "args": {"method": method}}))
    t2 = perf()
    decisions = json.loads(obs["last_result"])["result"]["plan"]["decisions"]
    action = json.dumps({"tool": "submit", "args": {"decisions": decisions}})
    t3 = perf()
    obs, reward, term, trunc, info = env.step(action)
    t4 = perf()
    if not (term and info["valid"]):
        raise AssertionError(f"{case_id}: episode did not end with a valid submission: {info}")
    if clock is not None:
        clock["reset"] += t1 - t0
        clock["step classical_plan"] += t2 - t1
        clock["agent json glue"] += t3 - t2
        clock["step submit"] += t4 - t3
    return reward


def fwbench_pass(env, ids: list[str], method: str) -> dict:
    clock = {"reset": 0.0, "step classical_plan": 0.0, "agent json glue": 0.0, "step submit": 0.0}
    gc.collect()
    t = time.perf_counter()
    for cid in ids:
        run_episode(env, cid, method, clock)
    wall = time.perf_counter() - t
    n = len(ids)
    env_s = wall - clock["agent json glue"]
    return {"episodes": n, "wall_s": wall, "eps_per_s": n / wall, "env_only_eps_per_s": n / env_s,
            "us_per_episode": 1e6 * wall / n, "env_us_per_episode": 1e6 * env_s / n,
            "phases_us": {k: 1e6 * v / n for k, v in clock.items()}}


class CartPoleRunner:
    """Random-action CartPole-v1 stepping in timed chunks (reset on termination / truncation)."""

    def __init__(self, env, seed: int = 0):
        self.env = env
        self.actions = np.random.default_rng(seed).integers(0, 2, size=1 << 16).tolist()
        self.env.reset(seed=seed)
        self.steps = 0
        self.seconds = 0.0

    def run(self, seconds: float) -> None:
        step, reset, actions = self.env.step, self.env.reset, self.actions
        n, mask = self.steps, (1 << 16) - 1
        t = time.perf_counter()
        deadline = t + seconds
        while True:
            for _ in range(1000):
                _, _, term, trunc, _ = step(actions[n & mask])
                n += 1
                if term or trunc:
                    reset()
            if time.perf_counter() >= deadline:
                break
        self.seconds += time.perf_counter() - t
        self.steps = n

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.seconds / self.steps


def profile_pass(env, ids: list[str], method: str, top: int = 18, profiler: str = "pyinstrument") -> str:
    """Profile one pass of episodes. ``pyinstrument`` (statistical, little overhead: the call tree with
    wall-clock shares; ``pip install pyinstrument``, part of ``fwgym[bench]``) or ``cprofile`` (exact call
    counts, but its per-call overhead inflates small Python functions)."""
    if profiler == "pyinstrument":
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0002)
        prof.start()
        for cid in ids:
            run_episode(env, cid, method)
        prof.stop()
        return prof.output_text(unicode=False, color=False)
    pr = cProfile.Profile()
    pr.enable()
    for cid in ids:
        run_episode(env, cid, method)
    pr.disable()
    out = io.StringIO()
    st = pstats.Stats(pr, stream=out)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top + 10)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default=METHOD, help=f"classical method of the plan step (default {METHOD})")
    ap.add_argument("--passes", type=int, default=3, help="passes over the test cases: 1 cold + (passes-1) warm (default 3)")
    ap.add_argument("--cartpole-seconds", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="200 cases, 2 passes, 1 s of CartPole")
    ap.add_argument("--profile", nargs="?", const="pyinstrument", choices=["pyinstrument", "cprofile"], default=None,
                    help="profile one warm pass: pyinstrument call tree (default) or cprofile top functions")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    print("== fwgym env benchmark ==")
    print(f"  platform {platform.platform()} | python {platform.python_version()} | numpy {np.__version__} | gymnasium {gym.__version__}")

    t = time.perf_counter()
    env = gym.make("FWBench-Electricity-v0", split="test").unwrapped
    t_make = time.perf_counter() - t
    ids = [c.case_id for c in env.cases]
    if args.quick:
        ids = ids[:200]
        args.passes, args.cartpole_seconds = 3, 1.0
    print(f"  gymnasium.make('FWBench-Electricity-v0') (builds the test cases): {t_make:.2f} s; {len(env.cases)} test cases"
          f"{' (using 200)' if args.quick else ''}; method {args.method}")

    t = time.perf_counter()
    run_episode(env, ids[0], args.method)
    print(f"  warm-up episode (first in process: numba cache load, lazy case data): {1e3 * (time.perf_counter() - t):.0f} ms")

    # pass 1: every case for the first time (plans computed); then warm passes interleaved with
    # CartPole chunks, so a busy phase of the (shared) machine hits both sides of the ratio alike
    cold = fwbench_pass(env, ids, args.method)
    cp_raw = CartPoleRunner(gym.make("CartPole-v1").unwrapped)
    cp_wrapped = CartPoleRunner(gym.make("CartPole-v1"))
    rounds = 10
    chunk = max(1, len(ids) // 5)
    warm_parts = []
    gc.collect()
    for r in range(rounds * max(1, args.passes - 1) // 2):
        part = fwbench_pass(env, [ids[(r * chunk + i) % len(ids)] for i in range(chunk)], args.method)
        warm_parts.append(part)
        cp_raw.run(args.cartpole_seconds / rounds)
        cp_wrapped.run(args.cartpole_seconds / rounds)
    n_warm = sum(p["episodes"] for p in warm_parts)
    wall = sum(p["wall_s"] for p in warm_parts)
    glue = sum(p["phases_us"]["agent json glue"] * p["episodes"] for p in warm_parts) / 1e6
    warm = {"episodes": n_warm, "wall_s": wall, "eps_per_s": n_warm / wall, "env_only_eps_per_s": n_warm / (wall - glue),
            "us_per_episode": 1e6 * wall / n_warm, "env_us_per_episode": 1e6 * (wall - glue) / n_warm,
            "phases_us": {k: sum(p["phases_us"][k] * p["episodes"] for p in warm_parts) / n_warm for k in cold["phases_us"]}}

    print("\nFWBench-Electricity-v0 free-tool episodes (reset + classical_plan + submit), unwrapped env")
    for kind, p in (("plan cache cold: plans computed", cold), ("plan cache warm: cache hits", warm)):
        ph = " | ".join(f"{k} {v:.0f}" for k, v in p["phases_us"].items())
        print(f"  {kind:<32} {p['episodes']:5d} episodes: {p['eps_per_s']:6.0f} episodes/s ({p['us_per_episode']:5.0f} us/episode;"
              f" env only {p['env_only_eps_per_s']:5.0f}/s) | us per episode: {ph}")

    print("\nCartPole-v1, random actions (same process, interleaved with the warm FWBench passes)")
    for name, cp in (("gymnasium.make (default wrappers)", cp_wrapped), (".unwrapped", cp_raw)):
        print(f"  {name:<33}: {1e6 / cp.us_per_step:9.0f} steps/s ({cp.us_per_step:.2f} us/step, {cp.steps} steps)")

    print("\nPer-step cost ratio FWBench / CartPole (FWBench: env time per episode / 2 steps, reset amortised)")
    for kind, p in (("cold plans", cold), ("warm plans", warm)):
        per_step = p["env_us_per_episode"] / 2
        print(f"  {kind}: {per_step:5.0f} us/step -> {per_step / cp_raw.us_per_step:5.0f}x CartPole unwrapped,"
              f" {per_step / cp_wrapped.us_per_step:5.0f}x CartPole via gymnasium.make")

    if args.profile:
        print(f"\n{args.profile} profile of one warm pass (plan cache hits):")
        print(profile_pass(env, ids, args.method, profiler=args.profile))
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
