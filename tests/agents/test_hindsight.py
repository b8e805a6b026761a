"""The oracle-only hindsight path (fwgym.agents.base.HindsightGrant, fwgym.baselines.oracles.oracle_grant): an
agent receives env.hindsight() only through an explicit grant made for it; the evaluation grants it to fwgym's
registered oracles only; isolated agents never."""
import functools

import pytest

from fwgym.agents.base import HindsightGrant, run_episode
from fwgym.baselines import FixedMethodAgent, PerfectDemandOracle, make_policy
from fwgym.baselines.oracles import ORACLE_CLASSES, MenuOracle, oracle_grant
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import evaluate
from fwgym.evaluation.records import stable_record  # noqa: E402

CID = "elec-PJM-2024-08-11-week_ahead"


class Peeker(FixedMethodAgent):
    """A user agent that declares it wants hindsight."""

    requires_hindsight = True

    def __init__(self, method):
        super().__init__(method)
        self.name = "peeker"  # FixedMethodAgent names itself after its method: a policy's name (refused)

    def set_hindsight(self, hindsight):
        raise AssertionError("hindsight reached a user agent")


class MyOracle(PerfectDemandOracle):
    """A subclass of fwgym's oracle: other code, so no grant."""

    name = "my_oracle"


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv("electricity", split="test")


def test_an_oracle_gets_hindsight_only_with_a_grant_for_it(env):
    oracle = PerfectDemandOracle()
    with pytest.raises(ValueError, match="requires hindsight, which run_episode passes only with an explicit"):
        run_episode(env, oracle, options={"case_id": CID})
    with pytest.raises(ValueError, match="the hindsight grant is for perfect_demand, not for perfect_demand"):
        run_episode(env, oracle, options={"case_id": CID}, hindsight=HindsightGrant(PerfectDemandOracle()))
    with pytest.raises(TypeError, match="HindsightGrant"):
        run_episode(env, oracle, options={"case_id": CID}, hindsight={"target": [0] * 24})
    rec = run_episode(env, oracle, options={"case_id": CID}, hindsight=oracle_grant(oracle)).record
    assert rec["S"] == 0.0 and rec["loss"] == rec["floor"]
    # a grant given to an agent that does not ask for hindsight passes nothing (and changes nothing)
    plain = FixedMethodAgent("weekday_empirical")
    assert stable_record(run_episode(env, plain, options={"case_id": CID}, hindsight=HindsightGrant(plain)).record) == \
        stable_record(run_episode(env, plain, options={"case_id": CID}).record)


def test_only_fwgyms_registered_oracles_are_granted():
    assert ORACLE_CLASSES == (PerfectDemandOracle, MenuOracle)
    for name in ("perfect_demand", "catalog_oracle", "free_menu_oracle"):
        agent = make_policy(name)
        grant = oracle_grant(agent)
        assert isinstance(grant, HindsightGrant) and grant.agent is agent
    for agent in (MyOracle(), Peeker("weekday_empirical"), make_policy("backtest_selector_4"),
                  FixedMethodAgent("weekday_empirical")):
        assert oracle_grant(agent) is None


def test_the_evaluation_refuses_hindsight_to_user_agents():
    recs = evaluate(["perfect_demand"], split="test", limit=1, progress=False)
    assert all(r["S"] == 0.0 for r in recs)
    with pytest.raises(ValueError, match="is the name of a policy of fwgym"):
        evaluate([functools.partial(FixedMethodAgent, "weekday_empirical")], split="test", limit=1, progress=False)
    for factory in (functools.partial(Peeker, "weekday_empirical"), MyOracle):
        with pytest.raises(ValueError, match="requires hindsight"):
            evaluate([factory], split="test", limit=1, progress=False)
