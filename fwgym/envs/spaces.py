"""The Text space of fwgym's observations and actions, guarded against gymnasium's shared memory.

Gymnasium 1.4's ``AsyncVectorEnv(shared_memory=True)`` (its default, and ``gym.make_vec(...,
vectorization_mode="async")``'s) reads a ``Text`` sub-space's shared memory ONCE, when the vector env
is built: every observation it returns afterwards is the zero-filled buffer decoded as text, i.e.
``max_length`` (131,072) copies of ``"0"`` (the first character of ``string.printable``), silently.
:class:`PrintableText` registers its own :func:`gymnasium.vector.utils.create_shared_memory`, which
refuses loudly, so an async vector env over a raw FWBench env fails at construction with the fix in
the message (``shared_memory=False``) instead of training or evaluating on garbage. The numeric RL
envs (:mod:`fwgym.wrappers`, the ``FWBench-RL-*`` ids) have Box observations and are not affected.
"""
from __future__ import annotations

import sys

from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory

#: what the refusal says (tests match on it)
SHARED_MEMORY_MESSAGE = (
    "fwgym's Text observations (context, last_result) cannot travel through gymnasium's shared memory: "
    "gymnasium 1.4's AsyncVectorEnv reads a Text buffer once at construction, so every observation would come back "
    "as {n:,} '0' characters. Pass shared_memory=False: gym.make_vec(..., vectorization_mode='async', "
    "vector_kwargs={{'shared_memory': False}}) or gym.vector.AsyncVectorEnv(env_fns, shared_memory=False); "
    "or wrap the env in a numeric RL wrapper (fwgym.wrappers, the FWBench-RL-* ids) whose Box observations "
    "shared memory handles."
)


#: what stable-baselines3 is told when it is given a raw text env (it reads each space's ``shape``)
SB3_MESSAGE = (
    "this fwgym env has Text observations and actions (the LLM-facing envs: FWBench-v0, FWBench-Electricity-v0, ...), "
    "which stable-baselines3 cannot batch; train on the RL ids, numeric features and a Discrete macro menu: "
    "FWBench-RL-Macro-v0 (one decision per episode) or FWBench-RL-Sequential-v0 (gather information, then decide), "
    "e.g. PPO('MlpPolicy', 'FWBench-RL-Macro-v0') or make_vec_env('FWBench-RL-Macro-v0'); see docs/rl.md"
)


class PrintableText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` (same arguments, samples, ``contains`` and equality) that
    refuses gymnasium's vector shared memory (see the module docstring), and that stable-baselines3 asking for its
    ``shape`` (to allocate a batch of observations) is told to use the RL ids (:data:`SB3_MESSAGE`) instead of
    failing with ``TypeError: 'NoneType' object is not iterable``.

    Raises (from ``gymnasium.vector.utils.create_shared_memory``, hence from
    ``AsyncVectorEnv(..., shared_memory=True)``):
        ValueError: always, naming ``shared_memory=False``.
    """

    @property
    def shape(self):
        """``None``, as every Text space's; raises ``TypeError`` (:data:`SB3_MESSAGE`) when stable-baselines3 asks."""
        if sys._getframe(1).f_globals.get("__name__", "").startswith("stable_baselines3"):
            raise TypeError(SB3_MESSAGE)
        return self._shape


@create_shared_memory.register(PrintableText)
def _refuse_shared_memory(space: PrintableText, n: int = 1, ctx=None):
    raise ValueError(SHARED_MEMORY_MESSAGE.format(n=space.max_length))


__all__ = ["PrintableText", "SHARED_MEMORY_MESSAGE", "SB3_MESSAGE"]
