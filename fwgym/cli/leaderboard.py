"""``fwgym leaderboard``: the leaderboard of merged results files, with paired bootstrap intervals.

Every record is re-scored from the packaged data first, checked against its run's manifest (hashes,
count, statuses), and runs of other settings are refused (:func:`fwgym.evaluation.load_results`): a
leaderboard only ever shows re-scored, hash-checked, comparable scores. A source without a manifest (deleted, or a
bare ``results.jsonl``) is refused unless ``--allow-unverified``; the header then says ``NOT HASH-CHECKED``
(and a warning goes to stderr in every format).
Columns are named for the suite of the runs (the forecast suite's loss is RCRPS:
:func:`fwgym.suites.suite_metric`). Every format carries the one header of
:mod:`fwgym.evaluation.header` and its marks (``PARTIAL``, ``NOT HASH-CHECKED``, ``EXPOSED``, ``W=<w>``, ...).

``--loss-weight W`` re-scores the saved decisions with ``S = W·R + (1−W)·c/B`` (decision and context
suites; :mod:`fwgym.evaluation.weights`; the default 0.5 is the protocol's S) and says so in every format
(the ``W=<w>`` mark, the formula, a ``loss_weight`` column); several weights print the sensitivity table
instead: S, rank and (with a reference) the paired bootstrap ΔS [95% CI] at each weight, and Kendall's tau-b of
each ranking against the protocol's.

``--format``:

* ``table`` (the default on a terminal): the header, then aligned tables (main, by cohort and lead)
  fitted to the terminal's width (or ``$COLUMNS``): short headers, the least important columns left out
  (and named) and breakdowns split, never a name cut; ``--wide`` prints every column;
* ``markdown`` (the default in a file or pipe): the same as Markdown tables;
* ``csv``: every column of every row (breakdowns and interval bounds included), nothing else; the
  last columns carry the marks of the header (:func:`fwgym.evaluation.header.mark_rows`): ``rescored``,
  ``hash_checked`` (``false``: records from a source without a manifest), ``replayed`` (``fwgym verify --replay``
  passed for the records), ``isolation``, ``in_process``, ``exposed`` (a count; :mod:`fwgym.evaluation.marks`)
  and ``partial`` (not the whole split), as in ``-o/--out FILE`` (``--csv FILE``: its older spelling);
* ``latex``: the main table as a booktabs ``tabular`` for ``\\input`` in a paper's ``table`` float
  (needs ``\\usepackage{booktabs}``), then, in the context and forecast suites, one ``tabular`` per
  table of the breakdown by scenario family and context type; the header line as ``%`` comments;
* ``json``: ``{"suite", "metric", "split", "loss_weight", "formula", "coverage", "reference", "n_boot",
  "seed", "header", "marks", "notes", "rows", "breakdown"}`` with every column of every row (the mark columns
  of the CSV included; ``marks``: the header's marks, ``{"code", "text", "policies"}``) and the family /
  context-type breakdown in long form.

The forecast suite's RCRPS column is the capped mean (``R``), beside it the RCRPS without its
bound-violation term and, for sample submissions, CiK's fair estimator; the context and forecast suites
add the breakdown by scenario family and CiK context type (:mod:`fwgym.evaluation.breakdown`).
"""
from __future__ import annotations

import argparse

from fwgym.cli.args import add_output_argument, nonnegative_int, positive_int
from fwgym.cli.tables import AUTO, MARKDOWN, TABLE
from fwgym.evaluation import BOOT_SEED, N_BOOT

