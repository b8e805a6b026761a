"""The action vocabulary of every fwgym environment (DESIGN §6): tool calls, their handlers and the
episode ledger.

An action is one JSON tool call ``{"tool": NAME, "args": {...}}`` (a string or a dict);
:func:`parse_action` turns it into a :class:`ToolCall` or a :class:`ToolError` (never raises), and
:meth:`Episode.apply` counts it, runs it and charges it, returning a :class:`CallOutcome` whose
result is ``{"tool": NAME, "ok": true, "result": {...}}`` or ``{"tool": NAME, "ok": false,
"error": {"code", "message"}}`` (a :class:`ToolResult`).

Every call except an accepted ``submit`` or ``abstain`` counts toward the call limit, errors included.
A packaged file that fails its check (:class:`~fwgym.errors.DataIntegrityError`) is never a result:
it propagates out of :meth:`Episode.apply` (and ``env.step``), so no episode is scored on a corrupted install.
Nothing in a result ever carries a value at or after ``as_of - 2 h``: the tools read only the visible
window of the case.

Modules: :mod:`~fwgym.tools.actions` (grammar and argument checks, the Tool type, result format), :mod:`~fwgym.tools.results`
(the JSON shapes of results: :class:`ToolResult`, :class:`Catalog`), :mod:`~fwgym.tools.episode`
(the ledger: budget and call counting), :mod:`~fwgym.tools.registry` (the tools and their JSON
schemas), and the handlers by family: :mod:`~fwgym.tools.info` (catalog, history), :mod:`~fwgym.tools.planning`
(classical_plan, plan, evaluate_plan; plans read from and written to JSON; the plan caches), :mod:`~fwgym.tools.purchase` (quote, forecast,
replay; the purchase rule), :mod:`~fwgym.tools.answer` (submit, abstain).
"""
from fwgym.errors import ToolError
from fwgym.tools.actions import MAX_ACTION_CHARS, Tool, ToolCall, error_result, loads_strict, parse_action, result_json
from fwgym.tools.episode import ERROR, MAX_CALLS, TERMINATE, CallOutcome, Episode
from fwgym.tools.planning import classical_plan_result, plan_payload
from fwgym.tools.purchase import rounded_lists
from fwgym.tools.registry import ANSWER_TOOLS, DEFAULT_TOOLS, REGISTRY
from fwgym.tools.results import Catalog, ToolErrorInfo, ToolResult

__all__ = [
    "ToolError", "MAX_ACTION_CHARS", "Tool", "ToolCall", "error_result", "loads_strict", "parse_action", "result_json",
    "ERROR", "MAX_CALLS", "TERMINATE", "CallOutcome", "Episode", "classical_plan_result", "plan_payload",
    "rounded_lists", "ANSWER_TOOLS", "DEFAULT_TOOLS", "REGISTRY", "ToolResult", "ToolErrorInfo", "Catalog",
]
