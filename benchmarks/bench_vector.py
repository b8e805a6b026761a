"""The default RL recipe's speed: the native macro vector env on the train split's outcome table next to Gymnasium's
CartPoleVectorEnv, and PPO (SB3) on it next to PPO on CartPole with the same settings; the sequential variant.

Run from the repository root (the train table first: ``fwgym rl build --split train --workers 2``, 6-9 min on 2 cores, 934 MB)::

    python benchmarks/bench_vector.py            # ~5 min on 2 cores
    python benchmarks/bench_vector.py --quick    # smoke test (~1.5 min; quick figures are not the targets')

Measured in one process, every ratio from chunks interleaved in the same run (``--rounds`` rounds; the minima of
the chunks are the quiet-machine costs on this shared VM, their ratio is the figure, the median of the per-round
ratios beside it):

* **steady state** (the targets' figure): ``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)`` with the id's
  settings (train split, next-step autoreset, full infos, equal to SyncVectorEnv's), reading the default train
  table, next to ``CartPoleVectorEnv(num_envs=N)``, N = 64 and 1024, random actions; the same with
  ``infos=False``; and with same-step autoreset (what SB3 needs); and the *floor* (:class:`ContractFloor`): only
  the memory work any env returning SyncVectorEnv's results from this table must do, with none of the bookkeeping
  of a general info batch (if it is below CartPoleVectorEnv, no implementation over these stored outcomes meets
  the target on this machine);
* **without a table** (``outcome_table=False``): the native env recording outcomes from the real env on first use
  (nearly every step a first visit on the 140k-case pool);
* **PPO** (stable-baselines3, the README recipe: ``PPO("MlpPolicy", VecMonitor(SB3VecEnv(gym.make_vec(ID,
  num_envs=64, autoreset_mode=SAME_STEP))))`` with ``fwgym/hyperparams/ppo.yml``'s settings, 1,024 steps per
  rollout, one torch thread) next to the same PPO on ``make_vec_env("CartPole-v1", n_envs=64)``, rollout+update
  chunks alternated;
* **sequential** (``FWBench-RL-Sequential-v0``, SyncVectorEnv of 16 envs, random allowed entries; PPO as above on
  it): on a partial sequential table of the train split (built here if absent, ``--seq-limit`` cases per domain;
  the pool restricted to its cases) and on the env itself.
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
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import fwgym  # noqa: E402,F401

ID, SEQ = "FWBench-RL-Macro-v0", "FWBench-RL-Sequential-v0"


def chunk(venv, actions: np.ndarray, k0: int, steps: int) -> float:
    """Seconds per vector step over ``steps`` steps of pre-drawn actions (starting at row ``k0``)."""
    n = len(actions)
    t = time.perf_counter()
    for j in range(steps):
        venv.step(actions[(k0 + j) % n])
    return (time.perf_counter() - t) / steps


def interleaved(envs: list, actions: list, steps: int, rounds: int) -> list[tuple[float, list[float]]]:
    """Alternate ``steps``-step chunks of each env of ``envs`` (the last is the reference), ``rounds`` times; returns
    per env (minimum s/step, sorted per-round ratios reference / env)."""
    times = [[] for _ in envs]
    for r in range(rounds):
        for k in (len(envs) - 1, *range(len(envs) - 1)):
            times[k].append(chunk(envs[k], actions[k], r * steps, steps))
    ref = times[-1]
    return [(min(t), sorted(y / x for x, y in zip(t, ref))) for t in times]


class ContractFloor:
    """The floor of SyncVectorEnv's contract served from stored outcomes: per step pair (a terminal step, then the
    next-step autoreset of every env) only the memory work any such env must do, on ``venv``'s own table (its arrays,
    its info pool), with none of the bookkeeping of a general info batch.

    Reset step: the new cases' observations, one gather of ``num_envs`` random rows of the (cases, 403) float32
    reset-observation table into a new array; the reset info's object leaves (case id, domain, cohort, series, lead:
    one ``take`` from the pool; their codes pre-gathered per case, as if stored beside the observations), a fresh
    mask per key, one dict. Terminal step: the terminal observations (a fresh copy of the reset block: only the
    per-entry features differ), one gather of each env's packed outcome record (rewards, terminations, every info
    value), fresh reward / termination / truncation arrays, one fresh array per typed info leaf (a transposed copy
    per dtype group), one ``take`` of the immutable object leaves (strings), fresh lists of the mutable ones (the
    ``levels`` lists, rebuilt from their numbers: ``tolist`` of a float block, not copies of pool lists scattered in
    memory; the numbers counted as gathered with the record), one fresh array per ndarray leaf (the action mask), a fresh mask per key and the nested dicts
    SyncVectorEnv returns (the env's batch's keys).

    Necessary work it skips (a floor may): an array for each constant leaf (``split``, ``scenario`` ...: 15 of the
    terminal batch); the reset info's typed leaves and action mask, and the read of the reset rows' records (the reset
    codes come from a small cached table); writing the per-entry features into the terminal observations; the masks'
    pattern lookup (all ones here); the gather of the ``levels`` numbers (made once, in the constructor). The row sets
    are 64 pre-drawn ones (2,048 measured the same).
    """

    def __init__(self, venv, seed: int = 0):
        from fwgym.rl.infos import record_part

        out = venv._out
        st = out.infos
        self.part = record_part
        self.num_envs = n = venv.num_envs
        self.reset_obs, self.record, self.pool, self.pool_kind = out._reset_obs, out.record, st._pool, st._pool_kind
        self.fields = out._fields
        self.typed = [v for k, v in st._slices.items() if k.startswith("table:") and k != "table:codes"]
        self.codes = st._slices["table:codes"]
        self.arrays = [v for k, v in st._slices.items() if k.startswith("array:")]
        cases = self.reset_obs.shape[0]
        stride = out.stride
        rng = np.random.default_rng(seed)
        self.slots = rng.integers(0, cases, (64, n))
        self.rows = 1 + self.slots * stride + rng.integers(0, stride - 1, (64, n))
        reset_rows = 1 + np.arange(cases) * stride + stride - 1
        reset_codes = record_part(self.record[reset_rows[: min(cases, 4096)]], self.codes)
        self.reset_cols = np.flatnonzero((reset_codes != 0).any(axis=0))  # the reset info's object leaves
        self.reset_codes = np.ascontiguousarray(reset_codes[:, self.reset_cols])
        # the object leaves with mutable values (the levels lists): stored as numbers here, rebuilt as fresh lists
        # (cheaper than copying pool lists scattered in memory); the per-row numbers of the drawn rows pre-gathered
        row_codes = record_part(self.record[self.rows.reshape(-1)], self.codes)
        mutable = (st._pool_kind[row_codes] == 1).any(axis=0)
        self.immutable = np.flatnonzero(~mutable)
        self.lists = []
        for c in np.flatnonzero(mutable):
            values = st._pool[row_codes[:, c]]
            width = max(len(v) for v in values if v is not None)
            has = np.array([v is not None for v in values]).reshape(64, n)  # None stays None (no list to make)
            nums = np.array([v if v is not None and len(v) == width else [np.nan] * width for v in values], dtype=np.float64)
            self.lists.append([(np.flatnonzero(h), x[h]) for h, x in zip(has, nums.reshape(64, n, width))])
        self._plan(venv._out.infos.batch(self.rows[0]))  # the batch's shape: its dicts and keys
        self.k, self.block = 0, None

    @staticmethod
    def _tree_keys(info: dict, path=()) -> list:
        keys = [k for k in info if not k.startswith("_")]
        out = [(path, keys)]
        for k in keys:
            if isinstance(info[k], dict):
                out += ContractFloor._tree_keys(info[k], path + (k,))
        return out

    def _plan(self, sample: dict) -> None:
        """Per dict of the batch (deepest first): its value keys, mask keys and child dicts; the leaves take
        consecutive values of one flat list (which value goes where does not change the cost)."""
        self.plan, pos, mpos = [], 0, 0
        for path, keys in reversed(self._tree_keys(sample)):
            node = sample
            for k in path:
                node = node[k]
            leaves = [k for k in keys if not isinstance(node[k], dict)]
            kids = [k for k in keys if isinstance(node[k], dict)]
            self.plan.append((path, leaves, pos, pos + len(leaves), ["_" + k for k in keys], mpos, mpos + len(keys), kids))
            pos, mpos = pos + len(leaves), mpos + len(keys)
        self.n_leaves, self.n_masks = pos, mpos

    def _dicts(self, values: list, masks: list) -> dict:
        values = values + [None] * (self.n_leaves - len(values))
        built: dict = {}
        for path, leaves, a, b, mkeys, ma, mb, kids in self.plan:
            d = dict(zip(leaves, values[a:b]))
            for k in kids:
                d[k] = built.pop(path + (k,))
            d.update(zip(mkeys, masks[ma:mb]))
            built[path] = d
        return built[()]

    def _fresh_lists(self, where: np.ndarray, numbers: np.ndarray) -> np.ndarray:
        """``(num_envs,)`` object: fresh lists of Python floats from ``numbers`` (m, width) at envs ``where``, None
        elsewhere."""
        lists = np.empty(len(numbers), dtype=object)
        lists[:] = numbers.tolist()
        out = np.full(self.num_envs, None, dtype=object)
        out[where] = lists
        return out

    def step(self, actions):
        n, self.k = self.num_envs, (self.k + 1) % 128
        i = self.k // 2
        if self.k % 2:  # the reset step of every env
            slots = self.slots[i]
            obs = self.block = self.reset_obs[slots]
            vals = list(self.pool.take(self.reset_codes[slots % len(self.reset_codes)].T))
            info = dict(zip(range(len(vals)), vals))
            info.update(zip(range(-1, -len(vals) - 1, -1), np.ones((len(vals), n), dtype=bool)))
            return obs, np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), info
        obs = self.block.copy() if self.block is not None else self.reset_obs[self.slots[i]]
        block = self.record[self.rows[i]]
        reward = self.part(block, self.fields["reward"]).copy()
        term = self.part(block, self.fields["terminated"]).copy()
        trunc = self.part(block, self.fields["truncated"]).copy()
        vals: list = []
        for t in self.typed:
            vals += list(self.part(block, t).T.copy())
        codes = self.part(block, self.codes).T
        objs = self.pool.take(codes[self.immutable])
        vals += list(objs)
        vals += [self._fresh_lists(*leaf[i]) for leaf in self.lists]
        vals += [self.part(block, a).copy() for a in self.arrays]
        return obs, reward, term, trunc, self._dicts(vals, list(np.ones((self.n_masks, n), dtype=bool)))


def ppo_hyperparams(n_envs: int) -> dict:
    """``fwgym/hyperparams/ppo.yml``'s PPO settings for the macro id, its rollout spread over ``n_envs`` envs."""
    import yaml

    hp = dict(yaml.safe_load((ROOT / "fwgym" / "hyperparams" / "ppo.yml").read_text())[ID])
    rollout = hp.pop("n_envs") * hp.pop("n_steps")
    hp.pop("n_timesteps")
    hp.pop("policy")
    hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"dict": dict})  # noqa: S307 - the repo's own file, as rl_zoo3 does
    return {**hp, "n_steps": max(1, rollout // n_envs)}


def ppo_pair(make_a, make_b, rounds: int, steps: int) -> tuple[float, float, list[float]]:
    """PPO training steps/s of two vec envs (same settings), ``steps``-step learn chunks alternated ``rounds`` times:
    (best a, best b, sorted per-round ratios a / b)."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    models = []
    for make in (make_a, make_b):
        venv = make()
        m = PPO("MlpPolicy", venv, seed=0, device="cpu", verbose=0, **ppo_hyperparams(venv.num_envs))
        m.learn(m.n_steps * venv.num_envs)  # warm-up: first rollout and update, torch
        models.append(m)
    rates = [[], []]
    for _ in range(rounds):
        for k, m in enumerate(models):
            t = time.perf_counter()
            m.learn(steps, reset_num_timesteps=False)
            rates[k].append(steps / (time.perf_counter() - t))
    for m in models:
        m.env.close()
    return max(rates[0]), max(rates[1]), sorted(a / b for a, b in zip(*rates))


def seq_table(limit: int):
    """A partial sequential table of the train split (``limit`` cases per domain), built once."""
    from fwgym.rl.outcomes import TableError, build_table, open_table, table_dir, table_identity
    from fwgym.rl.outcomes.build import table_env
    from fwgym.rl.outcomes.format import default_root

    env = table_env("train", "sequential")
    where = Path(default_root() or "/tmp") / f"limit{limit}-{table_dir(Path('.'), table_identity('sequential', env)).name}"
    env.close()
    try:
        build_table("train", "sequential", where, limit=limit, workers=1, progress=False)
    except TableError:  # this script's own partial table, built by other code or another format version: again
        build_table("train", "sequential", where, limit=limit, workers=1, progress=False, overwrite=True)
    return open_table(where)


def sequential_rate(venv, steps: int, rng) -> float:
    """Env steps per second of a Sync vector env of sequential envs, random allowed entries."""
    venv.reset(seed=0)
    for _ in range(5):  # warm-up: first reads of the table's pages, first plans
        masks = np.stack(venv.call("action_masks"))
        venv.step(np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks]))
    t = time.perf_counter()
    for _ in range(steps):
        masks = np.stack(venv.call("action_masks"))
        venv.step(np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks]))
    return steps * venv.num_envs / (time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the default RL recipe's speed (native vector env, PPO, sequential)")
    ap.add_argument("--quick", action="store_true", help="few rounds (smoke test)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per row (default 30, quick 5)")
    ap.add_argument("--ppo-rounds", type=int, default=None, help="alternated PPO chunks (default 6, quick 2)")
    ap.add_argument("--seq-limit", type=int, default=None, help="cases per domain of the sequential table (default 500)")
    args = ap.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 30)
    ppo_rounds = args.ppo_rounds or (2 if args.quick else 6)
    seq_limit = args.seq_limit or (60 if args.quick else 500)
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    results: dict = {"steady": {}, "same_step": {}, "no_table": {}, "ppo": {}, "sequential": {}}

    probe = gym.make_vec(ID, num_envs=1)
    table = probe.table
    probe.close()
    if table is None:
        print("no current outcome table of the train split (the env said why above): build it with `fwgym rl build "
              "--split train`; the steady-state rows need it", file=sys.stderr)
        return 1
    build = table.manifest["build"]
    results["table"] = {"path": str(table.path), "cases": len(table.case_ids), "bytes": build["bytes"],
                        "build_seconds": build["seconds"], "workers": build["workers"]}

    # -- steady state on the table -----------------------------------------------------------------------------
    for n in (64, 1024):
        full, bare, cart = gym.make_vec(ID, num_envs=n), gym.make_vec(ID, num_envs=n, infos=False), CartPoleVectorEnv(num_envs=n)
        for e in (full, bare, cart):
            e.reset(seed=0)
        acts, cacts = rng.integers(0, 12, (4096, n)), rng.integers(0, 2, (4096, n))
        steps = 50 if n <= 64 else 10
        for e, a in ((full, acts), (bare, acts), (cart, cacts)):
            chunk(e, a, 0, steps)  # warm-up
        (t_full, r_full), (t_bare, r_bare), (t_cart, _) = interleaved([full, bare, cart], [acts, acts, cacts], steps, rounds)
        results["steady"][n] = {"fwgym_steps_per_s": n / t_full, "us_per_step": 1e6 * t_full, "ratio": t_cart / t_full,
                                "ratio_median": float(np.median(r_full)), "noinfo_steps_per_s": n / t_bare,
                                "ratio_noinfo": t_cart / t_bare, "ratio_noinfo_median": float(np.median(r_bare)),
                                "cartpole_steps_per_s": n / t_cart, "cartpole_us_per_step": 1e6 * t_cart}
        same = gym.make_vec(ID, num_envs=n, autoreset_mode=AutoresetMode.SAME_STEP)
        same.reset(seed=0)
        (t_same, r_same), (t_c2, _) = interleaved([same, cart], [acts, cacts], steps, max(rounds // 3, 2))
        results["same_step"][n] = {"fwgym_steps_per_s": n / t_same, "ratio": t_c2 / t_same}
        floor = ContractFloor(full)
        (t_floor, r_floor), (t_c3, _) = interleaved([floor, cart], [acts, cacts], steps, rounds)
        results["steady"][n].update({"floor_us_per_step": 1e6 * t_floor, "floor_ratio": t_c3 / t_floor,
                                     "floor_ratio_median": float(np.median(r_floor))})
        del floor
        for e in (full, bare, same, cart):
            e.close()

    # -- without a table: outcomes recorded from the env on first use ------------------------------------------
    cold = gym.make_vec(ID, num_envs=64, outcome_table=False)
    cold.reset(seed=3)
    cold.step(rng.integers(0, 12, 64))  # the first step's one-time costs (compiled kernels, caches) are not a rate
    k = 3 if args.quick else 8
    t = time.perf_counter()
    for a in rng.integers(0, 12, (k, 64)):
        cold.step(a)
    results["no_table"] = {"steps_per_s": 64 * k / (time.perf_counter() - t), "recorded": dict(cold.recorded)}
    cold.close()

    # -- PPO: the README recipe next to the same PPO on CartPole -------------------------------------------------
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecMonitor

    from fwgym.rl.sb3_vec import SB3VecEnv

    ppo_steps = 1024 * (2 if args.quick else 8)
    a, b, r = ppo_pair(lambda: VecMonitor(SB3VecEnv(gym.make_vec(ID, num_envs=64, autoreset_mode=AutoresetMode.SAME_STEP))),
                       lambda: make_vec_env("CartPole-v1", n_envs=64, seed=0), ppo_rounds, ppo_steps)
    results["ppo"] = {"fwgym_steps_per_s": a, "cartpole_steps_per_s": b, "ratio": a / b, "ratio_median": float(np.median(r))}

    # -- sequential -------------------------------------------------------------------------------------------
    st = seq_table(seq_limit)
    kw = {"case_ids": st.case_ids}
    sk = 10 if args.quick else 40
    seq_t = gym.make_vec(SEQ, num_envs=16, outcome_table=str(st.path), **kw)  # a partial table is read by path only
    seq_e = gym.make_vec(SEQ, num_envs=16, outcome_table=False, **kw)
    results["sequential"] = {"cases": len(st.case_ids), "table_steps_per_s": sequential_rate(seq_t, sk, rng),
                             "env_steps_per_s": sequential_rate(seq_e, sk, rng)}
    seq_t.close(), seq_e.close()
    vkw = {"autoreset_mode": AutoresetMode.SAME_STEP}
    a, b, _ = ppo_pair(lambda: VecMonitor(SB3VecEnv(gym.make_vec(SEQ, num_envs=16, vector_kwargs=vkw,
                                                                 outcome_table=str(st.path), **kw))),
                       lambda: VecMonitor(SB3VecEnv(gym.make_vec(SEQ, num_envs=16, vector_kwargs=vkw, outcome_table=False, **kw))),
                       max(ppo_rounds // 2, 1), 1024)
    results["sequential"].update(ppo_table_steps_per_s=a, ppo_env_steps_per_s=b)
    total_s = time.perf_counter() - t0
    load1 = os.getloadavg()

    # -- report -----------------------------------------------------------------------------------------------
    tb = results["table"]
    print(f"fwgym default RL recipe benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, gymnasium "
          f"{gym.__version__}; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; {rounds} interleaved "
          f"rounds per row; {total_s:.0f} s in all")
    print(f"train table: {tb['cases']:,} cases, {tb['bytes'] / 1e6:,.0f} MB, built in {tb['build_seconds']:,.0f} s with "
          f"{tb['workers']} worker(s) ({tb['path']})\n")
    print("| num_envs | fwgym env-steps/s (full infos) | / CartPoleVectorEnv (median) | infos=False env-steps/s | / CartPole "
          "(median) | same-step autoreset env-steps/s (/ CartPole) | CartPoleVectorEnv env-steps/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, r in results["steady"].items():
        s = results["same_step"][n]
        print(f"| {n} | {r['fwgym_steps_per_s']:,.0f} ({r['us_per_step']:,.0f} us/step) | {r['ratio']:.2f} ({r['ratio_median']:.2f}) "
              f"| {r['noinfo_steps_per_s']:,.0f} | {r['ratio_noinfo']:.2f} ({r['ratio_noinfo_median']:.2f}) | "
              f"{s['fwgym_steps_per_s']:,.0f} ({s['ratio']:.2f}) | {r['cartpole_steps_per_s']:,.0f} ({r['cartpole_us_per_step']:,.0f} us/step) |")
    nt = results["no_table"]
    print(f"\nwithout a table (outcome_table=False, 64 envs, first visits recorded from the env): {nt['steps_per_s']:,.0f} "
          f"env-steps/s ({nt['recorded']['steps']} outcomes recorded)")
    p = results["ppo"]
    print(f"PPO (SB3, the README recipe, 64 envs, ppo.yml settings): {p['fwgym_steps_per_s']:,.0f} steps/s; the same PPO on "
          f"CartPole-v1 (make_vec_env, 64 envs): {p['cartpole_steps_per_s']:,.0f} steps/s; ratio {p['ratio']:.2f} "
          f"(median {p['ratio_median']:.2f})")
    q = results["sequential"]
    print(f"sequential ({SEQ}, SyncVectorEnv of 16, partial train table of {q['cases']:,} cases): "
          f"{q['table_steps_per_s']:,.0f} env-steps/s on the table, {q['env_steps_per_s']:,.0f} on the env "
          f"({q['table_steps_per_s'] / q['env_steps_per_s']:.1f}x); PPO {q['ppo_table_steps_per_s']:,.0f} vs "
          f"{q['ppo_env_steps_per_s']:,.0f} steps/s")
    print("\nfloor: the memory work of SyncVectorEnv's results from this table and nothing else (ContractFloor): "
          + "; ".join(f"{n} envs {r['floor_us_per_step']:,.0f} us/step ({r['floor_ratio']:.2f}x CartPoleVectorEnv, "
                      f"round median {r['floor_ratio_median']:.2f})" for n, r in results["steady"].items()))
    for n, r in results["steady"].items():
        print(f"Target: native vector env (full infos) >= CartPoleVectorEnv steps/s at num_envs = {n}: {r['ratio']:.2f}x "
              f"({'MET' if r['ratio'] >= 1 else 'NOT MET'})")
    print(f"Target: PPO on the README recipe >= 0.5x PPO on CartPole: {p['ratio']:.2f}x ({'MET' if p['ratio'] >= 0.5 else 'NOT MET'})")
    print(json.dumps(results, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
