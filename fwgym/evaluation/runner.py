"""Running policies on benchmark cases: case selection, the suites' env settings, and local processes or Ray.

Every episode runs through :func:`fwgym.agents.run_episode` on an :class:`~fwgym.envs.fwbench.FWBenchEnv`,
so baselines, oracles, learned and LLM agents are scored by the same code. :func:`evaluate` returns
one :class:`~fwgym.evaluation.records.Record` per (policy, case), identical for any number of workers
and either backend.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Callable, Iterable, Sequence

from fwgym.agents.base import agent_name, run_episode
from fwgym.baselines.oracles import oracle_grant
from fwgym.baselines.registry import DEFAULT_POLICIES, FORECAST_TASK_POLICIES, make_policy
from fwgym.cases import build_cases
from fwgym.data import DOMAINS
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation.records import check_record

__all__ = ["SUITES", "select_cases", "policy_label", "evaluate"]

#: environment settings of the three evaluation suites (``fwgym evaluate --suite``)
SUITES: dict[str, dict] = {
    "decision": {},
    "context": {"scenarios": True},
    "forecast": {"scenarios": True, "task": "forecast"},
}


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


#: the envs of this process (one per setting), reused across chunks
_WORKER_ENVS: dict = {}


def _env_for(domain: str, split: str, sigma: dict | None, env_kwargs: dict | None = None) -> FWBenchEnv:
    key = (domain, split, json.dumps(sigma, sort_keys=True), json.dumps(env_kwargs or {}, sort_keys=True))
    if key not in _WORKER_ENVS:
        _WORKER_ENVS[key] = FWBenchEnv(domain=domain, split=split, sigma=sigma, **(env_kwargs or {}))
    return _WORKER_ENVS[key]


def _make_agent(policy):
    return make_policy(policy) if isinstance(policy, str) else policy()


def policy_label(policy) -> str:
    """Display name of a policy given as a name or an agent factory (``agent.name``)."""
    return policy if isinstance(policy, str) else agent_name(policy())


def _run_chunk(task: tuple) -> list[dict]:
    """Records of every policy on a chunk of cases (in a worker process, a Ray task or this process)."""
    split, policies, chunk, sigma, env_kwargs = task
    agents = [_make_agent(p) for p in policies]
    records = []
    for domain, case_id in chunk:
        env = _env_for(domain, split, sigma, env_kwargs)
        for agent in agents:
            record = run_episode(env, agent, options={"case_id": case_id}, hindsight=oracle_grant(agent)).record
            check_record(record, where=f"{record['policy']} on {case_id}")
            records.append(record)
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
        Records (:class:`~fwgym.evaluation.records.Record`), sorted by (policy order, domain, case order).

    Raises:
        ValueError: unknown policy, domain, split or backend; no case selected; a named decision
            policy in a forecast-task env (``env_kwargs["task"] == "forecast"``).
        ImportError: ``backend="ray"`` without the ``ray`` package.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    labels = _labels(policies, env_kwargs)  # validates names before any work
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
    try:
        advance = partial(_advance, bar, progress)
        results = (_run_ray(tasks, workers, ray_address, advance) if backend == "ray"
                   else _run_local(tasks, workers, advance))
    finally:
        if bar is not None:
            bar.close()
    order = {p: i for i, p in enumerate(labels)}
    case_order = {c: i for i, (_, c) in enumerate(selected)}
    records = [r for recs in results for r in recs]
    records.sort(key=lambda r: (order[r["policy"]], case_order[r["case_id"]]))
    return records


def _labels(policies: Sequence, env_kwargs: dict | None) -> list[str]:
    """The policies' row names; refuses repeated names, unknown names and, in a forecast-task env,
    named policies that submit decisions."""
    for p in policies:
        if isinstance(p, str):
            make_policy(p)  # raises the registry's error for an unknown name
    labels = [policy_label(p) for p in policies]
    if len(set(labels)) != len(labels):
        raise ValueError(f"policy names repeat: {labels}")
    if (env_kwargs or {}).get("task") == "forecast":
        deciding = [p for p in policies if isinstance(p, str) and p not in FORECAST_TASK_POLICIES]
        if deciding:
            raise ValueError(f"policies {deciding} submit capacity decisions; the forecast task needs policies that "
                             f"submit forecasts: {list(FORECAST_TASK_POLICIES)} or an agent")
    return labels


def _run_local(tasks: list, workers: int, advance: Callable[[int], None]) -> list[list[dict]]:
    """Run the tasks in this process (``workers`` 1) or a process pool, in order, reporting progress."""
    if workers <= 1:
        out = []
        for task in tasks:
            out.append(_run_chunk(task))
            advance(len(task[2]))
        return out
    out = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for task, recs in zip(tasks, pool.map(_run_chunk, tasks)):
            out.append(recs)
            advance(len(task[2]))
    return out


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
    """Report ``n`` more cases done to the bar or the ``progress`` callback."""
    if bar is not None:
        bar.update(n)
    elif callable(progress):
        progress(n)

