"""Throughput of the native macro vector env (fwgym.rl.vector.MacroVectorEnv) next to Gymnasium's
CartPoleVectorEnv and to the wrapped single env in SyncVectorEnv, and PPO (SB3) training speed on each.

Run from the repository root::

    python benchmarks/bench_vector.py            # ~4-6 min on 2 cores
    python benchmarks/bench_vector.py --quick    # smoke test (~1 min)

Measured in one process:

* **steady state** (the figure of the target): ``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)``
  (the id's settings: train split, next-step autoreset, full infos equal to SyncVectorEnv's) on a pool
  of ``--cases`` train cases whose outcomes were recorded first (``precompute()``: every (case,
  entry) played once through the real env), next to ``CartPoleVectorEnv(num_envs=N)``, at N = 64
  and 1024: env steps per second (N per vector step), random actions, in ~5-20 ms chunks alternated
  between the two (``--rounds`` rounds); the minima of the chunks are the quiet-machine costs
  (this VM is shared), their ratio is the target's figure (fwgym >= CartPoleVectorEnv);
* the same with ``infos=False`` (``{}`` as info, as CartPoleVectorEnv returns; observations, rewards
  and masks unchanged), and with same-step autoreset (what SB3 needs: ``final_obs`` and
  ``final_info`` in every step's info);
* **first visits**: a new native env on the same pool without precompute (nearly every (case,
  entry) new, so each costs one episode of the real env: a reset when the case is drawn, a reset
  and the macro step when the entry is chosen) and SyncVectorEnv over N wrapped single envs
  (``vectorization_mode="sync"``, the Gymnasium-standard path; every step plays real episodes);
* recording cost: microseconds per recorded (case, entry) outcome (``precompute``);
* **PPO** (stable-baselines3, MlpPolicy [128, 128], ``torch.set_num_threads(1)``, n_steps 16 per env,
  batch 256, 10 epochs) training steps/s with 64 envs: the native env through
  :class:`fwgym.rl.sb3_vec.SB3VecEnv` (same-step autoreset) on the recorded pool; SyncVectorEnv of
  wrapped envs through the same adapter; SB3's DummyVecEnv of wrapped envs (SB3's standard path); and
  SB3's DummyVecEnv of CartPole-v1 for reference (CartPoleVectorEnv has next-step autoreset only).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import fwgym  # noqa: E402,F401

ID = "FWBench-RL-Macro-v0"


def chunk(venv, actions: np.ndarray, k0: int, steps: int) -> float:
    """Seconds per vector step over ``steps`` steps of pre-drawn actions (starting at row ``k0``)."""
    n = len(actions)
    t = time.perf_counter()
    for j in range(steps):
        venv.step(actions[(k0 + j) % n])
    return (time.perf_counter() - t) / steps


def interleaved(envs: list, actions: list, steps: int, rounds: int) -> list[tuple[float, list[float]]]:
    """Alternate ``steps``-step chunks of each env of ``envs`` (the last is the reference), ``rounds``
    times; returns per env (minimum s/step, sorted per-round ratios reference / env)."""
    times = [[] for _ in envs]
    for r in range(rounds):
        for k in (len(envs) - 1, *range(len(envs) - 1)):
            times[k].append(chunk(envs[k], actions[k], r * steps, steps))
    ref = times[-1]
    return [(min(t), sorted(y / x for x, y in zip(t, ref))) for t in times]


def pool_ids(n: int, seed: int = 0) -> list[str]:
    """``n`` cases drawn from the RL id's own train pool (its stations / features settings)."""
    pool = [c.case_id for c in gym.make(ID).unwrapped.cases]
    return sorted(np.random.default_rng(seed).choice(pool, min(n, len(pool)), replace=False).tolist())


