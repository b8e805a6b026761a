import pytest

from fwgym.baselines import DEFAULT_POLICIES, FixedMethodAgent, make_policy, policy_names
from fwgym.evaluation import evaluate


def test_registry():
    assert len(DEFAULT_POLICIES) == 9 and "perfect_demand" in DEFAULT_POLICIES
    assert set(DEFAULT_POLICIES) <= set(policy_names())
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("gpt")
    with pytest.raises(ValueError, match="unknown classical method"):
        FixedMethodAgent("arima")


def test_perfect_demand_has_s_zero_on_every_test_case_and_beats_fixed_policies():
    recs = evaluate(["perfect_demand", "weekday_empirical"], split="test", progress=False)
    perfect = [r for r in recs if r["policy"] == "perfect_demand"]
    fixed = {r["case_id"]: r for r in recs if r["policy"] == "weekday_empirical"}
    assert len(perfect) == 1259
    for r in perfect:
        assert r["S"] == 0.0 and r["R"] == 0.0 and r["valid"] and r["calls"] == 0 and r["credits"] == 0
        assert r["loss"] <= fixed[r["case_id"]]["loss"] + 1e-15
        assert r["floor"] > 0
