"""Policy names usable on the command line (``fwgym evaluate --policies ...``)."""
from __future__ import annotations

import unicodedata
from functools import partial
from typing import Any, Callable, Iterable

from fwgym.baselines.context import ContextAwareAgent
from fwgym.baselines.fixed import FixedMethodAgent
from fwgym.baselines.forecast import FixedForecastAgent, QuantileForecastAgent, RoutingAgent
from fwgym.baselines.oracles import MenuOracle, PerfectDemandOracle, catalog_oracle, free_menu_oracle
from fwgym.baselines.selectors import backtest_selector, lead_matched_selector
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import (EXTENDED_MODELS, NO_TSFM_MODELS, POOLS, PRICED_MODELS, STATISTICAL_MODELS,
                                        known_models)
from fwgym.suites import EXTENDED_FIXED_GROUP, EXTENDED_ORACLE_GROUP, POLICY_GROUPS, TSFM_GROUP, get_suite

__all__ = ["SELECTOR_POLICIES", "ORACLE_POLICIES", "DEFAULT_POLICIES", "TSFM_POLICIES", "EXTENDED_POLICIES",
           "policy_models", "CONTEXT_POLICIES", "FORECAST_POLICIES", "FORECAST_TASK_POLICIES", "suite_policies", "default_policies",
           "unavailable_policies", "policy_names", "make_policy", "MAX_POLICY_NAME_CHARS", "policy_name_key",
           "check_policy_name"]

_FACTORIES: dict[str, Callable[[], Any]] = {m: partial(FixedMethodAgent, m) for m in CLASSICAL_METHODS}
_FACTORIES.update({m: partial(FixedForecastAgent, m) for m in PRICED_MODELS + STATISTICAL_MODELS})
_FACTORIES["routing_reference"] = RoutingAgent
_FACTORIES["backtest_selector_4"] = lambda: backtest_selector(4)
_FACTORIES["backtest_selector_8"] = lambda: backtest_selector(8)
_FACTORIES["lead_matched_selector"] = lead_matched_selector
_FACTORIES["free_menu_oracle"] = free_menu_oracle
_FACTORIES["catalog_oracle"] = catalog_oracle
_FACTORIES["catalog_oracle_extended"] = lambda: MenuOracle("catalog", models=EXTENDED_MODELS, name="catalog_oracle_extended")
_FACTORIES["catalog_oracle_no_tsfm"] = lambda: MenuOracle("catalog", models=NO_TSFM_MODELS, name="catalog_oracle_no_tsfm")
_FACTORIES["perfect_demand"] = PerfectDemandOracle

#: backtest selectors (free, visible data only) and hindsight menu oracles, in table order
SELECTOR_POLICIES: tuple[str, ...] = ("backtest_selector_4", "backtest_selector_8", "lead_matched_selector")
ORACLE_POLICIES: tuple[str, ...] = ("free_menu_oracle", "catalog_oracle", "perfect_demand")
#: every shipped policy that declares ``requires_hindsight`` (the loop grants it the realised target)
HINDSIGHT_POLICIES: tuple[str, ...] = ORACLE_POLICIES + ("catalog_oracle_extended", "catalog_oracle_no_tsfm")

#: the main job's policies: the 8 fixed classical policies and the perfect-demand oracle
DEFAULT_POLICIES: tuple[str, ...] = tuple(CLASSICAL_METHODS) + ("perfect_demand",)
#: policies that need TSFM weights (model each one needs)
TSFM_POLICIES: dict[str, str] = {"chronos_bolt_tiny": "chronos_bolt_tiny", "chronos2": "chronos2",
                                 "timesfm25": "timesfm25", "routing_reference": "chronos2"}
#: policies of the extended pool (run them in envs made with ``models=EXTENDED_MODELS``): the fixed
#: statsmodels policies and the catalog oracle over the extended pool
EXTENDED_POLICIES: tuple[str, ...] = STATISTICAL_MODELS + ("catalog_oracle_extended",)


def policy_models(name: str) -> tuple[str, ...]:
    """The priced models a named policy may buy, i.e. what the env's ``models=`` pool must contain for
    the policy to measure what its name says (an evaluation can check this before running).

    Raises:
        ValueError: unknown policy.
    """
    if name == "catalog_oracle":
        return PRICED_MODELS
    if name == "catalog_oracle_extended":
        return EXTENDED_MODELS
    if name == "catalog_oracle_no_tsfm":
        return NO_TSFM_MODELS
    if name == "routing_reference":
        return ("chronos2",)
    if name == "seasonal_empirical_quantiles":
        return ("seasonal_empirical",)
    if name in TSFM_POLICIES or name in STATISTICAL_MODELS or name == "seasonal_empirical":
        return (name,)
    if name in _FACTORIES:
        return ()
    if name in known_models():
        return (name,)  # a plug-in's fixed policy
    raise ValueError(f"unknown policy {name!r}; known policies: {policy_names()}")


