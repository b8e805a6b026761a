"""How the RL ids' default settings were chosen: PPO on the TRAIN split, scored on the DEV split only.

Run from the repository root (~10-20 min on 2 busy cores with the defaults)::

    python benchmarks/rl_defaults.py                      # 2 settings x 2 seeds x 20k PPO steps, all dev cases
    python benchmarks/rl_defaults.py --learning-rates 1e-3 3e-4 --seeds 0 1 2 3   # the study behind ppo.yml
    python benchmarks/rl_defaults.py --steps 2000 --limit 20 --seeds 0   # smoke run

Each setting is a :func:`fwgym.rl.make_rl_env` configuration of the macro variant (train split,
dense reward); PPO uses the hyperparameters shipped for rl_zoo3 (``fwgym/hyperparams/ppo.yml``,
``FWBench-RL-Macro-v0``) on a DummyVecEnv of ``n_envs`` envs seeded ``seed + i`` (as rl_zoo3 and
``make_vec_env`` do). Every trained policy and the 8 fixed classical policies are then played on the
dev split by :func:`fwgym.evaluation.evaluate` (the one episode loop), and the script prints dev S per
(setting, seed), the mean per setting, and the best fixed policy on dev. The test split is never
touched. The figures go in benchmarks/README.md ("RL defaults").
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SETTINGS = {
    "all features, all stations": {"features": "all", "cycle_hire_stations": "all"},
    "compact features, busiest stations": {"features": "compact", "cycle_hire_stations": "busiest"},
}


def ppo_hyperparams(env_id: str = "FWBench-RL-Macro-v0") -> dict:
    """The shipped rl_zoo3 hyperparameters of ``env_id`` as PPO keyword arguments (plus ``n_envs``)."""
    import yaml
    from torch import nn

    hp = dict(yaml.safe_load((ROOT / "fwgym" / "hyperparams" / "ppo.yml").read_text())[env_id])
    hp.pop("n_timesteps")
    if isinstance(hp.get("policy_kwargs"), str):  # rl_zoo3 evaluates this string the same way
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"dict": dict, "nn": nn})  # noqa: S307 - the repo's own file
    return hp


def train(setting: dict, seed: int, steps: int, out: Path, learning_rate: float | None = None) -> tuple[Path, float]:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from fwgym.rl import make_rl_env
    from fwgym.agents.sb3 import save_policy

    torch.set_num_threads(1)
    hp = ppo_hyperparams()
    if learning_rate is not None:
        hp["learning_rate"] = learning_rate
    n_envs, policy = hp.pop("n_envs"), hp.pop("policy")
    venv = make_vec_env(make_rl_env, n_envs=n_envs, seed=seed,
                        env_kwargs={"domain": "all", "split": "train", "variant": "macro", "reward": "dense", **setting})
    model = PPO(policy, venv, seed=seed, device="cpu", verbose=0, **hp)
    t = time.perf_counter()
    model.learn(total_timesteps=steps)
    elapsed = time.perf_counter() - t
    venv.close()
    name = f"ppo_{setting['features']}_{setting['cycle_hire_stations']}_lr{hp['learning_rate']:g}_seed{seed}"
    return save_policy(model, out / name, "macro", setting["features"]), elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--limit", type=int, default=None, help="dev cases per domain (default: all)")
    ap.add_argument("--out", default="results/rl_defaults")
    ap.add_argument("--learning-rates", type=float, nargs="+", default=None,
                    help="PPO learning rates compared (default: ppo.yml's only)")
    args = ap.parse_args(argv)
    lrs = args.learning_rates or [ppo_hyperparams()["learning_rate"]]

    from fwgym.evaluation import evaluate, leaderboard
    from fwgym.forecasters.classical import CLASSICAL_METHODS
    from fwgym.agents.sb3 import SB3Agent

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for setting_name, setting in SETTINGS.items():
        for lr in lrs:
            label = f"{setting_name}, lr {lr:g}"
            for seed in args.seeds:
                path, secs = train(setting, seed, args.steps, out, lr)
                runs.append({"setting": label, "seed": seed, "path": str(path), "train_s": secs})
                print(f"trained {label}, seed {seed}: {args.steps} steps in {secs:.0f} s -> {path}", flush=True)
    factories = [functools.partial(SB3Agent, r["path"]) for r in runs]
    names = [SB3Agent(r["path"]).name for r in runs]
    records = evaluate(factories + list(CLASSICAL_METHODS), split="dev", limit=args.limit, progress=False)
    rows = {r["policy"]: r for r in leaderboard(records)}
    fixed = min((rows[m] for m in CLASSICAL_METHODS), key=lambda r: r["S"])
    print(f"\nDEV split ({len({r['case_id'] for r in records})} cases); PPO {args.steps} steps on train, "
          f"hyperparameters of fwgym/hyperparams/ppo.yml\n")
    print("| setting | seed | dev S | dev R | episodes with a purchase |\n|---|---:|---:|---:|---:|")
    means: dict[str, list[float]] = {}
    for r, name in zip(runs, names):
        row = rows[name]
        bought = sum(1 for rec in records if rec["policy"] == name and (rec.get("tool_counts") or {}).get("forecast"))
        r.update(dev_S=row["S"], dev_R=row["R"], purchases=bought, n=row["n"])
        means.setdefault(r["setting"], []).append(row["S"])
        print(f"| {r['setting']} | {r['seed']} | {row['S']:.4f} | {row['R']:.4f} | {bought}/{row['n']} |")
    print("\n| setting | mean dev S over seeds |\n|---|---:|")
    for label, vals in means.items():
        print(f"| {label} | {sum(vals) / len(vals):.4f} |")
    print(f"\nbest fixed policy on dev: {fixed['policy']} (S = {fixed['S']:.4f})")
    print(json.dumps({"runs": runs, "best_fixed_dev": {"policy": fixed["policy"], "S": fixed["S"]}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
