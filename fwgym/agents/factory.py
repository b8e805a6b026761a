"""Picklable factories of LLM agents by kind (what ``fwgym evaluate --agent openai|transformers`` builds)."""
from __future__ import annotations

from typing import Any

#: the LLM agent kinds a factory can build
KINDS: tuple[str, ...] = ("openai", "transformers")


class LLMAgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of LLM agents.

    It is a ``dict`` ``{"kind": "openai" | "transformers", **constructor kwargs}`` (so run metadata can
    record it as JSON; it never holds credentials) and calling it builds a fresh agent
    (:class:`~fwgym.agents.openai.OpenAIChatAgent` or :class:`~fwgym.agents.transformers.TransformersChatAgent`),
    so evaluation can build one agent per worker process or thread (``--concurrency N`` builds N).

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

    def preflight(self) -> dict[str, Any]:
        """Check the backend with real requests before the first case; facts for the run manifest.

        ``openai``: :meth:`fwgym.agents.openai.OpenAIChatAgent.preflight` (``GET /models`` and a short
        high-entropy completion, twice with the seed and once with another): the server's model names, the model it reports, whether it honoured
        the seed, the ``openai`` SDK version. ``transformers``: loads the model and generates the same
        short reply twice (:meth:`fwgym.agents.transformers.TransformersChatAgent.preflight`).

        Returns:
            ``{"kind", ...facts}`` (JSON data, no credentials).

        Raises:
            fwgym.errors.HarnessError: the server is missing or misconfigured, or the model cannot be
                loaded (the message says what to fix); nothing should be run then.
        """
        agent = self()
        return {"kind": self.get("kind"), **agent.preflight()}


__all__ = ["LLMAgentFactory", "KINDS"]
