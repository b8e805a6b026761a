"""Train PPO (and MaskablePPO when sb3-contrib is installed) on the fwgym TRAIN split, then rank the
learned policies against the fixed policies on the TEST split through the standard evaluation path.

Run from the repository root (a few minutes on a 2-core laptop with the defaults)::

    python examples/train_ppo.py                       # 20k macro steps per algorithm, full test split
    python examples/train_ppo.py --variant sequential  # information gathering first (Discrete(28))
    python examples/train_ppo.py --features all        # all 403 features (raw history + calendar too)
    python examples/train_ppo.py --steps 2000 --limit 20   # quick smoke run

What it does:

1. ``make_rl_env(domain="all", split="train", variant=..., features=...)`` (:mod:`fwgym.wrappers`):
   numeric features -> Discrete macro menu, dense reward (episode sum = -S), ``--n-envs`` envs
   seeded ``seed + i`` in a DummyVecEnv (``--subproc`` for SubprocVecEnv). The default feature set
   is ``compact`` (lead, domain, scale, budget and tool-result summaries; no raw history or
   calendar), chosen on the dev split because the calendar/history inputs fit the train years
   and transfer badly (see :mod:`fwgym.wrappers.features`). Cycle-hire training cases come from
   the 20 stations the dev/test splits use (``--stations busiest``, chosen by the protocol on
   train-period departures; ``--stations all`` for all 100);
2. trains ``PPO("MlpPolicy")`` and ``MaskablePPO("MlpPolicy")`` for ``--steps`` env steps each and
   saves them with :func:`fwgym.agents.sb3.save_policy` to ``--out`` (``ppo_<variant>.zip``,
   ``maskableppo_<variant>.zip``);
3. evaluates them on the test split as agents (:class:`fwgym.agents.sb3.SB3Agent` factories
   passed to :func:`fwgym.evaluation.evaluate`; the same as
   ``fwgym evaluate --agent sb3 --model-path OUT/ppo_macro.zip``) next to the 8 fixed classical
   policies and fixed seasonal_empirical, prints the leaderboard and, for each learned policy,
   the difference in S to the best fixed free policy with a paired cluster-bootstrap 95% interval
   (series resampled with replacement within each domain; negative = the learned policy is better).
   Results go to ``OUT/test/`` (results.jsonl, leaderboard.md/csv, manifest.json, bootstrap.json).

The best fixed free policy is picked on the test split itself, which favours the baseline.
Training choices (compact features, busiest stations, learning rate 1e-3, 20k steps) were picked by
their dev-split results. What the policies learn in 20k steps is a router: hour_of_day_empirical
for electricity, weekday_empirical for cycle hire, and no purchases (measured: test S 0.311 against
0.348 for weekday_empirical, seeds 0 and 1, PPO and MaskablePPO alike). At SB3's default learning
rate 3e-4, about half of the runs settled on hour_of_day_empirical everywhere (test S 0.408). That
is the best single method on the train split. Runs at 3e-4 with all 100 training stations also
settled on it, with the compact features and with all 403.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fwgym.forecasters.classical import CLASSICAL_METHODS  # noqa: E402
from fwgym.scoring import case_weights  # noqa: E402

FIXED_FREE = tuple(CLASSICAL_METHODS)
FIXED_PRICED = ("seasonal_empirical",)


def paired_cluster_bootstrap(records: list[dict], policy: str, baseline: str, n_boot: int = 2000, seed: int = 0,
                             level: float = 0.95) -> dict:
    """Aggregate S(policy) - S(baseline) with a paired cluster-bootstrap interval.

    Clusters are series (``(domain, series_id)``), resampled with replacement within each domain;
    each replicate is aggregated with the benchmark's cohort weights
    (:func:`fwgym.scoring.case_weights`, a drawn series counted once per draw).

    Returns:
        ``{"policy", "baseline", "diff", "lo", "hi", "level", "n_boot", "clusters", "cases"}``.
    """
    a = {r["case_id"]: r for r in records if r["policy"] == policy}
    b = {r["case_id"]: r for r in records if r["policy"] == baseline}
    ids = sorted(set(a) & set(b))
    if not ids:
        raise ValueError(f"no common cases for {policy!r} and {baseline!r}")
    delta = {c: float(a[c]["S"]) - float(b[c]["S"]) for c in ids}
    clusters: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for c in ids:
        clusters[a[c]["domain"]][a[c]["series_id"]].append(c)
    meta = {c: {k: a[c][k] for k in ("case_id", "domain", "cohort", "series_id", "lead")} for c in ids}

    def diff(rows: list[dict], deltas: list[float]) -> float:
        return float(np.dot(case_weights(rows), deltas))

    point = diff([meta[c] for c in ids], [delta[c] for c in ids])
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    for i in range(n_boot):
        rows, deltas = [], []
        for domain, series in clusters.items():
            names = sorted(series)
            for k, j in enumerate(rng.integers(0, len(names), len(names))):
                for c in series[names[j]]:
                    m = meta[c]
                    rows.append({**m, "case_id": f"{c}#{k}", "series_id": f"{m['series_id']}#{k}"})
                    deltas.append(delta[c])
        reps[i] = diff(rows, deltas)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    return {"policy": policy, "baseline": baseline, "diff": point, "lo": float(lo), "hi": float(hi), "level": level,
            "n_boot": n_boot, "clusters": sum(len(s) for s in clusters.values()), "cases": len(ids),
            "method": "local paired cluster bootstrap (examples/train_ppo.py)"}


def bootstrap(records, policy: str, baseline: str, n_boot: int | None, seed: int | None) -> dict:
    """``fwgym.evaluation.paired_bootstrap`` (policy - reference) when this fwgym has it, else the
    local :func:`paired_cluster_bootstrap`. ``None`` keeps each function's default draws/seed."""
    import fwgym.evaluation as ev

    fn = getattr(ev, "paired_bootstrap", None)
    params = inspect.signature(fn).parameters if fn is not None else {}
    if "reference" in params and "policy" in params:
        kw = {k: v for k, v in (("n_boot", n_boot), ("seed", seed)) if v is not None and k in params}
        return {**fn(records, reference=baseline, policy=policy, **kw), "method": "fwgym.evaluation.paired_bootstrap"}
    return paired_cluster_bootstrap(records, policy, baseline, n_boot=n_boot or 2000, seed=0 if seed is None else seed)


