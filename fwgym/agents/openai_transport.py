"""The HTTP layer under :class:`~fwgym.agents.openai.OpenAIChatAgent`: the ``openai`` SDK (imported on first use), the
per-reply wall-clock deadline and the response-body bound, enforced in an httpx transport, and the retry policy
hook (see :mod:`fwgym.agents.openai` for the rules).

* :func:`request_deadline` sets the deadline of the requests made inside it (a context variable: per thread and
  per asyncio context). Each attempt's connect/read/write/pool timeouts are clamped to the time left; a watchdog
  shuts the socket down when the deadline passes mid-body; a body read past the deadline or above the bound
  raises the SDK-level ``DeadlineExceeded`` / ``ResponseTooLarge`` (:func:`sdk`), which the SDK does not retry.
* :func:`http_client` is the httpx client the agent hands the SDK: that transport, and response hooks that note each
  error response's status and reported ``usage`` in the :func:`attempt_log` in force (the tokens of failed attempts),
  and mark a deterministic error, or a ``Retry-After`` beyond the deadline, ``x-should-retry: false`` (the SDK obeys it).
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import socket
import threading
import time
from types import ModuleType
from typing import Any, Iterator, Mapping

#: HTTP statuses retried (transient by definition); any other error status is final unless the server
#: sends ``x-should-retry: true``
RETRY_STATUSES = frozenset({408, 409, 429, 502, 503, 504})
#: largest response body read (bytes); a larger one is a ``bad_response`` harness error
MAX_RESPONSE_BYTES = 256 << 20
#: largest error-response body read for its ``usage`` (:func:`attempt_log`; bytes, by its ``Content-Length``)
MAX_ERROR_BODY_BYTES = 1 << 20
#: the wall-clock deadline (time.monotonic) of the request in flight on this thread/context
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("fwgym_openai_deadline", default=None)
#: the error responses of the requests in flight on this thread/context (:func:`attempt_log`)
_ATTEMPTS: contextvars.ContextVar[list[dict] | None] = contextvars.ContextVar("fwgym_openai_attempts", default=None)

_SDK_LOCK = threading.Lock()
_SDK: tuple[ModuleType, ModuleType, type[Exception], type[Exception]] | None = None


def sdk() -> tuple[ModuleType, ModuleType, type[Exception], type[Exception]]:
    """``(openai, httpx module the SDK uses, DeadlineExceeded, ResponseTooLarge)``; imported on first use
    (once per process, under a lock: the exception classes must be the same objects in every thread).

    Raises:
        ImportError: the ``openai`` package is not installed (``pip install fwgym[llm]``).
    """
    global _SDK
    with _SDK_LOCK:
        if _SDK is None:
            _SDK = _load_sdk()
        return _SDK


def _load_sdk() -> tuple[ModuleType, ModuleType, type[Exception], type[Exception]]:
    import openai

    base = next(c for c in openai.DefaultHttpxClient.__mro__
                if c.__name__ == "Client" and not c.__module__.startswith("openai"))
    httpx = importlib.import_module(base.__module__.split(".")[0])

    class DeadlineExceeded(openai.OpenAIError):
        """The request's wall-clock deadline passed (an OpenAIError: the SDK does not retry it)."""

    class ResponseTooLarge(openai.OpenAIError):
        """The response body exceeds the bound (an OpenAIError: the SDK does not retry it)."""

    return openai, httpx, DeadlineExceeded, ResponseTooLarge


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[float]:
    """The requests made inside the block must be answered within ``seconds`` of wall-clock time (retries and
    waits included); yields the deadline (``time.monotonic()`` seconds). Nested blocks: the innermost one holds."""
    deadline = time.monotonic() + seconds
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


@contextlib.contextmanager
def attempt_log(log: list[dict]) -> Iterator[list[dict]]:
    """Append to ``log`` one ``{"status": int, "usage": dict | None}`` per error response (HTTP status >= 400) that
    the requests made inside the block receive, the SDK's retried attempts included: ``usage`` is the body's
    ``usage`` object with integer ``prompt_tokens`` and ``completion_tokens`` where the body is JSON of at most
    :data:`MAX_ERROR_BODY_BYTES` (by its ``Content-Length``) and has one, else ``None``. So the tokens a server
    reports for an attempt that failed are not lost (:meth:`fwgym.agents.chat.ChatAgent.count_failed_attempt`)."""
    token = _ATTEMPTS.set(log)
    try:
        yield log
    finally:
        _ATTEMPTS.reset(token)


