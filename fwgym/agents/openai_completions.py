"""The OpenAI chat-completions wire format as :class:`~fwgym.agents.openai.OpenAIChatAgent` speaks it: the request
fields that constrain a reply on each server kind, the check of a response body (:func:`completion_problem`), its
reading into a :class:`~fwgym.agents.chat.ModelReply`, and the reading of error bodies (the error message, whether it
means the prompt exceeds the context window). Pure functions of JSON values: no HTTP, no SDK."""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from fwgym.agents.chat import ModelReply, ToolRequest
from fwgym.errors import HarnessError
from fwgym.validation import is_number

_CONTEXT_RE = re.compile(r"context|maximum (?:input |prompt )?length|too many tokens|prompt is too long|"
                         r"maximum number of tokens|exceeds? the (?:model'?s? )?(?:max|limit)", re.IGNORECASE)


def is_context_error(status: int | None, message: str) -> bool:
    """Whether an HTTP error means the prompt does not fit the context window."""
    return status in (400, 413, 422) and bool(_CONTEXT_RE.search(message or ""))


#: the servers whose constraint fields differ (:func:`constraint_fields`)
SERVER_KINDS = ("llama.cpp", "llama-cpp-python", "vllm", "openai")
#: ``owned_by`` of ``GET /models`` -> server kind
_OWNERS: dict[str, str] = {"llamacpp": "llama.cpp", "me": "llama-cpp-python", "vllm": "vllm"}


def constraint_fields(mode: str, payload: Any, server_kind: str) -> dict:
    """The request fields that constrain a reply to ``payload`` (a JSON schema for ``json-schema``, a GBNF grammar
    for ``grammar``) on a server of ``server_kind``; the server's own fields go under ``extra_body``.

    Raises:
        HarnessError: (``bad_request``) the server takes no grammar (the OpenAI API).
    """
    if mode == "json-schema":
        if server_kind == "vllm":
            return {"extra_body": {"guided_json": payload}}
        if server_kind == "llama-cpp-python":
            return {"response_format": {"type": "json_object", "schema": payload}}
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "fwgym_reply", "schema": payload}}}
    if server_kind in ("llama.cpp", "llama-cpp-python"):
        return {"extra_body": {"grammar": payload}}
    if server_kind == "vllm":
        return {"extra_body": {"guided_grammar": payload}}
    raise HarnessError("--constrain grammar: the server takes no grammar (an OpenAI-style API); use --constrain "
                       "json-schema or --server-kind llama.cpp|llama-cpp-python|vllm", "bad_request")


def error_text(exc: Exception) -> str:
    """The message of an SDK error: the body's ``error.message`` (or its string ``error``), else the exception's."""
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


def completion_reply(body: dict, *, latency: float, requests: int, cached: bool = False) -> ModelReply:
    """A validated chat-completion body (:func:`completion_problem`) as a :class:`ModelReply`."""
    meta: dict[str, Any] = {"requests": requests, "latency_s": round(latency, 3)}
    if isinstance(body.get("model"), str):
        meta["model"] = body["model"]  # the model the server says answered (ChatAgent notes another one)
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


def server_kind_of(owners: Iterable[Any]) -> str:
    """The server kind (:data:`SERVER_KINDS`) that the ``owned_by`` values of ``GET /models`` name (``openai`` when
    they name none)."""
    found = set(owners)
    return next((k for o, k in _OWNERS.items() if o in found), "openai")


__all__ = ["SERVER_KINDS", "is_context_error", "constraint_fields", "completion_problem", "completion_reply",
           "error_text", "server_kind_of"]
