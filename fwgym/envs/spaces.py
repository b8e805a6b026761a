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


class PrintableText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` (same arguments, samples, ``contains`` and equality) that
    refuses gymnasium's vector shared memory (see the module docstring).

    Raises (from ``gymnasium.vector.utils.create_shared_memory``, hence from
    ``AsyncVectorEnv(..., shared_memory=True)``):
        ValueError: always, naming ``shared_memory=False``.
    """


@create_shared_memory.register(PrintableText)
def _refuse_shared_memory(space: PrintableText, n: int = 1, ctx=None):
    raise ValueError(SHARED_MEMORY_MESSAGE.format(n=space.max_length))


__all__ = ["PrintableText", "SHARED_MEMORY_MESSAGE"]
