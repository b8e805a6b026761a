"""Picklable factories of LLM agents by kind (what ``fwgym evaluate --agent openai|transformers`` builds)."""
from __future__ import annotations

#: the LLM agent kinds a factory can build
KINDS: tuple[str, ...] = ("openai", "transformers")


class LLMAgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of LLM agents.

    It is a ``dict`` ``{"kind": "openai" | "transformers", **constructor kwargs}`` (so run metadata can
    record it as JSON; it never holds credentials) and calling it builds a fresh agent
    (:class:`~fwgym.agents.openai.OpenAIChatAgent` or :class:`~fwgym.agents.transformers.TransformersChatAgent`),
    so evaluation can build one agent per worker process.

    Raises:
        ValueError: unknown kind (when called).
    """

    def __call__(self):
        kwargs = {k: v for k, v in self.items() if k != "kind"}
        kind = self.get("kind")
        if kind == "openai":
            from fwgym.agents.openai import OpenAIChatAgent

            return OpenAIChatAgent(**kwargs)
        if kind == "transformers":
            from fwgym.agents.transformers import TransformersChatAgent

            return TransformersChatAgent(**kwargs)
        raise ValueError(f"unknown LLM agent kind {kind!r}; expected one of {list(KINDS)}")


__all__ = ["LLMAgentFactory", "KINDS"]
