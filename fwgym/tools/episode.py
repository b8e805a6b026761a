"""The episode ledger: the state of one episode, its budget AND its call count (DESIGN §6).

:meth:`Episode.apply` is the one place where a call is counted, refused at the call limit, dispatched
to its handler (which may charge credits through :meth:`Episode.charge`) and found to end the episode.
The rule, with ``counts_as_call`` read from the episode's :class:`~fwgym.tools.actions.Tool` of that name:

* an invalid action (a :class:`~fwgym.errors.ToolError` from :func:`~fwgym.tools.actions.parse_action`)
  and a call of an unknown or disallowed tool count as calls of a tool that counts;
* a tool with ``counts_as_call=True`` counts, whether it succeeds or is refused;
* a tool with ``counts_as_call=False`` (``submit``, ``abstain``) does not count when accepted, and
  counts when refused (malformed arguments) like any call; an invalid plan (code ``invalid_plan``)
  instead ends the episode as ``invalid_submission`` when ``invalid_submission="terminate"``;
* at the limit (``calls >= max_calls``) a call that would count is, with ``call_limit="terminate"``
  (the protocol), counted as call ``max_calls + 1`` and ends the episode as ``call_limit_exceeded``
  without running; with ``call_limit="error"`` it is refused free (error ``call_limit``) and not
  counted. An accepted answer tool is never blocked by the limit.

Every call, run or not, is tallied in ``tool_counts`` (an invalid action as ``"invalid"``), except a
call refused at the limit in ``"error"`` mode.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

import numpy as np

from fwgym.core.cases import Case
from fwgym.core.contract import ForecastSubmission, Plan, PlanError, safe_repr
from fwgym.errors import DataIntegrityError, ToolError
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.registry import PRICED_MODELS, get_forecaster
from fwgym.core.scoring import BUDGET
from fwgym.tools.actions import Tool, ToolCall, error_result
from fwgym.tools.results import ToolResult

__all__ = ["MAX_CALLS", "TERMINATE", "ERROR", "CallOutcome", "Episode"]

#: the protocol's tool-call limit per episode (answers excluded)
MAX_CALLS = 12
#: policies for an invalid submission and for a call beyond the limit: end the episode (the protocol)
#: or answer with an error result and go on
TERMINATE, ERROR = "terminate", "error"
_POLICIES = (TERMINATE, ERROR)


class CallOutcome(NamedTuple):
    """What :meth:`Episode.apply` made of one action.

    Attributes:
        result: the tool result (:class:`~fwgym.tools.results.ToolResult`, JSON-safe); ``None`` for a call
            beyond the limit that was not run.
        charged: credits charged by this call (0 unless a priced tool ran).
        ends: ``None`` (the episode goes on) or the episode's end status: ``"submitted"``,
            ``"abstained"``, ``"invalid_submission"`` or ``"call_limit_exceeded"``.
        reason: why it ends (the abstain reason, the plan error, the limit), ``""`` otherwise.
        tool: the tool the end is attributed to (the terminal result's ``"tool"``).
    """

    result: ToolResult | None
    charged: int = 0
    ends: str | None = None
    reason: str = ""
    tool: str = ""


@dataclass
class Episode:
    """State of one episode: the case, the ledger (credits and calls) and the answer.

    Attributes:
        case: the :class:`~fwgym.core.cases.Case` being played.
        budget: credits available (default 113,726).
        max_calls: tool-call limit (default 12; accepted answers do not count).
        tools: the tools this episode allows, by name (e.g. ``{n: REGISTRY[n] for n in names}``); a
            call of any other name is an ``unknown_tool`` error.
        spent: credits charged so far (never above ``budget``; changed only by :meth:`charge`).
        calls: counted tool calls so far (changed only by :meth:`apply`).
        tool_counts: calls per tool name (``"invalid"`` for unreadable actions).
        submission: the accepted answer, once submitted.
        abstain_reason: the agent's reason, once it abstained.
        task: ``"decision"`` or ``"forecast"`` (what ``submit`` accepts).
        scenario: the context scenario of the case, or ``None``.
        models: the priced forecast pool.
        forecast_timeout: seconds a non-bounded forecast may take (``None``: no limit).
        call_limit, invalid_submission: ``"terminate"`` (protocol) or ``"error"`` (see the module docstring).
        forecasters: ``{model: QuantileForecaster}`` serving the pool (the env gives one for every model of
            ``models``: its overrides, else the process-wide instances); a model without one is served by the
            process-wide instance.
        forecast_store: the :class:`~fwgym.forecasters.store.ForecastStore` the priced tools read
            (``None``: the process-wide one of :func:`~fwgym.forecasters.store.use_store`, if any).
        forecasts: bought forecasts by id (``"f1"``, ...): model, horizon, context_steps, quantiles, and
            ``plan`` once a tool planned on it (:func:`fwgym.tools.planning.forecast_plan`).
        plans: classical plans looked up in this episode, by method.
    """

    case: Case
    budget: int = BUDGET
    max_calls: int = MAX_CALLS
    tools: Mapping[str, Tool] = field(default_factory=dict)
    spent: int = 0
    calls: int = 0
    tool_counts: Counter = field(default_factory=Counter)
    submission: Plan | ForecastSubmission | None = None
    abstain_reason: str | None = None
    task: str = "decision"
    scenario: Any = None
    models: tuple[str, ...] = PRICED_MODELS
    forecast_timeout: float | None = None
    call_limit: str = TERMINATE
    invalid_submission: str = TERMINATE
    forecasters: dict = field(default_factory=dict, repr=False)
    forecast_store: Any = field(default=None, repr=False)
    forecasts: dict = field(default_factory=dict, repr=False)
    plans: dict = field(default_factory=dict, repr=False)
    _target: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        if type(self.tools) not in (dict, MappingProxyType) and not isinstance(self.tools, Mapping):  # cheap first
            raise TypeError(f"tools must map names to Tool objects, e.g. {{n: REGISTRY[n] for n in names}}, "
                            f"got {type(self.tools).__name__}")
        if self.call_limit not in _POLICIES or self.invalid_submission not in _POLICIES:
            raise ValueError(f"call_limit and invalid_submission must be {TERMINATE!r} or {ERROR!r}, "
                             f"got {self.call_limit!r} and {self.invalid_submission!r}")

    # -- the ledger ----------------------------------------------------------------------------

    @property
    def budget_left(self) -> int:
        return self.budget - self.spent

    @property
    def calls_left(self) -> int:
        return max(0, self.max_calls - self.calls)

    def charge(self, credits: int) -> None:
        """Debit the ledger; the caller has checked affordability (spent never exceeds the budget)."""
        if credits < 0 or self.spent + credits > self.budget:
            raise AssertionError("ledger invariant violated")  # pragma: no cover - guarded by callers
        self.spent += int(credits)

    def apply(self, call: ToolCall | ToolError) -> CallOutcome:
        """Count, run and account one parsed action (the rule of the module docstring); never raises
        for agent input.

        Args:
            call: what :func:`~fwgym.tools.actions.parse_action` made of the agent's action.

        Returns:
            the :class:`CallOutcome`: the result, the credits charged and whether (and why) the episode ends.

        Raises:
            fwgym.errors.DataIntegrityError: a packaged file the handler read (the extended tariff, sigma,
                a data file) failed its check; never an error result, never counted as the agent's call.
        """
        name, tool = ("invalid", None) if isinstance(call, ToolError) else (call.tool, self.tools.get(call.tool))
        counts = tool is None or tool.counts_as_call
        if counts and self.calls >= self.max_calls:
            return self._over_limit(name, None)
        self.tool_counts[name] += 1
        spent_before = self.spent
        result = self._run(call, tool)
        if not counts and not result["ok"]:  # a refused answer is a call like any other
            if result["error"]["code"] == "invalid_plan" and self.invalid_submission == TERMINATE:
                return CallOutcome(result, ends="invalid_submission", reason=result["error"]["message"], tool=name)
            if self.calls >= self.max_calls:
                return self._over_limit(name, result)
            counts = True
        if counts:
            self.calls += 1
        charged = self.spent - spent_before
        if self.abstain_reason is not None:
            return CallOutcome(result, charged, "abstained", self.abstain_reason, "abstain")
        if self.submission is not None:
            return CallOutcome(result, charged, "submitted", "", "submit")
        return CallOutcome(result, charged)

    def _over_limit(self, name: str, refused: ToolResult | None) -> CallOutcome:
        """A call that would count beyond the limit: with ``call_limit="terminate"`` it is call
        ``max_calls + 1`` and ends the episode; with ``"error"`` it is refused free and not counted.
        ``refused``: the error result of an answer tool that ran and was refused (``None``: not run)."""
        if self.call_limit == ERROR:
            return CallOutcome(refused if refused is not None else {"tool": name, "ok": False, "error": {
                "code": "call_limit",
                "message": f"the limit of {self.max_calls} tool calls is reached; only submit and abstain are accepted"}})
        if refused is None:
            self.tool_counts[name] += 1
        self.calls += 1
        why = "" if refused is None else f" (a refused {name}: {refused['error']['code']})"
        return CallOutcome(refused, ends="call_limit_exceeded", tool=name,
                           reason=f"call {self.calls}{why} exceeds the limit of {self.max_calls} tool calls")

    def _run(self, call: ToolCall | ToolError, tool: Tool | None) -> ToolResult:
        """The result of a call: an invalid action's or an unknown tool's error, or the handler's
        result; every refusal or failure of a handler becomes an error result, except a
        :class:`~fwgym.errors.DataIntegrityError` (a packaged file failed its check), which propagates."""
        if isinstance(call, ToolError):
            return error_result("invalid", call)
        if tool is None:
            return error_result(call.tool, ToolError("unknown_tool", f"unknown tool {safe_repr(call.tool, 60)}; "
                                                                     f"available tools: {list(self.tools)}"))
        try:
            return {"tool": tool.name, "ok": True, "result": tool.handler(self, call.args)}
        except ToolError as exc:
            return error_result(tool.name, exc)
        except PlanError as exc:
            return error_result(tool.name, ToolError("invalid_plan", f"{exc.code}: {exc.message}"))
        except DataIntegrityError:  # a corrupted install is never an agent's result, nor scored: it propagates
            raise
        except Exception as exc:  # a tool must never crash the episode
            return error_result(tool.name, ToolError(
                "internal_error", f"{tool.name} failed unexpectedly: {type(exc).__name__}: {str(exc)[:300]}"))

    # -- episode state the handlers share -------------------------------------------------------

    def forecaster(self, model: str) -> QuantileForecaster:
        """The forecaster serving ``model`` in this episode (env override or the process-wide one)."""
        return self.forecasters.get(model) or get_forecaster(model)

    def target(self) -> np.ndarray:
        """HINDSIGHT (scorer only; no tool calls it): the realised target, transformed by the scenario
        if any, float64 (24,)."""
        if self._target is None:
            from fwgym.core.scorer import realised_target

            self._target = realised_target(self.case, self.scenario)
        return self._target