def usage_of(body: Any) -> dict | None:
    """``{"prompt_tokens", "completion_tokens"}`` of a response body's ``usage`` (both non-negative ints), else ``None``."""
    usage = body.get("usage") if isinstance(body, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (isinstance(pt, int) and isinstance(ct, int)) or isinstance(pt, bool) or isinstance(ct, bool) or min(pt, ct) < 0:
        return None
    return {"prompt_tokens": pt, "completion_tokens": ct}


def _note_error_attempt(response: Any) -> None:
    """httpx response hook: an error response's status and usage into the :func:`attempt_log` in force (its body is
    read here when small; the SDK reads it again from the cache, or closes it to retry)."""
    log = _ATTEMPTS.get()
    if log is None or response.status_code < 400:
        return
    usage = None
    try:
        size = int(response.headers.get("content-length", ""))
    except ValueError:
        size = -1
    if 0 < size <= MAX_ERROR_BODY_BYTES:
        response.read()  # the deadline transport's stream: bounded in time and size
        try:
            usage = usage_of(json.loads(response.content))
        except ValueError:
            usage = None
    log.append({"status": int(response.status_code), "usage": usage})


def http_client(max_response_bytes: int) -> Any:
    """The ``openai.DefaultHttpxClient`` to hand ``openai.OpenAI(http_client=...)``: the deadline transport with the
    body bound ``max_response_bytes`` and the retry policy hook (module docstring)."""
    openai = sdk()[0]
    return openai.DefaultHttpxClient(transport=_make_transport(max_response_bytes),
                                     event_hooks={"response": [_note_error_attempt, _retry_policy]})


def _make_transport(max_body: int) -> Any:
    """An httpx transport enforcing the deadline of :func:`request_deadline` and the body bound ``max_body``."""
    _, httpx, DeadlineExceeded, _ = sdk()
    stream_type = _bounded_stream_type()
    base: Any = httpx.BaseTransport  # the SDK's httpx, found at run time

    class DeadlineTransport(base):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            deadline = _DEADLINE.get()
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceeded("the reply's deadline passed before the request was sent")
                request.extensions["timeout"] = _clamped_timeouts(request.extensions.get("timeout"), left)
            try:
                resp = self.inner.handle_request(request)
            except httpx.TimeoutException as exc:
                if deadline is not None and time.monotonic() >= deadline - 0.05:
                    raise DeadlineExceeded("the reply's deadline passed while waiting for the server") from exc
                raise
            return httpx.Response(status_code=resp.status_code, headers=resp.headers,
                                  stream=stream_type(resp.stream, deadline, max_body, _socket_of(resp)),
                                  extensions=resp.extensions, request=request)

        def close(self) -> None:
            self.inner.close()

    return DeadlineTransport()


def _clamped_timeouts(given: Mapping[str, float | None] | None, left: float) -> dict[str, float]:
    """httpx's per-attempt timeouts (``connect``, ``read``, ``write``, ``pool``) clamped to the ``left`` seconds of the
    deadline (an unset one becomes ``left``)."""
    given = given or {}
    return {k: left if (v := given.get(k)) is None else min(v, left) for k in ("connect", "read", "write", "pool")}


def _bounded_stream_type() -> type:
    """The httpx response stream that enforces the body bound and the deadline while the body arrives."""
    _, httpx, DeadlineExceeded, ResponseTooLarge = sdk()
    base: Any = httpx.SyncByteStream  # the SDK's httpx, found at run time

    class BoundedStream(base):
        def __init__(self, inner: Any, deadline: float | None, max_body: int, sock: socket.socket | None) -> None:
            self.inner, self.deadline, self.max_body, self.n = inner, deadline, max_body, 0
            self.timer: threading.Timer | None = None
            if deadline is not None and sock is not None:
                self.timer = threading.Timer(max(deadline - time.monotonic(), 0.0), _shutdown, (sock,))
                self.timer.daemon = True
                self.timer.start()

        def _late(self) -> bool:
            return self.deadline is not None and time.monotonic() >= self.deadline - 0.01

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self.inner:
                    self.n += len(chunk)
                    if self.n > self.max_body:
                        raise ResponseTooLarge(f"the response body exceeds {self.max_body} bytes")
                    if self._late():
                        raise DeadlineExceeded("the reply's deadline passed while the body was arriving")
                    yield chunk
            except (httpx.TransportError, OSError) as exc:
                if self._late():
                    raise DeadlineExceeded("the reply's deadline passed while the body was arriving") from exc
                raise
            finally:
                self._cancel()

        def _cancel(self) -> None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def close(self) -> None:
            self._cancel()
            self.inner.close()

    return BoundedStream


def _socket_of(resp: Any) -> socket.socket | None:
    """The socket under an httpx response (for the deadline watchdog), ``None`` where the backend does not say."""
    stream = resp.extensions.get("network_stream")
    if stream is None or not hasattr(stream, "get_extra_info"):
        return None
    try:
        return stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - any backend: the watchdog is best effort, reads are still checked
        return None


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _retry_policy(response: Any) -> None:
    """httpx response hook: tell the SDK (``x-should-retry: false``) not to retry a deterministic error
    or a ``Retry-After`` beyond the deadline (the SDK obeys the header)."""
    code = response.status_code
    if code < 400 or "x-should-retry" in response.headers:
        return
    deadline = _DEADLINE.get()
    wait = _retry_after(response.headers)
    if code not in RETRY_STATUSES or (deadline is not None and wait is not None and time.monotonic() + wait > deadline):
        response.headers["x-should-retry"] = "false"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's ``Retry-After`` in seconds (``retry-after-ms`` first; ``None``: absent or not a number)."""
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is not None:
            try:
                return float(v) / div
            except ValueError:
                return None
    return None


__all__ = ["RETRY_STATUSES", "MAX_RESPONSE_BYTES", "MAX_ERROR_BODY_BYTES", "sdk", "request_deadline", "attempt_log",
           "usage_of", "http_client"]
