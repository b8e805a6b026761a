"""Running policies on benchmark cases: case selection, the suites' env settings, threads, local processes or Ray.

Every episode runs through :func:`fwgym.agents.run_episode` on an :class:`~fwgym.envs.fwbench.FWBenchEnv`,
so baselines, oracles, learned and LLM agents are scored by the same code. :func:`evaluate` returns
one :class:`~fwgym.evaluation.records.Record` per (policy, case), identical for any number of workers,
threads (``concurrency``) and either backend. Given a :class:`~fwgym.evaluation.rundir.RunDir`, every
finished episode is appended to its records file at once (fsync'd; from worker processes too), the
agents' traces go to its traces file, and a resumed run plays only what is missing.

Parallelism has two independent axes: ``workers`` processes (CPU-bound policies; each a full fwgym
process) and ``concurrency`` episodes in flight per process (threads, each with its own env and agent
instances: LLM agents waiting on one endpoint).
"""
from __future__ import annotations

import json
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from fwgym.agents.base import agent_name, run_episode
from fwgym.baselines.oracles import oracle_grant
from fwgym.baselines.registry import (DEFAULT_POLICIES, FORECAST_TASK_POLICIES, check_policy_name, make_policy,
                                     policy_models)
from fwgym.core.cases import TEST_SPLIT, build_cases
from fwgym.domains import DOMAINS, domain_names, is_domain
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.registry import check_models
from fwgym.evaluation.records import check_record
from fwgym.evaluation.rundir import RunDir, append_record, episode_id
from fwgym.ray_session import ray_session
from fwgym.suites import SUITES as SUITE_SPECS
from fwgym.validation import check_int

__all__ = ["SUITES", "select_cases", "policy_label", "policy_labels", "evaluate", "run_preflight"]

#: environment settings of the evaluation suites (``fwgym evaluate --suite``): each suite's
#: :attr:`fwgym.suites.Suite.env_kwargs` (the suites themselves are :data:`fwgym.suites.SUITES`)
SUITES: Mapping[str, dict] = MappingProxyType({name: s.env_kwargs for name, s in SUITE_SPECS.items()})


