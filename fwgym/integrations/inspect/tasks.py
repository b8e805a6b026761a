"""The inspect-ai tasks ``fwgym/decision``, ``fwgym/context`` and ``fwgym/forecast``: one sample per fwgym case.

::

    inspect eval fwgym/decision --model fwgym/scripted --limit 2                # offline, no download
    inspect eval fwgym/context -T split=dev -T limit=5 --model openai-api/vllm/Qwen3-4B
    inspect eval fwgym/forecast -T domain=cycle_hire -T lead=day_ahead --model ollama/qwen3:4b

Task parameters (``-T name=value``): ``split`` (default test), ``limit`` (at most N cases per domain, evenly
spaced, as ``fwgym evaluate --limit``), ``lead`` (day_ahead, week_ahead), ``pool`` (protocol, extended),
``domain`` (electricity, cycle_hire; default both), ``compact_results``, ``history_hours``, ``native_tools`` (the
chat options of ``fwgym evaluate --agent openai``). inspect's own ``--limit N`` takes the first N samples.

A sample is a case (``id`` = case id; metadata: domain, cohort, series, lead, split). The solver
(:func:`fwgym_solver`) plays it with fwgym's chat harness on the one episode loop, the model being inspect's
(:class:`~fwgym.integrations.inspect.agent.InspectChatAgent`): the env's tools, the same ledger, the same prompts
and answer grammar as ``fwgym evaluate --agent openai``. The scorer (:mod:`~fwgym.integrations.inspect.scorer`)
reports the episode's S and aggregates as ``fwgym leaderboard``.

Limits: fwgym's call limit (12 counted calls) and its bound on model turns (``2 * 12 + 4``) end every episode;
the tasks set inspect's ``turn_limit`` to that bound and ``message_limit`` to what it allows (``2 + 2 * turns``),
so inspect never cuts an episode earlier unless asked to (``--message-limit``, ``--token-limit``): then the
episode ends as the model's failure (abstained, ``context_exhausted``), scored invalid.
"""
from __future__ import annotations

from typing import Any

from fwgym.integrations.inspect.scorer import fwgym_scorer, registry_name

__all__ = ["decision", "context", "forecast", "fwgym_solver", "case_samples", "SUITE_TASKS", "turn_bound"]

#: the task of each suite
SUITE_TASKS = {"decision": "fwgym/decision", "context": "fwgym/context", "forecast": "fwgym/forecast"}


def turn_bound(max_calls: int) -> int:
    """fwgym's bound on model turns per episode (:class:`fwgym.agents.chat.ChatAgent`'s default ``max_turns``)."""
    return 2 * max(int(max_calls), 1) + 4


def _domains(domain: str | None) -> list[str]:
    from fwgym.domains import DOMAINS, domain_names

    if domain is None:
        return list(DOMAINS)
    names = [d.strip() for d in str(domain).split(",") if d.strip()]
    bad = [d for d in names if d not in domain_names()]
    if bad or not names:
        raise ValueError(f"domain must be some of {list(domain_names())} (comma-separated), got {domain!r}")
    return names


def env_kwargs_of(suite: str, pool: str = "protocol") -> dict:
    """The env settings of a suite and pool (as ``fwgym evaluate --suite S --pool P``)."""
    from fwgym.evaluation import SUITES
    from fwgym.forecasters.registry import POOLS

    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {list(SUITES)}")
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {list(POOLS)}, got {pool!r}")
    out = dict(SUITES[suite])
    if pool != "protocol":
        out["models"] = list(POOLS[pool])
    return out


def case_samples(split: str, domains: list[str], lead: str | None, limit: int | None) -> list:
    """One inspect ``Sample`` per selected case (:func:`fwgym.evaluation.runner.select_cases`)."""
    from inspect_ai.dataset import Sample

    from fwgym.core.cases import get_case
    from fwgym.evaluation.runner import select_cases

    out = []
    for domain, cid in select_cases(split, domains, lead, limit):
        case = get_case(cid, split=split)
        out.append(Sample(id=cid, input=f"fwgym case {cid}",
                          metadata={"case_id": cid, "domain": domain, "cohort": case.cohort, "series_id": case.series_id,
                                    "lead": case.lead, "split": split}))
    return out


