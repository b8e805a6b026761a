"""Hindsight oracles (reference rows only; they read the realised target through the env's
explicit, oracle-only :meth:`~fwgym.envs.fwbench.FWBenchEnv.hindsight`)."""
from __future__ import annotations


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
