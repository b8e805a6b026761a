"""``fwgym plot frontier|case|tools``: publication figures from results files (:mod:`fwgym.plots`).

Every figure is sized for a paper by default (``--style paper``: one column 3.3 in or two columns
7.0 in wide, every text >= 7 pt at that size, TrueType fonts in PDF); ``--style screen`` is larger.
The output format follows the extension of ``-o`` (``.pdf``, ``.svg``, ``.png``). Records are
re-scored from the packaged data and checked against their run's manifest before they are drawn
(:func:`fwgym.evaluation.load_results`; a source without a manifest only with ``--allow-unverified``,
with a warning on stderr and ``NOT HASH-CHECKED`` stamped in the figure's top-left corner and written to its
metadata: PDF ``Title``/``Subject``, PNG and SVG ``Title``/``Description``); the suite (and so the metric named on the axes) is the one of the run's manifest unless ``--suite`` says.

Examples::

    fwgym plot frontier results/test -o frontier.pdf --columns 2
    fwgym plot case results/test --case-id elec-PJM-2024-02-11-week_ahead --policy chronos2 -o case.pdf
    fwgym plot case results/llm --case-id ... --policy my-model --traces results/llm/traces.jsonl -o case.pdf
    fwgym plot tools results/test -o tools.pdf
"""
from __future__ import annotations

import argparse

from fwgym.core.cases import CHART_HISTORY_HOURS, HISTORY_HOURS
from fwgym.cli.args import add_output_argument, int_range, nonnegative_int, positive_float, positive_int
from fwgym.cli.leaderboard import add_allow_unverified, warn_unverified
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT
from fwgym.suites import SUITE_NAMES

NAME = "plot"
HELP = "figures from results files: frontier, case view, tool-use mix"
STYLES = ("paper", "screen")
SUITES = SUITE_NAMES


def _reference(value: str) -> str | None:
    """``--reference``: a policy name, ``auto`` or ``none`` (no intervals)."""
    return None if value.lower() == "none" else value


def _common(sp: argparse.ArgumentParser, columns_default: str) -> None:
    sp.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    add_output_argument(sp, metavar="FILE", required=True, aliases=("--output",),
                        help="the figure file (.pdf, .svg or .png)")
    sp.add_argument("--style", choices=STYLES, default="paper",
                    help="paper (default: 3.3 or 7.0 in wide, fonts >= 7 pt) or screen (larger)")
    sp.add_argument("--columns", type=int, choices=(1, 2), default=None,
                    help=f"width: 1 column (3.3 in in the paper style) or 2 (7.0 in); default {columns_default}")
    sp.add_argument("--height", type=positive_float, default=None, metavar="IN",
                    help="figure height in inches (default: from the width and the content)")
    sp.add_argument("--title", default=None, help="figure title (default: none for frontier and tools: papers "
                                                  "caption their figures; the case and score for case)")
    add_allow_unverified(sp)


