"""Policy names usable on the command line (``fwgym evaluate --policies ...``)."""
from __future__ import annotations

from typing import Any, Callable

from fwgym.baselines.fixed import FixedMethodAgent
from fwgym.baselines.oracles import PerfectDemandOracle
from fwgym.forecasters.classical import CLASSICAL_METHODS

_FACTORIES: dict[str, Callable[[], Any]] = {m: (lambda m=m: FixedMethodAgent(m)) for m in CLASSICAL_METHODS}
_FACTORIES["perfect_demand"] = PerfectDemandOracle

#: the main job's policies: the 8 fixed classical policies and the perfect-demand oracle
DEFAULT_POLICIES: tuple[str, ...] = tuple(CLASSICAL_METHODS) + ("perfect_demand",)


def policy_names() -> list[str]:
    """Names accepted by :func:`make_policy`."""
    return list(_FACTORIES)


def make_policy(name: str):
    """A fresh agent for ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown policy {name!r}; known policies: {policy_names()}")
    return _FACTORIES[name]()
