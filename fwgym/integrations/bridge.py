"""One fwgym episode played by tool calls that arrive from outside (an MCP client, an inspect-ai model), through
the one episode loop, :func:`fwgym.agents.run_episode`.

Tool frameworks call tools; fwgym's loop asks an agent for actions. :class:`EpisodeBridge` joins them: it runs
``run_episode`` on a worker thread with an agent whose ``act`` waits for the next call, and :meth:`EpisodeBridge.call`
hands a call in and waits for the env's answer. So a call made through MCP or inspect is counted, charged,
refused and scored by the same ledger as ``env.step`` (it IS ``env.step``), the record is the loop's record, and
nothing of the env, its hindsight or the scorer is reachable from the caller: it gets tool results (the
``last_result`` of the observation) and, at the end, the episode's record.

Ending: the env ends the episode (``submit``, ``abstain``, the call limit); :meth:`EpisodeBridge.end` ends it for
the caller when the caller stops without an answer (an ``abstain`` with the reason: the model's failure, scored
invalid) or when its infrastructure failed (:class:`fwgym.errors.HarnessError`: the episode is
``harness_error``, never scored).
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from fwgym.agents.base import run_episode
from fwgym.errors import HarnessError
from fwgym.wrappers.record import RecordToolCalls

__all__ = ["EpisodeBridge", "CallAnswer", "EPISODE_OVER"]

#: the error code of a call made after the episode ended (nothing is run or counted)
EPISODE_OVER = "episode_over"


@dataclass(frozen=True)
class CallAnswer:
    """What one call got.

    Attributes:
        result: the env's tool result (``{"tool", "ok", "result" | "error"}``; the terminal result when the call
            ended the episode; ``{"ok": false, "error": {"code": "episode_over", ...}}`` after the end).
        done: the episode has ended (with this call or before).
        record: the episode's record once it has ended (the loop's, as ``fwgym evaluate`` stores it), else ``None``.
        calls_left, budget_left: the ledger after the call.
    """

    result: dict
    done: bool = False
    record: dict | None = None
    calls_left: int | None = None
    budget_left: int | None = None

    def to_json(self) -> dict:
        """The answer as the caller is shown it: the tool result, the ledger, and ``episode`` (the record) at the end."""
        out = dict(self.result)
        if self.calls_left is not None:
            out["calls_left"], out["budget_left"] = self.calls_left, self.budget_left
        if self.record is not None:
            out["episode"] = self.record
        return out


class _Agent:
    """The loop's agent: each ``act`` hands the observation out and waits for the next call."""

    def __init__(self, bridge: EpisodeBridge, name: str):
        self.name, self._bridge = name, bridge
        self.isolated = True  # never granted hindsight

    def reset(self, info: Mapping) -> None:
        self._bridge.reset_info = dict(info)

    def act(self, observation: Mapping) -> Any:
        self._bridge._outbox.put(("observation", observation))
        action = self._bridge._inbox.get()
        if isinstance(action, HarnessError):
            raise action
        return action


class EpisodeBridge:
    """An episode of ``env`` on one case, played call by call from outside (module docstring).

    Args:
        env: an fwgym env (:class:`~fwgym.envs.fwbench.FWBenchEnv`, wrapped or not).
        case_id: the case to play (``env.reset(options={"case_id": ...})``).
        policy: the record's policy name.
        episode_id: the record's episode id (``None``: none).
        timeout: seconds one call may wait for the env (a forecaster may run; ``None``: no bound).

    Attributes:
        observation: the first observation (after :meth:`start`), then the latest.
        reset_info: the env's reset info (``info["episode"]``: the episode's public facts).
        steps: ``[{"action", "result"}]``, one per call that reached the env, in order.
        record: the episode's record once it has ended.
    """

    def __init__(self, env: Any, case_id: str, *, policy: str, episode_id: str | None = None,
                 timeout: float | None = None):
        self.env = RecordToolCalls(env)
        self.case_id, self.policy, self.episode_id, self.timeout = case_id, policy, episode_id, timeout
        self.observation: Mapping | None = None
        self.reset_info: dict = {}
        self.steps: list[dict] = []
        self.record: dict | None = None
        self._inbox: queue.Queue = queue.Queue()
        self._outbox: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> Mapping:
        """Reset the env on the case and wait for the first observation (returned).

        Raises:
            whatever ``env.reset`` raises (an unknown case id: ValueError; a corrupted install).
        """
        if self._thread is not None:
            raise RuntimeError("the episode has already started")
        self._thread = threading.Thread(target=self._run, name=f"fwgym-episode-{self.case_id}", daemon=True)
        self._thread.start()
        kind, value = self._outbox.get()
        if kind == "error":
            raise value
        self.observation = value
        return value

    def _run(self) -> None:
        try:
            result = run_episode(self.env, _Agent(self, self.policy), options={"case_id": self.case_id},
                                 episode_id=self.episode_id, agent_errors="raise")
            self._outbox.put(("record", result.record))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self._outbox.put(("error", exc))

    @property
    def done(self) -> bool:
        return self.record is not None

    # -- calls ----------------------------------------------------------------------------------------

    def call(self, tool: Any, args: Any = None) -> CallAnswer:
        """Play one tool call, exactly as ``env.step({"tool": tool, "args": args})`` would (any value: a
        malformed call is the env's counted error result); calls are serialised.

        Raises:
            RuntimeError: :meth:`start` was not called.
            TimeoutError: the env took longer than ``timeout`` (the episode is then unusable).
            whatever ``env.step`` raises (a corrupted install).
        """
        action = {"tool": tool, "args": args}
        return self._send(action)

    def end(self, reason: str, *, harness: HarnessError | None = None) -> CallAnswer:
        """End a running episode for the caller: an ``abstain`` with ``reason`` (counted by the env as
        answers are; scored invalid), or with ``harness`` the infrastructure failure (status ``harness_error``,
        never scored). Returns the final answer (also when the episode had already ended)."""
        if self.done:
            return self._over()
        return self._send(harness if harness is not None else {"tool": "abstain", "args": {"reason": str(reason)}})

    def _send(self, action: Any) -> CallAnswer:
        with self._lock:
            if self._thread is None:
                raise RuntimeError("call start() first")
            if self.done:
                return self._over()
            self._inbox.put(action)
            try:
                kind, value = self._outbox.get(timeout=self.timeout)
            except queue.Empty:
                raise TimeoutError(f"no answer from the env within {self.timeout} s") from None
            if kind == "error":
                raise value
            last = self.env.calls[-1] if self.env.calls and not isinstance(action, HarnessError) else None
            if last is not None:
                self.steps.append({"action": action, "result": last["info"].get("tool_result")})
            if kind == "observation":
                self.observation = value
                return CallAnswer(dict(last["info"]["tool_result"]), calls_left=int(value["calls_left"]),
                                  budget_left=int(round(float(value["budget_left"][0]))))
            self.record = value
            self._thread.join(timeout=5)
            result = last["info"].get("tool_result") if last is not None else _harness_result(value)
            return CallAnswer(dict(result), done=True, record=value, calls_left=0,
                              budget_left=int(value.get("budget_left") or 0))

    def _over(self) -> CallAnswer:
        return CallAnswer({"ok": False, "error": {"code": EPISODE_OVER, "message": "the episode has ended "
                                                  f"({self.record['status']}); nothing was run or counted"}},
                          done=True, record=self.record, calls_left=0, budget_left=int(self.record.get("budget_left") or 0))


def _harness_result(record: Mapping) -> dict:
    return {"tool": "harness", "ok": False, "error": {"code": "harness_error", "message": str(record.get("reason"))}}
