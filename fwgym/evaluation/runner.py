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
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from fwgym.agents.base import agent_name, run_episode
from fwgym.baselines.oracles import oracle_grant
from fwgym.baselines.registry import (DEFAULT_POLICIES, FORECAST_TASK_POLICIES, check_policy_name, make_policy,
                                     policy_models)
from fwgym.core.cases import TEST_SPLIT, build_cases
from fwgym.domains import DOMAINS, domain_names, is_domain
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.registry import check_models
from fwgym.evaluation.records import check_record
from fwgym.evaluation.rundir import RunDir, episode_id
from fwgym.evaluation.schedule import Schedule, exposed_cases, play_order
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
    traces: str | None = None  #: the run's traces file for agents with a ``trace_out``


def _play(item: tuple, agents: list, job: _Job, sink: Callable[[dict], None] | None = None) -> dict:
    """One episode; ``sink`` (the run directory's :meth:`~fwgym.evaluation.rundir.RunDir.append` in the evaluating
    process; ``None`` in worker processes, whose records go back with their unit) gets the record before the
    agent's ``end_episode``."""
    pi, domain, case_id, eid, exposed = item
    key = _env_key(domain, job.split, job.sigma, job.env_kwargs)
    env = _take_env(key)
    where = f"{agent_name(agents[pi])} on {case_id}"

    def write(record: dict) -> None:  # before end_episode: the agent never sees a record that is not on disk
        record["exposed"] = bool(exposed)
        check_record(record, where=where)
        if sink is not None:
            sink(record)

    try:
        named = isinstance(job.policies[pi], str)  # fwgym's own policies: an exception is a bug, never a row
        record = run_episode(env, agents[pi], options={"case_id": case_id}, episode_id=eid,
                             agent_errors="raise" if named else "score", hindsight=oracle_grant(agents[pi]),
                             on_record=write).record
    finally:
        _give_env(key, env)
    return record


def _close(agents: list) -> None:
    for a in agents:
        close = getattr(a, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing must not lose finished records
                pass


def _play_unit(unit: Sequence[tuple], job: _Job, local: threading.local, made: list, lock: threading.Lock,
               stop: threading.Event | None = None, sink: Callable[[dict], None] | None = None) -> list[dict]:
    """Play a unit's items in order on this thread, with the thread's agents (built on first use)."""
    agents = getattr(local, "agents", None)
    if agents is None:
        agents = local.agents = [_make_agent(p, job.traces) for p in job.policies]
        with lock:
            made.append(agents)
    out = []
    for item in unit:
        if stop is not None and stop.is_set():
            break
        out.append(_play(item, agents, job, sink))
    return out


def _run_units(units: Sequence[Sequence[tuple]], case_of: Mapping, job: _Job,
               on_start: Callable[[Sequence[tuple]], None], on_records: Callable[[list[dict]], None],
               sink: Callable[[dict], None] | None = None) -> None:
    """Play ``units`` in this process: one after another (``job.concurrency`` 1), or ``job.concurrency`` at a
    time on threads, each unit started only when :class:`~fwgym.evaluation.schedule.Schedule` allows it."""
    local, lock, stop = threading.local(), threading.Lock(), threading.Event()
    made: list[list[Any]] = []  # every thread's agents, closed at the end
    try:
        if job.concurrency <= 1:  # play order: every unit's blockers are earlier units
            for unit in units:
                on_start(unit)
                on_records(_play_unit(unit, job, local, made, lock, sink=sink))
            return
        schedule = Schedule(units, case_of)
        with ThreadPoolExecutor(max_workers=job.concurrency, thread_name_prefix="fwgym-episode") as pool:
            running: dict = {}
            try:
                while schedule.pending:
                    while len(running) < job.concurrency and (i := schedule.next_ready()) is not None:
                        on_start(units[i])
                        running[pool.submit(_play_unit, units[i], job, local, made, lock, stop, sink)] = i
                    _check_progress(running, schedule)
                    finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for f in finished:
                        i = running.pop(f)
                        on_records(f.result())
                        schedule.finish(i)
            except BaseException:  # Ctrl-C or an error: start nothing new; the episodes in flight finish
                stop.set()
                for f in running:
                    f.cancel()
                raise
    finally:
        _close([a for agents in made for a in agents])


def _run_chunk(task: tuple) -> list[dict]:
    """Records of a unit of items (in a worker process or a Ray task), played in order."""
    job, items = task
    local, lock = threading.local(), threading.Lock()
    made: list[list[Any]] = []
    try:
        return _play_unit(items, job, local, made, lock)
    finally:
        _close([a for agents in made for a in agents])


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
    case_of = {c.case_id: c for d in {d for d, _ in selected} for c in build_cases(d, split)}
    agents = {pi for pi, p in enumerate(policies) if not isinstance(p, str)}  # fwgym's named policies send no prompt
    todo = [(d, c) for d, c in selected if any((label, c) not in done for label in labels)]
    exposed = (exposed_cases([case_of[c] for _, c in todo], [case_of[c] for c in run.sent_cases() if c in case_of])
               if run is not None and agents else set())
    items = play_order([(pi, d, c, episode_id(session, label, c), pi in agents and c in exposed)
                        for d, c in selected for pi, label in enumerate(labels) if (label, c) not in done], case_of)
    parallel = backend == "ray" or workers > 1
    job = _Job(split, tuple(policies), sigma, env_kwargs, concurrency,
               traces=str(run.traces_path) if run is not None else None)

    bar = None
    if progress is True and items:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), unit="episode", desc=f"evaluate {split}", dynamic_ncols=True)
    results: list[dict] = []
    advance = partial(_advance, bar, progress)

    def on_start(unit: Sequence[tuple]) -> None:
        if run is not None:
            run.start([{"episode_id": it[3], "policy": labels[it[0]], "case_id": it[2], "agent": it[0] in agents}
                       for it in unit])

    def on_records(recs: list[dict], write: bool) -> None:
        for r in recs:
            if write and run is not None:
                run.append(r)
            results.append(r)
        advance(len(recs))

    try:
        if items and not parallel:
            sink = run.append if run is not None else None
            _run_units([[it] for it in items], case_of, job, on_start, partial(on_records, write=False), sink)
        elif items:
            size = max(1, chunk_size) * len(labels)
            units = [items[i : i + size] for i in range(0, len(items), size)]
            run_units = partial(_run_ray, address=ray_address) if backend == "ray" else _run_local
            run_units(units, case_of, job, workers, on_start, partial(on_records, write=True))
    finally:
        if bar is not None:
            bar.close()
    latest = {(r["policy"], r["case_id"]): r for r in (run.previous if run is not None else [])}
    latest.update({(r["policy"], r["case_id"]): r for r in results})
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


