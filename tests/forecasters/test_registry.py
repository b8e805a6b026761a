"""The process-wide registry of forecasters (fwgym.forecasters.registry)."""
import pytest

from fwgym.forecasters.registry import get_forecaster


def test_registry_returns_one_instance_and_rejects_unknown_names():
    assert get_forecaster("seasonal_empirical") is get_forecaster("seasonal_empirical")
    with pytest.raises(ValueError, match="unknown model"):
        get_forecaster("prophet")
