"""``fwgym evaluate``: run policies (and optionally an agent of a plug-in kind) on a split into a run
directory, and print the leaderboard.

Every run writes its own directory (:mod:`fwgym.evaluation.rundir`): ``--out DIR`` must not exist or be
empty (``--overwrite`` replaces a run there); the default is a new ``results/<split>[-<suite>]``
(then ``-2``, ``-3``, ...). Records and traces are appended as each episode ends, so Ctrl-C or a crash
loses at most the episodes in flight, and ``fwgym evaluate --resume DIR`` finishes the run: it plays the
missing episodes and those that ended with ``harness_error``, with the settings of the run's manifest
(options given with ``--resume`` must agree with them, except the operational ones:
:data:`OPERATIONAL`).

Exit codes: 0 the run is complete; 1 episodes ended with ``harness_error`` (the run is incomplete:
resume it) or an agent's preflight failed (nothing was run); 2 a bad argument or file; 130 interrupted
(Ctrl-C: the finished episodes are kept, resume it); 143 terminated (SIGTERM: the same as Ctrl-C).
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from pathlib import Path

from fwgym.cli.agent_kinds import agent_kinds, resolve_kind
from fwgym.cli.agent_kinds.isolation import protect_run_paths
from fwgym.cli.agent_kinds.llm import add_common_arguments
from fwgym.cli.args import (add_backend_arguments, add_domain_argument, add_lead_argument, add_output_argument,
                            add_progress_argument, add_split_argument, positive_int)
from fwgym.cli.resume import check_resume
from fwgym.cli.preflight import check_agent_infrastructure, check_answer_room, print_preflight, probe_plugins
from fwgym.cli.runs import label_arg, labels_of, play_sessions, print_run_leaderboard, repeated_agents
from fwgym.cli.tables import AUTO, MARKDOWN, TABLE
from fwgym.evaluation import SUITES
from fwgym.forecasters.registry import POOLS

NAME = "evaluate"
HELP = "run policies on a split into a new run directory and print the leaderboard"
#: options that may differ between a run's sessions (how it runs, not what it measures); ``--resume``
#: refuses any other option that disagrees with the run's manifest
OPERATIONAL: tuple[str, ...] = ("workers", "concurrency", "no_progress", "backend", "ray_address", "timeout",
                                "max_retries", "out", "resume", "overwrite", "forecast_store", "format",
                                "allow_code_change")
#: agent-factory settings left out of the compared settings (operational, or where the run writes)
_AGENT_OPERATIONAL = ("timeout", "max_retries", "trace_out")
#: exit codes
EXIT_OK, EXIT_INCOMPLETE, EXIT_BAD_ARGS, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym evaluate`` in argument groups (run settings, agent, LLM agents, one group per agent
    kind, output, operational), with those of every agent kind."""
    _add_run_settings(p.add_argument_group("run settings", "what the run measures (recorded in its manifest; "
                                                           "--resume refuses a different value)"))
    kinds = agent_kinds()
    agent = p.add_argument_group("agent", "an agent to evaluate beside (or instead of) the policies")
    agent.add_argument("--agent", default=None, metavar="KIND",
                       help="evaluate an agent of this kind (plus any --policies): " +
                            "; ".join(f"{k}: {m.HELP}" for k, m in sorted(kinds.items())))
    agent.add_argument("--repeat", type=positive_int, default=1, metavar="K",
                       help="play the agent K times with seeds S, S+1, ... (S = --llm-seed, default 0), one session "
                            "per repeat, its rows named <agent>#1 .. <agent>#K (the other policies play once); fwgym "
                            "compare RUN reports the repeats' stability (LLM agents only; default 1)")
    llm = p.add_argument_group("LLM agents (--agent openai, --agent transformers)",
                               "options shared by the LLM agent kinds")
    add_common_arguments(llm)  # before the kinds, so the shared options are in this group, not in the first kind's
    for k, m in sorted(kinds.items()):
        m.add_arguments(p.add_argument_group(f"--agent {k}"))
    out = p.add_argument_group("output", "where the run is written and what is printed")
    add_output_argument(out, metavar="DIR", default=None,
                        help="run directory; must not exist or be empty (default: a new results/<split>[-<suite>], "
                             "then -2, -3, ...)")
    out.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    out.add_argument("--resume", default=None, metavar="DIR",
                     help="finish the run in DIR: play its missing and harness_error episodes with its settings")
    out.add_argument("--allow-code-change", action="store_true",
                     help="with --resume: finish the run although fwgym's own code changed since it started (refused "
                          "otherwise); its rows are then marked MIXED CODE")
    out.add_argument("--format", choices=(AUTO, TABLE, MARKDOWN), default=AUTO,
                     help="the leaderboard printed at the end: aligned table on a terminal, Markdown elsewhere "
                          "(default auto); the run directory's leaderboard.md and .csv are always written")
    _add_operational(p.add_argument_group("operational", "how the run executes (may differ between the sessions "
                                                         "of a run; never changes a score)"))