def _field(d: dict, *names):
    for n in names:
        if n in d:
            return d[n]
    return None


def make_venv(args, variant: str):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from fwgym.wrappers import make_rl_env

    return make_vec_env(make_rl_env, n_envs=args.n_envs, seed=args.seed,
                        vec_env_cls=SubprocVecEnv if args.subproc else DummyVecEnv,
                        env_kwargs={"domain": "all", "split": "train", "variant": variant, "reward": "dense",
                                    "features": args.features, "cycle_hire_stations": args.stations})


def train(algo: str, args, out: Path) -> tuple[Path, float]:
    import torch

    from fwgym.agents.sb3 import save_policy

    torch.set_num_threads(1)
    if algo == "MaskablePPO":
        from sb3_contrib import MaskablePPO as Algo
    else:
        from stable_baselines3 import PPO as Algo
    venv = make_venv(args, args.variant)
    n_steps = max(8, args.n_steps // args.n_envs)
    model = Algo("MlpPolicy", venv, n_steps=n_steps, batch_size=min(args.batch_size, n_steps * args.n_envs),
                 n_epochs=args.epochs, learning_rate=args.lr, gamma=1.0, gae_lambda=1.0, ent_coef=args.ent_coef,
                 policy_kwargs={"net_arch": [128, 128]}, seed=args.seed, device="cpu", verbose=0)
    t = time.perf_counter()
    model.learn(total_timesteps=args.steps, progress_bar=False)
    elapsed = time.perf_counter() - t
    venv.close()
    path = save_policy(model, out / f"{algo.lower()}_{args.variant}", args.variant, args.features)
    print(f"trained {algo} ({args.variant}) for {model.num_timesteps} steps in {elapsed:.1f} s "
          f"({model.num_timesteps / elapsed:.0f} steps/s) -> {path}", flush=True)
    return path, elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=["macro", "sequential"], default="macro")
    ap.add_argument("--features", choices=["compact", "all"], default="compact", help="feature set (default compact)")
    ap.add_argument("--stations", choices=["busiest", "all"], default="busiest",
                    help="cycle-hire training stations: the 20 the dev/test splits use (default) or all 100")
    ap.add_argument("--steps", type=int, default=20_000, help="env steps per algorithm (default 20000)")
    ap.add_argument("--algos", nargs="+", default=None, help="PPO and/or MaskablePPO (default: both when available)")
    ap.add_argument("--n-envs", type=int, default=4)
    ap.add_argument("--subproc", action="store_true", help="SubprocVecEnv instead of DummyVecEnv")
    ap.add_argument("--n-steps", type=int, default=1024, help="rollout size per update, all envs together")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3, chosen on the dev split)")
    ap.add_argument("--ent-coef", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="test cases per domain (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="evaluation processes")
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap draws (default: the library's, 10,000)")
    ap.add_argument("--boot-seed", type=int, default=None, help="bootstrap seed (default: the library's)")
    ap.add_argument("--out", default="results/rl", help="models and results directory")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    from fwgym.evaluation import evaluate, format_leaderboard, leaderboard, run_meta, write_results
    from fwgym.agents.sb3 import SB3Agent

    t_all = time.perf_counter()
    algos = args.algos or (["PPO", "MaskablePPO"] if importlib.util.find_spec("sb3_contrib") else ["PPO"])
    if "MaskablePPO" in algos and not importlib.util.find_spec("sb3_contrib"):
        print("sb3-contrib is not installed: skipping MaskablePPO")
        algos = [a for a in algos if a != "MaskablePPO"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    trained, train_s = {}, {}
    for algo in algos:
        trained[algo], train_s[algo] = train(algo, args, out)

    factories = [functools.partial(SB3Agent, str(p), algo=a) for a, p in trained.items()]
    learned = [SB3Agent(str(p), algo=a).name for a, p in trained.items()]
    policies = factories + list(FIXED_FREE) + list(FIXED_PRICED)
    t = time.perf_counter()
    records = evaluate(policies, split="test", limit=args.limit, workers=args.workers, progress=not args.no_progress)
    eval_s = time.perf_counter() - t
    rows = leaderboard(records)
    best = min((r for r in rows if r["policy"] in FIXED_FREE), key=lambda r: r["S"])
    labels = learned + list(FIXED_FREE) + list(FIXED_PRICED)
    meta = {**run_meta("test", labels, args.workers), "train_steps": args.steps, "variant": args.variant,
            "features": args.features, "stations": args.stations, "seed": args.seed}
    if "reference" in inspect.signature(leaderboard).parameters:  # bootstrap columns against the best fixed policy
        rows = leaderboard(records, reference=best["policy"])
        paths = write_results(records, out / "test", meta, reference=best["policy"])
    else:
        paths = write_results(records, out / "test", meta)

    n_cases = len({r["case_id"] for r in records})
    print(f"\ntest split, {n_cases} cases ({len(records)} episodes, {eval_s:.1f} s)\n")
    print(format_leaderboard(rows))
    print(f"\nbest fixed free policy on this test set: {best['policy']} (S = {best['S']:.4f})")
    boots = []
    for name in learned:
        row = next(r for r in rows if r["policy"] == name)
        b = bootstrap(records, name, best["policy"], args.n_boot, args.boot_seed)
        boots.append(b)
        d, lo, hi = _field(b, "diff", "delta", "estimate"), _field(b, "lo", "low", "ci_low"), _field(b, "hi", "high", "ci_high")
        verdict = ("better" if hi is not None and hi < 0 else "worse" if lo is not None and lo > 0 else "not distinguishable")
        print(f"{name}: S = {row['S']:.4f} (valid {row['valid']}/{row['n']}); S - S[{best['policy']}] = {d:+.4f}, "
              f"95% CI [{lo:+.4f}, {hi:+.4f}] ({verdict}; {b.get('method', '')})")
        picks = defaultdict(int)
        for r in records:
            if r["policy"] == name:
                tc = r.get("tool_counts") or {}
                picks["forecast" if tc.get("forecast") else "classical"] += 1
        print(f"    episodes with a purchase: {picks['forecast']}/{picks['forecast'] + picks['classical']}")
    (out / "test" / "bootstrap.json").write_text(json.dumps(boots, indent=2) + "\n")
    total = time.perf_counter() - t_all
    print(f"\nresults: {paths['results']}, {paths['markdown']}; models: {', '.join(map(str, trained.values()))}")
    print(f"runtime: training {', '.join(f'{a} {s:.0f} s' for a, s in train_s.items())}; evaluation {eval_s:.0f} s; "
          f"total {total:.0f} s")
    print(f"re-evaluate with: fwgym evaluate --split test --agent sb3 --model-path {next(iter(trained.values()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
