"""What the numbers of each evaluation suite mean: the names of a record's ``loss`` and ``R``, the
score's formula and weights (DESIGN §5 and §8; ``FWBenchEnv._score_forecast``).

The one source of these names for every output: the leaderboard's tables (:mod:`fwgym.evaluation.leaderboard`),
the figures (:mod:`fwgym.plots`) and the HTML report. The decision and context suites score
``S = (R + c/B) / 2`` with ``R = (loss - F) / sigma`` (the context suite on the scenario-transformed
target), the forecast suite ``S = R + w * c/B`` with ``R = min(RCRPS, 5)`` (``w`` = the env's
``credit_weight``, recovered from the records by :func:`credit_weight_of`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fwgym.core.scoring import BUDGET, RCRPS_CAP

#: the evaluation suites (``fwgym evaluate --suite``)
SUITE_NAMES: tuple[str, ...] = ("decision", "context", "forecast")


@dataclass(frozen=True)
class SuiteMetric:
    """What the numbers of a suite's records mean.

    Attributes:
        suite: ``"decision"``, ``"context"`` or ``"forecast"``.
        y_field: the record field a frontier plots against credits (``"loss"``, or ``"R"`` = capped RCRPS).
        y_label: its axis label. loss_name / R_name: short names of the record's ``loss`` and ``R``.
        loss_label: a longer description of ``loss``.
        formula: the score's definition in one line (plain text with Unicode symbols).
        r_weight, credit_weight: ``S = r_weight * R + credit_weight * credits / B``.
        has_floor: the record's ``floor`` is the perfect-demand floor (``False``: it is 0).
        has_plan: episodes submit capacities (``False``: a forecast).
        metric_name: the name of ``loss`` in a sentence or a table title (``"decision loss"``, ``"RCRPS"``).
    """

    suite: str
    y_field: str
    y_label: str
    loss_name: str
    loss_label: str
    R_name: str
    formula: str
    r_weight: float
    credit_weight: float
    has_floor: bool
    has_plan: bool
    metric_name: str = "decision loss"

    def equal_s_y(self, s: float, credits: np.ndarray, floor: float, sigma: float, budget: float) -> np.ndarray:
        """y of the line of equal score ``s`` at mean ``credits``: ``floor + sigma * (s - w_c c/B) / w_R``
        (decision suites: y = loss with R = (loss - floor)/sigma; forecast: y = R with floor 0, sigma 1)."""
        return floor + sigma * (s - self.credit_weight * np.asarray(credits, dtype=np.float64) / budget) / self.r_weight


def suite_metric(suite: str = "decision", credit_weight: float | None = None) -> SuiteMetric:
    """The metric of a suite (DESIGN §5 and §8; ``FWBenchEnv._score_forecast``).

    Args:
        suite: ``"decision"``, ``"context"`` or ``"forecast"``.
        credit_weight: the forecast env's ``credit_weight`` ``w`` (default 0, the env's default);
            ignored by the decision suites, whose weight is 1/2.

    Raises:
        ValueError: an unknown suite or a negative / non-finite weight.
    """
    if suite not in SUITE_NAMES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {list(SUITE_NAMES)}")
    if suite == "forecast":
        w = 0.0 if credit_weight is None else float(credit_weight)
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"credit_weight must be finite and >= 0, got {credit_weight!r}")
        cap = f"{RCRPS_CAP:g}"
        return SuiteMetric("forecast", "R", f"RCRPS (capped at {cap})", "RCRPS",
                           "Region-of-Interest CRPS of the submitted forecast (uncapped)", f"min(RCRPS, {cap})",
                           f"S = R + {w:g}·c/B, R = min(RCRPS, {cap})", 1.0, w, False, False, "RCRPS")
    target = "the scenario-transformed target" if suite == "context" else "the realised target"
    return SuiteMetric(suite, "loss", "decision loss (normalised)", "loss",
                       f"decision loss of the submitted capacities on {target} (mean hourly cost / scale)",
                       "(loss − F)/σ", "S = (R + c/B)/2, R = (loss − F)/σ", 0.5, 0.5, True, True, "decision loss")


def credit_weight_of(records: Sequence[dict], budget: float = BUDGET) -> float | None:
    """The forecast suite's credit weight ``w = (S - R) * B / credits`` recovered from records that
    spent credits (``None`` when none did).

    Raises:
        ValueError: records that disagree on ``w`` (relative difference above 1e-6).
    """
    ws = [(float(r["S"]) - float(r["R"])) * budget / float(r["credits"]) for r in records
          if float(r.get("credits") or 0) > 0]
    if not ws:
        return None
    w = float(np.median(ws))
    if any(abs(x - w) > 1e-6 * max(1.0, abs(w)) for x in ws):
        raise ValueError(f"the records disagree on the credit weight of S (from {min(ws):g} to {max(ws):g}): "
                         "results of different forecast-suite settings are merged")
    return 0.0 if abs(w) < 1e-9 else w


def infer_suite(records: Sequence[dict], suite: str | None = None) -> str:
    """The suite of records: ``suite`` when given (checked), else ``"forecast"`` when they carry
    ``rcrps``, ``"context"`` when they name a ``scenario``, else ``"decision"``.

    Result files do not name their suite: pass the one of their run manifest (:func:`results_suite`).

    Raises:
        ValueError: an unknown suite name.
    """
    if suite is not None:
        if suite not in SUITE_NAMES:
            raise ValueError(f"unknown suite {suite!r}; expected one of {list(SUITE_NAMES)}")
        return suite
    if any(r.get("rcrps") is not None for r in records):
        return "forecast"
    if any(r.get("scenario") for r in records):
        return "context"
    return "decision"


__all__ = ["SUITE_NAMES", "SuiteMetric", "suite_metric", "credit_weight_of", "infer_suite"]
