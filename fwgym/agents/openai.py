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
"""
from __future__ import annotations

import contextvars
import importlib
import json
import os
import re
import socket
import threading
import time
from typing import Any, Mapping

from fwgym.agents.chat import ChatAgent, ContextExhausted, ModelReply, ToolRequest
from fwgym.agents.chat.cache import ReplyCache
from fwgym.agents.chat.traces import scrub
from fwgym.errors import HarnessError
from fwgym.validation import check_int, is_number

#: Placeholder key sent when the key variable is unset (local servers ignore it).
DUMMY_API_KEY = "sk-no-key-required"
#: default bound on generated tokens per reply
DEFAULT_MAX_TOKENS = 2048
#: the preflight's prompt: its sampled replies vary, so an ignored seed shows
SEED_PROBE = "Write ten random words, separated by commas."
#: HTTP statuses retried (transient by definition); any other error status is final unless the server
#: sends ``x-should-retry: true``
RETRY_STATUSES = frozenset({408, 409, 429, 502, 503, 504})
#: largest response body read (bytes); a larger one is a ``bad_response`` harness error
MAX_RESPONSE_BYTES = 256 << 20
_CONTEXT_RE = re.compile(r"context|maximum (?:input |prompt )?length|too many tokens|prompt is too long|"
                         r"maximum number of tokens|exceeds? the (?:model'?s? )?(?:max|limit)", re.IGNORECASE)
#: the wall-clock deadline (time.monotonic) of the request in flight on this thread/context
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("fwgym_openai_deadline", default=None)


def is_context_error(status: int | None, message: str) -> bool:
    """Whether an HTTP error means the prompt does not fit the context window."""
    return status in (400, 413, 422) and bool(_CONTEXT_RE.search(message or ""))


_SDK_LOCK = threading.Lock()
_SDK: tuple | None = None


def _sdk():
    """``(openai, httpx module the SDK uses, DeadlineExceeded, ResponseTooLarge)``; imported on first use
    (once per process, under a lock: the exception classes must be the same objects in every thread)."""
    global _SDK
    with _SDK_LOCK:
        if _SDK is None:
            _SDK = _load_sdk()
        return _SDK


def _load_sdk():
    import openai

    base = next(c for c in openai.DefaultHttpxClient.__mro__
                if c.__name__ == "Client" and not c.__module__.startswith("openai"))
    httpx = importlib.import_module(base.__module__.split(".")[0])

    class DeadlineExceeded(openai.OpenAIError):
        """The request's wall-clock deadline passed (an OpenAIError: the SDK does not retry it)."""

    class ResponseTooLarge(openai.OpenAIError):
        """The response body exceeds the bound (an OpenAIError: the SDK does not retry it)."""

    return openai, httpx, DeadlineExceeded, ResponseTooLarge


def _make_transport(max_body: int):
    """An httpx transport enforcing the deadline of :data:`_DEADLINE` and the body bound (see the module docstring)."""
    openai, httpx, DeadlineExceeded, ResponseTooLarge = _sdk()

    class BoundedStream(httpx.SyncByteStream):
        def __init__(self, inner, deadline, request, sock):
            self.inner, self.deadline, self.request, self.n = inner, deadline, request, 0
            self.timer = None
            if deadline is not None and sock is not None:
                self.timer = threading.Timer(max(deadline - time.monotonic(), 0.0), _shutdown, (sock,))
                self.timer.daemon = True
                self.timer.start()

        def _late(self) -> bool:
            return self.deadline is not None and time.monotonic() >= self.deadline - 0.01

        def __iter__(self):
            try:
                for chunk in self.inner:
                    self.n += len(chunk)
                    if self.n > max_body:
                        raise ResponseTooLarge(f"the response body exceeds {max_body} bytes")
                    if self._late():
                        raise DeadlineExceeded("the reply's deadline passed while the body was arriving")
                    yield chunk
            except (httpx.TransportError, OSError) as exc:
                if self._late():
                    raise DeadlineExceeded("the reply's deadline passed while the body was arriving") from exc
                raise
            finally:
                self._cancel()

        def _cancel(self):
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def close(self):
            self._cancel()
            self.inner.close()

    class DeadlineTransport(httpx.BaseTransport):
        def __init__(self):
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request):
            deadline = _DEADLINE.get()
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceeded("the reply's deadline passed before the request was sent")
                given = request.extensions.get("timeout") or {}
                request.extensions["timeout"] = {k: min(given[k], left) if given.get(k) is not None else left
                                                 for k in ("connect", "read", "write", "pool")}
            try:
                resp = self.inner.handle_request(request)
            except httpx.TimeoutException as exc:
                if deadline is not None and time.monotonic() >= deadline - 0.05:
                    raise DeadlineExceeded("the reply's deadline passed while waiting for the server") from exc
                raise
            return httpx.Response(status_code=resp.status_code, headers=resp.headers,
                                  stream=BoundedStream(resp.stream, deadline, request, _socket_of(resp)),
                                  extensions=resp.extensions, request=request)

        def close(self):
            self.inner.close()

    return DeadlineTransport()


