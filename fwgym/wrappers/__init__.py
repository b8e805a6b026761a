"""Generic Gymnasium wrappers around the FWBench env (DESIGN §9).

Analysis: :class:`RecordToolCalls` (every tool call of the episode with its result). The RL wrappers
(numeric features, macro-action menus, the native vector env) are in :mod:`fwgym.rl`; agents that play
the env (LLM chat agents, a trained SB3 policy) are in :mod:`fwgym.agents`.
"""
from fwgym.wrappers.record import RecordToolCalls

__all__ = ["RecordToolCalls"]
