"""Train PPO on the TRAIN split, choose everything on the DEV split, report ONCE on the TEST split.

Run from the repository root (~17 min on a shared 2-vCPU VM with the defaults, ~13 min of CPU)::

    python examples/train_ppo.py                   # extended priced pool, 2 feature sets x 2 learning rates x 3 seeds
    python examples/train_ppo.py --pool protocol   # the protocol's pool (seasonal_empirical the only runnable priced model)
    python examples/train_ppo.py --quick           # smoke run (~30-60 s): tiny subsets, a few dev/test cases

What it does, in this order (the test split is touched in step 5 only, once):

1. **Training cases.** ``--train-cases N`` (default 1,000) train-split cases drawn without replacement with
   ``--train-seed``, half per domain (all 100 cycle-hire stations, as ``FWBench-RL-Macro-v0``). With
   ``--pool extended`` (default) the env's ``models=`` pool is :data:`fwgym.forecasters.EXTENDED_MODELS`
   (the protocol's models plus the statsmodels ``ets``, ``theta``, ``sarima``, ``mstl_ets`` at their
   measured prices), so the macro menu has 16 entries: 8 free "plan with method m and submit", and
   "buy model x, plan and submit" for seasonal_empirical, the three TSFMs (masked without weights) and
   the 4 statsmodels models (:func:`fwgym.rl.macro.menu_for`).
2. **Native vector env.** One :class:`fwgym.rl.vector.MacroVectorEnv` per feature set over those
   cases (same-step autoreset, no infos, through :class:`fwgym.rl.sb3_vec.SB3VecEnv`), with every
   (case, entry) outcome recorded up front by ``precompute()``: each is one episode of the real env
   (``MacroActionWrapper`` over ``FWBenchEnv``). A statsmodels forecast costs 5-75 ms of CPU the first
   time, so the training pool is a bounded subset; the process-wide forecast cache is enlarged so that
   the second feature set and the dev table reuse the forecasts instead of refitting them.
3. **Dev outcome table.** Every dev case is played once per menu entry through the same wrapper
   (``make_rl_env(split="dev")``): its reset observation and mask and each entry's S. A policy's dev S
   is then one batched ``predict`` and a weighted mean (:func:`fwgym.core.scoring.case_weights`), cheap
   enough to draw **learning curves** (dev S every ``--eval-every`` steps). The table is checked
   against step 4: the final point of every curve must equal that policy's dev S from
   :func:`fwgym.evaluation.evaluate`, case by case.
4. **Dev search.** PPO (stable-baselines3, hyperparameters of ``fwgym/hyperparams/ppo.yml``: rollouts of
   1,024 steps, batch 256, 10 epochs, gamma = lambda = 1, entropy 0.01, [128, 128]) for ``--steps`` steps
   per run, for each feature set (``all`` 403, ``compact`` 56) x learning rate (1e-3, 3e-4) x seed
   (0, 1, 2). A macro episode is one step, so with gamma = lambda = 1 the advantage of a step is its
   reward minus the value estimate, however the 1,024-step rollout is split over envs: ``--n-envs 64``
   x 16 steps trains like the yml's 4 x 256. Every model and every fixed policy (8 classical, and each
   priced model of the pool that runs) are played on all dev cases by
   :func:`fwgym.evaluation.evaluate`; the setting with the lowest mean dev S over seeds is chosen, and
   the fixed policy with the lowest dev S is the baseline.
5. **Test, once.** The chosen setting's models (one per seed), every fixed policy, the free-menu
   oracle and the catalog oracle over the pool are played on the test split by
   :func:`fwgym.evaluation.evaluate` (:class:`fwgym.agents.sb3.SB3Agent` factories: the raw env, the
   one episode loop). Printed: the leaderboard (intervals against the dev-chosen fixed policy), each
   seed's paired series-cluster bootstrap 95% interval of S minus the dev-chosen fixed policy's
   (:func:`fwgym.evaluation.paired_bootstrap`, 10,000 draws, seed 1701), and the purchase tables:
   per (domain, lead) and model, how often the learned policies buy, next to whether buying paid in
   hindsight on the same cases (how often the model's plan beat the best free plan of the case net of
   its price, how often the catalog oracle buys it, and the model's fixed-policy S minus the group's
   best free method's).
6. Files under ``--out`` (default ``results/rl``): the models (``ppo_<features>_lr<lr>_seed<k>.zip``,
   saved with their pool: re-evaluate one with ``evaluate([functools.partial(SB3Agent, path)], split="test",
   env_kwargs={"models": EXTENDED_MODELS})``; ``fwgym evaluate --agent sb3`` plays the protocol pool, where
   the extended entries are masked), ``dev/`` and ``test/`` results (results.jsonl, leaderboard.md/csv,
   meta.json), ``learning_curves.png`` (``--figure PATH`` writes a copy) and ``summary.json`` (every
   figure printed).

Most of the run time is the first fit of each statsmodels forecast (train pool, dev table, test
evaluation); a persisted forecast store (issue 20), once built for these cases, would turn those fits
into reads. The result, figures and run times measured on a shared 2-vCPU VM: README.md, "Results", RL.
"""
from __future__ import annotations