#: default policies of the forecast suite: the context policies and a bought forecast submitted as quantiles
FORECAST_POLICIES: tuple[str, ...] = get_suite("forecast").default_policies
#: the context baselines, defaults of the context and forecast suites (the text-reading baseline and the same
#: method without the text)
CONTEXT_POLICIES: tuple[str, ...] = tuple(p for p in FORECAST_POLICIES if p in get_suite("context").default_policies)
#: named policies that can play the forecast task (submit quantiles or samples); the others submit decisions
FORECAST_TASK_POLICIES: tuple[str, ...] = FORECAST_POLICIES


def suite_policies(suite: str, include_tsfm: bool = True, pool: str = "protocol") -> tuple[list[str], dict[str, str]]:
    """Default policies of an evaluation suite: its :attr:`fwgym.suites.Suite.default_policies` with the
    groups resolved.

    Args:
        suite: the suite's name (:data:`fwgym.suites.SUITES`).
        include_tsfm: :data:`~fwgym.suites.TSFM_GROUP` is the TSFM policies whose weights load in this
            process (:func:`unavailable_policies`); ``False``: none.
        pool: the env's forecast pool, ``"protocol"`` (default), ``"extended"`` or ``"no_tsfm"``
            (:data:`~fwgym.forecasters.registry.POOLS`). ``"extended"`` resolves
            :data:`~fwgym.suites.EXTENDED_FIXED_GROUP` to the fixed statsmodels policies
            (:data:`~fwgym.forecasters.registry.STATISTICAL_MODELS`) and
            :data:`~fwgym.suites.EXTENDED_ORACLE_GROUP` to ``catalog_oracle_extended`` (the protocol pool:
            to nothing; the forecast suite's defaults are the policies that submit forecasts,
            :data:`FORECAST_POLICIES`). Run them in envs made with ``models=EXTENDED_MODELS``.
            ``"no_tsfm"`` (the TSFM-access ablation) resolves :data:`~fwgym.suites.TSFM_GROUP` to nothing and
            runs ``catalog_oracle_no_tsfm`` instead of ``catalog_oracle``.

    Returns:
        ``(policies, skipped)`` as :func:`default_policies`.

    Raises:
        ValueError: unknown suite or pool.
    """
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; expected one of {list(POOLS)}")
    spec = get_suite(suite)
    tsfm = include_tsfm and pool != "no_tsfm"
    skipped = unavailable_policies(TSFM_POLICIES) if tsfm and TSFM_GROUP in spec.default_policies else {}
    groups = {TSFM_GROUP: [p for p in TSFM_POLICIES if p not in skipped] if tsfm else [],
              EXTENDED_FIXED_GROUP: list(STATISTICAL_MODELS) if pool == "extended" else [],
              EXTENDED_ORACLE_GROUP: ["catalog_oracle_extended"] if pool == "extended" else []}
    renamed = {"catalog_oracle": "catalog_oracle_no_tsfm"} if pool == "no_tsfm" else {}
    out: list[str] = []
    for entry in spec.default_policies:
        out += groups[entry] if entry in POLICY_GROUPS else [renamed.get(entry, entry)]
    return out, skipped


def default_policies(include_tsfm: bool = True) -> tuple[list[str], dict[str, str]]:
    """The main job's policy list (the rows of the paper's Table 2; the decision suite's defaults,
    :func:`suite_policies`): 8 fixed classical, fixed seasonal_empirical, the TSFM policies whose weights load in this process, the backtest selectors
    (:data:`SELECTOR_POLICIES`), the free-menu and catalog oracles and the perfect-demand oracle.

    Returns:
        ``(policies, skipped)`` with ``skipped = {policy: reason}``.
    """
    return suite_policies("decision", include_tsfm)


def unavailable_policies(policies) -> dict[str, str]:
    """The policies among ``policies`` (names) whose model is not usable in this process, as
    ``{policy: reason}``: TSFM policies (:data:`TSFM_POLICIES`) whose weights do not load, and fixed
    policies of other priced models (statsmodels, plug-ins) whose ``availability()`` says no or whose
    ``load`` fails. Such a policy still runs, but every episode falls back to the hour-of-day
    empirical plan (:class:`~fwgym.baselines.forecast.FixedForecastAgent`)."""
    from fwgym.forecasters.base import ModelUnavailable
    from fwgym.forecasters.registry import BUILTIN_MODELS, get_forecaster, plugin_spec

    out = {}
    for policy in policies:
        if not isinstance(policy, str):
            continue
        model = TSFM_POLICIES.get(policy)
        if model is None and (policy in BUILTIN_MODELS or plugin_spec(policy) is not None):
            model = policy
        if model is None:
            continue
        f = get_forecaster(model)
        try:
            if model not in TSFM_POLICIES.values():  # TSFMs: loading is the check (availability only finds the files)
                av = f.availability()
                if not av.available:
                    out[policy] = av.reason or f"{model} reports itself unavailable"
                    continue
            f.load()
        except ModelUnavailable as exc:
            out[policy] = str(exc)
    return out


