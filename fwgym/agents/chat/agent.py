"""Backend-neutral chat agent: the agent protocol on top of :class:`~fwgym.agents.chat.session.ChatSession`.

:class:`ChatAgent` implements ``reset(info)`` and ``act(observation) -> action``; a backend subclass only
implements :meth:`ChatAgent.complete` (messages in, one :class:`~fwgym.agents.chat.session.ModelReply`
out). Episodes run through :func:`fwgym.agents.run_episode` like every other agent, so scores always
come from the env's records. An episode starts at :meth:`ChatAgent.reset`, which receives the env's
reset ``info``; its ``"episode"`` entry (the structured facts of the episode: tools, task, call limit,
budget, visible-history and target windows) configures the session, so nothing is read back out of
the context text, and its ``"episode_id"`` (set by the run layer) is written into the trace.

Whose failure is it? (the contract with the run layer)

* The model's: anything it says (unusable replies, over-long arguments, bad answers) is a counted
  call with feedback. :class:`ContextExhausted` from :meth:`complete` (the prompt no longer fits the
  window) and the safety bound on model turns (``max_turns``) end the episode through the env's
  ``abstain`` tool: status ``abstained``, scored invalid, ``reason`` starting with the agent status
  (``"context_exhausted: ..."`` / ``"max_turns: ..."``), at no call and no credit.
* The harness's: :class:`fwgym.errors.HarnessError` (transport errors, timeouts, HTTP 5xx/429 after
  the retries, non-JSON or schema-invalid bodies, 401/403/404 and 400s not about the context, a model
  that cannot be loaded, the per-episode deadline ``episode_timeout``) propagates out of :meth:`act`
  with its ``kind``. Before it does, the trace is completed (``agent_status`` ``"harness_error"``,
  ``harness_error`` ``{"kind", "message"}``) and written. :func:`fwgym.agents.run_episode` ends the
  episode as ``harness_error``, which is never scored.

Bounds: replies longer than ``max_reply_chars`` are cut with a notice (what the harness parses and
the trace keeps); tool-call arguments longer than ``max_argument_chars`` are cut in the trace and
refused as the model's error; a trace line never exceeds ``max_trace_chars``
(:func:`~fwgym.agents.chat.traces.bound_trace`). Secrets (:meth:`ChatAgent.secrets`, e.g. the API
key) are scrubbed from every reply on receipt, from harness-error messages and from the trace.

Threads: an agent instance serves one episode at a time (``--concurrency N`` builds N agents); the
trace file is appended under a lock (:func:`fwgym.jsonl.append_jsonl`), so agents in threads and
processes may share it.

Traces (:mod:`fwgym.agents.chat.traces`). With ``trace_out`` set, one JSON line per episode is
appended to that file. The score and final plan come from the env record that
:func:`fwgym.agents.run_episode` passes to :meth:`ChatAgent.end_episode` after the last step; an
episode ended by other means is flushed without them at the next :meth:`ChatAgent.reset` or
:meth:`ChatAgent.close`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from typing import Any, Mapping

from fwgym.agents.chat.direct import TEMPERATURE, TrajectoryError, batch_sizes, cik_timestamps, parse_trajectory
from fwgym.agents.chat.options import ChatOptions, as_options
from fwgym.agents.chat.session import REPLY_ERROR_TOOL, ChatSession, ModelReply
from fwgym.agents.chat.traces import (MAX_TRACE_CHARS, add_record, append_jsonl, bound_trace, finish_trace, new_trace,
                                      reply_json, scrub)
from fwgym.errors import HarnessError
from fwgym.traces import Trace
from fwgym.validation import check_int
from fwgym.warn import warn_user

#: failed attempts listed per episode (:meth:`ChatAgent.count_failed_attempt`; more are counted, not listed)
MAX_FAILED_ATTEMPTS = 100
#: agent statuses that end an episode through ``abstain`` (the model's failures)
ABANDON_STATUSES = ("context_exhausted", "max_turns", "direct_prompt_failed")


class ContextExhausted(RuntimeError):
    """The conversation no longer fits the model's context window (ends the episode as the model's failure)."""


class ChatAgent:
    """Base class of chat-model agents (subclasses implement :meth:`complete`).

    Args:
        name: policy name shown in results and leaderboards.
        options: the chat session's :class:`~fwgym.agents.chat.options.ChatOptions` (or their JSON form), given
            to every episode's :class:`~fwgym.agents.chat.session.ChatSession` unchanged.
        max_reply_chars: truncate model replies (and reasoning) longer than this (default 100,000
            characters) and append a notice saying so; the truncated text is what the harness parses
            and what the trace keeps. Tool-call arguments longer than the options' ``max_argument_chars``
            are refused as the model's error (``arguments_too_long``, one counted call) and cut in the trace.
        max_trace_chars: longest trace line (default :data:`~fwgym.agents.chat.traces.MAX_TRACE_CHARS`).
        max_turns: safety bound on model replies per episode (default ``2 * calls + 4``).
        episode_timeout: wall-clock seconds an episode may take (``None``: no bound); past it the
            episode ends as a harness error (kind ``"timeout"``); backends bound their requests by
            the time left (:meth:`time_left`).
        trace_out: JSONL file to append one trace per episode to (``None``: no file; the last
            episode's trace is still in :attr:`trace`).
        **option_kwargs: single chat options instead of (or replacing those of) ``options``:
            ``native_tools``, ``text_tool_calls``, ``tools``, ``max_tool_chars``, ``system``, ``history_hours``,
            ``describe_tools``, ``compact_results``, ``strict_tools``, ``tool_results_as``,
            ``max_argument_chars``, ``direct_prompt``, ``samples``, ``constrain``, ``objective``
            (:class:`~fwgym.agents.chat.options.ChatOptions`; ``objective="loss"``: the prompts state the decision
            loss as the objective, nothing else changes). ``direct_prompt`` in forecast episodes is Context
            is Key's direct prompt (:mod:`fwgym.agents.chat.direct`): ``samples`` completions, one request each,
            at temperature 1 unless the backend sets one (with a backend ``seed``, completion i uses
            ``seed + i``), each one ``(timestamp, value)`` trajectory between ``<forecast>`` tags, retried and
            counted as CiK does; the valid trajectories are submitted as samples, and fewer than ``samples``
            valid ones end the episode through ``abstain`` (``direct_prompt_failed``: invalid, the cap).

    Attributes:
        session: the current (or last finished) episode's :class:`~fwgym.agents.chat.session.ChatSession`.
        trace: the current (or last finished) episode's trace dict.
        status: ``"running"``, ``"answered"`` (the last action was a submit), ``"no_answer"`` (the env
            ended the episode first, e.g. at the call limit), ``"context_exhausted"``, ``"max_turns"``,
            ``"harness_error"``.
        episode_id: the run layer's id of the current episode (``info["episode_id"]``), or ``None``.
    """

    backend = "chat"
    #: a backend's sampling settings, where it has them (``None``: the server's default); the direct prompt sets
    #: them per completion (:meth:`_sample_completion`)
    temperature: float | None
    seed: int | None

    def __init__(self, name: str, *, options: ChatOptions | Mapping | None = None, max_turns: int | None = None,
                 trace_out: str | os.PathLike | None = None, max_reply_chars: int = 100_000,
                 max_trace_chars: int = MAX_TRACE_CHARS, episode_timeout: float | None = None, **option_kwargs: Any):
        self.name = str(name)
        self.options = as_options(options, **option_kwargs)
        max_reply_chars = check_int("max_reply_chars", max_reply_chars, minimum=100)
        max_trace_chars = check_int("max_trace_chars", max_trace_chars, minimum=10_000)
        if episode_timeout is not None and not episode_timeout > 0:
            raise ValueError(f"episode_timeout must be None or > 0 seconds, got {episode_timeout!r}")
        self.max_reply_chars, self.max_trace_chars = max_reply_chars, max_trace_chars
        self.episode_timeout = float(episode_timeout) if episode_timeout is not None else None
        self.max_turns = max_turns
        self.trace_out = str(trace_out) if trace_out is not None else None
        self.session: ChatSession | None = None
        self.trace: Trace | None = None
        self.status = "idle"
        self.episode_id: str | None = None
        self._episode: Mapping | None = None
        self._flushed = True
        self._t0 = 0.0
        self._stats: dict = _empty_stats()

    # -- backend -------------------------------------------------------------------------------

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:  # pragma: no cover - abstract
        """One model reply to ``messages`` (OpenAI message dicts); ``tools`` are function schemas or ``None``.

        A backend puts ``latency_s``, ``usage`` (``prompt_tokens``, ``completion_tokens``) and
        ``requests`` (HTTP requests made, retries included; 0 for a cached reply) into the reply's
        ``meta`` where it knows them, and bounds its own waiting by :meth:`time_left`.

        Raises:
            ContextExhausted: the prompt does not fit (the model's failure).
            fwgym.errors.HarnessError: the backend could not give a reply (infrastructure).
        """
        raise NotImplementedError

    def describe(self) -> dict:
        """Backend settings recorded in traces (never credentials)."""
        return {}

    def secrets(self) -> list[str]:
        """Strings that must never be written anywhere (e.g. the API key); scrubbed from replies,
        harness-error messages and traces. The base class has none."""
        return []

    def time_left(self) -> float | None:
        """Seconds left of the episode's ``episode_timeout`` (``None``: no deadline)."""
        if self.episode_timeout is None:
            return None
        return self.episode_timeout - (time.perf_counter() - self._t0)

    # -- agent protocol ------------------------------------------------------------------------

    def reset(self, info: Mapping | None = None) -> None:
        """Start a new episode (flushes an unfinished trace of the previous one).

        Args:
            info: the env's reset ``info`` (:func:`fwgym.agents.run_episode` passes it). Its
                ``"episode"`` entry, the episode's structured facts, sets the task, tools, call limit,
                budget and history window of the chat (:meth:`ChatSession.start
                <fwgym.agents.chat.session.ChatSession.start>`); its ``"episode_id"`` (the run
                layer's id) goes into the trace. ``None`` or an info without them: the defaults stated there.
        """
        self._flush()
        self.session = None
        self.status = "idle"
        info = info or {}
        self._episode = info.get("episode")
        eid = info.get("episode_id")
        self.episode_id = str(eid) if eid is not None else None
        self._stats = _empty_stats()

    def act(self, observation: Mapping) -> dict:
        """The next env action (a dict ``{"tool": NAME, "args": {...}}``). Never raises for model output;
        raises :class:`~fwgym.errors.HarnessError` for infrastructure failures (after writing the trace).
        The first call after :meth:`reset` (or the very first call) starts the episode's chat."""
        if self.session is None:
            self._begin(observation)
        else:
            self.session.observe(observation)
        s = self.session
        if self.status in ABANDON_STATUSES:
            return {"tool": REPLY_ERROR_TOOL, "args": {}}
        if self.options.direct_prompt and s.task == "forecast" and s.turns == 0 and not s.steps:
            return self._direct_forecast()
        if s.has_pending():
            return self._hand(s.next_action())
        limit = self.max_turns if self.max_turns is not None else 2 * max(s.max_calls, 1) + 4
        if s.turns >= limit:
            return self._abandon("max_turns", f"{s.turns} model replies without the episode ending")
        try:
            left = self.time_left()
            if left is not None and left <= 0:
                raise HarnessError(f"the episode took longer than its deadline of {self.episode_timeout:g} s "
                                   f"({s.turns} model replies)", "timeout")
            reply = self.complete(list(s.messages), s.tool_schemas())
        except ContextExhausted as exc:
            return self._abandon("context_exhausted", self._clean(str(exc)))
        except HarnessError as exc:
            self._harness_failure(exc)
            raise HarnessError(self._clean(str(exc)), exc.kind) from None
        reply = self._bound(reply)
        self._count(reply)
        self.trace["replies"].append(reply_json(s.turns + 1, reply))
        s.add_reply(reply)
        return self._hand(s.next_action())

    def _direct_forecast(self) -> dict:
        """CiK's direct prompt: sample trajectories in batches (:func:`~fwgym.agents.chat.direct.batch_sizes`),
        parse each, and submit the first ``samples`` valid ones (or abstain when there are fewer)."""
        s = self.session
        if getattr(self, "reply_cache", None) is not None and getattr(self, "seed", None) is None:
            raise ValueError("the direct prompt with a reply cache needs a seed (completion i is sampled with seed + i; "
                             "without one, every completion would be the same cached reply): pass --llm-seed")
        stamps = cik_timestamps(s.episode)
        valid: list[list[float]] = []
        outcomes: list[str] = []
        try:
            for batch in batch_sizes(self.options.samples):
                if len(valid) >= self.options.samples:
                    break
                for _ in range(batch):
                    reply = self._bound(self._sample_completion(list(s.messages), len(outcomes)))
                    self._count(reply)
                    self.trace["replies"].append(reply_json(len(outcomes) + 1, reply))
                    try:
                        valid.append(parse_trajectory(reply.content, stamps))
                        outcomes.append("valid")
                    except TrajectoryError as exc:
                        outcomes.append(exc.reason)
        except ContextExhausted as exc:
            return self._abandon("context_exhausted", self._clean(str(exc)))
        except HarnessError as exc:
            self._harness_failure(exc)
            raise HarnessError(self._clean(str(exc)), exc.kind) from None
        s.turns = len(outcomes)
        rejected = {r: outcomes.count(r) for r in sorted(set(outcomes) - {"valid"})}
        self.trace["direct_samples"] = {"requested": self.options.samples, "completions": len(outcomes),
                                        "valid": outcomes.count("valid"), "rejected": rejected, "outcomes": outcomes}
        if len(valid) < self.options.samples:
            return self._abandon("direct_prompt_failed", f"{len(valid)} of {self.options.samples} trajectories valid after "
                                 f"{len(outcomes)} completions (rejected: {rejected})")
        action = {"tool": "submit", "args": {"samples": valid[: self.options.samples]}}
        s.steps.append({"turn": s.turns, "source": "agent", "kind": "direct_samples", "action": action, "error": None,
                        "env_result": None, "calls_left": None, "budget_left": None})
        return self._hand(action)

    def _sample_completion(self, messages: list[dict], index: int) -> ModelReply:
        """Completion ``index`` of a direct-prompt forecast: temperature 1 where the backend sets none, seed
        ``seed + index`` where it sets one (restored afterwards), within the episode's deadline."""
        saved = {}
        if hasattr(self, "temperature") and self.temperature is None:
            saved["temperature"] = None
            self.temperature = TEMPERATURE
        seed = getattr(self, "seed", None)
        if seed is not None:
            saved["seed"] = seed
            self.seed = int(seed) + index
        try:
            left = self.time_left()
            if left is not None and left <= 0:
                raise HarnessError(f"the episode took longer than its deadline of {self.episode_timeout:g} s "
                                   f"({index} direct-prompt completions)", "timeout")
            return self.complete(messages, None)
        finally:
            for k, v in saved.items():
                setattr(self, k, v)

    def episode_stats(self) -> dict:
        """Accounting of the current (or just ended) episode.

        Returns:
            ``{"prompt_tokens", "completion_tokens"}`` (summed ``usage`` of the replies plus that of the failed
            attempts, :meth:`count_failed_attempt`; ``None`` unless every reply reported it, or, without a reply,
            unless a failed attempt did), ``"failed_tokens"`` (int: the part of those totals that failed attempts
            reported; 0 when none did), ``"failed_attempts"`` (list of ``{"what", "prompt_tokens",
            "completion_tokens"}``, the tokens ``None`` where not reported), ``"model_turns"`` (replies),
            ``"requests"`` (backend requests, retries included; cached replies make none), ``"cached_replies"``,
            ``"request_latency_s"`` (list of seconds, one per reply, retries and waits included) and ``"wall_s"``
            (the episode's wall time so far, s).
        """
        st = self._stats
        fp, fc = st["failed_prompt_tokens"], st["failed_completion_tokens"]
        reported = any(a["prompt_tokens"] is not None for a in st["failed_attempts"])
        known = st["usage_complete"] and st["model_turns"] > 0 or st["model_turns"] == 0 and reported
        return {"prompt_tokens": st["prompt_tokens"] + fp if known else None,
                "completion_tokens": st["completion_tokens"] + fc if known else None, "failed_tokens": fp + fc,
                "failed_attempts": [dict(a) for a in st["failed_attempts"]],
                "model_turns": st["model_turns"], "requests": st["requests"], "cached_replies": st["cached_replies"],
                "request_latency_s": list(st["request_latency_s"]), "served_model": st.get("served_model"),
                "wall_s": round(time.perf_counter() - self._t0, 3) if self.session is not None else 0.0}

    def _hand(self, action: dict) -> dict:
        self.status = "answered" if action.get("tool") == "submit" else "running"
        return action

    def end_episode(self, record: Mapping) -> None:
        """Called by :func:`fwgym.agents.run_episode` with the env's final record: completes and writes the trace."""
        if self.session is None or self.trace is None or self._flushed:
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
        self.session = ChatSession(self.options)
        self.session.start(observation, self._episode)
        self.status = "running"
        self._t0 = time.perf_counter()
        case_id = ((self._episode or {}).get("case") or {}).get("case_id")
        self.trace = new_trace(self.name, self.backend, self.describe(), self.session.native_tools, self.session.tools,
                               episode_id=self.episode_id, case_id=case_id)
        self._flushed = False

    def _clean(self, text: str) -> str:
        return scrub(text, self.secrets())

    def _bound(self, reply: ModelReply) -> ModelReply:
        """Scrub secrets from a reply and cut its text and tool-call arguments to the bounds."""
        secrets = self.secrets()
        meta = dict(reply.meta or {})
        content, reasoning = reply.content, reply.reasoning
        if secrets:
            content, reasoning = scrub(content, secrets), scrub(reasoning, secrets)
        if content and len(content) > self.max_reply_chars:
            meta["truncated_from_chars"] = len(content)
            content = (content[: self.max_reply_chars]
                       + f"\n[fwgym: reply truncated from {len(content)} to {self.max_reply_chars} characters]")
        if reasoning and len(reasoning) > self.max_reply_chars:
            reasoning = reasoning[: self.max_reply_chars] + f"\n[fwgym: reasoning truncated from {len(reasoning)} characters]"
        calls = []
        for c in reply.tool_calls:
            args = c.arguments
            text = args if isinstance(args, str) else None
            if text is None and not isinstance(args, (str, type(None))):
                try:
                    text = json.dumps(args)
                except (TypeError, ValueError):
                    text = None
            if text is not None and len(text) > self.options.max_argument_chars:
                c = dataclasses.replace(c, arguments=text[:1000] + f"...[fwgym: {len(text) - 1000} characters cut]",
                                        original_chars=len(text))
            elif secrets and text is not None and any(sec in text for sec in secrets if len(sec) >= 4):
                c = dataclasses.replace(c, arguments=scrub(text, secrets))
            calls.append(dataclasses.replace(c, name=scrub(str(c.name)[:200], secrets)))
        return dataclasses.replace(reply, content=content, reasoning=reasoning, tool_calls=calls, meta=meta)

    def _count(self, reply: ModelReply) -> None:
        st, meta = self._stats, reply.meta or {}
        st["model_turns"] += 1
        st["requests"] += int(meta.get("requests", meta.get("attempts", 1)) or 0)
        st["cached_replies"] += bool(meta.get("cached"))
        note_served_model(self, st, meta.get("model"))
        if isinstance(meta.get("latency_s"), (int, float)):
            st["request_latency_s"].append(float(meta["latency_s"]))
        usage = meta.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int) and isinstance(usage.get("completion_tokens"), int):
            st["prompt_tokens"] += usage["prompt_tokens"]
            st["completion_tokens"] += usage["completion_tokens"]
        else:
            st["usage_complete"] = False

    def count_failed_attempt(self, usage: Mapping | None, what: str) -> None:
        """Count a backend attempt whose reply the episode does not use (an HTTP error response, retried or final; a
        body refused as a harness error): the tokens its ``usage`` reports (``prompt_tokens``, ``completion_tokens``;
        ``None``: not reported) join the episode's totals and ``failed_tokens`` (:meth:`episode_stats`); ``what``
        says what failed (e.g. ``"HTTP 503"``). At most :data:`MAX_FAILED_ATTEMPTS` are listed; all are counted."""
        st = self._stats
        pt = ct = None
        if isinstance(usage, Mapping) and all(isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool)
                                              for k in ("prompt_tokens", "completion_tokens")):
            pt, ct = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
            st["failed_prompt_tokens"] += pt
            st["failed_completion_tokens"] += ct
        if len(st["failed_attempts"]) < MAX_FAILED_ATTEMPTS:
            st["failed_attempts"].append({"what": str(what)[:80], "prompt_tokens": pt, "completion_tokens": ct})

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

    def _harness_failure(self, exc: HarnessError) -> None:
        """Record an infrastructure failure in the trace and write it (the episode ends unscored)."""
        self.status = "harness_error"
        if self.trace is not None:
            msg = self._clean(str(exc))[:2000]
            self.trace["agent_status"], self.trace["agent_status_detail"] = "harness_error", msg
            self.trace["harness_error"] = {"kind": exc.kind, "message": msg}
        if self.session is not None:
            self.session.record_final()
        self._flush()

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
        finish_trace(self.trace, self.session, self.status, self.describe(), time.perf_counter() - self._t0,
                     self.episode_stats())
        self.trace = bound_trace(scrub(self.trace, self.secrets()), self.max_trace_chars)
        if self.trace_out:
            append_jsonl(self.trace_out, self.trace)


