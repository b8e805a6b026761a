"""Hindsight oracles (reference rows only; they read the realised target through the env's
explicit, oracle-only :meth:`~fwgym.envs.fwbench.FWBenchEnv.hindsight`).

* :class:`PerfectDemandOracle` — the optimal feasible plan for the realised demand (S = 0).
* :class:`MenuOracle` — per case, score every plan of a menu in hindsight and EXECUTE the best one
  through ``env.step`` (paying only for it): ``catalog_oracle`` (8 free classical plans,
  ``seasonal_empirical`` and the TSFMs whose weights are available, each at full context 336 and the
  minimal covering horizon, if affordable) and ``free_menu_oracle`` (the 8 classical plans only).
  FWBench protocol §6: "per case, hindsight pick from 8 classical + affordable TSFM plans; pays only
  the chosen plan".

**The hindsight path.** An oracle declares ``requires_hindsight = True``; :func:`fwgym.agents.run_episode`
passes it ``env.unwrapped.hindsight()`` only with an explicit :class:`~fwgym.agents.base.HindsightGrant`
for that agent, and the evaluation (and the report's replays) take the grant from :func:`oracle_grant`,
which grants it to instances of the oracle classes of this module and to nothing else: not to subclasses,
not to user factories, never to an isolated agent (SECURITY.md).
"""
from __future__ import annotations

import json

from fwgym.agents.base import HindsightGrant
from fwgym.core.cases import get_case
from fwgym.forecasters.base import ForecastBackendError, ModelUnavailable
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.covering import COVERING_CONTEXT, covering_credits, covering_forecast, plan_on_forecast
from fwgym.forecasters.registry import check_models, get_forecaster
from fwgym.core.optimizer import plan_loss
from fwgym.core.scoring import BUDGET, case_score, load_sigma
from fwgym.tools import classical_plan_result

__all__ = ["PerfectDemandOracle", "priced_candidate", "MenuOracle", "catalog_oracle", "free_menu_oracle",
           "ORACLE_CLASSES", "oracle_grant"]


class PerfectDemandOracle:
    """Submits the optimal feasible plan for the realised demand: loss = floor F, credits 0, so S = 0."""

    name = "perfect_demand"
    requires_hindsight = True

    def __init__(self):
        self._plan = None

    def reset(self) -> None:
        self._plan = None

    def set_hindsight(self, hindsight: dict) -> None:
        self._plan = hindsight["perfect_plan"]

    def act(self, observation: dict):
        if self._plan is None:
            raise RuntimeError("PerfectDemandOracle needs hindsight; run it through fwgym.agents.run_episode")
        return {"tool": "submit", "args": {"decisions": self._plan.decisions()}}


def priced_candidate(case, model: str, forecaster=None, budget: float = BUDGET):
    """The plan the covering forecast of ``model`` (full context, minimal covering horizon) would give
    on ``case``, computed WITHOUT paying, by the recipe the ``forecast`` tool uses
    (:mod:`fwgym.forecasters.covering`: same request, cache entry, quantile masses and DP).

    Args:
        case: the :class:`~fwgym.core.cases.Case`.
        model: a priced model name.
        forecaster: the instance serving ``model`` (default: the process-wide one).
        budget: credits available; a request above it is not a candidate.

    Returns:
        ``(credits, PlanResult)``, or ``None`` when the request is unaffordable, the model unavailable,
        or its backend fails.
    """
    f = forecaster or get_forecaster(model)
    try:
        credits = covering_credits(model, case)
    except ValueError:
        return None
    if credits > budget or not f.availability().available:
        return None
    try:
        f.load()
        q = covering_forecast(case, f)
    except (ModelUnavailable, ForecastBackendError, ValueError):
        return None
    return credits, plan_on_forecast(case, q)