import argparse
import functools
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

from fwgym.domains import DOMAINS  # noqa: E402
from fwgym.forecasters.classical import CLASSICAL_METHODS  # noqa: E402
from fwgym.forecasters.registry import EXTENDED_MODELS, PRICED_MODELS  # noqa: E402

POOLS = {"extended": EXTENDED_MODELS, "protocol": None}
FEATURE_SETS = ("all", "compact")
LEARNING_RATES = (1e-3, 3e-4)
SEEDS = (0, 1, 2)
LEADS = ("day_ahead", "week_ahead")
#: the --quick settings (a smoke run of every stage, not a result)
QUICK = {"train_cases": 24, "steps": 2048, "eval_every": 1024, "seeds": [0, 1, 2], "lrs": [1e-3], "dev_limit": 5,
         "test_limit": 5, "n_boot": 200, "workers": 1}


# -- settings --------------------------------------------------------------------------------------------------


def ppo_hyperparams(env_id: str = "FWBench-RL-Macro-v0") -> dict:
    """The shipped rl_zoo3 hyperparameters of ``env_id`` (``fwgym/hyperparams/ppo.yml``) as PPO keyword
    arguments, plus ``n_envs``, ``policy`` and ``rollout`` (= ``n_envs * n_steps``, env steps per update)."""
    import yaml
    from torch import nn

    hp = dict(yaml.safe_load((ROOT / "fwgym" / "hyperparams" / "ppo.yml").read_text())[env_id])
    hp.pop("n_timesteps")
    if isinstance(hp.get("policy_kwargs"), str):  # rl_zoo3 evaluates this string the same way
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"dict": dict, "nn": nn})  # noqa: S307 - the repo's own file
    hp["rollout"] = hp["n_envs"] * hp["n_steps"]
    return hp