def _run_local(units: list, case_of: Mapping, job: _Job, workers: int, on_start: Callable,
               on_records: Callable[[list[dict]], None]) -> None:
    """Play the units in a process pool, each submitted when the schedule allows it; the evaluating process
    writes each unit's records when it returns."""
    schedule = Schedule(units, case_of)
    pool = ProcessPoolExecutor(max_workers=workers)
    running: dict = {}
    try:
        while schedule.pending:
            while len(running) < 2 * workers and (i := schedule.next_ready()) is not None:
                on_start(units[i])
                running[pool.submit(_run_chunk, (job, units[i]))] = i
            _check_progress(running, schedule)
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in finished:
                i = running.pop(f)
                on_records(f.result())
                schedule.finish(i)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _run_ray(units: list, case_of: Mapping, job: _Job, workers: int, on_start: Callable,
             on_records: Callable[[list[dict]], None], address: str | None = None) -> None:
    """Play the units as Ray remote functions, each started when the schedule allows it; the evaluating
    process writes each unit's records when it returns."""
    schedule = Schedule(units, case_of)
    with ray_session(workers, address) as ray:
        remote = ray.remote(_run_chunk)
        running: dict = {}
        while schedule.pending:
            while (i := schedule.next_ready()) is not None:
                on_start(units[i])
                running[remote.remote((job, units[i]))] = i
            _check_progress(running, schedule)
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                i = running.pop(ref)
                on_records(ray.get(ref))
                schedule.finish(i)


def _check_progress(running: Mapping, schedule: Schedule) -> None:
    """Nothing in flight while units wait is a scheduling bug (it would wait forever)."""
    if not running and schedule.pending:
        raise RuntimeError(f"evaluation schedule: {schedule.pending} unit(s) wait and none is in flight")


def _advance(bar, progress, n: int) -> None:
    """Report ``n`` more episodes done to the bar or the ``progress`` callback."""
    if bar is not None:
        bar.update(n)
    elif callable(progress):
        progress(n)