def ppo_rate(venv, steps: int) -> float:
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=256, n_epochs=10, learning_rate=1e-3, gamma=1.0, gae_lambda=1.0,
                ent_coef=0.01, policy_kwargs={"net_arch": [128, 128]}, seed=0, device="cpu", verbose=0)
    model.learn(256)  # warm-up (first rollout, torch)
    t = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    rate = steps / (time.perf_counter() - t)
    venv.close()
    return rate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="native vector env throughput")
    ap.add_argument("--quick", action="store_true", help="small pool, few rounds (smoke test)")
    ap.add_argument("--cases", type=int, default=None, help="train cases of the recorded pool (default 2000, quick 200)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per row (default 30, quick 5)")
    ap.add_argument("--ppo-steps", type=int, default=None, help="PPO steps per row (default 16384, quick 2048)")
    args = ap.parse_args(argv)
    n_cases = args.cases or (200 if args.quick else 2000)
    rounds = args.rounds or (5 if args.quick else 30)
    ppo_steps = args.ppo_steps or (2048 if args.quick else 16384)
    sizes = (64, 1024)
    rng = np.random.default_rng(1)

    t0 = time.perf_counter()
    ids = pool_ids(n_cases)
    kw = {"case_ids": ids}
    results: dict = {"cases": len(ids), "steady": {}, "same_step": {}, "first_visit": {}, "ppo": {}}

    # -- recording cost and steady state ------------------------------------------------------
    native = {n: gym.make_vec(ID, num_envs=n, **kw) for n in sizes}
    t = time.perf_counter()
    rec = native[sizes[0]].precompute()
    record_us = 1e6 * (time.perf_counter() - t) / (rec["steps"] + rec["cases"])
    results["record_us_per_outcome"] = record_us
    for n in sizes:
        full, cart = native[n], CartPoleVectorEnv(num_envs=n)
        full.precompute()
        bare = gym.make_vec(ID, num_envs=n, infos=False, **kw)
        bare.precompute()
        for e in (full, bare, cart):
            e.reset(seed=0)
        acts = rng.integers(0, 12, (4096, n))
        cacts = rng.integers(0, 2, (4096, n))
        steps = 50 if n <= 64 else 10
        for e, a in ((full, acts), (bare, acts), (cart, cacts)):
            chunk(e, a, 0, steps)  # warm-up
        (t_full, r_full), (t_bare, r_bare), (t_cart, _) = interleaved([full, bare, cart], [acts, acts, cacts], steps, rounds)
        results["steady"][n] = {
            "fwgym_steps_per_s": n / t_full, "fwgym_us_per_step": 1e6 * t_full, "ratio": t_cart / t_full,
            "ratio_median": float(np.median(r_full)), "ratio_range": (r_full[0], r_full[-1]),
            "fwgym_noinfo_steps_per_s": n / t_bare, "fwgym_noinfo_us_per_step": 1e6 * t_bare, "ratio_noinfo": t_cart / t_bare,
            "ratio_noinfo_median": float(np.median(r_bare)), "ratio_noinfo_range": (r_bare[0], r_bare[-1]),
            "cartpole_steps_per_s": n / t_cart, "cartpole_us_per_step": 1e6 * t_cart}
        bare.close()
        same = gym.make_vec(ID, num_envs=n, autoreset_mode=AutoresetMode.SAME_STEP, **kw)
        same.precompute()
        same.reset(seed=0)
        chunk(same, acts, 0, steps)
        best = min(chunk(same, acts, r * steps, steps) for r in range(max(rounds // 3, 2)))
        results["same_step"][n] = {"fwgym_steps_per_s": n / best, "fwgym_us_per_step": 1e6 * best}
        same.close()

    # -- first visits: the native env on the whole pool (cold) and SyncVectorEnv of wrapped envs ----
    for n in sizes:
        cold = gym.make_vec(ID, num_envs=n, **kw)  # nothing recorded yet: nearly every step a first visit
        cold.reset(seed=3)
        vsteps = 8 if n <= 64 else 2
        acts = rng.integers(0, 12, (vsteps, n))
        t = time.perf_counter()
        for a in acts:
            cold.step(a)
        cold_s = (time.perf_counter() - t) / vsteps
        sync_n = n if not args.quick or n <= 64 else None
        row = {"native_cold_steps_per_s": n / cold_s, "recorded": dict(cold.recorded)}
        cold.close()
        if sync_n:
            t = time.perf_counter()
            sync = gym.make_vec(ID, num_envs=n, vectorization_mode="sync", **kw)
            row["sync_build_s"] = time.perf_counter() - t
            sync.reset(seed=3)
            sync.step(acts[0])
            t = time.perf_counter()
            for a in acts[1:] if len(acts) > 1 else acts:
                sync.step(a)
            sync_s = (time.perf_counter() - t) / max(len(acts) - 1, 1)
            row["sync_steps_per_s"] = n / sync_s
            sync.close()
        results["first_visit"][n] = row

    # -- PPO ------------------------------------------------------------------------------------
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    from fwgym.rl.sb3_vec import SB3VecEnv

    n = 64
    for infos in (True, False):
        venv = gym.make_vec(ID, num_envs=n, autoreset_mode=AutoresetMode.SAME_STEP, infos=infos, **kw)
        venv.precompute()
        name = f"native MacroVectorEnv via SB3VecEnv (recorded pool{'' if infos else ', infos=False'})"
        results["ppo"][name] = ppo_rate(VecMonitor(SB3VecEnv(venv)), ppo_steps)
    sync = gym.make_vec(ID, num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kw)
    results["ppo"]["SyncVectorEnv of wrapped envs via SB3VecEnv"] = ppo_rate(VecMonitor(SB3VecEnv(sync)), ppo_steps)
    dummy = DummyVecEnv([partial(gym.make, ID, **kw) for _ in range(n)])
    results["ppo"]["SB3 DummyVecEnv of wrapped envs"] = ppo_rate(VecMonitor(dummy), ppo_steps)
    results["ppo"]["SB3 DummyVecEnv of CartPole-v1 (reference)"] = ppo_rate(make_vec_env("CartPole-v1", n_envs=n, seed=0), ppo_steps)
    total_s = time.perf_counter() - t0

    # -- report ---------------------------------------------------------------------------------
    print(f"fwgym native vector env benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, gymnasium "
          f"{gym.__version__}; recorded pool: {len(ids)} train cases of {ID} (x 12 entries + resets), {rounds} "
          f"interleaved rounds per row; {total_s:.0f} s in all\n")
    print(f"Recording (precompute, the real env plays each (case, entry) once): {record_us:,.0f} us per recorded outcome\n")
    print("| num_envs | fwgym MacroVectorEnv env-steps/s (quiet) | fwgym / CartPole (quiet; median of rounds, range) | "
          "fwgym with infos=False env-steps/s | infos=False / CartPole | CartPoleVectorEnv env-steps/s (quiet) | "
          "fwgym same-step autoreset env-steps/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, r in results["steady"].items():
        lo, hi = r["ratio_range"]
        lo2, hi2 = r["ratio_noinfo_range"]
        print(f"| {n} | {r['fwgym_steps_per_s']:,.0f} ({r['fwgym_us_per_step']:,.0f} us/step) | {r['ratio']:.2f} "
              f"({r['ratio_median']:.2f}, {lo:.2f}-{hi:.2f}) | {r['fwgym_noinfo_steps_per_s']:,.0f} ({r['fwgym_noinfo_us_per_step']:,.0f} "
              f"us/step) | {r['ratio_noinfo']:.2f} ({r['ratio_noinfo_median']:.2f}, {lo2:.2f}-{hi2:.2f}) | "
              f"{r['cartpole_steps_per_s']:,.0f} ({r['cartpole_us_per_step']:,.0f} us/step) | "
              f"{results['same_step'][n]['fwgym_steps_per_s']:,.0f} |")
    print("\n(steady state: every outcome recorded; full infos, equal to SyncVectorEnv's; next-step autoreset, so every "
          "other vector step of a macro env is a reset step, as in CartPoleVectorEnv after an episode ends)\n")
    print("| num_envs | first visits: native env-steps/s (nothing recorded yet) | SyncVectorEnv of wrapped envs "
          "env-steps/s |\n|---:|---:|---:|")
    for n, r in results["first_visit"].items():
        sync_txt = f"{r['sync_steps_per_s']:,.0f}" if "sync_steps_per_s" in r else "(not run with --quick)"
        print(f"| {n} | {r['native_cold_steps_per_s']:,.0f} | {sync_txt} |")
    print("\n| PPO (SB3), 64 envs | training steps/s |\n|---|---:|")
    for name, rate in results["ppo"].items():
        print(f"| {name} | {rate:,.0f} |")
    for n, r in results["steady"].items():
        print(f"\nTarget: native vector env >= CartPoleVectorEnv steps/s at num_envs = {n}: {r['ratio']:.2f}x with full infos "
              f"({'MET' if r['ratio'] >= 1 else 'NOT MET'}); {r['ratio_noinfo']:.2f}x with infos=False "
              f"({'MET' if r['ratio_noinfo'] >= 1 else 'NOT MET'})")
    sync64 = results["first_visit"][64].get("sync_steps_per_s")
    if sync64:
        print(f"native (steady) / SyncVectorEnv of wrapped envs at 64 envs: {results['steady'][64]['fwgym_steps_per_s'] / sync64:,.0f}x; "
              f"PPO native / PPO DummyVecEnv of wrapped envs: {results['ppo']['native MacroVectorEnv via SB3VecEnv (recorded pool)'] / results['ppo']['SB3 DummyVecEnv of wrapped envs']:.2f}x")
    print(json.dumps(results, sort_keys=True, default=list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
