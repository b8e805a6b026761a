"""``fwgym evaluate``: run policies (and optionally an agent of a plug-in kind) on a split and print the leaderboard."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fwgym.cases import LEADS, SPLITS
from fwgym.cli.agent_kinds import agent_kinds
from fwgym.cli.args import add_domain_argument
from fwgym.evaluation import SUITES

NAME = "evaluate"
HELP = "run policies on a split and print the leaderboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym evaluate``, and those of every agent kind (one argument group per kind)."""
    p.add_argument("--split", default="test", choices=SPLITS)
    add_domain_argument(p)
    p.add_argument("--lead", choices=tuple(LEADS), default=None)
    p.add_argument("--policies", nargs="+", default=None,
                   help="policy names (default: the suite's reference rows: fixed classical and priced policies whose "
                        "weights load, selectors and oracles)")
    p.add_argument("--no-tsfm", action="store_true", help="do not try to load TSFM weights for the default policies")
    p.add_argument("--limit", type=int, default=None, help="at most N cases per domain (evenly spaced)")
    p.add_argument("--workers", type=int, default=1, help="local worker processes")
    p.add_argument("--out", default=None, help="output directory (default results/<split>)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--suite", choices=tuple(SUITES), default="decision",
                   help="decision (protocol envs, default), context (scenario notes, decision loss) or forecast (RCRPS)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="local processes (default) or a Ray cluster")
    p.add_argument("--ray-address", default=None, help="address of an existing Ray cluster (default: start a local one)")
    p.add_argument("--forecast-store", default=None, metavar="DIR",
                   help="read priced forecasts from this store (fwgym forecasts build); same credits and results, "
                        "misses computed live; a store of other weights/revision is refused")
    kinds = agent_kinds()
    p.add_argument("--agent", choices=sorted(kinds) or None, default=None,
                   help="evaluate an agent of this kind (plus any --policies): " +
                        "; ".join(f"{k}: {m.HELP}" for k, m in sorted(kinds.items())))
    for k, m in sorted(kinds.items()):
        m.add_arguments(p.add_argument_group(f"--agent {k}"))


def run(args) -> int:
    """Run the evaluation, write ``results.jsonl``, ``meta.json`` and the leaderboard files, print the leaderboard."""
    from fwgym.baselines.forecast import FALLBACK_METHOD
    from fwgym.baselines.registry import suite_policies, unavailable_policies
    from fwgym.evaluation import evaluate, format_leaderboard, leaderboard, reference_policy, run_meta, write_results

    if args.agent:
        kind = agent_kinds()[args.agent]
        policies = [kind.build(args)] + list(args.policies or [])
    elif args.policies:
        policies = args.policies
    else:
        policies, skipped = suite_policies(args.suite, include_tsfm=not args.no_tsfm)
        for policy, reason in skipped.items():
            print(f"skipping policy {policy}: {reason}", file=sys.stderr)
    without_model = unavailable_policies(args.policies or ())  # asked for by name: run, but say so (and in meta.json)
    for policy, reason in without_model.items():
        print(f"warning: policy {policy} runs without its model ({reason}); its episodes that need the model fall "
              f"back to {FALLBACK_METHOD}, so its row does not measure the model", file=sys.stderr)
    suffix = "" if args.suite == "decision" else f"-{args.suite}"
    out = Path(args.out or f"results/{args.split}{suffix}")
    if (out / "results.jsonl").exists():
        print(f"note: {out}/ already holds results; they will be replaced (use --out to keep both)", file=sys.stderr)
    env_kwargs = dict(SUITES[args.suite])
    if args.forecast_store:
        from fwgym.forecasters.store import open_store

        env_kwargs["forecast_store"] = str(open_store(args.forecast_store).path)  # refused here if malformed
    t0 = time.perf_counter()
    records = evaluate(policies, split=args.split, domains=args.domain, lead=args.lead, limit=args.limit,
                       workers=args.workers, progress=not args.no_progress, env_kwargs=env_kwargs,
                       backend=args.backend, ray_address=args.ray_address)
    elapsed = time.perf_counter() - t0
    labels = list(dict.fromkeys(r["policy"] for r in records))
    meta = run_meta(args.split, labels, args.workers)
    meta.update({"suite": args.suite, "backend": args.backend})
    if without_model:
        meta["policies_without_model"] = {p: f"ran without its model, falling back to {FALLBACK_METHOD}: {reason}"
                                          for p, reason in without_model.items()}
    paths = write_results(records, out, meta)
    n_cases = len({r["case_id"] for r in records})
    ref = reference_policy(labels)
    print(f"\nfwgym leaderboard — suite={args.suite}, split={args.split}, {n_cases} cases, {len(labels)} policies, "
          f"{len(records)} episodes in {elapsed:.1f} s" + (f"; [95% CI] of the difference vs {ref} (paired "
          "series-cluster bootstrap)" if ref else "") + "\n")
    print(format_leaderboard(leaderboard(records, reference=ref)))
    print(f"\nresults: {paths['results']}  leaderboard: {paths['markdown']}, {paths['csv']}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
