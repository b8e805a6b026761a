"""Reference policies: fixed classical-method and priced-forecast policies, the routing reference,
backtest selectors and the hindsight oracles (perfect demand, free-menu and catalog)."""
from fwgym.baselines.fixed import FixedMethodAgent
from fwgym.baselines.forecast import FixedForecastAgent, RoutingAgent
from fwgym.baselines.oracles import MenuOracle, PerfectDemandOracle
from fwgym.baselines.registry import DEFAULT_POLICIES, default_policies, make_policy, policy_names
from fwgym.baselines.selectors import BacktestSelector

__all__ = ["FixedMethodAgent", "FixedForecastAgent", "RoutingAgent", "PerfectDemandOracle", "MenuOracle",
           "BacktestSelector", "DEFAULT_POLICIES", "default_policies", "make_policy", "policy_names"]
