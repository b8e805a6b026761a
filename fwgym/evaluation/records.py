"""The result record: the ONE schema of an episode's outcome, and what makes a set of records comparable.

A record is a plain ``dict`` (JSON-ready) typed by :class:`Record`. Its life:
the env's terminal ``info`` (:meth:`fwgym.envs.fwbench.FWBenchEnv.step` at termination; its keys are
:data:`ENV_FIELDS` plus the step's ``tool_result``) -> :func:`fwgym.agents.run_episode` adds ``policy``
and drops ``tool_result`` -> :func:`fwgym.evaluation.evaluate` -> ``results.jsonl``
(:mod:`fwgym.evaluation.results`, every field of :data:`RECORD_FIELDS` the record has) -> the
leaderboard, plots and report. Every field is named once, below, with its type and meaning; the field
lists of the package are derived from these classes (``tests/evaluation/test_records.py`` holds the
env and the loop to them).

Field groups (TypedDicts, combined by inheritance into :class:`Record`):

* :class:`AgentFields` (``policy``) and :class:`CaseFields` (which case): the record's key is
  ``(policy, case_id)``; the case fields carry the aggregation weights' groups
  (:func:`fwgym.core.scoring.case_weights`).
* :class:`ScoreFields`: the score and the ledger. With the two above they are :data:`CORE_FIELDS`, the
  fields every results file holds (all that results files of fwgym 0.1.0 hold).
* :class:`DetailFields`: the rest of every env's terminal info (results files hold them since the
  forecast fields were kept; files without them are still read).
* :class:`ForecastTaskFields`: only forecast-task envs (``task="forecast"``) emit these.
* :class:`RunFields` (``episode_id``, ``scored``, ``harness_kind``, ``tool_calls``), :class:`AccountingFields`
  (tokens, turns, requests, latencies, wall time: the agent's ``episode_stats()``) and
  :class:`ResourceFields` (the episode's wall and CPU seconds, peak RSS and PSS): added by
  :func:`fwgym.agents.run_episode`.
* :class:`EvaluationFields` (``exposed``): added by :func:`fwgym.evaluation.evaluate` (optional: records
  of other writers and older files lack it, read as ``False``).

A record with ``status == "harness_error"`` (``scored`` False) is not an outcome of the env: its agent's
infrastructure failed (:class:`fwgym.errors.HarnessError`), so it has no score (loss, floor, R, S are
``None``), never enters an aggregate and is rerun by ``fwgym evaluate --resume``.

This module imports nothing of fwgym above :mod:`fwgym.core.cases` and :mod:`fwgym.errors` (the split index of
:func:`check_result_set`).
"""
# no ``from __future__ import annotations``: the TypedDicts' annotations are read at run time
import typing
from collections import defaultdict
from typing import Annotated, Any, Iterable, Mapping, Sequence, TypedDict

from fwgym.core.cases import build_cases
from fwgym.errors import AGENT_ERROR_PREFIX, HARNESS_ERROR

__all__ = ["Record", "AgentFields", "CaseFields", "ScoreFields", "DetailFields", "ForecastTaskFields",
           "EpisodeOutcome", "RunFields", "AccountingFields", "ResourceFields", "PurchasedForecastCRPS", "RECORD_FIELDS",
           "ENV_FIELDS", "CORE_FIELDS", "FORECAST_TASK_FIELDS", "RUN_FIELDS", "ACCOUNTING_FIELDS", "RESOURCE_FIELDS",
           "EVALUATION_FIELDS", "SCORE_VALUE_FIELDS", "VOLATILE_FIELDS", "stable_record",
           "HARNESS_ERROR", "AGENT_ERROR_PREFIX", "FIELD_MEANINGS", "is_scored", "check_record", "stored_record", "by_policy",
           "split_index", "check_result_set", "coverage"]


class PurchasedForecastCRPS(TypedDict):
    """Score of one purchased forecast over the target window (a value of ``forecast_crps``)."""

    model: Annotated[str, "the forecast model that was bought (e.g. seasonal_empirical, chronos2)"]
    crps: Annotated[float, "mean over the 24 target hours of the CRPS of its 9 quantiles as equally weighted "
                           "atoms (raw units: MW or departures/hour; the rule of quantile submissions, "
                           "fwgym.core.scoring.score_forecast)"]
    crps_scaled: Annotated[float, "crps divided by the case's scale s (mean of the visible history)"]


class AgentFields(TypedDict):
    """Who played the episode (added by :func:`fwgym.agents.run_episode`)."""

    policy: Annotated[str, "row name of the leaderboard: the agent's name attribute, else its class name"]


