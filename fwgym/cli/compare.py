"""``fwgym compare RUN_A RUN_B``: the paired comparison of two runs (an ablation: pool, prompt objective,
model, thinking, seed) and their run-to-run stability (:mod:`fwgym.evaluation.compare`).

Each run is read, re-scored and checked as ``fwgym leaderboard`` reads it; runs of different suites,
splits, sigma, scenario seeds or scorer versions are refused, every other setting that differs is
printed. Policies are paired by name (or the one policy of each run, or ``--pair A B``), on the cases both
runs played (``--common-cases`` when their case sets differ), and ``--valid-in-both`` adds the cases
valid in both runs. The table gives ``B - A`` of S, R, loss, credits and the valid share with the paired
series-cluster bootstrap 95% intervals (10,000 draws, seed 1701), overall and by cohort and lead.

With several policies in both runs (e.g. two repeats of one job, or ``fwgym evaluate --repeat K``), the
stability section compares the rankings (Kendall's tau-b, the same first policy) and whether each
policy's paired interval against the reference (hour_of_day_empirical by default) changes sign. One run
directory of ``--repeat K`` compares its repeat 1 with each other repeat (``fwgym compare RUN``).

``--format``: ``table`` (terminal; fitted to its width, ``--wide`` for every column), ``markdown``
(default in a file or pipe), ``latex`` (the main table, booktabs), ``csv`` (every row, breakdowns
included) or ``json`` (everything).
"""
from __future__ import annotations

import argparse
import json
import re
import sys

from fwgym.cli.args import nonnegative_int, positive_int
from fwgym.cli.tables import AUTO, MARKDOWN, TABLE
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT

NAME = "compare"
HELP = "paired comparison of two runs (Table-4 ablations) with bootstrap intervals, and run-to-run stability"
FORMATS = (AUTO, TABLE, MARKDOWN, "csv", "latex", "json")
#: a policy label of a ``fwgym evaluate --repeat`` run: ``<name>#<k>``
REPEAT_LABEL = re.compile(r"^(?P<name>.+)#(?P<k>[1-9][0-9]*)$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym compare``."""
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="RUN_A RUN_B (run directories or results.jsonl files), or one run directory of fwgym "
                        "evaluate --repeat K (its repeat 1 against each other repeat)")
    p.add_argument("--common-cases", action="store_true",
                   help="compare on the cases both runs played (default: their case sets must be equal)")
    p.add_argument("--valid-in-both", action="store_true",
                   help="also compare on the common cases where both episodes are valid (the paper's 'valid in both')")
    p.add_argument("--pair", nargs=2, action="append", default=None, metavar=("POLICY_A", "POLICY_B"),
                   help="compare POLICY_A of RUN_A with POLICY_B of RUN_B (repeatable; default: the policies of the "
                        "same name, or the one policy of each run)")
    p.add_argument("--reference", default=None,
                   help="the stability section's reference policy (default: hour_of_day_empirical when both runs "
                        "have it; 'none' for no intervals)")
    p.add_argument("--format", choices=FORMATS, default=AUTO,
                   help="table (default on a terminal), markdown (default in a file or pipe), csv, latex or json")
    p.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    p.add_argument("--seed", type=nonnegative_int, default=BOOT_SEED, help=f"bootstrap seed (default {BOOT_SEED})")
    p.add_argument("--no-breakdown", action="store_true", help="omit the by-cohort and by-lead rows")
    p.add_argument("--wide", action="store_true", help="print every column at its full width")
    p.add_argument("--allow-unverified", action="store_true",
                   help="accept result sources without a manifest.json (re-scored, not hash-checked; marked NOT HASH-CHECKED)")


def _settings(rs) -> dict:
    """A run's settings: its manifest's (every setting) over the checked scoring settings."""
    src = rs.sources[0]
    return {**((src.manifest or {}).get("settings") or {}), **dict(rs.settings)}


def _repeats(records) -> dict[str, dict[int, str]]:
    """``{name: {k: label}}`` of the ``<name>#<k>`` policies of a repeat run (names with two repeats or more)."""
    out: dict[str, dict[int, str]] = {}
    for p in dict.fromkeys(r["policy"] for r in records):
        m = REPEAT_LABEL.match(p)
        if m:
            out.setdefault(m["name"], {})[int(m["k"])] = p
    return {n: ks for n, ks in out.items() if len(ks) > 1}


def _repeat_views(records) -> list[tuple[str, list[dict], list[dict]]]:
    """For a run of ``--repeat K``: ``[(label, records of repeat 1, records of repeat k), ...]``, each
    with the other policies (played once) and the repeated ones renamed to their plain names."""
    reps = _repeats(records)
    if not reps:
        raise ValueError("one run was given and it holds no repeats (policies named <name>#<k>, from fwgym evaluate "
                         "--repeat K); give two runs: fwgym compare RUN_A RUN_B")
    label_of = {lab: (name, k) for name, ks in reps.items() for k, lab in ks.items()}
    shared = [r for r in records if r["policy"] not in label_of]
    ks = sorted(set.intersection(*(set(v) for v in reps.values())))

    def view(k: int) -> list[dict]:
        return shared + [{**r, "policy": label_of[r["policy"]][0]} for r in records
                         if r["policy"] in label_of and label_of[r["policy"]][1] == k]

    return [(f"repeat 1 vs repeat {k}", view(ks[0]), view(k)) for k in ks[1:]]