def _add_run_settings(g) -> None:
    add_split_argument(g)
    add_domain_argument(g)
    add_lead_argument(g)
    g.add_argument("--policies", nargs="+", default=None,
                   help="policy names (default: the suite's reference rows: fixed classical and priced policies whose "
                        "weights load, selectors and oracles)")
    g.add_argument("--no-tsfm", action="store_true", help="do not try to load TSFM weights for the default policies")
    g.add_argument("--limit", type=positive_int, default=None,
                   help="at most N cases per domain, evenly spaced through the split (each policy plays each: --limit 4 "
                        "on the protocol's 2 domains is 8 episodes per policy)")
    g.add_argument("--suite", choices=tuple(SUITES), default="decision",
                   help="decision (protocol envs, default), context (scenario notes, decision loss) or forecast (RCRPS)")
    g.add_argument("--scenario-seed", type=int, default=0, dest="scenario_seed", metavar="N",
                   help="context and forecast suites: seed of the scenario drawn per case (default 0, the reported "
                        "tables'); a setting of the run")
    g.add_argument("--pool", choices=tuple(POOLS), default="protocol",
                   help="the priced forecast pool: protocol (default: the paper's seasonal_empirical and TSFMs), "
                        "extended (+ the statsmodels forecasters ets, theta, sarima, mstl_ets; adds their fixed policies "
                        "and catalog_oracle_extended to the default policies) or no_tsfm (seasonal_empirical only: the "
                        "TSFM-access ablation; catalog_oracle_no_tsfm replaces catalog_oracle); a setting of the run")
    g.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="add these priced models to the forecast pool of every env of the run, after --pool's: "
                        "plug-ins (the 'fwgym.forecasters' entry-point group or register_forecaster) or built-in "
                        "models (fwgym list models); their fixed policies join the default policies; a setting of "
                        "the run")
    g.add_argument("--label", action="append", type=label_arg, default=None, metavar="KEY=VALUE",
                   help="a label of the run (repeatable), e.g. thinking=on for a server-side setting fwgym cannot see: "
                        "recorded in the manifest's settings, shown in leaderboards and compared by fwgym compare")


def _add_operational(g) -> None:
    g.add_argument("--workers", type=positive_int, default=1, help="local worker processes (default 1)")
    g.add_argument("--concurrency", type=positive_int, default=1,
                   help="episodes in flight per process (threads with their own env and agent; for LLM agents "
                        "waiting on a server; default 1)")
    add_backend_arguments(g, what="local processes (default) or a Ray cluster")
    g.add_argument("--forecast-store", default=None, metavar="DIR",
                   help="read priced forecasts from this store (fwgym forecasts build); same credits and results, "
                        "misses computed live; a store of other weights/revision is refused")
    add_progress_argument(g)