class CaseFields(TypedDict):
    """Which case (from :class:`fwgym.core.cases.Case`); ``(policy, case_id)`` is the record's key."""

    case_id: Annotated[str, "stable case id naming the target date, e.g. elec-ISNE-2024-07-25-day_ahead"]
    domain: Annotated[str, "electricity or cycle_hire"]
    cohort: Annotated[str, "aggregation cohort, e.g. electricity-july (DESIGN §2: equal shares inside a domain)"]
    series_id: Annotated[str, "EIA balancing-authority code (e.g. ISNE) or TfL station id (e.g. 191): the "
                              "bootstrap's cluster"]
    lead: Annotated[str, "day_ahead or week_ahead"]
    split: Annotated[str, "train, dev, test or sealed (fwgym.core.cases.SPLITS)"]


class ScoreFields(TypedDict):
    """The episode's score and ledger (DESIGN §3, §5; forecast envs §8)."""

    loss: Annotated[float | None, "decision envs: realised decision loss l(a, z) of the submitted plan, in units of "
                                  "the scale (an invalid plan: mean_h max_g cost + 1); forecast envs: the uncapped "
                                  "RCRPS; None when not scored (status harness_error)"]
    floor: Annotated[float | None, "decision envs: perfect-demand floor F (the same optimizer on the realised "
                                   "demand); forecast envs: 0.0; None when not scored"]
    R: Annotated[float | None, "decision envs: (loss - floor) / sigma_d; forecast envs: min(RCRPS, 5); None when "
                               "not scored"]
    S: Annotated[float | None, "the case score (lower is better): decision envs 0.5 * (R + credits / B); forecast "
                               "envs R + credit_weight * credits / B (B: the episode budget, 113,726 by default); None "
                               "when not scored"]
    credits: Annotated[int, "credits charged in the episode"]
    calls: Annotated[int, "tool calls counted toward the call limit (an accepted submit or abstain is not counted)"]
    valid: Annotated[bool, "the episode ended with an accepted submission"]
    status: Annotated[str, "how it ended: submitted, invalid_submission, abstained or call_limit_exceeded (the env's "
                           "endings, scored), or harness_error (the agent's infrastructure failed: not scored, rerun "
                           "by fwgym evaluate --resume)"]
    reason: Annotated[str, "why an invalid episode is invalid (the refusal message or the agent's abstain reason; "
                           "'agent_error: Type: message' when the agent raised), or the harness error's message; "
                           "empty when submitted"]
    tool_counts: Annotated[dict[str, int], "actions per tool name, submit and abstain included; 'invalid' counts "
                                           "actions that did not parse as a tool call"]
    levels: Annotated[list[float] | None, "the 8 normalised grid levels of the submitted plan (capacity = scale x "
                                          "level, blocks b00..b07); None for an invalid episode and in forecast envs"]


class DetailFields(TypedDict):
    """The rest of every env's terminal info."""

    submission: Annotated[dict | None, "forecast envs: the accepted forecast, {'kind': 'quantiles' (24 rows of 9, "
                                       "levels 0.1..0.9) or 'samples' (n rows of 24), 'values': [[...]]} in raw units "
                                       "(what the verifier re-scores); None in decision envs (the plan is levels) and "
                                       "without an accepted answer"]
    budget_left: Annotated[int, "credits left at the end (budget - credits)"]
    scenario: Annotated[str | None, "scenario family of the case's context (context and forecast suites), else None"]
    context_types: Annotated[list[str] | None, "Context is Key context types the note needs (c_i, c_h, c_cov, c_f, "
                                               "c_causal); None without a scenario"]
    skills: Annotated[list[str] | None, "Context is Key skill tags of the note (e.g. 'reasoning: causal'); None "
                                        "without a scenario"]
    skeleton: Annotated[str | None, "the note's skeleton id (family/pool/core<k>/<register>; pool seen on train and "
                                    "dev, held_out elsewhere); None without a scenario"]
    forecast_crps: Annotated[dict[str, PurchasedForecastCRPS], "{forecast_id: score} of every purchased forecast "
                                                               "whose horizon covers the target window; {} if none"]


