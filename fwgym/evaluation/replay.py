"""Replaying a run (``fwgym verify RUN --replay``; issue 25.5): every recorded episode re-executed through a fresh env.

Re-scoring (:mod:`fwgym.evaluation.verify`) checks that a record's score is the score of its submission; it cannot
tell a played episode from a typed-in record. A replay can: each record carries the actions its env received
(``tool_calls``, :class:`fwgym.evaluation.records.ToolCall`), and :func:`replay_record` plays them again, in order,
on a fresh :class:`~fwgym.envs.fwbench.FWBenchEnv` of the run's settings (the same case, scenario seed, budget,
forecast pool), checking

* every tool result against the hash the record holds (the first call whose result differs is named);
* that the calls end the episode exactly at the last one (no call left over, none missing);
* the ending: status, validity, credits charged, calls counted, tool counts, the submitted plan or forecast and
  every score field, against the record.

fwgym's own named policies (fixed, priced, selectors, oracles) are deterministic: :func:`replay_record` plays the
policy itself again (oracles with their hindsight grant) and compares its actions with the recorded ones, so a
record of a named policy whose plan or calls were typed in is caught even when its calls are consistent.

What a replay cannot know is whether an agent's actions were its own: an agent's recorded calls that form a legal
episode (``submit`` of the perfect plan, typed in with the manifest re-hashed) replay. Only running the agent
again measures the agent.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from fwgym.agents.base import result_hash, run_episode, tool_call_entry
from fwgym.baselines.oracles import oracle_grant
from fwgym.baselines.registry import make_policy, policy_names
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation.records import ENV_FIELDS, CaseFields, is_scored
from fwgym.evaluation.verify import RunSettings, same_value

__all__ = ["REPLAY_FILE", "ReplayReport", "replay_env_kwargs", "replay_record", "replay_records"]

#: what ``fwgym verify --replay`` writes beside the records it replayed
REPLAY_FILE = "replay.json"
#: the ending's fields a replay compares (numbers with the re-scorer's tolerance, the rest exactly): every field of
#: the env's terminal info but the case's own (the schema's, :mod:`fwgym.evaluation.records`)
_FIRST = ("status", "levels", "submission", "credits", "calls")  # what a message names first
_COMPARED = _FIRST + tuple(f for f in ENV_FIELDS if f not in CaseFields.__annotations__ and f not in _FIRST)


@dataclass
class ReplayReport:
    """The outcome of replaying records: per policy, episodes replayed / matching, and the problems
    (``"file:line: ..."``) in record order."""

    episodes: dict[str, int] = field(default_factory=dict)
    matched: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def replayed_policies(self) -> list[str]:
        """The policies every scored record of which replayed."""
        return [p for p, n in self.episodes.items() if self.matched.get(p, 0) == n]


def replay_env_kwargs(manifest: Mapping | None, settings: RunSettings) -> dict:
    """The env arguments a run's episodes were played with (from the manifest's ``settings``; a run written by
    :func:`fwgym.evaluation.write_results` has none: its suite and forecast pool stand for them)."""
    from fwgym.evaluation.runner import SUITES
    from fwgym.forecasters.registry import PRICED_MODELS

    st = (manifest or {}).get("settings") or {}
    kw = dict(st.get("env_kwargs") or SUITES[settings["suite"]])
    pool = list(st.get("forecast_pool") or settings.get("forecast_pool") or PRICED_MODELS)
    if "models" not in kw and pool != list(PRICED_MODELS):
        kw["models"] = pool
    kw.setdefault("budget", int(settings.get("budget", st.get("budget", 113_726))))
    if st.get("max_calls") is not None:
        kw.setdefault("max_calls", int(st["max_calls"]))
    kw.setdefault("scenario_seed", int(settings.get("scenario_seed", 0)))
    if settings["suite"] == "forecast":
        kw.setdefault("credit_weight", float(settings.get("credit_weight", 0.0)))
    kw.pop("forecast_store", None)
    return kw


def _ending(info: Mapping, record: Mapping) -> list[str]:
    """The fields of a replayed terminal info that differ from the record's."""
    return [k for k in _COMPARED if (k in record or k in info) and not same_value(record.get(k), info.get(k))]


