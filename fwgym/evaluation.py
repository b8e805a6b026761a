"""Batch evaluation of policies on benchmark cases, results files and the leaderboard (DESIGN §5, §9).

Every episode runs through :func:`fwgym.agents.run_episode` on an :class:`~fwgym.envs.fwbench.FWBenchEnv`,
so baselines, oracles, learned and LLM agents are scored by the same code. Results are one JSON
record per (policy, case); :func:`leaderboard` aggregates them with the cohort weights of
:func:`fwgym.scoring.case_weights`.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from fwgym.agents.base import run_episode
from fwgym.baselines.registry import DEFAULT_POLICIES, FORECAST_TASK_POLICIES, make_policy
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

#: environment settings of the three evaluation suites
SUITES: dict[str, dict] = {
    "decision": {},
    "context": {"scenarios": True},
    "forecast": {"scenarios": True, "task": "forecast"},
}


def _env_for(domain: str, split: str, sigma: dict | None, env_kwargs: dict | None = None):
    from fwgym.envs.fwbench import FWBenchEnv

    key = (domain, split, json.dumps(sigma, sort_keys=True), json.dumps(env_kwargs or {}, sort_keys=True))
    if key not in _WORKER_ENVS:
        _WORKER_ENVS[key] = FWBenchEnv(domain=domain, split=split, sigma=sigma, **(env_kwargs or {}))
    return _WORKER_ENVS[key]


def _make_agent(policy):
    return make_policy(policy) if isinstance(policy, str) else policy()


def policy_label(policy) -> str:
    """Display name of a policy given as a name or an agent factory."""
    from fwgym.agents.base import agent_name

    return policy if isinstance(policy, str) else agent_name(policy())


def _run_chunk(task: tuple) -> list[dict]:
    split, policies, chunk, sigma, env_kwargs = task
    agents = [_make_agent(p) for p in policies]
    records = []
    for domain, case_id in chunk:
        env = _env_for(domain, split, sigma, env_kwargs)
        for agent in agents:
            records.append(run_episode(env, agent, options={"case_id": case_id}).record)
    return records


def evaluate(policies: Sequence[str] = DEFAULT_POLICIES, split: str = "test", domains: Sequence[str] = DOMAINS,
             lead: str | None = None, limit: int | None = None, case_ids: Iterable[str] | None = None,
             workers: int = 1, progress: bool | Callable[[int], None] = True,
             sigma: dict[str, float] | None = None, env_kwargs: dict | None = None,
             backend: str = "local", ray_address: str | None = None, chunk_size: int = 16) -> list[dict]:
    """Run every policy on every selected case.

    Args:
        policies: names accepted by :func:`fwgym.baselines.make_policy`, or picklable zero-argument
            factories returning an agent (learned or LLM agents); rows are named by ``agent.name``.
        split, domains, lead, limit, case_ids: see :func:`select_cases`.
        workers: local processes (``backend="local"``; 1 = in this process) or Ray CPUs to request
            for a local Ray cluster. Results are identical for any value and backend.
        progress: show a tqdm bar (True), nothing (False), or call ``progress(n_cases_done)``.
        sigma: per-domain sigma override (default: the frozen calibration).
        env_kwargs: extra :class:`~fwgym.envs.fwbench.FWBenchEnv` arguments (e.g. ``SUITES["context"]``).
        backend: ``"local"`` (this process or a process pool) or ``"ray"`` (a Ray cluster: local by
            default, or the one at ``ray_address``, e.g. ``"auto"`` or ``"ray://head:10001"``).
        chunk_size: cases per task sent to a worker.

    Returns:
        Records (dicts with :data:`RECORD_FIELDS`), sorted by (policy order, domain, case order).

    Raises:
        ValueError: unknown policy, domain, split or backend; no case selected; a named decision
            policy in a forecast-task env (``env_kwargs["task"] == "forecast"``).
        ImportError: ``backend="ray"`` without the ``ray`` package.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    labels = [policy_label(p) for p in policies]  # validates names before any work
    if len(set(labels)) != len(labels):
        raise ValueError(f"policy names repeat: {labels}")
    if (env_kwargs or {}).get("task") == "forecast":
        deciding = [p for p in policies if isinstance(p, str) and p not in FORECAST_TASK_POLICIES]
        if deciding:
            raise ValueError(f"policies {deciding} submit capacity decisions; the forecast task needs policies that "
                             f"submit forecasts: {list(FORECAST_TASK_POLICIES)} or an agent")
    selected = select_cases(split, domains, lead, limit, case_ids)
    if not selected:
        raise ValueError("no case selected")
    parallel = backend == "ray" or workers > 1
    size = chunk_size if parallel else 1  # one case at a time in-process, so the bar moves smoothly
    chunks = [selected[i : i + size] for i in range(0, len(selected), size)]
    tasks = [(split, tuple(policies), chunk, sigma, env_kwargs) for chunk in chunks]

    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(selected), unit="case", desc=f"evaluate {split}", dynamic_ncols=True)
    results: list[list[dict]] = []
    try:
        if backend == "ray":
            results = _run_ray(tasks, workers, ray_address, lambda n: _advance(bar, progress, n))
        elif workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for chunk, recs in zip(chunks, pool.map(_run_chunk, tasks)):
                    results.append(recs)
                    _advance(bar, progress, len(chunk))
        else:
            for task in tasks:
                results.append(_run_chunk(task))
                _advance(bar, progress, len(task[2]))
    finally:
        if bar is not None:
            bar.close()
    order = {p: i for i, p in enumerate(labels)}
    case_order = {c: i for i, (_, c) in enumerate(selected)}
    records = [r for recs in results for r in recs]
    records.sort(key=lambda r: (order[r["policy"]], case_order[r["case_id"]]))
    return records


