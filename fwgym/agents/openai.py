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
attributes, and it is scrubbed from everything written (traces, the reply cache, error messages), also
when a server echoes it.

Requests. Every request sends ``model``, ``messages`` (``content`` always a string), the sampling
settings that are set, ``max_tokens`` (default 2,048: a server without a bound generates until its
window is full) and, when tools are offered, ``tools`` with ``tool_choice: "auto"`` (servers such as
llama.cpp ignore ``tools`` without it).

Deadlines and retries (the SDK's). ``timeout`` is a wall-clock deadline for one model reply, retries
and waits included: each attempt's connect/read/write timeouts are clamped to the time left, and a
watchdog closes the connection when the deadline passes mid-body (a server dripping one byte every
2 s cannot hold a request past it). The deadline is also clamped to the episode's time left
(``episode_timeout``). Retries are the ``openai`` SDK's (``max_retries``; exponential backoff with
jitter, ``Retry-After`` honoured): HTTP 408, 409, 429, 502, 503, 504, connection errors and
``x-should-retry: true`` are retried; a deterministic error is not (400, 401, 403, 404, 422 and HTTP
500 without ``x-should-retry: true``, e.g. llama.cpp's validation error; a ``Retry-After`` longer
than the time left ends the reply at once).

Tokens of failed attempts: the ``usage`` a server reports in a response whose reply is not used (an error response,
retried by the SDK or final, and a 200 body refused as ``bad_response``) is counted
(:meth:`~fwgym.agents.chat.ChatAgent.count_failed_attempt`: in the episode's token totals and its
``failed_tokens``); an attempt cut by the deadline reports none.

Whose failure (see :mod:`fwgym.agents.chat.agent`): HTTP 400/413/422 whose message mentions the
context length raises :class:`~fwgym.agents.chat.ContextExhausted` (the model's: the episode ends
abstained). Everything else raises :class:`fwgym.errors.HarnessError` (the episode ends
``harness_error``, never scored), with ``kind``: ``"transport"`` (no connection), ``"timeout"``
(the deadline), ``"rate_limited"`` (429 after the retries), ``"http_5xx"``, ``"auth"`` (401/403),
``"not_found"`` (404: unknown model or path), ``"bad_request"`` (other 4xx), ``"bad_response"`` (a
200 body that is not JSON, not a chat completion, or larger than ``max_response_bytes``).

Reply cache: ``reply_cache=DIR`` (:class:`~fwgym.agents.chat.cache.ReplyCache`) answers a request
seen before from disk (no HTTP request, no tokens); the key is the full request (endpoint, model,
messages, tools, sampling settings, extra body), never the key.

Preflight: :meth:`OpenAIChatAgent.preflight` makes one ``GET /models`` and a short sampled
completion (twice with the seed, once with another) before a run: it fails early with a clear
:class:`~fwgym.errors.HarnessError` when the server is missing or misconfigured, and reports the
server's model names and whether it honoured the seed.

Modules: the agent is here; the HTTP layer (the SDK, the deadline transport, the retry policy) is
:mod:`fwgym.agents.openai_transport` and the wire format (constraint fields, the check and reading of a
completion body, error bodies) :mod:`fwgym.agents.openai_completions`; their public names are importable from here.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping

from fwgym.agents.chat import ChatAgent, ContextExhausted, ModelReply
from fwgym.agents.chat.cache import ReplyCache, ReplyCacheError
from fwgym.agents.chat.traces import scrub
from fwgym.agents.openai_completions import (SERVER_KINDS, completion_problem, completion_reply, constraint_fields,
                                             error_text, is_context_error, server_kind_of)
from fwgym.agents.openai_transport import (MAX_RESPONSE_BYTES, RETRY_STATUSES, attempt_log, http_client, request_deadline,
                                           sdk, usage_of)
from fwgym.errors import HarnessError
from fwgym.validation import check_int

#: Placeholder key sent when the key variable is unset (local servers ignore it).
DUMMY_API_KEY = "sk-no-key-required"
#: default bound on generated tokens per reply
DEFAULT_MAX_TOKENS = 2048
#: the preflight's prompt: its sampled replies vary, so an ignored seed shows
SEED_PROBE = "Write ten random words, separated by commas."


