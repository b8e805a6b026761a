"""Answer tools: ``submit`` (the final plan or forecast) and ``abstain`` (end without an answer).

A handler only validates and records the answer on the episode (``ep.submission`` /
``ep.abstain_reason``); the episode ledger (:meth:`fwgym.tools.episode.Episode.apply`) then reports
that the episode ends, and the env scores it.
"""
from __future__ import annotations

from fwgym.core.contract import validate_forecast
from fwgym.errors import ToolError
from fwgym.tools.actions import check_keys
from fwgym.tools.episode import Episode
from fwgym.tools.planning import plan_from_args

__all__ = ["submit", "abstain"]


def submit(ep: Episode, args: dict) -> dict:
    """``submit``: a plan (``decisions`` or ``levels``) in decision envs; ``quantiles`` (24 x 9) or
    ``samples`` (n x 24) in forecast envs. An invalid one raises :class:`~fwgym.core.contract.PlanError`."""
    if ep.task == "forecast":
        check_keys(args, {"quantiles", "samples"}, "submit")
        if ("quantiles" in args) == ("samples" in args):
            raise ToolError("invalid_arguments", "submit: give exactly one of 'quantiles' (24 rows of 9) or 'samples' (rows of 24)")
        ep.submission = validate_forecast(args, ep.case.scale)
        return {"accepted": True, "kind": ep.submission.kind}
    check_keys(args, {"decisions", "levels"}, "submit")
    ep.submission = plan_from_args(ep.case, args, "submit")
    return {"accepted": True, "kind": "plan"}  # the env ends the episode and returns its terminal result instead


def abstain(ep: Episode, args: dict) -> dict:
    """``abstain``: end the episode without an answer (scored invalid), recording the agent's reason."""
    check_keys(args, {"reason"}, "abstain")
    reason = args.get("reason", "")
    if not isinstance(reason, str):
        raise ToolError("invalid_arguments", "abstain: 'reason' must be a string")
    ep.abstain_reason = reason[:500] or "no reason given"
    return {"abstained": True}
