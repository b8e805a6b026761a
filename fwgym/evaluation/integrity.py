"""What a resumed run may keep: every existing record checked against the run's manifest before anything is played
(issue 25.2; :meth:`fwgym.evaluation.rundir.RunDir.resume`).

A run directory's ``results.jsonl`` is, at any time, the records its last finished session wrote (rewritten
by :meth:`~fwgym.evaluation.rundir.RunDir.finalize`, one hash per line in the manifest), followed by the
records a session appended after that and did not finish writing (a kill: SIGKILL, a crash, a power cut).
:func:`check_records` accepts exactly that:

* every line the manifest hashes must be there, in order, unchanged (an edited record, a status turned into
  ``harness_error`` to have it played again, a deleted or re-ordered line: refused, naming ``file:line``);
* lines after them only when the manifest says the last session did not end (status ``running``), and
  each such line must be a record of that session (its episode id), of a policy of the run, of a (policy,
  case) the session could play (not one already scored: a scored record is never played again), once,
  fitting the schema, and re-scoring to its stored score (:func:`fwgym.evaluation.verify.verify_record`)
  when the manifest holds the run's settings. A line after a finished session is a line nobody in the run
  wrote: refused.

The started-episodes log (``started.jsonl``) is checked the same way (its hashed prefix unchanged; lines
after it only after a killed session): it is what tells later sessions which prompts were sent
(:mod:`fwgym.evaluation.schedule`), so deleting lines from it would hide an exposure.

What this cannot see: someone who rewrites the manifest's hashes together with the records, or who appends
a consistent record for a pair a killed session had not recorded. The manifest vouches that the files are
the ones the run wrote, to whoever did not rewrite the manifest; ``fwgym verify --replay``
(:mod:`fwgym.evaluation.replay`) re-executes every recorded episode.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

from fwgym.evaluation.manifest import record_sha256
from fwgym.evaluation.records import check_record, is_scored
from fwgym.jsonl import iter_jsonl

__all__ = ["check_records", "check_started", "prefix_sha256", "last_session_running"]


def last_session_running(manifest: Mapping) -> int | None:
    """The number of the manifest's last session when it did not end (status ``running``: killed), else ``None``."""
    killed = killed_sessions(manifest)
    return killed[-1] if killed else None


def killed_sessions(manifest: Mapping) -> list[int]:
    """The sessions after the last one that ended (status ``running``: killed, one after another), in order."""
    out: list[int] = []
    for s in manifest.get("sessions") or []:
        if isinstance(s, Mapping) and s.get("status") == "running":
            out.append(int(s.get("session", 0)))
        else:
            out = []
    return out


def prefix_sha256(path: Path, n: int) -> str:
    """sha256 of the first ``n`` lines (bytes, newlines included) of ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for _ in range(n):
            line = fh.readline()
            if not line:
                break
            h.update(line)
    return h.hexdigest()


def _refuse(where: str, what: str) -> ValueError:
    return ValueError(f"{where}: {what}; refused: resume accepts only the records the run wrote (start a new run, or "
                      "restore the file)")


def check_records(path: Path, manifest: Mapping, settings=None) -> list[dict]:
    """The records of ``path`` (a run's ``results.jsonl``), checked as the module docstring says.

    Args:
        settings: a :class:`fwgym.evaluation.verify.RunSettings` to re-score the killed session's records
            with (``None``: schema and bookkeeping checks only).

    Returns:
        The records in file order.

    Raises:
        ValueError: naming ``file:line`` and what is wrong.
    """
    from fwgym.evaluation.verify import verify_record

    info = manifest.get("records") or {}
    hashes = list(info.get("sha256_by_line") or []) if info else []
    records: list[tuple[int, dict]] = list(iter_jsonl(path)) if path.is_file() else []
    for i, h in enumerate(hashes):
        if i >= len(records):
            raise _refuse(str(path), f"the run wrote {len(hashes)} records here and {len(records)} are left (lines "
                                     "were deleted)")
        n, r = records[i]
        if n != i + 1 or record_sha256(r) != h:
            raise _refuse(f"{path}:{n}", f"record of policy {r.get('policy')!r} on case {r.get('case_id')!r} differs "
                                         "from the one the run wrote (its sha256 is not the manifest's: edited, "
                                         "re-labelled or moved)")
    tail = records[len(hashes):]
    if not tail:
        return [r for _, r in records]
    killed = killed_sessions(manifest)
    if not killed:
        n, r = tail[0]
        raise _refuse(f"{path}:{n}", f"record of policy {r.get('policy')!r} on case {r.get('case_id')!r} was not "
                                     f"written by the run (its last session ended with {len(hashes)} records; this "
                                     "line was appended afterwards)")
    policies = (manifest.get("settings") or {}).get("policies")
    scored = {(r["policy"], r["case_id"]) for _, r in records[:len(hashes)] if is_scored(r)}
    seen: set[tuple[str, str, str]] = set()
    names = ", ".join(map(str, killed))
    for n, r in tail:
        where = f"{path}:{n}"
        check_record(r, where=where)
        key = (r["policy"], r["case_id"])
        session = str(r.get("episode_id") or "").partition(":")[0]
        if session not in {str(k) for k in killed}:
            raise _refuse(where, f"record of policy {key[0]!r} on case {key[1]!r} has episode id "
                                 f"{r.get('episode_id')!r}, not one of the killed session(s) {names}")
        if isinstance(policies, list) and key[0] not in policies:
            raise _refuse(where, f"a record of policy {key[0]!r}, which the run does not have")
        if key in scored or (*key, session) in seen:
            raise _refuse(where, f"a second record of policy {key[0]!r} on case {key[1]!r} (the run plays a pair "
                                 "again only after a harness_error, once per session)")
        seen.add((*key, session))
        if is_scored(r):
            scored.add(key)
        if settings is not None:
            verify_record(r, settings, where=where)
    return [r for _, r in records]


def check_started(path: Path, manifest: Mapping) -> list[dict]:
    """The started-episodes log of a run, its hashed prefix checked (see the module docstring).

    Raises:
        ValueError: the prefix the manifest hashes changed, or lines follow a finished session.
    """
    info = manifest.get("started") or {}
    entries = [(n, e) for n, e in iter_jsonl(path)] if path.is_file() else []
    count = int(info.get("count", 0)) if info else 0
    if count:
        if len(entries) < count or prefix_sha256(path, entries[count - 1][0]) != info.get("sha256"):
            raise _refuse(str(path), f"the first {count} lines are not the ones the run wrote (its sha256 is not the "
                                     "manifest's: lines were edited or deleted, which would hide which prompts were "
                                     "sent)")
    if len(entries) > count and last_session_running(manifest) is None:
        n, _ = entries[count]
        raise _refuse(f"{path}:{n}", "a line written after the run's last session ended")
    return [e for _, e in entries]


def canonical_line_hash(line: str) -> str | None:
    """:func:`record_sha256` of a records-file line, or ``None`` when it is not a JSON object."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record_sha256(value) if isinstance(value, dict) else None