def _replay_calls(env: FWBenchEnv, record: Mapping) -> str | None:
    """Play the record's calls on ``env``; ``None`` when everything matches, else what differs."""
    calls = record.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return "the record holds no tool calls to replay (typed in, or written before records carried them)"
    env.reset(options={"case_id": record["case_id"]})
    for i, call in enumerate(calls, 1):
        if not isinstance(call, Mapping) or "action" not in call:
            return f"tool call {i} is not an {{'action', 'result_hash'}} entry"
        obs, _, terminated, truncated, info = env.step(call["action"])
        got = result_hash(obs.get("last_result", ""))
        if got != call.get("result_hash"):
            return (f"tool call {i} ({_tool_name(call['action'])}) got another result than the record's "
                    f"(result hash {got} vs {call.get('result_hash')})")
        if terminated or truncated:
            if i != len(calls):
                return f"the episode ended at call {i} of the {len(calls)} recorded"
            ending = {k: v for k, v in info.items() if k != "tool_result"}
            bad = _ending(ending, record)
            if bad:
                return ("the replayed episode ends otherwise than the record: " +
                        "; ".join(f"{k} {record.get(k)!r} recorded, {ending.get(k)!r} replayed"[:300]
                                  for k in bad[:3]))
            return None
    return f"the {len(calls)} recorded calls do not end the episode"


def _tool_name(action: Any) -> str:
    if isinstance(action, Mapping):
        return str(action.get("tool"))
    try:
        return str(json.loads(action).get("tool"))
    except (ValueError, AttributeError, TypeError):
        return "?"


def _replay_policy(env: FWBenchEnv, record: Mapping) -> str | None:
    """Play a named policy again on the record's case; ``None`` when its actions are the recorded ones."""
    agent = make_policy(record["policy"])
    fresh = run_episode(env, agent, options={"case_id": record["case_id"]}, hindsight=oracle_grant(agent)).record
    mine = [tool_call_entry(c["action"])["action"] for c in fresh["tool_calls"]]
    theirs = [c.get("action") if isinstance(c, Mapping) else c for c in record.get("tool_calls") or []]
    if not same_value(mine, theirs):
        n = next((i for i, (a, b) in enumerate(zip(mine, theirs), 1) if not same_value(a, b)), min(len(mine), len(theirs)) + 1)
        return (f"{record['policy']} (a fwgym policy, deterministic) plays other calls than the record's from call {n} "
                f"({len(mine)} calls replayed, {len(theirs)} recorded)")
    return None


def _named() -> set[str]:
    return set(policy_names())


def replay_record(record: Mapping, env: FWBenchEnv) -> str | None:
    """Replay one record on ``env`` (a fresh env of the run's settings and split, domain of the record).

    Returns:
        ``None`` when the replay matches, else a sentence saying what differs.
    """
    problem = _replay_calls(env, record)
    if problem is None and record["policy"] in _named():
        problem = _replay_policy(env, record)
    return problem


def replay_records(records: Sequence[Mapping], lines: Sequence[int], settings: RunSettings, where: str,
                   manifest: Mapping | None = None, progress=None, policies: Iterable[str] | None = None) -> ReplayReport:
    """Replay every scored record (harness_error records have no outcome to check: skipped and counted).

    Args:
        records, lines: the records and their line numbers in ``where`` (the records file).
        settings: the run's :class:`~fwgym.evaluation.verify.RunSettings`. manifest: its manifest (env arguments).
        progress: called with 1 after each record. policies: only these policies (default: all).
    """
    kw = replay_env_kwargs(manifest, settings)
    envs: dict[str, FWBenchEnv] = {}
    report = ReplayReport()
    keep = set(policies) if policies is not None else None
    for n, r in zip(lines, records):
        p = r["policy"]
        if keep is not None and p not in keep:
            continue
        if not is_scored(r):
            report.skipped[p] = report.skipped.get(p, 0) + 1
            continue
        report.episodes[p] = report.episodes.get(p, 0) + 1
        env = envs.get(r["domain"])
        if env is None:
            env = envs[r["domain"]] = FWBenchEnv(r["domain"], split=r["split"], sigma=settings["sigma"], **kw)
        problem = replay_record(r, env)
        if problem is None:
            report.matched[p] = report.matched.get(p, 0) + 1
        else:
            report.problems.append(f"{where}:{n}: record of policy {p!r} on case {r['case_id']!r}: {problem}")
        if progress is not None:
            progress(1)
    return report