class ForecastTaskFields(TypedDict, total=False):
    """Emitted by forecast-task envs only (``task="forecast"``, DESIGN §8)."""

    rcrps: Annotated[float, "RCRPS of the submitted forecast, uncapped (= loss); an invalid forecast scores the "
                            "cap 5"]
    crps: Annotated[float | None, "mean over the 24 target hours of the CRPS of the submitted forecast (raw units); "
                                  "None for an invalid forecast"]
    alpha: Annotated[float, "the RCRPS scale alpha of the series (1 / mean target range of held-out instances)"]
    rcrps_no_violation: Annotated[float, "the same RCRPS without its bound-violation term (alpha times the "
                                         "RoI-weighted CRPS alone; = rcrps when no path violates a bound), "
                                         "uncapped; an invalid forecast scores the cap 5"]
    rcrps_fair: Annotated[float | None, "the same RCRPS with CiK's fair (PWM) estimator, uncapped: comparable to "
                                        "CiK's published numbers for independent model draws (the direct prompt's "
                                        "samples); never the score (chosen samples game it); None for quantiles, "
                                        "invalid forecasts and records without it"]


class EpisodeOutcome(CaseFields, ScoreFields, DetailFields, ForecastTaskFields):
    """The env's terminal ``info`` without ``tool_result`` (what :class:`fwgym.envs.fwbench.FWBenchEnv` emits)."""


class ToolCall(TypedDict):
    """One action of an episode as its record stores it."""

    action: Annotated[Any, "the action as the env received it: a JSON text as is, a dict as its JSON value"]
    result_hash: Annotated[str, "first 16 hex digits of the sha256 of the tool result's JSON text (the "
                                "observation's last_result after the action)"]


class EvaluationFields(TypedDict, total=False):
    """Added by :func:`fwgym.evaluation.evaluate` (absent in records of other writers: read as ``False``)."""

    exposed: Annotated[bool, "a prompt holding this case's target hours had been sent to an agent of the run "
                             "before this episode began (a replay by --resume after a harness_error or a kill): "
                             "its score may use the answer; flagged in every table, refused on the sealed split"]


class RunFields(TypedDict):
    """Added by :func:`fwgym.agents.run_episode`: the episode's identity in its run and whether it was scored."""

    episode_id: Annotated[str | None, "the episode's id in its run (the runner's; the same id is in the reset info "
                                      "the agent gets and in the agent's trace line): '<session>:<policy>:<case_id>'; "
                                      "None outside a run"]
    scored: Annotated[bool, "the env scored the episode (False only for status harness_error: no loss, floor, R or "
                            "S; never aggregated)"]
    harness_kind: Annotated[str | None, "status harness_error: the failure's kind (HarnessError.kind: transport, "
                                        "timeout, http_5xx, rate_limited, bad_response, auth, ...); else None"]
    tool_calls: Annotated[list[ToolCall], "every action the env received, in order ({'action', 'result_hash'}; "
                                          "fwgym.agents.base.tool_call_entry): what fwgym verify --replay re-executes "
                                          "through a fresh env"]


class AccountingFields(TypedDict):
    """What the episode cost the agent's backend (from the agent's ``episode_stats()``; None for agents
    without it, e.g. baselines and oracles)."""

    prompt_tokens: Annotated[int | None, "prompt tokens summed over the episode's model requests (the server's usage), "
                                         "failed attempts included"]
    completion_tokens: Annotated[int | None, "completion tokens summed over the episode's model requests, failed "
                                             "attempts included"]
    failed_tokens: Annotated[int | None, "of prompt_tokens + completion_tokens, those the server reported for attempts "
                                         "whose reply was not used (an error response, retried or final; a body "
                                         "refused as bad_response); 0 when none (an attempt cut by the deadline "
                                         "reports none)"]
    model_turns: Annotated[int | None, "model replies the episode used"]
    requests: Annotated[int | None, "HTTP (or local generate) requests sent, retries included"]
    request_latency_s: Annotated[list[float] | None, "wall seconds of each request, in order"]
    wall_s: Annotated[float | None, "wall seconds of the episode on the agent's side (first act to the end)"]
    served_model: Annotated[str | None, "the model name a server reply reported when it was not the model the agent "
                                        "asked for (the first such name of the episode; a warning is printed once); "
                                        "None when every reply named the requested model"]


class ResourceFields(TypedDict):
    """What the episode cost the machine, measured by :func:`fwgym.agents.run_episode` around every
    episode (:mod:`fwgym.agents.resources`): the evaluating process plus an isolated agent's worker process."""

    episode_wall_s: Annotated[float | None, "wall seconds of the episode in the episode loop (env.reset to the record: "
                                            "the agent's calls and the env's steps)"]
    cpu_s: Annotated[float | None, "CPU seconds (user + system, every thread) of the evaluating process and of the "
                                   "agent's worker process during the episode (shared by the episodes in flight with "
                                   "--concurrency > 1); None where unknown"]
    peak_rss_mib: Annotated[float | None, "peak resident set size (MiB) during the episode, processes summed (Linux: "
                                          "VmHWM reset at the episode's start; elsewhere the process's peak so far)"]
    pss_mib: Annotated[float | None, "proportional set size (MiB) at the end of the episode, processes summed (Linux "
                                     "smaps_rollup; read for episodes of >= 0.5 s only, else None)"]