_FACTORIES["context_hour_of_day_empirical"] = lambda: ContextAwareAgent(use_context=True)
_FACTORIES["hour_of_day_empirical_samples"] = lambda: ContextAwareAgent(use_context=False)
_FACTORIES["seasonal_empirical_quantiles"] = lambda: QuantileForecastAgent("seasonal_empirical")


def policy_names() -> list[str]:
    """Names accepted by :func:`make_policy`: the built-in policies, then a fixed policy
    (:class:`~fwgym.baselines.forecast.FixedForecastAgent`) per plug-in forecaster."""
    return list(_FACTORIES) + [m for m in known_models() if m not in _FACTORIES]


def make_policy(name: str):
    """A fresh agent for ``name`` (a built-in policy, or the fixed policy of a plug-in forecaster).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name in _FACTORIES:
        return _FACTORIES[name]()
    if isinstance(name, str) and name in known_models():
        return FixedForecastAgent(name)
    raise ValueError(f"unknown policy {name!r}; known policies: {policy_names()}")


#: the longest row name an agent may have (characters)
MAX_POLICY_NAME_CHARS = 100


def policy_name_key(name: str) -> str:
    """The form in which two row names are the same name: ``unicodedata.normalize("NFKC", name).casefold()``
    (so ``Perfect_Demand`` and the fullwidth ``ｐｅｒｆｅｃｔ_demand`` are ``perfect_demand``)."""
    return unicodedata.normalize("NFKC", name).casefold()


def _scripts(name: str) -> set[str]:
    """The scripts of the letters of ``name`` among those whose letters look alike (Latin, Cyrillic, Greek), from the
    Unicode character names."""
    out = set()
    for c in name:
        if c.isalpha():
            first = unicodedata.name(c, "").split(" ")[0]
            if first in ("LATIN", "CYRILLIC", "GREEK"):
                out.add(first)
    return out


def check_policy_name(name, policies: Iterable[str] = (), flag: str = "--agent-name") -> None:
    """Refuse ``name`` as the row name of an agent when it could pass for another row or break a table:
    not a string, empty, longer than :data:`MAX_POLICY_NAME_CHARS`, with a character that does not print
    (Unicode category ``C*``: controls such as a newline, format characters such as a zero-width space,
    unassigned or private-use code points), with leading or trailing whitespace, or the same name
    (:func:`policy_name_key`) as a policy of fwgym (:func:`policy_names`) or one of ``policies`` (the
    other policies of the run), or letters of two look-alike scripts (Latin with Cyrillic or Greek: ``wееkday``
    with Cyrillic ``е`` would print as a fwgym policy). ``flag``: the option that names the row in the message
    (``--policy-name`` for ``fwgym mcp serve`` and ``import-inspect``).

    Raises:
        ValueError: such a name (one line; it says what is wrong and to rename the agent, on the
            command line with ``--agent-name``).
    """
    fix = f"name the agent with {flag} NAME" + (" (or its class's name attribute)" if flag == "--agent-name" else "")
    if not isinstance(name, str) or not name:
        raise ValueError(f"the agent's policy name {name!r} is not a non-empty string: {fix}")
    if len(name) > MAX_POLICY_NAME_CHARS:
        raise ValueError(f"the agent's policy name is {len(name)} characters long (at most "
                         f"{MAX_POLICY_NAME_CHARS}): {fix}")
    hidden = sorted({f"U+{ord(c):04X} ({unicodedata.category(c)})" for c in name
                     if unicodedata.category(c).startswith("C")})
    if hidden:
        raise ValueError(f"the agent's policy name {name!r} holds characters that do not print ({', '.join(hidden)}); "
                         f"a row name must read as what it is: {fix}")
    if name != name.strip():
        raise ValueError(f"the agent's policy name {name!r} starts or ends with whitespace: {fix}")
    scripts = _scripts(name)
    if len(scripts) > 1:
        raise ValueError(f"the agent's policy name {name!r} mixes letters of the {', '.join(sorted(scripts))} scripts, "
                         f"which look alike; its row could pass for another: {fix}")
    key = policy_name_key(name)
    same = [p for p in policies if isinstance(p, str) and policy_name_key(p) == key]
    if same:
        what = "the name of another policy of this run (--policies)"
    else:
        same = [p for p in policy_names() if policy_name_key(p) == key]
        if not same:
            return
        what = "the name of a policy of fwgym (fwgym list policies)"
    if same[0] != name:
        what += f", {same[0]!r}, up to case and Unicode normalization (NFKC)"
    raise ValueError(f"the agent's policy name {name!r} is {what}; its row would pass for that policy's: {fix}")
