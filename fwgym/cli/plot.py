"""``fwgym plot frontier|case|tools``: figures from results files (:mod:`fwgym.plots`)."""
from __future__ import annotations

import argparse

NAME = "plot"
HELP = "figures from results files: frontier, case view, tool-use mix"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The three figure kinds as sub-subcommands, each with its options and ``-o OUTPUT``."""
    psub = p.add_subparsers(dest="what", required=True)
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
        sp.set_defaults(title=None)


def run(args) -> int:
    """Draw the chosen figure to ``args.output``."""
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


__all__ = ["NAME", "HELP", "add_arguments", "run"]
