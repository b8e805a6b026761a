"""``fwgym evaluate --agent openai``: an OpenAI-compatible chat endpoint as an agent kind.

Example::

    fwgym evaluate --agent openai --base-url http://127.0.0.1:8000/v1 --model qwen3-4b \\
        --split test --limit 20 --temperature 0.7 --llm-seed 1701
    fwgym show-trace results/test/traces.jsonl

The options shared by the LLM kinds are in :mod:`fwgym.cli.agent_kinds.llm`. The key comes from the
environment variable named by ``--api-key-env``. Servers that take ``tools`` but do not show them to
the model want ``--describe-tools``; chat templates that drop ``tool`` messages (llama-cpp-python's
``chatml-function-calling``) want ``--tool-results-as user``; the OpenAI API can take
``--strict-tools``.
"""
from __future__ import annotations

import argparse

from fwgym.cli.agent_kinds.llm import (add_common_arguments, chat_options, check_max_tokens, common_kwargs,
                                       default_max_tokens, start_trace_file, trace_path)
from fwgym.cli.args import json_object, positive_float

KIND = "openai"
HELP = "a chat model behind an OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama, hosted): --base-url URL --model NAME"


def add_arguments(group) -> None:
    """Options of ``--agent openai`` (no heavy imports)."""
    group.add_argument("--base-url", default=None, dest="base_url",
                       help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: the OpenAI API)")
    group.add_argument("--model", default=None, help="model name on the server (--agent transformers: a model folder or hub id)")
    group.add_argument("--timeout", type=positive_float, default=120.0,
                       help="wall-clock deadline in seconds per model reply, retries included (default 120)")
    group.add_argument("--max-retries", type=int, default=3, dest="max_retries",
                       help="the openai SDK's retries of a transient failure (429 honouring Retry-After, 502-504, "
                            "connection errors; default 3); deterministic errors are never retried")
    group.add_argument("--api-key-env", default="OPENAI_API_KEY", dest="api_key_env",
                       help="environment variable holding the API key (default OPENAI_API_KEY; unset: a dummy key)")
    group.add_argument("--no-native-tools", action="store_true", dest="no_native_tools",
                       help="do not send tool schemas; the model calls tools with JSON in text")
    group.add_argument("--extra-body", default=None, dest="extra_body",
                       help='extra JSON request fields, e.g. \'{"top_k": 20}\'')
    group.add_argument("--describe-tools", action=argparse.BooleanOptionalAction, default=None, dest="describe_tools",
                       help="list the tools and their arguments in the system prompt (default: only without native "
                            "tools; on for servers that accept tools but do not show them to the model)")
    group.add_argument("--tool-results-as", choices=("tool", "user"), default="tool", dest="tool_results_as",
                       help="send tool results as tool messages (default) or fold them into user messages (for chat "
                            "templates that drop tool messages)")
    group.add_argument("--strict-tools", action="store_true", dest="strict_tools",
                       help="OpenAI strict function schemas for the tools that have one")
    group.add_argument("--server-kind", choices=("llama.cpp", "llama-cpp-python", "vllm", "openai"), default=None,
                       dest="server_kind", help="how the server takes --constrain (default: from GET /models)")
    group.add_argument("--reply-cache", default=None, dest="reply_cache", metavar="DIR",
                       help="on-disk cache of replies keyed by the full request: a rerun with the same settings "
                            "makes no request")
    add_common_arguments(group)


def build(args):
    """A picklable, JSON-serialisable factory of :class:`~fwgym.agents.openai.OpenAIChatAgent`.

    Raises:
        ValueError: no ``--model``; ``--extra-body`` is not a JSON object; bad numbers.
    """
    from fwgym.agents.factory import LLMAgentFactory
    from fwgym.agents.openai import DEFAULT_MAX_TOKENS

    if not getattr(args, "model", None):
        raise ValueError("--agent openai needs --model NAME (and usually --base-url URL)")
    extra = json_object(getattr(args, "extra_body", None), "--extra-body")
    if args.max_retries < 0 or args.timeout <= 0:
        raise ValueError("--max-retries must be >= 0 and --timeout > 0")
    path = trace_path(args)
    max_tokens = default_max_tokens(args, DEFAULT_MAX_TOKENS)
    options = chat_options(args, native_tools=not args.no_native_tools,
                           describe_tools=getattr(args, "describe_tools", None),
                           tool_results_as=getattr(args, "tool_results_as", "tool"),
                           strict_tools=bool(getattr(args, "strict_tools", False)),
                           constrain=getattr(args, "constrain", None))
    factory = LLMAgentFactory(kind="openai", model=args.model, base_url=args.base_url, timeout=args.timeout,
                              max_retries=args.max_retries, api_key_env=args.api_key_env, extra_body=extra,
                              max_tokens=max_tokens,
                              reply_cache=getattr(args, "reply_cache", None), trace_out=path, options=options,
                              server_kind=getattr(args, "server_kind", None), **common_kwargs(args))
    check_max_tokens(args, factory["max_tokens"])
    factory()  # validates the settings now (cheap: no connection is made)
    start_trace_file(path)
    return factory


__all__ = ["KIND", "HELP", "add_arguments", "build"]
