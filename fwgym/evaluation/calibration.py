"""Sigma calibration (DESIGN §5): the per-domain scale of the normalised excess loss R, frozen in
``fwgym/config/sigma.json`` (:data:`fwgym.core.scoring.SIGMA_PATH`) and recomputed by ``fwgym calibrate-sigma``.

``sigma_d`` is the case-weighted mean excess loss ``loss - F`` of the hour-of-day empirical policy
(the protocol's sigma policy, :data:`fwgym.evaluation.DEFAULT_REFERENCE`) on the pre-test cases of
domain ``d`` (the dev split by default; :data:`CALIBRATION_SPLITS` lie strictly before the test period,
so sigma uses no test outcome). ``sigma_config(calibrate_sigma())`` reproduces the shipped file, the
sigma values to 1e-12 relative (``tests/test_calibration.py``; on this code they differ from the
frozen values in the last binary digit).
"""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from fwgym.core.cases import DEV_SPLIT, TRAIN_SPLIT
from fwgym.evaluation.leaderboard import DEFAULT_REFERENCE
from fwgym.evaluation.runner import evaluate
from fwgym.core.scoring import REFERENCE_SIGMA, SIGMA_FILE_DOMAINS, aggregate

__all__ = ["CALIBRATION_SPLITS", "SIGMA_POLICY", "calibrate_sigma", "sigma_config"]

#: splits sigma may be calibrated on (before the test period)
CALIBRATION_SPLITS: tuple[str, ...] = (TRAIN_SPLIT, DEV_SPLIT)
#: the policy whose mean excess loss is sigma (the protocol's choice)
SIGMA_POLICY = DEFAULT_REFERENCE


def calibrate_sigma(split: str = DEV_SPLIT, policy: str = SIGMA_POLICY, workers: int = 1,
                    progress: bool = True, domains: Sequence[str] | None = None) -> dict:
    """Per-domain sigma = case-weighted mean excess loss (loss - floor) of ``policy`` on ``split``.

    Every case of the split is evaluated (:func:`fwgym.evaluation.evaluate`, sigma 1: sigma enters
    neither loss nor floor) and the excess losses aggregated with the weights of
    :func:`fwgym.core.scoring.case_weights`, domain by domain.

    Args:
        split: one of :data:`CALIBRATION_SPLITS`. policy: a policy name (default :data:`SIGMA_POLICY`).
        workers: local processes. progress: show a progress bar.
        domains: the domains to calibrate (default: those the packaged calibration file holds,
            :data:`fwgym.core.scoring.SIGMA_FILE_DOMAINS`; a plug-in domain's value goes into its
            :attr:`fwgym.domains.Domain.sigma`).

    Returns:
        ``{"sigma": {domain: value}, "policy", "split", "cases": {domain: n}}`` (sigma in units of
        the scale, like the loss).

    Raises:
        ValueError: ``split`` not in :data:`CALIBRATION_SPLITS`; an unknown policy.
    """
    if split not in CALIBRATION_SPLITS:
        raise ValueError(f"sigma is calibrated on a split before the test period {list(CALIBRATION_SPLITS)}, "
                         f"got {split!r}")
    domains = tuple(SIGMA_FILE_DOMAINS if domains is None else domains)
    ones = {d: 1.0 for d in domains}  # sigma does not enter loss or floor
    out: dict = {"sigma": {}, "policy": policy, "split": split, "cases": {}}
    for d in domains:
        recs = evaluate([policy], split=split, domains=[d], workers=workers, progress=progress, sigma=ones)
        excess = [{**r, "excess": r["loss"] - r["floor"]} for r in recs]
        out["sigma"][d] = aggregate(excess, fields=("excess",))["excess"]
        out["cases"][d] = len(recs)
    return out


def sigma_config(result: Mapping) -> str:
    """The text of a sigma calibration file (the format of ``fwgym/config/sigma.json``, read by
    :func:`fwgym.core.scoring.load_sigma`) for a :func:`calibrate_sigma` result: the result, the FWBench
    paper's reference values (``reference_fwbench_paper``, for comparison) and the command that
    reproduces it, as indented JSON with sorted keys."""
    doms = list(result["sigma"])
    only = f" --domain {doms[0]}" if len(doms) == 1 and doms[0] not in SIGMA_FILE_DOMAINS else ""
    config = {**result, "reference_fwbench_paper": REFERENCE_SIGMA,
              "command": f"fwgym calibrate-sigma --split {result['split']}{only}"}
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
