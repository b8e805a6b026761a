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
* ``episode_stats() -> dict``: what the episode cost the agent's backend, read once after the episode
  ends (also after a harness error) and stored in the record (:class:`fwgym.evaluation.records.AccountingFields`):
  ``prompt_tokens`` and ``completion_tokens`` (ints, summed over the episode's requests, from the
  server's ``usage``, failed attempts included), ``failed_tokens`` (int, the part of those totals reported for
  attempts whose reply was not used: error responses, refused bodies), ``model_turns`` (int, model replies), ``requests`` (int, requests sent, retries
  included), ``request_latency_s`` (list of floats, seconds per request, in order), ``wall_s`` (float,
  seconds from the first ``act`` to the end), ``served_model`` (str: the model a reply named when it was not the
  one asked for). Missing keys (and agents without the method) are ``None``
  in the record; other keys are ignored.

Resources. Every record also holds what the episode cost the machine (:mod:`fwgym.agents.resources`):
``episode_wall_s``, ``cpu_s``, ``peak_rss_mib`` and ``pss_mib`` of the evaluating process and of an
isolated agent's worker process (on Linux the process's peak-RSS counter is reset at each episode's start).

Episode ids. A runner may give :func:`run_episode` an ``episode_id``; it is stored in the record and
passed to the agent in the reset info as ``info["episode_id"]``, so an agent that writes a trace line
per episode (the chat agents: ``trace_out``) writes the same id, and records and traces join on it.

Failures. The loop never lets an agent's failure crash an evaluation:

* :class:`fwgym.errors.HarnessError` from ``reset`` or ``act`` (the agent's infrastructure failed: an
  unreachable endpoint, timeouts, 5xx/429 after the retries, ...) abandons the env episode
  (:meth:`fwgym.envs.fwbench.FWBenchEnv.abandon`): the record has status ``"harness_error"``, ``scored``
  False, no loss/floor/R/S, the message as ``reason`` and ``harness_kind``; it is never aggregated and
  ``fwgym evaluate --resume`` reruns it.
* Any other ``Exception`` from ``reset`` or ``act`` (a bug in the agent): with ``agent_errors="score"``
  (what :func:`fwgym.evaluation.evaluate` uses for agents that are not fwgym's named policies: LLM,
  learned, isolated and ``module:factory`` agents) it ends the episode as the agent's failure through
  the env: an ``abstain`` with reason ``"agent_error: Type: message"``, scored invalid. With
  ``agent_errors="raise"`` (the default of :func:`run_episode`, and what the evaluation uses for fwgym's
  own named baselines and oracles, whose exceptions are bugs or misconfigurations that must not become
  an invalid row) it propagates.
* :class:`fwgym.errors.DataIntegrityError` (a packaged file of this install failed its check, whoever
  read it: the env's tools or the agent's own fwgym code) propagates: a corrupted install is never
  scored as the agent's failure.
* ``KeyboardInterrupt`` (and other ``BaseException``) propagates.

