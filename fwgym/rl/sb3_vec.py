"""A Gymnasium ``VectorEnv`` as a stable-baselines3 ``VecEnv``: :class:`SB3VecEnv`.

stable-baselines3 trains on its own ``VecEnv`` API (same-step autoreset, per-env info dicts with
``terminal_observation``) and has no adapter for ``gymnasium.vector.VectorEnv``; this is one, small
enough to check (tests/wrappers/test_sb3_vec.py compares it with SB3's ``DummyVecEnv`` over the same
single envs). It works with any Gymnasium vector env in **same-step** autoreset mode, e.g. the native
macro vector env::

    import gymnasium as gym
    from gymnasium.vector import AutoresetMode
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from fwgym.rl.sb3_vec import SB3VecEnv

    venv = gym.make_vec("FWBench-RL-Macro-v0", num_envs=64, autoreset_mode=AutoresetMode.SAME_STEP)
    model = PPO("MlpPolicy", VecMonitor(SB3VecEnv(venv)), n_steps=64, batch_size=256)  # split: train (the id's default)

``VecMonitor`` (SB3's) adds the ``episode`` statistics that SB3 logs (``ep_rew_mean``). Masks:
``env_method("action_masks")`` (what sb3-contrib's ``MaskablePPO`` calls) returns the vector env's
``action_masks()`` rows (native env) or ``call("action_masks")`` (Sync/Async vector envs).

Per-env ``infos`` carry what SB3 reads: ``terminal_observation`` and ``TimeLimit.truncated`` for the
envs whose episode ended, plus the top-level ``final_info`` keys named in ``info_keys`` (e.g.
``("S", "case_id")``); ``reset_infos`` stay empty dicts (SB3's algorithms do not read them).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnv


class SB3VecEnv(VecEnv):
    """stable-baselines3 ``VecEnv`` over a Gymnasium vector env with same-step autoreset.

    Args:
        venv: a ``gymnasium.vector.VectorEnv`` whose ``metadata["autoreset_mode"]`` is
            ``AutoresetMode.SAME_STEP`` (``gym.make_vec(..., autoreset_mode=AutoresetMode.SAME_STEP)``
            for the native env, ``vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}`` for
            Sync/Async).
        info_keys: top-level keys of the vector env's ``final_info`` copied into the per-env info
            dict of each env whose episode ended.

    Raises:
        TypeError: ``venv`` is not a Gymnasium vector env.
        ValueError: its autoreset mode is not same-step.
    """

    def __init__(self, venv: VectorEnv, info_keys: Sequence[str] = ()):
        if not isinstance(venv, VectorEnv):
            raise TypeError(f"SB3VecEnv wraps a gymnasium.vector.VectorEnv, got {type(venv).__name__}")
        mode = venv.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"SB3VecEnv needs same-step autoreset (SB3 resets in the step that ends an episode), the vector env "
                             f"has {mode!r}: make it with autoreset_mode=AutoresetMode.SAME_STEP")
        self.venv = venv
        self.info_keys = tuple(info_keys)
        self._actions: np.ndarray | None = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

    # -- the VecEnv API --------------------------------------------------------------------------

    def reset(self):
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options[0] if self._options and self._options[0] else None
        obs, _ = self.venv.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final_obs, final_info = info["final_obs"], info.get("final_info", {})
            for i in np.flatnonzero(dones):
                d = infos[i]
                d["terminal_observation"] = final_obs[i]
                d["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                for k in self.info_keys:
                    if k in final_info and final_info[f"_{k}"][i]:
                        d[k] = final_info[k][i]
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.venv.close()

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return [int(i) for i in indices]

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        """Per-env attribute values: ``render_mode`` of the vector env, ``get_attr`` of a Sync/Async
        vector env, or an ``action_masks`` method of each env for a vector env that has one.

        Raises:
            AttributeError: the vector env has no such per-env attribute.
        """
        idx = self._indices(indices)
        if attr_name == "render_mode":
            return [getattr(self.venv, "render_mode", None) for _ in idx]
        if attr_name == "action_masks" and callable(getattr(self.venv, "action_masks", None)):
            return [(lambda i=i: self.venv.action_masks()[i]) for i in idx]
        if hasattr(self.venv, "get_attr"):
            values = self.venv.get_attr(attr_name)
            return [values[i] for i in idx]
        raise AttributeError(f"{type(self.venv).__name__} has no per-env attribute {attr_name!r}")

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Raises:
            AttributeError: the vector env has no ``set_attr`` (native envs keep no per-env objects)."""
        if not hasattr(self.venv, "set_attr") or indices is not None:
            raise AttributeError(f"set_attr is not supported on {type(self.venv).__name__} (indices: {indices})")
        self.venv.set_attr(attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        """Results of calling ``method_name`` in each env (``action_masks`` reads the vector env's
        ``action_masks()`` when it has one; otherwise the vector env's ``call``).

        Raises:
            AttributeError: the vector env cannot call it.
        """
        idx = self._indices(indices)
        if method_name == "action_masks" and callable(getattr(self.venv, "action_masks", None)):
            masks = self.venv.action_masks()
            return [masks[i] for i in idx]
        if not hasattr(self.venv, "call"):
            raise AttributeError(f"{type(self.venv).__name__} has no call() for {method_name!r}")
        results = self.venv.call(method_name, *method_args, **method_kwargs)
        return [results[i] for i in idx]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        idx = self._indices(indices)
        envs = getattr(self.venv, "envs", None)
        if envs is None:
            return [False for _ in idx]
        from stable_baselines3.common.env_util import is_wrapped

        return [is_wrapped(envs[i], wrapper_class) for i in idx]


__all__ = ["SB3VecEnv"]
