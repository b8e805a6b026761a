"""The forecast store (fwgym.forecasters.store): RL macro steps/s with TSFM purchases with and without
a store, and the store's build throughput.

Run from the repository root::

    python benchmarks/bench_store.py            # ~3-5 min on 2 busy cores
    python benchmarks/bench_store.py --quick    # smoke test (~2 min)

Measured in one process, with tiny random Chronos-Bolt and Chronos-2 models built from config
(``tests/forecasters/tiny_models.py``; real weights are larger, so live inference costs more and the
store's ratio is larger):

* **RL macro steps/s.** :func:`fwgym.rl.make_rl_env` on train cases, one macro step = one
  episode (reset + catalog, then ``buy_plan_submit:<model>``: forecast, plan, submit), alternating
  the two tiny TSFMs, every episode a different case (the timed loop includes the resets); the same case list with and without
  ``forecast_store=`` (the process forecast cache is cleared before each chunk, so the run without the
  store infers every forecast, as RL training on 140k train cases does). Chunks alternate between the
  two envs; the figure is the ratio of the medians. The sequential menu (``replay:<model>``, then
  ``buy_plan_submit`` of that model, else of the other, else a free plan: whichever the budget allows;
  two macro steps per episode) likewise. The store run must have 0
  misses (checked).
* **Build throughput** (forecasts/s of :func:`fwgym.forecasters.store.build_store`, every request
  of the RL menus on the case set): the tiny TSFMs batched (``batch_size`` 16, 8 with ``--quick``,
  with the builder's bit-for-bit check against the single-series path) vs one by one; the raw
  ``predict_quantiles_batch`` throughput and the share of its rows equal to the single-series
  forecasts bit for bit; each statsmodels model in 1 and 2 worker processes.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests" / "forecasters"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore", message="We recommend keeping prediction length")


def machine() -> str:
    import torch

    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads)")


def rl_rates(tiny: dict, store_dir: Path, case_ids: list[str], variant: str, rounds: int) -> dict:
    """Median µs per macro step with and without the store (chunks alternate)."""
    from fwgym.forecasters.cache import FORECAST_CACHE
    from fwgym.forecasters.store import open_store
    from fwgym.rl import make_rl_env

    models = ("chronos_bolt_tiny", "chronos2")
    kw = dict(domain="all", split="train", variant=variant, forecasters=tiny, case_ids=case_ids)
    envs = {"live": make_rl_env(outcome_table=False, **kw),
            "store": make_rl_env(forecast_store=str(store_dir), outcome_table=False, **kw)}
    names = [e.name for e in envs["live"].menu]
    other = {models[0]: models[1], models[1]: models[0]}
    plan = {"macro": lambda m: [[f"buy_plan_submit:{m}"]],  # each step: the first allowed of its entries
            "sequential": lambda m: [[f"replay:{m}"], [f"buy_plan_submit:{m}", f"buy_plan_submit:{other[m]}",
                                                        "plan_submit:weekday_empirical"]]}[variant]
    store = open_store(store_dir)
    store.reset_counts()
    times = {k: [] for k in envs}
    steps = {k: 0 for k in envs}
    for rnd in range(rounds):
        for label in (("live", "store") if rnd % 2 == 0 else ("store", "live")):
            env = envs[label]
            FORECAST_CACHE.clear()
            t = time.perf_counter()
            n = 0
            for i, cid in enumerate(case_ids):
                env.reset(options={"case_id": cid})
                for choices in plan(models[i % 2]):
                    mask = env.action_masks()
                    entry = next(e for e in choices if mask[names.index(e)])
                    _, _, term, _, info = env.step(names.index(entry))
                    assert info["macro_valid"], (entry, cid)
                    n += 1
                    if term:
                        break
            times[label].append((time.perf_counter() - t) / n)
            steps[label] = n
    counts = store.counts()
    assert all(c["misses"] == 0 for c in counts.values()), counts
    live, stored = statistics.median(times["live"]), statistics.median(times["store"])
    return {"live_us": 1e6 * live, "store_us": 1e6 * stored, "ratio": live / stored, "steps": steps["store"],
            "hits": sum(c["hits"] for c in counts.values())}


def build_rate(out: Path, forecaster, requests, batch_size: int, workers: int = 1) -> tuple[float, dict]:
    """Forecasts/s of a build of ``requests`` into a new store at ``out``, and its manifest record."""
    from fwgym.forecasters.store import build_store

    t = time.perf_counter()
    rec = build_store(out, forecaster, requests, batch_size=batch_size, workers=workers)
    return len(requests) / (time.perf_counter() - t), rec


def raw_batch(forecaster, requests, batch_size: int, reference) -> tuple[float, float]:
    """(``predict_quantiles_batch`` forecasts/s, share of its rows equal bit for bit to the single-series
    forecasts stored in ``reference``, a store built one by one)."""
    groups: dict = {}
    for r in requests:
        groups.setdefault((len(r.context), r.horizon), []).append(r)
    same, t = 0, time.perf_counter()
    for (_, h), reqs in groups.items():
        for i in range(0, len(reqs), batch_size):
            part = reqs[i : i + batch_size]
            for r, q in zip(part, forecaster.predict_quantiles_batch([r.context for r in part], h)):
                same += q.tobytes() == reference.get(forecaster, r.series_id, r.context, r.origin, h).tobytes()
    return len(requests) / (time.perf_counter() - t), same / len(requests)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from tiny_models import build_bolt, build_chronos2

    from fwgym.core.cases import build_cases
    from fwgym.cli.forecasts import store_requests
    from fwgym.forecasters import Chronos2, ChronosBoltTiny
    from fwgym.forecasters.registry import STATISTICAL_MODELS, get_forecaster
    from fwgym.forecasters.store import open_store

    print(f"machine: {machine()}")
    n_cases, rounds, n_stat, batch = (24, 2, 4, 8) if args.quick else (64, 4, 12, 16)
    rng = np.random.default_rng(0)
    train = {d: build_cases(d, "train") for d in ("electricity", "cycle_hire")}
    cases = [train[d][i] for d in train for i in sorted(rng.choice(len(train[d]), n_cases // 2, replace=False))]
    case_ids = [c.case_id for c in cases]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny = {"chronos_bolt_tiny": ChronosBoltTiny(local_dir=build_bolt(tmp / "bolt")),
                "chronos2": Chronos2(local_dir=build_chronos2(tmp / "c2"))}
        for f in tiny.values():
            f.load()
        store_dir = tmp / "store"
        print(f"\n## build throughput ({len(cases)} train cases: the covering forecast and the sequential menu's "
              f"replay per case; batches of {batch})")
        print(f"{'model':18s} {'requests':>8s} {'one by one /s':>14s} {'batched /s':>11s} {'ratio':>6s}  "
              f"{'stored as':14s} {'raw batch /s':>12s} {'bit-equal':>9s}")
        for name, f in tiny.items():
            reqs = store_requests(cases, name)
            one, _ = build_rate(tmp / f"one-{name}", f, reqs, 1)
            batched, rec = build_rate(store_dir, f, reqs, batch)  # the store the RL rows read
            modes = ",".join(f"{g['mode']}" for g in sorted(rec["groups"], key=lambda g: (g["context_steps"], g["horizon"])))
            one_by_one = open_store(tmp / f"one-{name}")
            raw, eq = raw_batch(f, reqs, batch, one_by_one)
            built = open_store(store_dir)
            assert all(built.get(f, r.series_id, r.context, r.origin, r.horizon).tobytes()
                       == one_by_one.get(f, r.series_id, r.context, r.origin, r.horizon).tobytes() for r in reqs), name
            print(f"{name:18s} {len(reqs):8d} {one:14.1f} {batched:11.1f} {batched / one:5.2f}x  {modes:14s} "
                  f"{raw:12.1f} {100 * eq:8.0f}%")
        print("(stored as: the mode of each (context, horizon) group 168x168, 286x50, 336x50, 336x194, 'single' where "
              "batching changed a bit; every stored row checked equal to the one-by-one build's, bit for bit)")
        for model in STATISTICAL_MODELS:
            f = get_forecaster(model)
            reqs = store_requests(cases[:n_stat], model)
            f.predict_quantiles(cases[0].history, 24)  # warm-up: imports
            r1, _ = build_rate(tmp / f"{model}-1", f, reqs, batch, workers=1)
            r2, _ = build_rate(tmp / f"{model}-2", f, reqs, batch, workers=2)
            print(f"{model:18s} {len(reqs):8d} {r1:14.2f}   (2 worker processes: {r2:.2f} /s, {r2 / r1:.2f}x)")

        print(f"\n## RL macro steps with TSFM purchases ({len(case_ids)} train cases per chunk, {rounds} chunks per env, "
              "alternating; tiny models)")
        print(f"{'variant':11s} {'steps':>6s} {'live µs/step':>13s} {'store µs/step':>14s} {'live steps/s':>13s} "
              f"{'store steps/s':>14s} {'store speed-up':>15s}")
        for variant in ("macro", "sequential"):
            r = rl_rates(tiny, store_dir, case_ids, variant, rounds)
            print(f"{variant:11s} {r['steps']:6d} {r['live_us']:13.0f} {r['store_us']:14.0f} {1e6 / r['live_us']:13.1f} "
                  f"{1e6 / r['store_us']:14.1f} {r['ratio']:14.1f}x   (store hits {r['hits']}, misses 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
