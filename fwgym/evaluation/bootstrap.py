"""Paired series-cluster bootstrap of aggregate differences between policies (DESIGN §5; protocol §5.3).

``paired_bootstrap(records, reference, policy)`` gives percentile intervals of
``aggregate(policy) - aggregate(reference)`` under the protocol's resampling: series ids (balancing
authorities, stations) are the clusters, drawn with replacement within each domain, and every draw
re-aggregates with the cohort and (series x lead) weights of :func:`fwgym.core.scoring.case_weights`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

from fwgym.evaluation.records import by_policy, check_result_set
from fwgym.core.scoring import aggregate
from fwgym.validation import check_int

__all__ = ["N_BOOT", "BOOT_SEED", "ClusterBootstrap", "paired_bootstrap"]

N_BOOT = 10_000  #: bootstrap draws (protocol §5.3)
BOOT_SEED = 1701  #: bootstrap seed (protocol §5.3)


class ClusterBootstrap:
    """Series-cluster bootstrap of the aggregate of per-case values (the weights of
    :func:`fwgym.core.scoring.case_weights` recomputed on every resample).

    A draw resamples, independently in every domain, as many series ids as the domain has, with
    replacement; a series drawn ``m`` times contributes its (series x lead) groups ``m`` times. With
    ``c_s`` the draw count of series ``s`` and ``v_g`` the mean of group ``g`` (cases of one series and
    lead in one cohort), the resampled aggregate is::

        mean_domain  mean_{cohort present}  [ sum_g c_s(g) v_g / sum_g c_s(g) ]

    which equals ``sum_i w_i x_i`` with the case weights of the resampled set (and the plain
    aggregate when every ``c_s = 1``). Draws are made once per (records layout, n_boot, seed) so every
    policy is compared on the same resamples.

    Args:
        cases: the records whose layout is resampled (their ``domain``, ``series_id``, ``cohort``,
            ``lead``), one per case, in the order of the values later given to :meth:`draws`.
        n_boot: number of draws (a positive integer). seed: seed of ``numpy.random.default_rng``.

    Raises:
        ValueError: ``n_boot`` is not a positive integer.
    """

    def __init__(self, cases: Sequence[Mapping], n_boot: int, seed: int):
        n_boot = check_int("n_boot", n_boot, minimum=1)
        self.n_cases = len(cases)
        rng = np.random.default_rng(seed)
        self.domains = []
        for dom in sorted({c["domain"] for c in cases}):
            idx = [i for i, c in enumerate(cases) if c["domain"] == dom]
            series = sorted({cases[i]["series_id"] for i in idx})
            cohorts = sorted({cases[i]["cohort"] for i in idx})
            s_of, c_of = {s: k for k, s in enumerate(series)}, {c: k for k, c in enumerate(cohorts)}
            groups: dict[tuple, list[int]] = defaultdict(list)
            for i in idx:
                c = cases[i]
                groups[(c_of[c["cohort"]], s_of[c["series_id"]], c["lead"])].append(i)
            n_s = len(series)
            draws = rng.integers(0, n_s, size=(int(n_boot), n_s))
            flat = (draws + n_s * np.arange(int(n_boot))[:, None]).ravel()
            counts = np.bincount(flat, minlength=int(n_boot) * n_s).reshape(int(n_boot), n_s).astype(np.float64)
            self.domains.append((dom, n_s, len(cohorts), list(groups.items()), counts))

    @property
    def clusters(self) -> dict[str, int]:
        """``{domain: number of series}`` (the clusters drawn per domain)."""
        return {dom: n_s for dom, n_s, *_ in self.domains}

    def draws(self, values: np.ndarray) -> np.ndarray:
        """Resampled aggregates of per-case ``values`` (n_cases, M): array (n_boot, M)."""
        x = np.asarray(values, dtype=np.float64)
        x = x.reshape(self.n_cases, -1)
        per_domain = []
        for _, n_s, n_c, groups, counts in self.domains:
            V = np.zeros((n_s, n_c, x.shape[1]))
            N = np.zeros((n_s, n_c))
            for (c, s, _lead), members in groups:
                V[s, c] += x[members].mean(axis=0)
                N[s, c] += 1.0
            num = np.einsum("bs,scm->bcm", counts, V)
            den = counts @ N  # (n_boot, n_c)
            with np.errstate(invalid="ignore", divide="ignore"):
                cohort = num / den[:, :, None]
            present = (den > 0)[:, :, None]
            per_domain.append(np.where(present, cohort, 0.0).sum(axis=1) / present.sum(axis=1))
        return np.mean(per_domain, axis=0)


def _aligned(records: Sequence[Mapping], reference: str, policy: str) -> tuple[list[dict], list[dict]]:
    groups = by_policy(records)
    for p in (reference, policy):
        if p not in groups:
            raise ValueError(f"policy {p!r} is not in the results (policies: {list(groups)})")
    check_result_set(groups[reference] + (groups[policy] if policy != reference else []))
    ref = groups[reference]
    other = {r["case_id"]: r for r in groups[policy]}
    return ref, [other[r["case_id"]] for r in ref]


def paired_bootstrap(records: Sequence[Mapping], reference: str, policy: str, n_boot: int = N_BOOT,
                     seed: int = BOOT_SEED, metrics: Sequence[str] = ("S", "loss"), level: float = 0.95,
                     *, bootstrap: ClusterBootstrap | None = None) -> dict:
    """Paired cluster-bootstrap interval for ``aggregate(policy) - aggregate(reference)``.

    Pairs are the two policies' records on the same case. Clusters are series ids, resampled with
    replacement within each domain (``n_boot`` draws, generator ``numpy.random.default_rng(seed)``);
    every draw re-aggregates the paired differences with the case weights of
    :func:`fwgym.core.scoring.case_weights` (cohort weights, series x lead groups) on the resampled set.
    The interval is the percentile interval (``(1 - level)/2`` and ``(1 + level)/2`` quantiles) of the
    resampled differences. Protocol §5.3 ("paired authority/station cluster bootstrap (10,000
    resamples, seed 1701) for contrasts"); percentile bootstrap: Efron & Tibshirani (1993), ch. 13.

    Args:
        records: result records holding at least both policies (other policies are ignored).
        reference, policy: policy names; ``policy - reference`` is reported (negative = policy better).
        n_boot: number of draws (default 10,000). seed: generator seed (default 1701).
        metrics: record fields to compare (default S and loss).
        level: interval coverage (default 0.95).
        bootstrap: resamples to reuse, built as ``ClusterBootstrap(reference's records in their order
            in records, n_boot, seed)``, so several policies are compared on the same draws
            (:func:`fwgym.evaluation.leaderboard.leaderboard` does this); default: built here.

    Returns:
        ``{"policy", "reference", "n_boot", "seed", "level", "n_cases", "clusters": {domain: n_series},
        <metric>: {"diff", "lo", "hi"}, ..., "diff", "lo", "hi"}`` with ``diff`` the point estimate
        (aggregate difference ``policy - reference``); the top-level ``diff``, ``lo``, ``hi`` repeat the
        first metric's (S by default).

    Raises:
        ValueError: a policy missing, the two policies on different cases, duplicated records,
            ``n_boot`` < 1 or ``level`` outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    ref, pol = _aligned(records, reference, policy)
    boot = bootstrap if bootstrap is not None else ClusterBootstrap(ref, n_boot, seed)
    diffs = np.array([[float(b[m]) - float(a[m]) for m in metrics] for a, b in zip(ref, pol)])
    draws = boot.draws(diffs)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    agg_ref, agg_pol = aggregate(ref, fields=metrics), aggregate(pol, fields=metrics)
    out: dict[str, Any] = {"policy": policy, "reference": reference, "n_boot": int(n_boot), "seed": seed,
                           "level": level, "n_cases": len(ref), "clusters": boot.clusters}
    for k, m in enumerate(metrics):
        out[m] = {"diff": agg_pol[m] - agg_ref[m], "lo": float(lo[k]), "hi": float(hi[k])}
    out.update(out[metrics[0]])
    return out

