"""Test utilities shared by the test suite, the benchmarks and users' own tests.

* :mod:`fwgym.testing.fuzz`: hypothesis strategies of agent actions and plans, and the episode-invariant
  checker (needs ``hypothesis``).
* :mod:`fwgym.testing.chat_server`: a scripted OpenAI-compatible chat-completions server on 127.0.0.1
  (standard library only), for testing LLM agents and harness faults without a model.
"""
from fwgym.testing.fuzz import action_strategy, feasible_index_paths, play_fuzzed

__all__ = ["action_strategy", "feasible_index_paths", "play_fuzzed"]
