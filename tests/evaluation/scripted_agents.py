"""Scripted agents of the evaluation tests (``from scripted_agents import ...``; no model, no hindsight)."""
import json


class Script:
    """Plays a fixed list of actions (the last one repeated)."""

    name = "script"

    def __init__(self, *actions):
        self.actions, self.k = actions, 0

    def reset(self):
        self.k = 0

    def act(self, observation):
        self.k += 1
        return self.actions[min(self.k, len(self.actions)) - 1]


class PlanAndSubmit:
    """Decision task: plan with weekly_repeat, submit the plan."""

    name = "plan_and_submit"

    def reset(self):
        self.k = 0

    def act(self, observation):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "weekly_repeat"}}
        plan = json.loads(observation["last_result"])["result"]["plan"]
        return {"tool": "submit", "args": {"decisions": plan["decisions"]}}


class BuyThenSubmitQuantiles:
    """Forecast task: buy a seasonal_empirical forecast, submit its quantiles over the target window."""

    name = "buy_then_submit_quantiles"

    def reset(self):
        self.k = 0

    def act(self, observation):
        self.k += 1
        if self.k == 1:
            return {"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336}}
        res = json.loads(observation["last_result"])["result"]
        lo, hi = res["target_steps"]
        return {"tool": "submit", "args": {"quantiles": res["quantiles"][lo - 1 : hi]}}


class GiveUp:
    """Abstains at once (a reason with a non-ASCII character)."""

    name = "give_up"

    def act(self, observation):
        return {"tool": "abstain", "args": {"reason": "nothing to say ü"}}
