"""Gymnasium environments of fwgym and their registration."""
from fwgym.envs.fwbench import FWBenchEnv

ENV_IDS: dict[str, dict] = {
    "FWBench-Electricity-v0": {"domain": "electricity"},
    "FWBench-CycleHire-v0": {"domain": "cycle_hire"},
    "FWBench-v0": {"domain": ("electricity", "cycle_hire")},
    "FWBench-Electricity-Context-v0": {"domain": "electricity", "scenarios": True},
    "FWBench-CycleHire-Context-v0": {"domain": "cycle_hire", "scenarios": True},
    "FWBench-Electricity-Forecast-v0": {"domain": "electricity", "scenarios": True, "task": "forecast"},
    "FWBench-CycleHire-Forecast-v0": {"domain": "cycle_hire", "scenarios": True, "task": "forecast"},
}


def register_envs() -> None:
    """Register every fwgym id with Gymnasium (idempotent)."""
    import gymnasium as gym

    for env_id, kwargs in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="fwgym.envs.fwbench:FWBenchEnv", kwargs=dict(kwargs))


__all__ = ["FWBenchEnv", "ENV_IDS", "register_envs"]
