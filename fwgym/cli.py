"""Command line: ``fwgym evaluate``, ``fwgym cases``, ``fwgym leaderboard``, ``fwgym plot``, ``fwgym report``, ``fwgym calibrate-sigma``."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from fwgym.data import DOMAINS


def _domains(value: str) -> list[str]:
    if value == "all":
        return list(DOMAINS)
    if value not in DOMAINS:
        raise argparse.ArgumentTypeError(f"domain must be 'all' or one of {list(DOMAINS)}")
    return [value]


def cmd_evaluate(args) -> int:
    from fwgym.agents.registry import agent_kinds
    from fwgym.baselines.forecast import FALLBACK_METHOD
    from fwgym.baselines.registry import suite_policies, unavailable_policies
    from fwgym.evaluation import (DEFAULT_REFERENCE, SUITES, evaluate, format_leaderboard, leaderboard, run_meta,
                                  write_results)

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
    t0 = time.perf_counter()
    records = evaluate(policies, split=args.split, domains=args.domain, lead=args.lead, limit=args.limit,
                       workers=args.workers, progress=not args.no_progress, env_kwargs=SUITES[args.suite],
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
    ref = next((p for p in (DEFAULT_REFERENCE, "hour_of_day_empirical_samples") if p in labels), None)
    ref = ref if len(labels) > 1 else None
    print(f"\nfwgym leaderboard — suite={args.suite}, split={args.split}, {n_cases} cases, {len(labels)} policies, "
          f"{len(records)} episodes in {elapsed:.1f} s" + (f"; [95% CI] of the difference vs {ref} (paired "
          "series-cluster bootstrap)" if ref else "") + "\n")
    print(format_leaderboard(leaderboard(records, reference=ref)))
    print(f"\nresults: {paths['results']}  leaderboard: {paths['markdown']}, {paths['csv']}")
    return 0


def cmd_cases(args) -> int:
    from fwgym.cases import SPLIT_DOC, build_cases

    total = 0
    print(f"split={args.split}")
    print("| cohort | day_ahead | week_ahead | total |\n|---|---:|---:|---:|")
    for d in args.domain:
        counts = Counter((c.cohort, c.lead) for c in build_cases(d, args.split))
        for cohort in sorted({k[0] for k in counts}):
            da, wa = counts[(cohort, "day_ahead")], counts[(cohort, "week_ahead")]
            print(f"| {cohort} | {da} | {wa} | {da + wa} |")
            total += da + wa
    print(f"| total | | | {total} |\n")
    if args.verbose:
        print(SPLIT_DOC)
    return 0


def cmd_leaderboard(args) -> int:
    from fwgym.evaluation import (DEFAULT_REFERENCE, coverage, format_breakdowns, format_leaderboard, leaderboard,
                                  read_results, write_csv)

    records = read_results(args.results, allow_partial=args.allow_partial)
    if not records:
        raise ValueError(f"no result records in {args.results}")
    policies = list(dict.fromkeys(r["policy"] for r in records))
    ref = args.reference
    if ref is None:
        ref = DEFAULT_REFERENCE if DEFAULT_REFERENCE in policies else None
    elif ref.lower() == "none":
        ref = None
    elif ref not in policies:
        raise ValueError(f"--reference {ref!r} is not among the policies {policies}")
    rows = leaderboard(records, reference=ref, n_boot=args.n_boot, seed=args.seed)
    cov = coverage([r for r in records if r["policy"] == policies[0]])
    parts = ", ".join(f"{k} {a}/{b}" for k, (a, b) in cov["by_domain"].items())
    print(f"fwgym leaderboard: {len(policies)} policies x {cov['cases']} cases ({parts}"
          f"{'' if cov['complete'] else '; PARTIAL: not the whole split'})"
          + (f"; intervals: paired series-cluster bootstrap, {args.n_boot:,} draws, seed {args.seed}, "
             f"policy - {ref}" if ref else "") + "\n")
    print(format_leaderboard(rows))
    if not args.no_breakdown:
        print("\n" + format_breakdowns(rows))
    if args.csv:
        print(f"\nwrote {write_csv(rows, args.csv)}")
    return 0


def cmd_plot(args) -> int:
    from fwgym import plots
    from fwgym.evaluation import read_results

    records = read_results(args.results)
    if args.what == "frontier":
        out = plots.plot_frontier(records, args.output, title=args.title, agents=args.agents or ())
    elif args.what == "tools":
        out = plots.plot_tools(records, args.output, title=args.title)
    else:
        out = plots.plot_case(records, args.case_id, args.policy, args.output, history_hours=args.hours)
    print(f"wrote {out}")
    return 0


def _episodes(value: str) -> int | None:
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError("--episodes must be 'all' or an integer >= 0")
    return n


def cmd_report(args) -> int:
    from fwgym.report import build_report

    ref = args.reference
    if ref is None:
        ref = "auto"
    elif ref.lower() == "none":
        ref = None
    rep = build_report(args.results, args.output, traces=args.traces, max_episode_pages=args.episodes,
                       reference=ref, n_boot=args.n_boot, seed=args.seed, replay=not args.no_replay,
                       history_hours=args.hours, title=args.title, progress=not args.no_progress,
                       workers=args.workers)
    for w in rep.warnings:
        print(f"note: {w}", file=sys.stderr)
    print(f"wrote {len(rep.pages)} pages ({len(rep.policy_pages)} policies, {len(rep.episode_pages)} episodes) "
          f"in {rep.seconds:.1f} s" + (f"; intervals vs {rep.reference}" if rep.reference else "")
          + f"\nopen {rep.index.resolve()}")
    return 0


def cmd_calibrate(args) -> int:
    from fwgym.evaluation import calibrate_sigma
    from fwgym.scoring import REFERENCE_SIGMA, write_sigma

    result = calibrate_sigma(split=args.split, workers=args.workers, progress=not args.no_progress)
    result["reference_fwbench_paper"] = REFERENCE_SIGMA
    result["command"] = f"fwgym calibrate-sigma --split {args.split}"
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    print(text)
    if args.write:
        path = write_sigma(text, args.output or None)  # the packaged file's digest is recorded in fwgym/data/sha256.json
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fwgym", description="FWBench gym: budgeted forecast purchasing and capacity decisions on real data")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("evaluate", help="run policies on a split and print the leaderboard")
    e.add_argument("--split", default="test", choices=["train", "dev", "test"])
    e.add_argument("--domain", type=_domains, default=list(DOMAINS), help="all (default), electricity or cycle_hire")
    e.add_argument("--lead", choices=["day_ahead", "week_ahead"], default=None)
    e.add_argument("--policies", nargs="+", default=None,
                   help="policy names (default: the suite's reference rows: fixed classical and priced policies whose "
                        "weights load, selectors and oracles)")
    e.add_argument("--no-tsfm", action="store_true", help="do not try to load TSFM weights for the default policies")
    e.add_argument("--limit", type=int, default=None, help="at most N cases per domain (evenly spaced)")
    e.add_argument("--workers", type=int, default=1, help="local worker processes")
    e.add_argument("--out", default=None, help="output directory (default results/<split>)")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--suite", choices=["decision", "context", "forecast"], default="decision",
                   help="decision (protocol envs, default), context (scenario notes, decision loss) or forecast (RCRPS)")
    e.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="local processes (default) or a Ray cluster")
    e.add_argument("--ray-address", default=None, help="address of an existing Ray cluster (default: start a local one)")
    from fwgym.agents.registry import agent_kinds

    kinds = agent_kinds()
    e.add_argument("--agent", choices=sorted(kinds) or None, default=None,
                   help="evaluate an agent of this kind (plus any --policies): " +
                        "; ".join(f"{k}: {m.HELP}" for k, m in sorted(kinds.items())))
    for k, m in sorted(kinds.items()):
        m.add_arguments(e.add_argument_group(f"--agent {k}"))
    e.set_defaults(func=cmd_evaluate)

    c = sub.add_parser("cases", help="case counts per cohort and lead")
    c.add_argument("--split", default="test", choices=["train", "dev", "test"])
    c.add_argument("--domain", type=_domains, default=list(DOMAINS))
    c.add_argument("-v", "--verbose", action="store_true", help="also print the split calendar")
    c.set_defaults(func=cmd_cases)

    lb = sub.add_parser("leaderboard", help="leaderboard from results files (merged), with bootstrap intervals")
    lb.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    lb.add_argument("--reference", default=None,
                    help="policy the paired bootstrap intervals compare against (default: hour_of_day_empirical "
                         "when present; 'none' for no intervals)")
    lb.add_argument("--csv", default=None, help="also write the rows (all columns) to this CSV file")
    lb.add_argument("--n-boot", type=int, default=10_000, help="bootstrap draws (default 10,000)")
    lb.add_argument("--seed", type=int, default=1701, help="bootstrap seed (default 1701)")
    lb.add_argument("--allow-partial", action="store_true",
                    help="accept result files that cover only part of the split without declaring it")
    lb.add_argument("--no-breakdown", action="store_true", help="omit the per-cohort and per-lead tables")
    lb.set_defaults(func=cmd_leaderboard)

    pl = sub.add_parser("plot", help="figures from results files: frontier, case view, tool-use mix")
    psub = pl.add_subparsers(dest="what", required=True)
    pf = psub.add_parser("frontier", help="aggregate loss vs mean credits, equal-S lines, oracles marked")
    pf.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    pf.add_argument("--agents", nargs="*", default=None, help="policy names to mark as agents")
    pc = psub.add_parser("case", help="history tail, forecast band, submitted capacities, realised demand")
    pc.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    pc.add_argument("--case-id", required=True)
    pc.add_argument("--policy", required=True)
    pc.add_argument("--hours", type=int, default=168, help="hours of visible history shown (default 168)")
    pt = psub.add_parser("tools", help="mean tool calls per case, stacked by tool")
    pt.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    for sp in (pf, pt):
        sp.add_argument("--title", default=None, help="figure title")
    for sp in (pf, pc, pt):
        sp.add_argument("-o", "--output", required=True, help="output image (.png, .svg or .pdf)")
        sp.set_defaults(func=cmd_plot, title=None)

    from fwgym.agents import trace_cli

    t = sub.add_parser("show-trace", help="print LLM-agent traces (JSONL) as readable transcripts")
    trace_cli.add_arguments(t)
    t.set_defaults(func=trace_cli.run)

    rp = sub.add_parser("report", help="static HTML report (leaderboard, figures, episode pages) from results files")
    rp.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    rp.add_argument("-o", "--output", required=True, help="output folder (open <folder>/index.html)")
    rp.add_argument("--traces", nargs="+", default=None, help="LLM trace JSONL files (transcripts on episode pages)")
    rp.add_argument("--reference", default=None,
                    help="policy of the paired bootstrap intervals (default: hour_of_day_empirical when present; "
                         "'none' for no intervals)")
    rp.add_argument("--episodes", type=_episodes, default=6,  # = fwgym.report.DEFAULT_EPISODE_PAGES (not imported here)
                    help="episode pages per policy: the worst, best and random by S (default 6), or 'all'")
    rp.add_argument("--hours", type=int, default=168, help="hours of visible history in episode charts (default 168)")
    rp.add_argument("--n-boot", type=int, default=10_000, help="bootstrap draws (default 10,000)")
    rp.add_argument("--seed", type=int, default=1701, help="bootstrap seed (default 1701)")
    rp.add_argument("--title", default=None, help="report title")
    rp.add_argument("--workers", type=int, default=1, help="processes writing episode pages (default 1)")
    rp.add_argument("--no-replay", action="store_true",
                    help="do not replay baselines to list their tool calls in order (faster)")
    rp.add_argument("--no-progress", action="store_true")
    rp.set_defaults(func=cmd_report)

    s = sub.add_parser("calibrate-sigma", help="recompute the per-domain sigma on the dev split")
    s.add_argument("--split", default="dev", choices=["train", "dev"])
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--write", action="store_true", help="write fwgym/config/sigma.json (or --output)")
    s.add_argument("--output", default=None)
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=cmd_calibrate)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fwgym`` command."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"fwgym: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
