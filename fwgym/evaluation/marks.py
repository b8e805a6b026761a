"""What vouches for each leaderboard row, as data (issue 25.5): one function over a run's manifest and records.

Every row of a table is re-scored (its records' scores recomputed from their submissions and the packaged
data, :mod:`fwgym.evaluation.verify`); what else holds depends on the run. :func:`row_marks` says, per
policy:

* ``rescored``: every record was re-scored from its submission (always ``True`` for rows fwgym reads);
* ``hash_checked``: a run manifest vouches for the records (their hashes, count and statuses);
  ``False`` for a source without one (``--allow-unverified``);
* ``replayed``: ``fwgym verify RUN --replay`` re-executed every recorded episode of the row through a fresh
  env and found the same tool results, charges and submission (:mod:`fwgym.evaluation.replay`; its
  ``replay.json`` beside the records, for the very records file); ``False`` when not (yet) replayed;
* ``isolation``: how the agent ran: ``"fwgym"`` (fwgym's own named policy), ``"harness"`` (an LLM played by
  fwgym's chat harness: the harness code is fwgym's, the model's replies are data), ``"external"`` (an MCP client
  or an inspect-ai run: outside fwgym's process, tool results only), ``"sandbox"`` (a worker
  process in a sandbox), ``"process"`` (a worker process without a sandbox), ``"in-process"`` (the agent's
  code in the evaluating process: an LLM/transformers agent, ``--in-process``, a Python factory), or
  ``"unknown"`` (no manifest);
* ``in_process``: the agent's code ran in the evaluating process (it could read anything fwgym holds);
* ``exposed``: records replayed after a prompt holding their target had been sent
  (:mod:`fwgym.evaluation.schedule`);
* ``retried_after_spend``: unscored attempts (infrastructure failures: a server fault, a client that went away)
  that made calls or spent credits before a later attempt of the same case was scored
  (:func:`fwgym.evaluation.rundir.superseded_history`): what they bought may have reached the scored attempt for
  free (an agent, MCP client or server that remembers), so the row's calls and credits may understate its cost;
* ``code_versions``: how many versions of fwgym's own code (:func:`fwgym.evaluation.manifest.code_changed`) the
  sessions that played the row's records ran (1 for a run of one code version; 2 or more after ``fwgym evaluate
  --resume --allow-code-change``, or episodes added to an MCP/inspect run directory by another fwgym; 0: not known,
  no manifest or no code fingerprint): its records may come from different envs, tools or scorers.

:func:`format_marks` renders them as the header lines tables print; :func:`mark_columns` as the columns of
outputs without a header (CSV).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from fwgym.evaluation.manifest import code_changed

__all__ = ["MARK_COLUMNS", "row_marks", "merge_marks", "mark_columns", "format_marks", "history_line",
           "isolation_of", "session_code_versions"]

#: the mark columns of a CSV row, in order
MARK_COLUMNS: tuple[str, ...] = ("rescored", "hash_checked", "replayed", "isolation", "in_process", "exposed",
                                 "retried_after_spend", "code_versions")


def _find(description: Any, key: str) -> Any:
    """The first value of ``key`` anywhere in a (nested) agent description."""
    if isinstance(description, Mapping):
        if key in description:
            return description[key]
        for v in description.values():
            found = _find(v, key)
            if found is not None:
                return found
    elif isinstance(description, list):
        for v in description:
            found = _find(v, key)
            if found is not None:
                return found
    return None


#: agent kinds whose code is fwgym's LLM harness (the model is a server or weights; what it says is data): rows
#: ``isolation="harness"``, not ``in-process``
HARNESS_KINDS: tuple[str, ...] = ("openai", "transformers")
#: agent kinds that played from outside fwgym's process (an MCP client, an inspect-ai run): they saw tool results only
EXTERNAL_KINDS: tuple[str, ...] = ("mcp", "inspect")


def isolation_of(description: Any) -> str:
    """How a policy of a run manifest ran, from its description (``settings["agents"][name]``): ``"fwgym"`` for a
    named policy (a string), ``"sandbox"`` / ``"process"`` when the description says ``isolation`` (the isolated
    worker's factory writes it), ``"process"`` for an isolated worker's factory that does not say (it has a ``worker_command``), else
    ``"in-process"``."""
    if isinstance(description, str):
        return "fwgym"
    kind = description.get("kind") if isinstance(description, Mapping) else None
    if kind in HARNESS_KINDS:
        return "harness"
    if kind in EXTERNAL_KINDS:
        return "external"
    stated = _find(description, "isolation")
    if stated in ("sandbox", "process"):
        return str(stated)
    if isinstance(description, Mapping) and "worker_command" in description:  # fwgym.agents.isolation's factory
        return "process"
    return "in-process"


def session_code_versions(manifest: Mapping | None) -> dict[int, int | None]:
    """``{session number: code version}`` of a run's sessions: versions numbered 0, 1, ... in the order they first
    ran, two sessions sharing one when :func:`fwgym.evaluation.manifest.code_changed` says their environments ran
    the same code; ``None`` for a session whose code cannot be told apart from a version (no environment, no
    fingerprint). The first session's environment is the manifest's own when the session holds none."""
    versions: list[Mapping] = []
    out: dict[int, int | None] = {}
    for i, s in enumerate((manifest or {}).get("sessions") or []):
        env = s.get("environment") or ((manifest or {}).get("environment") if i == 0 else None)
        n = int(s.get("session") or i + 1)
        if not isinstance(env, Mapping):
            out[n] = None
            continue
        same = [code_changed(v, env) for v in versions]
        if False in same:
            out[n] = same.index(False)
        elif None in same or code_changed(env, env) is None:  # not known against a version, or no fingerprint
            out[n] = None
        else:
            versions.append(env)
            out[n] = len(versions) - 1
    return out


def _code_versions(manifest: Mapping | None, records: Sequence[Mapping]) -> dict[str, int]:
    """``{policy: number of code versions}`` of the sessions that played each policy's records: the session of a
    record's episode id (``"<session>:..."``, fwgym evaluate's), else the sessions that added the policy's episodes
    (an MCP/inspect run directory's ``sessions[].policies``; all sessions when they do not say)."""
    versions = session_code_versions(manifest)
    sessions = (manifest or {}).get("sessions") or []
    by_policy: dict[str, set[int]] = {}
    for r in records:
        p = str(r["policy"])
        head = str(r.get("episode_id") or "").split(":", 1)[0]
        if head.isdigit() and int(head) in versions:
            ns = [int(head)]
        else:
            ns = [int(s.get("session") or i + 1) for i, s in enumerate(sessions)
                  if p in (s.get("policies") or [p])]
        by_policy.setdefault(p, set()).update(v for n in ns if (v := versions.get(n)) is not None)
    return {p: len(v) for p, v in by_policy.items()}


def row_marks(manifest: Mapping | None, records: Iterable[Mapping], replayed: Iterable[str] = ()) -> dict[str, dict]:
    """``{policy: {mark: value}}`` (:data:`MARK_COLUMNS`) of one result source.

    Args:
        manifest: the run's manifest (``None``: a source without one).
        records: its records.
        replayed: the policies ``fwgym verify --replay`` replayed in full for this very records file.
    """
    agents = ((manifest or {}).get("settings") or {}).get("agents") or {}
    retried = ((manifest or {}).get("history") or {}).get("retried_after_spend") or {}
    done = set(replayed)
    records = list(records)
    code = _code_versions(manifest, records) if manifest is not None else {}
    out: dict[str, dict] = {}
    for r in records:
        p = r["policy"]
        if p not in out:
            iso = isolation_of(agents[p]) if p in agents else ("unknown" if manifest is None else "fwgym")
            out[p] = {"rescored": True, "hash_checked": manifest is not None, "replayed": p in done,
                      "isolation": iso, "in_process": iso == "in-process", "exposed": 0,
                      "retried_after_spend": int((retried.get(p) or {}).get("attempts") or 0),
                      "code_versions": code.get(p, 0)}
        out[p]["exposed"] += bool(r.get("exposed"))
    return out


def merge_marks(per_source: Sequence[Mapping[str, Mapping]]) -> dict[str, dict]:
    """The marks of several sources merged per policy (a policy in two sources: every mark must hold in both;
    exposed counts add up)."""
    out: dict[str, dict] = {}
    for marks in per_source:
        for p, m in marks.items():
            if p not in out:
                out[p] = dict(m)
                continue
            o = out[p]
            for k in ("rescored", "hash_checked", "replayed"):
                o[k] = bool(o[k] and m[k])
            o["in_process"] = bool(o["in_process"] or m["in_process"])
            if o["isolation"] != m["isolation"]:
                o["isolation"] = "mixed"
            o["exposed"] += m["exposed"]
            o["retried_after_spend"] = o.get("retried_after_spend", 0) + m.get("retried_after_spend", 0)
            o["code_versions"] = max(o.get("code_versions", 0), m.get("code_versions", 0))
    return out


def mark_columns(rows: Sequence[Mapping], marks: Mapping[str, Mapping]) -> list[dict]:
    """Rows with the :data:`MARK_COLUMNS` of their policy appended (a policy without marks: re-scored only)."""
    empty = {"rescored": True, "hash_checked": False, "replayed": False, "isolation": "unknown",
             "in_process": False, "exposed": 0, "retried_after_spend": 0, "code_versions": 0}
    return [{**r, **{k: {**empty, **(marks.get(r["policy"]) or {})}[k] for k in MARK_COLUMNS}} for r in rows]


def format_marks(marks: Mapping[str, Mapping], n_records: Mapping[str, int] | None = None) -> list[str]:
    """Header lines for what does not hold: ``EXPOSED`` (replays whose target a sent prompt held), ``RETRIED AFTER
    SPEND``, ``MIXED CODE`` (rows played by two or more code versions of fwgym), ``NOT HASH-CHECKED``, ``IN-PROCESS`` agents, workers without a sandbox; nothing when every row is clean.
    Re-scoring holds for every row and is said by the table's header itself."""
    lines = []
    exposed = {p: m["exposed"] for p, m in marks.items() if m.get("exposed")}
    if exposed:
        lines.append("EXPOSED: " + ", ".join(
            f"{p!r} {n}{f' of {n_records[p]}' if n_records and p in n_records else ''} record(s)"
            for p, n in exposed.items())
            + " replayed after a prompt holding their target was sent (--resume after harness errors or a kill): "
              "their scores may use the answer; evaluate agents with memory on --split sealed")
    retried = {p: m["retried_after_spend"] for p, m in marks.items() if m.get("retried_after_spend")}
    if retried:
        lines.append("RETRIED AFTER SPEND: " + ", ".join(f"{p!r} {n} attempt(s)" for p, n in retried.items())
                     + " made calls or spent credits, failed unscored (server fault, client gone) and were played "
                       "again: what they bought may have reached the scored attempt for free, so these rows' calls "
                       "and credits may understate their cost (run history in the manifest)")
    mixed = {p: m["code_versions"] for p, m in marks.items() if (m.get("code_versions") or 0) > 1}
    if mixed:
        lines.append("MIXED CODE: " + ", ".join(f"{p!r} {n} code versions" for p, n in mixed.items())
                     + ": the sessions that played these rows' records ran different versions of fwgym's own code "
                       "(fwgym evaluate --resume --allow-code-change, or episodes added by another fwgym), so their "
                       "records may come from different envs, tools or scorers (sessions' environment in the "
                       "manifest)")
    unchecked = [p for p, m in marks.items() if not m.get("hash_checked")]
    if unchecked:
        lines.append(f"NOT HASH-CHECKED: {', '.join(map(repr, unchecked))} (no run manifest)")
    inproc = [p for p, m in marks.items() if m.get("in_process")]
    if inproc:
        lines.append(f"IN-PROCESS: {', '.join(map(repr, inproc))} ran in the evaluating process (their code could "
                     "read what fwgym holds)")
    unsandboxed = [p for p, m in marks.items() if m.get("isolation") == "process"]
    if unsandboxed:
        lines.append(f"NO SANDBOX: {', '.join(map(repr, unsandboxed))} ran in a worker process without a sandbox")
    return lines


def history_line(manifest: Mapping | None) -> str | None:
    """One line of a run's history for a table header (sessions and, when they ran more than one, their code
    versions; superseded records by reason; episodes lost in flight; refused lines), or ``None`` for a run of one
    clean session (or no manifest)."""
    h = (manifest or {}).get("history") or {}
    if not h:
        return None
    parts = []
    sessions = int(h.get("sessions") or 0)
    superseded = h.get("superseded") or {}
    lost, refused = int(h.get("lost_in_flight") or 0), int(h.get("refused_lines") or 0)
    if sessions <= 1 and not superseded and not lost and not refused:
        return None
    versions = {v for v in session_code_versions(manifest).values() if v is not None}
    parts.append(f"{sessions} session(s)" + (f" that ran {len(versions)} code versions of fwgym (MIXED CODE)"
                                             if len(versions) > 1 else ""))
    if superseded:
        parts.append(f"{sum(superseded.values())} superseded record(s) (" +
                     ", ".join(f"{why}: {n}" for why, n in superseded.items()) + ")")
    for p, a in (h.get("retried_after_spend") or {}).items():
        parts.append(f"{p!r}: {a['attempts']} unscored attempt(s) made {a['calls']} call(s) and spent "
                     f"{a['credits']:,.0f} credits before a retry")
    if lost:
        parts.append(f"{lost} episode(s) lost in flight and played again")
    if refused:
        parts.append(f"REFUSED {refused} line(s) appended to results.jsonl by another process")
    return "run history: " + "; ".join(parts)