Agent factories (zero-argument callables that the runner calls to build an agent per worker or
thread) may define ``preflight() -> dict``: :func:`fwgym.evaluation.evaluate` calls it once before
the first episode (an LLM factory sends one request to check the endpoint); it raises
:class:`~fwgym.errors.HarnessError` when the backend cannot serve the run (nothing is run or
scored), and its dict (e.g. the server's model name, whether the seed is honoured) goes into the run
manifest.

**Trust.** An in-process agent is code running in the evaluator: nothing stops it from walking its
caller's frames to the env (and ``env.unwrapped.hindsight()``), so the grant above makes the oracle path
explicit and auditable, not impossible for such code. Agents that are not fwgym's own code and not the
user's trusted Python (SB3 zips, ``fwgym evaluate --agent module:factory``) therefore run isolated: in
another process that receives only observations, the public reset ``info`` and, after the episode, the
record (SECURITY.md, threat model).
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

import gymnasium as gym

from fwgym.agents.resources import RESOURCE_KEYS, EpisodeMeter
from fwgym.errors import AGENT_ERROR_PREFIX, DataIntegrityError, HarnessError
from fwgym.jsonl import to_jsonable
from fwgym.validation import is_int, is_number
from fwgym.warn import warn_user

#: the keys of ``agent.episode_stats()`` stored in records (fwgym.evaluation.records.AccountingFields)
EPISODE_STATS_KEYS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "failed_tokens", "model_turns", "requests",
                                       "request_latency_s", "wall_s", "served_model")


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
                max_steps: int = 1000, keep_actions: bool = False, episode_id: str | None = None,
                agent_errors: str = "raise", hindsight: HindsightGrant | None = None,
                on_record: Callable[[dict], None] | None = None) -> EpisodeResult:
    """Play one episode of ``env`` with ``agent``.

    The loop: ``obs, info = env.reset(...)``; :func:`reset_agent` (``agent.reset(info)`` or
    ``agent.reset()``; ``info["episode_id"]`` is the given id); hindsight for a granted oracle; then
    ``agent.act(obs)`` / ``env.step`` until the episode terminates or is truncated;
    ``agent.episode_stats()`` into the record; ``agent.end_episode(record)``. Harness errors and agent
    exceptions end the episode as the module docstring says.

    Args:
        env: an fwgym environment (wrapped or not).
        agent: an :class:`Agent`.
        seed, options: passed to ``env.reset`` (``options={"case_id": ...}`` picks a case).
        max_steps: safety bound on steps.
        keep_actions: store the actions in the result.
        episode_id: the episode's id in its run (stored in the record, given to the agent in the reset info).
        agent_errors: ``"raise"`` (default): an exception from the agent's ``reset``/``act`` propagates;
            ``"score"``: it ends the episode as the agent's failure (abstain, scored invalid).
        hindsight: a :class:`HindsightGrant` for ``agent``, for an oracle (``requires_hindsight = True``);
            ``None`` (default) for every other agent.
        on_record: called with the finished record BEFORE the agent's ``end_episode`` sees it (the
            evaluation writes it to the run's records file there, so nothing the agent does after it
            has seen its score can change or lose the record); its exceptions propagate.

    The record's ``tool_calls`` list every action the env received, in order, as JSON (:func:`tool_call_entry`),
    with a hash of the tool result it got: what ``fwgym verify --replay`` re-executes.

    Returns:
        :class:`EpisodeResult`.

    Raises:
        RuntimeError: the episode did not end within ``max_steps`` steps.
        ValueError: ``agent_errors`` is neither ``"raise"`` nor ``"score"``; (before the episode starts) an
            agent that requires hindsight without a grant, a grant for another agent, or a grant for an
            isolated agent. TypeError: ``hindsight`` is not a grant.
        KeyboardInterrupt: from the agent or the env (the episode is lost, nothing is recorded).
        fwgym.errors.DataIntegrityError: a packaged file failed its check (from the env or the agent).
        Exception: the agent's own, with ``agent_errors="raise"``.
    """
    if agent_errors not in ("raise", "score"):
        raise ValueError(f"agent_errors must be 'raise' or 'score', got {agent_errors!r}")
    grant = _check_hindsight(agent, hindsight)
    meter = EpisodeMeter(agent)  # wall, CPU, peak RSS and PSS of the episode (fwgym.agents.resources)
    obs, info = env.reset(seed=seed, options=options)
    if episode_id is not None:
        info = {**info, "episode_id": episode_id}
    total, actions, failure, calls = 0.0, [], None, []
    done = partial(_finish, env, agent, meter=meter, calls=calls, on_record=on_record)
    try:
        _, failure = _call_agent(reset_agent, agent, info, agent_errors=agent_errors)
    except HarnessError as exc:
        return done(_harness_record(env, info, exc), episode_id, 0.0, 0, actions)
    if grant and failure is None:
        agent.set_hindsight(hindsight.read(env))
    for step in range(1, max_steps + 1):
        action = failure
        if failure is None:
            try:
                action, failure = _call_agent(agent.act, obs, agent_errors=agent_errors)
            except HarnessError as exc:
                return done(_harness_record(env, info, exc), episode_id, total, step - 1, actions)
            action = failure if failure is not None else action
        if keep_actions:
            actions.append(action)
        obs, reward, terminated, truncated, info = _step_env(env, action, calls)
        total += float(reward)
        if terminated or truncated:
            record = {k: v for k, v in info.items() if k != "tool_result"}
            record.update(scored=True, harness_kind=None)
            return done(record, episode_id, total, step, actions)
    raise RuntimeError(f"episode did not end within {max_steps} steps (case {info.get('case_id')})")


def _call_agent(fn: Callable[..., Any], *args: Any, agent_errors: str) -> tuple[Any, dict | None]:
    """``fn(*args)`` (an agent's ``reset`` or ``act``) under the episode's rule for agent exceptions:
    ``(its result, None)``, or with ``agent_errors="score"`` ``(None, the abstain that ends the episode as the agent's
    failure)``. A :class:`HarnessError`, a :class:`DataIntegrityError`, a ``KeyboardInterrupt`` and (with
    ``agent_errors="raise"``) any other exception propagate."""
    try:
        return fn(*args), None
    except (HarnessError, DataIntegrityError):
        raise
    except Exception as exc:  # noqa: BLE001 - a bug in the agent is the agent's failure, never a crash
        if agent_errors == "raise":
            raise
        return None, _agent_error_action(exc)


