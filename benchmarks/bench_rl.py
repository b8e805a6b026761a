"""Throughput of the RL wrappers (fwgym.wrappers) next to CartPole-v1, and PPO training speed.

Run from the repository root::

    python benchmarks/bench_rl.py            # ~1-2 min on 2 cores
    python benchmarks/bench_rl.py --quick    # smoke test

Measured in one process, after a warm-up (case pools built, numba caches loaded):

* env steps/s with uniformly random *allowed* actions (``action_masks()``), resets included, on the
  train split of both domains (what RL trains on):
  ``macro`` (MacroActionWrapper, one step = one whole episode: catalog + macro + submit),
  ``macro, classical entries only`` (never buys), ``sequential`` (SequentialMacroWrapper);
* CartPole-v1 steps/s (``gymnasium.make``, random actions, reset on termination) -- the ratio
  wrapped / CartPole is the figure of the issue;
* PPO (stable-baselines3, MlpPolicy, ``torch.set_num_threads(1)``) training steps/s on the macro
  env with 1 env and with a DummyVecEnv of 4, and on CartPole-v1 for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402


def env_rate(env, steps: int, seed: int = 0, only=None) -> float:
    """Steps per second with random allowed actions (``only``: restrict to these indices)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    t = time.perf_counter()
    for _ in range(steps):
        mask = env.action_masks()
        if only is not None:
            mask = mask & np.isin(np.arange(len(mask)), only)
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


def cartpole_rate(steps: int, seed: int = 0) -> float:
    env = gym.make("CartPole-v1")
    actions = np.random.default_rng(seed).integers(0, 2, steps)
    env.reset(seed=seed)
    t = time.perf_counter()
    for a in actions:
        _, _, term, trunc, _ = env.step(int(a))
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


def ppo_rate(make_env, n_envs: int, steps: int, n_steps: int) -> float:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    venv = make_vec_env(make_env, n_envs=n_envs, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=n_steps // n_envs, batch_size=64, n_epochs=10, seed=0, device="cpu", verbose=0)
    t = time.perf_counter()
    model.learn(steps)
    rate = model.num_timesteps / (time.perf_counter() - t)
    venv.close()
    return rate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="RL wrapper and PPO throughput")
    ap.add_argument("--quick", action="store_true", help="few steps (smoke test)")
    ap.add_argument("--steps", type=int, default=None, help="env steps per measurement (default 2000, quick 100)")
    ap.add_argument("--ppo-steps", type=int, default=None, help="PPO steps per measurement (default 4096, quick 256)")
    args = ap.parse_args(argv)
    steps = args.steps or (100 if args.quick else 2000)
    ppo_steps = args.ppo_steps or (256 if args.quick else 4096)
    n_steps = 128 if args.quick else 512

    from fwgym.wrappers import make_rl_env

    t0 = time.perf_counter()
    macro = make_rl_env(domain="all", split="train", variant="macro")
    seq = make_rl_env(domain="all", split="train", variant="sequential")
    build_s = time.perf_counter() - t0
    env_rate(macro, 20, seed=99)  # warm-up: numba caches, imports
    env_rate(seq, 20, seed=99)

    rows = {}
    rows["CartPole-v1 (gymnasium.make, random actions)"] = cartpole_rate(steps * 20)
    rows["macro: random allowed entry"] = env_rate(macro, steps, seed=1)
    rows["macro: classical entries only"] = env_rate(macro, steps, seed=2, only=np.arange(8))
    rows["sequential: random allowed entry"] = env_rate(seq, steps, seed=3)
    cart = rows["CartPole-v1 (gymnasium.make, random actions)"]

    def make_macro():
        return make_rl_env(domain="all", split="train", variant="macro")

    ppo = {
        "PPO macro, 1 env": ppo_rate(make_macro, 1, ppo_steps, n_steps),
        "PPO macro, DummyVecEnv x4": ppo_rate(make_macro, 4, ppo_steps, n_steps),
        "PPO CartPole-v1, 1 env (reference)": ppo_rate(lambda: gym.make("CartPole-v1"), 1, ppo_steps, n_steps),
    }

    print(f"fwgym RL benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{steps} env steps per row, PPO {ppo_steps} steps (n_steps {n_steps}, batch 64, 10 epochs); "
          f"env construction {build_s:.1f} s\n")
    print("| env | steps/s | ratio to CartPole-v1 |\n|---|---:|---:|")
    for name, rate in rows.items():
        print(f"| {name} | {rate:,.0f} | {rate / cart:.5f} |")
    print("\n| PPO training | steps/s |\n|---|---:|")
    for name, rate in ppo.items():
        print(f"| {name} | {rate:,.0f} |")
    print("\nmacro steps are whole episodes (reset + catalog + macro tool calls + submit + scoring).")
    print(json.dumps({"env_steps_per_s": rows, "ppo_steps_per_s": ppo,
                      "macro_to_cartpole_ratio": rows["macro: random allowed entry"] / cart}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
