"""Evaluation suites as specs (as inspect-ai's ``Task``): :class:`Suite`, one object per suite.

A suite says what an evaluation measures: the env settings of its episodes (task kind, whether each case
carries a context scenario), its reference policy, its default policies, its metric (the weights and the
formula of ``S``, :class:`fwgym.core.metrics.Metric`) and the words every display uses. It is the ONE
source of these facts for:

* the env ids (:mod:`fwgym.envs`: ``FWBench-<Domain><id_suffix>-v0`` per suite and domain),
* the runner (:data:`fwgym.evaluation.SUITES`, the env kwargs of each suite) and ``fwgym evaluate --suite``,
* the baselines' suite defaults (:func:`fwgym.baselines.registry.suite_policies`),
* the scorer's S decomposition and the env's dense reward (the suite's metric is its task's
  :func:`~fwgym.core.metrics.task_metric`, the object :func:`fwgym.core.scorer.score_submission` and
  :class:`fwgym.envs.fwbench.FWBenchEnv` score with),
* the run manifest (its ``settings.suite`` and ``settings.credit_weight``) and every display (tables,
  figures, the report: :func:`suite_metric` of the manifest's suite and credit weight).

The three suites (DESIGN §5, §8)::

    >>> from fwgym.suites import get_suite
    >>> get_suite("decision").metric().formula
    'S = (R + c/B)/2, R = (loss − F)/σ'
    >>> get_suite("forecast").env_kwargs
    {'scenarios': True, 'task': 'forecast'}
    >>> get_suite("forecast").metric(credit_weight=0.5).formula
    'S = R + 0.5·c/B, R = min(RCRPS, 5)'

Default policy lists may name groups that :func:`fwgym.baselines.registry.suite_policies` resolves
(:data:`TSFM_GROUP`: the TSFM policies whose weights load; :data:`EXTENDED_FIXED_GROUP` and
:data:`EXTENDED_ORACLE_GROUP`: the extended pool's fixed policies and oracle, only with ``pool="extended"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from fwgym.core.metrics import Metric, task_metric
from fwgym.forecasters.classical import CLASSICAL_METHODS

__all__ = ["Suite", "SuiteMetric", "SUITES", "SUITE_NAMES", "DEFAULT_SUITE", "TSFM_GROUP", "EXTENDED_FIXED_GROUP",
           "EXTENDED_ORACLE_GROUP", "POLICY_GROUPS", "get_suite", "suite_metric", "reference_policies"]

#: the TSFM policies whose weights load in this process (all of them with ``include_tsfm``)
TSFM_GROUP = "<tsfm>"
#: the extended pool's fixed statsmodels policies (only with ``pool="extended"``)
EXTENDED_FIXED_GROUP = "<extended-fixed>"
#: the catalog oracle over the extended pool (only with ``pool="extended"``)
EXTENDED_ORACLE_GROUP = "<extended-oracle>"
#: the group names a suite's default policies may hold
POLICY_GROUPS: tuple[str, ...] = (TSFM_GROUP, EXTENDED_FIXED_GROUP, EXTENDED_ORACLE_GROUP)


@dataclass(frozen=True)
class SuiteMetric(Metric):
    """A suite's :class:`~fwgym.core.metrics.Metric` with the suite's own words: what tables, figures and
    the report print.

    Attributes:
        suite: the suite's name. loss_label: a longer description of a record's ``loss`` in this suite.
        (The rest: :class:`~fwgym.core.metrics.Metric`.)
    """

    suite: str = ""
    loss_label: str = ""


@dataclass(frozen=True)
class Suite:
    """An evaluation suite (as inspect-ai's ``Task``).

    Attributes:
        name: the suite's name (``fwgym evaluate --suite NAME``, a run manifest's ``settings.suite``).
        title: a short title for displays (``"decision suite"``).
        description: one sentence: what the suite measures.
        task: the episodes' task, ``"decision"`` (submit 8 capacities) or ``"forecast"`` (submit a
            probabilistic forecast) (:data:`fwgym.core.metrics.TASKS`).
        scenarios: every case carries a context scenario (an announced event that changes the target,
            :mod:`fwgym.context.scenarios`).
        id_suffix: the env ids' suffix after the domain (``FWBench-Electricity<id_suffix>-v0``).
        reference_policy: the policy the leaderboard's paired intervals compare against.
        default_policies: the policies ``fwgym evaluate --suite NAME`` runs, in table order (names and
            :data:`POLICY_GROUPS`).
        loss_label: a record's ``loss`` in words, for displays.
    """

    name: str
    title: str
    description: str
    task: str
    scenarios: bool
    id_suffix: str
    reference_policy: str
    default_policies: tuple[str, ...]
    loss_label: str

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The :class:`~fwgym.envs.fwbench.FWBenchEnv` arguments of the suite's episodes (a new dict:
        ``{}``, ``{"scenarios": True}`` or ``{"scenarios": True, "task": "forecast"}``)."""
        out: dict[str, Any] = {}
        if self.scenarios:
            out["scenarios"] = True
        if self.task != "decision":
            out["task"] = self.task
        return out

    def metric(self, credit_weight: float | None = None) -> SuiteMetric:
        """The suite's metric: its task's (:func:`~fwgym.core.metrics.task_metric`, with the forecast
        task's ``credit_weight``, default 0: pass the run manifest's) in the suite's words.

        Raises:
            ValueError: a negative or non-finite credit weight.
        """
        m = task_metric(self.task, credit_weight)
        return SuiteMetric(**{f: getattr(m, f) for f in Metric.__dataclass_fields__}, suite=self.name,
                           loss_label=self.loss_label)

    def env_id(self, domain_env_name: str) -> str:
        """The env id of this suite on a domain (``domain_env_name``: the domain's ``env_name``, e.g.
        ``"Electricity"`` -> ``"FWBench-Electricity-Context-v0"``)."""
        return f"FWBench-{domain_env_name}{self.id_suffix}-v0"


