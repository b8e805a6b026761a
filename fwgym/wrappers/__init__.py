"""Wrappers around the FWBench env (DESIGN §9).

RL (stable-baselines3): :class:`FeatureObservation` (numeric features), :class:`MacroActionWrapper`
and :class:`SequentialMacroWrapper` (Discrete macro-action menus with ``action_masks()``),
:func:`make_rl_env`; ``SB3Agent`` (a trained SB3 model as an fwgym agent) is imported lazily
because it needs torch.
"""
from fwgym.wrappers.features import FEATURE_NAMES, N_FEATURES, FeatureObservation, feature_index
from fwgym.wrappers.macro import SEQUENTIAL_MENU, SINGLE_MENU, MacroActionWrapper, SequentialMacroWrapper
from fwgym.wrappers.rl import make_rl_env

__all__ = ["FEATURE_NAMES", "N_FEATURES", "FeatureObservation", "feature_index", "SINGLE_MENU", "SEQUENTIAL_MENU",
           "MacroActionWrapper", "SequentialMacroWrapper", "make_rl_env", "SB3Agent"]


def __getattr__(name):
    if name == "SB3Agent":
        from fwgym.wrappers.sb3_agent import SB3Agent

        return SB3Agent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# LLM chat rendering and reply -> action mapping (issue 9)
from fwgym.wrappers.chat import REPLY_ERROR_TOOL, ChatSession, ModelReply, ToolRequest  # noqa: E402

__all__ += ["ChatSession", "ModelReply", "ToolRequest", "REPLY_ERROR_TOOL"]
