"""The RCRPS normaliser of a task family (Context is Key §5.1): :func:`rcrps_alpha`, :func:`case_alpha`.

A task family here is one series of one domain with one scenario family (or none). Its ``alpha`` is
``1 / mean target range`` over held-out **train**-split instances of the family, which all precede the dev
and test periods (:func:`fwgym.core.scoring.range_alpha`). It lives in the context room because a
family's instances are the family's scenarios (:func:`fwgym.context.scenarios.make_scenario`) applied to
train cases; the scorer (:func:`fwgym.core.scorer.score_submission`) receives it, as it receives the
domain's sigma.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from fwgym.context.scenarios import Scenario, fits, make_scenario
from fwgym.core.cases import Case, build_cases
from fwgym.core.scoring import range_alpha

__all__ = ["ALPHA_SCENARIO_SEED", "ALPHA_SCENARIO_CASES", "rcrps_alpha", "case_alpha"]

#: seed of the scenarios drawn on train cases for :func:`rcrps_alpha` (fixed, as CiK's scaling seeds)
ALPHA_SCENARIO_SEED = 0
#: train cases (evenly spaced) per series on which a scenario family's alpha is measured (CiK: 25 instances)
ALPHA_SCENARIO_CASES = 200


def rcrps_alpha(domain: str, series_id: str, family: str | None = None) -> float:
    """RCRPS normaliser ``alpha = 1 / mean target range`` of the task family (Context is Key §5.1).

    The mean range (max - min of the 24 target hours) is taken over the series' held-out **train**-split
    cases. As in CiK (whose scaling takes the range of each instance's future target, announced event
    included, over 25 instances), with a family the range is that of the scenario's target: the family's
    scenario (seed :data:`ALPHA_SCENARIO_SEED`) applied to each of :data:`ALPHA_SCENARIO_CASES` evenly
    spaced train cases of the series that the family fits (all of them if fewer; drawing a scenario costs ~0.1 ms, and the mean
    over 200 cases is within 2 % of the mean over all ~2,800 of an electricity series). Without a family,
    every train case. Cached per (domain, series, family).

    Raises:
        ValueError: the series has no train case or a zero mean range; unknown family.
    """
    return _alpha_cache(domain, series_id, family)


def case_alpha(case: Case, scenario: Scenario | None) -> float:
    """:func:`rcrps_alpha` of a case's task family: its series and its scenario's family (or none)."""
    return rcrps_alpha(case.domain, case.series_id, None if scenario is None else scenario.family)


@lru_cache(maxsize=None)
def _alpha_cache(domain: str, series_id: str, family: str | None) -> float:
    cases = [c for c in build_cases(domain, "train") if c.series_id == series_id]
    if family is None:
        targets = [c.target() for c in cases]
    else:
        cases = [c for c in cases if fits(c, family)]  # a family that fits only some cases (a domain's own)
        if len(cases) > ALPHA_SCENARIO_CASES:
            cases = [cases[i] for i in np.unique(np.linspace(0, len(cases) - 1, ALPHA_SCENARIO_CASES).round().astype(int))]
        targets = [make_scenario(c, ALPHA_SCENARIO_SEED, family).apply(c.target()) for c in cases]
    try:
        return range_alpha(targets)
    except ValueError:
        raise ValueError(f"no train cases with a positive target range for {domain}/{series_id}"
                         + (f" ({family})" if family else "")) from None