def _run_ray(tasks: list, workers: int, address: str | None, advance: Callable[[int], None]) -> list[list[dict]]:
    """Run the tasks as Ray remote functions, reporting progress as they finish."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("backend='ray' needs the ray package: pip install 'fwgym[ray]'") from exc
    started = False
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        kw = {"address": address} if address else {"num_cpus": max(1, workers)}
        ray.init(include_dashboard=False, ignore_reinit_error=True, log_to_driver=False, **kw)
        started = True
    try:
        remote = ray.remote(_run_chunk)
        pending = {remote.remote(t): len(t[2]) for t in tasks}
        out = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                out.append(ray.get(ref))
                advance(pending.pop(ref))
        return out
    finally:
        if started:
            ray.shutdown()


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


# ---------------------------------------------------------------------------------------------
# result-set checks

#: default reference policy of the paired bootstrap intervals (the protocol's sigma policy)
DEFAULT_REFERENCE = "hour_of_day_empirical"
N_BOOT = 10_000  #: bootstrap draws (protocol §5.3)
BOOT_SEED = 1701  #: bootstrap seed (protocol §5.3)


def split_index(records: Sequence[dict]) -> dict[tuple[str, str], frozenset[str]]:
    """The frozen case index of every (split, domain) present in ``records``: ``{(split, domain): case ids}``."""
    keys = sorted({(r["split"], r["domain"]) for r in records})
    return {(s, d): frozenset(c.case_id for c in build_cases(d, s)) for s, d in keys}


def check_result_set(records: Sequence[dict], complete: bool = False) -> None:
    """Reject result sets that cannot be aggregated into one comparable table.

    Args:
        records: result records of one or more policies (merged runs allowed).
        complete: also require every policy to cover the whole frozen index of each (split, domain)
            present (protocol §5.3: case weights must cover exactly the index).

    Raises:
        ValueError: with a message saying what is wrong: no records; a (policy, case) pair more than
            once (duplicated); policies on different case sets (partial); with ``complete``, cases
            of the split missing (partial) or cases not in the split.
    """
    if not records:
        raise ValueError("no result records")
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
            f"(policy {p!r} lacks {len(missing)} of the {len(union)} cases the others cover, e.g. {sorted(missing)[0]!r}; "
            f"{len(partial)} of {len(sets)} policies are incomplete)")
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


def coverage(records: Sequence[dict]) -> dict:
    """``{"cases", "index_cases", "complete", "by_domain": {"split/domain": [n, of]}}`` of one policy's case set."""
    index = split_index(records)
    cases = frozenset(r["case_id"] for r in records)
    by = {f"{s}/{d}": [len(cases & ids), len(ids)] for (s, d), ids in index.items()}
    total = sum(len(ids) for ids in index.values())
    return {"cases": len(cases), "index_cases": total, "complete": all(a == b for a, b in by.values()),
            "by_domain": by}


