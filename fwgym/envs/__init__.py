"""Gymnasium environments of fwgym and their registration.

Every id defaults to the **train** split (``split="train"``), so that a training script that says
nothing never sees the benchmark's test cases; pass ``split="dev"`` for model selection and
``split="test"`` for the benchmark (``fwgym evaluate`` and :func:`fwgym.evaluation.evaluate` use the
test split unless told otherwise). A ``case_id`` of another split than the env's is refused at reset.

* :data:`ENV_IDS`: the raw tool-call envs (:class:`~fwgym.envs.fwbench.FWBenchEnv`, Dict
  observation with Text fields, JSON tool-call actions).
* :data:`RL_ENV_IDS`: the RL envs of :func:`fwgym.rl.make_rl_env` (Box features, a Discrete
  macro menu with ``action_masks()``, dense reward summing to ``-S``), for stable-baselines3 and
  rl_zoo3 (``python -m rl_zoo3.train --algo ppo --env FWBench-RL-Macro-v0 --gym-packages fwgym
  --conf-file fwgym/hyperparams/ppo.yml``). ``FWBench-RL-Macro-v0`` has a native vector env
  (:class:`~fwgym.rl.vector.MacroVectorEnv`, its ``vector_entry_point``):
  ``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)``.
"""
from typing import Any

from fwgym.data import DOMAINS
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.suites import SUITES

_ENV_NAMES = {"electricity": "Electricity", "cycle_hire": "CycleHire"}


def _env_ids() -> dict[str, dict[str, Any]]:
    """``{env id: FWBenchEnv kwargs}``: each suite (:mod:`fwgym.suites`) on each domain, its env kwargs and
    the train split; ``FWBench-v0`` is the decision suite on the protocol's domains together."""
    out: dict[str, dict[str, Any]] = {}
    for suite in SUITES.values():
        for d in DOMAINS:
            out[suite.env_id(_ENV_NAMES[d])] = {"domain": d, "split": "train", **suite.env_kwargs}
        if suite.name == "decision":
            out["FWBench-v0"] = {"domain": tuple(DOMAINS), "split": "train"}
    return out


#: the raw tool-call env ids and their FWBenchEnv kwargs (one per suite and domain, and ``FWBench-v0``)
ENV_IDS: dict[str, dict[str, Any]] = _env_ids()

#: settings of the RL ids, chosen on the DEV split (benchmarks/README.md, "RL defaults"; script
#: benchmarks/rl_defaults.py): PPO 20k steps x 4 seeds, dev S 0.451 with all 403 features and all
#: training stations against 0.467 with the compact features and the 20 dev/test stations (best fixed
#: policy on dev: 0.491)
RL_DEFAULTS: dict = {"domain": "all", "split": "train", "reward": "dense", "features": "all",
                     "cycle_hire_stations": "all"}

RL_ENV_IDS: dict[str, dict] = {
    "FWBench-RL-Macro-v0": {**RL_DEFAULTS, "variant": "macro"},
    "FWBench-RL-Sequential-v0": {**RL_DEFAULTS, "variant": "sequential"},
}
_VECTOR_ENTRY_POINTS = {"FWBench-RL-Macro-v0": "fwgym.rl.vector:MacroVectorEnv"}


def register_envs() -> None:
    """Register every fwgym id with Gymnasium (idempotent)."""
    import gymnasium as gym

    for env_id, kwargs in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="fwgym.envs.fwbench:FWBenchEnv", kwargs=dict(kwargs))
    for env_id, kwargs in RL_ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="fwgym.rl.env:make_rl_env", kwargs=dict(kwargs),
                         vector_entry_point=_VECTOR_ENTRY_POINTS.get(env_id))


__all__ = ["FWBenchEnv", "ENV_IDS", "RL_ENV_IDS", "RL_DEFAULTS", "register_envs"]
