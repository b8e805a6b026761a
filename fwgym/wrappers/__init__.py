"""Gymnasium wrappers around the FWBench env (DESIGN §9): every name here is a ``gym.Wrapper`` or builds one.

RL (stable-baselines3): :class:`FeatureObservation` (numeric features), :class:`MacroActionWrapper`
and :class:`SequentialMacroWrapper` (Discrete macro-action menus with ``action_masks()``),
:func:`make_rl_env`; :class:`SB3VecEnv` (a Gymnasium vector env as a stable-baselines3 ``VecEnv``, loaded
on first use so that ``import fwgym.wrappers`` needs no stable-baselines3). Analysis:
:class:`RecordToolCalls` (every tool call of the episode with its result).
Agents that play the env (LLM chat agents, a trained SB3 policy) are in :mod:`fwgym.agents`.
"""
from fwgym.wrappers.features import FEATURE_NAMES, N_FEATURES, FeatureObservation, feature_index
from fwgym.wrappers.macro import SEQUENTIAL_MENU, SINGLE_MENU, MacroActionWrapper, SequentialMacroWrapper
from fwgym.wrappers.record import RecordToolCalls
from fwgym.wrappers.rl import make_rl_env

__all__ = ["FEATURE_NAMES", "N_FEATURES", "FeatureObservation", "feature_index", "SINGLE_MENU", "SEQUENTIAL_MENU",
           "MacroActionWrapper", "SequentialMacroWrapper", "RecordToolCalls", "make_rl_env", "SB3VecEnv"]


def __getattr__(name):
    if name == "SB3VecEnv":  # imports stable-baselines3 (and torch): only when asked for
        from fwgym.wrappers.sb3_vec import SB3VecEnv

        return SB3VecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
