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
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from fwgym.core.metrics import DECISION_METRIC, RCRPS_CAP
from fwgym.domains import BUILTIN_DOMAINS, DOMAINS, get_domain

__all__ = ["BUDGET", "LOSS_WEIGHT", "SCORER_VERSION", "SIGMA_PATH", "REFERENCE_SIGMA", "SIGMA_FILE_DOMAINS", "SIGMA_RELPATH",
           "load_sigma", "write_sigma",
           "case_score", "case_weights", "aggregate", "RCRPS_BETA", "RCRPS_CAP", "ESTIMATORS", "crps_ensemble",
           "pinball_loss", "crps_quantiles", "quantile_atoms", "bound_violation", "rcrps", "rcrps_terms", "score_forecast",
           "range_alpha"]

BUDGET = 113_726  #: credits per case
#: version of the scoring rules (every formula from a submission to loss, floor, R, S, CRPS and RCRPS:
#: this module, :mod:`fwgym.core.scorer` and the optimizer's plan and floor). Bump it with any change that can
#: move a stored score; results of different scorer versions are never merged into one leaderboard.
SCORER_VERSION = "2"  # 2: quantile submissions scored as 9 equally weighted atoms (issue 27)
SIGMA_PATH = Path(__file__).resolve().parents[1] / "config" / "sigma.json"
#: values reported by the FWBench paper on its own data, for comparison only (each protocol domain's
#: :attr:`~fwgym.domains.Domain.reference_sigma`)
REFERENCE_SIGMA: dict[str, float] = {d: s for d in DOMAINS if (s := get_domain(d).reference_sigma) is not None}
#: the domains whose sigma the packaged calibration file must hold: the built-in domains without a sigma of
#: their own (:attr:`fwgym.domains.Domain.sigma`)
SIGMA_FILE_DOMAINS: tuple[str, ...] = tuple(d for d, spec in BUILTIN_DOMAINS.items() if spec.sigma is None)


#: the packaged sigma file, relative to the fwgym package (an entry of fwgym.data.SCORE_FILES)
SIGMA_RELPATH = "config/sigma.json"


def _is_packaged_sigma(p: Path) -> bool:
    try:
        return p.resolve() == SIGMA_PATH.resolve()
    except OSError:
        return False