def _socket_of(resp):
    """The socket under an httpx response (for the deadline watchdog), ``None`` where the backend does not say."""
    stream = resp.extensions.get("network_stream")
    if stream is None or not hasattr(stream, "get_extra_info"):
        return None
    try:
        return stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - any backend: the watchdog is best effort, reads are still checked
        return None


def _shutdown(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _retry_policy(response) -> None:
    """httpx response hook: tell the SDK (``x-should-retry: false``) not to retry a deterministic error
    or a ``Retry-After`` beyond the deadline (the SDK obeys the header)."""
    code = response.status_code
    if code < 400 or "x-should-retry" in response.headers:
        return
    deadline = _DEADLINE.get()
    wait = _retry_after(response.headers)
    if code not in RETRY_STATUSES or (deadline is not None and wait is not None and time.monotonic() + wait > deadline):
        response.headers["x-should-retry"] = "false"


def _retry_after(headers) -> float | None:
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is not None:
            try:
                return float(v) / div
            except ValueError:
                return None
    return None


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
        native_tools: send tool schemas for native function calling (turn off for servers without
            tool support: tools are then called with JSON in text).
        extra_body: extra JSON fields for the request body (e.g. ``{"top_k": 20}`` or
            ``{"chat_template_kwargs": {"enable_thinking": False}}`` for vLLM).
        reply_cache: folder of the on-disk reply cache (``None``: no cache).
        max_response_bytes: largest response body read (default 256 MiB: far above any reply bounded by
            ``max_tokens``, so that even a 2,000,000-record submit arrives and is refused as the model's
            counted error; a larger body is a ``bad_response`` harness error).
        name: policy name (default ``"openai:<model>"``).
        **chat_kwargs: :class:`~fwgym.agents.chat.ChatAgent` options (``trace_out``, ``max_tool_chars``,
            ``max_turns``, ``text_tool_calls``, ``tools``, ``system``, ``history_hours``,
            ``episode_timeout``, ``describe_tools``, ``compact_results``, ``strict_tools``,
            ``tool_results_as``, ``direct_prompt``, ``max_reply_chars``, ``max_argument_chars``,
            ``max_trace_chars``).

    Raises:
        ValueError: empty model name, negative ``max_retries``, non-positive ``timeout`` or ``max_tokens``.
    """

    backend = "openai"

    def __init__(self, model: str, base_url: str | None = None, *, temperature: float | None = None,
                 top_p: float | None = None, seed: int | None = None, max_tokens: int | None = DEFAULT_MAX_TOKENS,
                 timeout: float = 120.0, max_retries: int = 3, api_key_env: str = "OPENAI_API_KEY",
                 native_tools: bool = True, extra_body: Mapping | None = None, reply_cache: str | os.PathLike | None = None,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, name: str | None = None, **chat_kwargs: Any):
        if not model or not isinstance(model, str):
            raise ValueError("model must be a non-empty model name")
        max_retries = check_int("max_retries", max_retries, minimum=0)
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_tokens is not None:
            max_tokens = check_int("max_tokens (or None)", max_tokens, minimum=1)
        super().__init__(name or f"openai:{model}", native_tools=native_tools, **chat_kwargs)
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
                "history_hours": self.history_hours, "episode_timeout": self.episode_timeout,
                "native_tools": self.native_tools, "describe_tools": self.describe_tools,
                "compact_results": self.compact_results, "strict_tools": self.strict_tools, "samples": self.samples,
                "tool_results_as": self.tool_results_as, "direct_prompt": self.direct_prompt, "objective": self.objective,
                "reply_cache": self.reply_cache}

    def secrets(self) -> list[str]:
        """The API key from ``api_key_env`` (when set): scrubbed from everything written."""
        key = os.environ.get(self.api_key_env)
        return [key] if key and key != DUMMY_API_KEY else []

    @property
    def client(self):
        """The ``openai.OpenAI`` client (created on first use; the SDK's retries, fwgym's deadline transport)."""
        if self._client is None:
            openai, httpx, *_ = _sdk()
            http = openai.DefaultHttpxClient(transport=_make_transport(self.max_response_bytes),
                                             event_hooks={"response": [_retry_policy]})
            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or DUMMY_API_KEY,
                                         timeout=self.timeout, max_retries=self.max_retries, http_client=http)
        return self._client

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
        if self.extra_body:
            kw["extra_body"] = dict(self.extra_body)
        return kw

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
                return _reply(body, latency=time.perf_counter() - t0, requests=0, cached=True)
        body, retries = self._post(kw)
        reply = _reply(body, latency=time.perf_counter() - t0, requests=retries + 1)
        if cache is not None:
            cache.put(key, scrub(body, self.secrets()), {"model": self.model, "base_url": self.base_url})
        return reply

    def _post(self, kw: dict, *, timeout: float | None = None) -> tuple[dict, int]:
        """POST one completion within the deadline; ``(response body, retries taken)``.

        Raises:
            ContextExhausted, HarnessError (see the module docstring).
        """
        openai, httpx, DeadlineExceeded, ResponseTooLarge = _sdk()
        limit = self.timeout if timeout is None else timeout
        left = self.time_left()
        if left is not None:
            limit = min(limit, left)
            if limit <= 0:
                raise HarnessError(f"the episode took longer than its deadline of {self.episode_timeout:g} s", "timeout")
        token = _DEADLINE.set(time.monotonic() + limit)
        where = self.base_url or "the OpenAI API"
        try:
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
            status, msg = exc.status_code, _error_text(exc)
            if is_context_error(status, msg):
                raise ContextExhausted(f"HTTP {status}: {msg}"[:2000]) from None
            kind = ("rate_limited" if status == 429 else "auth" if status in (401, 403) else "not_found" if status == 404
                    else "timeout" if status == 408 else "http_5xx" if status >= 500 else "bad_request")
            raise HarnessError(f"{where} refused the request for model {self.model!r}: HTTP {status}: {msg}"[:2000],
                               kind) from None
        except openai.OpenAIError as exc:  # e.g. a response the SDK cannot read
            raise HarnessError(f"{where}: {type(exc).__name__}: {exc}"[:1000], "bad_response") from None
        finally:
            _DEADLINE.reset(token)
        text = raw.http_response.text
        try:
            body = json.loads(text)
        except ValueError:
            raise HarnessError(f"{where} answered HTTP {raw.http_response.status_code} with a body that is not JSON "
                               f"({len(text)} characters: {text[:200]!r})", "bad_response") from None
        problem = completion_problem(body)
        if problem:
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
            characters), "latency_s", "openai_sdk", "httpx"}``.

        Raises:
            HarnessError: no server, a refused key, an unknown model, a reply that is not a chat
                completion (a clear message naming the endpoint and model).
        """
        openai, httpx, *_ = _sdk()
        where = self.base_url or "the OpenAI API"
        models = None
        token = _DEADLINE.set(time.monotonic() + self.timeout)
        try:
            models = sorted(m.id for m in self.client.models.list())
        except openai.APIConnectionError as exc:
            raise HarnessError(f"preflight: no OpenAI-compatible server at {where} ({type(exc).__name__}); start the "
                               "server or fix --base-url", "transport") from None
        except openai.AuthenticationError as exc:
            raise HarnessError(f"preflight: {where} refused the API key from ${self.api_key_env}: {_error_text(exc)}"[:1000],
                               "auth") from None
        except (openai.APIStatusError, openai.OpenAIError, AttributeError, TypeError):
            models = None  # no /models endpoint (or an odd listing): the completion below decides
        finally:
            _DEADLINE.reset(token)
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
                "httpx": getattr(httpx, "__version__", None)}