def _explicit(args) -> set[str]:
    """The options given on the command line (their ``dest``), from ``args.argv`` (set by
    :func:`fwgym.cli.main`); without it, the options whose value is not the default."""
    p = argparse.ArgumentParser(add_help=False)
    add_arguments(p)
    argv = getattr(args, "argv", None)
    if argv is None:
        defaults = vars(p.parse_args([]))
        return {k for k, v in vars(args).items() if k in defaults and v != defaults[k]}
    for action in p._actions:
        action.default = argparse.SUPPRESS
    rest = list(argv)
    if rest and rest[0] == NAME:
        rest = rest[1:]
    return set(vars(p.parse_args(rest)))


def _stored_args(args) -> dict:
    """The run-defining options as JSON (what ``--resume`` rebuilds the run from)."""
    import json

    out = {}
    for k, v in sorted(vars(args).items()):
        if k in ("func", "argv", "command", "resume", "overwrite", "out", "allow_code_change"):
            continue
        try:
            json.dumps(v)
        except TypeError:
            continue
        out[k] = v
    return out


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM while ``fwgym evaluate`` runs: the run ends as Ctrl-C ends it."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises :class:`Terminated` in the main thread while the block runs (then the old handler is back)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run(args) -> int:
    """Run (or resume) the evaluation into its run directory; print the leaderboard (see the module docstring)."""
    with _sigterm_as_interrupt():
        return _run(args)


def _run(args) -> int:
    from fwgym.evaluation.manifest import canonical_json, read_manifest
    from fwgym.evaluation.rundir import check_new_run_dir, default_run_dir

    explicit = _explicit(args)
    if args.resume:
        d = Path(args.resume)
        manifest = read_manifest(d)
        if manifest is None:
            raise ValueError(f"--resume {d}: no manifest.json there; it is not a run directory of fwgym evaluate")
        stored = manifest.get("args")
        if not isinstance(stored, dict):
            raise ValueError(f"--resume {d}: the run was not written by `fwgym evaluate` (its manifest has no "
                             "command options to resume from)")
        conflicts = [f"--{k.replace('_', '-')}: the run has {canonical_json(stored.get(k))}, this command gives "
                     f"{canonical_json(getattr(args, k, None))}"
                     for k in sorted(explicit) if k not in OPERATIONAL and
                     canonical_json(stored.get(k)) != canonical_json(getattr(args, k, None))]
        if conflicts:
            raise ValueError(f"--resume {d}: these options differ from the run's manifest; a run is finished with "
                             "its own settings (start a new run to change them): " + "; ".join(conflicts))
        for k, v in stored.items():
            if k not in explicit or k not in OPERATIONAL:
                setattr(args, k, v)
        args.out = str(d)
        protect_run_paths(args)
        return _execute(args, d, manifest)
    if getattr(args, "allow_code_change", False):
        raise ValueError("--allow-code-change applies to --resume DIR (a new run has one code version)")
    out = Path(args.out) if args.out else default_run_dir(args.split, args.suite)
    check_new_run_dir(out, args.overwrite)
    args.out = str(out)
    protect_run_paths(args)
    return _execute(args, out, None)


def _agent_settings(policy) -> object:
    from fwgym.evaluation.manifest import describe_policy

    d = describe_policy(policy)
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if k not in _AGENT_OPERATIONAL}
    return d