def _empty_stats() -> dict:
    return {"prompt_tokens": 0, "completion_tokens": 0, "usage_complete": True, "model_turns": 0, "requests": 0,
            "cached_replies": 0, "request_latency_s": [], "served_model": None, "failed_prompt_tokens": 0,
            "failed_completion_tokens": 0, "failed_attempts": []}


#: (agent class, requested model, reported model) already warned about in this process
_WARNED_MODELS: set = set()
_WARN_LOCK = threading.Lock()


def note_served_model(agent: Any, stats: dict, served: Any) -> None:
    """Record (once per episode, in ``stats["served_model"]``) a reply's ``model`` that is not the model the agent
    asked for, and warn once per process and pair (issue 25.6: a server that answers with another model)."""
    requested = getattr(agent, "model", None)
    if not isinstance(served, str) or not served or not isinstance(requested, str) or served == requested:
        return
    if stats.get("served_model") is None:
        stats["served_model"] = served[:200]
    key = (type(agent).__name__, requested, served)
    with _WARN_LOCK:
        if key in _WARNED_MODELS:
            return
        _WARNED_MODELS.add(key)
    warn_user(f"{type(agent).__name__}: the server answered a request for model {requested!r} with a reply of model "
              f"{served[:200]!r}; recorded per episode (served_model): the row may not measure {requested!r}",
              RuntimeWarning)


__all__ = ["ChatAgent", "ContextExhausted", "HarnessError", "ABANDON_STATUSES"]
