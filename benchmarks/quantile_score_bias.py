"""Bias of the quantile score (fwgym's score for 9-quantile forecast submissions up to scorer version 1;
since version 2 a quantile submission is scored as its 9 values as equally weighted atoms, exactly as the
same numbers as samples, see docs/context.md) against the exact CRPS.

Run from the repository root::

    python benchmarks/quantile_score_bias.py        # ~10 s

Scorer version 1 scored a quantile submission with ``QS = 2/9 sum_k pinball_{tau_k}(q_k, y)`` at levels
0.1..0.9 (:func:`fwgym.core.scoring.crps_quantiles`), the 9-level discretisation of
``CRPS = 2 integral_0^1 pinball_tau dtau``. This script measures how far QS is from the exact CRPS of
the distribution whose quantiles are submitted:

1. theory: a normal predictive distribution and y drawn from it (closed form);
2. real test cases (all 1,259, every target hour), two predictive distributions with an exactly
   known CRPS, built from the 14 hour-of-day values of the visible history:
   a. a normal with their mean and standard deviation: exact CRPS by the closed form
      (``scoringrules.crps_normal``), QS of its exact quantiles;
   b. their empirical distribution: exact CRPS = the nrg estimator, QS of its inverted-CDF quantiles.

Printed: mean QS / mean exact CRPS (pooled over case-hours, each divided by the case's scale).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import scoringrules as sr  # noqa: E402
from scipy.stats import norm  # noqa: E402

from fwgym.core.cases import build_cases  # noqa: E402
from fwgym.forecasters.classical import classical_distribution  # noqa: E402
from fwgym.core.optimizer import QUANTILE_LEVELS  # noqa: E402
from fwgym.core.scoring import crps_ensemble, crps_quantiles  # noqa: E402


def main() -> int:
    tau = np.asarray(QUANTILE_LEVELS)
    theory = 2 * np.sqrt(np.pi) * norm.pdf(norm.ppf(tau)).mean()
    print(f"1. normal predictive distribution, y drawn from it: E[QS] / E[CRPS] = {theory:.4f}")
    sums = {"normal": [0.0, 0.0], "empirical": [0.0, 0.0]}
    per_domain: dict[str, dict[str, list[float]]] = {}
    n_hours = 0
    for domain in ("electricity", "cycle_hire"):
        per_domain[domain] = {"normal": [0.0, 0.0], "empirical": [0.0, 0.0]}
        for case in build_cases(domain, "test"):
            x = classical_distribution("hour_of_day_empirical", case.history, case.history_hours, case.target_hours)  # (24, 14)
            y = case.target()
            mu, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
            sd = np.maximum(sd, 1e-9 * case.scale)
            q_norm = norm.ppf(tau[None, :], mu[:, None], sd[:, None])
            exact_norm = sr.crps_normal(y, mu, sd)
            qs_norm = crps_quantiles(q_norm, tau, y)
            xs = np.sort(x, axis=1)
            k = np.ceil(tau * xs.shape[1]).astype(int) - 1  # inverted CDF: smallest value with F >= tau
            exact_emp = crps_ensemble(x.T, y, estimator="nrg")
            qs_emp = crps_quantiles(xs[:, k], tau, y)
            for name, qs, ex in (("normal", qs_norm, exact_norm), ("empirical", qs_emp, exact_emp)):
                for acc in (sums[name], per_domain[domain][name]):
                    acc[0] += float(np.sum(qs)) / case.scale
                    acc[1] += float(np.sum(ex)) / case.scale
            n_hours += 24
    print(f"2. real test cases ({n_hours} case-hours), predictive distributions from the 14 hour-of-day values:")
    for name, label in (("normal", "a. normal (mean, sd)  "), ("empirical", "b. empirical (14 values)")):
        s = sums[name]
        doms = ", ".join(f"{d} {v[name][0] / v[name][1]:.4f}" for d, v in per_domain.items())
        print(f"   {label}: mean QS / mean exact CRPS = {s[0] / s[1]:.4f}  ({doms})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
