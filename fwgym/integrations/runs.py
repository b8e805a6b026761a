"""Run directories of episodes played outside ``fwgym evaluate``: through an MCP client (``fwgym mcp serve --out
RUN``) or inspect-ai (``fwgym import-inspect LOG --out RUN``), so that their rows join ``fwgym leaderboard``.

The directory is a run directory like ``fwgym evaluate``'s (:mod:`fwgym.evaluation.rundir`): ``manifest.json``
(settings in the same layout, :func:`fwgym.evaluation.manifest.run_settings`, so the leaderboard compares them
with any other run; record hashes), ``results.jsonl`` (one record per (policy, case)) and ``traces.jsonl``. Its
manifest also says where the episodes come from (``origin``: ``{"kind": "mcp" | "inspect", ...}``), and every
session that added episodes (``sessions``: when, which command, which client or log).

:func:`add_episodes` adds records to such a directory (creating it), under a lock, so sequential or
parallel MCP servers (one per case) write one directory:

* it refuses a directory of another origin (a ``fwgym evaluate`` run: results are never mixed or replaced
  silently), other compared settings (:data:`~fwgym.evaluation.manifest.COMPARED_SETTINGS` and the domains),
  a records file that is not the one the manifest hashes (an edit), and a (policy, case) pair that is
  already recorded with a score;
* a ``harness_error`` record of a pair (an episode whose infrastructure failed: never scored) is replaced
  by a later attempt and kept in ``superseded.jsonl``;
* the status is ``complete`` when every record is scored, else ``incomplete`` (the leaderboard refuses it
  until the failed episodes are played again).
"""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from fwgym.errors import HARNESS_ERROR
from fwgym.evaluation.manifest import (COMPARED_SETTINGS, MANIFEST_FILE, MANIFEST_VERSION, environment, file_sha256,
                                       model_revisions, new_run_id, now, read_manifest, record_sha256, run_settings,
                                       settings_differences, write_manifest)
from fwgym.evaluation.records import coverage, is_scored, stored_record
from fwgym.evaluation.rundir import (LOCK_FILE, RESULTS_FILE, SUPERSEDED_FILE, TRACES_FILE, status_counts,
                                     superseded_history, superseded_reason)
from fwgym.forecasters.registry import describe_pool
from fwgym.jsonl import append_jsonl, iter_jsonl, write_jsonl
from fwgym.traces import Trace

__all__ = ["ORIGINS", "add_episodes", "episode_settings", "recorded_keys"]

#: the kinds of origin a run directory of this module says
ORIGINS = ("mcp", "inspect")
#: seconds to wait for another writer's lock
LOCK_TIMEOUT_S = 120.0


def episode_settings(*, suite: str, split: str, domains: Sequence[str], lead: str | None, cases: Sequence[str],
                     policies: Sequence[str], agents: Mapping[str, Any], env_kwargs: Mapping[str, Any],
                     max_calls: int) -> dict:
    """The manifest settings of externally played episodes (:func:`fwgym.evaluation.manifest.run_settings`
    with no case limit: the cases are the ones played)."""
    return run_settings(suite=suite, split=split, domains=domains, lead=lead, limit=None, cases=list(cases),
                        policies=list(policies), agents=agents, env_kwargs=env_kwargs, max_calls=max_calls)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.mkdir(parents=True, exist_ok=True)
    with open(path / LOCK_FILE, "a") as fh:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise ValueError(f"{path} is being written by another fwgym process (waited "
                                     f"{LOCK_TIMEOUT_S:g} s)") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _existing(path: Path, origin_kind: str) -> tuple[dict | None, list[dict]]:
    """The directory's manifest and records (``None, []`` for a new directory); refuses what may not be added to."""
    manifest = read_manifest(path)
    if manifest is None:
        stray = [p.name for p in path.iterdir() if p.name != LOCK_FILE] if path.is_dir() else []
        if stray:
            raise ValueError(f"--out {path} holds files but no {MANIFEST_FILE} ({', '.join(sorted(stray)[:5])}); "
                             "choose a new directory (results are never replaced silently)")
        return None, []
    kind = (manifest.get("origin") or {}).get("kind")
    if kind != origin_kind:
        what = f"episodes from {kind}" if kind else "a run of fwgym evaluate"
        raise ValueError(f"--out {path} holds {what}; {origin_kind} episodes go to a directory of their own "
                         "(results are never mixed or replaced silently)")
    records_file = path / RESULTS_FILE
    records = [r for _, r in iter_jsonl(records_file)] if records_file.is_file() else []
    info = manifest.get("records") or {}
    if records_file.is_file() and file_sha256(records_file) != info.get("sha256"):
        raise ValueError(f"{records_file} is not the file its manifest hashes (sha256 differs): it was edited; "
                         "refusing to add episodes to it")
    return manifest, records


