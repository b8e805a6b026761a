"""Reference policies: fixed classical-method policies and the perfect-demand oracle."""
from fwgym.baselines.fixed import FixedMethodAgent
from fwgym.baselines.oracles import PerfectDemandOracle
from fwgym.baselines.registry import DEFAULT_POLICIES, make_policy, policy_names

__all__ = ["FixedMethodAgent", "PerfectDemandOracle", "DEFAULT_POLICIES", "make_policy", "policy_names"]
