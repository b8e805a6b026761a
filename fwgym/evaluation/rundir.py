"""Run directories: where one evaluation writes, appends, resumes and finishes (DESIGN §9, trust).

A run directory holds::

    manifest.json      the run's manifest (fwgym.evaluation.manifest), written at the start, rewritten at each end
    results.jsonl      one record per finished episode, appended (fsync'd) as each episode ends, BEFORE the agent's
                       end_episode sees it; rewritten from the runner's own records (one per (policy, case), the
                       latest attempt) when a session ends: a line appended by anyone else is refused, not kept
    started.jsonl      one line per episode started ({"episode_id", "policy", "case_id", "agent"}), written before
                       its first observation: which prompts were sent (exposure, fwgym.evaluation.schedule) and
                       which episodes were in flight when a session was killed
    traces.jsonl       the agents' trace lines (chat agents), one per episode, with the record's episode_id
    superseded.jsonl   records that a later attempt replaced (harness_error), with the reason (the audit trail)
    leaderboard.md, leaderboard.csv   written when every episode is scored
    .lock              held (flock) while a session runs: two sessions never write one directory

Appending per episode means that Ctrl-C or a crash (even SIGKILL) loses at most the episodes in
flight (records are fsync'd at most once a second: :data:`FSYNC_INTERVAL_S`); a torn last line (the write a kill interrupted) is cut off when the run is resumed, and
reported. ``fwgym evaluate --resume DIR`` (:meth:`RunDir.resume`) first checks every record against the
manifest's hashes (:mod:`fwgym.evaluation.integrity`: an edited, appended or re-labelled record is refused
with its file:line), then reruns only the missing episodes and those that ended with ``harness_error``.
The manifest's ``history`` counts the sessions, the superseded records by reason, the episodes lost in
flight (started, never recorded), the lines refused at a session's end and the exposed replays; the
leaderboard header shows it.

Episode ids are ``"<session>:<policy>:<case_id>"`` (:func:`episode_id`), session 1 for the first
invocation and one more for each resume: deterministic (identical runs write identical records but for the measured times and memory,
:data:`fwgym.evaluation.records.VOLATILE_FIELDS`) and
unique in the run (a rerun of an episode happens in a later session).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable, Mapping, Sequence

from fwgym.errors import AGENT_ERROR_PREFIX, HARNESS_ERROR
from fwgym.evaluation.manifest import (MANIFEST_FILE, file_sha256, now, read_manifest, record_sha256,
                                       write_manifest)
from fwgym.evaluation.integrity import canonical_line_hash, check_records, check_started, prefix_sha256
from fwgym.evaluation.records import coverage, is_scored, stored_record
from fwgym.jsonl import append_jsonl, dumps_line, write_jsonl

__all__ = ["RESULTS_FILE", "TRACES_FILE", "SUPERSEDED_FILE", "STARTED_FILE", "LOCK_FILE", "FSYNC_INTERVAL_S", "RunDir",
           "TornTail",
           "append_record", "episode_id", "superseded_reason", "superseded_history",
           "default_run_dir", "check_new_run_dir", "status_counts"]

#: records file of a run directory
RESULTS_FILE = "results.jsonl"
#: traces file of a run directory
TRACES_FILE = "traces.jsonl"
#: superseded harness_error records
SUPERSEDED_FILE = "superseded.jsonl"
#: the episodes started, one line each (before the first observation)
STARTED_FILE = "started.jsonl"
#: lock file of a running session
LOCK_FILE = ".lock"
#: seconds between fsyncs of a records file (group commit): every record is written (a kernel write)
#: as its episode ends, so a killed process (Ctrl-C, SIGKILL, a crash of fwgym) loses nothing but the
#: episodes in flight; the fsync, which only matters if the MACHINE crashes, runs with the first record
#: written this many seconds or more after the file's last fsync (so every record of episodes that take
#: longer, e.g. LLM episodes, is fsync'd at once; a machine crash loses at most about this long of
#: records), and a baseline run of thousands of millisecond episodes is not slowed by a disk flush per
#: line (~6 ms each on the development machine). The records file is fsync'd when a session ends.
FSYNC_INTERVAL_S = 1.0
_LAST_FSYNC: dict[str, float] = {}
_FSYNC_LOCK = threading.Lock()


def append_record(path: str | os.PathLike, record: Mapping) -> None:
    """Append one record (its schema fields, keys sorted) to a records file, under the file lock;
    fsync'd when the file was last fsync'd :data:`FSYNC_INTERVAL_S` or more ago (see there)."""
    key = str(path)
    now_s = time.monotonic()
    with _FSYNC_LOCK:
        sync = now_s - _LAST_FSYNC.get(key, -FSYNC_INTERVAL_S) >= FSYNC_INTERVAL_S
        if sync:
            _LAST_FSYNC[key] = now_s
    append_jsonl(path, stored_record(record), sort_keys=True, fsync=sync)


def episode_id(session: int, policy: str, case_id: str) -> str:
    """The id of an episode of a run: ``"<session>:<policy>:<case_id>"``."""
    return f"{int(session)}:{policy}:{case_id}"


def _is_empty_dir(p: Path) -> bool:
    return p.is_dir() and not any(p.iterdir())


def default_run_dir(split: str, suite: str = "decision", root: str | os.PathLike = "results") -> Path:
    """A new run directory name: ``<root>/<split>`` (``<root>/<split>-<suite>`` for the context and
    forecast suites), else the first of ``...-2``, ``...-3``, ... that does not exist or is empty
    (as YOLO's ``runs/exp2``)."""
    base = Path(root) / (split if suite == "decision" else f"{split}-{suite}")
    if not base.exists() or _is_empty_dir(base):
        return base
    n = 2
    while True:
        p = base.with_name(f"{base.name}-{n}")
        if not p.exists() or _is_empty_dir(p):
            return p
        n += 1


def check_new_run_dir(path: str | os.PathLike, overwrite: bool = False, clear: bool = False) -> Path:
    """Refuse to start a run in a directory that holds files, unless ``overwrite``; with ``clear``
    (and ``overwrite``) the run files there are removed: manifest, records, traces, superseded
    records, leaderboard files (other files are left).

    Raises:
        ValueError: ``path`` is a file, or a non-empty directory without ``overwrite`` (the message
            names ``--overwrite`` and ``--resume``).
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {p} is a file, not a directory")
    if p.is_dir() and any(p.iterdir()):
        if not overwrite:
            what = "a run (manifest.json)" if (p / MANIFEST_FILE).exists() else "files"
            raise ValueError(f"--out {p} already holds {what}; results are never replaced silently: choose a new "
                             f"directory, finish that run with `fwgym evaluate --resume {p}`, or replace it with "
                             "--overwrite")
        if not clear:
            return p
        for name in (MANIFEST_FILE, RESULTS_FILE, TRACES_FILE, SUPERSEDED_FILE, STARTED_FILE, "leaderboard.md",
                     "leaderboard.csv", "meta.json"):
            (p / name).unlink(missing_ok=True)
    return p


@dataclass(frozen=True)
class TornTail:
    """A last line cut off by a kill: the file, its size and the bytes dropped."""

    path: Path
    dropped_bytes: int

    def __str__(self) -> str:
        return f"{self.path}: dropped a torn last line of {self.dropped_bytes} bytes (an episode in flight when the run stopped)"


def _cut_torn_tail(path: Path) -> TornTail | None:
    """Truncate ``path`` after its last newline when it does not end with one (the line a kill tore)."""
    if not path.is_file():
        return None
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return None
        # find the last newline, reading backwards in blocks
        pos, keep = size, 0
        while pos > 0:
            step = min(1 << 16, pos)
            pos -= step
            fh.seek(pos)
            block = fh.read(step)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = pos + i + 1
                break
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return TornTail(path, size - keep)


def status_counts(records: Iterable[Mapping]) -> dict:
    """``{"by_status": {status: n}, "harness_error", "agent_error", "scored"}`` of records."""
    by: dict[str, int] = {}
    harness = agent = scored = 0
    for r in records:
        by[r["status"]] = by.get(r["status"], 0) + 1
        harness += r["status"] == HARNESS_ERROR
        agent += str(r.get("reason", "")).startswith(AGENT_ERROR_PREFIX)
        scored += is_scored(r)
    return {"by_status": dict(sorted(by.items())), "harness_error": harness, "agent_error": agent, "scored": scored}


@dataclass
class RunDir:
    """A run directory being written by one session (:meth:`create` or :meth:`resume`).

    Attributes:
        path: the directory. manifest: its manifest (kept in memory, written by :meth:`save`).
        session: this session's number (1 for the first invocation). previous: the records already
            there (resume; checked against the manifest, :mod:`fwgym.evaluation.integrity`), in file order.
        torn: torn last lines cut off at resume. started: the started-episodes log's entries (all sessions).
    """

    path: Path
    manifest: dict
    session: int = 1
    previous: list[dict] = field(default_factory=list)
    torn: list[TornTail] = field(default_factory=list)
    started: list[dict] = field(default_factory=list)
    _lock: IO[str] | None = None
    _begun: bool = False
    _written: list[dict] = field(default_factory=list)  # the records this session wrote, in order
    _write_lock: threading.Lock = field(default_factory=threading.Lock)

    # -- opening ----------------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, manifest: dict, overwrite: bool = False) -> RunDir:
        """Start a new run in ``path`` (created; see :func:`check_new_run_dir`) and write its manifest
        (status ``running``, session 1).

        Raises:
            ValueError: as :func:`check_new_run_dir`; another session holds the directory.
        """
        p = check_new_run_dir(path, overwrite, clear=True)
        p.mkdir(parents=True, exist_ok=True)
        run = cls(path=p, manifest=dict(manifest), session=1)
        run._acquire()
        run.manifest["sessions"] = []
        run.begin()
        return run

    def begin(self) -> None:
        """Record this session in the manifest (status ``running``) and write it; :meth:`create` does it,
        a resumed run does it once its settings are checked (idempotent)."""
        if self._begun:
            return
        self._begun = True
        self.manifest.setdefault("sessions", []).append(
            {"session": self.session, "started": now(), "ended": None, "status": "running"})
        self.manifest["status"] = "running"
        self.save()

    @classmethod
    def resume(cls, path: str | os.PathLike, settings=None) -> RunDir:
        """Reopen a run to finish it: cuts torn last lines off the records, started and traces files, checks
        every record against the manifest (:func:`fwgym.evaluation.integrity.check_records`: the records it
        hashes unchanged and in place; after them only the records of a killed last session, re-scored with
        ``settings`` when given) and the started log, and numbers the next session (recorded in the manifest
        by :meth:`begin`, or at the first :meth:`finalize`).

        Raises:
            ValueError: ``path`` holds no run manifest, a record or started line is not one the run wrote
                (the message names file:line), or another session holds the directory.
        """
        p = Path(path)
        manifest = read_manifest(p)
        if manifest is None:
            raise ValueError(f"--resume {p}: no {MANIFEST_FILE} there; it is not a run directory of fwgym evaluate")
        sessions = manifest.setdefault("sessions", [])
        run = cls(path=p, manifest=manifest, session=max([int(x.get("session", 0)) for x in sessions] + [0]) + 1)
        run._acquire()
        try:
            run.torn = [t for t in (_cut_torn_tail(p / RESULTS_FILE), _cut_torn_tail(p / STARTED_FILE),
                                    _cut_torn_tail(p / TRACES_FILE)) if t]
            run.previous = check_records(p / RESULTS_FILE, manifest, settings)
            run.started = check_started(p / STARTED_FILE, manifest)
        except BaseException:
            run.close()
            raise
        return run

    def _acquire(self) -> None:
        fh = open(self.path / LOCK_FILE, "a")
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        except OSError:
            fh.close()
            raise ValueError(f"{self.path} is being written by another fwgym evaluate session") from None
        self._lock = fh

    def close(self) -> None:
        """Release the directory's lock."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None
            with contextlib.suppress(OSError):
                (self.path / LOCK_FILE).unlink()

    # -- paths and state --------------------------------------------------------------------------------

    @property
    def current_session(self) -> dict:
        """This session's entry of the manifest's ``sessions`` (the caller may add fields to it)."""
        self.begin()
        return self.manifest["sessions"][-1]

    @property
    def records_path(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def traces_path(self) -> Path:
        return self.path / TRACES_FILE

    @property
    def started_path(self) -> Path:
        return self.path / STARTED_FILE

    def done_keys(self) -> set[tuple[str, str]]:
        """(policy, case) pairs already recorded with a score (what a resume does not rerun)."""
        return {(r["policy"], r["case_id"]) for r in self.previous if is_scored(r)}

    def finished(self) -> bool:
        """Whether a reopened run has nothing left to do: its last session ended ``complete`` (every expected
        episode scored), no torn line was cut, and its records are exactly the ones the manifest hashes (none of a
        killed session to finalize). A resume of such a run plays nothing and should leave it as it is (no
        session added)."""
        records = self.manifest.get("records") or {}
        return (self.manifest.get("status") == "complete" and not self.torn and not self._begun
                and len(self.previous) == int(records.get("count", -1)))

    def sent_cases(self) -> set[str]:
        """Ids of the cases whose prompts earlier sessions sent to an agent (not one of fwgym's named policies)."""
        return {str(e.get("case_id")) for e in self.started if e.get("agent")}

    def append(self, record: Mapping) -> None:
        """Write one record of this session: appended to the records file (:func:`append_record`) and kept in
        memory (what :meth:`finalize` writes). Thread-safe."""
        stored = stored_record(record)
        with self._write_lock:
            append_record(self.records_path, stored)
            self._written.append(stored)

    def start(self, entries: Sequence[Mapping]) -> None:
        """Log episodes as started (before their first observation is sent): ``{"episode_id", "policy",
        "case_id", "agent"}`` each, one write."""
        if not entries:
            return
        text = "".join(dumps_line(dict(e), sort_keys=True) for e in entries)
        with self._write_lock, open(self.started_path, "a", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
        self.started.extend(dict(e) for e in entries)

    @property
    def written(self) -> list[dict]:
        """The records this session wrote, in order."""
        with self._write_lock:
            return list(self._written)

    def save(self) -> None:
        """Write the manifest (atomically)."""
        self.manifest["updated"] = now()
        write_manifest(self.path, self.manifest)

    # -- ending ------------------------------------------------------------------------------------------

    def _foreign_lines(self, known: Sequence[Mapping]) -> list[dict]:
        """The lines of the records file that are none of ``known`` (the run's own records), in file order."""
        if not self.records_path.is_file():
            return []
        left: dict[str, int] = {}
        for r in known:
            h = record_sha256(r)
            left[h] = left.get(h, 0) + 1
        out = []
        with open(self.records_path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                line_hash = canonical_line_hash(line)
                if line_hash is not None and left.get(line_hash, 0) > 0:
                    left[line_hash] -= 1
                    continue
                try:
                    value = json.loads(line)
                except (ValueError, RecursionError):
                    value = None
                item = value if isinstance(value, dict) else {}
                out.append({"line": n, "sha256": hashlib.sha256(line.encode("utf-8", "replace")).hexdigest(),
                            "policy": str(item.get("policy"))[:200], "case_id": str(item.get("case_id"))[:200]})
        return out

    def finalize(self, expected: Sequence[tuple[str, str]], status: str | None = None) -> dict:
        """End the session: rewrite ``results.jsonl`` from the run's own records (those checked at resume and
        those this session wrote; a line anyone else appended is refused: left out, listed in the manifest's
        ``refused_lines`` and counted in its ``history``), one per (policy, case) (the latest attempt) in the
        order of ``expected``; move superseded records to ``superseded.jsonl`` with their reason; count; hash;
        set the status (``complete`` when every expected episode is scored, else ``incomplete``, or
        ``status`` when given, e.g. ``interrupted``) and write the manifest.

        Args:
            expected: every (policy, case) pair of the run, in the order records are written.

        Returns:
            The manifest's ``counts``.

        Raises:
            ValueError: the run's records hold a (policy, case) pair the run does not have.
        """
        self.begin()
        own = self.previous + self.written
        foreign = self._foreign_lines(own)
        latest: dict[tuple[str, str], dict] = {}
        superseded: list[dict] = []
        for r in own:
            key = (r["policy"], r["case_id"])
            if key in latest:
                superseded.append(latest[key])
            latest[key] = r
        order = {k: i for i, k in enumerate(expected)}
        stray = [k for k in latest if k not in order]
        if stray:
            raise ValueError(f"{self.records_path} holds records of (policy, case) pairs the run does not have, e.g. "
                             f"{stray[0]}")
        keep = sorted(latest.values(), key=lambda r: order[(r["policy"], r["case_id"])])
        for r in superseded:
            append_jsonl(self.path / SUPERSEDED_FILE, {**r, "superseded_reason": superseded_reason(r)},
                         sort_keys=True, fsync=True)
        write_jsonl(self.records_path, keep, sort_keys=True)
        with open(self.records_path, "rb") as fh:
            os.fsync(fh.fileno())
        counts = {"expected": len(expected), "recorded": len(keep), "missing": len(expected) - len(keep),
                  **status_counts(keep)}
        complete = counts["missing"] == 0 and counts["harness_error"] == 0
        self.manifest["status"] = status or ("complete" if complete else "incomplete")
        self.manifest["counts"] = counts
        prefix = f"{self.session}:"
        self.current_session.update(ended=now(), status=self.manifest["status"],
                                    episodes=sum(str(r.get("episode_id") or "").startswith(prefix) for r in own),
                                    refused_lines=len(foreign))
        before = self.manifest.get("records") or {}
        self.manifest["records"] = {
            "file": RESULTS_FILE, "count": len(keep), "sha256": file_sha256(self.records_path),
            "sha256_by_line": [record_sha256(r) for r in keep],
            "superseded": len(superseded) + int(before.get("superseded", 0))}
        self._end_logs(keep, superseded, foreign)
        first = [r for r in keep if r["policy"] == expected[0][0]] if expected else []
        if first:
            self.manifest["coverage"] = coverage(first)
        self.save()
        self.previous, self._written = keep, []
        return counts

    def _end_logs(self, keep: Sequence[Mapping], superseded: Sequence[Mapping], foreign: Sequence[Mapping]) -> None:
        """fsync and hash the started log; update the manifest's ``history`` and ``refused_lines``."""
        n_started = 0
        if self.started_path.is_file():
            with open(self.started_path, "rb") as fh:
                os.fsync(fh.fileno())
                n_started = sum(1 for line in fh if line.strip())
            self.manifest["started"] = {"file": STARTED_FILE, "count": n_started,
                                        "sha256": prefix_sha256(self.started_path, n_started)}
        history = superseded_history(self.manifest.get("history"), superseded)
        recorded = len(keep) + sum(history["superseded"].values())
        refused = list(self.manifest.get("refused_lines") or []) + [{**f, "session": self.session} for f in foreign]
        if refused:
            self.manifest["refused_lines"] = refused
        self.manifest["history"] = {
            "sessions": len(self.manifest.get("sessions") or []), **history,
            "lost_in_flight": max(0, n_started - recorded) if n_started else 0, "refused_lines": len(refused),
            "exposed": sum(bool(r.get("exposed")) for r in keep)}


def superseded_history(history: Mapping | None, superseded: Iterable[Mapping]) -> dict:
    """The run history's account of superseded records, cumulative over sessions (``history``: the manifest's
    so far), the same for every writer of run directories (``fwgym evaluate`` and
    :mod:`fwgym.integrations.runs`):

    * ``superseded``: ``{reason: count}`` (:func:`superseded_reason`);
    * ``retried_after_spend``: ``{policy: {"attempts", "calls", "credits"}}`` over the superseded attempts that
      made tool calls or spent credits before their infrastructure failed. Such an attempt is never scored, but
      an agent (or client, or server) that keeps what it bought can use it in the attempt that is: its row's
      calls and credits then understate what the score cost (the ``RETRIED AFTER SPEND`` mark,
      :func:`fwgym.evaluation.marks.format_marks`).
    """
    h = history or {}
    reasons = dict(h.get("superseded") or {})
    spent = {p: dict(v) for p, v in (h.get("retried_after_spend") or {}).items()}
    for r in superseded:
        why = superseded_reason(r)
        reasons[why] = reasons.get(why, 0) + 1
        calls, credits = int(r.get("calls") or 0), float(r.get("credits") or 0)
        if calls or credits:
            a = spent.setdefault(str(r["policy"]), {"attempts": 0, "calls": 0, "credits": 0.0})
            a["attempts"] += 1
            a["calls"] += calls
            a["credits"] += credits
    return {"superseded": dict(sorted(reasons.items())), "retried_after_spend": dict(sorted(spent.items()))}


def superseded_reason(record: Mapping) -> str:
    """Why a record was replaced by a later attempt: ``"harness_error: KIND"`` (the only records a run plays
    again), else its status."""
    if record.get("status") == HARNESS_ERROR:
        return f"{HARNESS_ERROR}: {record.get('harness_kind') or 'infrastructure'}"
    return str(record.get("status"))