NAME = "leaderboard"
HELP = "leaderboard from results files (merged), with bootstrap intervals"
FORMATS = (AUTO, TABLE, MARKDOWN, "csv", "latex", "json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym leaderboard``."""
    inputs = p.add_argument_group("inputs", "the results merged, and which of them are accepted")
    inputs.add_argument("results", nargs="+", help="results.jsonl files or result directories (merged)")
    inputs.add_argument("--allow-partial", action="store_true",
                        help="accept result files that cover only part of the split without declaring it")
    inputs.add_argument("--common-cases", action="store_true",
                        help="rank on the cases every policy has (e.g. a --limit agent run beside the full baseline "
                             "run); the header says so")
    inputs.add_argument("--allow-mixed-versions", action="store_true",
                        help="accept runs of different fwgym versions (the header names them)")
    add_allow_unverified(inputs)
    scoring = p.add_argument_group("scoring", "the score and its paired bootstrap intervals")
    scoring.add_argument("--reference", default=None,
                         help="policy the paired bootstrap intervals compare against (default: hour_of_day_empirical "
                              "when present; 'none' for no intervals)")
    scoring.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT:,})")
    scoring.add_argument("--seed", type=nonnegative_int, default=BOOT_SEED,
                         help=f"bootstrap seed (default {BOOT_SEED})")
    scoring.add_argument("--loss-weight", type=float, nargs="+", default=None, metavar="W",
                         help="re-score the saved decisions with S = W·R + (1−W)·c/B (decision and context suites; "
                              "default 0.5, the protocol's S); several weights print the sensitivity table: S, rank and "
                              "ΔS [95%% CI] vs the reference at each W, Kendall's tau-b against the protocol's ranking")
    out = p.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default=AUTO,
                     help="table (aligned; default on a terminal), markdown (default in a file or pipe), csv, latex "
                          "(booktabs tabular) or json")
    add_output_argument(out, metavar="FILE", default=None, aliases=("--csv",),
                        help="also write the rows (all columns, the marks included) to this CSV file")
    out.add_argument("--no-breakdown", action="store_true",
                     help="omit the breakdown tables (per cohort and lead; per scenario family and context type)")
    out.add_argument("--wide", action="store_true",
                     help="print every column at its full width (default on a terminal: fit its width, leaving the "
                          "least important columns out, and say which)")


def add_allow_unverified(p: argparse._ActionsContainer) -> None:
    """``--allow-unverified`` (shared by ``fwgym leaderboard``, ``report`` and ``plot``)."""
    p.add_argument("--allow-unverified", action="store_true",
                   help="accept result sources without a manifest.json (deleted, or a bare results.jsonl): their "
                        "records are re-scored from their submissions but not checked against the run's hashes, "
                        "count and statuses; the output says NOT HASH-CHECKED")


def warn_unverified(rs) -> None:
    """One ``warning: NOT HASH-CHECKED ...`` line on stderr when ``rs`` (a :class:`~fwgym.evaluation.ResultSet`)
    holds sources without a manifest."""
    import sys

    if rs.unverified:
        print(f"warning: {rs.notes[0]}", file=sys.stderr)


def _labels_of(rs) -> dict[str, dict[str, str]]:
    """``{policy: labels}`` of the rows whose run manifest holds labels (``fwgym evaluate --label``)."""
    out: dict[str, dict[str, str]] = {}
    for src in rs.sources:
        labels = ((src.manifest or {}).get("settings") or {}).get("labels") or {}
        if isinstance(labels, dict) and labels:
            for r in src.records:
                out[r["policy"]] = {str(k): str(v) for k, v in labels.items()}
    return out


def loss_weights(values) -> list[float]:
    """The ``--loss-weight`` values (default: the protocol's 0.5), each checked to be in [0, 1].

    Raises:
        ValueError: a value outside [0, 1] or given twice.
    """
    from fwgym.evaluation.weights import LOSS_WEIGHT, check_loss_weight

    ws = [check_loss_weight(w) for w in (values or [LOSS_WEIGHT])]
    if len(set(ws)) != len(ws):
        raise ValueError(f"--loss-weight: a weight is given twice ({' '.join(f'{w:g}' for w in ws)})")
    return ws


