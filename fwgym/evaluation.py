"""Batch evaluation of policies on benchmark cases, results files and the leaderboard (DESIGN §5, §9).

Every episode runs through :func:`fwgym.agents.run_episode` on an :class:`~fwgym.envs.fwbench.FWBenchEnv`,
so baselines, oracles, learned and LLM agents are scored by the same code. Results are one JSON
record per (policy, case); :func:`leaderboard` aggregates them with the cohort weights of
:func:`fwgym.scoring.case_weights`.
"""
from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Sequence

from fwgym.agents.base import run_episode
from fwgym.baselines.registry import DEFAULT_POLICIES, make_policy
from fwgym.cases import build_cases
from fwgym.data import DOMAINS
from fwgym.scoring import aggregate, load_sigma

RECORD_FIELDS = ("policy", "case_id", "domain", "cohort", "lead", "series_id", "split", "loss", "floor", "R", "S",
                 "credits", "calls", "valid", "status", "reason", "tool_counts", "levels")


def select_cases(split: str = "test", domains: Sequence[str] = DOMAINS, lead: str | None = None,
                 limit: int | None = None, case_ids: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """``[(domain, case_id), ...]`` to evaluate, in split order.

    Args:
        limit: at most this many cases per domain, evenly spaced through the split (keeps every cohort).
        case_ids: restrict to these ids.

    Raises:
        ValueError: unknown domain/split, or ``limit`` < 1.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    wanted = set(case_ids) if case_ids is not None else None
    out = []
    for d in domains:
        if d not in DOMAINS:
            raise ValueError(f"unknown domain {d!r}; expected some of {list(DOMAINS)}")
        cases = [c for c in build_cases(d, split) if (lead is None or c.lead == lead)
                 and (wanted is None or c.case_id in wanted)]
        if limit is not None and len(cases) > limit:
            step = len(cases) / limit
            cases = [cases[int(i * step)] for i in range(limit)]
        out += [(d, c.case_id) for c in cases]
    return out


_WORKER_ENVS: dict = {}


def _env_for(domain: str, split: str, sigma: dict | None):
    from fwgym.envs.fwbench import FWBenchEnv

    key = (domain, split, json.dumps(sigma, sort_keys=True))
    if key not in _WORKER_ENVS:
        _WORKER_ENVS[key] = FWBenchEnv(domain=domain, split=split, sigma=sigma)
    return _WORKER_ENVS[key]


def _make_agent(policy):
    return make_policy(policy) if isinstance(policy, str) else policy()


def policy_label(policy) -> str:
    """Display name of a policy given as a name or an agent factory."""
    from fwgym.agents.base import agent_name

    return policy if isinstance(policy, str) else agent_name(policy())


def _run_chunk(task: tuple) -> list[dict]:
    split, policies, chunk, sigma = task
    agents = [_make_agent(p) for p in policies]
    records = []
    for domain, case_id in chunk:
        env = _env_for(domain, split, sigma)
        for agent in agents:
            records.append(run_episode(env, agent, options={"case_id": case_id}).record)
    return records


def evaluate(policies: Sequence[str] = DEFAULT_POLICIES, split: str = "test", domains: Sequence[str] = DOMAINS,
             lead: str | None = None, limit: int | None = None, case_ids: Iterable[str] | None = None,
             workers: int = 1, progress: bool | Callable[[int], None] = True,
             sigma: dict[str, float] | None = None) -> list[dict]:
    """Run every policy on every selected case.

    Args:
        policies: names accepted by :func:`fwgym.baselines.make_policy`, or picklable zero-argument
            factories returning an agent (learned or LLM agents); rows are named by ``agent.name``.
        split, domains, lead, limit, case_ids: see :func:`select_cases`.
        workers: local processes (1 = in this process). Results are identical for any value.
        progress: show a tqdm bar (True), nothing (False), or call ``progress(n_cases_done)``.
        sigma: per-domain sigma override (default: the frozen calibration).

    Returns:
        Records (dicts with :data:`RECORD_FIELDS`), sorted by (policy order, domain, case order).

    Raises:
        ValueError: unknown policy, domain or split; no case selected.
    """
    labels = [policy_label(p) for p in policies]  # validates names before any work
    if len(set(labels)) != len(labels):
        raise ValueError(f"policy names repeat: {labels}")
    selected = select_cases(split, domains, lead, limit, case_ids)
    if not selected:
        raise ValueError("no case selected")
    n_chunks = max(1, min(len(selected), workers * 8 if workers > 1 else 1))
    size = math.ceil(len(selected) / n_chunks)
    chunks = [selected[i : i + size] for i in range(0, len(selected), size)]
    if workers > 1:
        chunks = [selected[i : i + 16] for i in range(0, len(selected), 16)]
    tasks = [(split, tuple(policies), chunk, sigma) for chunk in chunks]

    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(selected), unit="case", desc=f"evaluate {split}", dynamic_ncols=True)
    results: list[list[dict]] = []
    try:
        if workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for chunk, recs in zip(chunks, pool.map(_run_chunk, tasks)):
                    results.append(recs)
                    _advance(bar, progress, len(chunk))
        else:
            for task in tasks:
                # one case at a time so the bar moves smoothly in a single process
                for item in task[2]:
                    results.append(_run_chunk((task[0], task[1], [item], task[3])))
                    _advance(bar, progress, 1)
    finally:
        if bar is not None:
            bar.close()
    order = {p: i for i, p in enumerate(labels)}
    case_order = {c: i for i, (_, c) in enumerate(selected)}
    records = [r for recs in results for r in recs]
    records.sort(key=lambda r: (order[r["policy"]], case_order[r["case_id"]]))
    return records


def _advance(bar, progress, n: int) -> None:
    if bar is not None:
        bar.update(n)
    elif callable(progress):
        progress(n)


def by_policy(records: Iterable[dict]) -> dict[str, list[dict]]:
    """Group records by policy, keeping first-seen order."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r["policy"]].append(r)
    return dict(groups)


def leaderboard(records: Sequence[dict]) -> list[dict]:
    """One row per policy, sorted by S: aggregate S, R, loss, floor, credits, calls, valid, n, and
    ``S[<cohort>]`` per cohort (cases weighted within each cohort as in :func:`fwgym.scoring.case_weights`).

    Raises:
        ValueError: policies evaluated on different case sets (rows would not be comparable).
    """
    groups = by_policy(records)
    case_sets = {p: frozenset(r["case_id"] for r in recs) for p, recs in groups.items()}
    if len(set(case_sets.values())) > 1:
        raise ValueError("policies were evaluated on different cases; merge complete result sets only")
    rows = []
    for policy, recs in groups.items():
        row = {"policy": policy, **aggregate(recs)}
        cohorts: dict[str, list[dict]] = defaultdict(list)
        for r in recs:
            cohorts[r["cohort"]].append(r)
        for cohort in sorted(cohorts):
            row[f"S[{cohort}]"] = aggregate(cohorts[cohort], fields=("S",))["S"]
        rows.append(row)
    rows.sort(key=lambda r: (r["S"], r["policy"]))
    return rows


def format_leaderboard(rows: Sequence[dict]) -> str:
    """Markdown table of :func:`leaderboard` rows."""
    if not rows:
        return "(no results)"
    cohort_cols = [k for k in rows[0] if k.startswith("S[")]
    head = ["policy", "S", "R", "loss", "credits", "calls", "valid"] + cohort_cols
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}", f"{r['R']:.4f}", f"{r['loss']:.5f}", f"{r['credits']:,.1f}",
                 f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"] + [f"{r[c]:.4f}" for c in cohort_cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_results(records: Sequence[dict], out_dir: str | Path, meta: dict | None = None) -> dict[str, Path]:
    """Write ``results.jsonl`` (one record per line), ``leaderboard.md``, ``leaderboard.csv`` and
    ``meta.json`` into ``out_dir`` (created if needed). Returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / n for k, n in (("results", "results.jsonl"), ("markdown", "leaderboard.md"),
                                     ("csv", "leaderboard.csv"), ("meta", "meta.json"))}
    with open(paths["results"], "w") as fh:
        for r in records:
            fh.write(json.dumps({k: r.get(k) for k in RECORD_FIELDS}, sort_keys=True) + "\n")
    rows = leaderboard(records)
    paths["markdown"].write_text(format_leaderboard(rows) + "\n")
    with open(paths["csv"], "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    paths["meta"].write_text(json.dumps(meta or {}, indent=2, sort_keys=True) + "\n")
    return paths


def read_results(paths: Iterable[str | Path]) -> list[dict]:
    """Read and merge ``results.jsonl`` files (or directories holding one).

    Raises:
        FileNotFoundError: a path does not exist. ValueError: a (policy, case) pair appears twice.
    """
    records, seen = [], set()
    for p in paths:
        p = Path(p)
        if p.is_dir():
            p = p / "results.jsonl"
        with open(p) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    key = (r["policy"], r["case_id"])
                    if key in seen:
                        raise ValueError(f"{p}: duplicate result for policy {key[0]!r} on case {key[1]!r}")
                    seen.add(key)
                    records.append(r)
    return records


def run_meta(split: str, policies: Sequence[str], workers: int, sigma: dict | None = None) -> dict:
    """Provenance written next to results."""
    from fwgym import __version__

    return {"fwgym_version": __version__, "split": split, "policies": list(policies), "workers": workers,
            "sigma": sigma or load_sigma(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpu_count": os.cpu_count()}


def calibrate_sigma(split: str = "dev", policy: str = "hour_of_day_empirical", workers: int = 1,
                    progress: bool = True) -> dict:
    """Per-domain sigma = weighted mean excess loss (loss - floor) of ``policy`` on ``split`` (DESIGN §5).

    The dev split lies strictly before the test period, so sigma uses no test outcome.

    Returns:
        ``{"sigma": {domain: value}, "policy", "split", "cases": {domain: n}}``.
    """
    ones = {d: 1.0 for d in DOMAINS}  # sigma does not enter loss or floor
    out = {"sigma": {}, "policy": policy, "split": split, "cases": {}}
    for d in DOMAINS:
        recs = evaluate([policy], split=split, domains=[d], workers=workers, progress=progress, sigma=ones)
        for r in recs:
            r["excess"] = r["loss"] - r["floor"]
        out["sigma"][d] = aggregate(recs, fields=("excess",))["excess"]
        out["cases"][d] = len(recs)
    return out
