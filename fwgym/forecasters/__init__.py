"""Predictive distributions for the target window: the free classical methods (and, later, priced models)."""
from fwgym.forecasters.classical import CLASSICAL_METHODS, classical_distribution

__all__ = ["CLASSICAL_METHODS", "classical_distribution"]
