"""Backend-neutral chat agent: the agent protocol on top of :class:`~fwgym.agents.chat.session.ChatSession`.

:class:`ChatAgent` implements ``reset(info)`` and ``act(observation) -> action``; a backend subclass only
implements :meth:`ChatAgent.complete` (messages in, one :class:`~fwgym.agents.chat.session.ModelReply`
out). Episodes run through :func:`fwgym.agents.run_episode` like every other agent, so scores always
come from the env's records. An episode starts at :meth:`ChatAgent.reset`, which receives the env's
reset ``info``; its ``"episode"`` entry (the structured facts of the episode: tools, task, call limit,
budget, visible-history window) configures the session, so nothing is read back out of the context text.

Ending an episode early. When the backend cannot go on, :meth:`complete` raises
:class:`ContextExhausted` (the prompt no longer fits: HTTP 400 mentioning the context, or a prompt
longer than the local model's window): the agent records the status (``"context_exhausted"``; also
``"max_turns"`` when the safety bound on model turns is hit) and abandons with the env's ``abstain``
tool: the episode ends invalid with status ``abstained`` and ``reason`` starting with the agent
status (e.g. ``"context_exhausted: ..."``), at no call and no credit. Failures that are not the
model's raise a :class:`~fwgym.errors.HarnessError` out of :meth:`ChatAgent.act`:
:class:`BackendUnavailable` (transport failures after the retries) and :class:`LLMRequestError`
(bad API key, unknown model, a request the server refuses for another reason); the trace records
``agent_status`` ``"backend_error"`` and :func:`fwgym.agents.run_episode` ends the episode as
``harness_error``, never scored.

Traces (:mod:`fwgym.agents.chat.traces`). With ``trace_out`` set, one JSON line per episode is
appended to that file (locked while writing, so evaluation worker processes can share it). The score
and final plan come from the env record that :func:`fwgym.agents.run_episode` passes to
:meth:`ChatAgent.end_episode` after the last step; an episode ended by other means is flushed without
them at the next :meth:`ChatAgent.reset` or :meth:`ChatAgent.close`.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Sequence

from fwgym.agents.chat.session import REPLY_ERROR_TOOL, ChatSession, ModelReply
from fwgym.agents.chat.traces import add_record, append_jsonl, finish_trace, new_trace, reply_json
from fwgym.errors import HarnessError

ABANDON_STATUSES = ("context_exhausted", "backend_error", "max_turns")


class ContextExhausted(RuntimeError):
    """The conversation no longer fits the model's context window (ends the episode)."""


class BackendUnavailable(HarnessError):
    """The backend could not answer after the allowed retries: a :class:`~fwgym.errors.HarnessError`
    (the episode ends as ``harness_error``, not scored)."""

    def __init__(self, message: str, kind: str = "transport"):
        super().__init__(message, kind)


class LLMRequestError(HarnessError):
    """The backend refused the request for a reason that is not the model's fault (bad key, unknown
    model, unsupported parameter): a :class:`~fwgym.errors.HarnessError` (the episode ends as
    ``harness_error``, not scored); fix the configuration and resume the run."""

    def __init__(self, message: str, kind: str = "request_refused"):
        super().__init__(message, kind)