class MenuOracle:
    """Hindsight pick of the plan of least S from a menu, executed through the env.

    For each case: every candidate plan's realised loss is ``plan_loss(hindsight["cost"], plan)`` and
    its score ``S = 0.5 * ((loss - floor) / sigma_d + credits / B)`` (:func:`fwgym.core.scoring.case_score`);
    the oracle picks the least S, ties by fewer credits, then by name, and then plays
    ``classical_plan(method)`` (free) or ``forecast(model, context_steps=336)`` + ``plan(forecast_id)``
    (charged at the tariff) and submits that plan. The submitted plan must equal the candidate's
    (else RuntimeError: the env serves a different forecaster than the oracle was given).

    Args:
        menu: ``"catalog"`` (classical + priced models) or ``"free"`` (the 8 classical methods).
        sigma: per-domain sigma used to rank (default: the frozen calibration; pass the env's override
            when the env was built with one).
        models: priced models of the menu (default: the full pool; ignored for ``menu="free"``).
        forecasters: ``{model: QuantileForecaster}`` overrides, the same the env was given.
        name: display name (default ``catalog_oracle`` / ``free_menu_oracle``).

    Attributes (after the first ``act`` of an episode): ``choice`` (method or model name) and
    ``candidates`` (``{name: {"S", "loss", "credits", "levels"}}``).

    Raises:
        ValueError: unknown menu or model.
    """

    requires_hindsight = True

    def __init__(self, menu: str = "catalog", sigma: dict | None = None, models=None, forecasters: dict | None = None,
                 name: str | None = None):
        if menu not in ("catalog", "free"):
            raise ValueError(f"menu must be 'catalog' or 'free', got {menu!r}")
        models = check_models(models) if menu == "catalog" else ()  # default: the protocol's pool
        self.menu, self.models, self.forecasters = menu, models, dict(forecasters or {})
        self._sigma = dict(sigma) if sigma is not None else None
        self.name = name or ("catalog_oracle" if menu == "catalog" else "free_menu_oracle")
        self._hindsight = None
        self.reset()

    def reset(self) -> None:
        self.choice = None
        self.candidates = None
        self._stage = 0
        self._hindsight = None

    def set_hindsight(self, hindsight: dict) -> None:
        self._hindsight = hindsight

    def _rank(self, budget: float) -> None:
        h = self._hindsight
        case = get_case(h["case_id"])
        if self._sigma is None or case.domain not in self._sigma:
            self._sigma = load_sigma(domains=[case.domain])
        sigma, B = self._sigma[case.domain], (budget or BUDGET)
        cands = {m: (0, classical_plan_result(case, m)) for m in CLASSICAL_METHODS}
        for m in self.models:
            got = priced_candidate(case, m, self.forecasters.get(m), budget)
            if got is not None:
                cands[m] = got
        self.candidates = {}
        for m, (credits, res) in cands.items():
            loss = plan_loss(h["cost"], res.plan.indices)
            _, s = case_score(loss, h["floor"], credits, sigma, B)
            self.candidates[m] = {"S": s, "loss": loss, "credits": int(credits),
                                  "levels": [float(x) for x in res.plan.levels]}
        self.choice = min(self.candidates, key=lambda m: (self.candidates[m]["S"], self.candidates[m]["credits"], m))

    def act(self, observation: dict):
        if self._hindsight is None:
            raise RuntimeError(f"{self.name} needs hindsight; run it through fwgym.agents.run_episode")
        last = json.loads(observation["last_result"]) if observation.get("last_result") else {}
        self._stage += 1
        if self._stage == 1:
            self._rank(float(observation["budget_left"][0]))
            if self.choice in CLASSICAL_METHODS:
                return {"tool": "classical_plan", "args": {"method": self.choice}}
            return {"tool": "forecast", "args": {"model": self.choice, "context_steps": COVERING_CONTEXT}}
        if not last.get("ok"):
            raise RuntimeError(f"{self.name}: executing {self.choice} failed: {last.get('error')}")
        if self._stage == 2 and self.choice not in CLASSICAL_METHODS:
            return {"tool": "plan", "args": {"forecast_id": last["result"]["forecast_id"]}}
        plan = last["result"]["plan"]
        if [round(x, 2) for x in self.candidates[self.choice]["levels"]] != plan["levels"]:
            raise RuntimeError(f"{self.name}: the env's {self.choice} plan {plan['levels']} differs from the oracle's "
                               f"candidate {self.candidates[self.choice]['levels']} (different forecaster?)")
        return {"tool": "submit", "args": {"decisions": plan["decisions"]}}


def catalog_oracle() -> MenuOracle:
    """``catalog_oracle``: hindsight-best of the 8 classical plans and every affordable, available
    full-context priced plan; pays only its pick."""
    return MenuOracle("catalog")


def free_menu_oracle() -> MenuOracle:
    """``free_menu_oracle``: hindsight-best of the 8 free classical plans (0 credits)."""
    return MenuOracle("free")


#: the oracle classes whose instances the evaluation grants hindsight (exact types: a subclass is other code)
ORACLE_CLASSES: tuple[type, ...] = (PerfectDemandOracle, MenuOracle)


def oracle_grant(agent) -> HindsightGrant | None:
    """The hindsight grant of one of fwgym's registered oracles (an instance of exactly one of
    :data:`ORACLE_CLASSES`, as :func:`fwgym.baselines.make_policy` builds them), else ``None``.

    Pass it on: ``run_episode(env, agent, hindsight=oracle_grant(agent))`` (a ``None`` grant leaves every
    other agent without hindsight, and refuses one that requires it).
    """
    if type(agent) in ORACLE_CLASSES:
        return HindsightGrant(agent, reason=f"fwgym's registered oracle {type(agent).__name__}")
    return None