def load_sigma(path: str | Path | None = None, domains: Iterable[str] = ()) -> dict[str, float]:
    """Frozen per-domain sigma from ``fwgym/config/sigma.json`` (or ``path``), plus the sigma of each of
    ``domains`` the file does not hold, from its spec (:attr:`fwgym.domains.Domain.sigma`: a plug-in
    domain's frozen calibration).

    The packaged file is sha256-checked against the data manifest (``fwgym/data/sha256.json``):
    an edited copy is refused (re-calibrate with ``fwgym calibrate-sigma --write``, which records
    the new digest). A file given explicitly by ``path`` is the caller's choice and is not checked.

    Raises:
        FileNotFoundError: no calibration file (run ``fwgym calibrate-sigma``).
        fwgym.data.DataIntegrityError: the packaged file fails its sha256 check (the message names it).
        ValueError: the file lacks a domain or holds a non-positive value; a domain of ``domains`` that is
            neither in the file nor has a sigma of its own (or is unknown).
    """
    p = Path(path) if path is not None else SIGMA_PATH
    if not p.is_file():
        raise FileNotFoundError(f"sigma calibration file {p} is missing; run `fwgym calibrate-sigma` to create it")
    try:
        if _is_packaged_sigma(p):
            from fwgym.data import verified_bytes

            text = verified_bytes(SIGMA_RELPATH).decode("utf-8")
        else:
            text = p.read_text()
        data = json.loads(text)
        sig = {str(d): float(v) for d, v in data["sigma"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{p}: not a sigma calibration file ({type(exc).__name__}: {exc}); "
                         "expected {\"sigma\": {\"electricity\": x, \"cycle_hire\": y}}") from None
    for d in SIGMA_FILE_DOMAINS:
        if d not in sig or not (np.isfinite(sig[d]) and sig[d] > 0):
            raise ValueError(f"{p}: sigma for domain {d!r} missing or not > 0")
    for d in domains:
        if d not in sig:
            own = get_domain(d).sigma
            if own is None:
                raise ValueError(f"domain {d!r} has no sigma: calibrate it on its dev split "
                                 f"(fwgym.evaluation.calibration.calibrate_sigma(domains=[{d!r}])) and set its "
                                 "Domain.sigma")
            sig[d] = float(own)
    return sig


def write_sigma(text: str, path: str | Path | None = None) -> Path:
    """Write a sigma calibration file (JSON text with a ``"sigma"`` object) to ``path`` (default: the
    packaged ``fwgym/config/sigma.json``, whose digest is then recorded in the data manifest, so the
    new file passes :func:`load_sigma`'s check). The text is checked to be a valid calibration first.

    Returns:
        The path written.

    Raises:
        ValueError: ``text`` is not a valid calibration (as :func:`load_sigma`).
    """
    p = Path(path) if path is not None else SIGMA_PATH
    probe = json.loads(text)
    sig = {str(d): float(v) for d, v in probe["sigma"].items()}
    for d in SIGMA_FILE_DOMAINS:
        if d not in sig or not (np.isfinite(sig[d]) and sig[d] > 0):
            raise ValueError(f"sigma for domain {d!r} missing or not > 0: refusing to write {p}")
    p.write_text(text)
    if _is_packaged_sigma(p):
        from fwgym.data import record_sha256

        record_sha256(SIGMA_RELPATH)
    return p


#: the protocol's weight W of R in S = W*R + (1 - W)*credits/budget (S = (R + c/B)/2, protocol §5.2)
LOSS_WEIGHT = DECISION_METRIC.r_weight


def case_score(loss: float, floor: float, credits: float, sigma: float, budget: float = BUDGET,
               loss_weight: float = LOSS_WEIGHT) -> tuple[float, float]:
    """``(R, S)`` of one decision case: ``R = (loss - floor)/sigma``, ``S = W*R + (1 - W)*credits/budget`` with
    the loss weight ``W`` (the protocol's 1/2: ``S = (R + credits/budget)/2``,
    :data:`fwgym.core.metrics.DECISION_METRIC`; other weights re-score saved decisions for the paper's
    loss-cost sensitivity analysis, §4.5, with the same metric's weights replaced).

    Raises:
        ValueError: sigma or budget not > 0, a loss weight outside [0, 1], or a non-finite input.
    """
    if not sigma > 0 or not budget > 0:
        raise ValueError(f"sigma and budget must be > 0 (got {sigma!r}, {budget!r})")
    if not (isinstance(loss_weight, (int, float)) and 0.0 <= loss_weight <= 1.0):
        raise ValueError(f"loss_weight must be a number in [0, 1], got {loss_weight!r}")
    try:
        finite = all(math.isfinite(x) for x in (loss, floor, credits))
    except (TypeError, OverflowError):  # not a number, or an int beyond float range
        finite = False
    if not finite:
        raise ValueError("loss, floor and credits must be finite numbers")
    r = (loss - floor) / sigma
    if loss_weight == LOSS_WEIGHT:  # the protocol's S (bit for bit as it always was)
        return float(r), DECISION_METRIC.score(r, credits, budget)
    return float(r), replace(DECISION_METRIC, r_weight=float(loss_weight),
                             credit_weight=1.0 - float(loss_weight)).score(r, credits, budget)


def _weight_parts(records: Sequence[Mapping]) -> list[tuple[int, int, int, int]]:
    """Per record, the counts its weight divides by: ``(domains, cohorts of its domain, (series x lead) groups of
    its cohort, members of its group)``; the weight is ``1 / (their product)``.

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
    parts: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)] * len(records)
    for cohorts in tree.values():
        for groups in cohorts.values():
            for members in groups.values():
                for i in members:
                    parts[i] = (len(tree), len(cohorts), len(groups), len(members))
    return parts


def case_weights(records: Sequence[Mapping]) -> np.ndarray:
    """Aggregation weight of each record (sums to 1), from its ``domain``, ``cohort``, ``series_id``, ``lead``.

    Records must belong to one policy (each case once).

    Raises:
        ValueError: empty input or a case id repeated.
    """
    return np.array([1.0 / d / c / g / m for d, c, g, m in _weight_parts(records)], dtype=float)


def _weighted_mean(values: Sequence[float], denominators: Sequence[int]) -> float:
    """``sum(values[i] / denominators[i])`` computed exactly (rationals) and rounded once: the correctly rounded
    weighted mean when the weights ``1 / denominators[i]`` sum to 1 (so the mean of equal values is that value,
    never ``0.9999999999999999``)."""
    by: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for v, d in zip(values, denominators):
        by[d].append(float(v).as_integer_ratio())
    total = Fraction(0)
    for d, ratios in by.items():
        k = max(q for _, q in ratios)  # every q is a power of 2, so each divides the largest
        total += Fraction(sum(n * (k // q) for n, q in ratios), k * d)
    return float(total)


def aggregate(records: Sequence[Mapping], fields: Iterable[str] = ("S", "R", "loss", "floor", "credits", "calls"),
              allow_partial: bool = False) -> dict[str, float]:
    """Weighted means of ``fields`` over one policy's records (weights of :func:`case_weights`),
    plus ``n`` (cases) and ``valid`` (count of valid plans).

    Each mean is computed exactly (rational arithmetic) and rounded once, so it is the correctly rounded
    mean: equal values average to that value (a mean of ``calls`` all 1 is ``1.0``, never ``0.9999999999999999``)
    and the result does not depend on the order of the records.

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
    dens = [d * c * g * m for d, c, g, m in _weight_parts(records)]
    out: dict[str, float] = {f: _weighted_mean([r[f] for r in records], dens) for f in fields}
    out["n"] = len(records)
    out["valid"] = int(sum(bool(r["valid"]) for r in records))
    return out


# ---------------------------------------------------------------------------------------------
# Probabilistic scores (Context is Key, Williams et al. 2024, §5 "Region-of-Interest CRPS")
#
# Two sample estimators of the CRPS, for two different things:
#
# * samples an AGENT submits are its predictive distribution: they are scored by the exact CRPS of
#   their empirical distribution (``estimator="nrg"``, scoringrules' name). That is a strictly proper
#   score for every submitted distribution: no choice of samples beats reporting one's belief.
# * samples DRAWN independently from a model estimate the CRPS of the model's distribution; the
#   fair estimator (``estimator="fair"``, CiK's and scoringrules' "pwm"/"fair") is unbiased for that.
#   It assumes independent draws, and chosen samples game it: two samples bracketing y score 0
#   (``[[0]*24, [1e9]*24]`` scored RCRPS 0 on every test case), and the per-hour min and max of an
#   honest ensemble beat the ensemble.
#
# Quantile submissions (9 values at levels 0.1..0.9) are scored as the distribution they define: the
# 9 values as equally weighted atoms (mass 1/9 each), i.e. exactly as the same 9 numbers submitted as
# samples (:func:`quantile_atoms`; one rule, so no format scores better for the same numbers). That
# distribution's quantiles at levels 0.1, ..., 0.9 are the submitted values (its quantile function is
# the step x_(k) on ((k-1)/9, k/9], and tau_k = k/10 lies in that interval), it needs no assumed tails,
# and its CRPS is exact. The quantile score ``QS = 2/K sum_k pinball_{tau_k}`` (:func:`crps_quantiles`),
# which fwgym used before (scorer version 1), is no CRPS of any distribution: on the same numbers it
# exceeds the atoms' CRPS by exactly ``(2/810) sum_k (k - 5) q_(k) >= 0`` (the identity of issue 27),
# so it punished the quantile format. It stays a library function (the pinball diagnostics).
# For a continuous belief F, the best 9 atoms are F's quantiles at the mid-levels (2k - 1)/18
# (the minimiser of the expected CRPS over 9-atom distributions); for a normal F they score 0.84 %
# above F's own CRPS and F's 0.1..0.9 quantiles 0.73 % above them (docs/context.md); many samples
# approximate F best.

#: weight of the constraint-violation term in RCRPS
RCRPS_BETA = 10.0
#: estimators of :func:`crps_ensemble`
ESTIMATORS = ("nrg", "fair")


def _samples_and_obs(samples, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(samples, dtype=np.float64)
    obs = np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 1 or obs.size != x.shape[1]:
        raise ValueError(f"samples must be (n, T) matching y of size T; got {x.shape} and {obs.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(obs))):
        raise ValueError("samples and y must be finite")
    return x, obs.reshape(-1)


def crps_ensemble(samples: np.ndarray, y: np.ndarray, *, estimator: str) -> np.ndarray:
    """CRPS per step of an ensemble of ``n`` samples (scoringrules' ``crps_ensemble`` semantics).

    ``estimator="nrg"``: the exact CRPS of the samples' empirical distribution,
    ``mean_i |X_i - y| - 1/(2 n^2) sum_{i,j} |X_i - X_j|`` (Gneiting & Raftery 2007, eq. 21, with
    F the empirical distribution); use it for submitted forecasts (strictly proper in the submitted
    distribution). ``estimator="fair"``: ``mean_i |X_i - y| - 1/(2 n (n-1)) sum_{i,j} |X_i - X_j|``
    (Ferro 2014; Zamo & Naveau 2018, the probability-weighted-moment form CiK uses), unbiased for the
    CRPS of the distribution the samples are independent draws of; use it for model-drawn samples.
    Computed by sorting: ``sum_{i<j} |X_i - X_j| = sum_k (2k - n + 1) X_(k)``.

    Args:
        samples: float array (n, T) of n samples of T steps (or (n,) for one step); n >= 1 for
            "nrg", n >= 2 for "fair".
        y: observations, shape (T,) (or scalar).
        estimator: ``"nrg"`` or ``"fair"`` (keyword, required: the choice is the point).

    Returns:
        float64 array (T,) (or a 0-d array for one step), same units as the samples.

    Raises:
        ValueError: unknown estimator, too few samples, mismatched shapes or non-finite values.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    x, obs = _samples_and_obs(samples, y)
    n = x.shape[0]
    if estimator == "fair" and n < 2:
        raise ValueError(f"the fair estimator needs n >= 2 samples, got {n}")
    term1 = np.abs(x - obs[None, :]).mean(axis=0)
    xs = np.sort(x, axis=0)
    k = np.arange(n, dtype=np.float64)[:, None]
    pair_sum = ((2 * k - n + 1) * xs).sum(axis=0)  # sum over i<j of |X_i - X_j|
    out = term1 - pair_sum / (n * n if estimator == "nrg" else n * (n - 1))
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
    """Quantile score per step: ``QS = 2/K sum_k pinball_{tau_k}(q_k, y)``, twice the mean pinball loss
    over the K levels; the K-level discretisation of ``CRPS = 2 integral_0^1 pinball_tau dtau``
    (Gneiting & Raftery 2007, eq. 22; Laio & Tamea 2007). Strictly proper for the K quantiles; as an
    estimate of the CRPS it is biased (+9.4 % for a normal distribution at levels 0.1..0.9). Not the
    score of quantile submissions (:func:`score_forecast` scores those as the distribution they
    define); kept for pinball diagnostics.

    Args:
        quantiles: (T, K). levels: K levels. y: (T,).

    Returns:
        float64 array (T,).
    """
    return 2.0 * pinball_loss(quantiles, levels, y).mean(axis=1)


def _bounds(bound, n_steps: int, what: str) -> np.ndarray | None:
    if bound is None:
        return None
    b = np.asarray(bound, dtype=np.float64).reshape(-1)
    if b.shape != (n_steps,):
        raise ValueError(f"{what} bound must have shape ({n_steps},), got {b.shape}")
    if np.any(np.isinf(b)):
        raise ValueError(f"{what} bound must be finite or NaN (NaN = no bound at that step)")
    return b if np.isfinite(b).any() else None


def bound_violation(paths: np.ndarray, lower=None, upper=None) -> np.ndarray:
    """Constraint violation of each forecast path, as Context is Key's constraints (raw units).

    ``v_i = mean_{t in U} max(x_it - upper_t, 0) + mean_{t in L} max(lower_t - x_it, 0)``, where U
    (L) are the steps with an upper (lower) bound: the mean runs over the BOUNDED steps only, as
    CiK's ``VariableMaxConstraint`` (indices and thresholds) and its sum of constraints
    (``ListConstraint``); a bound on every step is CiK's ``MaxConstraint`` / ``MinConstraint``.

    Args:
        paths: (n, T) forecast paths. lower, upper: None or (T,) bounds, NaN where unbounded.

    Returns:
        float64 (n,), >= 0.

    Raises:
        ValueError: bound shapes differ from T, or an infinite bound.
    """
    x = np.asarray(paths, dtype=np.float64)
    n_steps = x.shape[1]
    v = np.zeros(x.shape[0])
    hi = _bounds(upper, n_steps, "upper")
    lo = _bounds(lower, n_steps, "lower")
    if hi is not None:
        m = np.isfinite(hi)
        v += np.maximum(x[:, m] - hi[m][None, :], 0.0).mean(axis=1)
    if lo is not None:
        m = np.isfinite(lo)
        v += np.maximum(lo[m][None, :] - x[:, m], 0.0).mean(axis=1)
    return v


def _roi_mean(per_step: np.ndarray, roi) -> float:
    """``1/2 mean over RoI + 1/2 mean outside`` (the plain mean without an RoI, or with an RoI of all/no steps)."""
    if roi is None:
        return float(per_step.mean())
    m = np.asarray(roi, dtype=bool).reshape(-1)
    if m.shape != per_step.shape:
        raise ValueError(f"roi mask must have shape {per_step.shape}, got {m.shape}")
    if m.all() or not m.any():
        return float(per_step.mean())
    return 0.5 * float(per_step[m].mean()) + 0.5 * float(per_step[~m].mean())


def _rcrps_parts(x: np.ndarray, y: np.ndarray, roi, lower, upper, beta: float, estimator: str) -> tuple[float, float]:
    """``(base, penalty)`` of :func:`rcrps` before the ``alpha`` scaling: the RoI-weighted mean CRPS and
    ``beta * CRPS(v, 0)`` (0.0 without bounds or violations, ``inf`` for violations beyond float range)."""
    per_step = crps_ensemble(x, y, estimator=estimator)
    base = _roi_mean(np.atleast_1d(per_step), roi)
    penalty = 0.0
    if lower is not None or upper is not None:
        v = bound_violation(x if x.ndim == 2 else x[:, None], lower, upper)
        if not np.all(np.isfinite(v)):  # violations beyond float range (samples near 1e308)
            penalty = math.inf
        elif v.any():
            penalty = beta * float(crps_ensemble(v[:, None], np.zeros(1), estimator=estimator)[0])
    return base, penalty


def rcrps(samples: np.ndarray, y: np.ndarray, alpha: float, roi: np.ndarray | None = None,
          lower: np.ndarray | None = None, upper: np.ndarray | None = None, beta: float = RCRPS_BETA, *,
          estimator: str = "nrg") -> float:
    """Region-of-Interest CRPS of a sample forecast (Context is Key §5.1).

    ``RCRPS = alpha * [ 1/2 mean_{t in RoI} CRPS_t + 1/2 mean_{t not in RoI} CRPS_t + beta * CRPS(v, 0) ]``
    (without an RoI, or with an RoI covering every or no step: ``alpha * [mean_t CRPS_t + beta * CRPS(v, 0)]``),
    with ``v`` the per-sample violations of :func:`bound_violation` (mean over the bounded steps) and
    both CRPS terms computed with ``estimator``. ``estimator="fair"`` is CiK's metric exactly (its
    ``threshold_weighted_crps`` with roi_weight 1/2, violation factor beta, scaling alpha; CiK
    multiplies samples and bounds by alpha before the violation, which the CRPS's homogeneity makes
    the same); ``"nrg"`` (default) scores submitted samples as their empirical distribution.
    :func:`rcrps_terms` gives the two terms apart.

    Args:
        samples: (n, T) forecast samples, raw units.
        y: (T,) realised values.
        alpha: task normaliser (1 / mean target range of the task family), > 0.
        roi: optional boolean mask (T,) of the region of interest.
        lower, upper: optional bounds (T,) (NaN = no bound at that step).
        beta: constraint weight (default 10).
        estimator: ``"nrg"`` or ``"fair"`` (see :func:`crps_ensemble`).

    Returns:
        The RCRPS (uncapped; may be inf for astronomically large samples: :func:`score_forecast` caps).

    Raises:
        ValueError: bad shapes, non-finite samples, alpha <= 0, unknown estimator.
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    base, penalty = _rcrps_parts(np.asarray(samples, dtype=np.float64), y, roi, lower, upper, beta, estimator)
    return float(alpha * (base + penalty))


def rcrps_terms(samples: np.ndarray, y: np.ndarray, alpha: float, roi: np.ndarray | None = None,
                lower: np.ndarray | None = None, upper: np.ndarray | None = None, beta: float = RCRPS_BETA, *,
                estimator: str = "nrg") -> tuple[float, float]:
    """The two terms of :func:`rcrps`: ``(alpha * RoI-weighted mean CRPS, alpha * beta * CRPS(v, 0))``,
    the CRPS term (the RCRPS without the violation term, exactly ``rcrps`` with no bounds) and the
    bound-violation term (0.0 without bounds or violations, ``inf`` for violations beyond float range).
    Their sum is ``rcrps`` up to rounding (``rcrps`` scales the sum once). Arguments, units and errors
    as :func:`rcrps`."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    base, penalty = _rcrps_parts(np.asarray(samples, dtype=np.float64), y, roi, lower, upper, beta, estimator)
    return float(alpha * base), float(alpha * penalty)


def quantile_atoms(quantiles: np.ndarray) -> np.ndarray:
    """The distribution a quantile submission defines, as sample paths: the 9 values of each hour as
    equally weighted atoms, the level-k path ``quantiles[:, k]`` being atom k (its violation is that
    path's violation, as for a submitted sample path).

    Args:
        quantiles: float (T, K) quantile values per step (K = 9 at levels 0.1..0.9).

    Returns:
        float64 (K, T), the transpose: scored by :func:`rcrps` with ``estimator="nrg"`` it gives exactly
        the score of the same numbers submitted as K samples.

    Raises:
        ValueError: not a 2-d array.
    """
    q = np.asarray(quantiles, dtype=np.float64)
    if q.ndim != 2:
        raise ValueError(f"quantiles must be (T, K), got shape {q.shape}")
    return np.ascontiguousarray(q.T)


def score_forecast(submission, y: np.ndarray, alpha: float, roi: np.ndarray | None = None,
                   lower: np.ndarray | None = None, upper: np.ndarray | None = None, *, fair: bool = False) -> dict:
    """The score of a forecast submission (the forecast envs' reward is ``-R``): the whole assembly.

    One rule for both formats: samples (n, 24) are scored by :func:`rcrps` with the exact CRPS of their
    empirical distribution (``estimator="nrg"``); quantiles (24, 9) at levels 0.1..0.9 are the
    distribution they define, their 9 values as equally weighted atoms (:func:`quantile_atoms`), scored
    the same way, so the same numbers score identically in either format. A missing (invalid)
    submission, or a score that is not finite, gets the cap. With ``fair=True`` the same RCRPS with
    CiK's fair estimator is added (``"rcrps_fair"``, for samples that are independent model draws, as
    CiK's direct prompt; ``None`` for quantiles and for fewer than 2 samples).

    Args:
        submission: a :class:`fwgym.core.contract.ForecastSubmission` (validated: finite, bounded by
            ``MAX_FORECAST_MAGNITUDE * scale``), or None for an invalid or missing forecast.
        y: (24,) realised (scenario) target, raw units.
        alpha: the task family's normaliser (:func:`fwgym.context.alpha.rcrps_alpha`).
        roi, lower, upper: the scenario's region of interest and bounds (or None).

    Returns:
        ``{"rcrps": RCRPS (RCRPS_CAP when invalid or not finite), "R": min(rcrps, RCRPS_CAP),
        "rcrps_no_violation": the same RCRPS without its bound-violation term (alpha times the
        RoI-weighted CRPS alone, :func:`rcrps_terms`; uncapped, RCRPS_CAP when invalid or not finite;
        equal to rcrps, bit for bit, when nothing violates a bound), "crps": mean per-step CRPS (nrg)
        in raw units (None when invalid)}``, plus ``"rcrps_fair"`` (uncapped, the cap when not finite;
        ``None`` where it does not apply) when ``fair``. Never raises for a validated submission.
    """
    if submission is None:
        return {"rcrps": RCRPS_CAP, "R": RCRPS_CAP, "rcrps_no_violation": RCRPS_CAP, "crps": None,
                **({"rcrps_fair": None} if fair else {})}
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    # one memory layout for both formats, so that the same numbers give the same float sums bit for bit
    paths = quantile_atoms(submission.values) if submission.kind == "quantiles" else \
        np.ascontiguousarray(submission.values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        step = crps_ensemble(paths, y, estimator="nrg")
        base, penalty = _rcrps_parts(paths, y, roi, lower, upper, RCRPS_BETA, "nrg")
        score, no_violation = float(alpha * (base + penalty)), float(alpha * base)  # as rcrps and rcrps_terms
        crps_mean = float(np.mean(step))
        out = {"rcrps": score if math.isfinite(score) else RCRPS_CAP, "R": 0.0,
               "rcrps_no_violation": no_violation if math.isfinite(no_violation) else RCRPS_CAP,
               "crps": crps_mean if math.isfinite(crps_mean) else None}
        if fair:
            drawn = submission.kind == "samples" and len(paths) >= 2
            f = rcrps(paths, y, alpha, roi, lower, upper, estimator="fair") if drawn else None
            out["rcrps_fair"] = None if f is None else (f if math.isfinite(f) else RCRPS_CAP)
    out["R"] = min(out["rcrps"], RCRPS_CAP)
    return out


def range_alpha(targets) -> float:
    """RCRPS normaliser ``alpha = 1 / mean_i (max - min of target_i)`` of a task family's instances
    (Context is Key §5.1), from their targets (float arrays, raw units). The instances are chosen by
    :func:`fwgym.context.alpha.rcrps_alpha`.

    Raises:
        ValueError: no targets, or a mean range that is not > 0.
    """
    ranges = [float(np.ptp(t)) for t in targets]
    if not ranges or not np.mean(ranges) > 0:
        raise ValueError("no targets with a positive mean range")
    return 1.0 / float(np.mean(ranges))
