"""Recording the tool calls of an episode: :class:`RecordToolCalls`.

Example::

    from fwgym.agents import run_episode
    from fwgym.baselines import make_policy
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.wrappers import RecordToolCalls

    env = RecordToolCalls(FWBenchEnv("electricity", split="dev"))
    run_episode(env, make_policy("backtest_selector_4"), seed=0)
    [c["action"] for c in env.calls]    # the episode's tool calls, in order
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym


class RecordToolCalls(gym.Wrapper):
    """Keeps every step of the current episode: the action and what the env answered.

    Observations, rewards, termination and ``info`` pass through unchanged; ``reset`` starts a new,
    empty record.

    Attributes:
        calls: one dict per ``step`` of the current (or last) episode, in order:
            ``action`` (as the agent sent it: a JSON string or a dict), ``result`` (the
            ``last_result`` observation: the tool result as JSON text; ``""`` when the env runs with
            ``text_observations=False``, whose results are in ``info["tool_result"]``),
            ``calls_left`` (int, after the step) and ``info`` (a shallow copy of the step's ``info``).
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.calls: list[dict] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.calls = []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.calls.append({"action": action, "result": obs.get("last_result", ""),
                           "calls_left": int(obs.get("calls_left", 0)), "info": dict(info)})
        return obs, reward, terminated, truncated, info


__all__ = ["RecordToolCalls"]