# ---------------------------------------------------------------------------------------------
# paired cluster bootstrap


class _Bootstrap:
    """Series-cluster bootstrap of the aggregate of per-case values (the weights of
    :func:`fwgym.scoring.case_weights` recomputed on every resample).

    A draw resamples, independently in every domain, as many series ids as the domain has, with
    replacement; a series drawn ``m`` times contributes its (series x lead) groups ``m`` times. With
    ``c_s`` the draw count of series ``s`` and ``v_g`` the mean of group ``g`` (cases of one series and
    lead in one cohort), the resampled aggregate is::

        mean_domain  mean_{cohort present}  [ sum_g c_s(g) v_g / sum_g c_s(g) ]

    which equals ``sum_i w_i x_i`` with the case weights of the resampled set (and the plain
    aggregate when every ``c_s = 1``). Draws are made once per (records layout, n_boot, seed) so every
    policy is compared on the same resamples.
    """

    def __init__(self, cases: Sequence[dict], n_boot: int, seed: int):
        if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 1:
            raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
        self.n_cases = len(cases)
        rng = np.random.default_rng(seed)
        self.domains = []
        for dom in sorted({c["domain"] for c in cases}):
            idx = [i for i, c in enumerate(cases) if c["domain"] == dom]
            series = sorted({cases[i]["series_id"] for i in idx})
            cohorts = sorted({cases[i]["cohort"] for i in idx})
            s_of, c_of = {s: k for k, s in enumerate(series)}, {c: k for k, c in enumerate(cohorts)}
            groups: dict[tuple, list[int]] = defaultdict(list)
            for i in idx:
                c = cases[i]
                groups[(c_of[c["cohort"]], s_of[c["series_id"]], c["lead"])].append(i)
            n_s = len(series)
            draws = rng.integers(0, n_s, size=(int(n_boot), n_s))
            flat = (draws + n_s * np.arange(int(n_boot))[:, None]).ravel()
            counts = np.bincount(flat, minlength=int(n_boot) * n_s).reshape(int(n_boot), n_s).astype(np.float64)
            self.domains.append((dom, n_s, len(cohorts), list(groups.items()), counts))

    @property
    def clusters(self) -> dict[str, int]:
        return {dom: n_s for dom, n_s, *_ in self.domains}

    def draws(self, values: np.ndarray) -> np.ndarray:
        """Resampled aggregates of per-case ``values`` (n_cases, M): array (n_boot, M)."""
        x = np.asarray(values, dtype=np.float64)
        x = x.reshape(self.n_cases, -1)
        per_domain = []
        for _, n_s, n_c, groups, counts in self.domains:
            V = np.zeros((n_s, n_c, x.shape[1]))
            N = np.zeros((n_s, n_c))
            for (c, s, _lead), members in groups:
                V[s, c] += x[members].mean(axis=0)
                N[s, c] += 1.0
            num = np.einsum("bs,scm->bcm", counts, V)
            den = counts @ N  # (n_boot, n_c)
            with np.errstate(invalid="ignore", divide="ignore"):
                cohort = num / den[:, :, None]
            present = (den > 0)[:, :, None]
            per_domain.append(np.where(present, cohort, 0.0).sum(axis=1) / present.sum(axis=1))
        return np.mean(per_domain, axis=0)