def select_cases(split: str = TEST_SPLIT, domains: Sequence[str] = DOMAINS, lead: str | None = None,
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
        if not is_domain(d):
            raise ValueError(f"unknown domain {d!r}; expected some of {list(domain_names())}")
        cases = [c for c in build_cases(d, split) if (lead is None or c.lead == lead)
                 and (wanted is None or c.case_id in wanted)]
        if limit is not None and len(cases) > limit:
            step = len(cases) / limit
            cases = [cases[int(i * step)] for i in range(limit)]
        out += [(d, c.case_id) for c in cases]
    return out


#: idle envs of this process, per setting: a thread takes one for an episode and gives it back
_ENV_POOL: dict[tuple, list[FWBenchEnv]] = {}
_ENV_LOCK = threading.Lock()


def _env_key(domain: str, split: str, sigma: dict | None, env_kwargs: dict | None) -> tuple:
    return domain, split, json.dumps(sigma, sort_keys=True), json.dumps(env_kwargs or {}, sort_keys=True)


def _take_env(key: tuple) -> FWBenchEnv:
    with _ENV_LOCK:
        idle = _ENV_POOL.setdefault(key, [])
        if idle:
            return idle.pop()
    domain, split, sigma, env_kwargs = key
    return FWBenchEnv(domain=domain, split=split, sigma=json.loads(sigma), **json.loads(env_kwargs))


def _give_env(key: tuple, env: FWBenchEnv) -> None:
    with _ENV_LOCK:
        _ENV_POOL.setdefault(key, []).append(env)


def _make_agent(policy, traces: str | None = None):
    agent = make_policy(policy) if isinstance(policy, str) else policy()
    if traces and hasattr(agent, "trace_out") and getattr(agent, "trace_out") is None:
        agent.trace_out = traces  # the run's traces file: its lines carry the records' episode ids
    return agent


def policy_label(policy) -> str:
    """Display name of a policy given as a name or an agent factory (``agent.name``)."""
    return policy if isinstance(policy, str) else agent_name(policy())


def run_preflight(policies: Sequence) -> dict[str, dict]:
    """Call ``preflight()`` of every agent factory that defines it, once, before any episode.

    Returns:
        ``{policy name: the factory's dict}`` (for the run manifest).

    Raises:
        fwgym.errors.HarnessError: a backend cannot serve the run (nothing has been played).
    """
    out = {}
    for p in policies:
        fn = getattr(p, "preflight", None) if not isinstance(p, str) else None
        if callable(fn):
            answer = fn()
            out[policy_label(p)] = dict(answer) if isinstance(answer, dict) else {"answer": answer}
    return out


@dataclass(frozen=True)
class _Job:
    """What a worker (this process, a process of the pool or a Ray task) needs to play episodes."""

    split: str
    policies: tuple
    sigma: dict | None
    env_kwargs: dict | None
    concurrency: int = 1
    records: str | None = None  #: append each record here (rundir.append_record); None: the caller does
    traces: str | None = None  #: the run's traces file for agents with a ``trace_out``


def _play(item: tuple, agents: list, job: _Job) -> dict:
    pi, domain, case_id, eid = item
    key = _env_key(domain, job.split, job.sigma, job.env_kwargs)
    env = _take_env(key)
    try:
        named = isinstance(job.policies[pi], str)  # fwgym's own policies: an exception is a bug, never a row
        record = run_episode(env, agents[pi], options={"case_id": case_id}, episode_id=eid,
                             agent_errors="raise" if named else "score", hindsight=oracle_grant(agents[pi])).record
    finally:
        _give_env(key, env)
    check_record(record, where=f"{record['policy']} on {case_id}")
    if job.records:
        append_record(job.records, record)
    return record


def _close(agents: list) -> None:
    for a in agents:
        close = getattr(a, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing must not lose finished records
                pass


def _run_items(items: Sequence[tuple], job: _Job, on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Play ``items`` ``(policy index, domain, case id, episode id)``: in order on this thread, or
    ``job.concurrency`` at a time on threads that each build their own agents (and take their own envs)."""
    if job.concurrency <= 1:
        agents = [_make_agent(p, job.traces) for p in job.policies]
        out = []
        try:
            for item in items:
                out.append(_play(item, agents, job))
                if on_record is not None:
                    on_record(out[-1])
        finally:
            _close(agents)
        return out
    local, made, lock, stop = threading.local(), [], threading.Lock(), threading.Event()

    def play(item):
        if stop.is_set():
            return None
        agents = getattr(local, "agents", None)
        if agents is None:
            agents = local.agents = [_make_agent(p, job.traces) for p in job.policies]
            with lock:
                made.append(agents)
        return _play(item, agents, job)

    out = []
    try:
        with ThreadPoolExecutor(max_workers=job.concurrency, thread_name_prefix="fwgym-episode") as pool:
            futures = [pool.submit(play, item) for item in items]
            try:
                for f in as_completed(futures):
                    rec = f.result()
                    if rec is not None:
                        out.append(rec)
                        if on_record is not None:
                            on_record(rec)
            except BaseException:  # Ctrl-C or an error: start nothing new; the episodes in flight finish
                stop.set()
                for f in futures:
                    f.cancel()
                raise
    finally:
        for agents in made:
            _close(agents)
    return out


def _run_chunk(task: tuple) -> list[dict]:
    """Records of a chunk of items (in a worker process or a Ray task)."""
    job, items = task
    return _run_items(items, job)


def evaluate(policies: Sequence[str] = DEFAULT_POLICIES, split: str = TEST_SPLIT, domains: Sequence[str] = DOMAINS,
             lead: str | None = None, limit: int | None = None, case_ids: Iterable[str] | None = None,
             workers: int = 1, progress: bool | Callable[[int], None] = True,
             sigma: dict[str, float] | None = None, env_kwargs: dict | None = None,
             backend: str = "local", ray_address: str | None = None, chunk_size: int = 16,
             concurrency: int = 1, run: RunDir | None = None, preflight: bool = True) -> list[dict]:
    """Run every policy on every selected case.

    Args:
        policies: names accepted by :func:`fwgym.baselines.make_policy`, or picklable zero-argument
            factories returning an agent (learned or LLM agents); rows are named by ``agent.name``.
        split, domains, lead, limit, case_ids: see :func:`select_cases`.
        workers: local processes (``backend="local"``; 1 = in this process) or Ray CPUs to request
            for a local Ray cluster. Results are identical for any value and backend.
        progress: show a tqdm bar (True), nothing (False), or call ``progress(n_episodes_done)``.
        sigma: per-domain sigma override (default: the frozen calibration).
        env_kwargs: extra :class:`~fwgym.envs.fwbench.FWBenchEnv` arguments (e.g. ``SUITES["context"]``).
        backend: ``"local"`` (this process or a process pool) or ``"ray"`` (a Ray cluster: local by
            default, or the one at ``ray_address``, e.g. ``"auto"`` or ``"ray://head:10001"``).
        chunk_size: cases per task sent to a worker.
        concurrency: episodes in flight per process (threads, each with its own env and agents); for
            agents that wait on a server. Results are identical for any value.
        run: a run directory: each finished episode is appended to its records file at once, agents
            with a ``trace_out`` of ``None`` write their traces to its traces file, episode ids carry
            its session, and (pairs, policy) already scored there are not played again.
        preflight: call the agent factories' ``preflight()`` first (:func:`run_preflight`; the CLI
            does it itself before it creates the run directory).

    Returns:
        Records (:class:`~fwgym.evaluation.records.Record`) of every (policy, case) (with ``run``: the
        ones already there and the new ones, the latest per pair), sorted by (policy order, case order).

    Raises:
        ValueError: unknown policy, domain, split or backend; no case selected; a named decision
            policy in a forecast-task env (``env_kwargs["task"] == "forecast"``); ``concurrency`` < 1.
        ImportError: ``backend="ray"`` without the ``ray`` package.
        fwgym.errors.HarnessError: a preflight failed (nothing was played).
        KeyboardInterrupt: the run was interrupted (with ``run``, the finished episodes are on disk).
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    concurrency = check_int("concurrency", concurrency, minimum=1)
    labels = policy_labels(policies, env_kwargs)  # validates names before any work
    selected = select_cases(split, domains, lead, limit, case_ids)
    if not selected:
        raise ValueError("no case selected")
    if preflight:
        run_preflight(policies)
    if run is not None:
        run.begin()
    session = run.session if run is not None else 1
    done = run.done_keys() if run is not None else set()
    items = [(pi, d, c, episode_id(session, label, c)) for d, c in selected for pi, label in enumerate(labels)
             if (label, c) not in done]
    parallel = backend == "ray" or workers > 1
    records_path = str(run.records_path) if run is not None else None
    job = _Job(split, tuple(policies), sigma, env_kwargs, concurrency,
               records=records_path if backend == "local" else None,
               traces=str(run.traces_path) if run is not None else None)

    bar = None
    if progress is True and items:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), unit="episode", desc=f"evaluate {split}", dynamic_ncols=True)
    try:
        advance = partial(_advance, bar, progress)
        if not items:
            results = []
        elif not parallel:
            results = [_run_items(items, job, on_record=lambda r: advance(1))]
        else:
            size = max(1, chunk_size) * len(labels)
            tasks = [(job, items[i : i + size]) for i in range(0, len(items), size)]
            sink = run.append if run is not None and backend == "ray" else None
            results = (_run_ray(tasks, workers, ray_address, advance, sink) if backend == "ray"
                       else _run_local(tasks, workers, advance))
    finally:
        if bar is not None:
            bar.close()
    latest = {(r["policy"], r["case_id"]): r for r in (run.previous if run is not None else [])}
    latest.update({(r["policy"], r["case_id"]): r for recs in results for r in recs})
    order = {p: i for i, p in enumerate(labels)}
    case_order = {c: i for i, (_, c) in enumerate(selected)}
    records = [r for k, r in latest.items() if k[0] in order and k[1] in case_order]
    records.sort(key=lambda r: (order[r["policy"]], case_order[r["case_id"]]))
    return records


