"""Per-case scores and cohort-weighted aggregation (DESIGN §5; FWBench protocol §5).

Per case ``i`` with decision loss ``loss_i``, perfect-demand floor ``F_i``, credits spent ``c_i``::

    R_i = (loss_i - F_i) / sigma_d          (normalised excess loss, sigma_d per domain)
    S_i = 0.5 * (R_i + c_i / B)             (B = 113,726 credits)

``sigma_d`` is the mean excess loss of the hour-of-day empirical policy on the pre-test (dev)
cases of domain ``d``, computed by ``fwgym calibrate-sigma`` and frozen in
``fwgym/config/sigma.json``.

Aggregation (protocol §5.3): every domain present gets an equal share, every cohort inside a
domain an equal share of it (the test split: each electricity cohort 1/6, cycle hire 1/2); inside a
cohort, cases are averaged within each (series x lead) group and the groups averaged equally.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

BUDGET = 113_726  #: credits per case
#: version of the scoring rules (every formula from a submission to loss, floor, R, S, CRPS and RCRPS:
#: this module, :mod:`fwgym.scorer` and the optimizer's plan and floor). Bump it with any change that can
#: move a stored score; results of different scorer versions are never merged into one leaderboard.
SCORER_VERSION = "1"
SIGMA_PATH = Path(__file__).resolve().parent / "config" / "sigma.json"
#: values reported by the FWBench paper on its own data, for comparison only
REFERENCE_SIGMA = {"electricity": 0.054206794827132906, "cycle_hire": 0.04340576638915502}


def load_sigma(path: str | Path | None = None) -> dict[str, float]:
    """Frozen per-domain sigma from ``fwgym/config/sigma.json`` (or ``path``).

    Raises:
        FileNotFoundError: no calibration file (run ``fwgym calibrate-sigma``).
        ValueError: the file lacks a domain or holds a non-positive value.
    """
    p = Path(path) if path is not None else SIGMA_PATH
    if not p.is_file():
        raise FileNotFoundError(f"sigma calibration file {p} is missing; run `fwgym calibrate-sigma` to create it")
    try:
        data = json.loads(p.read_text())
        sig = {str(d): float(v) for d, v in data["sigma"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{p}: not a sigma calibration file ({type(exc).__name__}: {exc}); "
                         "expected {\"sigma\": {\"electricity\": x, \"cycle_hire\": y}}") from None
    for d in ("electricity", "cycle_hire"):
        if d not in sig or not (np.isfinite(sig[d]) and sig[d] > 0):
            raise ValueError(f"{p}: sigma for domain {d!r} missing or not > 0")
    return sig


def case_score(loss: float, floor: float, credits: float, sigma: float, budget: float = BUDGET) -> tuple[float, float]:
    """``(R, S)`` of one case: ``R = (loss - floor)/sigma``, ``S = (R + credits/budget)/2``.

    Raises:
        ValueError: sigma or budget not > 0, or a non-finite input.
    """
    if not sigma > 0 or not budget > 0:
        raise ValueError(f"sigma and budget must be > 0 (got {sigma!r}, {budget!r})")
    try:
        finite = all(math.isfinite(x) for x in (loss, floor, credits))
    except (TypeError, OverflowError):  # not a number, or an int beyond float range
        finite = False
    if not finite:
        raise ValueError("loss, floor and credits must be finite numbers")
    r = (loss - floor) / sigma
    return float(r), float(0.5 * (r + credits / budget))


def case_weights(records: Sequence[Mapping]) -> np.ndarray:
    """Aggregation weight of each record (sums to 1), from its ``domain``, ``cohort``, ``series_id``, ``lead``.

    Records must belong to one policy (each case once).

    Raises:
        ValueError: empty input or a case id repeated.
    """
    if not records:
        raise ValueError("no records to weight")
    ids = [r["case_id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError("case ids repeat: pass the records of one policy only")
    tree: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, r in enumerate(records):
        tree[r["domain"]][r["cohort"]][(r["series_id"], r["lead"])].append(i)
    w = np.zeros(len(records))
    for cohorts in tree.values():
        for groups in cohorts.values():
            for members in groups.values():
                w[members] = 1.0 / len(tree) / len(cohorts) / len(groups) / len(members)
    return w


def aggregate(records: Sequence[Mapping], fields: Iterable[str] = ("S", "R", "loss", "floor", "credits", "calls"),
              allow_partial: bool = False) -> dict[str, float]:
    """Weighted means of ``fields`` over one policy's records (weights of :func:`case_weights`),
    plus ``n`` (cases) and ``valid`` (count of valid plans).

    Args:
        allow_partial: drop unscored records (``status == "harness_error"`` or ``scored`` False: the
            agent's infrastructure failed, so the case has no score) and aggregate the rest; by default
            such a set is refused.

    Raises:
        ValueError: unscored records (without ``allow_partial``); a field value that is not a finite
            number (NaN, infinite, None) in a scored record, with the case named; no records.
    """
    fields = tuple(fields)
    unscored = [r for r in records if r.get("status") == "harness_error" or r.get("scored", True) is False]
    if unscored and not allow_partial:
        raise ValueError(f"partial result set: {len(unscored)} of {len(records)} records have no score (status "
                         f"harness_error, e.g. case {unscored[0].get('case_id')!r}); finish the run (fwgym evaluate "
                         "--resume DIR) or aggregate the scored ones explicitly (allow_partial=True)")
    if unscored:
        records = [r for r in records if not (r.get("status") == "harness_error" or r.get("scored", True) is False)]
    for r in records:
        for f in fields:
            v = r[f]
            try:
                finite = v is not None and not isinstance(v, bool) and math.isfinite(v)
            except TypeError:
                finite = False
            if not finite:
                raise ValueError(f"non-finite result: {f} = {v!r} in the record of case {r.get('case_id')!r} "
                                 f"(policy {r.get('policy')!r}); a score must be a finite number")
    w = case_weights(records)
    out: dict[str, float] = {f: float(np.dot(w, [float(r[f]) for r in records])) for f in fields}
    out["n"] = len(records)
    out["valid"] = int(sum(bool(r["valid"]) for r in records))
    return out


# ---------------------------------------------------------------------------------------------
# Probabilistic scores (Context is Key, Williams et al. 2024, §5 "Region-of-Interest CRPS")

#: weight of the constraint-violation term in RCRPS
RCRPS_BETA = 10.0
#: RCRPS values are capped at this value when aggregated (and for invalid forecasts)
RCRPS_CAP = 5.0


def crps_samples(samples: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sample CRPS per step with the unbiased (fair) estimator.

    ``CRPS = mean_i |X_i - y| - 1/(2 n (n-1)) sum_{i != j} |X_i - X_j|`` (Ferro 2014; Zamo & Naveau
    2018, the probability-weighted-moment form); equals ``scoringrules.crps_ensemble(y, X,
    estimator="fair")``. Computed by sorting: ``sum_{i<j} |X_i - X_j| = sum_k (2k - n + 1) X_(k)``.

    Args:
        samples: float array (n, T), n >= 2 samples of T steps (or (n,) for one step).
        y: observations, shape (T,) (or scalar).

    Returns:
        float64 array (T,) (or a 0-d array for one step).

    Raises:
        ValueError: fewer than 2 samples, mismatched shapes or non-finite values.
    """
    x = np.asarray(samples, dtype=np.float64)
    obs = np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2 or obs.size != x.shape[1]:
        raise ValueError(f"samples must be (n >= 2, T) matching y of size T; got {x.shape} and {obs.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(obs))):
        raise ValueError("samples and y must be finite")
    n = x.shape[0]
    obs = obs.reshape(-1)
    term1 = np.abs(x - obs[None, :]).mean(axis=0)
    xs = np.sort(x, axis=0)
    k = np.arange(n, dtype=np.float64)[:, None]
    pair_sum = ((2 * k - n + 1) * xs).sum(axis=0)  # sum over i<j of |X_i - X_j|
    out = term1 - pair_sum / (n * (n - 1))
    return out.reshape(np.shape(y)) if np.ndim(y) == 0 else out


def pinball_loss(quantiles: np.ndarray, levels, y: np.ndarray) -> np.ndarray:
    """Pinball (quantile) loss ``max(tau * e, (tau - 1) * e)`` with ``e = y - q``.

    Args:
        quantiles: (T, K) quantile values. levels: K levels in (0, 1). y: (T,) observations.

    Returns:
        float64 array (T, K).
    """
    q = np.asarray(quantiles, dtype=np.float64)
    tau = np.asarray(levels, dtype=np.float64)[None, :]
    e = np.asarray(y, dtype=np.float64).reshape(-1, 1) - q
    return np.maximum(tau * e, (tau - 1.0) * e)


def crps_quantiles(quantiles: np.ndarray, levels, y: np.ndarray) -> np.ndarray:
    """CRPS of a quantile forecast per step, approximated by twice the mean pinball loss over the levels
    (``CRPS = 2 * integral_0^1 QS_tau dtau``, Gneiting & Raftery 2007 eq. 22; Laio & Tamea 2007).

    Args:
        quantiles: (T, K). levels: K levels. y: (T,).

    Returns:
        float64 array (T,).
    """
    return 2.0 * pinball_loss(quantiles, levels, y).mean(axis=1)


def rcrps(samples: np.ndarray, y: np.ndarray, alpha: float, roi: np.ndarray | None = None,
          lower: np.ndarray | None = None, upper: np.ndarray | None = None, beta: float = RCRPS_BETA,
          step_crps: np.ndarray | None = None) -> float:
    """Region-of-Interest CRPS (Context is Key §5.1).

    ``RCRPS = alpha * [ 1/2 mean_{t in RoI} CRPS_t + 1/2 mean_{t not in RoI} CRPS_t + beta * CRPS(v_C, 0) ]``
    (without an RoI, or with an RoI covering every step: ``alpha * [mean_t CRPS_t + beta * CRPS(v_C, 0)]``),
    where ``v_C`` is, per sample, the mean over steps of the bound violations
    ``max(lower_t - x_t, 0) + max(x_t - upper_t, 0)`` in raw units, and CRPS(v_C, 0) uses the fair estimator.

    Args:
        samples: (n, T) forecast samples (n >= 2), raw units.
        y: (T,) realised values.
        alpha: task normaliser (1 / mean target range of the task family), > 0.
        roi: optional boolean mask (T,) of the region of interest.
        lower, upper: optional bounds (T,) (NaN = no bound at that step).
        beta: constraint weight (default 10).
        step_crps: optional precomputed per-step CRPS (T,) (e.g. from a quantile forecast).

    Returns:
        The RCRPS (uncapped; cap with :data:`RCRPS_CAP` when aggregating).

    Raises:
        ValueError: bad shapes, non-finite values, alpha <= 0.
    """
    x = np.asarray(samples, dtype=np.float64)
    obs = np.asarray(y, dtype=np.float64).reshape(-1)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    per_step = crps_samples(x, obs) if step_crps is None else np.asarray(step_crps, dtype=np.float64)
    if roi is not None:
        m = np.asarray(roi, dtype=bool).reshape(-1)
        if m.shape != obs.shape:
            raise ValueError(f"roi mask must have shape {obs.shape}, got {m.shape}")
    if roi is None or m.all() or not m.any():
        base = float(per_step.mean())
    else:
        base = 0.5 * float(per_step[m].mean()) + 0.5 * float(per_step[~m].mean())
    penalty = 0.0
    if lower is not None or upper is not None:
        viol = np.zeros_like(x)
        if lower is not None:
            lo = np.asarray(lower, dtype=np.float64).reshape(1, -1)
            viol += np.where(np.isnan(lo), 0.0, np.maximum(lo - x, 0.0))
        if upper is not None:
            hi = np.asarray(upper, dtype=np.float64).reshape(1, -1)
            viol += np.where(np.isnan(hi), 0.0, np.maximum(x - hi, 0.0))
        v = viol.mean(axis=1)
        penalty = beta * float(crps_samples(v[:, None], np.zeros(1))[0])
    return float(alpha * (base + penalty))


def rcrps_alpha(domain: str, series_id: str) -> float:
    """RCRPS normaliser ``alpha = 1 / mean target range`` of the task family (Context is Key §5.1).

    A task family here is one series of one domain; the mean range (max - min of the 24 target
    hours) is taken over that series' held-out **train**-split cases, which all precede the dev and
    test periods. Cached per series.

    Raises:
        ValueError: the series has no train case or a zero mean range.
    """
    return _alpha_cache(domain, series_id)


@lru_cache(maxsize=None)
def _alpha_cache(domain: str, series_id: str) -> float:
    from fwgym.cases import build_cases

    ranges = [float(np.ptp(c.target())) for c in build_cases(domain, "train") if c.series_id == series_id]
    if not ranges or not np.mean(ranges) > 0:
        raise ValueError(f"no train cases with a positive target range for {domain}/{series_id}")
    return 1.0 / float(np.mean(ranges))