def _aligned(records: Sequence[dict], reference: str, policy: str) -> tuple[list[dict], list[dict]]:
    groups = by_policy(records)
    for p in (reference, policy):
        if p not in groups:
            raise ValueError(f"policy {p!r} is not in the results (policies: {list(groups)})")
    check_result_set(groups[reference] + (groups[policy] if policy != reference else []))
    ref = groups[reference]
    other = {r["case_id"]: r for r in groups[policy]}
    return ref, [other[r["case_id"]] for r in ref]


def paired_bootstrap(records: Sequence[dict], reference: str, policy: str, n_boot: int = N_BOOT,
                     seed: int = BOOT_SEED, metrics: Sequence[str] = ("S", "loss"), level: float = 0.95,
                     _boot: _Bootstrap | None = None) -> dict:
    """Paired cluster-bootstrap interval for ``aggregate(policy) - aggregate(reference)``.

    Pairs are the two policies' records on the same case. Clusters are series ids, resampled with
    replacement within each domain (``n_boot`` draws, generator ``numpy.random.default_rng(seed)``);
    every draw re-aggregates the paired differences with the case weights of
    :func:`fwgym.scoring.case_weights` (cohort weights, series x lead groups) on the resampled set.
    The interval is the percentile interval (``(1 - level)/2`` and ``(1 + level)/2`` quantiles) of the
    resampled differences. Protocol §5.3 ("paired authority/station cluster bootstrap (10,000
    resamples, seed 1701) for contrasts"); percentile bootstrap: Efron & Tibshirani (1993), ch. 13.

    Args:
        records: result records holding at least both policies (other policies are ignored).
        reference, policy: policy names; ``policy - reference`` is reported (negative = policy better).
        n_boot: number of draws (default 10,000). seed: generator seed (default 1701).
        metrics: record fields to compare (default S and loss).
        level: interval coverage (default 0.95).

    Returns:
        ``{"policy", "reference", "n_boot", "seed", "level", "n_cases", "clusters": {domain: n_series},
        <metric>: {"diff", "lo", "hi"}, ..., "diff", "lo", "hi"}`` with ``diff`` the point estimate
        (aggregate difference ``policy - reference``); the top-level ``diff``, ``lo``, ``hi`` repeat the
        first metric's (S by default).

    Raises:
        ValueError: a policy missing, the two policies on different cases, duplicated records,
            ``n_boot`` < 1 or ``level`` outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    ref, pol = _aligned(records, reference, policy)
    boot = _boot if _boot is not None else _Bootstrap(ref, n_boot, seed)
    diffs = np.array([[float(b[m]) - float(a[m]) for m in metrics] for a, b in zip(ref, pol)])
    draws = boot.draws(diffs)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    agg_ref, agg_pol = aggregate(ref, fields=metrics), aggregate(pol, fields=metrics)
    out = {"policy": policy, "reference": reference, "n_boot": int(n_boot), "seed": seed, "level": level,
           "n_cases": len(ref), "clusters": boot.clusters}
    for k, m in enumerate(metrics):
        out[m] = {"diff": agg_pol[m] - agg_ref[m], "lo": float(lo[k]), "hi": float(hi[k])}
    out.update(out[metrics[0]])
    return out


# ---------------------------------------------------------------------------------------------
# leaderboard


def _group_aggregates(recs: Sequence[dict], key: str) -> dict[str, dict]:
    parts: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        parts[r[key]].append(r)
    return {g: aggregate(parts[g], fields=("S", "R", "loss", "credits")) for g in sorted(parts)}


def leaderboard(records: Sequence[dict], reference: str | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                complete: bool = False) -> list[dict]:
    """One row per policy, sorted by S (then name).

    Columns: aggregate ``S, R, loss, floor, credits, calls, n, valid`` (weights of
    :func:`fwgym.scoring.case_weights`); ``S[<cohort>]``, ``loss[<cohort>]``, ``credits[<cohort>]``
    per cohort and ``S[<lead>]``, ``loss[<lead>]``, ``credits[<lead>]`` per lead (each aggregated
    over its own cases with the same weighting rules); with ``reference``: ``reference`` and the
    paired bootstrap (:func:`paired_bootstrap`) point estimates and 95% intervals ``dS, dS_lo, dS_hi,
    dloss, dloss_lo, dloss_hi`` of ``policy - reference``.

    Raises:
        ValueError: as :func:`check_result_set`; unknown ``reference``.
    """
    check_result_set(records, complete=complete)
    groups = by_policy(records)
    if reference is not None and reference not in groups:
        raise ValueError(f"reference policy {reference!r} is not in the results (policies: {list(groups)})")
    boot = None
    if reference is not None:
        ref_recs = groups[reference]
        boot = _Bootstrap(ref_recs, n_boot, seed)
    rows = []
    for policy, recs in groups.items():
        row = {"policy": policy, **aggregate(recs)}
        if reference is not None:
            bs = paired_bootstrap(records, reference, policy, n_boot, seed, _boot=boot)
            row["reference"] = reference
            for m in ("S", "loss"):
                row[f"d{m}"], row[f"d{m}_lo"], row[f"d{m}_hi"] = bs[m]["diff"], bs[m]["lo"], bs[m]["hi"]
        for key in ("cohort", "lead"):
            for g, agg in _group_aggregates(recs, key).items():
                for m in ("S", "loss", "credits"):
                    row[f"{m}[{g}]"] = agg[m]
        rows.append(row)
    rows.sort(key=lambda r: (r["S"], r["policy"]))
    return rows


def _ci(row: dict, m: str, digits: int) -> str:
    if f"d{m}" not in row:
        return ""
    if row["policy"] == row.get("reference"):
        return "(reference)"
    return f"{row[f'd{m}']:+.{digits}f} [{row[f'd{m}_lo']:+.{digits}f}, {row[f'd{m}_hi']:+.{digits}f}]"


def format_leaderboard(rows: Sequence[dict]) -> str:
    """Markdown table of :func:`leaderboard` rows: policy, S, R, loss, credits, calls, valid/n and, when
    the rows carry a reference, the paired-bootstrap 95% intervals of ``ΔS`` and ``Δloss``."""
    if not rows:
        return "(no results)"
    ref = rows[0].get("reference")
    head = ["policy", "S", "R", "loss", "credits", "calls", "valid"]
    if ref:
        head += [f"ΔS vs {ref} [95% CI]", f"Δloss vs {ref} [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}", f"{r['R']:.4f}", f"{r['loss']:.5f}", f"{r['credits']:,.1f}",
                 f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"]
        if ref:
            cells += [_ci(r, "S", 4), _ci(r, "loss", 5)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_breakdowns(rows: Sequence[dict]) -> str:
    """Markdown tables of the per-cohort and per-lead columns of :func:`leaderboard` rows (S and loss)."""
    if not rows:
        return ""
    out = []
    for m, digits, title in (("S", 4, "S"), ("loss", 5, "decision loss")):
        cols = [k for k in rows[0] if k.startswith(f"{m}[")]
        if not cols:
            continue
        head = ["policy"] + [c[len(m) + 1 : -1] for c in cols]
        lines = [f"{title} by cohort and lead:", "", "| " + " | ".join(head) + " |",
                 "|" + "|".join(["---"] + ["---:"] * len(cols)) + "|"]
        for r in rows:
            lines.append("| " + " | ".join([r["policy"]] + [f"{r[c]:.{digits}f}" for c in cols]) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def write_csv(rows: Sequence[dict], path: str | Path) -> Path:
    """Write :func:`leaderboard` rows as CSV (header = the union of row keys, first row's order first)."""
    p = Path(path)
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0]) if rows else ["policy"]
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(p, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return p


def _digest(records: Sequence[dict]) -> str:
    keys = sorted(f"{r['policy']}\t{r['case_id']}" for r in records)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def write_results(records: Sequence[dict], out_dir: str | Path, meta: dict | None = None,
                  reference: str | None = DEFAULT_REFERENCE) -> dict[str, Path]:
    """Write ``results.jsonl`` (one record per line, :data:`RECORD_FIELDS`), ``leaderboard.md``
    (with breakdowns and, when ``reference`` is among the policies, bootstrap intervals),
    ``leaderboard.csv`` and ``meta.json`` into ``out_dir`` (created if needed).

    ``meta.json`` gets a ``results`` entry (record count, policies, case count, sha256 of the
    (policy, case) pairs, split coverage) so :func:`read_results` can reject a truncated or edited file.

    Returns:
        ``{"results", "markdown", "csv", "meta"}`` paths.

    Raises:
        ValueError: as :func:`check_result_set`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / n for k, n in (("results", "results.jsonl"), ("markdown", "leaderboard.md"),
                                     ("csv", "leaderboard.csv"), ("meta", "meta.json"))}
    groups = by_policy(records)
    ref = reference if reference in groups else None
    rows = leaderboard(records, reference=ref)
    with open(paths["results"], "w") as fh:
        for r in records:
            fh.write(json.dumps({k: r.get(k) for k in RECORD_FIELDS}, sort_keys=True) + "\n")
    paths["markdown"].write_text(format_leaderboard(rows) + "\n\n" + format_breakdowns(rows) + "\n")
    write_csv(rows, paths["csv"])
    first = next(iter(groups.values()))
    meta = {**(meta or {}), "results": {"records": len(records), "policies": list(groups), "cases": len(first),
                                        "sha256": _digest(records), "coverage": coverage(first)}}
    # default=str: agent factories (e.g. functools.partial) in "policies" are written as their repr
    paths["meta"].write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return paths


def _read_jsonl(p: Path) -> list[dict]:
    out = []
    with open(p) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{p}:{n}: not a JSON record ({exc}); the file is truncated or corrupt") from None
    return out


def read_results(paths: Iterable[str | Path], allow_partial: bool = True) -> list[dict]:
    """Read and merge result files (``results.jsonl`` files or directories holding one).

    A directory's ``meta.json`` (written by :func:`write_results`) states how many records the run
    wrote and their (policy, case) digest: a file that does not match is rejected as partial. The
    merged set must pass :func:`check_result_set` (no duplicated (policy, case) pair, every policy on
    the same cases). With ``allow_partial=False``, it must also cover the whole frozen split index,
    unless every source is a run that declared a subset in its meta (evaluated with a case limit,
    lead or domain filter: its coverage says so).

    Raises:
        FileNotFoundError: a path does not exist. ValueError: duplicated or partial results, a
            truncated file, malformed JSON.
    """
    records, declared_subset = [], []
    for p in map(Path, paths):
        if p.is_dir():
            p = p / "results.jsonl"
        if not p.is_file():
            raise FileNotFoundError(f"no results file {p}")
        recs = _read_jsonl(p)
        meta_path = p.parent / "meta.json"
        info = None
        if p.name == "results.jsonl" and meta_path.is_file():
            try:
                info = json.loads(meta_path.read_text()).get("results")
            except (json.JSONDecodeError, AttributeError):
                info = None
        if info is not None:
            if len(recs) != info.get("records") or _digest(recs) != info.get("sha256"):
                raise ValueError(f"partial results file {p}: it holds {len(recs)} records but {meta_path} says "
                                 f"{info.get('records')} (or other (policy, case) pairs); it was truncated or edited")
            declared_subset.append(not info.get("coverage", {}).get("complete", False))
        else:
            declared_subset.append(False)
        for r in recs:
            r.setdefault("_source", str(p))
        records += recs
    seen: dict[tuple[str, str], str] = {}
    for r in records:
        key = (r["policy"], r["case_id"])
        src = r.pop("_source")
        if key in seen:
            raise ValueError(f"duplicated result set: policy {key[0]!r} on case {key[1]!r} appears in {seen[key]} "
                             f"and {src}; merge each run once")
        seen[key] = src
    if records:
        check_result_set(records, complete=not allow_partial and not all(declared_subset))
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
