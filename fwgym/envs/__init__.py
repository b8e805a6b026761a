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
from fwgym.envs.fwbench import FWBenchEnv

ENV_IDS: dict[str, dict] = {
    "FWBench-Electricity-v0": {"domain": "electricity", "split": "train"},
    "FWBench-CycleHire-v0": {"domain": "cycle_hire", "split": "train"},
    "FWBench-v0": {"domain": ("electricity", "cycle_hire"), "split": "train"},
    "FWBench-Electricity-Context-v0": {"domain": "electricity", "split": "train", "scenarios": True},
    "FWBench-CycleHire-Context-v0": {"domain": "cycle_hire", "split": "train", "scenarios": True},
    "FWBench-Electricity-Forecast-v0": {"domain": "electricity", "split": "train", "scenarios": True, "task": "forecast"},
    "FWBench-CycleHire-Forecast-v0": {"domain": "cycle_hire", "split": "train", "scenarios": True, "task": "forecast"},
}

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
