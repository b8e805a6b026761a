"""Throughput of the RL wrappers (fwgym.wrappers) next to CartPole-v1, and PPO training speed.

Run from the repository root::

    python benchmarks/bench_rl.py            # ~1-2 min on 2 cores
    python benchmarks/bench_rl.py --quick    # smoke test

Measured in one process, after a warm-up (case pools built, numba caches loaded):

* microseconds per step of the RL envs of :func:`fwgym.wrappers.make_rl_env` on the train split of
  both domains (what RL trains on), resets included, and per tool call of the inner env:
  ``features`` (FeatureObservation: one tool call per step; a scripted classical_plan + submit),
  ``macro`` (MacroActionWrapper, one step = one whole episode: catalog + macro + submit) with
  uniformly random *allowed* actions (``action_masks()``) or classical entries only (never buys),
  ``sequential`` (SequentialMacroWrapper);
* CartPole-v1 microseconds per step (``gymnasium.make``, random actions, reset on termination),
  measured before and after the rows; the cost ratio to it is the figure of issue 8 (target <= 10x);
* PPO (stable-baselines3, MlpPolicy, ``torch.set_num_threads(1)``) training steps/s on the macro
  env with 1 env and with a DummyVecEnv of 4, and on CartPole-v1 for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402


def env_cost(env, steps: int, seed: int = 0, only=None) -> dict:
    """Random allowed macro actions (``only``: restrict to these indices), resets included.

    Returns ``{"us_per_step", "tool_calls_per_step", "us_per_tool_call"}``: a macro step runs several
    tool calls of the inner env (``info["macro_steps"]``) and every reset makes one (catalog).
    """
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    calls = 1
    t = time.perf_counter()
    for _ in range(steps):
        mask = env.action_masks()
        if only is not None:
            mask = mask & np.isin(np.arange(len(mask)), only)
        _, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        calls += info["macro_steps"]
        if term or trunc:
            env.reset()
            calls += 1
    us = 1e6 * (time.perf_counter() - t)
    return {"us_per_step": us / steps, "tool_calls_per_step": calls / steps, "us_per_tool_call": us / calls}


def features_cost(env, episodes: int, method: str = "weekday_empirical") -> dict:
    """FeatureObservation (JSON tool-call actions, numeric observations): reset (+ catalog), then
    ``classical_plan`` and ``submit`` of its plan, i.e. 2 wrapper steps and 3 tool calls per episode."""
    plan = {"tool": "classical_plan", "args": {"method": method}}
    t = time.perf_counter()
    for i in range(episodes):
        env.reset(seed=i if i == 0 else None)
        env.step(plan)
        decisions = env.tracker.plans[method]["decisions"]
        _, _, term, _, _ = env.step({"tool": "submit", "args": {"decisions": decisions}})
        assert term
    us = 1e6 * (time.perf_counter() - t)
    return {"us_per_step": us / (2 * episodes), "tool_calls_per_step": 1.5, "us_per_tool_call": us / (3 * episodes)}


def cartpole_us(steps: int, seed: int = 0) -> float:
    env = gym.make("CartPole-v1")
    actions = np.random.default_rng(seed).integers(0, 2, steps)
    env.reset(seed=seed)
    t = time.perf_counter()
    for a in actions:
        _, _, term, trunc, _ = env.step(int(a))
        if term or trunc:
            env.reset()
    return 1e6 * (time.perf_counter() - t) / steps


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
    feat = make_rl_env(domain="all", split="train", variant="features")
    build_s = time.perf_counter() - t0
    env_cost(macro, 20, seed=99)  # warm-up: numba caches, imports
    env_cost(seq, 20, seed=99)
    features_cost(feat, 10)

    cart = [cartpole_us(steps * 10)]
    rows = {
        "features wrapper: classical_plan, submit (1 tool call per step)": features_cost(feat, steps // 2),
        "macro: classical entries only (1 step = 1 episode)": env_cost(macro, steps, seed=2, only=np.arange(8)),
        "macro: random allowed entry (1 step = 1 episode)": env_cost(macro, steps, seed=1),
        "sequential: random allowed entry": env_cost(seq, steps, seed=3),
    }
    cart.append(cartpole_us(steps * 10, seed=1))
    cart_us = statistics.mean(cart)

    def make_macro():
        return make_rl_env(domain="all", split="train", variant="macro")

    ppo = {
        "PPO macro, 1 env": ppo_rate(make_macro, 1, ppo_steps, n_steps),
        "PPO macro, DummyVecEnv x4": ppo_rate(make_macro, 4, ppo_steps, n_steps),
        "PPO CartPole-v1, 1 env (reference)": ppo_rate(lambda: gym.make("CartPole-v1"), 1, ppo_steps, n_steps),
    }

    print(f"fwgym RL benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{steps} env steps per row, PPO {ppo_steps} steps (n_steps {n_steps}, batch 64, 10 epochs); "
          f"env construction {build_s:.1f} s (train split, both domains, text_observations=False)\n")
    print(f"CartPole-v1 (gymnasium.make, random actions): {cart_us:.1f} us/step (mean of a run before and after the rows)\n")
    print("| RL env (train split) | us/step | x CartPole step | tool calls/step | us/tool call | x CartPole step |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['us_per_step']:,.0f} | {r['us_per_step'] / cart_us:.1f} | {r['tool_calls_per_step']:.2f} | "
              f"{r['us_per_tool_call']:,.0f} | {r['us_per_tool_call'] / cart_us:.1f} |")
    print("\n(resets are amortised into the steps; a reset makes the free catalog call, counted as a tool call)")
    best = min(r["us_per_step"] for r in rows.values()) / cart_us
    macro_ratio = rows["macro: random allowed entry (1 step = 1 episode)"]["us_per_step"] / cart_us
    print(f"\nTarget: an fwgym RL step <= 10x a CartPole step: one-tool-call steps {best:.1f}x "
          f"({'MET' if best <= 10 else 'NOT MET'}); a macro step (a whole episode) {macro_ratio:.0f}x (NOT MET: "
          "one macro step is reset + catalog + plan on a new case + submit + scoring)")
    print("\n| PPO training | steps/s |\n|---|---:|")
    for name, rate in ppo.items():
        print(f"| {name} | {rate:,.0f} |")
    print(json.dumps({"cartpole_us_per_step": cart_us, "rows": rows, "ppo_steps_per_s": ppo}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