def _execute(args, out: Path, manifest: dict | None) -> int:
    from fwgym.errors import HarnessError
    from fwgym.evaluation import reference_policy
    from fwgym.evaluation.manifest import environment, model_revisions
    from fwgym.evaluation.rundir import RunDir
    from fwgym.evaluation.runner import policy_labels, run_preflight, select_cases

    if args.concurrency < 1 or args.workers < 1:
        raise ValueError("--concurrency and --workers must be >= 1")
    pool = getattr(args, "pool", None) or "protocol"  # runs written before --pool existed are protocol runs
    if pool not in POOLS:
        raise ValueError(f"--pool must be one of {list(POOLS)}, got {pool!r}")
    # before the run directory is created or touched
    check_packaged_files(args.domain, pool_models(pool, getattr(args, "models", None) or ()))
    resume = manifest is not None
    from fwgym.evaluation.verify import settings_of

    # the lock first (no two sessions in one directory), then every record checked against the manifest
    run = RunDir.resume(out, settings_of(manifest)) if resume else None
    # folders a new run may make before its checks pass (the agent's trace file's): removed again if empty
    trace_out = getattr(args, "trace_out", None)
    new_dirs = [] if resume else _missing_dirs([out] + ([Path(trace_out).parent] if trace_out else []))
    try:
        for torn in (run.torn if run else ()):
            print(f"note: {torn}", file=sys.stderr)
        policies, without_model, env_kwargs = _policies(args, pool)
        labels = policy_labels(policies, env_kwargs)
        check_agent_infrastructure(policies)  # before any episode (and before a new run's directory)
        selected = select_cases(args.split, args.domain, args.lead, args.limit)
        if not selected:
            raise ValueError("no case selected")
        case_ids = [c for _, c in selected]
        env = environment()
        store = _forecast_store(args)  # before the run directory is touched: a bad store is a one-line error
        settings = _settings(args, labels, policies, case_ids, env_kwargs, store)
        if resume:
            check_resume(out, manifest, settings, env, allow_code_change=getattr(args, "allow_code_change", False))
            if run.finished():  # nothing to play (checked as any resume): the run is left as it is, no session added
                n = int((run.manifest.get("counts") or {}).get("scored", len(run.previous)))
                print(f"nothing to resume: the run in {out} is complete ({n} of {n} episodes scored); no session was "
                      f"added and nothing was changed (`fwgym leaderboard {out}` prints its table)", file=sys.stderr)
                return EXIT_OK
        probe_plugins(settings.get("plugin_code") or ())
        try:
            preflight = run_preflight(policies)
        except HarnessError as exc:
            print(f"fwgym: error: preflight failed ({getattr(exc, 'kind', 'infrastructure')}): {exc}; nothing was run"
                  + (f" (the run in {out} is unchanged)" if resume else ""), file=sys.stderr)
            return EXIT_INCOMPLETE
        print_preflight(preflight, args.concurrency)
        check_answer_room(preflight, args.suite)
        session = {"command": ["fwgym", *(getattr(args, "argv", None) or [])], "workers": args.workers,
                   "concurrency": args.concurrency, "backend": args.backend, "environment": env,
                   "preflight": preflight}
        if resume:
            run.manifest["preflight"] = {**(run.manifest.get("preflight") or {}), **preflight}
        else:
            run = RunDir.create(out, _new_manifest(args, session, settings, without_model), overwrite=args.overwrite)
        run.begin()
        run.current_session.update(session)
        run.save()
        print(f"run directory: {out}" + (f" (resuming: session {run.session}; {len(run.done_keys())} of "
                                         f"{len(labels) * len(case_ids)} episodes already scored)" if resume else ""),
              file=sys.stderr)
        expected = [(lab, c) for lab in labels for c in case_ids]
        run_kwargs = dict(env_kwargs)
        if store is not None:  # its path may change between sessions; its manifest's sha256 is a setting
            run_kwargs["forecast_store"] = str(store.path)
            run.current_session["forecast_store"] = str(store.path)
            run.save()
        t0 = time.perf_counter()
        box = [run]  # the session's run directory (a --repeat run opens one session per repeat)
        try:
            records, played = play_sessions(args, box, out, policies, labels, case_ids, dict(run.current_session),
                                            run_kwargs, settings, model_revisions, resume, _end_session)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
            run = box[0]
            counts = _end_session(run, expected, "interrupted", model_revisions, settings)
            what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            print(f"\n{what}: {counts['recorded']} of {counts['expected']} episodes are recorded in {out}; finish "
                  f"the run with `fwgym evaluate --resume {out}`", file=sys.stderr)
            return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
        except BaseException:
            run = box[0]
            _end_session(run, expected, "crashed", model_revisions, settings)
            raise
        run = box[0]
        elapsed = time.perf_counter() - t0
        counts = _end_session(run, expected, None, model_revisions, settings)
        played += run.current_session["episodes"]
    finally:
        if run is not None:
            run.close()
        else:
            _remove_empty(new_dirs)
    if counts["agent_error"]:
        print(f"note: {counts['agent_error']} episode(s) ended because the agent raised an exception (a bug in the "
              "agent's code, not its infrastructure): scored invalid, reason 'agent_error: ...' in results.jsonl",
              file=sys.stderr)
    if counts["harness_error"] or counts["missing"]:
        print(f"error: {counts['harness_error']} episode(s) ended with harness_error: the agent's infrastructure "
              "failed (server unreachable, timeouts, HTTP errors after the retries), so they are NOT scored; the run "
              f"is incomplete ({counts['scored']} of {counts['expected']} scored): fix the backend and finish it "
              f"with `fwgym evaluate --resume {out}`", file=sys.stderr)
        return EXIT_INCOMPLETE
    ref = reference_policy(labels)
    print_run_leaderboard(args, out, records, ref, settings, played, elapsed, run.session if resume else None,
                       run.manifest)
    return EXIT_OK


