"""Fixed policies: plan with one classical method and submit (0 credits, 1 tool call)."""
from __future__ import annotations

import json

from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.tools.results import ToolResult

__all__ = ["FixedMethodAgent"]


class FixedMethodAgent:
    """Calls ``classical_plan(method)`` and submits the returned plan unchanged.

    Args:
        method: one of :data:`fwgym.forecasters.classical.CLASSICAL_METHODS`.

    Raises:
        ValueError: unknown method.
    """

    def __init__(self, method: str):
        if method not in CLASSICAL_METHODS:
            raise ValueError(f"unknown classical method {method!r}; expected one of {list(CLASSICAL_METHODS)}")
        self.method = method
        self.name = method
        self._asked = False

    def reset(self) -> None:
        self._asked = False

    def act(self, observation: dict):
        if not self._asked:
            self._asked = True
            return {"tool": "classical_plan", "args": {"method": self.method}}
        result: ToolResult = json.loads(observation["last_result"])
        if not result.get("ok"):
            raise RuntimeError(f"classical_plan failed: {result.get('error')}")
        return {"tool": "submit", "args": {"decisions": result["result"]["plan"]["decisions"]}}
