"""``fwgym evaluate --agent openai``: an OpenAI-compatible chat endpoint as an agent kind.

Example::

    fwgym evaluate --agent openai --base-url http://127.0.0.1:8000/v1 --model qwen3-4b \\
        --split test --limit 20 --temperature 0.7 --llm-seed 1701
    fwgym show-trace results/test/traces.jsonl

Options shared by the LLM kinds (``--temperature``, ``--top-p``, ``--llm-seed``, ``--max-tokens``,
``--trace-out``, ``--agent-name``, ``--max-tool-chars``, ``--history-hours``) are added once by whichever LLM kind
registers first; ``--llm-seed`` and ``--hf-device`` carry a prefix because other kinds (SB3) may want
``--seed`` / ``--device``. The key comes from the environment variable named by ``--api-key-env``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

KIND = "openai"
HELP = "a chat model behind an OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama, hosted): --base-url URL --model NAME"

#: Options shared by the ``openai`` and ``transformers`` kinds: (flags, argparse kwargs).
COMMON_OPTIONS: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("--temperature",), {"type": float, "default": None,
                          "help": "LLM sampling temperature (default: the server's; transformers: greedy)"}),
    (("--top-p",), {"type": float, "default": None, "dest": "top_p", "help": "LLM nucleus sampling mass"}),
    (("--llm-seed",), {"type": int, "default": None, "dest": "llm_seed", "help": "LLM sampling seed"}),
    (("--max-tokens",), {"type": int, "default": None, "dest": "max_tokens",
                         "help": "max tokens per LLM reply (transformers default 512)"}),
    (("--trace-out",), {"default": None, "dest": "trace_out",
                        "help": "JSONL file for one trace per episode (default <out>/traces.jsonl; overwritten)"}),
    (("--agent-name",), {"default": None, "dest": "agent_name", "help": "policy name of the LLM agent in results"}),
    (("--max-tool-chars",), {"type": int, "default": None, "dest": "max_tool_chars",
                             "help": "truncate tool results longer than this in the chat (default: never)"}),
    (("--history-hours",), {"type": int, "default": None, "dest": "history_hours",
                            "help": "show only the last N visible hours in the first LLM message (default: all 336)"}),
)


def add_common_arguments(group) -> None:
    """Add :data:`COMMON_OPTIONS` to ``group`` unless another LLM kind already did (idempotent)."""
    for flags, kwargs in COMMON_OPTIONS:
        try:
            group.add_argument(*flags, **kwargs)
        except argparse.ArgumentError:
            pass  # already added by the other LLM kind


def add_arguments(group) -> None:
    """Options of ``--agent openai`` (no heavy imports)."""
    group.add_argument("--base-url", default=None, dest="base_url",
                       help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: the OpenAI API)")
    group.add_argument("--model", default=None, help="model name on the server (--agent transformers: a model folder or hub id)")
    group.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    group.add_argument("--max-retries", type=int, default=3, dest="max_retries",
                       help="retries after a transport error, with exponential backoff (default 3)")
    group.add_argument("--api-key-env", default="OPENAI_API_KEY", dest="api_key_env",
                       help="environment variable holding the API key (default OPENAI_API_KEY; unset: a dummy key)")
    group.add_argument("--no-native-tools", action="store_true", dest="no_native_tools",
                       help="do not send tool schemas; the model calls tools with JSON in text")
    group.add_argument("--extra-body", default=None, dest="extra_body",
                       help='extra JSON request fields, e.g. \'{"top_k": 20}\'')
    add_common_arguments(group)


def trace_path(args) -> str:
    """``--trace-out``, else ``<--out or results/<split>>/traces.jsonl``."""
    if getattr(args, "trace_out", None):
        return str(args.trace_out)
    out = getattr(args, "out", None) or f"results/{getattr(args, 'split', 'test')}"
    return str(Path(out) / "traces.jsonl")


def start_trace_file(path: str) -> None:
    """Truncate (create) the trace file at the start of a run."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("")


def common_kwargs(args) -> dict:
    """Agent kwargs from the shared options."""
    kw = {"temperature": getattr(args, "temperature", None), "top_p": getattr(args, "top_p", None),
          "seed": getattr(args, "llm_seed", None), "max_tool_chars": getattr(args, "max_tool_chars", None),
          "history_hours": getattr(args, "history_hours", None)}
    if getattr(args, "agent_name", None):
        kw["name"] = args.agent_name
    return kw


def build(args):
    """A picklable, JSON-serialisable factory of :class:`~fwgym.agents.openai_agent.OpenAIChatAgent`.

    Raises:
        ValueError: no ``--model``; ``--extra-body`` is not a JSON object; bad numbers.
    """
    from fwgym.agents.chat_agent import LLMAgentFactory

    if not getattr(args, "model", None):
        raise ValueError("--agent openai needs --model NAME (and usually --base-url URL)")
    extra = None
    if getattr(args, "extra_body", None):
        try:
            extra = json.loads(args.extra_body)
        except ValueError as exc:
            raise ValueError(f"--extra-body is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise ValueError("--extra-body must be a JSON object")
    if args.max_retries < 0 or args.timeout <= 0:
        raise ValueError("--max-retries must be >= 0 and --timeout > 0")
    path = trace_path(args)
    factory = LLMAgentFactory(kind="openai", model=args.model, base_url=args.base_url, timeout=args.timeout,
                              max_retries=args.max_retries, api_key_env=args.api_key_env,
                              native_tools=not args.no_native_tools, extra_body=extra,
                              max_tokens=getattr(args, "max_tokens", None), trace_out=path, **common_kwargs(args))
    factory()  # validates the settings now (cheap: no connection is made)
    start_trace_file(path)
    return factory
