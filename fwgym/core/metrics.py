"""The score of an episode per task: ``S = r_weight * R + credit_weight * credits / B`` and what ``R`` is
(DESIGN §5 and §8). The ONE definition of the S decomposition: the scorer (:mod:`fwgym.core.scorer`)
computes ``S`` with :meth:`Metric.score`, the env's dense reward pays :meth:`Metric.credit_cost` per
charge and ``-r_weight * R`` at the end (so the episode's rewards sum to ``-S``), and the suites
(:mod:`fwgym.suites`) name these metrics in every table and figure.

* ``decision`` task (the decision and context suites): ``R = (loss - F) / sigma_d``,
  ``S = (R + c/B) / 2`` (FWBench protocol §5; weights 1/2 and 1/2);
* ``forecast`` task (the forecast suite): ``R = min(RCRPS, 5)``, ``S = R + w * c/B`` with ``w`` the
  env's ``credit_weight`` (default 0).

This module is the lowest of the scoring rules: it imports nothing of fwgym (:mod:`fwgym.core.scoring`
builds its formulas on it).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TASKS", "RCRPS_CAP", "Metric", "DECISION_METRIC", "FORECAST_METRIC", "task_metric"]

#: RCRPS values are capped at this value when aggregated, for invalid forecasts, and for non-finite scores
#: (the forecast task's ``R = min(RCRPS, RCRPS_CAP)``)
RCRPS_CAP = 5.0
#: the tasks an episode can have: submit 8 capacities, or a probabilistic forecast of the 24 target hours
TASKS: tuple[str, ...] = ("decision", "forecast")


@dataclass(frozen=True)
class Metric:
    """How an episode of a task is scored: ``S = r_weight * R + credit_weight * credits / B``.

    Attributes:
        task: ``"decision"`` or ``"forecast"`` (:data:`TASKS`).
        r_weight, credit_weight: the weights of ``R`` and of ``credits / B`` in ``S`` (>= 0, finite).
        R_formula: what ``R`` is, in one line of plain text with Unicode symbols (``"(loss − F)/σ"``).
        y_field: the record field a frontier plots against credits (``"loss"``, or ``"R"`` = capped RCRPS).
        y_label: its axis label. loss_name / R_name: short names of a record's ``loss`` and ``R``.
        metric_name: the name of ``loss`` in a sentence or a table title (``"decision loss"``, ``"RCRPS"``).
        has_floor: a record's ``floor`` is the perfect-demand floor (``False``: it is 0).
        has_plan: episodes submit capacities (``False``: a forecast).
    """

    task: str
    r_weight: float
    credit_weight: float
    R_formula: str
    y_field: str
    y_label: str
    loss_name: str
    R_name: str
    metric_name: str
    has_floor: bool
    has_plan: bool

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {self.task!r}")
        for name in ("r_weight", "credit_weight"):
            w = getattr(self, name)
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {w!r}")

    def score(self, R: float, credits: float, budget: float) -> float:
        """``S`` of an episode: ``r_weight * (R + credits / budget)`` when the two weights are equal (the
        protocol's ``(R + c/B) / 2``), else ``r_weight * R + credit_weight * credits / budget``."""
        if self.r_weight == self.credit_weight:
            return float(self.r_weight * (R + credits / budget))
        return float(self.r_weight * R + self.credit_weight * credits / budget)

    def credit_cost(self, credits: float, budget: float) -> float:
        """The credit part of ``S`` for ``credits`` (``credit_weight * credits / budget``): what the dense
        reward pays (negated) when the credits are charged."""
        return float(self.credit_weight * credits / budget)

    @property
    def formula(self) -> str:
        """``S`` and ``R`` in one line (``"S = (R + c/B)/2, R = (loss − F)/σ"``)."""
        if self.r_weight == self.credit_weight:
            s = "S = (R + c/B)/2" if self.r_weight == 0.5 else f"S = {self.r_weight:g}·(R + c/B)"
        else:
            r = "R" if self.r_weight == 1 else f"{self.r_weight:g}·R"
            s = f"S = {r} + {self.credit_weight:g}·c/B"
        return f"{s}, R = {self.R_formula}"

    def with_credit_weight(self, credit_weight: float | None) -> Metric:
        """This metric with another ``credit_weight`` (``None``: this one).

        Raises:
            ValueError: a negative or non-finite weight.
        """
        if credit_weight is None:
            return self
        return dataclasses.replace(self, credit_weight=float(credit_weight))

    def equal_s_y(self, s: float, credits: np.ndarray, floor: float, sigma: float, budget: float) -> np.ndarray:
        """y of the line of equal score ``s`` at mean ``credits``: ``floor + sigma * (s - w_c c/B) / w_R``
        (decision task: y = loss with R = (loss - floor)/sigma; forecast: y = R with floor 0, sigma 1)."""
        return floor + sigma * (s - self.credit_weight * np.asarray(credits, dtype=np.float64) / budget) / self.r_weight


_CAP = f"{RCRPS_CAP:g}"
#: the decision task's metric (FWBench protocol §5)
DECISION_METRIC = Metric("decision", 0.5, 0.5, "(loss − F)/σ", "loss", "decision loss (normalised)", "loss",
                         "(loss − F)/σ", "decision loss", has_floor=True, has_plan=True)
#: the forecast task's metric with the forecast envs' default credit weight 0 (DESIGN §8)
FORECAST_METRIC = Metric("forecast", 1.0, 0.0, f"min(RCRPS, {_CAP})", "R", f"RCRPS (capped at {_CAP})", "RCRPS",
                         f"min(RCRPS, {_CAP})", "RCRPS", has_floor=False, has_plan=False)
_BY_TASK = {"decision": DECISION_METRIC, "forecast": FORECAST_METRIC}


def task_metric(task: str, credit_weight: float | None = None) -> Metric:
    """The metric of a task; ``credit_weight`` sets the forecast task's ``w`` (the env's ``credit_weight``;
    ignored by the decision task, whose weights are the protocol's 1/2 and 1/2).

    Raises:
        ValueError: an unknown task, or a negative / non-finite weight.
    """
    if task not in _BY_TASK:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    metric = _BY_TASK[task]
    return metric.with_credit_weight(credit_weight) if task == "forecast" else metric
