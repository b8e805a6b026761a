"""The JSON shapes of what the tools return (DESIGN §6), named once for the writers, the readers and the checks.

* :class:`ToolResult`: the envelope of every tool call's result, what :meth:`fwgym.tools.Episode.apply` returns
  (:class:`~fwgym.tools.episode.CallOutcome`), the env puts into ``info["tool_result"]`` and, as JSON text
  (:func:`fwgym.tools.actions.result_json`), into the ``last_result`` observation; the env's terminal result
  (``{"status"}`` or the end's error) has the same shape. Agents read it back from that text
  (:class:`fwgym.rl.tracker.EpisodeTracker`, the baselines), traces store it per step
  (:class:`fwgym.traces.TraceStep`).
* :class:`Catalog`: the ``result`` of a successful ``catalog`` call (:func:`fwgym.tools.info.catalog`), read by
  :meth:`fwgym.rl.tracker.CaseMeta.from_catalog` (the RL features and the router agent), the context baseline
  and the chat prompts' compact results (:func:`fwgym.agents.chat.prompts.compact_result`).

These are :class:`typing.TypedDict` classes: the values stay plain ``dict`` (JSON-ready); the classes are
what mypy holds the code to (``tests/tools/test_tool_results.py`` holds the handlers' output to them at run
time). The other tools' ``result`` bodies are ``dict[str, Any]`` (their fields are listed in
:mod:`fwgym.tools.registry`'s descriptions and the handlers' docstrings).
"""
# no ``from __future__ import annotations``: the TypedDicts' required and optional keys are read at run time
from typing import Any, Mapping, NotRequired, TypedDict

from fwgym.core.cases import CaseSummary

__all__ = ["ToolErrorInfo", "ToolResult", "Catalog", "CatalogBlock", "CatalogContract", "CatalogModel",
           "CatalogBudget", "CatalogCalls"]


class ToolErrorInfo(TypedDict):
    """Why a call was refused or failed (the ``error`` of a :class:`ToolResult`)."""

    #: machine-readable code, e.g. ``invalid_arguments``, ``insufficient_budget``, ``model_unavailable``,
    #: ``backend_error``; the env's terminal codes ``invalid_submission``, ``call_limit_exceeded``, ``abstained``
    code: str
    #: one line for the agent (what is wrong, and whether anything was charged)
    message: str


class ToolResult(TypedDict):
    """The result of one tool call: ``{"tool", "ok": true, "result": {...}}`` or ``{"tool", "ok": false,
    "error": {"code", "message"}}`` (exactly one of ``result`` and ``error``)."""

    #: the tool that ran (``"invalid"`` for an unreadable action; an unknown name cut to 60 characters)
    tool: str
    #: the call succeeded (``result`` present) or was refused (``error`` present)
    ok: bool
    #: the handler's JSON body (for ``catalog``: a :class:`Catalog`); the terminal result of an accepted answer: ``{"status"}``
    result: NotRequired[Mapping[str, Any]]
    #: why the call was refused or failed
    error: NotRequired[ToolErrorInfo]


class CatalogBlock(TypedDict):
    """One 3-hour block of the contract: its decision id and its hours (ISO UTC, ``end`` exclusive)."""

    decision_id: str
    start: str
    end: str


class CatalogContract(TypedDict):
    """The contract of the case (DESIGN §3) in the catalog."""

    #: the 8 blocks b00..b07 of the target day
    blocks: list[CatalogBlock]
    #: s, the mean of the visible history (raw units); physical capacity = s x level
    scale: float
    #: the 33 grid levels 0.40..2.00 as agents write them
    normalised_grid: list[float]
    #: the grid in physical units (s x level)
    capacity_grid: list[float]
    #: the series' unit (MW, departures/hour)
    unit: str
    #: the largest change between adjacent blocks (normalised)
    ramp: float
    #: alpha, the surplus price per normalised unit
    surplus_price: float
    #: w_h for the 24 target hours
    shortage_weights: list[float]
    #: the decision loss in words
    loss: str


class CatalogModel(TypedDict):
    """One model of the env's forecast pool in the catalog."""

    model: str
    #: the forecaster reports itself available (weights found, backend importable)
    available: bool
    quantile_levels: list[float]
    #: the smallest ``context_steps`` it accepts
    min_context: int
    #: credits of the full-context (336) request with the minimal covering horizon
    credits_full_context_covering_horizon: int
    #: those credits are within the budget left
    affordable: bool
    #: why it is unavailable (only when ``available`` is false)
    unavailable_reason: NotRequired[str]
    #: a caveat on the model (chronos_bolt_tiny's native horizon)
    note: NotRequired[str]


class CatalogBudget(TypedDict):
    """Credits of the episode (the catalog's ``budget``)."""

    budget: int
    spent: int
    remaining: int


class CatalogCalls(TypedDict):
    """Tool calls of the episode (the catalog's ``calls``)."""

    limit: int
    used: int
    remaining: int


class Catalog(TypedDict):
    """The ``result`` of a ``catalog`` call: the case, its contract, the free methods, the tariff, the pool, the
    ledger and the tools (:func:`fwgym.tools.info.catalog`)."""

    #: :meth:`fwgym.core.cases.Case.summary`
    case: CaseSummary
    contract: CatalogContract
    #: the free classical methods (``classical_plan`` / ``plan`` / ``evaluate_plan`` ``method``)
    methods: list[str]
    #: ``{model: {context bucket as str: [credits per horizon bucket 24/64/96/192/240/336]}}``: the protocol's
    #: table, then every pool model outside it
    tariff: dict[str, dict[str, list[int]]]
    #: the env's forecast pool, in pool order
    models: list[CatalogModel]
    budget: CatalogBudget
    calls: CatalogCalls
    #: the tools this env allows (``submit`` and ``abstain`` included)
    tools: list[str]
    #: ``"decision"`` or ``"forecast"``
    task: str
