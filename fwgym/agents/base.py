"""The agent protocol and :func:`run_episode`, the single episode loop of fwgym.

An agent is any object with ``act(observation) -> action`` (a JSON tool-call string or dict) and
optionally:

* ``reset(info)`` or ``reset()``: called once at the start of each episode, after ``env.reset``, and
  before the first ``act``. An episode starts there and nowhere else (agents never infer a new
  episode from an observation). A ``reset`` that takes a positional parameter receives the env's
  reset ``info``; for the fwgym envs, ``info["episode"]`` holds the episode's public, structured
  facts (:meth:`fwgym.envs.fwbench.FWBenchEnv.reset`: case summary, visible-history and target
  windows, contract, task, tools, budget, call limit; nothing at or after ``as_of - 2 h``), so an
  agent never has to parse them out of the context text. A ``reset`` without parameters is called
  as ``reset()``.
* ``name``: the policy name of its records (default: the class name).
* ``requires_hindsight = True`` and ``set_hindsight(hindsight: dict)``: for oracles only. The loop
  passes :meth:`fwgym.envs.fwbench.FWBenchEnv.hindsight` to such an agent, after ``reset``, only when the
  caller hands it a :class:`HindsightGrant` for that very agent (``run_episode(env, oracle,
  hindsight=HindsightGrant(oracle))``); without one the episode is refused before it starts. The
  evaluation grants hindsight only to fwgym's registered oracles
  (:func:`fwgym.baselines.oracles.oracle_grant`), and never to an isolated agent (``isolated = True``:
  code given as a file or on the command line, run in a worker process by :mod:`fwgym.agents.isolation`,
  which refuses agents that declare ``requires_hindsight``).
* ``end_episode(record)``: called once after the last step with a copy of the episode's record (e.g.
  so an LLM agent can write its trace with the score); it cannot change the record.

**Trust.** An in-process agent is code running in the evaluator: nothing stops it from walking its
caller's frames to the env (and ``env.unwrapped.hindsight()``), so the grant above makes the oracle path
explicit and auditable, not impossible for such code. Agents that are not fwgym's own code and not the
user's trusted Python (SB3 zips, ``fwgym evaluate --agent module:factory``) therefore run isolated: in
another process that receives only observations, the public reset ``info`` and, after the episode, the
record (SECURITY.md, threat model).
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym


@runtime_checkable
class Agent(Protocol):
    """Anything that maps an observation to an action (see the module docstring for the optional methods)."""

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


class HindsightGrant:
    """Permission for :func:`run_episode` to pass the env's hindsight (the realised target, the floor, the
    perfect plan: :meth:`fwgym.envs.fwbench.FWBenchEnv.hindsight`) to one oracle agent.

    The one path by which an agent receives hindsight: ``run_episode(env, agent,
    hindsight=HindsightGrant(agent))``. :func:`fwgym.baselines.oracles.oracle_grant` makes one for
    fwgym's registered oracles, and the evaluation uses nothing else.

    Args:
        agent: the agent the grant is for (the episode is refused for any other agent).
        reason: why it may see hindsight (for error messages and audits).

    Raises:
        ValueError: ``agent`` is isolated (``isolated = True``): code run in a worker never gets hindsight.
    """

    __slots__ = ("agent", "reason")

    def __init__(self, agent: Any, reason: str = "oracle"):
        if getattr(agent, "isolated", False):
            raise ValueError(f"{agent_name(agent)} runs isolated (code given as a file or on the command line): "
                             "it can never receive hindsight")
        self.agent, self.reason = agent, str(reason)

    def read(self, env: gym.Env) -> dict:
        """The hindsight of ``env``'s current episode (``env.unwrapped.hindsight()``)."""
        return env.unwrapped.hindsight()

    def __repr__(self) -> str:
        return f"HindsightGrant({agent_name(self.agent)!r}, reason={self.reason!r})"


def _check_hindsight(agent: Any, hindsight: HindsightGrant | None) -> bool:
    """Whether the agent gets hindsight this episode; refuses a missing, misdirected or isolated grant."""
    wants = bool(getattr(agent, "requires_hindsight", False))
    if hindsight is not None:
        if not isinstance(hindsight, HindsightGrant):
            raise TypeError(f"hindsight must be a HindsightGrant or None, got {type(hindsight).__name__}")
        if hindsight.agent is not agent:
            raise ValueError(f"the hindsight grant is for {agent_name(hindsight.agent)}, not for {agent_name(agent)}")
        if getattr(agent, "isolated", False):
            raise ValueError(f"{agent_name(agent)} runs isolated: it can never receive hindsight")
    if wants and hindsight is None:
        raise ValueError(f"{agent_name(agent)} requires hindsight, which run_episode passes only with an explicit "
                         "hindsight=HindsightGrant(agent); fwgym's evaluation grants it to its registered oracles "
                         "only (fwgym.baselines.oracles.oracle_grant; see SECURITY.md)")
    return wants


def agent_name(agent: Any) -> str:
    """``agent.name`` if present, else the class name."""
    return str(getattr(agent, "name", type(agent).__name__))


def reset_agent(agent: Any, info: dict) -> None:
    """Call ``agent.reset(info)``, or ``agent.reset()`` when its ``reset`` takes no positional parameter;
    nothing when the agent has no ``reset``.

    Raises:
        whatever the agent's ``reset`` raises.
    """
    reset = getattr(agent, "reset", None)
    if not callable(reset):
        return
    if _takes_argument(reset):
        reset(info)
    else:
        reset()


def _takes_argument(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it the old way
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def run_episode(env: gym.Env, agent: Any, *, seed: int | None = None, options: dict | None = None,
                max_steps: int = 1000, keep_actions: bool = False,
                hindsight: HindsightGrant | None = None) -> EpisodeResult:
    """Play one episode of ``env`` with ``agent``.

    The loop: ``obs, info = env.reset(...)``; :func:`reset_agent` (``agent.reset(info)`` or
    ``agent.reset()``); hindsight for a granted oracle; then ``agent.act(obs)`` / ``env.step`` until the
    episode terminates or is truncated; ``agent.end_episode(record)``.

    Args:
        env: an fwgym environment (wrapped or not).
        agent: an :class:`Agent`.
        seed, options: passed to ``env.reset`` (``options={"case_id": ...}`` picks a case).
        max_steps: safety bound on steps.
        keep_actions: store the actions in the result.
        hindsight: a :class:`HindsightGrant` for ``agent``, for an oracle (``requires_hindsight = True``);
            ``None`` (default) for every other agent.

    Returns:
        :class:`EpisodeResult`.

    Raises:
        RuntimeError: the episode did not end within ``max_steps`` steps.
        ValueError: (before the episode starts) an agent that requires hindsight without a grant, a grant
            for another agent, or a grant for an isolated agent. TypeError: ``hindsight`` is not a grant.
    """
    grant = _check_hindsight(agent, hindsight)
    obs, info = env.reset(seed=seed, options=options)
    reset_agent(agent, info)
    if grant:
        agent.set_hindsight(hindsight.read(env))
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


__all__ = ["Agent", "EpisodeResult", "HindsightGrant", "run_episode", "reset_agent", "agent_name"]
