"""Results files: ``results.jsonl`` (one :class:`~fwgym.evaluation.records.Record` per line) and the
run's ``meta.json``, ``leaderboard.md`` and ``leaderboard.csv`` (DESIGN §9).

``meta.json`` pins the records it was written with (count and a sha256 of the (policy, case) pairs)
and the run's split coverage, so :func:`read_results` rejects a truncated or edited file and knows
whether the run declared a subset of the split.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from fwgym.evaluation.leaderboard import AUTO, format_breakdowns, format_leaderboard, leaderboard, write_csv
from fwgym.evaluation.records import CORE_FIELDS, by_policy, check_record, check_result_set, coverage, stored_record
from fwgym.jsonl import iter_jsonl, write_jsonl
from fwgym.scoring import load_sigma

__all__ = ["RESULTS_FILE", "write_results", "read_results", "run_meta"]

#: name of a run directory's records file
RESULTS_FILE = "results.jsonl"


def _digest(records: Iterable[Mapping]) -> str:
    """sha256 of the sorted (policy, case) pairs (``meta.json``'s ``results.sha256``)."""
    keys = sorted(f"{r['policy']}\t{r['case_id']}" for r in records)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def write_results(records: Sequence[Mapping], out_dir: str | Path, meta: dict | None = None,
                  reference: str | None = AUTO) -> dict[str, Path]:
    """Write ``results.jsonl`` (one record per line with every schema field it holds, keys sorted),
    ``leaderboard.md`` (with breakdowns and bootstrap intervals against ``reference``),
    ``leaderboard.csv`` and ``meta.json`` into ``out_dir`` (created if needed).

    ``meta.json`` gets a ``results`` entry (record count, policies, case count, sha256 of the
    (policy, case) pairs, split coverage) so :func:`read_results` can reject a truncated or edited file.

    Args:
        records: result records (:class:`~fwgym.evaluation.records.Record`), e.g. from
            :func:`fwgym.evaluation.evaluate`.
        out_dir: the run directory.
        meta: provenance to store in ``meta.json`` (e.g. :func:`run_meta` plus the suite).
        reference: the intervals' reference as :func:`~fwgym.evaluation.leaderboard.reference_policy`
            takes it (default ``"auto"``: hour_of_day_empirical, or its samples twin, when present).

    Returns:
        ``{"results", "markdown", "csv", "meta"}`` paths.

    Raises:
        ValueError: a record that does not fit the schema
            (:func:`~fwgym.evaluation.records.check_record`); as
            :func:`~fwgym.evaluation.records.check_result_set`; a named ``reference`` not among the policies.
    """
    out = Path(out_dir)
    paths = {k: out / n for k, n in (("results", RESULTS_FILE), ("markdown", "leaderboard.md"),
                                     ("csv", "leaderboard.csv"), ("meta", "meta.json"))}
    stored = [stored_record(r) for r in records]
    rows = leaderboard(stored, reference=reference)
    groups = by_policy(stored)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(paths["results"], stored, sort_keys=True)
    paths["markdown"].write_text(format_leaderboard(rows) + "\n\n" + format_breakdowns(rows) + "\n")
    write_csv(rows, paths["csv"])
    first = next(iter(groups.values()))
    meta = {**(meta or {}), "results": {"records": len(stored), "policies": list(groups), "cases": len(first),
                                        "sha256": _digest(stored), "coverage": coverage(first)}}
    # default=str: agent factories (e.g. functools.partial) in "policies" are written as their repr
    paths["meta"].write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return paths


def _results_info(path: Path) -> dict | None:
    """The ``results`` entry of the ``meta.json`` beside a ``results.jsonl`` (``None``: none readable)."""
    meta_path = path.parent / "meta.json"
    if path.name != RESULTS_FILE or not meta_path.is_file():
        return None
    try:
        info = json.loads(meta_path.read_text()).get("results")
    except (json.JSONDecodeError, AttributeError):
        return None
    return info if isinstance(info, dict) else None


def read_results(paths: Iterable[str | Path], allow_partial: bool = True) -> list[dict]:
    """Read and merge result files (``results.jsonl`` files or directories holding one).

    Every line must be a record of the schema holding at least
    :data:`~fwgym.evaluation.records.CORE_FIELDS` (results files of fwgym 0.1.0 hold only those);
    the records come back as written. A directory's ``meta.json`` (written by :func:`write_results`)
    states how many records the run wrote and their (policy, case) digest: a file that does not match
    is rejected as partial. The merged set must pass
    :func:`~fwgym.evaluation.records.check_result_set` (no duplicated (policy, case) pair, every
    policy on the same cases). With ``allow_partial=False``, it must also cover the whole frozen
    split index, unless every source is a run that declared a subset in its meta (evaluated with a
    case limit, lead or domain filter: its coverage says so).

    Raises:
        FileNotFoundError: a path does not exist. ValueError: duplicated or partial results, a
            truncated file, malformed JSON, a record that lacks a core field or holds a field the
            schema does not name (the message names ``file:line``).
    """
    records: list[dict] = []
    declared_subset: list[bool] = []
    seen: dict[tuple[str, str], Path] = {}
    for p in map(Path, paths):
        if p.is_dir():
            p = p / RESULTS_FILE
        if not p.is_file():
            raise FileNotFoundError(f"no results file {p}")
        recs = []
        for n, r in iter_jsonl(p):
            check_record(r, required=CORE_FIELDS, where=f"{p}:{n}")
            recs.append(r)
        info = _results_info(p)
        if info is not None:
            if len(recs) != info.get("records") or _digest(recs) != info.get("sha256"):
                raise ValueError(f"partial results file {p}: it holds {len(recs)} records but "
                                 f"{p.parent / 'meta.json'} says {info.get('records')} (or other (policy, case) "
                                 "pairs); it was truncated or edited")
            declared_subset.append(not info.get("coverage", {}).get("complete", False))
        else:
            declared_subset.append(False)
        for r in recs:
            key = (r["policy"], r["case_id"])
            if key in seen:
                raise ValueError(f"duplicated result set: policy {key[0]!r} on case {key[1]!r} appears in {seen[key]} "
                                 f"and {p}; merge each run once")
            seen[key] = p
        records += recs
    if records:
        check_result_set(records, complete=not allow_partial and not all(declared_subset))
    return records


def run_meta(split: str, policies: Sequence[str], workers: int, sigma: dict | None = None) -> dict:
    """Provenance written next to results: fwgym version, split, policies, workers, sigma, creation
    time (UTC, ISO 8601) and the machine's CPU count."""
    from fwgym import __version__

    return {"fwgym_version": __version__, "split": split, "policies": list(policies), "workers": workers,
            "sigma": sigma or load_sigma(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpu_count": os.cpu_count()}
