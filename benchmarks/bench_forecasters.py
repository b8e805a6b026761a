"""Milliseconds per forecast for each adapter: tiny random Chronos-Bolt, Chronos-2 and TimesFM 2.5
models (built from config, loaded through the same adapter path as real weights) and seasonal_empirical;
then the statsmodels forecasters of the extended pool (ets, theta, sarima, mstl_ets: fit + forecast,
one BLAS thread) on real cases at context 336 and horizons 50 / 194, wall-clock and CPU ms, beside
their tariff credits (reference CPU microseconds, fwgym/config/tariff_extended.json).

    python benchmarks/bench_forecasters.py

Real-size models are much slower (DEPENDENCIES.md §2-3: Chronos-2 ~110-210 ms, TimesFM 2.5 ~0.8-0.9 s
per series on 2 CPU cores); these figures measure the adapter overhead plus a tiny network.
"""
from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "forecasters"))

import numpy as np  # noqa: E402

from fwgym.forecasters import Chronos2, ChronosBoltTiny, SeasonalEmpirical, TimesFM25  # noqa: E402


def median_ms(f, context, horizon, reps=20) -> float:
    f.predict_quantiles(context, horizon)  # warm-up (load, first call)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f.predict_quantiles(context, horizon)
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def main() -> None:
    import torch

    torch.set_num_threads(1)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} (1 thread)")
    forecasters = {"seasonal_empirical": SeasonalEmpirical()}
    try:
        from tiny_models import build_bolt, build_chronos2, build_timesfm, tiny_timesfm_class

        root = Path(tempfile.mkdtemp(prefix="fwgym-bench-"))
        forecasters["chronos_bolt_tiny (tiny random)"] = ChronosBoltTiny(local_dir=build_bolt(root / "bolt"))
        forecasters["chronos2 (tiny random)"] = Chronos2(local_dir=build_chronos2(root / "c2"))
        forecasters["timesfm25 (tiny random)"] = TimesFM25(local_dir=build_timesfm(root / "tfm"), model_class=tiny_timesfm_class())
    except ImportError as exc:
        print(f"TSFM packages missing ({exc}); timing seasonal_empirical only")
    t = np.arange(336)
    context = 1000 + 200 * np.sin(2 * np.pi * t / 24) + np.random.default_rng(0).normal(0, 20, 336)
    print(f"{'adapter':34s} {'h=50 ms':>9s} {'h=194 ms':>9s}")
    for name, f in forecasters.items():
        print(f"{name:34s} {median_ms(f, context, 50):9.2f} {median_ms(f, context, 194):9.2f}")
    statistical()


def statistical(per_domain: int = 4, reps: int = 3) -> None:
    """ms per statsmodels forecast (fit + forecast) at context 336, h = 50 / 194: medians over
    ``per_domain`` real dev cases of each domain (the pricing command's cases) x ``reps``."""
    try:
        from fwgym.forecasters.pricing import pricing_cases
        from fwgym.forecasters.registry import STATISTICAL_MODELS, get_forecaster
    except ImportError as exc:  # pragma: no cover
        print(f"statsmodels forecasters unavailable ({exc})")
        return
    from fwgym.core.cases import get_case
    from fwgym.core.tariff import credits_for

    if not get_forecaster("ets").availability().available:
        print("statsmodels is not installed: no statsmodels rows")
        return
    cases = [get_case(c) for c in pricing_cases(per_domain)]
    print(f"\nstatsmodels forecasters, context 336, {len(cases)} real dev cases x {reps}: median ms (wall / CPU) and credits")
    print(f"{'model':10s} {'h=50 wall':>10s} {'cpu':>7s} {'credits':>8s} {'h=194 wall':>11s} {'cpu':>7s} {'credits':>8s}")
    for model in STATISTICAL_MODELS:
        f = get_forecaster(model)
        f.predict_quantiles(cases[0].history, 24)  # warm-up: imports
        row = f"{model:10s}"
        for h in (50, 194):
            wall, cpu = [], []
            for case in cases:
                for _ in range(reps):
                    w, c = time.perf_counter(), time.process_time()
                    f.predict_quantiles(case.history, h)
                    wall.append(time.perf_counter() - w)
                    cpu.append(time.process_time() - c)
            row += f" {1e3 * np.median(wall):{10 if h == 50 else 11}.1f} {1e3 * np.median(cpu):7.1f} {credits_for(model, 336, h):8d}"
        print(row)


if __name__ == "__main__":
    main()
