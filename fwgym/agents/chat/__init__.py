"""The chat layer of LLM agents (DESIGN §9): episode facts and observations in, chat messages out, model
replies back to env actions.

* :mod:`~fwgym.agents.chat.prompts`: system prompt, first user message, history table, tool schemas;
* :mod:`~fwgym.agents.chat.parsing`: reading a text reply (final answer, JSON tool call or rejection);
* :mod:`~fwgym.agents.chat.answers`: the one answer grammar (numbers, decisions, levels, forecasts);
* :mod:`~fwgym.agents.chat.direct`: Context is Key's direct prompt (trajectories, parsing, retries);
* :mod:`~fwgym.agents.chat.session`: :class:`ChatSession`, one episode's conversation and its action queue;
* :mod:`~fwgym.agents.chat.traces`: the per-episode JSONL trace (bounded, secrets scrubbed);
* :mod:`~fwgym.agents.chat.cache`: the on-disk reply cache keyed by the full request;
* :mod:`~fwgym.agents.chat.agent`: :class:`ChatAgent`, the agent protocol on top of a session; backends
  (:mod:`fwgym.agents.openai`, :mod:`fwgym.agents.transformers`) implement its ``complete``.
"""
from fwgym.agents.chat.agent import ABANDON_STATUSES, ChatAgent, ContextExhausted
from fwgym.agents.chat.session import REPLY_ERROR_TOOL, ChatSession, ModelReply, ToolRequest
from fwgym.agents.chat.traces import TRACE_VERSION, append_jsonl, read_traces
from fwgym.errors import HarnessError

__all__ = ["ChatAgent", "ChatSession", "ModelReply", "ToolRequest", "REPLY_ERROR_TOOL", "ContextExhausted",
           "HarnessError", "ABANDON_STATUSES", "TRACE_VERSION", "append_jsonl", "read_traces"]