class Record(AgentFields, EpisodeOutcome, RunFields, AccountingFields, ResourceFields, EvaluationFields):
    """One episode's result: one line of ``results.jsonl``, one input row of the leaderboard.

    Fields (type: meaning):
    """


#: every field of a record, in schema order
RECORD_FIELDS: tuple[str, ...] = tuple(Record.__annotations__)
#: the fields of the env's terminal info (``tool_result`` aside)
ENV_FIELDS: tuple[str, ...] = tuple(EpisodeOutcome.__annotations__)
#: the fields every results file holds: reading requires them (files of fwgym 0.1.0 hold exactly these)
CORE_FIELDS: tuple[str, ...] = (*AgentFields.__annotations__, *CaseFields.__annotations__,
                                *ScoreFields.__annotations__)
#: the fields only forecast-task envs emit
FORECAST_TASK_FIELDS: tuple[str, ...] = tuple(ForecastTaskFields.__annotations__)
#: the fields :func:`fwgym.agents.run_episode` adds to the env's outcome (besides ``policy``)
RUN_FIELDS: tuple[str, ...] = tuple(RunFields.__annotations__)
#: the fields :func:`fwgym.evaluation.evaluate` adds (optional in a record)
EVALUATION_FIELDS: tuple[str, ...] = tuple(EvaluationFields.__annotations__)
#: the keys of an agent's ``episode_stats()`` (:mod:`fwgym.agents.base`), stored as record fields
ACCOUNTING_FIELDS: tuple[str, ...] = tuple(AccountingFields.__annotations__)
#: the fields of the episode's resource profile (:data:`fwgym.agents.base.RESOURCE_KEYS`)
RESOURCE_FIELDS: tuple[str, ...] = tuple(ResourceFields.__annotations__)
#: the fields that differ between identical runs: measured times and memory (what is compared across runs is
#: every other field; :func:`stable_record`)
VOLATILE_FIELDS: tuple[str, ...] = ("wall_s", "request_latency_s", *RESOURCE_FIELDS)
#: score fields re-computed by the verifier (:mod:`fwgym.evaluation.verify`)
SCORE_VALUE_FIELDS: tuple[str, ...] = ("loss", "floor", "R", "S")



def _type_text(tp: Any) -> str:
    if typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp).replace("typing.", "")


_HINTS = typing.get_type_hints(Record, include_extras=True)
#: ``{field: meaning}`` for every field of :class:`Record`
FIELD_MEANINGS: dict[str, str] = {name: typing.get_args(_HINTS[name])[1] for name in RECORD_FIELDS}
Record.__doc__ = (Record.__doc__ or "") + "\n".join(f"        {name} ({_type_text(_HINTS[name])}): {FIELD_MEANINGS[name]}"
                            for name in RECORD_FIELDS) + "\n"


def is_scored(record: Mapping) -> bool:
    """Whether a record holds a score (every record but ``status == "harness_error"``; files written
    before the ``scored`` field are scored)."""
    return record.get("status") != HARNESS_ERROR and record.get("scored", True) is not False


def check_record(record: Mapping, required: Iterable[str] = Record.__required_keys__, where: str = "") -> None:
    """Refuse a record that lacks a required field or holds a field the schema does not name.

    Args:
        record: one record.
        required: the fields it must hold (default: every field but :data:`FORECAST_TASK_FIELDS`; a
            results file being read needs only :data:`CORE_FIELDS`).
        where: prefix of the message (e.g. ``"results.jsonl:12"``).

    Raises:
        ValueError: the message names the record (policy, case) and the fields.
    """
    missing = [k for k in required if k not in record]
    unknown = [k for k in record if k not in _HINTS]
    if missing or unknown:
        what = "; ".join(part for part in (f"lacks {missing}" if missing else "",
                                           f"holds fields the record schema does not name {unknown}" if unknown else "")
                         if part)
        raise ValueError(f"{where + ': ' if where else ''}result record of policy {record.get('policy')!r} on case "
                         f"{record.get('case_id')!r} {what} (fwgym.evaluation.records.Record)")