def run(args) -> int:
    """Compare the runs and print the result in ``args.format`` (see the module docstring).

    Raises:
        ValueError: not one or two runs, runs that cannot be compared, a bad ``--pair`` or ``--reference``.
    """
    from fwgym.cli.leaderboard import warn_unverified
    from fwgym.cli.progress import phase
    from fwgym.evaluation import load_results

    if len(args.runs) not in (1, 2):
        raise ValueError(f"fwgym compare takes RUN_A RUN_B, or one run of --repeat K; got {len(args.runs)} runs")
    sets = []
    for path in args.runs:
        with phase(f"reading and re-scoring {path}"):
            rs = load_results([path], allow_partial=True, allow_unverified=args.allow_unverified)
        warn_unverified(rs)
        if not rs.records:
            raise ValueError(f"no result records in {path}")
        sets.append(rs)
    if len(sets) == 1:
        views = [(label, a, b) for label, a, b in _repeat_views(sets[0].records)]
        settings_a = settings_b = _settings(sets[0])
        names = (f"{args.runs[0]} (repeat 1)", f"{args.runs[0]} (repeat k)")
    else:
        from fwgym.evaluation.compare import check_comparable

        settings_a, settings_b = _settings(sets[0]), _settings(sets[1])
        check_comparable(settings_a, settings_b, (str(args.runs[0]), str(args.runs[1])))
        views = [("A vs B", sets[0].records, sets[1].records)]
        names = (str(args.runs[0]), str(args.runs[1]))
    doc = _analyse(args, views, settings_a, settings_b, names, sets, repeats=len(sets) == 1)
    _print(args, doc)
    return 0


def _reference(args, records_a, records_b) -> str | None:
    from fwgym.evaluation import AUTO as AUTO_REF
    from fwgym.evaluation import reference_policy

    both = [p for p in dict.fromkeys(r["policy"] for r in records_a) if p in {r["policy"] for r in records_b}]
    if len(both) < 2:
        return None
    want = AUTO_REF if args.reference is None else args.reference
    try:
        return reference_policy(both, want)
    except ValueError as exc:
        raise ValueError(f"--reference: {exc}") from None


def _analyse(args, views, settings_a: dict, settings_b: dict, names: tuple[str, str], sets, repeats: bool) -> dict:
    """Every number of the comparison, as one JSON-ready document (``repeats``: the views are the repeats of
    one run, whose repeated policies are the pairs)."""
    from fwgym.cli.progress import phase
    from fwgym.evaluation.compare import compare, differing_settings, policy_pairs, stability
    from fwgym.evaluation.header import make_header, result_set_marks

    out_views = []
    for label, a, b in views:
        pa = list(dict.fromkeys(r["policy"] for r in a))
        pb = list(dict.fromkeys(r["policy"] for r in b))
        pairs = [(p, p) for p in pa if p in pb and p in _repeat_names(sets[0].records)] if repeats else policy_pairs(
            pa, pb, args.pair)
        with phase(f"{label}: paired bootstrap of {len(pairs)} pair(s) ({args.n_boot:,} draws)"):
            rows = compare(a, b, pairs, common_cases=args.common_cases or repeats,
                           valid_in_both=args.valid_in_both, n_boot=args.n_boot, seed=args.seed,
                           by=() if args.no_breakdown else ("cohort", "lead"))
        ref = _reference(args, a, b)
        st = None
        if ref is not None or len({r["policy"] for r in a} & {r["policy"] for r in b}) >= 2:
            with phase(f"{label}: stability of the rankings"):
                try:
                    st = stability(a, b, ref, n_boot=args.n_boot, seed=args.seed)
                except ValueError:
                    st = None
        out_views.append({"label": label, "pairs": [list(p) for p in pairs], "rows": rows, "stability": st})
    first = out_views[0]
    pa, pb = first["pairs"][0]
    a_recs = [r for r in views[0][1] if r["policy"] == pa]
    b_cases = {r["case_id"] for r in views[0][2] if r["policy"] == pb}
    common = [r for r in a_recs if r["case_id"] in b_cases]
    marks = [m for rs in sets for m in result_set_marks(rs)]
    suite = settings_a.get("suite") or "decision"
    from fwgym.suites import suite_metric

    metric = suite_metric(suite, settings_a.get("credit_weight") if suite == "forecast" else None)
    header = make_header(common, title="fwgym compare", suite=suite, formula=metric.formula, marks=marks,
                         n_records=None, facts=[f"A = {names[0]}", f"B = {names[1]}",
                                                f"{len(first['pairs'])} pair(s) of policies"],
                         n_boot=args.n_boot, seed=args.seed, contrast="B - A")
    header.n_records = None
    header.n_policies, header.row_unit = len(first["pairs"]), ("pair of policies", "pairs of policies")
    header.facts = header.facts[:2]
    agents = [] if repeats else [tuple(p) for p in first["pairs"]]
    diffs = [] if repeats else differing_settings(settings_a, settings_b, agents)
    return {"runs": list(names), "repeats": repeats, "suite": suite, "split": settings_a.get("split"), "loss_name": metric.loss_name,
            "differing_settings": diffs, **header.json_fields(), "n_boot": args.n_boot, "seed": args.seed,
            "views": out_views, "_header": header}


