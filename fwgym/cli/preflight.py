"""Checks ``fwgym evaluate`` makes before any episode (and before a new run's directory is made): the agents'
infrastructure (issue 25.6). A failure is one line ``fwgym: error: ...`` (exit 2) and nothing is run, so an
infrastructure fault is never scored as the agent's failure. Also what the run says about its agents and
plug-ins before it plays: the agents' preflight findings (:func:`print_preflight`) and a probe forecast of
each plug-in forecaster (:func:`probe_plugins`)."""
from __future__ import annotations

import sys

__all__ = ["check_agent_infrastructure", "print_preflight", "probe_plugins", "check_answer_room"]


def check_answer_room(preflight: dict, suite: str) -> None:
    """Refuse, after the preflight and before any episode, an agent whose reply bound (``max_tokens``) cannot hold
    the suite's final answer as its preflight measured it with the model's tokenizer (``answer_tokens``; agents
    whose preflight could not measure it were checked with the estimate only,
    :func:`fwgym.cli.agent_kinds.llm.check_max_tokens`).

    Raises:
        ValueError: one line per agent that cannot answer (``fwgym: error: ...``, exit 2); nothing was run.
    """
    from fwgym.cli.agent_kinds.llm import answer_room_problem, answer_task

    for policy, facts in preflight.items():
        if not isinstance(facts, dict) or "answer_tokens" not in facts:
            continue
        measured, bound = facts.get("answer_tokens"), facts.get("max_tokens")
        need = measured.get(answer_task(suite)) if isinstance(measured, dict) else None
        if isinstance(need, int) and not isinstance(need, bool):
            problem = answer_room_problem(bound, need, suite, f"{facts.get('answer_tokens_how')}")
            if problem:
                raise ValueError(f"{policy}: {problem}; nothing was run")
        elif isinstance(bound, int):  # not measured: the estimate let it pass; at 1 token per character it may not fit
            from fwgym.agents.chat.constrain import ANSWER_SCALE, answer_example

            most = len(answer_example(answer_task(suite), {"case": {"scale": ANSWER_SCALE}}))
            if bound < most:
                print(f"warning: {policy}: the {suite}-suite answer could not be measured with the model's tokenizer; "
                      f"a tokenizer that splits numbers into digits needs up to ~{most} tokens, above --max-tokens "
                      f"{bound}: its answers may be cut", file=sys.stderr)


def _settings_values(description, key: str) -> list:
    """Every value of ``key`` anywhere in a (nested) agent description."""
    out = []
    if isinstance(description, dict):
        for k, v in description.items():
            if k == key:
                out.append(v)
            else:
                out += _settings_values(v, key)
    elif isinstance(description, (list, tuple)):
        for v in description:
            out += _settings_values(v, key)
    return out


def check_agent_infrastructure(policies, timeout: float = 120.0) -> None:
    """Refuse, before any episode, an agent whose infrastructure cannot serve a single episode, so that its
    failures are never scored as the agent's (issue 25.6):

    * an isolated worker command (``--agent-worker-command``) whose interpreter cannot import numpy (every
      observation carries numpy arrays): the command with its worker script replaced by
      ``-c "import numpy"`` is run (wrappers such as ``sudo -u USER`` or ``docker run ... IMAGE`` stay in front);
      a command without a ``.py`` worker script cannot be probed and is left to the episodes;
    * a reply cache (``--reply-cache``) that is not a folder, or holds a malformed entry
      (:meth:`fwgym.agents.chat.cache.ReplyCache.check`).

    Raises:
        ValueError: one line saying what is wrong (``fwgym: error: ...``, exit 2).
    """
    import shlex
    import subprocess

    from fwgym.agents.chat.cache import ReplyCache
    from fwgym.evaluation.manifest import describe_policy

    for policy in policies:
        if isinstance(policy, str):
            continue
        d = describe_policy(policy)
        for command in _settings_values(d, "worker_command"):
            if not command:
                continue
            argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
            at = next((i for i, a in enumerate(argv) if a.endswith(".py")), None)
            if not at:
                continue
            probe = argv[:at] + ["-c", "import numpy"]
            try:
                proc = subprocess.run(probe, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ValueError(f"--agent-worker-command {shlex.join(argv)!r}: its interpreter does not start "
                                 f"({type(exc).__name__}: {exc}); nothing was run") from None
            if proc.returncode != 0:
                why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1][:300]
                raise ValueError(f"--agent-worker-command {shlex.join(argv)!r}: its interpreter cannot import numpy, "
                                 f"which every observation needs ({why}); install numpy there; nothing was run")
        for folder in _settings_values(d, "reply_cache"):
            if folder:
                from fwgym.agents.openai import completion_problem

                ReplyCache.check(folder, completion_problem)


def probe_plugins(models) -> None:
    """One probe forecast of each plug-in forecaster of the run (:func:`fwgym.forecasters.hosted.probe`): one
    that fails is a warning here and, for a hosted plug-in, in the manifest's ``models`` (its ``health``),
    like a TSFM without weights: its purchases will end as ``backend_error`` (charged)."""
    from fwgym.forecasters.hosted import HostedForecaster, probe
    from fwgym.forecasters.registry import get_forecaster

    for m in models:
        f = get_forecaster(m)
        why = probe(f)
        if isinstance(f, HostedForecaster):
            f.probe_error = why  # a hosted plug-in's health (HostedForecaster.health: in the manifest's models)
        if why is not None:
            print(f"warning: plug-in forecaster {m} failed its probe forecast ({why}); its forecasts will end as "
                  "backend_error (the charge stands), so policies that buy it do not measure it", file=sys.stderr)


def print_preflight(preflight: dict, concurrency: int = 1) -> None:
    """The agents' preflight findings on stderr (they are in the manifest too): model listed, seed honoured,
    tools shown to the model, parallel slots, with a note when requests will queue on a single-slot server."""
    for policy, facts in preflight.items():
        if not isinstance(facts, dict):
            continue
        parts = []
        for key, label in (("model_listed", "model listed"), ("seed_honoured", "seed honoured"),
                           ("tools_shown", "tools shown to the model"), ("parallel_slots", "parallel slots"),
                           ("server_kind", "server")):
            if key in facts:
                parts.append(f"{label}: {'unknown' if facts[key] is None else facts[key]}")
        answer = facts.get("answer_tokens")
        if isinstance(answer, dict):
            parts.append("answer tokens: " + ", ".join(f"{k} {v}" for k, v in answer.items())
                         + f" (max tokens {facts.get('max_tokens')})")
        if parts:
            print(f"preflight {policy}: " + "; ".join(parts), file=sys.stderr)
        if facts.get("tools_shown") is False:
            print(f"warning: {policy}: the server accepts tools but does not show them to the model (the prompt did "
                  "not grow); pass --describe-tools (or --no-native-tools)", file=sys.stderr)
        slots = facts.get("parallel_slots")
        if isinstance(slots, int) and concurrency > slots:
            print(f"note: {policy}: the server has {slots} parallel slot(s) and --concurrency is {concurrency}: "
                  "requests queue, so the per-reply --timeout must cover the queue (concurrency x generation time)",
                  file=sys.stderr)
