"""A learned per-case router for the macro env: trained on TRAIN, chosen on DEV, reported ONCE on TEST (issue 29).

A macro episode is one decision, a contextual bandit with full information at training time: the train split's
outcome table (``fwgym rl build --split train``, :mod:`fwgym.rl.outcomes`) holds the S of every free method on every
train case, so the router is trained on the exact bandit objective, the expected S of its softmax choice
(cost-sensitive classification), in seconds rather than PPO's hours. Run from the repository root::

    fwgym rl build --split train --workers 2 && fwgym rl build --split dev   # once (train: 9 min on 2 cores, 934 MB)
    python examples/train_router.py                                # ~5-10 min on 2 busy cores
    python examples/train_router.py --quick                        # smoke run (small tables, a few test cases)

What it does, in this order (the test split is touched in step 4 only, once):

1. **Tables.** The default outcome tables of the train and dev splits (the RL ids' settings; refused when stale).
   Per case: the router's inputs (:func:`fwgym.rl.router.table_inputs`: the case's calendar and kind, and every
   classical method's free plan, 8 levels and its expected loss) and the S of each method.
2. **Dev search.** A ReLU MLP per input set (``all``; ``no_calendar``; ``no_plans``: the ablations) x seed
   (0, 1, 2), trained with Adam on the case-weighted expected S of the softmax over the methods (train cases only);
   after every epoch its dev S (deterministic argmax, case weights of :func:`fwgym.core.scoring.case_weights`) is a
   point of its learning curve. The setting (input set, epochs) with the lowest mean dev S over the seeds is chosen;
   the fixed policy with the lowest dev S is the baseline. The chosen models are then played on all dev cases by
   :func:`fwgym.evaluation.evaluate` (:class:`fwgym.agents.router.RouterAgent` on the raw env, the one episode
   loop), and their dev S must equal the table's, case by case.
3. **Files.** ``<out>/router_seed<k>.json`` (the models, with their dev figure and how they were chosen), the dev
   results and ``summary.json``.
4. **Test, once.** The chosen models, every fixed free policy and the free-menu oracle on the test split
   (:func:`fwgym.evaluation.evaluate`): leaderboard, and per model the paired series-cluster bootstrap 95 % interval
   of S minus the dev-chosen fixed policy's (10,000 draws, seed 1701) and the share of the gap to the free-menu
   oracle it closes, overall and per cohort. ``fwgym evaluate --split test --agent router --router-path
   <out>/router_seed0.json`` reproduces a model's row.
"""
from __future__ import annotations

import argparse
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

SEEDS = (0, 1, 2)
INPUT_SETS = ("all", "no_calendar", "no_plans")
QUICK = {"limit": 40, "epochs": 4, "test_limit": 8, "n_boot": 200, "workers": 1, "seeds": [0, 1]}


def input_mask(names: list[str], which: str) -> np.ndarray:
    """Which router inputs an input set keeps (the others are fed as 0: the model's input layout stays the same)."""
    keep = np.ones(len(names), dtype=bool)
    for i, n in enumerate(names):
        if which == "no_calendar" and n.startswith(("as_of_hour_", "target_weekday_", "target_doy_")):
            keep[i] = False
        if which == "no_plans" and n.startswith("plan_"):
            keep[i] = False
    return keep


def table_for(split: str, limit: int | None, tables_dir: str | None):
    """The split's macro outcome table for the RL ids' settings, current for this code (built first if absent)."""
    from fwgym.rl.outcomes import TableError, build_table, open_table, table_dir, table_identity
    from fwgym.rl.outcomes.build import table_env
    from fwgym.rl.outcomes.format import default_root

    env = table_env(split, "macro")
    identity = table_identity("macro", env)
    env.close()
    root = Path(tables_dir) if tables_dir else default_root()
    where = table_dir(root, identity) if limit is None else Path(root) / f"limit{limit}-{table_dir(root, identity).name}"
    try:
        build_table(split, "macro", where, limit=limit, progress=True)  # nothing to do when built and current
    except TableError:
        if limit is None:  # the default table: the user's to replace (the message names --overwrite)
            raise
        build_table(split, "macro", where, limit=limit, progress=True, overwrite=True)  # this script's partial table
    return open_table(where)


