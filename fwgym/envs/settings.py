"""The checks of :class:`fwgym.envs.fwbench.FWBenchEnv`'s keyword arguments, one function per concern (each raises
``ValueError`` with the argument's name, the value given and what it may be)."""
from __future__ import annotations

import math
import threading
from typing import Sequence

import numpy as np

from fwgym.core.cases import LEADS, SPLITS
from fwgym.core.metrics import TASKS
from fwgym.domains import domain_names, is_domain
from fwgym.tools import ANSWER_TOOLS, DEFAULT_TOOLS, ERROR, REGISTRY, TERMINATE
from fwgym.validation import is_number

__all__ = ["check_domains", "check_episode_rules", "resolve_tools", "check_forecast_timeout", "check_credit_weight"]


def check_domains(domain: str | Sequence[str]) -> tuple[str, ...]:
    """``domain`` (a name or names) as a tuple of registered domain names.

    Raises:
        ValueError: an unknown domain, or none given.
    """
    domains = (domain,) if isinstance(domain, str) else tuple(domain)
    bad = [d for d in domains if not is_domain(d)]
    if bad or not domains:
        raise ValueError(f"unknown domain(s) {bad or domains}; expected some of {list(domain_names())}")
    return domains


def check_episode_rules(*, split: str, lead: str | None, reward: str, invalid_submission: str, call_limit: str,
                        task: str) -> None:
    """The split, lead, reward mode, the two ending rules (``"terminate"``/``"error"``) and the task.

    Raises:
        ValueError: any of them not one of its allowed values (the message lists them).
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    if lead is not None and lead not in LEADS:
        raise ValueError(f"unknown lead {lead!r}; expected None or one of {list(LEADS)}")
    if reward not in ("terminal", "dense"):
        raise ValueError(f"reward must be 'terminal' or 'dense', got {reward!r}")
    for name, v in (("invalid_submission", invalid_submission), ("call_limit", call_limit)):
        if v not in (TERMINATE, ERROR):
            raise ValueError(f"{name} must be {TERMINATE!r} or {ERROR!r}, got {v!r}")
    if task not in TASKS:
        raise ValueError(f"task must be 'decision' or 'forecast', got {task!r}")


def resolve_tools(tools: Sequence[str] | None) -> tuple[str, ...]:
    """The env's tools: ``tools`` (default :data:`fwgym.tools.DEFAULT_TOOLS`) plus the answer tools, which are
    always available.

    Raises:
        ValueError: a tool that is not registered (:data:`fwgym.tools.REGISTRY`).
    """
    names = tuple(DEFAULT_TOOLS if tools is None else tools)
    unknown = [t for t in names if t not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; registered: {list(REGISTRY)}")
    return names + tuple(t for t in ANSWER_TOOLS if t not in names)


def check_forecast_timeout(value: float | None) -> float | None:
    """``None`` (wait indefinitely) or the seconds as a Python float in ``(0, threading.TIMEOUT_MAX]`` (threading
    refuses NumPy floats other than float64).

    Raises:
        ValueError: anything else.
    """
    if value is None:
        return None
    seconds = float(value) if is_number(value) else math.nan
    if not 0 < seconds <= threading.TIMEOUT_MAX:
        raise ValueError(f"forecast_timeout must be None (wait indefinitely) or seconds in (0, "
                         f"{threading.TIMEOUT_MAX:.3g}], got {value!r}")
    return seconds


def check_credit_weight(value: float) -> float:
    """The forecast task's credit weight as a float (finite, >= 0).

    Raises:
        ValueError: a negative or non-finite weight.
    """
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"credit_weight must be finite and >= 0, got {value!r}")
    return float(value)