class ChatAgent:
    """Base class of chat-model agents (subclasses implement :meth:`complete`).

    Args:
        name: policy name shown in results and leaderboards.
        native_tools: offer tools by native function calling (else JSON tool calls in text).
        text_tool_calls: also accept JSON tool calls in reply text.
        tools: the tool names to offer (default: the episode's, from :meth:`reset`'s ``info``).
        max_tool_chars: truncate tool results longer than this in the chat (``None``: never).
        max_reply_chars: truncate model replies longer than this (default 100,000 characters) and append a
            notice saying so; the truncated text is what the harness parses and what the trace keeps.
        max_turns: safety bound on model replies per episode (default ``2 * calls + 4``).
        trace_out: JSONL file to append one trace per episode to (``None``: no file; the last
            episode's trace is still in :attr:`trace`).
        system: replace the system message.
        history_hours: show only the last N visible hours in the first message (``None``: all).

    Attributes:
        session: the current (or last finished) episode's :class:`~fwgym.agents.chat.session.ChatSession`.
        trace: the current (or last finished) episode's trace dict.
        status: ``"running"``, ``"answered"`` (the last action was a submit), ``"no_answer"`` (the env
            ended the episode first, e.g. at the call limit), ``"context_exhausted"``, ``"backend_error"``,
            ``"max_turns"``.
    """

    backend = "chat"

    def __init__(self, name: str, *, native_tools: bool = True, text_tool_calls: bool = True,
                 tools: Sequence[str] | None = None, max_tool_chars: int | None = None, max_turns: int | None = None,
                 trace_out: str | os.PathLike | None = None, system: str | None = None,
                 history_hours: int | None = None, max_reply_chars: int = 100_000):
        self.name = str(name)
        self.native_tools = bool(native_tools)
        self.text_tool_calls = bool(text_tool_calls)
        self.tools = tuple(tools) if tools is not None else None
        self.max_tool_chars = max_tool_chars
        if not isinstance(max_reply_chars, int) or max_reply_chars < 100:
            raise ValueError(f"max_reply_chars must be an integer >= 100, got {max_reply_chars!r}")
        self.max_reply_chars = max_reply_chars
        self.max_turns = max_turns
        self.trace_out = str(trace_out) if trace_out is not None else None
        self.system = system
        self.history_hours = history_hours
        self.session: ChatSession | None = None
        self.trace: dict | None = None
        self.status = "idle"
        self._episode: Mapping | None = None
        self._episode_id: str | None = None
        self._flushed = True
        self._t0 = 0.0

    # -- backend -------------------------------------------------------------------------------

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:  # pragma: no cover - abstract
        """One model reply to ``messages`` (OpenAI message dicts); ``tools`` are function schemas or ``None``.

        Raises:
            ContextExhausted, BackendUnavailable, LLMRequestError.
        """
        raise NotImplementedError

    def describe(self) -> dict:
        """Backend settings recorded in traces (never credentials)."""
        return {}

    # -- agent protocol ------------------------------------------------------------------------

    def reset(self, info: Mapping | None = None) -> None:
        """Start a new episode (flushes an unfinished trace of the previous one).

        Args:
            info: the env's reset ``info`` (:func:`fwgym.agents.run_episode` passes it). Its
                ``"episode"`` entry, the episode's structured facts, sets the tools, call limit, budget
                and history window of the chat (:meth:`ChatSession.start
                <fwgym.agents.chat.session.ChatSession.start>`); ``None`` or an info without it: the
                defaults stated there.
        """
        self._flush()
        self.session = None
        self.status = "idle"
        self._episode = (info or {}).get("episode")
        self._episode_id = (info or {}).get("episode_id")  # the runner's id: the trace line and the record share it

    def act(self, observation: Mapping) -> dict:
        """The next env action (a dict ``{"tool": NAME, "args": {...}}``). Never raises for model output;
        raises :class:`LLMRequestError` for configuration errors. The first call after :meth:`reset`
        (or the very first call) starts the episode's chat."""
        if self.session is None:
            self._begin(observation)
        else:
            self.session.observe(observation)
        s = self.session
        if self.status in ABANDON_STATUSES:
            return {"tool": REPLY_ERROR_TOOL, "args": {}}
        if s.has_pending():
            return self._hand(s.next_action())
        limit = self.max_turns if self.max_turns is not None else 2 * max(s.max_calls, 1) + 4
        if s.turns >= limit:
            return self._abandon("max_turns", f"{s.turns} model replies without the episode ending")
        try:
            reply = self.complete(list(s.messages), s.tool_schemas())
        except ContextExhausted as exc:
            return self._abandon("context_exhausted", str(exc))
        except HarnessError as exc:  # the backend failed, not the model: run_episode ends the episode unscored
            self.status = "backend_error"
            if self.trace is not None:
                self.trace["agent_status"], self.trace["agent_status_detail"] = "backend_error", str(exc)[:2000]
            raise
        if reply.content and len(reply.content) > self.max_reply_chars:
            n = len(reply.content)
            reply = dataclasses.replace(
                reply, content=reply.content[: self.max_reply_chars]
                + f"\n[fwgym: reply truncated from {n} to {self.max_reply_chars} characters]",
                meta={**reply.meta, "truncated_from_chars": n})
        self.trace["replies"].append(reply_json(s.turns + 1, reply))
        s.add_reply(reply)
        return self._hand(s.next_action())

    def _hand(self, action: dict) -> dict:
        self.status = "answered" if action.get("tool") == "submit" else "running"
        return action

    def end_episode(self, record: Mapping) -> None:
        """Called by :func:`fwgym.agents.run_episode` with the env's final record: completes and writes the trace."""
        if self.session is None or self.trace is None:
            return
        self.session.record_final()
        if self.status == "running":
            self.status = "no_answer"  # the env ended the episode (e.g. call limit) before an answer
        add_record(self.trace, record, self._last_submit())
        self._flush()

    def close(self) -> None:
        """Write the trace of an episode that ended without :meth:`end_episode`."""
        self._flush()

    # -- internals -----------------------------------------------------------------------------

    def _begin(self, observation: Mapping) -> None:
        self._flush()
        self.session = ChatSession(native_tools=self.native_tools, text_tool_calls=self.text_tool_calls, tools=self.tools,
                                   max_tool_chars=self.max_tool_chars, system=self.system,
                                   history_hours=self.history_hours)
        self.session.start(observation, self._episode)
        self.status = "running"
        self._t0 = time.perf_counter()
        self.trace = new_trace(self.name, self.backend, self.describe(), self.native_tools, self.session.tools)
        self.trace["episode_id"] = getattr(self, "_episode_id", None)
        self._flushed = False

    def _abandon(self, status: str, detail: str) -> dict:
        self.status = status
        if self.trace is not None:
            self.trace["agent_status"], self.trace["agent_status_detail"] = status, detail[:2000]
        action = {"tool": "abstain", "args": {"reason": f"{status}: {detail}"[:500]}}
        if self.session is not None:
            self.session.steps.append({"turn": self.session.turns, "source": "agent", "kind": "abandon", "action": action,
                                       "error": {"code": status, "message": detail[:2000]}, "env_result": None,
                                       "calls_left": None, "budget_left": None})
        return action

    def _last_submit(self) -> Any:
        for step in reversed(self.session.steps if self.session else []):
            if step["action"].get("tool") == "submit":
                return step["action"].get("args")
        return None

    def _flush(self) -> None:
        if self._flushed or self.trace is None or self.session is None:
            return
        self._flushed = True
        # settings refreshed: a lazily loaded backend knows more now
        finish_trace(self.trace, self.session, self.status, self.describe(), time.perf_counter() - self._t0)
        if self.trace_out:
            append_jsonl(self.trace_out, self.trace)


__all__ = ["ChatAgent", "ContextExhausted", "BackendUnavailable", "LLMRequestError", "ABANDON_STATUSES"]
