"""Reading an inspect-ai log of a fwgym task back into fwgym records (``fwgym import-inspect LOG --out RUN``).

Each sample of the log's epoch (default 1) becomes one record of policy ``inspect:<model>`` (or the name given):

* a scored sample: the record the solver stored in the score's metadata, **re-scored from its submission**
  (:func:`fwgym.evaluation.verify.rescore`: the case rebuilt from the packaged data, the plan or forecast
  validated again, the one scorer run on it with the suite's settings); a stored score that is not the
  re-computed one is refused (the log was edited, or scored by another fwgym), and the re-computed values are
  the ones written;
* a sample that errored in inspect (a model or server error after inspect's retries) or was never scored: a
  ``harness_error`` record (never scored; the run is incomplete until a retried log is imported into the same
  directory, ``inspect eval-retry``), built by the env itself (:meth:`fwgym.envs.fwbench.FWBenchEnv.abandon`).

The run directory says where its rows come from (``origin``: the log file, its sha256, the eval and task ids, the
task, the model, inspect's version), so inspect-played rows are told apart from ``fwgym evaluate`` rows.
"""
from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from fwgym.evaluation.verify import RTOL, VERIFIED_FIELDS, RunSettings, rescore
from fwgym.integrations.inspect.scorer import sample_score
from fwgym.integrations.inspect.tasks import SUITE_TASKS, env_kwargs_of
from fwgym.traces import Trace, trace_score

__all__ = ["ImportedLog", "read_log"]

_SUITE_OF = {task: suite for suite, task in SUITE_TASKS.items()}


@dataclass
class ImportedLog:
    """What :func:`read_log` made of a log.

    Attributes:
        records: one record per sample of the epoch, in log order.
        suite, split, pool: the task's suite and parameters.
        env_kwargs: the env settings of the suite and pool (as ``fwgym evaluate``).
        policy: the records' policy name.
        origin: the provenance written into the run directory.
        traces: one trace line per sample (its messages as text, the score).
        errored: samples without a score (harness_error records).
    """

    records: list[dict]
    suite: str
    split: str
    pool: str
    env_kwargs: dict
    policy: str
    origin: dict
    traces: list[Trace] = field(default_factory=list)
    errored: int = 0


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_log(path: str | Path, *, epoch: int = 1, policy: str | None = None) -> ImportedLog:
    """Records of the fwgym-task log ``path`` (module docstring).

    Raises:
        ValueError: not an inspect log (the message names the file), not a log of a fwgym task, an unfinished eval, an edited score (the message names the
            sample), no sample of ``epoch``.
        FileNotFoundError: no such file.
    """
    import inspect_ai
    from inspect_ai.log import read_eval_log

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no inspect log {p}")
    try:
        log = read_eval_log(str(p))
    except (ValueError, KeyError, zipfile.BadZipFile) as exc:  # pydantic's ValidationError is a ValueError
        why = "; ".join(line.strip() for line in str(exc).splitlines()[:3] if line.strip()) or type(exc).__name__
        raise ValueError(f"{p} is not an inspect-ai log (expected the .eval or .json log file of an inspect eval of "
                         f"{', '.join(SUITE_TASKS.values())}; inspect: {why[:300]})") from None
    task = log.eval.task
    suite = _SUITE_OF.get(task)
    if suite is None:
        raise ValueError(f"{p} is a log of task {task!r}, not of a fwgym task ({', '.join(SUITE_TASKS.values())})")
    if log.status not in ("success", "error"):
        raise ValueError(f"{p}: the eval is {log.status!r}; import a finished log (inspect eval-retry finishes it)")
    args = dict(log.eval.task_args or {})
    split, pool = str(args.get("split") or "test"), str(args.get("pool") or "protocol")
    env_kwargs = env_kwargs_of(suite, pool)
    name = policy or f"inspect:{log.eval.model}"
    samples = [s for s in (log.samples or []) if int(s.epoch) == int(epoch)]
    if not samples:
        raise ValueError(f"{p} has no sample of epoch {epoch}")
    from fwgym.core.scoring import BUDGET, load_sigma

    settings = RunSettings(suite=suite, sigma=load_sigma(), budget=env_kwargs.get("budget", BUDGET),
                           scenario_seed=env_kwargs.get("scenario_seed", 0),
                           credit_weight=env_kwargs.get("credit_weight", 0.0))
    records, traces, errored = [], [], 0
    for s in samples:
        score = sample_score(s)
        stored = (score.metadata or {}).get("record") if score is not None else None
        if s.error is not None or not isinstance(stored, Mapping) or stored.get("S") is None:
            errored += 1
            why = (s.error.message if s.error is not None else "the sample has no fwgym score")
            record = _unscored(str(s.id), split, env_kwargs, name, f"inspect: {why}"[:2000], int(s.epoch))
        else:
            where = f"{p}: sample {s.id} (epoch {s.epoch})"
            record = _rescored(stored, settings, name, where=where)
            _check_transcript(s, record, where)
        records.append(record)
        traces.append(_trace(s, record))
    origin = {"kind": "inspect", "log": str(p.resolve()), "log_sha256": _sha256(p), "eval_id": log.eval.eval_id,
              "task_id": log.eval.task_id, "task": task, "task_args": args, "model": log.eval.model, "epoch": int(epoch),
              "inspect_ai": inspect_ai.__version__}
    return ImportedLog(records, suite, split, pool, env_kwargs, name, origin, traces, errored)