def fwgym_solver(suite: str = "decision", split: str = "test", pool: str = "protocol",
                 options: dict | None = None):
    """The solver: play the sample's case with fwgym's chat harness and inspect's model (module docstring).

    The episode's record (the one loop's, policy ``inspect:<model>``, episode id
    ``inspect:<model>:<case>:<epoch>``) is stored as ``state.metadata["fwgym_record"]``.
    """
    from inspect_ai.solver import solver

    @solver(name=registry_name("agent"))
    def make():
        async def solve(state, generate):
            import anyio.to_thread
            from inspect_ai.model import get_model

            from fwgym.agents.base import run_episode
            from fwgym.envs.fwbench import FWBenchEnv
            from fwgym.integrations.inspect.agent import InspectChatAgent

            meta = state.metadata or {}
            cid = meta["case_id"]
            model = get_model()
            name = f"inspect:{model}"
            env = FWBenchEnv(meta["domain"], split=split, case_ids=[cid], **env_kwargs_of(suite, pool))
            agent = InspectChatAgent(model, state, name=name, options=options or {})
            eid = f"{name}:{cid}:{getattr(state, 'epoch', 1)}"

            def play():
                try:
                    return run_episode(env, agent, options={"case_id": cid}, episode_id=eid).record
                finally:
                    agent.mirror()

            record = await anyio.to_thread.run_sync(play)
            state.metadata = {**meta, "fwgym_record": record}
            state.completed = True
            return state
        return solve

    return make()


def _task(suite: str, split: str, limit: int | None, lead: str | None, pool: str, domain: str | None,
          options: dict) -> Any:
    from inspect_ai import Task

    from fwgym.agents.chat.options import ChatOptions
    from fwgym.tools import MAX_CALLS

    opts = ChatOptions(**options).to_json()  # validated now, not in the first sample
    turns = turn_bound(MAX_CALLS)
    return Task(dataset=case_samples(split, _domains(domain), lead, None if limit is None else int(limit)),
                solver=fwgym_solver(suite, split, pool, opts), scorer=fwgym_scorer(),
                turn_limit=turns, message_limit=2 + 2 * turns, epochs=1, version=1,
                metadata={"fwgym_suite": suite, "split": split, "pool": pool, "lead": lead, "domain": domain,
                          "limit": limit, "chat_options": opts})


def _options(compact_results: bool, history_hours: int | None, native_tools: bool) -> dict:
    return {"compact_results": bool(compact_results), "native_tools": bool(native_tools),
            "history_hours": None if history_hours is None else int(history_hours)}


def _register():
    from inspect_ai import task

    @task(name=registry_name("decision"))
    def decision(split: str = "test", limit: int | None = None, lead: str | None = None, pool: str = "protocol",
                 domain: str | None = None, compact_results: bool = False, history_hours: int | None = None,
                 native_tools: bool = True):
        """fwgym decision suite (protocol parity): buy forecasts, plan 8 capacities; score S (lower is better)."""
        return _task("decision", split, limit, lead, pool, domain, _options(compact_results, history_hours, native_tools))

    @task(name=registry_name("context"))
    def context(split: str = "test", limit: int | None = None, lead: str | None = None, pool: str = "protocol",
                domain: str | None = None, compact_results: bool = False, history_hours: int | None = None,
                native_tools: bool = True):
        """fwgym context suite: the decision task with a context note about the target day (CiK-style scenarios)."""
        return _task("context", split, limit, lead, pool, domain, _options(compact_results, history_hours, native_tools))

    @task(name=registry_name("forecast"))
    def forecast(split: str = "test", limit: int | None = None, lead: str | None = None, pool: str = "protocol",
                 domain: str | None = None, compact_results: bool = False, history_hours: int | None = None,
                 native_tools: bool = True):
        """fwgym forecast suite: submit 24 x 9 quantiles (or sample paths); score the capped RCRPS."""
        return _task("forecast", split, limit, lead, pool, domain, _options(compact_results, history_hours, native_tools))

    return decision, context, forecast


decision, context, forecast = _register()
