"""``fwgym evaluate --agent transformers``: a local Hugging Face chat model as an agent kind.

Example::

    fwgym evaluate --agent transformers --hf-model HuggingFaceTB/SmolLM2-360M-Instruct --hf-device auto \\
        --split dev --limit 5 --max-tokens 256
    fwgym evaluate --agent transformers --hf-model /path/to/dir --gguf-file model.Q4_1.gguf --gguf-cache-dir ~/.cache/fwgym

``--model`` (the openai kind's option) is accepted as well when ``--hf-model`` is not given. The
shared LLM options (``--temperature``, ``--top-p``, ``--llm-seed``, ``--max-tokens``, ``--trace-out``,
``--agent-name``, ``--max-tool-chars``, ``--history-hours``) are described in :mod:`fwgym.cli.agent_kinds.llm`.
"""
from __future__ import annotations

from fwgym.cli.args import positive_int
from fwgym.cli.agent_kinds.llm import (add_common_arguments, chat_options, check_max_tokens, common_kwargs,
                                       default_max_tokens, start_trace_file, trace_path)

KIND = "transformers"
HELP = "a local Hugging Face chat model (tools via JSON in text): --hf-model DIR_OR_ID [--gguf-file F] [--hf-device auto]"


def add_arguments(group) -> None:
    """Options of ``--agent transformers`` (no heavy imports)."""
    group.add_argument("--hf-model", default=None, dest="hf_model",
                       help="local chat model folder or Hugging Face hub id (HF cache; HF_HUB_OFFLINE=1 stays offline)")
    group.add_argument("--gguf-file", default=None, dest="gguf_file", help="GGUF file inside --hf-model to load")
    group.add_argument("--gguf-cache-dir", default=None, dest="gguf_cache_dir",
                       help="save a plain copy of the GGUF model here once, for fast reloads")
    group.add_argument("--hf-device", default="cpu", dest="hf_device", help="cpu (default), cuda, cuda:N, mps or auto")
    group.add_argument("--hf-dtype", default=None, dest="hf_dtype",
                       help="float32, bfloat16, float16 or auto (default float32 on CPU, bfloat16 on CUDA)")
    group.add_argument("--max-context", type=positive_int, default=None, dest="max_context",
                       help="context window in tokens (default: the model config's)")
    group.add_argument("--hf-no-kv-cache", action="store_true", dest="hf_no_kv_cache",
                       help="re-encode the whole chat every turn instead of reusing the KV cache of the last turn")
    add_common_arguments(group)


def build(args):
    """A picklable, JSON-serialisable factory of :class:`~fwgym.agents.transformers.TransformersChatAgent`.

    Raises:
        ValueError: neither ``--hf-model`` nor ``--model`` is given; bad numbers.
    """
    from fwgym.agents.factory import LLMAgentFactory

    model = getattr(args, "hf_model", None) or getattr(args, "model", None)
    if not model:
        raise ValueError("--agent transformers needs --hf-model DIR_OR_HUB_ID")
    path = trace_path(args)
    kw = common_kwargs(args)
    max_tokens = default_max_tokens(args, 512)
    check_max_tokens(args, max_tokens)  # the estimate; the preflight counts with the model's tokenizer
    factory = LLMAgentFactory(kind="transformers", model_path=model, gguf_file=args.gguf_file,
                              plain_cache_dir=args.gguf_cache_dir, device=args.hf_device, dtype=args.hf_dtype,
                              max_context=args.max_context, max_new_tokens=max_tokens,
                              reuse_cache=not getattr(args, "hf_no_kv_cache", False),
                              trace_out=path, options=chat_options(args, native_tools=False,
                                                                   constrain=getattr(args, "constrain", None)), **kw)
    factory()  # validates the settings now (cheap: the model loads on the first turn)
    start_trace_file(path)
    return factory


__all__ = ["KIND", "HELP", "add_arguments", "build"]