_CLASSICAL = tuple(CLASSICAL_METHODS)
_SELECTORS = ("backtest_selector_4", "backtest_selector_8", "lead_matched_selector")
_CONTEXT = ("context_hour_of_day_empirical", "hour_of_day_empirical_samples")

#: the suites, in display order
SUITES: Mapping[str, Suite] = MappingProxyType({s.name: s for s in (
    Suite("decision", "decision suite",
          "capacity decisions scored on the realised target (the FWBench protocol)",
          task="decision", scenarios=False, id_suffix="", reference_policy="hour_of_day_empirical",
          default_policies=(*_CLASSICAL, "seasonal_empirical", TSFM_GROUP, EXTENDED_FIXED_GROUP, *_SELECTORS,
                            "free_menu_oracle", "catalog_oracle", EXTENDED_ORACLE_GROUP, "perfect_demand"),
          loss_label="decision loss of the submitted capacities on the realised target (mean hourly cost / scale)"),
    Suite("context", "context suite",
          "capacity decisions when the context announces an event that changes the target (Context is Key)",
          task="decision", scenarios=True, id_suffix="-Context", reference_policy="hour_of_day_empirical",
          default_policies=(*_CLASSICAL, "seasonal_empirical", TSFM_GROUP, EXTENDED_FIXED_GROUP, *_SELECTORS,
                            *_CONTEXT, "perfect_demand"),
          loss_label="decision loss of the submitted capacities on the scenario-transformed target (mean hourly "
                     "cost / scale)"),
    Suite("forecast", "forecast suite",
          "probabilistic forecasts of the scenario-transformed target, scored by Region-of-Interest CRPS",
          task="forecast", scenarios=True, id_suffix="-Forecast", reference_policy="hour_of_day_empirical_samples",
          default_policies=_CONTEXT,
          loss_label="Region-of-Interest CRPS of the submitted forecast (uncapped)"),
)})
#: the suites' names (``fwgym evaluate --suite``)
SUITE_NAMES: tuple[str, ...] = tuple(SUITES)
#: the suite of runs that name none
DEFAULT_SUITE = "decision"


def get_suite(name: str) -> Suite:
    """The suite called ``name``.

    Raises:
        ValueError: an unknown suite (the message lists the suites).
    """
    try:
        return SUITES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown suite {name!r}; expected one of {list(SUITES)}") from None


def suite_metric(suite: str = DEFAULT_SUITE, credit_weight: float | None = None) -> SuiteMetric:
    """:meth:`Suite.metric` of the suite called ``suite``; ``credit_weight`` is the forecast suite's ``w``
    (the run manifest's ``settings.credit_weight``; ignored by the decision suites, whose weight is 1/2).

    Raises:
        ValueError: an unknown suite or a negative / non-finite weight.
    """
    return get_suite(suite).metric(credit_weight)


def reference_policies() -> tuple[str, ...]:
    """The suites' reference policies, without repeats, in suite order (``("hour_of_day_empirical",
    "hour_of_day_empirical_samples")``)."""
    return tuple(dict.fromkeys(s.reference_policy for s in SUITES.values()))
