"""The agent protocol and :func:`run_episode`, the single episode loop of fwgym.

An agent is any object with ``act(observation) -> action`` (a JSON tool-call string or dict) and,
optionally, ``reset()`` (called at the start of each episode) and a ``name`` attribute. Oracles that
need hindsight set ``requires_hindsight = True`` and implement ``set_hindsight(hindsight: dict)``;
the loop then passes them :meth:`fwgym.envs.fwbench.FWBenchEnv.hindsight` explicitly. An agent may
also define ``end_episode(record)``: the loop calls it once after the last step with a copy of the
episode's record (e.g. so an LLM agent can write its trace with the score); it cannot change the record.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym


@runtime_checkable
class Agent(Protocol):
    """Anything that maps an observation to an action."""

    def act(self, observation: dict) -> Any:  # pragma: no cover - protocol
        ...


@dataclass
class EpisodeResult:
    """Outcome of one episode.

    Attributes:
        record: the terminal ``info`` (case id, domain, cohort, lead, series_id, loss, floor, R, S,
            credits, calls, valid, status, reason, tool_counts, levels; without ``tool_result``) plus ``policy``.
        total_reward: sum of rewards over the episode.
        steps: number of ``env.step`` calls.
        actions: the actions taken, in order.
    """

    record: dict
    total_reward: float
    steps: int
    actions: list = field(default_factory=list)


def agent_name(agent: Any) -> str:
    """``agent.name`` if present, else the class name."""
    return str(getattr(agent, "name", type(agent).__name__))


def run_episode(env: gym.Env, agent: Any, *, seed: int | None = None, options: dict | None = None,
                max_steps: int = 1000, keep_actions: bool = False) -> EpisodeResult:
    """Play one episode of ``env`` with ``agent``.

    Args:
        env: an fwgym environment (wrapped or not).
        agent: an :class:`Agent`.
        seed, options: passed to ``env.reset`` (``options={"case_id": ...}`` picks a case).
        max_steps: safety bound on steps.
        keep_actions: store the actions in the result.

    Returns:
        :class:`EpisodeResult`.

    Raises:
        RuntimeError: the episode did not end within ``max_steps`` steps.
    """
    obs, info = env.reset(seed=seed, options=options)
    if hasattr(agent, "reset"):
        agent.reset()
    if getattr(agent, "requires_hindsight", False):
        agent.set_hindsight(env.unwrapped.hindsight())
    total, actions = 0.0, []
    for step in range(1, max_steps + 1):
        action = agent.act(obs)
        if keep_actions:
            actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if terminated or truncated:
            record = {"policy": agent_name(agent), **{k: v for k, v in info.items() if k != "tool_result"}}
            end = getattr(agent, "end_episode", None)
            if callable(end):
                end(copy.deepcopy(record))
            return EpisodeResult(record=record, total_reward=total, steps=step, actions=actions)
    raise RuntimeError(f"episode did not end within {max_steps} steps (case {info.get('case_id')})")
