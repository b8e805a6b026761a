"""Quantiles vs samples of the same numbers in the forecast suite, before and after issue 27.

Run from the repository root::

    python benchmarks/quantile_format_gap.py [--split test] [--every 1]     # ~3 min for the test split

For every case of the forecast suite (scenario seed 0) it buys ``seasonal_empirical`` through the env,
submits the 24 x 9 target quantiles unchanged (the ``seasonal_empirical_quantiles`` policy), and then
re-scores the same numbers:

* ``v2``: fwgym's score (scorer version 2): the quantiles as the distribution they define, 9 equally
  weighted atoms; equal, bit for bit, to the same numbers submitted as 9 samples (checked per case);
* ``v1``: the quantile score of scorer version 1 (``2/9 sum_k pinball_k`` in the per-step and in the
  violation term), re-computed here from :func:`fwgym.core.scoring.crps_quantiles`.

Printed: cohort-weighted mean R (RCRPS capped at 5) under both rules, the relative gap v1/v2 - 1 per
case (median, range), and the largest |quantiles - samples| difference (0 by construction).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fwgym.core.contract import ForecastSubmission  # noqa: E402
from fwgym.core.optimizer import QUANTILE_LEVELS  # noqa: E402
from fwgym.core.scoring import (RCRPS_BETA, RCRPS_CAP, aggregate, bound_violation, crps_quantiles,  # noqa: E402
                                rcrps_alpha, score_forecast)
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402


def rcrps_v1(q: np.ndarray, y: np.ndarray, alpha: float, roi, lower, upper) -> float:
    """Scorer version 1's RCRPS of a quantile forecast (the quantile score in both terms)."""
    per = crps_quantiles(q, QUANTILE_LEVELS, y)
    m = None if roi is None else np.asarray(roi, bool)
    base = per.mean() if m is None or m.all() or not m.any() else 0.5 * per[m].mean() + 0.5 * per[~m].mean()
    pen = 0.0
    if lower is not None or upper is not None:
        v = np.sort(bound_violation(q.T, lower, upper))
        if v.any():
            pen = RCRPS_BETA * float(crps_quantiles(v[None, :], QUANTILE_LEVELS, np.zeros(1))[0])
    return float(alpha * (base + pen))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--every", type=int, default=1, help="every N-th case (default all)")
    a = ap.parse_args()
    recs, gaps, worst = {"v1": [], "v2": []}, [], 0.0
    for domain in ("electricity", "cycle_hire"):
        env = FWBenchEnv(domain, split=a.split, scenarios=True, task="forecast")
        for case in env.cases[::a.every]:
            env.reset(options={"case_id": case.case_id})
            obs, *_ = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336}})
            res = json.loads(obs["last_result"])["result"]
            lo, hi = res["target_steps"]
            q = np.asarray(res["quantiles"][lo - 1:hi], dtype=np.float64)
            *_, info = env.step({"tool": "submit", "args": {"quantiles": q.tolist()}})
            sc, y = env.episode.scenario, env.hindsight()["target"]
            alpha = rcrps_alpha(domain, case.series_id, sc.family)
            as_samples = score_forecast(ForecastSubmission("samples", q.T.copy()), y, alpha, sc.roi, sc.lower, sc.upper)
            worst = max(worst, abs(as_samples["rcrps"] - info["rcrps"]))
            v1 = rcrps_v1(q, y, alpha, sc.roi, sc.lower, sc.upper)
            gaps.append(v1 / info["rcrps"] - 1)
            base = {k: info[k] for k in ("case_id", "domain", "cohort", "series_id", "lead", "valid")}
            recs["v2"].append({**base, "S": info["R"]})
            recs["v1"].append({**base, "S": min(v1, RCRPS_CAP)})
    g = np.asarray(gaps)
    print(f"{len(g)} cases ({a.split}, every {a.every}): seasonal_empirical quantiles submitted unchanged")
    for k in ("v1", "v2"):
        print(f"  {k}: cohort-weighted mean R (capped RCRPS) = {aggregate(recs[k], ('S',))['S']:.4f}")
    print(f"  per-case v1/v2 - 1: median {np.median(g):+.2%}, range {g.min():+.2%} .. {g.max():+.2%}")
    print(f"  max |RCRPS(quantiles) - RCRPS(same numbers as samples)| = {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
