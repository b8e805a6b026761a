"""Coded errors shown to agents (DESIGN §6): every refusal an agent sees is one of these.

An agent-facing error carries a stable machine-readable ``code`` (``"invalid_arguments"``,
``"insufficient_budget"``, ``"invalid_plan"``, ...) and a ``message`` addressed to the agent, at most
:data:`MAX_MESSAGE_CHARS` characters. The tools turn them into results
``{"tool": NAME, "ok": false, "error": {"code": ..., "message": ...}}``; they never escape ``env.step``.

Programmer errors (a bad constructor argument, a bad data file) stay ``ValueError`` / ``TypeError``.

A packaged data file that fails its check is not agent-facing either: :class:`DataIntegrityError`
(raised by :mod:`fwgym.data`, :mod:`fwgym.core.scoring` and :mod:`fwgym.core.tariff` when ``sigma.json``, the
balancing-authority CSVs, a Parquet file or ``tariff_extended.json`` is missing, altered or malformed)
propagates out of ``env.reset`` / ``env.step`` as the exception it is: no tool turns it into a result,
no episode is scored on a corrupted install.

Infrastructure failures are not agent-facing: :class:`HarnessError` (raised by an agent's harness,
e.g. an LLM endpoint that cannot be reached) ends an episode with status ``"harness_error"``, which is
never scored (DESIGN §9, trust).

Subclasses elsewhere: :class:`fwgym.core.contract.PlanError` (an invalid plan or forecast submission) and
:class:`fwgym.agents.chat.parsing.AnswerError` (a chat reply that cannot be used).
"""
from __future__ import annotations

__all__ = ["MAX_MESSAGE_CHARS", "CodedError", "ToolError", "HarnessError", "DataIntegrityError", "HARNESS_ERROR",
           "AGENT_ERROR_PREFIX"]

#: record ``status`` of an episode ended by a :class:`HarnessError` (never scored)
HARNESS_ERROR = "harness_error"
#: record ``reason`` prefix of an episode ended by an agent's exception that is not a :class:`HarnessError`
#: (a bug in the agent: the episode is the agent's failure, scored invalid)
AGENT_ERROR_PREFIX = "agent_error: "
#: longest message of an agent-facing error (messages quote agent input, which is capped too)
MAX_MESSAGE_CHARS = 2000


class CodedError(Exception):
    """Base of fwgym's agent-facing errors: a stable machine-readable ``code`` and a ``message``
    (at most :data:`MAX_MESSAGE_CHARS` characters)."""

    def __init__(self, code: str, message: str):
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 14] + "...[truncated]"
        super().__init__(message)
        self.code = code
        self.message = message


class ToolError(CodedError):
    """A refused or failed tool call; becomes ``{"error": {"code", "message"}}`` in the result."""


class HarnessError(RuntimeError):
    """An infrastructure failure that is not the agent's doing: the agent's backend could not be
    reached or did not answer usably (transport errors, timeouts, HTTP 5xx/429 after the retries, a
    body that is not JSON, a request the server refuses for a reason that is not the model's).

    Raised from an agent's ``act`` or ``reset``; :func:`fwgym.agents.run_episode` ends the episode with
    status ``"harness_error"``, which is never scored, never enters a leaderboard, and is rerun by
    ``fwgym evaluate --resume``.

    Attributes:
        kind: a short machine-readable cause (``"transport"``, ``"timeout"``, ``"http_5xx"``,
            ``"rate_limited"``, ``"bad_response"``, ``"auth"``, ...).
    """

    def __init__(self, message: str, kind: str = "infrastructure"):
        super().__init__(message)
        self.kind = str(kind)


class DataIntegrityError(RuntimeError):
    """A shipped data file is missing, altered, truncated or malformed. The message names the file.

    Never agent-facing and never scored: the tools let it through (``env.reset`` / ``env.step`` raise
    it), :func:`fwgym.agents.run_episode` does not turn it into an agent's failure, and ``fwgym``
    reports it as one line ``fwgym: error: ...`` (exit 2). Also importable as ``fwgym.data.DataIntegrityError``.
    """
