"""Reinforcement learning on FWBench (DESIGN §9): numeric features, macro-action menus, the RL env factory and
the native vector env, for stable-baselines3 and rl_zoo3.

:class:`FeatureObservation` (numeric features), :class:`MacroActionWrapper` and :class:`SequentialMacroWrapper`
(Discrete macro-action menus with ``action_masks()``), :func:`make_rl_env`; :class:`MacroVectorEnv` (the native
vector env of ``FWBench-RL-Macro-v0``, loaded on first use); :class:`SB3VecEnv` (a Gymnasium vector env as a
stable-baselines3 ``VecEnv``, loaded on first use so that ``import fwgym.rl`` needs no stable-baselines3).
"""
from fwgym.rl.env import HeldOutSplitWarning, make_rl_env
from fwgym.rl.features import FEATURE_NAMES, N_FEATURES, FeatureObservation, feature_index
from fwgym.rl.macro import SEQUENTIAL_MENU, SINGLE_MENU, MacroActionWrapper, SequentialMacroWrapper

__all__ = ["FEATURE_NAMES", "N_FEATURES", "FeatureObservation", "feature_index", "SINGLE_MENU", "SEQUENTIAL_MENU",
           "MacroActionWrapper", "SequentialMacroWrapper", "make_rl_env", "HeldOutSplitWarning", "MacroVectorEnv", "SB3VecEnv"]


def __getattr__(name):
    if name == "SB3VecEnv":  # imports stable-baselines3 (and torch): only when asked for
        from fwgym.rl.sb3_vec import SB3VecEnv

        return SB3VecEnv
    if name == "MacroVectorEnv":
        from fwgym.rl.vector import MacroVectorEnv

        return MacroVectorEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
