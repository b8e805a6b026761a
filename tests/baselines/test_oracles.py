"""Hindsight oracles: perfect demand, free-menu and catalog oracles executed through env.step."""
from collections import defaultdict

import numpy as np
import pytest

from fwgym.agents.base import run_episode
from fwgym.baselines import make_policy
from fwgym.baselines.oracles import MenuOracle, oracle_grant, priced_candidate
from fwgym.core.cases import build_cases
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import evaluate
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.core.scoring import aggregate
from fwgym.core.tariff import price
from fwgym.tools import classical_plan_result

FIXED = list(CLASSICAL_METHODS)


@pytest.fixture(scope="module")
def menu_records():
    """Fixed free policies, fixed seasonal_empirical and both menu oracles on 100 test cases per domain."""
    recs = evaluate(FIXED + ["seasonal_empirical", "free_menu_oracle", "catalog_oracle", "perfect_demand"],
                    split="test", limit=100, progress=False)
    by = defaultdict(dict)
    for r in recs:
        by[r["policy"]][r["case_id"]] = r
    return recs, by


def test_perfect_demand_has_s_zero_on_every_test_case():
    recs = evaluate(["perfect_demand"], split="test", progress=False)
    assert len(recs) == sum(len(build_cases(d, "test")) for d in ("electricity", "cycle_hire"))
    assert all(r["S"] == 0.0 and r["R"] == 0.0 and r["loss"] == r["floor"] and r["valid"] for r in recs)


def test_catalog_le_free_menu_le_every_fixed_free_policy_per_case_and_in_aggregate(menu_records):
    recs, by = menu_records
    cat, free = by["catalog_oracle"], by["free_menu_oracle"]
    for cid, r in cat.items():
        assert r["valid"] and r["status"] == "submitted"
        assert r["S"] <= free[cid]["S"]
        assert free[cid]["credits"] == 0
        for m in FIXED:
            assert free[cid]["S"] <= by[m][cid]["S"]
        assert r["S"] <= by["seasonal_empirical"][cid]["S"]  # the catalog menu holds seasonal_empirical
        assert by["perfect_demand"][cid]["S"] <= r["S"] + 1e-12  # equal-cost plans may differ by rounding
    agg = {p: aggregate(list(v.values()))["S"] for p, v in by.items()}
    assert agg["perfect_demand"] == 0.0 < agg["catalog_oracle"] <= agg["free_menu_oracle"]
    assert agg["free_menu_oracle"] <= min(agg[m] for m in FIXED)


def test_catalog_oracle_pays_exactly_its_picks_tariff(menu_records):
    recs, by = menu_records
    paid = 0
    for cid, r in by["catalog_oracle"].items():
        tc = r["tool_counts"]
        if r["credits"]:
            paid += 1
            horizon = 50 if r["lead"] == "day_ahead" else 194
            assert r["credits"] == price("seasonal_empirical", 336, horizon)["credits"]
            assert tc == {"forecast": 1, "plan": 1, "submit": 1}
            assert r["S"] == by["seasonal_empirical"][cid]["S"]  # same plan, same charge
        else:
            assert tc == {"classical_plan": 1, "submit": 1}
    assert paid > 0  # seasonal_empirical (no weights needed) is picked on some cases


def test_oracle_records_match_its_hindsight_scores():
    env = FWBenchEnv(domain="cycle_hire", split="test")
    for case in env.cases[:12]:
        oracle = MenuOracle("catalog")
        rec = run_episode(env, oracle, options={"case_id": case.case_id}, hindsight=oracle_grant(oracle)).record
        best = oracle.candidates[oracle.choice]
        assert rec["S"] == best["S"] and rec["loss"] == best["loss"] and rec["credits"] == best["credits"]
        assert rec["levels"] == best["levels"]
        assert best["S"] == min(c["S"] for c in oracle.candidates.values())
        # every classical candidate is exactly the classical_plan tool's plan
        for m in CLASSICAL_METHODS:
            assert oracle.candidates[m]["levels"] == list(classical_plan_result(case, m).plan.levels)