def _settings(args, labels: list, policies: list, case_ids: list, env_kwargs: dict, store) -> dict:
    """The run's settings (:func:`fwgym.evaluation.manifest.run_settings`), with the labels, repeats, objective
    and forecast store only when given (so the settings of other runs are unchanged)."""
    from fwgym.evaluation.manifest import run_settings
    from fwgym.tools import MAX_CALLS

    settings = run_settings(suite=args.suite, split=args.split, domains=args.domain, lead=args.lead,
                            limit=args.limit, cases=case_ids, policies=labels,
                            agents={lab: _agent_settings(p) for lab, p in zip(labels, policies)},
                            env_kwargs=env_kwargs, max_calls=MAX_CALLS)
    if getattr(args, "label", None):
        settings["labels"] = labels_of(args.label)
    if (getattr(args, "repeat", 1) or 1) > 1:
        settings["repeat"] = int(args.repeat)
    if args.agent and (getattr(args, "objective", None) or "score") != "score":
        settings["objective"] = args.objective
    if store is not None:  # the store's manifest is a setting: runs with different stores neither merge nor resume
        settings["forecast_store"] = {"sha256": store.digest, "models": list(store.models)}
    return settings


def _new_manifest(args, session: dict, settings: dict, without_model: dict) -> dict:
    """The manifest of a new run directory (its first session is ``session``)."""
    from fwgym.baselines.forecast import FALLBACK_METHOD
    from fwgym.evaluation.manifest import MANIFEST_VERSION, model_revisions, new_run_id, now
    from fwgym.forecasters.registry import describe_pool

    return {"manifest_version": MANIFEST_VERSION, "run_id": new_run_id(), "created": now(),
            "command": session["command"], "args": _stored_args(args), "settings": settings,
            "environment": session["environment"], "models": model_revisions(settings["forecast_pool"]),
            "forecast_pool": describe_pool(settings["forecast_pool"]), "preflight": session["preflight"],
            "policies_without_model": {p: f"ran without its model, falling back to {FALLBACK_METHOD}: {r}"
                                       for p, r in without_model.items()}}


def _forecast_store(args):
    """The :class:`~fwgym.forecasters.store.ForecastStore` of ``--forecast-store`` (``None`` without one).

    Raises:
        fwgym.forecasters.store.StoreError: no store there, or a malformed manifest.
    """
    if not getattr(args, "forecast_store", None):
        return None
    from fwgym.forecasters.store import open_store

    return open_store(args.forecast_store)


def _missing_dirs(paths) -> list[Path]:
    """The folders of ``paths`` (and their parents) that do not exist now, deepest first."""
    out = []
    for p in paths:
        p = Path(p).absolute()
        while not p.exists() and p != p.parent:
            if p not in out:
                out.append(p)
            p = p.parent
    return sorted(out, key=lambda d: len(d.parts), reverse=True)


