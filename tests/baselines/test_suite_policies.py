"""Default policy lists of the suites (fwgym.baselines.registry.suite_policies) for both forecast pools."""
import pytest

from fwgym.baselines.registry import (CONTEXT_POLICIES, EXTENDED_POLICIES, ORACLE_POLICIES, SELECTOR_POLICIES,
                                      policy_models, suite_policies)
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import EXTENDED_MODELS, STATISTICAL_MODELS


def test_protocol_pool_lists():
    base = list(CLASSICAL_METHODS) + ["seasonal_empirical"]
    assert suite_policies("decision", False)[0] == base + list(SELECTOR_POLICIES) + list(ORACLE_POLICIES)
    assert suite_policies("context", False)[0] == base + list(SELECTOR_POLICIES) + list(CONTEXT_POLICIES) + [
        "perfect_demand"]
    assert suite_policies("forecast", False) == (list(CONTEXT_POLICIES) + ["seasonal_empirical_quantiles"], {})
    assert suite_policies("decision", False, "protocol") == suite_policies("decision", False)


def test_extended_pool_adds_the_statsmodels_policies_and_the_extended_oracle():
    base = list(CLASSICAL_METHODS) + ["seasonal_empirical"] + list(STATISTICAL_MODELS)
    assert suite_policies("decision", False, "extended")[0] == base + list(SELECTOR_POLICIES) + [
        "free_menu_oracle", "catalog_oracle", "catalog_oracle_extended", "perfect_demand"]
    # the context suite's defaults hold no menu oracle, in either pool
    assert suite_policies("context", False, "extended")[0] == base + list(SELECTOR_POLICIES) + list(CONTEXT_POLICIES) + [
        "perfect_demand"]
    assert suite_policies("forecast", False, "extended") == (list(CONTEXT_POLICIES) + ["seasonal_empirical_quantiles"], {})
    extended = set(suite_policies("decision", False, "extended")[0])
    assert set(EXTENDED_POLICIES) <= extended
    assert all(set(policy_models(p)) <= set(EXTENDED_MODELS) for p in extended)


def test_unknown_pool_or_suite():
    with pytest.raises(ValueError, match="unknown pool 'big'"):
        suite_policies("decision", False, "big")
    with pytest.raises(ValueError, match="unknown suite"):
        suite_policies("nope", False)