def _rescored(stored: Mapping, settings: RunSettings, policy: str, where: str) -> dict:
    """The stored record with its score fields re-computed from its submission (refused when they differ)."""
    record = dict(stored)
    try:
        fresh = rescore(record, settings)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc} (refused: the log was edited or comes from other settings)") from None
    for f in VERIFIED_FIELDS[settings.task]:
        if f in fresh:
            a, b = record.get(f), fresh[f]
            same = (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= RTOL * max(1.0, abs(b)))
            if not same:
                raise ValueError(f"{where}: stored {f} = {a!r} but the submission scores {f} = {b!r} (refused: the log "
                                 "was edited or scored by another fwgym)")
            record[f] = b
    record["policy"] = policy
    return record


def _check_transcript(sample: Any, record: Mapping, where: str) -> None:
    """Refuse a stored record whose tool calls are not the ones the sample's transcript shows the model making (the
    tools other than the answer tools, in order: an answer may be a ``submit`` call or text, so those are not compared).

    Raises:
        ValueError: the sequences differ (the record, or the transcript, was edited).
    """
    from fwgym.tools import ANSWER_TOOLS

    said = [c.function for m in sample.messages or [] if m.role == "assistant"
            for c in (getattr(m, "tool_calls", None) or []) if c.function not in ANSWER_TOOLS]
    recorded = []
    for entry in record.get("tool_calls") or []:
        action = entry.get("action") if isinstance(entry, Mapping) else None
        if isinstance(action, str):
            try:
                action = json.loads(action)
            except ValueError:
                action = None
        tool = action.get("tool") if isinstance(action, Mapping) else None
        if tool not in ANSWER_TOOLS:
            recorded.append(tool)
    if said != recorded:
        raise ValueError(f"{where}: the stored record's tool calls {recorded[:12]} are not the transcript's "
                         f"{said[:12]} (refused: the log was edited)")


def _unscored(case_id: str, split: str, env_kwargs: dict, policy: str, reason: str, epoch: int) -> dict:
    """The env's own unscored record of an episode that did not finish (status harness_error)."""
    from fwgym.agents.resources import RESOURCE_KEYS
    from fwgym.core.cases import parse_case_id
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv(parse_case_id(case_id)[0], split=split, case_ids=[case_id], **env_kwargs)
    env.reset(options={"case_id": case_id})
    record = env.abandon(reason)
    record.update(policy=policy, scored=False, harness_kind="inspect_error",
                  episode_id=f"{policy}:{case_id}:{epoch}", prompt_tokens=None, completion_tokens=None, failed_tokens=None,
                  model_turns=None, requests=None, request_latency_s=None, wall_s=None, served_model=None,
                  tool_calls=[], **dict.fromkeys(RESOURCE_KEYS))  # the inspect sample's episode was never played here
    return record


def _trace(sample: Any, record: Mapping) -> Trace:
    messages = []
    for m in sample.messages or []:
        msg: dict[str, Any] = {"role": m.role, "content": m.text}
        calls = getattr(m, "tool_calls", None)
        if calls:
            msg["tool_calls"] = [{"id": c.id, "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
                                 for c in calls]
        if m.role == "tool":
            msg["tool_call_id"] = getattr(m, "tool_call_id", None)
        messages.append(msg)
    return {"trace_version": 2, "policy": record["policy"], "case_id": record["case_id"],
            "episode_id": record.get("episode_id"), "backend": "inspect", "messages": messages,
            "score": trace_score(record)}


def imported_settings(imported: ImportedLog, domains: list[str]) -> dict:
    """The run directory's settings of an imported log (:func:`fwgym.integrations.runs.episode_settings`)."""
    from fwgym.integrations.runs import episode_settings
    from fwgym.tools import MAX_CALLS

    lead = imported.origin["task_args"].get("lead")
    return episode_settings(suite=imported.suite, split=imported.split, domains=domains, lead=lead,
                            cases=[r["case_id"] for r in imported.records], policies=[imported.policy],
                            agents={imported.policy: {"kind": "inspect", "model": imported.origin["model"],
                                                      "task": imported.origin["task"],
                                                      "task_args": imported.origin["task_args"]}},
                            env_kwargs=imported.env_kwargs, max_calls=MAX_CALLS)