def trained_steps(asked: int) -> int:
    """The env steps PPO trains for ``asked`` total steps: SB3 collects whole rollouts (``n_envs * n_steps``), so
    it stops at the first multiple of the rollout at or above ``asked`` (20,000 asked = 20,480 trained)."""
    rollout = ppo_hyperparams()["rollout"]
    return -(-asked // rollout) * rollout


def train_case_ids(n: int, seed: int) -> list[str]:
    """``n`` train-split case ids drawn without replacement (``numpy.random.default_rng(seed)``), ``n // 2``
    electricity and the rest cycle hire (all stations), each domain's in split order.

    Raises:
        ValueError: ``n < 2`` or more cases than a domain's train split holds.
    """
    from fwgym.core.cases import build_cases

    if n < 2:
        raise ValueError(f"--train-cases must be >= 2 (one per domain), got {n}")
    rng = np.random.default_rng(seed)
    ids = []
    for domain, k in zip(DOMAINS, (n // 2, n - n // 2)):
        cases = build_cases(domain, "train")
        if k > len(cases):
            raise ValueError(f"{k} {domain} train cases asked, the split has {len(cases)}")
        ids += [cases[i].case_id for i in np.sort(rng.choice(len(cases), size=k, replace=False))]
    return ids


def fixed_policies(pool) -> list[str]:
    """The fixed policies that mean what their name says in an env of ``pool``: the 8 classical methods, and
    each priced model of the pool that runs here (TSFMs without weights would fall back to a free plan)."""
    from fwgym.baselines.registry import unavailable_policies

    priced = [m for m in (pool or PRICED_MODELS)]
    skipped = unavailable_policies(priced)
    return list(CLASSICAL_METHODS) + [m for m in priced if m not in skipped]


# -- the dev outcome table (learning curves) -------------------------------------------------------------------


class OutcomeTable:
    """Every (case, menu entry) outcome of a split's cases, each played once through the wrapped env
    (:func:`fwgym.rl.make_rl_env`, macro variant: ``MacroActionWrapper`` over ``FWBenchEnv``).

    Attributes:
        case_ids: the cases (``limit`` per domain, or the given ``case_ids``), in
            :func:`fwgym.evaluation.select_cases` order (n).
        menu: entry names (E). S: ``(n, E)`` float64, the case score of each entry.
        obs: ``{features: (n, d) float32}``, the observation a policy decides on (after reset + catalog).
        masks: ``(n, E)`` bool, the reset's action masks. weights: ``(n,)`` aggregation weights (sum 1).
        meta: per case ``{"case_id", "domain", "cohort", "series_id", "lead"}``.
    """

    def __init__(self, split: str, pool, features=FEATURE_SETS, limit: int | None = None, case_ids=None):
        from fwgym.evaluation import select_cases
        from fwgym.core.scoring import case_weights
        from fwgym.rl import make_rl_env

        self.split = split
        self.case_ids = [cid for _, cid in select_cases(split, limit=limit, case_ids=case_ids)]
        envs = {f: make_rl_env(split=split, models=pool, features=f) for f in features}
        first = envs[features[0]]
        self.menu = [e.name for e in first.menu]
        n, E = len(self.case_ids), len(self.menu)
        self.S = np.zeros((n, E))
        self.masks = np.zeros((n, E), dtype=bool)
        self.obs = {f: np.zeros((n, env.observation_space.shape[0]), dtype=np.float32) for f, env in envs.items()}
        self.meta = []
        for i, cid in enumerate(self.case_ids):
            for f, env in envs.items():
                self.obs[f][i] = env.reset(options={"case_id": cid})[0]
            self.masks[i] = first.action_masks()
            for e in range(E):
                if e:
                    first.reset(options={"case_id": cid})
                _, _, terminated, _, info = first.step(e)
                assert terminated and info["case_id"] == cid
                self.S[i, e] = info["S"]
            self.meta.append({k: info[k] for k in ("case_id", "domain", "cohort", "series_id", "lead")})
        self.weights = case_weights(self.meta)
        for env in envs.values():
            env.close()

    def actions(self, model, features: str, masked: bool) -> np.ndarray:
        """The deterministic menu choice of ``model`` on every case, ``(n,)`` int."""
        kw = {"action_masks": self.masks} if masked else {}
        a, _ = model.predict(self.obs[features], deterministic=True, **kw)
        return np.asarray(a, dtype=np.int64).reshape(-1)

    def score(self, actions: np.ndarray) -> float:
        """Aggregate S of choosing ``actions`` (the benchmark's weighted mean over the cases)."""
        return float(self.weights @ self.S[np.arange(len(actions)), actions])

    def fixed_scores(self, policies) -> tuple[dict, dict]:
        """``({policy: {case_id: S}}, {case_id: meta})`` of the entries that are the fixed policies
        (``plan_submit:<method>``, ``buy_plan_submit:<model>``)."""
        col = {name.split(":", 1)[1]: j for j, name in enumerate(self.menu)}
        return ({p: dict(zip(self.case_ids, self.S[:, col[p]])) for p in policies},
                {m["case_id"]: m for m in self.meta})


def rule_rows(scores: dict, meta: dict, priced: list[str]) -> list[dict]:
    """Per (domain, lead): the best free method and the best priced model as a fixed rule (group
    aggregate S with :func:`fwgym.core.scoring.case_weights` on the group's cases) and their difference.

    Args:
        scores: ``{policy: {case_id: S}}`` for the 8 classical methods and the ``priced`` models.
        meta: ``{case_id: {"domain", "cohort", "series_id", "lead", "case_id"}}``.
    """
    from fwgym.core.scoring import case_weights

    rows = []
    for domain in DOMAINS:
        for lead in LEADS:
            ids = [c for c, m in meta.items() if m["domain"] == domain and m["lead"] == lead]
            if not ids:
                continue
            w = case_weights([meta[c] for c in ids])
            agg = {p: float(w @ np.array([scores[p][c] for c in ids])) for p in scores}
            free = min(CLASSICAL_METHODS, key=lambda m: (agg[m], m))
            paid = min(priced, key=lambda m: (agg[m], m)) if priced else None
            rows.append({"domain": domain, "lead": lead, "cases": len(ids), "best_free": free, "best_free_S": agg[free],
                         "best_priced": paid, "best_priced_S": agg[paid] if paid else None,
                         "dS": agg[paid] - agg[free] if paid else None})
    return rows


def format_rules(rules: dict[str, list[dict]]) -> str:
    labels = list(rules)
    lines = ["| domain | lead | " + " | ".join(f"{k}: best free method, best priced model, priced - free" for k in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    keyed = {k: {(r["domain"], r["lead"]): r for r in rows} for k, rows in rules.items()}
    for domain in DOMAINS:
        for lead in LEADS:
            cells = []
            for k in labels:
                r = keyed[k].get((domain, lead))
                cells.append("-" if r is None else (f"{r['best_free']} {r['best_free_S']:.4f}, " + (
                    f"{r['best_priced']} {r['best_priced_S']:.4f}, **{r['dS']:+.4f}**" if r["best_priced"] else "-")))
            lines.append(f"| {domain} | {lead} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _curve_callback(table: OutcomeTable, features: str, every: int, masked: bool):
    from stable_baselines3.common.callbacks import BaseCallback

    class DevCurve(BaseCallback):
        """Dev S of the deterministic policy after every ``every`` steps of updates: taken at the start of
        a rollout (the policy of all updates so far; steps counted so far) and after the last update."""

        def __init__(self):
            super().__init__()
            self.points: list[tuple[int, float]] = []
            self._next = 0

        def _point(self):
            if self.points and self.points[-1][0] == self.num_timesteps:
                self.points.pop()
            self.points.append((int(self.num_timesteps), table.score(table.actions(self.model, features, masked))))

        def _on_rollout_start(self):
            if self.num_timesteps >= self._next:
                self._point()
                self._next = self.num_timesteps + every

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self):
            self._point()

    return DevCurve()


# -- training --------------------------------------------------------------------------------------------------


def make_train_venv(case_ids, features: str, pool, n_envs: int):
    """The native macro vector env over ``case_ids`` with every (case, entry) outcome recorded (returns
    ``(venv, seconds spent recording)``)."""
    from fwgym.rl.vector import MacroVectorEnv

    venv = MacroVectorEnv(num_envs=n_envs, autoreset_mode="same_step", infos=False, split="train",
                          features=features, models=pool, case_ids=case_ids)
    t = time.perf_counter()
    venv.precompute(case_ids)
    return venv, time.perf_counter() - t


def train(venv, features: str, lr: float, seed: int, args, table: OutcomeTable, out: Path, pool) -> dict:
    """Train one PPO/MaskablePPO run; returns ``{"path", "curve", "train_s", ...}``."""
    import torch
    from stable_baselines3.common.vec_env import VecMonitor

    from fwgym.agents.sb3 import save_policy
    from fwgym.rl.sb3_vec import SB3VecEnv

    torch.set_num_threads(1)
    if args.algo == "MaskablePPO":
        from sb3_contrib import MaskablePPO as Algo
    else:
        from stable_baselines3 import PPO as Algo
    hp = ppo_hyperparams()
    rollout, policy = hp.pop("rollout"), hp.pop("policy")
    hp.pop("n_envs")
    hp.update(n_steps=max(1, rollout // venv.num_envs), learning_rate=lr)
    model = Algo(policy, VecMonitor(SB3VecEnv(venv)), seed=seed, device="cpu", verbose=0, **hp)
    curve = _curve_callback(table, features, args.eval_every, masked=args.algo == "MaskablePPO")
    t = time.perf_counter()
    model.learn(total_timesteps=args.steps, callback=curve, progress_bar=False)
    secs = time.perf_counter() - t
    name = f"{args.algo.lower()}_{features}_lr{lr:g}_seed{seed}"
    path = save_policy(model, out / name, "macro", features, models=pool)
    final_actions = table.actions(model, features, masked=args.algo == "MaskablePPO")
    return {"name": name, "path": str(path), "features": features, "lr": lr, "seed": seed, "train_s": secs,
            "steps": int(model.num_timesteps), "curve": curve.points, "dev_actions": final_actions}


# -- purchases -------------------------------------------------------------------------------------------------


def _bought(record: dict) -> list[str]:
    return sorted({v["model"] for v in (record.get("forecast_crps") or {}).values()})


def purchase_tables(records: list[dict], learned: list[str], oracle: str, priced: list[str]) -> dict:
    """Per (domain, lead) and per priced model: how often the learned policies buy it, and whether buying it
    paid in hindsight on the same cases.

    For a case, "paid" means the fixed policy of that model (its covering forecast, the plan on it, its
    price) scored a lower S than every fixed free method on that case. ``dS_vs_best_free`` is the group
    aggregate S of the model's fixed policy minus that of the group's best free method (the best single
    rule for a policy that knows domain and lead; negative = buying pays as a rule).

    Returns:
        ``{"groups": [...], "models": [...]}`` (one dict per row, the printed columns).
    """
    from fwgym.evaluation import by_policy
    from fwgym.core.scoring import aggregate

    pol = {p: {r["case_id"]: r for r in recs} for p, recs in by_policy(records).items()}
    free = [m for m in CLASSICAL_METHODS if m in pol]
    priced = [m for m in priced if m in pol]
    groups, models = [], []
    for domain in DOMAINS:
        for lead in LEADS:
            ids = [c for c, r in pol[free[0]].items() if r["domain"] == domain and r["lead"] == lead]
            if not ids:
                continue
            agg = {p: aggregate([pol[p][c] for c in ids], fields=("S",))["S"] for p in free + priced}
            best_free = min(free, key=lambda m: (agg[m], m))
            best_priced = min(priced, key=lambda m: (agg[m], m)) if priced else None
            free_min = {c: min(pol[m][c]["S"] for m in free) for c in ids}
            buys = {p: [_bought(pol[p][c]) for c in ids] for p in learned}

            def rate(p, m=None, buys=buys):
                return float(np.mean([bool(b) if m is None else m in b for b in buys[p]]))

            paid_when_bought = [pol[p][c]["S"] - pol[best_free][c]["S"] for p in learned for c in ids if _bought(pol[p][c])]
            orc = [_bought(pol[oracle][c]) for c in ids]
            groups.append({
                "domain": domain, "lead": lead, "cases": len(ids),
                "learned_buy_rate": [rate(p) for p in learned],
                "learned_models": sorted({m for p in learned for b in buys[p] for m in b}),
                "oracle_buy_rate": float(np.mean([bool(b) for b in orc])),
                "best_free": best_free, "best_free_S": agg[best_free],
                "best_priced": best_priced, "best_priced_S": agg[best_priced] if best_priced else None,
                "dS_best_priced_vs_best_free": (agg[best_priced] - agg[best_free]) if best_priced else None,
                "bought_episodes": len(paid_when_bought),
                "mean_dS_bought_vs_best_free": float(np.mean(paid_when_bought)) if paid_when_bought else None,
            })
            for m in priced:
                models.append({
                    "domain": domain, "lead": lead, "model": m, "cases": len(ids),
                    "learned_buy_rate": [rate(p, m) for p in learned],
                    "paid_rate": float(np.mean([pol[m][c]["S"] < free_min[c] for c in ids])),
                    "oracle_pick_rate": float(np.mean([m in b for b in orc])),
                    "mean_credits": float(np.mean([pol[m][c]["credits"] for c in ids])),
                    "dS_vs_best_free": agg[m] - agg[best_free],
                })
    return {"groups": groups, "models": models}


def _rates(values: list[float]) -> str:
    pct = [100 * v for v in values]
    if len(pct) == 1:
        return f"{pct[0]:.1f}%"
    return f"{np.mean(pct):.1f}% ({', '.join(f'{v:.0f}' for v in pct)})"


def format_purchases(tables: dict) -> str:
    lines = [("| domain | lead | cases | learned: episodes buying, mean (per seed) | models bought | catalog oracle buys "
              "| best free method (group S) | best priced model (group S) | priced - free | S(bought) - S(best free), "
              "mean over bought episodes |"), "|---|---|---:|---:|---|---:|---|---|---:|---:|"]
    for g in tables["groups"]:
        bp = f"{g['best_priced']} ({g['best_priced_S']:.4f})" if g["best_priced"] else "-"
        d = f"{g['dS_best_priced_vs_best_free']:+.4f}" if g["best_priced"] else "-"
        m = f"{g['mean_dS_bought_vs_best_free']:+.4f} (n={g['bought_episodes']})" if g["bought_episodes"] else "-"
        lines.append(f"| {g['domain']} | {g['lead']} | {g['cases']} | {_rates(g['learned_buy_rate'])} | "
                     f"{', '.join(g['learned_models']) or 'none'} | {100 * g['oracle_buy_rate']:.1f}% | "
                     f"{g['best_free']} ({g['best_free_S']:.4f}) | {bp} | {d} | {m} |")
    lines += ["", ("| domain | lead | model | credits | learned buys it (mean, per seed) | its plan beat every free plan "
                   "net of price (cases) | catalog oracle picks it | fixed S - best free method's S (group) |"),
              "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in tables["models"]:
        lines.append(f"| {r['domain']} | {r['lead']} | {r['model']} | {r['mean_credits']:,.0f} | "
                     f"{_rates(r['learned_buy_rate'])} | {100 * r['paid_rate']:.1f}% | {100 * r['oracle_pick_rate']:.1f}% | "
                     f"{r['dS_vs_best_free']:+.4f} |")
    return "\n".join(lines)


# -- figure ----------------------------------------------------------------------------------------------------


def plot_curves(runs: list[dict], baseline: tuple[str, float], chosen: tuple, path: Path, style: str = "paper") -> Path:
    """Dev S against training steps, one panel per (features, learning rate), one line per seed; the
    dev-chosen fixed policy's dev S as a dashed line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from fwgym.plots import figure_style, figure_width, save_figure

    settings = sorted({(r["features"], r["lr"]) for r in runs}, key=lambda k: (FEATURE_SETS.index(k[0]), -k[1]))
    with figure_style(style):
        fig = Figure(figsize=(figure_width(style, 2), 2.3), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(settings), sharey=True, squeeze=False)[0]
        for ax, (feat, lr) in zip(axes, settings):
            for r in (r for r in runs if (r["features"], r["lr"]) == (feat, lr)):
                x, y = zip(*r["curve"])
                ax.plot(np.asarray(x) / 1000, y, lw=1.0, label=f"seed {r['seed']}")
            ax.axhline(baseline[1], color="0.3", ls="--", lw=0.8, label=f"{baseline[0]} (fixed)")
            mark = " (chosen)" if (feat, lr) == chosen else ""
            ax.set_title(f"{feat} features, lr {lr:g}{mark}")
            ax.set_xlabel("training steps (thousands)")
            ax.grid(alpha=0.3, lw=0.5)
        axes[0].set_ylabel("dev S (lower is better)")
        axes[-1].legend(loc="upper right", frameon=False)
    return save_figure(fig, path, style)


# -- main ------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", choices=list(POOLS), default="extended",
                    help="priced pool: extended (+ ets, theta, sarima, mstl_ets; default) or protocol")
    ap.add_argument("--algo", choices=["PPO", "MaskablePPO"], default="PPO")
    ap.add_argument("--features", nargs="+", choices=list(FEATURE_SETS), default=list(FEATURE_SETS),
                    help="feature sets searched on dev (default: all compact)")
    ap.add_argument("--lrs", nargs="+", type=float, default=list(LEARNING_RATES), help="learning rates searched on dev")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="training seeds (>= 3 for the report)")
    ap.add_argument("--steps", type=int, default=20_000, help="env steps (= episodes) per run (default 20000)")
    ap.add_argument("--train-cases", type=int, default=1000, help="train cases in the training pool (default 1000)")
    ap.add_argument("--train-seed", type=int, default=0, help="seed of the training-pool draw")
    ap.add_argument("--n-envs", type=int, default=64, help="sub-envs of the native vector env (default 64)")
    ap.add_argument("--eval-every", type=int, default=1024, help="learning-curve point every N steps")
    ap.add_argument("--dev-limit", type=int, default=None, help="dev cases per domain (default: all)")
    ap.add_argument("--test-limit", type=int, default=None, help="test cases per domain (default: all)")
    ap.add_argument("--workers", type=int, default=2, help="evaluation processes (default 2)")
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap draws (default: the library's, 10,000)")
    ap.add_argument("--out", default="results/rl", help="models and results directory")
    ap.add_argument("--figure", default=None, help="also write the learning curves here (.png/.pdf/.svg)")
    ap.add_argument("--quick", action="store_true", help="smoke run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    return ap


def print_search_table(runs: list[dict], settings: list[tuple], mean_dev: dict, chosen: tuple, seeds: list[int]) -> None:
    """The dev search as a Markdown table: one row per (features, learning rate) setting, the dev S of each seed,
    their mean (the chosen setting marked) and each seed's share of dev episodes that buy."""
    print("| features | learning rate | " + " | ".join(f"seed {s}" for s in seeds)
          + " | mean dev S | dev episodes buying (per seed) |")
    print("|---|---:|" + "---:|" * len(seeds) + "---:|---|")
    for k in settings:
        rs = [r for r in runs if (r["features"], r["lr"]) == k]
        mark = " **(chosen)**" if k == chosen else ""
        buys = ", ".join(f"{100 * r['dev_buy_rate']:.1f}%" for r in rs)
        print(f"| {k[0]} | {k[1]:g} | " + " | ".join(f"{r['dev_S']:.4f}" for r in rs)
              + f" | {mean_dev[k]:.4f}{mark} | {buys} |")


def dev_choices(actions, table) -> dict[str, dict[str, float]]:
    """``{"<domain>|<lead>": {menu choice: share of the group's dev cases}}`` of one policy's dev ``actions`` (menu
    indices, one per case of ``table``), groups in (domain, lead) order, empty groups left out."""
    out = {}
    for domain in DOMAINS:
        for lead in LEADS:
            idx = [i for i, m in enumerate(table.meta) if m["domain"] == domain and m["lead"] == lead]
            if not idx:
                continue
            counts = defaultdict(int)
            for i in idx:
                counts[table.menu[actions[i]].split(":", 1)[1]] += 1
            out[f"{domain}|{lead}"] = {k: v / len(idx) for k, v in counts.items()}
    return out


def main(argv=None) -> int:
    ap = _parser()
    if ap.parse_args(argv).quick:  # the quick settings become the defaults; explicit options still win
        ap.set_defaults(**QUICK)
    args = ap.parse_args(argv)

    from fwgym.agents.sb3 import SB3Agent
    from fwgym.evaluation import (by_policy, evaluate, format_leaderboard, leaderboard, paired_bootstrap, run_meta,
                                  write_results)
    from fwgym.forecasters.cache import FORECAST_CACHE

    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    pool = POOLS[args.pool]
    env_kwargs = {"models": pool} if pool else None
    oracle = "catalog_oracle_extended" if args.pool == "extended" else "catalog_oracle"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # keep every forecast of the run in memory (train pool + dev: ~10k forecasts, ~100 MB), so nothing is refitted
    FORECAST_CACHE.max_bytes = max(FORECAST_CACHE.max_bytes, 512 << 20)
    FORECAST_CACHE.max_items = max(FORECAST_CACHE.max_items, 100_000)
    fixed = fixed_policies(pool)
    priced = [p for p in fixed if p not in CLASSICAL_METHODS]
    print(f"pool: {args.pool} (priced models that run here: {', '.join(priced)}); algorithm {args.algo}; "
          f"search {args.features} x lr {args.lrs} x seeds {args.seeds}, {trained_steps(args.steps):,} steps each "
          f"({args.steps:,} asked; PPO trains whole rollouts of {ppo_hyperparams()['rollout']:,} steps)", flush=True)

    # 1-2. training pool and native vector envs (outcomes recorded through the real env)
    t = time.perf_counter()
    ids = train_case_ids(args.train_cases, args.train_seed)
    venvs, record_s = {}, {}
    for f in args.features:
        venvs[f], record_s[f] = make_train_venv(ids, f, pool, args.n_envs)
    timings["train_pool"] = time.perf_counter() - t
    n_entries = len(venvs[args.features[0]].menu)
    print(f"training pool: {len(ids)} train cases x {n_entries} menu entries recorded through the real env "
          f"({', '.join(f'{f}: {s:.0f} s' for f, s in record_s.items())})", flush=True)

    t = time.perf_counter()
    train_table = OutcomeTable("train", pool, ("compact",), case_ids=ids)  # the same outcomes, read out (cached forecasts)
    rules = {"training pool": rule_rows(*train_table.fixed_scores(fixed), priced)}
    timings["train_table"] = time.perf_counter() - t

    # 3. dev outcome table
    t = time.perf_counter()
    table = OutcomeTable("dev", pool, tuple(args.features), limit=args.dev_limit)
    timings["dev_table"] = time.perf_counter() - t
    print(f"dev table: {len(table.case_ids)} dev cases x {len(table.menu)} entries in {timings['dev_table']:.0f} s", flush=True)

    # 4. dev search
    t = time.perf_counter()
    runs = []
    for f in args.features:
        for lr in args.lrs:
            for seed in args.seeds:
                r = train(venvs[f], f, lr, seed, args, table, out, pool)
                runs.append(r)
                print(f"  trained {r['name']}: {r['steps']} steps in {r['train_s']:.0f} s "
                      f"({r['steps'] / r['train_s']:.0f} steps/s), dev S {r['curve'][0][1]:.4f} -> {r['curve'][-1][1]:.4f}",
                      flush=True)
    for v in venvs.values():
        v.close()
    timings["training"] = time.perf_counter() - t

    t = time.perf_counter()
    factories = [functools.partial(SB3Agent, r["path"]) for r in runs]
    dev_records = evaluate(factories + fixed + ["free_menu_oracle", oracle], split="dev", limit=args.dev_limit,
                           workers=args.workers, progress=False, env_kwargs=env_kwargs)
    timings["dev_evaluate"] = time.perf_counter() - t
    dev_rows = {r["policy"]: r for r in leaderboard(dev_records)}
    # the learning curves' table against the one episode loop: every case's S must be the same
    by_case = defaultdict(dict)
    for rec in dev_records:
        by_case[rec["policy"]][rec["case_id"]] = rec["S"]
    for r in runs:
        table_s = table.S[np.arange(len(table.case_ids)), r["dev_actions"]]
        loop_s = np.array([by_case[r["name"]][c] for c in table.case_ids])
        r["curve_check_max_abs"] = float(np.max(np.abs(table_s - loop_s)))
        r["dev_S"] = dev_rows[r["name"]]["S"]
        r["curve_end_minus_dev_S"] = r["curve"][-1][1] - r["dev_S"]  # the curve's last point is the final model
        r["dev_buy_rate"] = float(np.mean([bool(_bought(rec)) for rec in dev_records if rec["policy"] == r["name"]]))
    worst = max(max(r["curve_check_max_abs"], abs(r["curve_end_minus_dev_S"])) for r in runs)
    best_fixed = min(fixed, key=lambda p: (dev_rows[p]["S"], p))
    rules["dev"] = rule_rows(*table.fixed_scores(fixed), priced)
    settings = sorted({(r["features"], r["lr"]) for r in runs}, key=lambda k: (args.features.index(k[0]), -k[1]))
    mean_dev = {k: float(np.mean([r["dev_S"] for r in runs if (r["features"], r["lr"]) == k])) for k in settings}
    chosen = min(settings, key=lambda k: (mean_dev[k], settings.index(k)))
    print(f"\nDEV split ({len(table.case_ids)} cases): search table (PPO trained on {len(ids)} train cases, "
          f"{trained_steps(args.steps):,} steps per run)\n")
    print_search_table(runs, settings, mean_dev, chosen, args.seeds)
    print("\nfixed policies on dev: " + ", ".join(f"{p} {dev_rows[p]['S']:.4f}" for p in sorted(fixed, key=lambda p: dev_rows[p]["S"]))
          + f"; free_menu_oracle {dev_rows['free_menu_oracle']['S']:.4f}, {oracle} {dev_rows[oracle]['S']:.4f}")
    print(f"dev-chosen: {chosen[0]} features, learning rate {chosen[1]:g}; best fixed policy on dev: {best_fixed} "
          f"(S {dev_rows[best_fixed]['S']:.4f})")
    print(f"learning-curve table vs fwgym.evaluation.evaluate on dev: max |S difference| {worst:.1e} (per case and "
          f"aggregate, {len(runs)} final policies x {len(table.case_ids)} cases)", flush=True)
    print("\nwhat the chosen setting's policies choose on dev (share of each (domain, lead) group's cases):")
    choices = {}
    for r in (r for r in runs if (r["features"], r["lr"]) == chosen):
        shares = dev_choices(r["dev_actions"], table)
        choices.update({f"{r['name']}|{group}": share for group, share in shares.items()})
        print(f"  {r['name']}: " + "; ".join(
            f"{group.replace('|', ' ')}: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in
                                                    sorted(share.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
            for group, share in shares.items()))
    if worst > 1e-9:
        print("WARNING: the learning curves' dev table and the episode loop disagree; the curves are not exact "
              "(the reported dev S values above are the loop's)", flush=True)
    write_results(dev_records, out / "dev", {**run_meta("dev", list(dev_rows), args.workers),
                                             "pool": args.pool}, reference=best_fixed)
    fig = plot_curves(runs, (best_fixed, dev_rows[best_fixed]["S"]), chosen, out / "learning_curves.png")
    if args.figure:
        plot_curves(runs, (best_fixed, dev_rows[best_fixed]["S"]), chosen, Path(args.figure))

    # 5. test, once
    final = [r for r in runs if (r["features"], r["lr"]) == chosen]
    names = [r["name"] for r in final]
    t = time.perf_counter()
    test_policies = [functools.partial(SB3Agent, r["path"]) for r in final] + fixed + ["free_menu_oracle", oracle]
    records = evaluate(test_policies, split="test", limit=args.test_limit, workers=args.workers, progress=False,
                       env_kwargs=env_kwargs)
    timings["test_evaluate"] = time.perf_counter() - t
    boot_kw = {"n_boot": args.n_boot} if args.n_boot else {}
    rows = leaderboard(records, reference=best_fixed, **boot_kw)
    labels = names + fixed + ["free_menu_oracle", oracle]
    meta = {**run_meta("test", labels, args.workers), "pool": args.pool, "train_cases": len(ids),
            "train_seed": args.train_seed, "steps": trained_steps(args.steps), "steps_asked": args.steps, "chosen_on_dev": {"features": chosen[0], "lr": chosen[1]},
            "reference_chosen_on_dev": best_fixed}
    paths = write_results(records, out / "test", meta, reference=best_fixed)
    n_cases = len({r["case_id"] for r in records})
    print(f"\nTEST split, {n_cases} cases ({len(records)} episodes, {timings['test_evaluate']:.0f} s); reference = "
          f"{best_fixed}, the best fixed policy on DEV\n")
    print(format_leaderboard(rows))
    row_of = {r["policy"]: r for r in rows}
    boots = []
    print()
    for name in names:
        b = paired_bootstrap(records, reference=best_fixed, policy=name, **boot_kw)
        boots.append(b)
        verdict = "better" if b["hi"] < 0 else "worse" if b["lo"] > 0 else "not distinguishable"
        print(f"{name}: test S {row_of[name]['S']:.4f}; S - S[{best_fixed}] = {b['diff']:+.4f}, 95% CI "
              f"[{b['lo']:+.4f}, {b['hi']:+.4f}] ({verdict}; paired series-cluster bootstrap, {b['n_boot']} draws)")
    tables = purchase_tables(records, names, oracle, priced)
    test_pol = {p: {r["case_id"]: r for r in recs} for p, recs in by_policy(records).items()}
    rules["test"] = rule_rows({p: {c: r["S"] for c, r in test_pol[p].items()} for p in fixed},
                              {c: r for c, r in test_pol[fixed[0]].items()}, priced)
    print("\nDoes buying pay as a (domain, lead) rule? Group S of the best free method and of the best priced model "
          "(fixed policies, net of price; negative = buying pays):\n")
    print(format_rules(rules))
    print("\nPurchases on the test cases (learned = the dev-chosen setting's seeds; hindsight columns from the fixed "
          "policies and the catalog oracle on the same cases):\n")
    print(format_purchases(tables))
    total = time.perf_counter() - t_all
    timings["total"] = total
    summary = {"args": {k: v for k, v in vars(args).items()}, "pool": args.pool, "train_cases": len(ids),
               "dev_cases": len(table.case_ids), "test_cases": n_cases, "chosen": {"features": chosen[0], "lr": chosen[1]},
               "best_fixed_dev": {"policy": best_fixed, "S": dev_rows[best_fixed]["S"]},
               "dev_fixed": {p: dev_rows[p]["S"] for p in fixed}, "dev_oracles": {p: dev_rows[p]["S"] for p in ("free_menu_oracle", oracle)},
               "dev_search": [{k: r[k] for k in ("name", "features", "lr", "seed", "dev_S", "dev_buy_rate", "train_s",
                                                 "steps", "curve", "curve_check_max_abs", "curve_end_minus_dev_S")} for r in runs],
               "test": {r["policy"]: {k: r[k] for k in ("S", "R", "loss", "credits", "valid", "n")} for r in rows},
               "bootstrap": boots, "purchases": tables, "rules": rules, "dev_choices": choices,
               "timings_s": timings}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    print(f"\nresults: {paths['results']}, {paths['markdown']}; curves: {fig}; summary: {out / 'summary.json'}")
    print("runtime: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