def _error_text(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", None) or exc)


def completion_problem(body: Any) -> str | None:
    """Why ``body`` is not a usable ``chat.completion`` (``None`` when it is): a JSON object with a
    non-empty ``choices`` list whose first ``message`` is an object with ``content`` a string or null
    and ``tool_calls`` (if any) a list of ``{"function": {"name": str, "arguments": str | object}}``."""
    if not isinstance(body, dict):
        return f"a JSON {type(body).__name__}, not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no 'choices' list" if not isinstance(choices, list) else "an empty 'choices' list"
    msg = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(msg, dict):
        return "choices[0] has no 'message' object"
    if msg.get("content") is not None and not isinstance(msg["content"], str):
        return "message.content is neither a string nor null"
    calls = msg.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return "message.tool_calls is not a list"
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or \
                    not isinstance(fn.get("arguments", "{}"), (str, dict, type(None))):
                return "a tool call without a function name and arguments"
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "'usage' is not an object"
    return None


def _reply(body: dict, *, latency: float, requests: int, cached: bool = False) -> ModelReply:
    """A validated chat-completion body (:func:`completion_problem`) as a :class:`ModelReply`."""
    meta: dict[str, Any] = {"requests": requests, "latency_s": round(latency, 3)}
    if cached:
        meta["cached"] = True
    usage = body.get("usage")
    if isinstance(usage, dict):
        meta["usage"] = {k: v for k, v in usage.items() if is_number(v)}
    choice = body["choices"][0]
    msg = choice["message"]
    calls = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc["function"]
        args = fn.get("arguments")
        calls.append(ToolRequest(id=str(tc.get("id") or f"call_{i}"), name=fn["name"],
                                 arguments=args if args is not None else "{}"))
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    return ModelReply(content=msg.get("content"), tool_calls=calls,
                      reasoning=reasoning if isinstance(reasoning, str) else None,
                      finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
                      meta=meta)


__all__ = ["OpenAIChatAgent", "is_context_error", "completion_problem", "DUMMY_API_KEY", "DEFAULT_MAX_TOKENS",
           "RETRY_STATUSES", "MAX_RESPONSE_BYTES"]