def stored_record(record: Mapping) -> dict:
    """The record as a results file stores it: every schema field it holds (checked by :func:`check_record`).

    Raises:
        ValueError: as :func:`check_record`.
    """
    check_record(record)
    return {k: record[k] for k in RECORD_FIELDS if k in record}


def stable_record(record: Mapping) -> dict:
    """The record without its :data:`VOLATILE_FIELDS` (measured times and memory): what two identical runs
    write identically."""
    return {k: v for k, v in record.items() if k not in VOLATILE_FIELDS}


def by_policy(records: Iterable[Mapping]) -> dict[str, list]:
    """Group records by policy, keeping first-seen order."""
    groups: dict[str, list] = defaultdict(list)
    for r in records:
        groups[r["policy"]].append(r)
    return dict(groups)


def split_index(records: Sequence[Mapping]) -> dict[tuple[str, str], frozenset[str]]:
    """The frozen case index of every (split, domain) present in ``records``: ``{(split, domain): case ids}``."""
    keys = sorted({(r["split"], r["domain"]) for r in records})
    return {(s, d): frozenset(c.case_id for c in build_cases(d, s)) for s, d in keys}


def check_result_set(records: Sequence[Mapping], complete: bool = False) -> None:
    """Reject result sets that cannot be aggregated into one comparable table.

    Args:
        records: result records of one or more policies (merged runs allowed).
        complete: also require every policy to cover the whole frozen index of each (split, domain)
            present (protocol §5.3: case weights must cover exactly the index).

    Raises:
        ValueError: with a message saying what is wrong: no records; harness_error records (no score:
            incomplete, the message names the count per policy and ``fwgym evaluate --resume DIR``); a (policy, case) pair more than
            once (duplicated); policies on different case sets (partial); with ``complete``, cases
            of the split missing (partial) or cases not in the split.
    """
    if not records:
        raise ValueError("no result records")
    unscored = [r for r in records if not is_scored(r)]
    if unscored:
        per = by_policy(unscored)
        raise ValueError("incomplete result set: " + ", ".join(f"policy {p!r} has {len(rs)} harness_error episode(s)"
                                                               for p, rs in per.items())
                         + " with no score (the agent's infrastructure failed); finish the run with "
                           "`fwgym evaluate --resume DIR` before ranking it")
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        seen[(r["policy"], r["case_id"])] += 1
    dup = [(k, n) for k, n in seen.items() if n > 1]
    if dup:
        (p, c), n = dup[0]
        raise ValueError(f"duplicated result set: policy {p!r} has {n} records for case {c!r} "
                         f"({len(dup)} duplicated (policy, case) pairs); merge each run once")
    groups = by_policy(records)
    sets = {p: frozenset(r["case_id"] for r in recs) for p, recs in groups.items()}
    union = frozenset().union(*sets.values())
    partial = {p: union - s for p, s in sets.items() if s != union}
    if partial:
        p, missing = next(iter(partial.items()))
        raise ValueError(
            f"partial result set: policies were evaluated on different cases; merge complete result sets only "
            f"(policy {p!r} lacks {len(missing)} of the {len(union)} cases the others cover, "
            f"e.g. {sorted(missing)[0]!r}; {len(partial)} of {len(sets)} policies are incomplete)")
    if complete:
        index = split_index(records)
        expected = frozenset().union(*index.values())
        missing, extra = expected - union, union - expected
        if missing or extra:
            parts = ", ".join(f"{d} {len(union & ids)}/{len(ids)}" for (s, d), ids in index.items())
            what = (f"covers {len(union & expected)} of the {len(expected)} cases of its split(s) ({parts})" if missing
                    else f"holds {len(extra)} case ids that are not in the split index, e.g. {sorted(extra)[0]!r}")
            raise ValueError(f"partial result set: it {what}; the aggregation weights must cover the whole frozen "
                             "index (protocol §5.3): evaluate the full split, or allow a partial table explicitly")


def coverage(records: Sequence[Mapping]) -> dict:
    """``{"cases", "index_cases", "complete", "by_domain": {"split/domain": [n, of]}}`` of one policy's case set."""
    index = split_index(records)
    cases = frozenset(r["case_id"] for r in records)
    by = {f"{s}/{d}": [len(cases & ids), len(ids)] for (s, d), ids in index.items()}
    total = sum(len(ids) for ids in index.values())
    return {"cases": len(cases), "index_cases": total, "complete": all(a == b for a, b in by.values()),
            "by_domain": by}