def policy_labels(policies: Sequence, env_kwargs: dict | None = None) -> list[str]:
    """The policies' row names; refuses repeated names, unknown names, agents (non-string policies) whose
    name :func:`fwgym.baselines.registry.check_policy_name` refuses (empty, too long, characters that do
    not print, leading/trailing whitespace, or the NFKC-casefolded name of a policy of fwgym or of
    another policy of the run), and, in a forecast-task
    env, named policies that submit decisions."""
    for p in policies:
        if isinstance(p, str):
            make_policy(p)  # raises the registry's error for an unknown name
    labels = [policy_label(p) for p in policies]
    if len(set(labels)) != len(labels):
        raise ValueError(f"policy names repeat: {labels}")
    for i, (p, lab) in enumerate(zip(policies, labels)):
        if not isinstance(p, str):  # an agent: a printable name that is no policy's (fwgym's or the run's)
            check_policy_name(lab, labels[:i] + labels[i + 1:])
    pool = set(check_models((env_kwargs or {}).get("models")))
    outside = {p: [m for m in policy_models(p) if m not in pool] for p in policies if isinstance(p, str)}
    outside = {p: ms for p, ms in outside.items() if ms}
    if outside:
        raise ValueError(f"policies buy models outside the env's forecast pool {sorted(pool)}: {outside}; pass "
                         "env_kwargs={'models': ...} with those models (e.g. fwgym.forecasters.EXTENDED_MODELS; on the "
                         "command line: fwgym evaluate --pool extended, --models NAME ...)")
    if (env_kwargs or {}).get("task") == "forecast":
        deciding = [p for p in policies if isinstance(p, str) and p not in FORECAST_TASK_POLICIES]
        if deciding:
            raise ValueError(f"policies {deciding} submit capacity decisions; the forecast task needs policies that "
                             f"submit forecasts: {list(FORECAST_TASK_POLICIES)} or an agent")
    return labels


def _run_local(tasks: list, workers: int, advance: Callable[[int], None]) -> list[list[dict]]:
    """Run the tasks in a process pool, reporting progress as chunks finish (the workers append the records)."""
    out = []
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(_run_chunk, t): len(t[1]) for t in tasks}
        for f in as_completed(futures):
            out.append(f.result())
            advance(futures[f])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return out


def _run_ray(tasks: list, workers: int, address: str | None, advance: Callable[[int], None],
             sink: Callable[[dict], None] | None) -> list[list[dict]]:
    """Run the tasks as Ray remote functions, reporting progress (and appending records) as they finish."""
    with ray_session(workers, address) as ray:
        remote = ray.remote(_run_chunk)
        pending = {remote.remote(t): len(t[1]) for t in tasks}
        out = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                recs = ray.get(ref)
                if sink is not None:
                    for r in recs:
                        sink(r)
                out.append(recs)
                advance(pending.pop(ref))
        return out


def _advance(bar, progress, n: int) -> None:
    """Report ``n`` more episodes done to the bar or the ``progress`` callback."""
    if bar is not None:
        bar.update(n)
    elif callable(progress):
        progress(n)

