"""``fwgym forecasts``: build and verify a persisted forecast store (:mod:`fwgym.forecasters.store`).

``fwgym forecasts build --model M [M ...] --split S`` computes, for every case of the split, the
forecasts of M that the scripted policies and the RL menus buy (:func:`store_requests`) and adds
them to the store directory (``--out``, default ``forecast_store``); ``fwgym forecasts verify DIR``
checks every shard against the manifest and, with ``--recompute N``, recomputes N random rows of each
model from fwgym's packaged data and fails on any difference (a store whose forecasts were replaced and
whose manifest was re-hashed passes the hash checks, not this one:
:mod:`fwgym.forecasters.store.verify`). Attach the store with ``fwgym evaluate --forecast-store DIR``,
``FWBenchEnv(..., forecast_store=DIR)`` or ``make_rl_env(..., forecast_store=DIR)`` (docs/store.md).
"""
from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace
from typing import Iterable

from fwgym.cli.args import (add_backend_arguments, add_domain_argument, add_lead_argument, add_output_argument,
                            add_progress_argument, add_recompute_arguments, add_split_argument, positive_int)

NAME = "forecasts"
HELP = "build or verify a forecast store (precomputed priced forecasts read by the tools)"

__all__ = ["NAME", "HELP", "add_arguments", "run", "store_requests"]