def recorded_keys(path: str | os.PathLike, origin_kind: str) -> set[tuple[str, str]]:
    """The (policy, case) pairs ``path`` holds with a score (``set()`` for a new directory): what a new
    episode may not repeat; checks the directory as :func:`add_episodes` does.

    Raises:
        ValueError: a directory that episodes of ``origin_kind`` may not be added to.
    """
    p = Path(path)
    if not p.exists():
        return set()
    _, records = _existing(p, origin_kind)
    return {(r["policy"], r["case_id"]) for r in records if is_scored(r)}


def check_addable(path: str | os.PathLike, keys: Sequence[tuple[str, str]], *, settings: Mapping[str, Any],
                  origin_kind: str) -> None:
    """Check, before an episode is played, that :func:`add_episodes` will accept its record in ``path``: no scored
    episode of the same (policy, case) pair there and the same compared settings (a server refuses at start, not
    after the client played the case).

    Raises:
        ValueError: as :func:`add_episodes` would (the directory is not touched).
    """
    p = Path(path)
    if not p.exists():
        return
    manifest, old = _existing(p, origin_kind)
    latest = {(r["policy"], r["case_id"]): r for r in old}
    taken = [k for k in keys if k in latest and is_scored(latest[k])]
    if taken:
        raise ValueError(f"{p} already holds a scored episode of policy {taken[0][0]!r} on case {taken[0][1]!r}; "
                         "results are never replaced (choose another --policy-name or directory)")
    _merged_settings(p, manifest, settings, list(keys))


def add_episodes(path: str | os.PathLike, records: Sequence[Mapping], *, settings: Mapping[str, Any],
                 origin: Mapping[str, Any], session: Mapping[str, Any] | None = None,
                 traces: Iterable[Trace] = ()) -> dict:
    """Add finished episodes to the run directory ``path`` (created when missing; module docstring).

    Args:
        path: the run directory.
        records: the episodes' records (:func:`fwgym.agents.run_episode`'s, the record schema).
        settings: the manifest settings of these episodes (:func:`episode_settings`); the cases and policies
            are merged with the directory's, every other setting must be equal.
        origin: ``{"kind": "mcp" | "inspect", ...}``: where the episodes come from (the directory's first
            origin is kept; later ones are in ``sessions``).
        session: facts of this addition for the manifest's ``sessions`` (command, client, log, ...).
        traces: trace lines to append to ``traces.jsonl``.

    Returns:
        The manifest's ``counts``.

    Raises:
        ValueError: as the module docstring says (the directory is left unchanged).
    """
    if origin.get("kind") not in ORIGINS:
        raise ValueError(f"origin kind must be one of {list(ORIGINS)}, got {origin.get('kind')!r}")
    p = Path(path)
    with _locked(p):
        manifest, old = _existing(p, origin["kind"])
        new = [stored_record(r) for r in records]
        keys = [(r["policy"], r["case_id"]) for r in new]
        if len(set(keys)) != len(keys):
            raise ValueError("the episodes to add repeat a (policy, case) pair")
        latest = {(r["policy"], r["case_id"]): r for r in old}
        taken = [k for k in keys if k in latest and is_scored(latest[k])]
        if taken:
            raise ValueError(f"{p} already holds a scored episode of policy {taken[0][0]!r} on case {taken[0][1]!r}; "
                             "results are never replaced (choose another --policy-name or directory)")
        merged = _merged_settings(p, manifest, settings, keys)
        superseded = [latest[k] for k in keys if k in latest]
        latest.update(zip(keys, new))
        order = {c: i for i, c in enumerate(merged["cases"])}
        pols = {q: i for i, q in enumerate(merged["policies"])}
        keep = sorted(latest.values(), key=lambda r: (pols[r["policy"]], order[r["case_id"]]))
        for r in superseded:
            append_jsonl(p / SUPERSEDED_FILE, {**r, "superseded_reason": superseded_reason(r)}, sort_keys=True,
                         fsync=True)
        for t in traces:
            append_jsonl(p / TRACES_FILE, t)
        write_jsonl(p / RESULTS_FILE, keep, sort_keys=True)
        with open(p / RESULTS_FILE, "rb") as fh:
            os.fsync(fh.fileno())
        # the policies each session added say which sessions played a row (its code versions: fwgym.evaluation.marks)
        session = {"policies": list(dict.fromkeys(k[0] for k in keys)), **dict(session or {})}
        return _write_manifest(p, manifest, merged, keep, origin, session, len(new), superseded)


