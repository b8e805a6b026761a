"""Fixed priced-forecast policies and the routing reference (FWBench protocol §6)."""
from __future__ import annotations

import json

from fwgym.forecasters.registry import check_models

__all__ = ["FALLBACK_METHOD", "FALLBACK_CODES", "FixedForecastAgent", "RoutingAgent", "QuantileForecastAgent"]

FALLBACK_METHOD = "hour_of_day_empirical"
#: refusals after which a fixed forecast policy plans with FALLBACK_METHOD instead (the protocol's fixed-TimesFM row)
FALLBACK_CODES = ("insufficient_budget", "model_unavailable", "backend_error", "unknown_tool")


class FixedForecastAgent:
    """Buy ``model`` at full context (336) and the minimal covering horizon, plan on it and submit.

    If the request is refused (unaffordable, e.g. TimesFM 2.5 at any shape, weights unavailable, a
    failed backend: :data:`FALLBACK_CODES`) the agent falls back to the hour-of-day empirical plan, as
    in the protocol's fixed-TimesFM row. A model outside the env's forecast pool is not such a refusal:
    the agent raises instead of scoring the fallback under the model's name (make the env with
    ``models=`` including it, e.g. :data:`~fwgym.forecasters.registry.EXTENDED_MODELS`).

    Args:
        model: any known priced model (the protocol's, the statsmodels ones or a registered plug-in).

    Raises:
        ValueError: unknown model.
        RuntimeError (from ``act``): the env refused the request for another reason (e.g. the model is
            not in its pool), or planning failed.
    """

    def __init__(self, model: str):
        check_models([model])
        self.model = model
        self.name = model
        self._stage = 0

    def reset(self) -> None:
        self._stage = 0

    def act(self, observation: dict):
        last = json.loads(observation["last_result"]) if observation["last_result"] else {}
        self._stage += 1
        if self._stage == 1:
            return {"tool": "forecast", "args": {"model": self.model, "context_steps": 336}}
        if self._stage == 2:
            if last.get("ok"):
                return {"tool": "plan", "args": {"forecast_id": last["result"]["forecast_id"]}}
            error = last.get("error") or {}
            if error.get("code") not in FALLBACK_CODES:
                raise RuntimeError(f"{self.name}: the env refused forecast({self.model}): {error.get('code')}: "
                                   f"{error.get('message')} (is {self.model} in the env's models= pool?)")
            return {"tool": "classical_plan", "args": {"method": FALLBACK_METHOD}}
        if not last.get("ok"):
            raise RuntimeError(f"{self.name}: planning failed: {last.get('error')}")
        return {"tool": "submit", "args": {"decisions": last["result"]["plan"]["decisions"]}}


class RoutingAgent:
    """Routing reference: Chronos-2 for day-ahead cases, hour-of-day empirical for week-ahead
    (reads the lead from ``catalog``; 1 extra free call)."""

    name = "routing_reference"

    def __init__(self, day_ahead_model: str = "chronos2", week_ahead_method: str = FALLBACK_METHOD):
        self.day_ahead_model, self.week_ahead_method = day_ahead_model, week_ahead_method
        self._inner = None

    def reset(self) -> None:
        self._inner = None

    def act(self, observation: dict):
        if self._inner is None:
            if not observation["last_result"]:
                return {"tool": "catalog"}
            lead = json.loads(observation["last_result"])["result"]["case"]["lead"]
            from fwgym.baselines.fixed import FixedMethodAgent

            self._inner = (FixedForecastAgent(self.day_ahead_model) if lead == "day_ahead"
                           else FixedMethodAgent(self.week_ahead_method))
            observation = {**observation, "last_result": ""}
        return self._inner.act(observation)


class QuantileForecastAgent:
    """Forecast-suite baseline: buy ``model`` at full context (336) and the minimal covering horizon and
    submit its 24 target rows of 9 quantiles unchanged (the context note is ignored).

    A quantile submission is scored as the distribution it defines (its 9 values as equally weighted
    atoms, :func:`fwgym.core.scoring.score_forecast`), so this row measures a bought forecast as it is.
    In a decision episode it plans on the bought forecast like :class:`FixedForecastAgent`.

    Args:
        model: a priced model of the env's pool (default ``seasonal_empirical``, the protocol's cheapest).

    Raises:
        ValueError: unknown model.
        RuntimeError (from ``act``): the env refused the purchase (the agent never scores a fallback
            under the model's name).
    """

    def __init__(self, model: str = "seasonal_empirical"):
        check_models([model])
        self.model = model
        self.name = f"{model}_quantiles"
        self._stage = 0

    def reset(self, info: dict | None = None) -> None:
        self._stage = 0
        self._task = ((info or {}).get("episode") or {}).get("task", "forecast")

    def act(self, observation: dict):
        last = json.loads(observation["last_result"]) if observation["last_result"] else {}
        self._stage += 1
        if self._stage == 1:
            return {"tool": "forecast", "args": {"model": self.model, "context_steps": 336}}
        if not last.get("ok"):
            error = last.get("error") or {}
            raise RuntimeError(f"{self.name}: the env refused forecast({self.model}): {error.get('code')}: "
                               f"{error.get('message')}")
        res = last["result"]
        if getattr(self, "_task", "forecast") != "forecast":
            if self._stage == 2:
                return {"tool": "plan", "args": {"forecast_id": res["forecast_id"]}}
            return {"tool": "submit", "args": {"decisions": res["plan"]["decisions"]}}
        lo, hi = res["target_steps"]
        return {"tool": "submit", "args": {"quantiles": res["quantiles"][lo - 1:hi]}}