def _suite(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--suite", choices=SUITES, default=None,
                    help="the results' suite (default: the one their run manifest names; decision when none does)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The three figure kinds as sub-subcommands, each with its options and ``-o/--out FILE``."""
    psub = p.add_subparsers(dest="what", required=True, metavar="FIGURE")
    pf = psub.add_parser("frontier", help="the suite's loss vs mean credits per case, bootstrap intervals, equal-S "
                                          "lines, oracles marked")
    _common(pf, "1 for one panel, else 2")
    _suite(pf)
    pf.add_argument("--agents", nargs="*", default=None, help="policy names to mark as agents")
    pf.add_argument("--panels", choices=("auto", "all", "domains", "both"), default="auto",
                    help="one panel of all cases, one per domain, both, or auto (default: all in one column, "
                         "else all + domains)")
    pf.add_argument("--labels", choices=("auto", "names", "numbers"), default="auto",
                    help="policy names beside the points, numbers with the names in the legend, or auto (default)")
    pf.add_argument("--reference", type=_reference, default="auto", metavar="NAME|none",
                    help="policy the paired bootstrap intervals compare against (default auto: hour_of_day_empirical "
                         "or its samples variant when present; none: no intervals)")
    pf.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    pf.add_argument("--seed", type=nonnegative_int, default=BOOT_SEED, help=f"bootstrap seed (default {BOOT_SEED})")

    pc = psub.add_parser("case", help="one case: history tail, forecast bands, submitted capacities or forecast, "
                                      "scored target")
    _common(pc, "2")
    _suite(pc)
    pc.add_argument("--case-id", required=True, dest="case_id", metavar="CASE_ID",
                    help="the case to draw (a case id of the results: fwgym cases, results.jsonl's case_id)")
    pc.add_argument("--policy", required=True, metavar="POLICY",
                    help="the policy whose episode on the case is drawn (a policy of the results)")
    pc.add_argument("--hours", type=int_range(1, HISTORY_HOURS), default=CHART_HISTORY_HOURS,
                    help=f"hours of visible history shown (1..{HISTORY_HOURS}, default {CHART_HISTORY_HOURS})")
    pc.add_argument("--traces", nargs="+", default=None, metavar="FILE",
                    help="agent trace JSONL files: draw the forecasts the policy bought on this case (and, in the "
                         "forecast suite, its submitted forecast)")
    pc.add_argument("--zoom", action=argparse.BooleanOptionalAction, default=None,
                    help="add a target-day panel (default: for week-ahead cases only)")

    pt = psub.add_parser("tools", help="mean tool calls per case, stacked by tool")
    _common(pt, "1")


def check_policy_names(option: str, names, records) -> None:
    """Refuse policy names given to a filter option that match no policy of the results (a typo would
    otherwise draw a figure silently without it).

    Raises:
        ValueError: one line naming the option, the unmatched names and the results' policies.
    """
    known = list(dict.fromkeys(r["policy"] for r in records))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{option}: no policy {', '.join(map(repr, unknown))} in the results; their policies: "
                         f"{', '.join(known)}")


def run(args) -> int:
    """Draw the chosen figure to ``args.out``.

    Raises:
        ValueError: a name of ``--agents`` (frontier) that is no policy of the results, and the errors
            of :mod:`fwgym.plots` (``--policy`` / ``--case-id`` of case, ``--reference`` of frontier not
            in the results).
    """
    from fwgym import plots
    from fwgym.cli.progress import phase
    from fwgym.evaluation import load_results
    from fwgym.evaluation.header import make_header, result_set_marks

    with phase("reading and re-scoring the results"):
        rs = load_results(args.results, allow_unverified=getattr(args, "allow_unverified", False))
    warn_unverified(rs)
    records = rs.records
    layout = {"style": args.style, "height": args.height}
    mark, description = make_header(records, suite=rs.settings.get("suite") or "decision", formula="",
                                    marks=result_set_marks(rs)).figure_mark()
    if mark:  # PARTIAL, NOT HASH-CHECKED, ...: in the figure and its metadata, not only on stderr
        layout.update(mark=mark, description=description)
    if args.columns is not None:
        layout["columns"] = args.columns
    suite = getattr(args, "suite", None) or rs.settings.get("suite")  # the run manifest's (decision for runs that name none)
    if args.what == "frontier":
        check_policy_names("--agents", args.agents or (), records)
        with phase(f"drawing the frontier ({args.n_boot:,} bootstrap draws)"):
            out = plots.plot_frontier(records, args.out, title=args.title, agents=args.agents or (), suite=suite,
                                      credit_weight=rs.settings.get("credit_weight"),
                                      panels=args.panels, labels=args.labels, reference=args.reference,
                                      n_boot=args.n_boot, seed=args.seed, **layout)
    elif args.what == "tools":
        out = plots.plot_tools(records, args.out, title=args.title, **layout)
    else:
        out = plots.plot_case(records, args.case_id, args.policy, args.out, history_hours=args.hours, suite=suite,
                              traces=args.traces, zoom=args.zoom, title=args.title, **layout)
    print(f"wrote {out}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run", "check_policy_names"]