def dev_score(model, X: np.ndarray, S: np.ndarray, w: np.ndarray) -> float:
    return float(w @ S[np.arange(len(S)), model.choose(X)])


def train_one(X, S, w, Xd, Sd, wd, keep, seed: int, args) -> tuple[list[float], list]:
    """Train one MLP; returns its dev curve (after each epoch) and the weights after each epoch."""
    import torch

    from fwgym.rl.router import RouterModel

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    mean, scale = X.mean(0), X.std(0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    mean, scale = np.where(keep, mean, 0.0), np.where(keep, scale, 1.0)
    Xn = torch.tensor(np.where(keep, (X - mean) / scale, 0.0), dtype=torch.float32)
    St = torch.tensor(np.minimum(S, 5.0), dtype=torch.float32)  # invalid-plan outliers do not dominate a batch
    wt = torch.tensor(w / w.mean(), dtype=torch.float32)
    d, h, k = X.shape[1], args.hidden, S.shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
                              torch.nn.Linear(h, k))
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    gen = torch.Generator().manual_seed(seed)
    curve, snaps = [], []
    for _ in range(args.epochs):
        perm = torch.randperm(len(Xn), generator=gen)
        for i in range(0, len(Xn), args.batch):
            b = perm[i: i + args.batch]
            loss = ((torch.softmax(net(Xn[b]), 1) * St[b]).sum(1) * wt[b]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        layers = [(m.weight.detach().numpy().T.astype(np.float64), m.bias.detach().numpy().astype(np.float64))
                  for m in net if isinstance(m, torch.nn.Linear)]
        # a masked input has mean 0 and scale 1 and is fed 0: its weights are zeroed, the same function
        layers[0] = (layers[0][0] * keep[:, None], layers[0][1])
        model = RouterModel(layers, mean, scale, CLASSICAL_METHODS)
        snaps.append(model)
        curve.append(dev_score(model, Xd, Sd, wd))
    return curve, snaps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="training seeds (default 0 1 2)")
    ap.add_argument("--inputs", nargs="+", choices=INPUT_SETS, default=list(INPUT_SETS), help="input sets searched on dev")
    ap.add_argument("--epochs", type=int, default=20, help="epochs per run (the curve's length; default 20)")
    ap.add_argument("--hidden", type=int, default=64, help="hidden units per layer (default 64)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--limit", type=int, default=None, help="cases per domain of the tables (default: all; partial tables)")
    ap.add_argument("--test-limit", type=int, default=None, help="test cases per domain (default: all)")
    ap.add_argument("--tables", default=None, help="directory of the outcome tables (default: the default tables)")
    ap.add_argument("--workers", type=int, default=2, help="evaluation processes")
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap draws (default 10,000)")
    ap.add_argument("--out", default="results/router", help="models and results directory")
    ap.add_argument("--dev-only", action="store_true", help="stop after the dev search (no test evaluation)")
    ap.add_argument("--quick", action="store_true", help="smoke run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    if ap.parse_args(argv).quick:
        ap.set_defaults(**QUICK)
    args = ap.parse_args(argv)

    from fwgym.agents.router import RouterAgentFactory
    from fwgym.core.scoring import case_weights
    from fwgym.evaluation import evaluate, format_leaderboard, leaderboard, paired_bootstrap, run_meta, write_results
    from fwgym.rl.router import input_names, table_inputs

    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fixed = list(CLASSICAL_METHODS)

    # 1. tables -> inputs and outcomes
    t = time.perf_counter()
    data = {}
    for split in ("train", "dev"):
        table = table_for(split, args.limit, args.tables)
        X, S, ids = table_inputs(table)
        nodes = {n.key: n for n in table.infos.nodes if len(n.path) == 1 and n.key in ("domain", "cohort", "series_id", "lead")}
        meta = [{k: table.infos.value(n, int(r)) for k, n in nodes.items()}  # the case's identity, from its first entry
                for r in table.rows_of(np.arange(len(ids)), 0)]
        w = case_weights([{**m, "case_id": c} for m, c in zip(meta, ids)])
        data[split] = (X, S, w, ids, meta)
    timings["tables"] = time.perf_counter() - t
    X, S, w, _, _ = data["train"]
    Xd, Sd, wd, dev_ids, dev_meta = data["dev"]
    names = list(input_names())
    fixed_dev = {m: float(wd @ Sd[:, j]) for j, m in enumerate(fixed)}
    best_fixed = min(fixed, key=lambda m: (fixed_dev[m], m))
    oracle_dev = float(wd @ Sd.min(1))
    print(f"train: {len(X):,} cases; dev: {len(Xd):,} cases; router inputs {len(names)}; dev S of the fixed methods: "
          + ", ".join(f"{m} {s:.4f}" for m, s in sorted(fixed_dev.items(), key=lambda kv: kv[1]))
          + f"; free-menu oracle {oracle_dev:.4f}", flush=True)

    # 2. dev search
    t = time.perf_counter()
    runs = []
    for which in args.inputs:
        keep = input_mask(names, which)
        for seed in args.seeds:
            tr = time.perf_counter()
            curve, snaps = train_one(X, S, w, Xd, Sd, wd, keep, seed, args)
            runs.append({"inputs": which, "seed": seed, "curve": curve, "snaps": snaps, "train_s": time.perf_counter() - tr})
            print(f"  {which} seed {seed}: dev S by epoch " + " ".join(f"{v:.3f}" for v in curve)
                  + f" ({runs[-1]['train_s']:.0f} s)", flush=True)
    timings["training"] = time.perf_counter() - t
    mean_curves = {which: np.mean([r["curve"] for r in runs if r["inputs"] == which], axis=0) for which in args.inputs}
    chosen_inputs, chosen_epoch = min(((which, int(np.argmin(c))) for which, c in mean_curves.items()),
                                      key=lambda k: mean_curves[k[0]][k[1]])
    print(f"\nDEV search ({len(dev_ids)} cases; best fixed policy {best_fixed} S {fixed_dev[best_fixed]:.4f}, free-menu "
          f"oracle {oracle_dev:.4f}):\n")
    print("| inputs | best epoch (mean over seeds) | mean dev S there | " + " | ".join(f"seed {s}" for s in args.seeds) + " |")
    print("|---|---:|---:|" + "---:|" * len(args.seeds))
    for which, c in mean_curves.items():
        e = int(np.argmin(c))
        mark = " **(chosen)**" if which == chosen_inputs else ""
        print(f"| {which}{mark} | {e + 1} | {c[e]:.4f} | " + " | ".join(
            f"{r['curve'][e]:.4f}" for r in runs if r["inputs"] == which) + " |")
    models = []
    for r in (r for r in runs if r["inputs"] == chosen_inputs):
        m = r["snaps"][chosen_epoch]
        m.info = {"trained_on": {"split": "train", "cases": len(X)}, "chosen_on": "dev", "inputs": chosen_inputs,
                  "epochs": chosen_epoch + 1, "seed": r["seed"], "hidden": args.hidden, "lr": args.lr,
                  "weight_decay": args.weight_decay, "batch": args.batch,
                  "dev": {"cases": len(dev_ids), "S_table": r["curve"][chosen_epoch], "best_fixed": best_fixed,
                          "best_fixed_S": fixed_dev[best_fixed], "free_menu_oracle_S": oracle_dev}}
        path = m.save(out / f"router_seed{r['seed']}.json")
        models.append((f"router_seed{r['seed']}", path, m))

    # the chosen models on dev through the one episode loop: the table's dev S, case by case
    t = time.perf_counter()
    factories = [RouterAgentFactory(model_path=str(p)) for _, p, _ in models]
    dev_limit = args.limit
    dev_records = evaluate(factories, split="dev", limit=dev_limit, workers=args.workers, progress=False)
    timings["dev_evaluate"] = time.perf_counter() - t
    dev_rows = {r["policy"]: r for r in leaderboard(dev_records)}
    worst = 0.0
    for name, path, m in models:
        table_s = dict(zip(dev_ids, Sd[np.arange(len(dev_ids)), m.choose(Xd)]))
        loop = {r["case_id"]: r["S"] for r in dev_records if r["policy"] == name}
        worst = max(worst, max(abs(table_s[c] - loop[c]) for c in loop))
        m.info["dev"]["S"] = dev_rows[name]["S"]
        m.save(path)
    print(f"\nchosen: inputs {chosen_inputs}, {chosen_epoch + 1} epochs; dev S through fwgym.evaluation.evaluate: "
          + ", ".join(f"{n} {dev_rows[n]['S']:.4f}" for n, _, _ in models)
          + f" (max |table - episode loop| per case {worst:.1e})", flush=True)
    if worst > 1e-12:
        print("WARNING: the dev table and the episode loop disagree", flush=True)
    write_results(dev_records, out / "dev", run_meta("dev", list(dev_rows), args.workers))
    if args.dev_only:
        return 0

    # 4. test, once
    t = time.perf_counter()
    records = evaluate(factories + fixed + ["free_menu_oracle"], split="test", limit=args.test_limit,
                       workers=args.workers, progress=False)
    timings["test_evaluate"] = time.perf_counter() - t
    boot_kw = {"n_boot": args.n_boot} if args.n_boot else {}
    rows = leaderboard(records, reference=best_fixed, **boot_kw)
    write_results(records, out / "test", {**run_meta("test", [r["policy"] for r in rows], args.workers),
                                          "reference_chosen_on_dev": best_fixed}, reference=best_fixed)
    row = {r["policy"]: r for r in rows}
    print(f"\nTEST split ({len({r['case_id'] for r in records})} cases), reference {best_fixed} (the best fixed "
          f"policy on DEV):\n")
    print(format_leaderboard(rows))
    summary = {"chosen": {"inputs": chosen_inputs, "epochs": chosen_epoch + 1}, "best_fixed_dev": best_fixed,
               "dev_fixed": fixed_dev, "dev_oracle": oracle_dev, "dev_curves": {f"{r['inputs']}/seed{r['seed']}": r["curve"]
                                                                                for r in runs},
               "test": {}, "timings_s": timings}
    gap = row[best_fixed]["S"] - row["free_menu_oracle"]["S"]
    print()
    for name, _, _ in models:
        b = paired_bootstrap(records, reference=best_fixed, policy=name, **boot_kw)
        closed = (row[best_fixed]["S"] - row[name]["S"]) / gap if gap > 0 else float("nan")
        cohorts = _cohort_gaps(records, name, best_fixed)
        summary["test"][name] = {"S": row[name]["S"], "diff": b["diff"], "lo": b["lo"], "hi": b["hi"],
                                 "gap_closed": closed, "cohorts": cohorts}
        verdict = "better" if b["hi"] < 0 else "worse" if b["lo"] > 0 else "not distinguishable"
        print(f"{name}: test S {row[name]['S']:.4f}; S - S[{best_fixed}] = {b['diff']:+.4f}, 95% CI [{b['lo']:+.4f}, "
              f"{b['hi']:+.4f}] ({verdict}); closes {100 * closed:.1f}% of the gap to the free-menu oracle "
              f"({row['free_menu_oracle']['S']:.4f}); per cohort: "
              + ", ".join(f"{c} {v['closed'] * 100:.0f}%" for c, v in cohorts.items()))
    timings["total"] = time.perf_counter() - t0
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    print("\nruntime: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return 0


def _cohort_gaps(records, name: str, reference: str) -> dict:
    """Per cohort: the router's, the reference's and the free-menu oracle's S, and the share of the gap closed."""
    from fwgym.core.scoring import aggregate
    from fwgym.evaluation import by_policy

    pol = by_policy(records)
    out = {}
    for cohort in sorted({r["cohort"] for r in pol[name]}):
        s = {p: aggregate([r for r in pol[p] if r["cohort"] == cohort], fields=("S",))["S"]
             for p in (name, reference, "free_menu_oracle")}
        g = s[reference] - s["free_menu_oracle"]
        out[cohort] = {"S": s[name], "reference_S": s[reference], "oracle_S": s["free_menu_oracle"],
                       "closed": (s[reference] - s[name]) / g if g > 0 else float("nan")}
    return out


if __name__ == "__main__":
    sys.exit(main())