def run(args) -> int:
    """Print the leaderboard in ``args.format`` (see the module docstring); with ``-o/--out FILE``, also write
    it as CSV.

    Raises:
        ValueError: no records, ``--reference`` names no policy of the results, a bad ``--loss-weight``.
    """

    from fwgym.cli.progress import phase
    from fwgym.cli.tables import resolve_format
    from fwgym.evaluation import AUTO as AUTO_REFERENCE
    from fwgym.evaluation import leaderboard, load_results, reference_policy
    from fwgym.evaluation.header import loss_weight_mark, make_header, result_set_marks
    from fwgym.core.scoring import BUDGET
    from fwgym.evaluation.weights import LOSS_WEIGHT, reweight, weighted_formula
    from fwgym.suites import suite_metric

    weights = loss_weights(getattr(args, "loss_weight", None))
    with phase("reading and re-scoring the results"):
        rs = load_results(args.results, allow_partial=args.allow_partial, common_cases=args.common_cases,
                          allow_mixed_versions=args.allow_mixed_versions,
                          allow_unverified=getattr(args, "allow_unverified", False))
    warn_unverified(rs)
    records = rs.records
    if not records:
        raise ValueError(f"no result records in {args.results}")
    suite = rs.settings.get("suite") or "decision"
    policies = list(dict.fromkeys(r["policy"] for r in records))
    try:
        ref = reference_policy(policies, AUTO_REFERENCE if args.reference is None else args.reference)
    except ValueError as exc:
        raise ValueError(f"--reference: {exc}") from None
    if len(weights) > 1:
        return _sensitivity(args, rs, records, suite, ref, weights)
    w = weights[0]
    if w != LOSS_WEIGHT:
        records = reweight(records, w, rs.settings["sigma"], rs.settings.get("budget") or BUDGET, suite)
    with phase(f"bootstrap intervals ({args.n_boot:,} draws x {len(policies)} policies)" if ref else "aggregates"):
        rows = leaderboard(records, reference=ref, n_boot=args.n_boot, seed=args.seed)
    labels = _labels_of(rs)
    for r in rows:
        if labels:
            r["labels"] = labels.get(r["policy"], {})
        if w != LOSS_WEIGHT:
            r["loss_weight"] = w
    credit_weight = rs.settings.get("credit_weight")  # the manifest's (S is never inverted to recover it)
    metric = suite_metric(suite, credit_weight)
    formula = weighted_formula(w) if w != LOSS_WEIGHT else metric.formula
    header = make_header(records, suite=suite, formula=formula, marks=[*result_set_marks(rs), loss_weight_mark(w)],
                         notes=list(rs.notes) + _shared_labels(labels, rows), checked=_checked(rs),
                         reference=ref, n_boot=args.n_boot, seed=args.seed, row_marks=rs.marks)
    fmt = resolve_format(args.format)
    csv_rows = header.csv_rows(rows)  # CSV has no header to say so
    _print_leaderboard(args, fmt, header, rows, csv_rows, suite, credit_weight, rs.settings.get("split"), w, formula, ref)
    _write_out(args, csv_rows, fmt)
    return 0


def _print_leaderboard(args, fmt: str, header, rows: list, csv_rows: list, suite: str, credit_weight, split, w: float,
                       formula: str, ref) -> None:
    """The leaderboard of one loss weight on stdout in ``fmt`` (csv, json, latex, markdown or table)."""
    import sys

    from fwgym.evaluation.leaderboard import format_csv, format_json, format_latex

    if fmt == "csv":
        sys.stdout.write(format_csv(csv_rows))
    elif fmt == "json":
        cov = header.by_domain
        print(format_json(csv_rows, suite, credit_weight, split=split, loss_weight=w,
                          formula=formula, coverage={"cases": header.n_cases, "complete": header.mark("PARTIAL") is None,
                                                     "by_domain": {k: list(v) for k, v in cov.items()}},
                          reference=ref, n_boot=args.n_boot if ref else None, seed=args.seed if ref else None,
                          **header.json_fields()))
    elif fmt == "latex":
        print(format_latex(rows, suite, comment=header.latex_comment()
                           + "\nper-cohort and per-lead tables: --format markdown or csv"))
    else:
        _print_tables(args, fmt, header, rows, suite)


