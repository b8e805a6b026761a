"""Reference policies: fixed classical-method policies and the perfect-demand oracle."""
from fwgym.baselines.fixed import FixedMethodAgent
from fwgym.baselines.forecast import FixedForecastAgent, RoutingAgent
from fwgym.baselines.oracles import PerfectDemandOracle
from fwgym.baselines.registry import DEFAULT_POLICIES, default_policies, make_policy, policy_names

__all__ = ["FixedMethodAgent", "FixedForecastAgent", "RoutingAgent", "PerfectDemandOracle", "DEFAULT_POLICIES",
           "default_policies", "make_policy", "policy_names"]
