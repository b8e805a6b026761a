"""Agents and the one episode loop shared by every policy (DESIGN §9).

* :mod:`~fwgym.agents.base`: the agent protocol and :func:`run_episode`;
* :mod:`~fwgym.agents.chat`: the chat layer of LLM agents (:class:`ChatAgent`, its session, prompts,
  reply parsing and traces);
* :mod:`~fwgym.agents.openai` / :mod:`~fwgym.agents.transformers`: chat backends
  (:class:`OpenAIChatAgent`, :class:`TransformersChatAgent`), built by kind with :class:`LLMAgentFactory`;
* :mod:`~fwgym.agents.sb3`: a trained stable-baselines3 macro policy as an agent (:class:`SB3Agent`,
  :func:`save_policy`);
* :mod:`~fwgym.agents.isolation`: agents that are code run in a worker process (:class:`IsolatedAgent`,
  :class:`IsolatedAgentFactory`; workers, their sandbox and the worker script are :mod:`fwgym.isolation`).

Everything but the loop loads lazily (the backends need their extras).
"""
from fwgym.agents.base import Agent, EpisodeResult, HindsightGrant, reset_agent, run_episode

__all__ = ["Agent", "EpisodeResult", "HindsightGrant", "run_episode", "reset_agent", "ChatAgent", "LLMAgentFactory",
           "OpenAIChatAgent", "TransformersChatAgent", "SB3Agent", "save_policy", "IsolatedAgent", "IsolatedAgentFactory"]

_LAZY = {"ChatAgent": "fwgym.agents.chat", "LLMAgentFactory": "fwgym.agents.factory",
         "OpenAIChatAgent": "fwgym.agents.openai", "TransformersChatAgent": "fwgym.agents.transformers",
         "SB3Agent": "fwgym.agents.sb3", "save_policy": "fwgym.agents.sb3",
         "IsolatedAgent": "fwgym.agents.isolation", "IsolatedAgentFactory": "fwgym.agents.isolation"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
