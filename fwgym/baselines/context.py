"""A context-reading baseline: hour-of-day empirical samples adjusted by the scenario announced in the text.

It reads the operator's note in ``observation["context"]`` with regular expressions (no privileged
access), applies the stated effect (percentage increase, MW reduction, MW cap, closure, surge factor,
rain share) to the hours the note names, then plans with the DP (decision envs) or submits the
samples (forecast envs). With ``use_context=False`` it ignores the note: the same method without the
text, the comparison that shows what the text is worth.
"""
from __future__ import annotations

import json
import re

import numpy as np

from fwgym.forecasters.classical import classical_distribution
from fwgym.core.optimizer import optimal_plan
from fwgym.core.series import iso_to_hour

__all__ = ["parse_scenario", "ContextAwareAgent"]

_SPAN = re.compile(r"\((\d{2}):00-(\d{2}):00 UTC\)")
_RULES = (
    ("scale", re.compile(r"about (\d+(?:\.\d+)?)% above"), lambda v: 1.0 + v / 100.0),
    ("shift", re.compile(r"about ([\d,]+(?:\.\d+)?) MW of steady load"), lambda v: -v),
    ("cap", re.compile(r"no more than ([\d,]+(?:\.\d+)?) MW"), lambda v: v),
    ("scale", re.compile(r"will be closed"), lambda v: 0.0),
    ("scale", re.compile(r"about (\d+(?:\.\d+)?) times the usual"), lambda v: v),
    ("scale", re.compile(r"about (\d+(?:\.\d+)?)% of normal"), lambda v: v / 100.0),
)


def parse_scenario(context: str, target_start_hour_utc: int) -> tuple[str, float, np.ndarray] | None:
    """Find the announced effect in a context text.

    Args:
        context: the observation's context text.
        target_start_hour_utc: UTC clock hour (0..23) of the first target hour.

    Returns:
        ``(kind, value, mask)`` with kind ``"scale"``, ``"shift"`` or ``"cap"`` and a bool (24,) mask of
        the target hours named, or None when the text announces nothing this baseline understands.
    """
    line = next((ln for ln in context.splitlines() if ln.startswith("Context: ")), None)
    if line is None:
        return None
    span = _SPAN.search(line)
    if span is None:
        return None
    a = (int(span.group(1)) - target_start_hour_utc) % 24
    b = (int(span.group(2)) - target_start_hour_utc) % 24 or 24
    mask = np.zeros(24, dtype=bool)
    mask[a:b] = True
    for kind, rx, fn in _RULES:
        m = rx.search(line)
        if m:
            value = float(m.group(1).replace(",", "")) if m.groups() else 0.0
            return kind, fn(value), mask
    return None


class ContextAwareAgent:
    """Hour-of-day empirical samples, adjusted by the announced scenario when ``use_context``.

    Uses one free tool call (``catalog``) for timestamps, scale and shortage weights.
    """

    def __init__(self, use_context: bool = True, method: str = "hour_of_day_empirical"):
        self.use_context, self.method = use_context, method
        self.name = f"context_{method}" if use_context else f"{method}_samples"
        self._asked = False

    def reset(self) -> None:
        self._asked = False

    def act(self, observation: dict):
        if not self._asked:
            self._asked = True
            return {"tool": "catalog"}
        cat = json.loads(observation["last_result"])["result"]
        case, contract = cat["case"], cat["contract"]
        last, start = iso_to_hour(case["last_visible"]), iso_to_hour(case["target_start"])
        history = np.asarray(observation["history"], dtype=np.float64)
        hours = np.arange(last - len(history) + 1, last + 1)
        samples = classical_distribution(self.method, history, hours, np.arange(start, start + 24)).copy()
        if self.use_context:
            effect = parse_scenario(observation["context"], start % 24)
            if effect is not None:
                kind, value, mask = effect
                if kind == "scale":
                    samples[mask] *= value
                elif kind == "shift":
                    samples[mask] = np.maximum(samples[mask] + value, 0.0)
                else:
                    samples[mask] = np.minimum(samples[mask], value)
        if cat.get("task") == "forecast":
            return {"tool": "submit", "args": {"samples": samples.T.tolist()}}
        res = optimal_plan(samples, contract["scale"], np.asarray(contract["shortage_weights"]))
        return {"tool": "submit", "args": {"decisions": res.plan.decisions()}}
