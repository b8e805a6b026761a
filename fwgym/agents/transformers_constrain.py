"""Constrained generation for :class:`~fwgym.agents.transformers.TransformersChatAgent` (``constrain``: the
``--constrain json-schema|grammar`` of the openai kind, for local models): every generated token is one the episode's
reply schema or GBNF grammar (:mod:`fwgym.agents.chat.constrain`, the same payloads a server is sent) allows, so the
reply is one tool call or the final answer, as fwgym's text mode reads it.

The constraint engine is `llguidance <https://github.com/guidance-ai/llguidance>`_ (the optional extra
``fwgym[constrain]``; the engine llama.cpp, vLLM and SGLang use): it compiles the JSON schema, or the GBNF grammar
converted to its Lark dialect, against the model's tokenizer, and gives the set of allowed next tokens at every
step. :class:`GrammarLogitsProcessor` is a ``transformers`` ``LogitsProcessor`` that feeds it the generated tokens
and sets the logits of every other token to ``-inf``; once the grammar is complete only the end-of-sequence token
remains (greedy and sampled decoding alike). A reply cut by ``max_new_tokens`` is cut as without a constraint.
"""
from __future__ import annotations

import json
from typing import Any

from fwgym.errors import HarnessError

__all__ = ["compile_constraint", "GrammarLogitsProcessor", "llguidance_version", "constraint_tokenizer", "JSON_LAYOUT"]

#: the layout of JSON replies under ``json-schema``: ``json.dumps``' separators and no other whitespace (a model cannot
#: spend its tokens on blanks; the GBNF grammar allows one optional space in the same places)
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def _llguidance():
    try:
        import llguidance
    except ImportError:
        raise ImportError("constrained generation with --agent transformers needs llguidance: pip install "
                          "'fwgym[constrain]'") from None
    return llguidance


def llguidance_version() -> str:
    """The installed llguidance's version.

    Raises:
        ImportError: llguidance is not installed (``pip install 'fwgym[constrain]'``).
    """
    return str(_llguidance().__version__)


def constraint_tokenizer(hf_tokenizer: Any, vocab_size: int, eos_ids: list[int]) -> Any:
    """The llguidance tokenizer of a fast Hugging Face tokenizer (about 1 s to build: cache it per model).

    Args:
        hf_tokenizer: a ``PreTrainedTokenizerFast``.
        vocab_size: the model's logits width (may exceed the tokenizer's vocabulary).
        eos_ids: the end-of-sequence token ids generation stops at.

    Raises:
        HarnessError: (kind ``"load"``) not a fast tokenizer.
    """
    from llguidance.hf import from_tokenizer

    _llguidance()
    try:
        return from_tokenizer(hf_tokenizer, n_vocab=int(vocab_size), eos_token=list(eos_ids) or None)
    except (ValueError, TypeError) as exc:
        raise HarnessError(f"constrained generation needs a fast (Rust) Hugging Face tokenizer: {exc}", "load") from None


def compile_constraint(mode: str, payload: Any, lltok: Any) -> str:
    """The llguidance grammar of a session's constraint (:meth:`fwgym.agents.chat.ChatSession.constraint`).

    Args:
        mode: ``"json-schema"`` (``payload`` a JSON schema) or ``"grammar"`` (``payload`` GBNF text).
        lltok: :func:`constraint_tokenizer`'s tokenizer (the grammar is checked against it).

    Raises:
        HarnessError: (kind ``"bad_request"``) the engine refuses the schema or grammar (a fault of fwgym's payload,
            never the model's), with its message.
        ValueError: an unknown mode.
    """
    llg = _llguidance()
    if mode == "json-schema":
        grammar = llg.LLMatcher.grammar_from_json_schema(json.dumps(payload), defaults=JSON_LAYOUT)
    elif mode == "grammar":
        try:
            grammar = llg.grammar_from("gbnf", payload)
        except ValueError as exc:
            raise HarnessError(f"--constrain grammar: llguidance cannot read the episode's grammar: {exc}"[:2000],
                               "bad_request") from None
    else:
        raise ValueError(f"unknown constrain mode {mode!r}")
    is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, lltok)
    if is_error:
        raise HarnessError(f"--constrain {mode}: llguidance refuses the episode's {mode}: {messages[0]}"[:2000],
                           "bad_request")
    return grammar


def _logits_processor_base() -> type:
    from transformers import LogitsProcessor

    return LogitsProcessor


class GrammarLogitsProcessor(_logits_processor_base()):  # type: ignore[misc]
    """Masks, at each generation step, the tokens the grammar does not allow (batch size 1).

    Args:
        lltok: :func:`constraint_tokenizer`'s tokenizer. grammar: :func:`compile_constraint`'s grammar.
        prompt_tokens: the prompt's length (``input_ids`` beyond it are the reply so far).

    Attributes:
        matcher: the ``llguidance.LLMatcher`` (its state is the reply so far).
        masked_steps: the steps at which the mask removed at least one token.

    Raises:
        RuntimeError: (from a call) the matcher is in an error state: a token it did not allow was generated (a bug).
    """

    def __init__(self, lltok: Any, grammar: str, prompt_tokens: int):
        import numpy as np

        llg = _llguidance()
        self.matcher = llg.LLMatcher(lltok, grammar, log_level=0)
        self.vocab = int(lltok.vocab_size)
        self.prompt_tokens = int(prompt_tokens)
        self.consumed = 0
        self.masked_steps = 0
        self._np = np

    def __call__(self, input_ids, scores):
        import torch

        np = self._np
        reply = input_ids[0, self.prompt_tokens + self.consumed:].tolist()
        for t in reply:
            if not self.matcher.consume_token(int(t)):
                raise RuntimeError(f"the grammar refused token {t}: {self.matcher.get_error()}")
        self.consumed += len(reply)
        if self.matcher.is_error():
            raise RuntimeError(f"constrained generation failed: {self.matcher.get_error()}")
        words = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(words, bitorder="little")[: scores.shape[-1]].astype(bool)
        if allowed.shape[0] < scores.shape[-1]:  # logits wider than the tokenizer's vocabulary: never allowed
            allowed = np.concatenate([allowed, np.zeros(scores.shape[-1] - allowed.shape[0], dtype=bool)])
        if not allowed.all():
            self.masked_steps += 1
        mask = torch.from_numpy(~allowed).to(scores.device)
        return scores.masked_fill(mask.unsqueeze(0), float("-inf"))