def _remove_empty(dirs) -> None:
    """Remove the folders of ``dirs`` (deepest first) that exist and are empty; leave any other."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass


def check_packaged_files(domains, models) -> None:
    """Check, before any episode starts, every packaged file a run on ``domains`` with the forecast
    pool ``models`` reads: ``config/sigma.json``, each domain's files (:meth:`fwgym.domains.Domain.files`:
    its Parquet file; the balancing-authority names and zones of electricity), and ``config/tariff_extended.json`` when a model of the pool is
    priced by it. A run on a corrupted install is refused as a whole (``fwgym: error: ... failed its
    sha256 check``, exit 2) instead of crashing, or being scored, in its first episode.

    Raises:
        fwgym.data.DataIntegrityError: a file is missing or fails its sha256 check (the message names it).
        ValueError: an unknown domain or model.
    """
    from fwgym.core.tariff import tariff_rows
    from fwgym.data import verify_file, verify_packaged
    from fwgym.domains import get_domain

    verify_packaged("config/sigma.json")
    for domain in domains:
        for f in get_domain(domain).files():  # the domain's spec names its files (data, names, zones)
            verify_file(*f.resolve())
    for model in models:
        tariff_rows(model)  # reads (and checks) the extended tariff for a model outside the protocol's table


def _policies(args, pool: str) -> tuple[list, dict, dict]:
    """``(policies, {policy asked for by name that runs without its model: reason}, env_kwargs)`` of the
    command line (skipped and model-less policies are reported on stderr).

    Raises:
        ValueError: a named policy that buys models outside the run's pool (``--pool``, ``--models``);
            a bad ``--models`` (:func:`pool_models`); an agent named like a policy (:func:`check_agent_label`).
    """
    from fwgym.baselines.forecast import FALLBACK_METHOD
    from fwgym.baselines.registry import ORACLE_POLICIES, SELECTOR_POLICIES, suite_policies, unavailable_policies
    from fwgym.evaluation.runner import policy_label
    from fwgym.suites import get_suite

    extra = getattr(args, "models", None) or ()  # runs written before --models existed have none
    models = pool_models(pool, extra)
    if args.agent:
        kind = resolve_kind(args.agent, agent_kinds())
        if getattr(args, "agent_name", None) is not None:  # before the kind builds the agent (and makes folders)
            check_agent_label(args.agent_name, args.policies or ())
        agent = kind.build(args)
        check_agent_label(policy_label(agent), args.policies or ())
        policies = repeated_agents(agent, getattr(args, "repeat", 1) or 1) + list(args.policies or [])
    elif (getattr(args, "repeat", 1) or 1) > 1:
        raise ValueError("--repeat repeats an agent (--agent openai or transformers, whose sampling seed changes per "
                         "repeat); fwgym's policies are deterministic and play once")
    elif args.policies:
        policies = list(args.policies)
    else:
        policies, skipped = suite_policies(args.suite, include_tsfm=not args.no_tsfm, pool=pool)
        if get_suite(args.suite).task == "decision":  # the fixed policies of the added models (they submit decisions)
            added = [m for m in extra if m not in policies]
            skipped.update(unavailable_policies(added))
            at = next((i for i, p in enumerate(policies) if p in SELECTOR_POLICIES + ORACLE_POLICIES), len(policies))
            policies[at:at] = [m for m in added if m not in skipped]
        for policy, reason in skipped.items():
            print(f"skipping policy {policy}: {reason}", file=sys.stderr)
    without_model = unavailable_policies(args.policies or ())  # asked for by name: run, but say so
    for policy, reason in without_model.items():
        print(f"warning: policy {policy} runs without its model ({reason}); its episodes that need the model fall "
              f"back to {FALLBACK_METHOD}, so its row does not measure the model", file=sys.stderr)
    env_kwargs = dict(SUITES[args.suite])
    seed = getattr(args, "scenario_seed", 0)
    if seed:
        if not env_kwargs.get("scenarios"):
            raise ValueError(f"--scenario-seed applies to the context and forecast suites (scenario notes), not to "
                             f"--suite {args.suite}")
        if seed < 0:
            raise ValueError(f"--scenario-seed must be >= 0, got {seed}")
        env_kwargs["scenario_seed"] = int(seed)
    if models != POOLS["protocol"]:
        env_kwargs["models"] = list(models)
    _check_pool(policies, pool, models)
    return policies, without_model, env_kwargs


def pool_models(pool: str, extra=()) -> tuple[str, ...]:
    """The forecast pool of a run: the models of the named ``pool`` (``--pool``), then ``extra``
    (``--models``).

    Raises:
        ValueError: an unknown model (the message lists the known ones), or one given twice or
            already in ``pool``.
        fwgym.forecasters.PluginError: an entry point of the ``fwgym.forecasters`` group fails to load.
    """
    from fwgym.forecasters.registry import ENTRY_POINT_GROUP, known_models

    base = POOLS[pool]
    if not extra:
        return base
    known = known_models()
    unknown = [m for m in extra if m not in known]
    if unknown:
        raise ValueError(f"--models: unknown model{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"known models: {', '.join(known)} (plug-ins join through the {ENTRY_POINT_GROUP!r} "
                         "entry-point group or fwgym.forecasters.register_forecaster)")
    twice = sorted({m for m in extra if m in base or list(extra).count(m) > 1})
    if twice:
        raise ValueError(f"--models: {', '.join(twice)} {'is' if len(twice) == 1 else 'are'} given twice or already "
                         f"in the {pool} pool ({', '.join(base)})")
    return base + tuple(extra)


def check_agent_label(label: str, policies=()) -> None:
    """Refuse an agent's row name that could pass for another row or break a table:
    :func:`fwgym.baselines.registry.check_policy_name` (empty, too long, characters that do not print,
    leading/trailing whitespace, or, after NFKC normalization and case folding, the name of one of
    fwgym's policies or of another policy of the run, ``policies``).

    Raises:
        ValueError: such a name (one line; it says how to rename the agent).
    """
    from fwgym.baselines.registry import check_policy_name

    check_policy_name(label, policies)


def _check_pool(policies: list, pool: str, models: tuple[str, ...]) -> None:
    """Refuse named policies that buy models outside the run's forecast pool, saying which option adds them."""
    from fwgym.baselines.registry import policy_models
    from fwgym.forecasters.registry import EXTENDED_MODELS

    outside = {p: [m for m in policy_models(p) if m not in models] for p in policies if isinstance(p, str)}
    outside = {p: ms for p, ms in outside.items() if ms}
    if not outside:
        return
    missing = sorted({m for ms in outside.values() for m in ms})
    if pool == "protocol" and set(missing) <= set(EXTENDED_MODELS):
        raise ValueError(f"policies {list(outside)} buy models of the extended forecast pool; run them with --pool "
                         "extended")
    raise ValueError(f"policies {list(outside)} buy models outside the run's forecast pool ({', '.join(models)}): "
                     f"{', '.join(missing)}; add them with --models {' '.join(missing)}")


def _end_session(run, expected: list, status: str | None, model_revisions, settings: dict) -> dict:
    """Finish the run directory's session: records compacted and hashed, counts, models, manifest written."""
    counts = run.finalize(expected, status=status)
    run.manifest["models"] = model_revisions(settings["forecast_pool"])
    run.save()
    refused = [x for x in run.manifest.get("refused_lines") or [] if x.get("session") == run.session]
    if refused:
        first = refused[0]
        print(f"warning: {len(refused)} line(s) of {run.records_path} were not written by this run (e.g. line "
              f"{first['line']}: policy {first['policy']!r} on case {first['case_id']!r}): refused, not kept; listed in "
              "the manifest's refused_lines and in the leaderboard header", file=sys.stderr)
    return counts


__all__ = ["NAME", "HELP", "OPERATIONAL", "add_arguments", "run", "pool_models", "check_agent_label",
           "check_packaged_files", "check_agent_infrastructure", "Terminated", "label_arg", "labels_of",
           "repeated_agents"]