class _Clairvoyant(QuantileForecaster):
    """Test-only forecaster posing as chronos_bolt_tiny: returns the realised target as every quantile."""

    name = "chronos_bolt_tiny"
    min_context = 2
    revision = "test"

    def __init__(self, case):
        self.case = case

    def _predict(self, context, horizon):
        q = np.repeat(self.case.history[-1:], horizon)[:, None].repeat(9, axis=1).astype(float)
        lo, hi = self.case.target_steps
        q[lo - 1 : hi] = self.case.target()[:, None]
        return q


def _run_oracle(env, oracle, case_id):
    return run_episode(env, oracle, options={"case_id": case_id}, hindsight=oracle_grant(oracle))


def _costly_case():
    """A test case whose best free plan has S > 0.05 (so a perfect 8,452-credit forecast pays off)."""
    env = FWBenchEnv(domain="electricity", split="test")
    for case in env.cases:
        if case.lead == "day_ahead" and _run_oracle(env, MenuOracle("free"), case.case_id).record["S"] > 0.05:
            return case
    raise AssertionError("no such case")  # pragma: no cover


def test_catalog_oracle_buys_a_priced_model_when_it_pays_off():
    case = _costly_case()
    fc = _Clairvoyant(case)
    env = FWBenchEnv(domain="electricity", split="test", forecasters={"chronos_bolt_tiny": fc})
    oracle = MenuOracle("catalog", forecasters={"chronos_bolt_tiny": fc})
    rec = run_episode(env, oracle, options={"case_id": case.case_id}, hindsight=oracle_grant(oracle)).record
    assert oracle.choice == "chronos_bolt_tiny"
    assert rec["credits"] == price("chronos_bolt_tiny", 336, case.horizon)["credits"] == 8452
    assert rec["credits"] == oracle.candidates["chronos_bolt_tiny"]["credits"]
    assert rec["loss"] == rec["floor"]  # a perfect forecast plans the perfect-demand plan
    assert rec["tool_counts"] == {"forecast": 1, "plan": 1, "submit": 1}
    assert "timesfm25" not in oracle.candidates  # never affordable under B
    rec_free = _run_oracle(env, MenuOracle("free"), case.case_id).record
    assert rec_free["credits"] == 0 and rec["S"] < rec_free["S"]


def test_oracle_refuses_a_plan_that_differs_from_its_candidate():
    case = _costly_case()
    served = _Clairvoyant(case)
    served._predict = lambda context, horizon: np.full((horizon, 9), 0.5 * case.scale)  # not what the oracle ranks
    env = FWBenchEnv(domain="electricity", split="test", forecasters={"chronos_bolt_tiny": served})
    oracle = MenuOracle("catalog", forecasters={"chronos_bolt_tiny": _Clairvoyant(case)})
    with pytest.raises(RuntimeError, match="differs from the oracle's candidate"):
        run_episode(env, oracle, options={"case_id": case.case_id}, hindsight=oracle_grant(oracle))


def test_priced_candidate_skips_unaffordable_and_unavailable_models():
    case = build_cases("cycle_hire", "test")[0]
    assert priced_candidate(case, "timesfm25") is None  # 1.18M credits > B
    assert priced_candidate(case, "seasonal_empirical", budget=10) is None
    credits, res = priced_candidate(case, "seasonal_empirical")
    assert credits == price("seasonal_empirical", 336, case.horizon)["credits"]


def test_oracles_need_hindsight_and_validate_arguments():
    with pytest.raises(RuntimeError, match="hindsight"):
        make_policy("catalog_oracle").act({"last_result": "", "budget_left": np.array([113726.0])})
    with pytest.raises(ValueError, match="menu"):
        MenuOracle("everything")
    with pytest.raises(ValueError, match="unknown models"):
        MenuOracle("catalog", models=["gpt"])
    assert make_policy("free_menu_oracle").name == "free_menu_oracle"