def _merged_settings(p: Path, manifest: Mapping | None, settings: Mapping, keys: list) -> dict:
    merged = dict(settings)
    if manifest is None:
        return merged
    old = manifest.get("settings") or {}
    diff = settings_differences(old, settings, keys=(*COMPARED_SETTINGS, "domains", "lead", "env_kwargs",
                                                     "max_calls"))
    if diff:
        raise ValueError(f"{p} holds episodes of other settings, so they would not be comparable: " + "; ".join(diff))
    cases = list(old.get("cases") or []) + [c for c in settings.get("cases", []) if c not in (old.get("cases") or [])]
    policies = list(old.get("policies") or []) + [q for q in settings.get("policies", [])
                                                  if q not in (old.get("policies") or [])]
    agents = {**(old.get("agents") or {}), **(settings.get("agents") or {})}
    for c in {k[1] for k in keys} - set(cases):
        cases.append(c)
    base = {k: v for k, v in settings.items() if k not in ("cases", "policies", "agents", "cases_sha256", "n_cases")}
    import hashlib

    return {**base, "cases": cases, "cases_sha256": hashlib.sha256("\n".join(cases).encode()).hexdigest(),
            "n_cases": len(cases), "policies": policies, "agents": agents}


def _write_manifest(p: Path, manifest: Mapping | None, settings: dict, keep: list[dict], origin: Mapping,
                    session: Mapping | None, added: int, superseded: Sequence[Mapping]) -> dict:
    stamp = now()
    out = dict(manifest) if manifest is not None else {
        "manifest_version": MANIFEST_VERSION, "run_id": new_run_id(), "created": stamp, "command": None,
        "args": None, "origin": dict(origin), "sessions": []}
    env = environment()
    sessions = list(out.get("sessions") or [])
    sessions.append({"session": len(sessions) + 1, "started": stamp, "ended": stamp, "episodes": added,
                     "origin": dict(origin), "environment": env, **dict(session or {})})
    counts = {"expected": len(keep), "recorded": len(keep), "missing": 0, **status_counts(keep)}
    complete = not any(r["status"] == HARNESS_ERROR for r in keep)
    by_policy: dict[str, list[dict]] = {}
    for r in keep:
        by_policy.setdefault(r["policy"], []).append(r)
    out.update({
        "status": "complete" if complete else "incomplete", "updated": stamp, "settings": settings,
        "environment": env, "models": model_revisions(settings["forecast_pool"]),
        "forecast_pool": describe_pool(settings["forecast_pool"]), "sessions": sessions, "counts": counts,
        "records": {"file": RESULTS_FILE, "count": len(keep), "sha256": file_sha256(p / RESULTS_FILE),
                    "sha256_by_line": [record_sha256(r) for r in keep],
                    "superseded": len(superseded) + int((out.get("records") or {}).get("superseded", 0))},
        "history": {"sessions": len(sessions), **superseded_history(out.get("history"), superseded)},
        "coverage": coverage(next(iter(by_policy.values()))) if keep else {}})
    write_manifest(p, out)
    return counts
