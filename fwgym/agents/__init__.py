"""Agents and the one episode loop shared by every policy (DESIGN §9).

LLM agents (:class:`~fwgym.agents.openai_agent.OpenAIChatAgent`,
:class:`~fwgym.agents.transformers_agent.TransformersChatAgent`, their base
:class:`~fwgym.agents.chat_agent.ChatAgent`) are importable from here; they load lazily.
"""
from fwgym.agents.base import Agent, EpisodeResult, run_episode

__all__ = ["Agent", "EpisodeResult", "run_episode", "ChatAgent", "OpenAIChatAgent", "TransformersChatAgent"]

_LAZY = {"ChatAgent": "fwgym.agents.chat_agent", "OpenAIChatAgent": "fwgym.agents.openai_agent",
         "TransformersChatAgent": "fwgym.agents.transformers_agent"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