def store_requests(cases: Iterable, model: str, context_steps: int | None = None, horizon: int | None = None) -> list:
    """The forecasts of ``model`` that the scripted policies and the RL macro menus buy on ``cases``.

    Without ``context_steps``/``horizon``, per case:

    * the covering request (:func:`fwgym.forecasters.covering.covering_forecast`: the last
      :data:`~fwgym.forecasters.covering.COVERING_CONTEXT` visible hours, horizon ``case.horizon``),
      bought by the fixed priced policies, the routing reference, the catalog oracle (priced without
      paying, then bought) and the ``buy_plan_submit:<model>`` / ``buy:<model>`` macro entries;
    * the backtest of the ``replay:<model>`` entry of the sequential menu, with the arguments
      :func:`fwgym.rl.macro.replay_args` gives for the case, translated as the ``replay`` tool
      does (context = the ``context_steps`` visible values ending at the origin), when the model
      accepts that context.

    With ``context_steps`` and/or ``horizon``: one request per case from the last visible hour with
    that context (default 336) and horizon (default ``case.horizon``), e.g. what an LLM agent asks for.

    Args:
        cases: :class:`~fwgym.core.cases.Case` objects.
        model: a known priced model.
        context_steps: 1..336, or ``None``.
        horizon: 1..336, or ``None``.

    Returns:
        :class:`~fwgym.forecasters.store.ForecastRequest` list (repeated keys are merged by the builder).

    Raises:
        ValueError: unknown model, context/horizon out of range, or a priced macro entry kind this
            function does not know (the menu grew: the store would miss its requests).
    """
    from fwgym.core.cases import HISTORY_HOURS
    from fwgym.forecasters.covering import COVERING_CONTEXT
    from fwgym.forecasters.registry import check_models, get_forecaster
    from fwgym.forecasters.store import ForecastRequest
    from fwgym.core.tariff import HORIZON_BUCKETS
    from fwgym.tools.actions import time_arg
    from fwgym.rl.macro import menu_for, replay_args

    check_models([model])
    min_context = get_forecaster(model).min_context
    out = []
    if context_steps is not None or horizon is not None:
        ctx = HISTORY_HOURS if context_steps is None else int(context_steps)
        if not 1 <= ctx <= HISTORY_HOURS:
            raise ValueError(f"context_steps must be in 1..{HISTORY_HOURS}, got {context_steps}")
        if horizon is not None and not 1 <= int(horizon) <= HORIZON_BUCKETS[-1]:
            raise ValueError(f"horizon must be in 1..{HORIZON_BUCKETS[-1]}, got {horizon}")
        for c in cases:
            out.append(ForecastRequest(c.case_id, c.series_id, c.last_visible, c.history[-ctx:],
                                       c.horizon if horizon is None else int(horizon)))
        return out
    kinds = {e.kind for e in menu_for("sequential", [model]) if e.target == model}
    unknown = kinds - {"buy_plan_submit", "buy", "replay"}
    if unknown:
        raise ValueError(f"the RL menu has priced entries of kinds {sorted(unknown)} that store_requests does not know")
    for c in cases:
        out.append(ForecastRequest(c.case_id, c.series_id, c.last_visible, c.history[-COVERING_CONTEXT:], c.horizon))
        if "replay" in kinds:
            args = replay_args(SimpleNamespace(meta=SimpleNamespace(horizon=c.horizon, last_visible=c.last_visible)), model)
            origin, ctx = time_arg(args, "origin"), int(args["context_steps"])
            available = origin - c.history_start + 1  # as fwgym.tools.purchase.replay
            if min_context <= ctx <= available:
                out.append(ForecastRequest(c.case_id, c.series_id, origin, c.history[available - ctx : available],
                                           int(args["horizon"])))
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``fwgym forecasts build ...`` and ``fwgym forecasts verify DIR``."""
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="compute forecasts of one or more models on a split and add them to a store")
    what = b.add_argument_group("forecasts", "which models and cases, and how they are computed")
    what.add_argument("--model", nargs="+", required=True, metavar="MODEL",
                      help="priced model names (weights resolved as by the tools: FWGYM_<MODEL>_PATH, the Hugging "
                           "Face cache, the hub)")
    add_split_argument(what, required=True)
    add_domain_argument(what)
    add_lead_argument(what)
    what.add_argument("--limit", type=positive_int, default=None,
                      help="at most N cases per domain (evenly spaced, as evaluate)")
    what.add_argument("--context", type=positive_int, default=None,
                      help="store forecasts of this context from the last visible hour instead of the policies' and "
                           "RL menus' requests")
    what.add_argument("--horizon", type=positive_int, default=None,
                      help="with --context: the horizon (default: the case's covering one)")
    what.add_argument("--batch-size", type=positive_int, default=64,
                      help="series per backend call for batched TSFMs (1: one by one)")
    what.add_argument("--check", choices=("first", "all"), default="first",
                      help="batched results checked against the single-series path: the first batch of each group and "
                           "one row per batch (default), or every row")
    out = b.add_argument_group("output")
    add_output_argument(out, metavar="DIR", default="forecast_store", help="store directory (default ./forecast_store)")
    out.add_argument("--overwrite", action="store_true",
                     help="replace a model's rows built by another forecaster (weights, revision, settings)")
    ops = b.add_argument_group("operational")
    ops.add_argument("--workers", type=positive_int, default=1,
                     help="local worker processes (or Ray CPUs with --backend ray)")
    add_backend_arguments(ops)
    add_progress_argument(ops)
    v = sub.add_parser("verify", help="check every shard of a store against its manifest and list its models; with "
                                      "--recompute N also recompute N random rows of each model")
    v.add_argument("store", help="store directory")
    add_recompute_arguments(v, what="rows of each model",
                            how="contexts rebuilt from fwgym's packaged data, by the forecaster here")


def run(args) -> int:
    """Run ``build`` or ``verify``; returns the exit code (1 when a build stored nothing it was asked for)."""
    return _build(args) if args.action == "build" else _verify(args)


def _build(args) -> int:
    from fwgym.core.cases import build_cases
    from fwgym.domains import get_domain
    from fwgym.evaluation import select_cases
    from fwgym.forecasters.registry import check_models, get_forecaster
    from fwgym.forecasters.store import build_store, open_store

    models = check_models(args.model)
    for model in models:  # before any work: a model that cannot run is an argument error
        av = get_forecaster(model).availability()
        if not av.available:
            raise ValueError(av.reason or f"{model} is unavailable")
    selected = select_cases(args.split, args.domain, args.lead, args.limit)
    if not selected:
        raise ValueError("no case selected")
    by_id = {c.case_id: c for d in dict.fromkeys(d for d, _ in selected) for c in build_cases(d, args.split)}
    cases = [by_id[cid] for _, cid in selected]
    domains = sorted({d for d, _ in selected})
    info = {"split": args.split, "domains": domains, "lead": args.lead, "limit": args.limit, "cases": len(cases),
            "context": args.context, "horizon": args.horizon,
            "data_sha256": {p.name: digest for p, digest in (get_domain(d).series_file.resolve() for d in domains)}}
    worst = 0
    for model in models:
        requests = store_requests(cases, model, args.context, args.horizon)
        bar = None
        if not args.no_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(requests), unit="forecast", desc=f"{model} {args.split}", dynamic_ncols=True)
        try:
            rec = build_store(args.out, get_forecaster(model), requests, batch_size=args.batch_size,
                              workers=args.workers, backend=args.backend, ray_address=args.ray_address,
                              overwrite=args.overwrite, check=args.check, info=info,
                              progress=bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
        groups = ", ".join(f"{g['context_steps']}x{g['horizon']}: {g['rows']} {g['mode']}"
                           + (f" (batching changed bits, max rel. {g['batch_mismatch']:.1e}: one by one)"
                              if g["batch_mismatch"] is not None else "") for g in rec["groups"])
        print(f"{model}: {rec['requests']} requests, {rec['distinct']} distinct, {rec['skipped_existing']} already "
              f"stored, {rec['stored']} stored, {rec['failed']} failed in {rec['seconds']:.1f} s"
              + (f" ({rec['forecasts_per_second']:.1f} forecasts/s)" if rec["forecasts_per_second"] else "")
              + (f"; {groups}" if groups else ""))
        for line in rec["failures"][:5]:
            print(f"  failed: {line}", file=sys.stderr)
        if rec["distinct"] > rec["skipped_existing"] and rec["stored"] == 0:
            worst = 1
    store = open_store(args.out)
    print(f"store: {store.path} (manifest sha256 {store.digest}); models: {', '.join(store.models)}")
    return worst


def _verify(args) -> int:
    from fwgym.forecasters.store import ForecastStore

    store = ForecastStore(args.store)  # a fresh instance: every shard is read and hashed again
    rows = store.verify()
    print(f"store: {store.path} (manifest sha256 {store.digest}, fwgym {store.manifest.get('fwgym_version')})")
    for name, n in rows.items():
        entry = store.manifest["models"][name]
        fp = entry["fingerprint"]
        print(f"  {name}: {n} forecasts in {len(entry['shards'])} shards, revision {entry.get('revision')}, "
              f"fingerprint {entry['fingerprint_sha256'][:16]}" + (f", weights {fp['weights']}" if fp.get("weights") else ""))
    print("every shard matches its sha256, row count and schema")
    if args.recompute is None:
        return 0
    return _recompute(store, args.recompute, args.seed)


def _recompute(store, n: int, seed: int | None) -> int:
    """``--recompute N``: N random rows of each model recomputed here; 1 on any difference or row that cannot
    be checked."""
    import numpy as np

    from fwgym.cli.args import recompute_seed
    from fwgym.forecasters.registry import get_forecaster, known_models
    from fwgym.forecasters.store.verify import recompute_rows

    seed = recompute_seed(seed)
    rng = np.random.default_rng(seed)
    failed = 0
    print(f"recomputing {n} random rows of each model (seed {seed}):")
    for name in store.models:
        if name not in known_models():
            print(f"  {name}: cannot be recomputed here: no such model (a plug-in that is not installed?)")
            failed += 1
            continue
        f = get_forecaster(name)
        av = f.availability()
        if not av.available:
            print(f"  {name}: cannot be recomputed here: {av.reason}")
            failed += 1
            continue
        got = recompute_rows(store, f, n, rng)
        bad = got["different"] or got["unbuildable"] or got["errors"]
        worst = max((d["max_abs_diff"] for d in got["different"]), default=None)
        print(f"  {name}: {got['checked']} of {got['rows']} rows recomputed: {got['equal']} equal, "
              f"{len(got['different'])} different" + (f" (largest difference {worst:.6g})" if worst is not None else "")
              + (f", {len(got['unbuildable'])} whose context is not in fwgym's data" if got["unbuildable"] else "")
              + (f", {len(got['errors'])} failed" if got["errors"] else "")
              + (f"; torch threads {got['torch_threads']}" if got["torch_threads"] else ""))
        for d in (got["different"] + got["unbuildable"] + got["errors"])[:5]:
            print(f"    {d}", file=sys.stderr)
        failed += bool(bad)
    if failed:
        print(f"fwgym: error: forecast store {store.path}: {failed} model(s) failed the recomputation: its forecasts "
              "are not what the forecaster computes; do not use it (rebuild it)", file=sys.stderr)
        return 1
    print("every recomputed row equals the stored one bit for bit")
    return 0
