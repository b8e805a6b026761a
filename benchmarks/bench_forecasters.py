"""Milliseconds per forecast for each adapter: tiny random Chronos-Bolt, Chronos-2 and TimesFM 2.5
models (built from config, loaded through the same adapter path as real weights) and seasonal_empirical.

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


if __name__ == "__main__":
    main()
