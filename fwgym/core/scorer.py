"""The episode scorer: the score fields of one submission on one case (DESIGN §3, §5, §8).

:func:`score_submission` is the ONE place where a submission (a decision plan or a probabilistic
forecast, or none for an invalid episode) becomes its score: the env calls it when an episode ends
(:meth:`fwgym.envs.fwbench.FWBenchEnv._terminate`) and the results verifier calls it again on every
stored record before a leaderboard or report aggregates it (:mod:`fwgym.evaluation.verify`). The
formulas themselves are those of :mod:`fwgym.core.scoring` (R, S, CRPS, RCRPS) and :mod:`fwgym.core.optimizer`
(realised loss, perfect-demand floor, invalid loss); this module only wires a case, its scenario and
the submission to them, so the env and the verifier cannot drift apart.

This module knows cases, scenarios, the contract, the optimizer and the scoring formulas; no env,
agent or CLI.
"""
from __future__ import annotations

import numpy as np

from fwgym.core.cases import Case
from fwgym.core.contract import ForecastSubmission, Plan
from fwgym.core.optimizer import invalid_loss, perfect_demand_plan, realised_loss
from fwgym.context.scenarios import Scenario
from fwgym.core.scoring import BUDGET, case_score, rcrps_alpha, score_forecast

__all__ = ["TASKS", "realised_target", "score_submission"]

#: the tasks an episode can have: submit 8 capacities, or a probabilistic forecast of the 24 target hours
TASKS: tuple[str, ...] = ("decision", "forecast")


def realised_target(case: Case, scenario: Scenario | None) -> np.ndarray:
    """HINDSIGHT: the 24 realised target values the case is scored on (raw units, float64 (24,)),
    transformed by the case's scenario when it has one (the context and forecast suites)."""
    t = case.target()
    return scenario.apply(t) if scenario is not None else np.array(t)


def score_submission(case: Case, scenario: Scenario | None, task: str, submission: Plan | ForecastSubmission | None,
                     credits: int, *, sigma: float, budget: int = BUDGET, credit_weight: float = 0.0,
                     target: np.ndarray | None = None) -> dict:
    """The score fields of one episode.

    Args:
        case: the case (:class:`fwgym.core.cases.Case`).
        scenario: its context scenario (:func:`fwgym.context.scenarios.make_scenario`) or ``None``.
        task: ``"decision"`` or ``"forecast"``.
        submission: the accepted answer (:class:`~fwgym.core.contract.Plan` in decision episodes,
            :class:`~fwgym.core.contract.ForecastSubmission` in forecast episodes), or ``None`` for an episode
            that ended without one (invalid submission, abstained, call limit).
        credits: credits charged in the episode (>= 0).
        sigma: the domain's sigma_d (decision loss scale, > 0).
        budget: the episode budget B of ``S`` (a budget of 0 scores with the protocol's 113,726).
        credit_weight: forecast episodes: weight of ``credits / B`` in ``S``.
        target: the realised target if the caller already holds it (must equal
            :func:`realised_target`; the env passes its episode's copy), else computed here.

    Returns:
        decision: ``{"loss", "floor", "R", "S", "levels"}`` (loss and floor in units of the scale; an
        invalid episode scores ``mean_h max_g cost + 1``, ``levels`` ``None``); forecast: ``{"rcrps",
        "crps", "alpha", "loss" (= rcrps, uncapped), "floor" (0.0), "R" (min(rcrps, 5)), "S" (R +
        credit_weight * credits / B), "levels" (None), "rcrps_no_violation" (the RCRPS without its bound-violation
        term, uncapped; the cap for an invalid forecast), "rcrps_fair" (the RCRPS with CiK's fair estimator for
        sample submissions, for model-drawn samples such as CiK's direct prompt; ``None`` for quantiles and
        invalid forecasts)}``; an invalid forecast scores the cap 5.

    Raises:
        ValueError: unknown task, a submission of the other task, non-finite inputs (:func:`fwgym.core.scoring.case_score`).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    y = realised_target(case, scenario) if target is None else target
    b = budget or BUDGET
    if task == "forecast":
        if submission is not None and not isinstance(submission, ForecastSubmission):
            raise ValueError(f"a forecast episode scores a ForecastSubmission, got {type(submission).__name__}")
        return _score_forecast(case, scenario, y, submission, credits, credit_weight, b)
    if submission is not None and not isinstance(submission, Plan):
        raise ValueError(f"a decision episode scores a Plan, got {type(submission).__name__}")
    if submission is not None:  # one compiled call: plan_loss and the perfect-demand floor on the realised cost table
        loss, floor = realised_loss(y, case.scale, case.shortage, submission.indices)
    else:
        best = perfect_demand_plan(y, case.scale, case.shortage)
        floor, loss = best.expected_loss, invalid_loss(best.cost)
    r, s = case_score(loss, floor, credits, sigma, b)
    return {"loss": loss, "floor": floor, "R": r, "S": s,
            "levels": [float(x) for x in submission.levels] if submission is not None else None}


def _score_forecast(case: Case, sc: Scenario | None, y: np.ndarray, sub: ForecastSubmission | None, credits: int,
                    credit_weight: float, budget: int) -> dict:
    """RCRPS of the submitted forecast (:func:`fwgym.core.scoring.score_forecast`; an invalid forecast or a
    non-finite score scores the cap 5)."""
    alpha = rcrps_alpha(case.domain, case.series_id, None if sc is None else sc.family)
    roi, lower, upper = (sc.roi, sc.lower, sc.upper) if sc is not None else (None, None, None)
    res = score_forecast(sub, y, alpha, roi, lower, upper, fair=True)
    cost = credit_weight * credits / budget
    # one schema for every env: R = capped RCRPS, S = R + credit cost, loss = RCRPS (the cap if not finite);
    # rcrps_fair: the same RCRPS with CiK's fair estimator (a label for model-drawn samples; never the score)
    # rcrps_no_violation: the same RCRPS without its bound-violation term (what the bounds cost, apart)
    return {**res, "alpha": alpha, "loss": res["rcrps"], "floor": 0.0, "S": res["R"] + cost, "levels": None}