def _repeat_names(records) -> set[str]:
    return set(_repeats(records))


def _print(args, doc: dict) -> None:
    from fwgym.cli.tables import left_out_note, output_width, print_table, resolve_format
    from fwgym.evaluation.compare import breakdown_table, comparison_table, pair_lines, stability_table
    from fwgym.evaluation.formats import format_csv, latex_table

    header = doc.pop("_header")
    fmt = resolve_format(args.format)
    if fmt == "json":
        print(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False, default=str))
        return
    if fmt == "csv":
        rows = [{"view": v["label"], **{k: val for k, val in r.items() if k != "clusters"}, **header_marks(header)}
                for v in doc["views"] for r in v["rows"]]
        sys.stdout.write(format_csv(rows))
        return
    loss = doc["loss_name"]
    if fmt == "latex":
        comment = header.latex_comment() + "".join(f"\nsettings that differ (A -> B): {d}" for d in
                                                   doc["differing_settings"])
        for v in doc["views"]:
            print(latex_table(comparison_table(v["rows"], loss), comment))
        return
    width = output_width(wide=args.wide) if fmt == TABLE else None
    print("\n".join(header.lines(width)) if fmt == TABLE else header.markdown())
    print()
    if doc["repeats"]:
        print("repeats of one run: the repeated agent's sampling seed differs (repeat k: seed S + k - 1); every "
              "other setting is the run's")
    else:
        print("settings that differ (A -> B):" if doc["differing_settings"] else "settings that differ: none (A and B "
              "were run with the same settings)")
    for d in doc["differing_settings"]:
        print(_item(d, fmt, width))
    pairs = pair_lines(doc["views"][0]["pairs"])
    if pairs:
        print(("\n" if fmt == MARKDOWN else "") + "pairs named by their policy in A:")
        for line in pairs:
            print(_item(line, fmt, width))
    for v in doc["views"]:
        print()
        if len(doc["views"]) > 1 or fmt == MARKDOWN:
            print(f"{v['label']} (B - A):" + ("\n" if fmt == MARKDOWN else ""))
        note = left_out_note(print_table(comparison_table(v["rows"], loss), fmt, width=width), width)
        if note:
            print(note)
        if not args.no_breakdown and any(r["group"] != "all" for r in v["rows"]):
            t = breakdown_table(v["rows"], loss)
            print()
            print((t.title or "") + ("\n" if fmt == MARKDOWN else ""))
            print_table(t.__class__(None, t.columns, t.align, t.rows, t.short, t.priority), fmt, width=width)
        st = v["stability"]
        if st is not None:
            print()
            tau = "n/a" if st["kendall_tau_b"] is None else f"{st['kendall_tau_b']:.3f}"
            changed = [r["policy"] for r in st["rows"] if r.get("sign_changed")]
            print(f"run-to-run stability on {st['n_cases']} common cases: Kendall tau-b of the rankings {tau}; first "
                  f"{'the same' if st['same_first'] else 'differs'} ({st['first_a']} / {st['first_b']})"
                  + (f"; paired intervals vs {st['reference']} that change sign: "
                     f"{', '.join(changed) if changed else 'none'}" if st["reference"] else "")
                  + ("\n" if fmt == MARKDOWN else ""))
            t = stability_table(st)
            print_table(t.__class__(None, t.columns, t.align, t.rows, t.short, t.priority), fmt, width=width)


def _item(text: str, fmt: str, width: int | None) -> str:
    """One item of a list: ``- text`` in Markdown; indented and wrapped at ``width`` in a table."""
    if fmt != TABLE:
        return f"- {text}"
    if width is None:
        return f"  {text}"
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="    ",
                                    break_on_hyphens=False, break_long_words=True))


def header_marks(header) -> dict:
    """The header's marks as CSV columns (``hash_checked``: ``false`` when a run has no manifest, the
    ``NOT HASH-CHECKED`` mark; ``partial``; ``exposed``: the ``EXPOSED`` mark; ``true`` / ``false``)."""
    from fwgym.evaluation.header import NOT_HASH_CHECKED

    codes = set(header.codes)
    return {"hash_checked": NOT_HASH_CHECKED not in codes, "partial": "PARTIAL" in codes, "exposed": "EXPOSED" in codes}


__all__ = ["NAME", "HELP", "FORMATS", "REPEAT_LABEL", "add_arguments", "run"]