class OpenAIChatAgent(ChatAgent):
    """Chat agent for an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: model name as the server knows it.
        base_url: endpoint root such as ``"http://127.0.0.1:8000/v1"`` (``None``: the OpenAI API).
        temperature, top_p, seed: sampling settings; ``None`` leaves the server default.
        max_tokens: bound on generated tokens per reply (default :data:`DEFAULT_MAX_TOKENS`; ``None``
            sends none: the server's default, often "until the window is full").
        timeout: wall-clock seconds per model reply, retries and waits included (see the module docstring).
        max_retries: the SDK's retries of a transient failure (0 = one attempt only).
        api_key_env: name of the environment variable holding the key.
        extra_body: extra JSON fields for the request body (e.g. ``{"top_k": 20}`` or
            ``{"chat_template_kwargs": {"enable_thinking": False}}`` for vLLM).
        reply_cache: folder of the on-disk reply cache (``None``: no cache).
        max_response_bytes: largest response body read (default 256 MiB: far above any reply bounded by
            ``max_tokens``, so that even a 2,000,000-record submit arrives and is refused as the model's
            counted error; a larger body is a ``bad_response`` harness error).
        name: policy name (default ``"openai:<model>"``, ``"openai:<model>+<constrain mode>"`` with ``constrain``).
        server_kind: how the server takes constraints (``constrain``): ``"llama.cpp"`` (llama.cpp's server:
            ``response_format`` json_schema, ``grammar``), ``"llama-cpp-python"`` (``response_format`` json_object
            with ``schema``, ``grammar``), ``"vllm"`` (``guided_json``, ``guided_grammar``), ``"openai"``
            (``response_format`` json_schema; no grammar); ``None``: read from ``GET /models`` (its
            ``owned_by``: ``llamacpp``, ``me``, ``vllm``), else ``openai``.
        options: the chat options (:class:`~fwgym.agents.chat.options.ChatOptions` or their JSON form):
            ``native_tools`` (send tool schemas for native function calling; off for servers without tool
            support: tools are then called with JSON in text), ``strict_tools``, ``describe_tools``,
            ``compact_results``, ``constrain``, ...
        **chat_kwargs: :class:`~fwgym.agents.chat.ChatAgent` arguments (``trace_out``, ``max_turns``,
            ``episode_timeout``, ``max_reply_chars``, ``max_trace_chars``) and single chat options
            (``native_tools=False``, ...).

    Raises:
        ValueError: empty model name, negative ``max_retries``, non-positive ``timeout`` or ``max_tokens``.
    """

    backend = "openai"

    def __init__(self, model: str, base_url: str | None = None, *, temperature: float | None = None,
                 top_p: float | None = None, seed: int | None = None, max_tokens: int | None = DEFAULT_MAX_TOKENS,
                 timeout: float = 120.0, max_retries: int = 3, api_key_env: str = "OPENAI_API_KEY",
                 extra_body: Mapping | None = None, reply_cache: str | os.PathLike | None = None,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, name: str | None = None, server_kind: str | None = None,
                 **chat_kwargs: Any):
        if not model or not isinstance(model, str):
            raise ValueError("model must be a non-empty model name")
        max_retries = check_int("max_retries", max_retries, minimum=0)
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_tokens is not None:
            max_tokens = check_int("max_tokens (or None)", max_tokens, minimum=1)
        if server_kind is not None and server_kind not in SERVER_KINDS:
            raise ValueError(f"server_kind must be None or one of {list(SERVER_KINDS)}, got {server_kind!r}")
        super().__init__(name or f"openai:{model}", **chat_kwargs)
        if name is None and self.options.constrain:
            self.name = f"openai:{model}+{self.options.constrain}"
        self.server_kind = server_kind
        self.model, self.base_url = model, base_url
        self.temperature, self.top_p, self.seed, self.max_tokens = temperature, top_p, seed, max_tokens
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.api_key_env = api_key_env
        self.extra_body = dict(extra_body) if extra_body else None
        self.reply_cache = str(reply_cache) if reply_cache is not None else None
        self.max_response_bytes = int(max_response_bytes)
        self._client = None
        self._cache: ReplyCache | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = state["_cache"] = None  # rebuilt on first use (clients do not pickle)
        return state

    def describe(self) -> dict:
        """Settings recorded in traces (no credentials)."""
        return {"model": self.model, "base_url": self.base_url, "temperature": self.temperature, "top_p": self.top_p,
                "seed": self.seed, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "max_retries": self.max_retries, "api_key_env": self.api_key_env, "extra_body": self.extra_body,
                "episode_timeout": self.episode_timeout, "reply_cache": self.reply_cache, "server_kind": self.server_kind,
                **self.options.to_json()}

    def secrets(self) -> list[str]:
        """The API key from ``api_key_env`` (when set): scrubbed from everything written."""
        key = os.environ.get(self.api_key_env)
        return [key] if key and key != DUMMY_API_KEY else []

    @property
    def client(self):
        """The ``openai.OpenAI`` client (created on first use; the SDK's retries, fwgym's deadline transport)."""
        if self._client is None:
            openai = sdk()[0]
            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or DUMMY_API_KEY,
                                         timeout=self.timeout, max_retries=self.max_retries,
                                         http_client=http_client(self.max_response_bytes))
        return self._client

    def close(self) -> None:
        """Write a pending trace (:meth:`ChatAgent.close`) and close the HTTP client and its pooled
        connections (a later request opens a new client): an agent dropped without it leaves its
        keep-alive sockets to the garbage collector, which warns ``unclosed <socket ...>``."""
        try:
            super().close()
        finally:
            client, self._client = self._client, None
            if client is not None:
                client.close()

    @property
    def cache(self) -> ReplyCache | None:
        """The reply cache (``None`` without ``reply_cache``)."""
        if self._cache is None and self.reply_cache is not None:
            self._cache = ReplyCache(self.reply_cache)
        return self._cache

    def request_kwargs(self, messages: list[dict], tools: list[dict] | None) -> dict:
        """Keyword arguments of ``client.chat.completions.create`` for one turn."""
        kw: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kw["tools"] = tools
            kw["tool_choice"] = "auto"
        for k in ("temperature", "top_p", "seed", "max_tokens"):
            v = getattr(self, k)
            if v is not None:
                kw[k] = v
        extra = dict(self.extra_body or {})
        constraint = self.session.constraint() if self.session is not None else None
        if constraint is not None:
            fields = constraint_fields(constraint[0], constraint[1], self.detected_server_kind())
            extra.update(fields.pop("extra_body", {}))
            kw.update(fields)
        if extra:
            kw["extra_body"] = extra
        return kw

    def detected_server_kind(self) -> str:
        """``server_kind``, else what ``GET /models`` says (once per agent; ``openai`` when it says nothing)."""
        if self.server_kind is None:
            self.server_kind = "openai"
            try:
                with request_deadline(min(self.timeout, 30.0)):
                    self.server_kind = server_kind_of(getattr(m, "owned_by", None) for m in self.client.models.list())
            except Exception:  # noqa: BLE001 - no listing: the OpenAI spelling
                pass
        return self.server_kind

    def cache_key(self, kwargs: Mapping) -> str:
        """The reply-cache key of a request (:meth:`request_kwargs` plus the endpoint; never the key)."""
        return ReplyCache.key({"base_url": self.base_url, **kwargs})

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:
        """One chat completion (see the module docstring for deadlines, retries and the error policy)."""
        kw = self.request_kwargs(messages, tools)
        cache, key = self.cache, None
        t0 = time.perf_counter()
        if cache is not None:
            key = self.cache_key(kw)
            body = cache.get(key)
            if body is not None:
                problem = completion_problem(body)
                if problem:  # an edited entry: never a reply, never the agent's failure
                    raise ReplyCacheError(f"reply cache entry {cache.path(key)} is malformed: {problem}; remove it")
                return completion_reply(body, latency=time.perf_counter() - t0, requests=0, cached=True)
        body, retries = self._post(kw)
        reply = completion_reply(body, latency=time.perf_counter() - t0, requests=retries + 1)
        if cache is not None and key is not None:
            cache.put(key, scrub(body, self.secrets()), {"model": self.model, "base_url": self.base_url})
        return reply

    def _post(self, kw: dict, *, timeout: float | None = None) -> tuple[dict, int]:
        """POST one completion within the deadline; ``(response body, retries taken)``.

        Raises:
            ContextExhausted, HarnessError (see the module docstring).
        """
        openai, _, DeadlineExceeded, ResponseTooLarge = sdk()
        limit = self.timeout if timeout is None else timeout
        left = self.time_left()
        if left is not None:
            limit = min(limit, left)
            if limit <= 0:
                raise HarnessError(f"the episode took longer than its deadline of {self.episode_timeout:g} s", "timeout")
        where = self.base_url or "the OpenAI API"
        attempts: list[dict] = []
        try:
            with request_deadline(limit), attempt_log(attempts):
                raw = self.client.chat.completions.with_raw_response.create(**kw)
        except DeadlineExceeded as exc:
            raise HarnessError(f"no reply from {where} within {limit:g} s ({exc})", "timeout") from None
        except ResponseTooLarge as exc:
            raise HarnessError(f"{where}: {exc}", "bad_response") from None
        except openai.APITimeoutError:
            raise HarnessError(f"no reply from {where} within {limit:g} s", "timeout") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            raise HarnessError(f"cannot reach {where} after {self.max_retries} retries: "
                               f"{type(cause).__name__ if cause else 'connection error'}: {cause or exc}"[:1000],
                               "transport") from None
        except openai.APIStatusError as exc:
            status, msg = exc.status_code, error_text(exc)
            if is_context_error(status, msg):
                raise ContextExhausted(f"HTTP {status}: {msg}"[:2000]) from None
            kind = ("rate_limited" if status == 429 else "auth" if status in (401, 403) else "not_found" if status == 404
                    else "timeout" if status == 408 else "http_5xx" if status >= 500 else "bad_request")
            raise HarnessError(f"{where} refused the request for model {self.model!r}: HTTP {status}: {msg}"[:2000],
                               kind) from None
        except openai.OpenAIError as exc:  # e.g. a response the SDK cannot read
            raise HarnessError(f"{where}: {type(exc).__name__}: {exc}"[:1000], "bad_response") from None
        finally:  # the error responses (retried or final) and the usage they reported: counted, never lost
            for a in attempts:
                self.count_failed_attempt(a["usage"], f"HTTP {a['status']}")
        text = raw.http_response.text
        try:
            body = json.loads(text)
        except ValueError:
            raise HarnessError(f"{where} answered HTTP {raw.http_response.status_code} with a body that is not JSON "
                               f"({len(text)} characters: {text[:200]!r})", "bad_response") from None
        problem = completion_problem(body)
        if problem:
            self.count_failed_attempt(usage_of(body), "bad_response")  # the server may have reported what it generated
            raise HarnessError(f"{where} answered with a body that is not a chat completion: {problem}", "bad_response")
        return body, int(getattr(raw, "retries_taken", 0) or 0)

    def preflight(self) -> dict:
        """One request before a run: checks the server and reports facts for the run manifest.

        Makes ``GET {base_url}/models`` (a 404 is fine: not every server lists models) and a short
        high-entropy completion (:data:`SEED_PROBE`, 24 tokens at temperature 1.0, the agent's other
        settings): with a ``seed``, twice with it and once with ``seed + 1``, within ``timeout`` each.

        Returns:
            ``{"base_url", "model", "server_models" (ids or None), "model_listed" (``model`` is among
            them; llama.cpp lists its file path and serves any name), "reported_model" (the completion's
            ``model``), "seed", "seed_honoured" (``True``: the two replies with the seed are identical
            and the one with ``seed + 1`` differs; ``False``: the same seed gave two replies;
            ``None``: no seed, or the reply does not depend on it), "replies" (cut to 80
            characters), "latency_s", "openai_sdk", "httpx", "server_kind", "tools_shown", "parallel_slots",
            "max_tokens", "answer_tokens" (``{"decision": n, "forecast": n}``: tokens of a typical final answer in the
            server's tokenizer, :meth:`_answer_tokens`; ``None`` without usage), "answer_tokens_how"}``.

        Raises:
            HarnessError: no server, a refused key, an unknown model, a reply that is not a chat
                completion (a clear message naming the endpoint and model).
        """
        openai, httpx, *_ = sdk()
        where = self.base_url or "the OpenAI API"
        models = None
        try:
            with request_deadline(self.timeout):
                models = sorted(m.id for m in self.client.models.list())
        except openai.APIConnectionError as exc:
            raise HarnessError(f"preflight: no OpenAI-compatible server at {where} ({type(exc).__name__}); start the "
                               "server or fix --base-url", "transport") from None
        except openai.AuthenticationError as exc:
            raise HarnessError(f"preflight: {where} refused the API key from ${self.api_key_env}: {error_text(exc)}"[:1000],
                               "auth") from None
        except (openai.APIStatusError, openai.OpenAIError, AttributeError, TypeError):
            models = None  # no /models endpoint (or an odd listing): the completion below decides
        if models is not None and self.model not in models and self.base_url is not None:
            note = f" (the server lists {models[:10]})"
        else:
            note = ""
        kw = self.request_kwargs([{"role": "user", "content": SEED_PROBE}], None)
        kw.update(max_tokens=24, temperature=1.0)
        t0 = time.perf_counter()
        bodies = []
        try:
            bodies.append(self._post(dict(kw))[0])
            if self.seed is not None:
                bodies.append(self._post(dict(kw))[0])
                bodies.append(self._post({**kw, "seed": int(self.seed) + 1})[0])
        except HarnessError as exc:
            raise HarnessError(scrub(f"preflight for model {self.model!r} at {where} failed{note}: {exc}", self.secrets()),
                               exc.kind) from None
        except ContextExhausted as exc:
            raise HarnessError(f"preflight for model {self.model!r} at {where} failed: {exc}", "bad_request") from None
        texts = [str((b["choices"][0].get("message") or {}).get("content") or "") for b in bodies]
        honoured = None
        if len(texts) == 3:
            honoured = False if texts[0] != texts[1] else (True if texts[0] != texts[2] else None)
        return {"base_url": self.base_url, "model": self.model, "server_models": models,
                "model_listed": None if models is None else self.model in models,
                "reported_model": bodies[0].get("model"), "seed": self.seed, "seed_honoured": honoured,
                "replies": [scrub(t[:80], self.secrets()) for t in texts],
                "latency_s": round(time.perf_counter() - t0, 3), "openai_sdk": openai.__version__,
                "httpx": getattr(httpx, "__version__", None), "server_kind": self.detected_server_kind(),
                "tools_shown": self._tools_shown(kw), "parallel_slots": self._parallel_slots(),
                "max_tokens": self.max_tokens, "answer_tokens": self._answer_tokens(kw),
                "answer_tokens_how": "the server's usage (a prompt with a typical answer minus the same prompt without it)"}

    def _answer_tokens(self, kw: Mapping) -> dict[str, int] | None:
        """Tokens of a typical final answer per task in the server's tokenizer
        (:func:`fwgym.agents.chat.constrain.answer_lengths`): the ``usage.prompt_tokens`` of a one-token request whose
        message holds the answer, minus that of the same request without it (``None``: no ``usage``, or one that does not
        grow with the prompt, to tell)."""
        from fwgym.agents.chat.constrain import answer_lengths

        head = "Reply with OK. The answer:"
        base = {**kw, "max_tokens": 1}

        def prompt_tokens(text: str) -> int:
            usage = self._post({**base, "messages": [{"role": "user", "content": text}]})[0].get("usage") or {}
            n = usage.get("prompt_tokens")
            if not isinstance(n, int) or isinstance(n, bool):
                raise LookupError("no usage")
            return n

        try:
            plain = prompt_tokens(head)
            counts = answer_lengths(lambda text: prompt_tokens(head + "\n" + text) - plain,
                                    direct=self.options.direct_prompt)
        except (HarnessError, ContextExhausted, LookupError):
            return None
        return counts if all(n > 0 for n in counts.values()) else None  # a usage that ignores the prompt tells nothing

    def _tools_shown(self, kw: Mapping) -> bool | None:
        """Whether the server shows ``tools`` to the model: the prompt of a request with one tool has more tokens
        than the same request without it (``None``: no native tools, or no ``usage`` to tell)."""
        if not self.options.sends_native_tools:
            return None
        from fwgym.agents.chat.prompts import tool_schemas

        base = {**kw, "max_tokens": 1}
        try:
            plain = self._post(dict(base))[0].get("usage") or {}
            with_tools = self._post({**base, "tools": tool_schemas(["catalog"]), "tool_choice": "auto"})[0].get("usage") or {}
        except (HarnessError, ContextExhausted):
            return None
        a, b = plain.get("prompt_tokens"), with_tools.get("prompt_tokens")
        return None if not (isinstance(a, int) and isinstance(b, int)) else b > a

    def _parallel_slots(self) -> int | None:
        """The server's parallel slots (llama.cpp's ``GET /props`` ``total_slots``; ``None`` where it does not say)."""
        if not self.base_url:
            return None
        import json as _json
        import urllib.request

        root = self.base_url.rstrip("/").removesuffix("/v1")
        try:
            with urllib.request.urlopen(root + "/props", timeout=min(self.timeout, 10.0)) as r:
                slots = _json.loads(r.read()).get("total_slots")
        except (OSError, ValueError, AttributeError):
            return None
        return int(slots) if isinstance(slots, int) else None


__all__ = ["OpenAIChatAgent", "is_context_error", "completion_problem", "constraint_fields", "DUMMY_API_KEY",
           "DEFAULT_MAX_TOKENS", "RETRY_STATUSES", "MAX_RESPONSE_BYTES", "SERVER_KINDS"]
