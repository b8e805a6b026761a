"""Throughput of the FWBench decision env for a free-tool episode, next to Gymnasium's CartPole-v1.

Run from the repository root::

    python benchmarks/bench_env.py              # ~15-25 s on 2 cores
    python benchmarks/bench_env.py --profile    # also cProfile one warm pass (top functions)
    python benchmarks/bench_env.py --quick      # smoke test

Episode (what a scripted agent on the free menu does)::

    env.reset(options={"case_id": cid})                       # cycling through the test cases
    env.step('{"tool": "classical_plan", "args": {"method": "weekday_empirical"}}')
    decisions = json.loads(obs["last_result"])["result"]["plan"]["decisions"]
    env.step(json.dumps({"tool": "submit", "args": {"decisions": decisions}}))

on ``gymnasium.make("FWBench-Electricity-v0").unwrapped`` (test split). Each test case's classical
plan is cached process-wide by fwgym (``fwgym.tools._PLAN_CACHE``), so the first pass over the
cases (plans computed: classical method + numba DP) and later passes (plan cache hits) are
reported separately. One warm-up episode (numba cache load etc.) is excluded and shown apart.

CartPole-v1 is measured in the same run with pre-drawn random actions (reset on termination or
truncation), both through ``gymnasium.make`` (default wrappers) and ``.unwrapped`` (like-for-like
with the FWBench figure). The ratio compares the cost of one ``step`` call:
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


def cartpole_steps_per_s(env, seconds: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=1 << 16).tolist()
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    n, episodes, mask = 0, 0, (1 << 16) - 1
    gc.collect()
    t = time.perf_counter()
    deadline = t + seconds
    while True:
        for _ in range(2000):
            _, _, term, trunc, _ = step(actions[n & mask])
            n += 1
            if term or trunc:
                reset()
                episodes += 1
        if time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - t
    return {"steps": n, "episodes": episodes, "wall_s": wall, "steps_per_s": n / wall, "us_per_step": 1e6 * wall / n}


def profile_pass(env, ids: list[str], method: str, top: int = 18) -> str:
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
    ap.add_argument("--passes", type=int, default=3, help="passes over the test cases (first = plan cache cold)")
    ap.add_argument("--cartpole-seconds", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="200 cases, 2 passes, 1 s of CartPole")
    ap.add_argument("--profile", action="store_true", help="cProfile one warm pass and print the top functions")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    print("== fwgym env benchmark ==")
    print(f"  platform {platform.platform()} | python {platform.python_version()} | numpy {np.__version__} | gymnasium {gym.__version__}")

    t = time.perf_counter()
    env = gym.make("FWBench-Electricity-v0").unwrapped
    t_make = time.perf_counter() - t
    ids = [c.case_id for c in env.cases]
    if args.quick:
        ids = ids[:200]
        args.passes, args.cartpole_seconds = 2, 1.0
    print(f"  gymnasium.make('FWBench-Electricity-v0') (builds the test cases): {t_make:.2f} s; {len(env.cases)} test cases"
          f"{' (using 200)' if args.quick else ''}; method {args.method}")

    t = time.perf_counter()
    run_episode(env, ids[0], args.method)
    print(f"  warm-up episode (first in process: numba cache load, lazy case data): {1e3 * (time.perf_counter() - t):.0f} ms")

    passes = [fwbench_pass(env, ids, args.method) for _ in range(max(1, args.passes))]
    print("\nFWBench-Electricity-v0 free-tool episodes (reset + classical_plan + submit), unwrapped env")
    for i, p in enumerate(passes):
        kind = "plan cache cold (plans computed)" if i == 0 else "plan cache warm (cache hits)"
        ph = " | ".join(f"{k} {v:.0f}" for k, v in p["phases_us"].items())
        print(f"  pass {i + 1} [{kind:<33}] {p['eps_per_s']:7.0f} episodes/s ({p['us_per_episode']:6.0f} us/episode;"
              f" env only {p['env_only_eps_per_s']:6.0f}/s) | us per episode: {ph}")

    cp_wrapped = cartpole_steps_per_s(gym.make("CartPole-v1"), args.cartpole_seconds)
    cp_raw = cartpole_steps_per_s(gym.make("CartPole-v1").unwrapped, args.cartpole_seconds)
    print("\nCartPole-v1, random actions (same process)")
    print(f"  gymnasium.make (default wrappers): {cp_wrapped['steps_per_s']:10.0f} steps/s ({cp_wrapped['us_per_step']:.2f} us/step)")
    print(f"  .unwrapped                       : {cp_raw['steps_per_s']:10.0f} steps/s ({cp_raw['us_per_step']:.2f} us/step)")

    print("\nPer-step cost ratio FWBench / CartPole (FWBench: env time per episode / 2 steps, reset amortised)")
    for i, p in enumerate(passes[:2]):
        kind = "cold plans" if i == 0 else "warm plans"
        per_step = p["env_us_per_episode"] / 2
        print(f"  {kind}: {per_step:6.0f} us/step -> {per_step / cp_raw['us_per_step']:6.0f}x CartPole unwrapped,"
              f" {per_step / cp_wrapped['us_per_step']:5.0f}x CartPole via gymnasium.make")

    if args.profile:
        print("\ncProfile of one warm pass (plan cache hits):")
        print(profile_pass(env, ids, args.method))
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
