"""fwgym: Gymnasium environments for budgeted forecast purchasing and capacity decisions on real data.

``import fwgym`` registers ``FWBench-Electricity-v0``, ``FWBench-CycleHire-v0`` and ``FWBench-v0``.
"""
from fwgym.envs import ENV_IDS, FWBenchEnv, register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["FWBenchEnv", "ENV_IDS", "__version__"]