def _step_env(env: gym.Env, action: Any, calls: list[dict]) -> tuple:
    """``env.step(action)``, with the call's :func:`tool_call_entry` (taken as received: before the env could change
    a dict it was handed) and the hash of the tool result it got appended to ``calls``."""
    entry = tool_call_entry(action)
    obs, reward, terminated, truncated, info = env.step(action)
    calls.append({**entry, "result_hash": result_hash(obs.get("last_result", "") if isinstance(obs, Mapping) else "")})
    return obs, reward, terminated, truncated, info


def _agent_error_action(exc: BaseException) -> dict:
    """The ``abstain`` that ends an episode whose agent raised ``exc`` (the env caps the reason's length)."""
    return {"tool": "abstain", "args": {"reason": f"{AGENT_ERROR_PREFIX}{type(exc).__name__}: {exc}"}}


def _harness_record(env: gym.Env, info: Mapping, exc: HarnessError) -> dict:
    """The unscored outcome of an episode whose agent raised a :class:`HarnessError` (the env episode is abandoned)."""
    reason = str(exc)[:2000] or type(exc).__name__
    abandon = getattr(env.unwrapped, "abandon", None)
    if not callable(abandon):
        raise TypeError(f"{type(env.unwrapped).__name__} cannot abandon an episode (no abandon() method); "
                        f"the agent raised HarnessError: {reason}") from exc
    record = abandon(reason)
    record.update(scored=False, harness_kind=str(getattr(exc, "kind", "infrastructure")))
    return record


def _episode_stats(agent: Any) -> dict:
    """The record's accounting fields from ``agent.episode_stats()`` (``None`` where the agent gives nothing usable)."""
    out = dict.fromkeys(EPISODE_STATS_KEYS)
    stats_fn = getattr(agent, "episode_stats", None)
    if not callable(stats_fn):
        return out
    try:
        stats = stats_fn()
    except Exception as exc:  # noqa: BLE001 - accounting must not lose a scored episode
        warn_user(f"{agent_name(agent)}.episode_stats() raised {type(exc).__name__}: {exc}; stats not recorded",
                  RuntimeWarning)
        return out
    if not isinstance(stats, Mapping):
        return out
    for k in ("prompt_tokens", "completion_tokens", "failed_tokens", "model_turns", "requests"):
        v = stats.get(k)
        if is_int(v) and v >= 0:
            out[k] = int(v)
    wall = stats.get("wall_s")
    if is_number(wall) and math.isfinite(wall) and wall >= 0:
        out["wall_s"] = float(wall)
    served = stats.get("served_model")
    if isinstance(served, str) and served:
        out["served_model"] = served[:200]
    lat = stats.get("request_latency_s")
    if isinstance(lat, (list, tuple)) and all(is_number(x) and math.isfinite(x) for x in lat):
        out["request_latency_s"] = [float(x) for x in lat]
    return out


def tool_call_entry(action: Any) -> dict:
    """``{"action": ...}``: an action as the record stores it: a JSON text as is, anything else as its JSON value
    (NumPy values as Python numbers and lists; what cannot be JSON is its ``str``, so it does not replay)."""
    if isinstance(action, str):
        return {"action": action}
    try:
        return {"action": json.loads(json.dumps(action, default=to_jsonable))}
    except (TypeError, ValueError):
        return {"action": str(action)}


def result_hash(text: str) -> str:
    """First 16 hex digits of the sha256 of a tool result's JSON text (``observation["last_result"]``): enough to
    show which call of a replay got another result."""
    return hashlib.sha256(str(text).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _finish(env: gym.Env, agent: Any, outcome: dict, episode_id: str | None, total: float, steps: int,
            actions: list, *, meter: EpisodeMeter, calls: list,
            on_record: Callable[[dict], None] | None) -> EpisodeResult:
    record = {"policy": agent_name(agent), **outcome, "episode_id": episode_id, **_episode_stats(agent),
              "tool_calls": list(calls), **meter.stop()}
    if on_record is not None:
        on_record(record)
    end = getattr(agent, "end_episode", None)
    if callable(end):
        try:
            end(copy.deepcopy(record))
        except HarnessError as exc:  # e.g. the trace could not be written: the score stands, the trace is lost
            warn_user(f"{record['policy']} on {record['case_id']}: end_episode failed: {exc}", RuntimeWarning)
        except Exception as exc:  # noqa: BLE001
            warn_user(f"{record['policy']} on {record['case_id']}: end_episode raised {type(exc).__name__}: {exc}",
                      RuntimeWarning)
    return EpisodeResult(record=record, total_reward=total, steps=steps, actions=actions)


__all__ = ["Agent", "EpisodeResult", "HindsightGrant", "run_episode", "reset_agent", "agent_name", "EPISODE_STATS_KEYS",
           "tool_call_entry", "result_hash", "RESOURCE_KEYS"]
