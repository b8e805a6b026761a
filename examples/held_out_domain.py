"""A held-out-domain test for learned policies: train on electricity + cycle hire, report on the pedestrian test
split zero-shot, next to the same policy trained on the pedestrian train split, and the fixed baselines.

Run from the repository root (CPU; ``nice -n 10`` on a shared machine)::

    python examples/held_out_domain.py              # 2,000 training cases per pool, 3 seeds, 60,000 PPO steps each
    python examples/held_out_domain.py --quick      # smoke run: a few cases and steps (not a result)

What it does (the pedestrian test split is played once, in step 3):

1. **Two training pools**, ``--train-cases`` train-split cases each, drawn without replacement with ``--pool-seed``:
   ``source`` = half electricity, half cycle hire (every station); ``target`` = pedestrian. Model selection
   never sees the pedestrian split that is reported: the hyperparameters are the shipped rl_zoo3 ones
   (``fwgym/hyperparams/ppo.yml``), the number of steps is fixed, every seed is reported.
2. **PPO** (stable-baselines3) on the native macro vector env (:class:`fwgym.rl.vector.MacroVectorEnv`, every
   (case, menu entry) outcome recorded from the real env first) for each pool x seed. The features are the
   domain-free compact set: :data:`FEATURES` = ``"compact"`` without the domain one-hots (lead, log scale,
   budget/calls and every model/method/summary feature), so the zero-shot policy's input has no slot it never
   saw in training. Pool: the protocol's (the free methods and seasonal_empirical; TSFMs are masked without
   their weights).
3. **Test, once.** Every learned policy (:class:`fwgym.agents.sb3.SB3Agent`), the 8 fixed classical methods,
   fixed seasonal_empirical and the free-menu and catalog oracles are played on the pedestrian test split by
   :func:`fwgym.evaluation.evaluate` (the one episode loop). Printed and written (``--out``, default
   ``results/held_out_domain``): the table (S, R, loss, credits per policy; seed mean and range for the learned
   ones), each seed's paired series-cluster bootstrap 95 % interval of S minus the best fixed policy on the
   pedestrian **dev** split (chosen before the test split is played), ``summary.json`` and the models.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fwgym.forecasters.classical import CLASSICAL_METHODS  # noqa: E402

SOURCE_DOMAINS = ("electricity", "cycle_hire")
TARGET_DOMAIN = "pedestrian"
FIXED = list(CLASSICAL_METHODS) + ["seasonal_empirical"]
ORACLES = ["free_menu_oracle", "catalog_oracle"]
QUICK = {"train_cases": 40, "steps": 2048, "seeds": [0], "test_limit": 6, "n_boot": 200}


def domain_free_features() -> list[str]:
    """The ``compact`` feature names without the domain one-hots."""
    from fwgym.rl.features import resolve_features

    return [n for n in resolve_features("compact") if not n.startswith("domain_")]


def pool_case_ids(domains, n: int, seed: int) -> list[str]:
    """``n`` train-split case ids drawn without replacement, split evenly over ``domains`` (split order)."""
    from fwgym.core.cases import build_cases

    rng = np.random.default_rng(seed)
    ids: list[str] = []
    for i, domain in enumerate(domains):
        k = n // len(domains) + (1 if i < n % len(domains) else 0)
        cases = build_cases(domain, "train")
        ids += [cases[j].case_id for j in np.sort(rng.choice(len(cases), size=k, replace=False))]
    return ids


def ppo_hyperparams() -> dict:
    import yaml
    from torch import nn

    hp = dict(yaml.safe_load((ROOT / "fwgym" / "hyperparams" / "ppo.yml").read_text())["FWBench-RL-Macro-v0"])
    hp.pop("n_timesteps")
    if isinstance(hp.get("policy_kwargs"), str):
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"dict": dict, "nn": nn})  # noqa: S307 - the repo's own file
    return hp


def train(domains, case_ids, seed: int, steps: int, out: Path, n_envs: int) -> dict:
    """One PPO run on the macro vector env over ``case_ids``; returns its name, path and timings."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    from fwgym.agents.sb3 import save_policy
    from fwgym.rl.sb3_vec import SB3VecEnv
    from fwgym.rl.vector import MacroVectorEnv

    torch.set_num_threads(1)
    feats = domain_free_features()
    venv = MacroVectorEnv(num_envs=n_envs, autoreset_mode="same_step", infos=False, domain=tuple(domains),
                          split="train", features=feats, case_ids=case_ids)
    t = time.perf_counter()
    venv.precompute(case_ids)
    record_s = time.perf_counter() - t
    hp = ppo_hyperparams()
    rollout = hp.pop("n_envs") * hp["n_steps"]
    policy = hp.pop("policy")
    hp["n_steps"] = max(1, rollout // n_envs)
    model = PPO(policy, VecMonitor(SB3VecEnv(venv)), seed=seed, device="cpu", verbose=0, **hp)
    t = time.perf_counter()
    model.learn(total_timesteps=steps, progress_bar=False)
    train_s = time.perf_counter() - t
    name = f"ppo_{'+'.join(domains)}_seed{seed}"
    path = save_policy(model, out / name, "macro", feats)
    venv.close()
    return {"name": name, "path": str(path), "domains": list(domains), "seed": seed, "record_s": record_s,
            "train_s": train_s, "steps": int(model.num_timesteps)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-cases", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=60_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--pool-seed", type=int, default=0)
    ap.add_argument("--n-envs", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--test-limit", type=int, default=None, help="cases per domain (smoke runs only)")
    ap.add_argument("--out", default="results/held_out_domain")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from fwgym.domains import get_domain

    get_domain(TARGET_DOMAIN)  # register the opt-in domain before fwgym.rl is imported (its feature slots)
    from fwgym.agents.sb3 import SB3Agent
    from fwgym.core.scoring import aggregate
    from fwgym.evaluation import evaluate, paired_bootstrap

    t0 = time.perf_counter()
    pools = {"source": SOURCE_DOMAINS, "target": (TARGET_DOMAIN,)}
    runs = []
    for label, domains in pools.items():
        ids = pool_case_ids(domains, args.train_cases, args.pool_seed)
        for seed in args.seeds:
            r = train(domains, ids, seed, args.steps, out, args.n_envs)
            r["pool"] = label
            runs.append(r)
            print(f"trained {r['name']}: {r['steps']} steps, recording {r['record_s']:.0f} s, training {r['train_s']:.0f} s",
                  flush=True)

    # the reference fixed policy, chosen on the pedestrian dev split (before the test split is played)
    dev = evaluate(FIXED, split="dev", domains=[TARGET_DOMAIN], limit=args.test_limit, workers=args.workers,
                   progress=False)
    dev_S = {p: aggregate([r for r in dev if r["policy"] == p])["S"] for p in FIXED}
    best_fixed = min(FIXED, key=lambda p: (dev_S[p], p))

    learned = [functools.partial(SB3Agent, r["path"], name=r["name"]) for r in runs]
    recs = evaluate(learned + FIXED + ORACLES, split="test", domains=[TARGET_DOMAIN], limit=args.test_limit,
                    workers=args.workers, progress=False)
    by = {}
    for r in recs:
        by.setdefault(r["policy"], []).append(r)
    rows = {p: {**aggregate(rs), "valid": sum(bool(r["valid"]) for r in rs)} for p, rs in by.items()}
    boot = {r["name"]: paired_bootstrap(recs, best_fixed, r["name"], n_boot=args.n_boot, seed=1701) for r in runs}

    def line(name, a, extra=""):
        return f"| {name} | {a['S']:.4f} | {a['R']:.4f} | {a['loss']:.4f} | {a['credits']:,.0f} | {a['valid']} | {extra} |"

    table = ["| policy | S | R | loss | credits | valid | S - best fixed (dev-chosen), 95% CI |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for label, title in (("source", "PPO trained on electricity + cycle hire (zero-shot)"),
                         ("target", "PPO trained on pedestrian train")):
        names = [r["name"] for r in runs if r["pool"] == label]
        s = np.array([rows[n]["S"] for n in names])
        table.append(f"| **{title}**: mean over {len(names)} seeds | {s.mean():.4f} (min {s.min():.4f}, max "
                     f"{s.max():.4f}) | | | | | |")
        for n in names:
            b = boot[n]
            table.append(line(n, rows[n], f"{b['diff']:+.4f} [{b['lo']:+.4f}, {b['hi']:+.4f}]"))
    for p in FIXED + ORACLES:
        table.append(line(p + (" (best fixed on dev)" if p == best_fixed else ""), rows[p]))
    text = "\n".join(table)
    print(text)
    (out / "table.md").write_text(text + "\n")
    summary = {"runs": runs, "best_fixed_dev": best_fixed, "dev_S": dev_S, "test": rows, "bootstrap": boot,
               "args": vars(args), "seconds": time.perf_counter() - t0}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    print(f"total {summary['seconds']:.0f} s; files under {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