def _print_tables(args, fmt: str, header, rows: list, suite: str) -> None:
    """The header, the main table and (unless ``--no-breakdown``) the breakdown tables, aligned or Markdown."""
    from fwgym.cli.tables import left_out_note, output_width, print_table
    from fwgym.evaluation.leaderboard import breakdown_tables, leaderboard_table, narrow_cells

    width = output_width(wide=getattr(args, "wide", False)) if fmt != "markdown" else None
    print("\n".join(header.lines(width)) if fmt != "markdown" else header.markdown())
    print()
    main = leaderboard_table(rows, suite)
    left = print_table(narrow_cells(main) if width else main, fmt, width=width)
    note = left_out_note(left, width)
    if note:
        print(note)
    if not args.no_breakdown:
        for table in breakdown_tables(rows, suite):
            print()
            print(table.title)
            if fmt == MARKDOWN:
                print()
            print_table(table.__class__(None, table.columns, table.align, table.rows), fmt, width=width)


def _write_out(args, csv_rows: list, fmt: str) -> None:
    """``-o/--out FILE``: the rows as CSV (``wrote FILE`` on stdout, or on stderr when stdout carries data)."""
    import sys

    from fwgym.evaluation import write_csv

    if args.out:
        print(f"\nwrote {write_csv(csv_rows, args.out)}", file=sys.stderr if fmt in ("csv", "json", "latex") else sys.stdout)


def _checked(rs) -> str:
    """What checked the records of ``rs``, for the header."""
    return "re-scored, NOT hash-checked" if rs.unverified else "re-scored and hash-checked"


def _shared_labels(labels: dict, rows) -> list[str]:
    """``["labels: k=v, ..."]`` when every row has the same labels (then the table has no labels column)."""
    from fwgym.evaluation.leaderboard import label_text

    values = {label_text(r.get("labels")) for r in rows}
    if labels and len(values) == 1:
        for r in rows:
            r.pop("labels", None)
        return [f"labels: {values.pop()}"]
    return []


def _sensitivity(args, rs, records, suite: str, ref, weights: list[float]) -> int:
    """``--loss-weight W1 W2 ...``: the sensitivity table (S and rank at each weight, Kendall's tau-b)."""
    import json
    import sys

    from fwgym.cli.progress import phase
    from fwgym.cli.tables import output_width, print_table, resolve_format
    from fwgym.evaluation.formats import format_csv, latex_table
    from fwgym.evaluation.header import make_header, result_set_marks
    from fwgym.core.scoring import BUDGET
    from fwgym.evaluation.weights import sensitivity, sensitivity_table

    with phase(f"re-scoring at {len(weights)} loss weights" + (f" with {args.n_boot:,} bootstrap draws" if ref else "")):
        rows, tau = sensitivity(records, weights, rs.settings["sigma"], rs.settings.get("budget") or BUDGET, suite,
                                reference=ref,
                                n_boot=args.n_boot, seed=args.seed)
    formula = "S = W·R + (1−W)·c/B, R = (loss − F)/σ; W = " + ", ".join(f"{w:g}" for w in weights)
    header = make_header(records, title="fwgym leaderboard: loss-weight sensitivity", suite=suite, formula=formula,
                         marks=result_set_marks(rs), notes=list(rs.notes), checked=_checked(rs),
                         reference=ref, n_boot=args.n_boot, seed=args.seed, row_marks=rs.marks,
                         facts=["the protocol's W is 0.5; ranks: 1 = best"])
    table = sensitivity_table(rows, weights, tau, reference=ref)
    fmt = resolve_format(args.format)
    csv_rows = header.csv_rows(rows)
    if fmt == "csv":
        sys.stdout.write(format_csv(csv_rows))
    elif fmt == "json":
        print(json.dumps({"suite": suite, "loss_weights": weights, "kendall_tau_b": {f"{w:g}": t for w, t in tau.items()},
                          "reference": ref, **header.json_fields(), "rows": csv_rows}, indent=1, ensure_ascii=False,
                         allow_nan=False))
    elif fmt == "latex":
        print(latex_table(table, header.latex_comment()))
    else:
        width = output_width(wide=getattr(args, "wide", False)) if fmt != "markdown" else None
        print("\n".join(header.lines(width)) if fmt != "markdown" else header.markdown())
        print()
        print_table(table, fmt, width=width)
    _write_out(args, csv_rows, fmt)
    return 0


__all__ = ["NAME", "HELP", "FORMATS", "add_arguments", "add_allow_unverified", "warn_unverified", "run", "loss_weights"]
