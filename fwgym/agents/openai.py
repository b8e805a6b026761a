"""An fwgym agent backed by any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server,
Ollama, LM Studio, hosted APIs) through the ``openai`` client.

Example::

    from fwgym.agents import run_episode
    from fwgym.agents.openai import OpenAIChatAgent
    from fwgym.envs.fwbench import FWBenchEnv

    agent = OpenAIChatAgent("qwen3-4b", base_url="http://127.0.0.1:8000/v1", temperature=0.7, seed=1701,
                            trace_out="traces.jsonl")
    result = run_episode(FWBenchEnv("electricity", split="dev"), agent, seed=0)

The API key is read only from an environment variable (``api_key_env``, default ``OPENAI_API_KEY``);
when it is unset a dummy key is sent (local servers ignore it). The key is never stored in the agent's
attributes, traces or logs.

Errors: transport failures (timeouts, refused connections, HTTP 408/409/429 and 5xx) are retried
``max_retries`` times with exponential backoff, then end the episode with status ``backend_error``;
HTTP 400/413 whose message mentions the context length ends it with status ``context_exhausted``;
other refusals (401, 403, 404, other 400s) raise :class:`~fwgym.agents.chat.LLMRequestError`.
"""
from __future__ import annotations

import os
import re
import time
from typing import Any, Mapping

from fwgym.agents.chat import BackendUnavailable, ChatAgent, ContextExhausted, LLMRequestError, ModelReply, ToolRequest

#: Placeholder key sent when the key variable is unset (local servers ignore it).
DUMMY_API_KEY = "sk-no-key-required"
_CONTEXT_RE = re.compile(r"context|maximum (?:input |prompt )?length|too many tokens|prompt is too long|"
                         r"maximum number of tokens|exceeds? the (?:model'?s? )?(?:max|limit)", re.IGNORECASE)


def is_context_error(status: int | None, message: str) -> bool:
    """Whether an HTTP error means the prompt does not fit the context window."""
    return status in (400, 413, 422) and bool(_CONTEXT_RE.search(message or ""))


class OpenAIChatAgent(ChatAgent):
    """Chat agent for an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: model name as the server knows it.
        base_url: endpoint root such as ``"http://127.0.0.1:8000/v1"`` (``None``: the OpenAI API).
        temperature, top_p, seed, max_tokens: sampling settings; ``None`` leaves the server default.
        timeout: seconds per request before it counts as a transport failure.
        max_retries: retries after a transport failure (0 = one attempt only).
        backoff: first retry delay in seconds, doubled at each retry (capped at 60 s).
        api_key_env: name of the environment variable holding the key.
        native_tools: send tool schemas for native function calling (turn off for servers without
            tool support: tools are then called with JSON in text).
        extra_body: extra JSON fields for the request body (e.g. ``{"top_k": 20}`` or
            ``{"chat_template_kwargs": {"enable_thinking": False}}`` for vLLM).
        name: policy name (default ``"openai:<model>"``).
        **chat_kwargs: :class:`~fwgym.agents.chat.ChatAgent` options (``trace_out``,
            ``max_tool_chars``, ``max_turns``, ``text_tool_calls``, ``tools``, ``system``, ``history_hours``).

    Raises:
        ValueError: empty model name, negative ``max_retries``, non-positive ``timeout``.
    """

    backend = "openai"

    def __init__(self, model: str, base_url: str | None = None, *, temperature: float | None = None,
                 top_p: float | None = None, seed: int | None = None, max_tokens: int | None = None,
                 timeout: float = 120.0, max_retries: int = 3, backoff: float = 1.0,
                 api_key_env: str = "OPENAI_API_KEY", native_tools: bool = True, extra_body: Mapping | None = None,
                 name: str | None = None, **chat_kwargs: Any):
        if not model or not isinstance(model, str):
            raise ValueError("model must be a non-empty model name")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        super().__init__(name or f"openai:{model}", native_tools=native_tools, **chat_kwargs)
        self.model, self.base_url = model, base_url
        self.temperature, self.top_p, self.seed, self.max_tokens = temperature, top_p, seed, max_tokens
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
        self.api_key_env = api_key_env
        self.extra_body = dict(extra_body) if extra_body else None
        self._client = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None  # rebuilt on first use (clients do not pickle)
        return state

    def describe(self) -> dict:
        """Settings recorded in traces (no credentials)."""
        return {"model": self.model, "base_url": self.base_url, "temperature": self.temperature, "top_p": self.top_p,
                "seed": self.seed, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "max_retries": self.max_retries, "api_key_env": self.api_key_env, "extra_body": self.extra_body,
                "history_hours": self.history_hours}

    @property
    def client(self):
        """The ``openai.OpenAI`` client (created on first use; SDK retries off, ours apply)."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or DUMMY_API_KEY,
                                         timeout=self.timeout, max_retries=0)
        return self._client

    def request_kwargs(self, messages: list[dict], tools: list[dict] | None) -> dict:
        """Keyword arguments of ``client.chat.completions.create`` for one turn."""
        kw: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kw["tools"] = tools
        for k in ("temperature", "top_p", "seed", "max_tokens"):
            v = getattr(self, k)
            if v is not None:
                kw[k] = v
        if self.extra_body:
            kw["extra_body"] = dict(self.extra_body)
        return kw

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:
        """One chat completion with retries (see the module docstring for the error policy)."""
        import openai

        kw = self.request_kwargs(messages, tools)
        last: Exception | None = None
        t0 = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(60.0, self.backoff * 2 ** (attempt - 1)))
            try:
                resp = self.client.chat.completions.create(**kw)
            except openai.APIStatusError as exc:
                status, msg = exc.status_code, _error_text(exc)
                if is_context_error(status, msg):
                    raise ContextExhausted(f"HTTP {status}: {msg}"[:2000]) from None
                if status in (408, 409, 429) or status >= 500:
                    last = exc
                    continue
                raise LLMRequestError(f"{self.base_url or 'OpenAI API'} refused the request for model {self.model!r}: "
                                      f"HTTP {status}: {msg}"[:2000]) from None
            except (openai.APIConnectionError, openai.APIResponseValidationError) as exc:  # timeouts included
                last = exc
                continue
            return _reply(resp, attempts=attempt + 1, latency=time.perf_counter() - t0)
        raise BackendUnavailable(f"no reply after {self.max_retries + 1} attempt(s): {type(last).__name__}: "
                                 f"{str(last)[:500]}")


def _error_text(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", None) or exc)


def _reply(resp: Any, *, attempts: int, latency: float) -> ModelReply:
    meta: dict[str, Any] = {"attempts": attempts, "latency_s": round(latency, 3)}
    usage = getattr(resp, "usage", None)
    if usage is not None:
        meta["usage"] = {k: v for k, v in (usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)).items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)}
    choices = getattr(resp, "choices", None) or []
    if not choices:
        return ModelReply(content="", finish_reason="no_choices", meta=meta)
    choice = choices[0]
    msg = choice.message
    calls = []
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        calls.append(ToolRequest(id=getattr(tc, "id", None) or f"call_{i}", name=str(fn.name or ""),
                                 arguments=fn.arguments if fn.arguments is not None else "{}"))
    extra = getattr(msg, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    return ModelReply(content=msg.content, tool_calls=calls, reasoning=reasoning if isinstance(reasoning, str) else None,
                      finish_reason=getattr(choice, "finish_reason", None), meta=meta)


__all__ = ["OpenAIChatAgent", "is_context_error", "DUMMY_API_KEY"]
