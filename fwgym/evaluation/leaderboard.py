"""The leaderboard: one row per policy from result records (DESIGN §5), and its forms: Markdown, CSV,
LaTeX (booktabs) and JSON (:mod:`fwgym.evaluation.formats`), labelled with the suite's metric names
(:func:`fwgym.core.metrics.suite_metric`) under the one header of :mod:`fwgym.evaluation.header`.

Rows aggregate with the cohort weights of :func:`fwgym.core.scoring.case_weights`, carry per-cohort and
per-lead breakdowns and, against a reference policy (:func:`reference_policy`), the paired
series-cluster bootstrap intervals of :mod:`fwgym.evaluation.bootstrap`.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Mapping, Sequence

from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.formats import Table, format_csv, latex_escape, latex_table, markdown_table, write_csv
from fwgym.evaluation.header import Header, mark_rows
from fwgym.evaluation.records import by_policy, check_result_set
from fwgym.core.metrics import suite_metric
from fwgym.core.scoring import aggregate
from fwgym.validation import is_int

__all__ = ["DEFAULT_REFERENCE", "REFERENCE_POLICIES", "AUTO", "reference_policy", "leaderboard", "token_means",
           "Table", "leaderboard_table", "breakdown_tables", "markdown_table", "latex_table", "latex_escape",
           "format_leaderboard", "format_breakdowns", "format_latex", "format_json", "format_csv", "write_csv",
           "credit_weight_of_rows", "mark_rows", "write_leaderboard_files", "label_text", "narrow_cells"]

#: policies the intervals compare against by default, the first present wins: the protocol's sigma
#: policy (hour-of-day empirical) and its forecast-task twin that submits the same samples
REFERENCE_POLICIES: tuple[str, ...] = ("hour_of_day_empirical", "hour_of_day_empirical_samples")
#: default reference policy of the paired bootstrap intervals (the protocol's sigma policy)
DEFAULT_REFERENCE = REFERENCE_POLICIES[0]
#: ``reference_policy(..., AUTO)``: choose the default reference
AUTO = "auto"


def reference_policy(policies: Sequence[str], reference: str | None = AUTO) -> str | None:
    """The policy the leaderboard's intervals compare against, or ``None`` for no intervals.

    Args:
        policies: the policies of the results (names, in any order).
        reference: ``"auto"`` (default): the first of :data:`REFERENCE_POLICIES` present, when there
            are at least two policies (a single row has nothing to compare); ``None`` or ``"none"``
            (any case): no intervals; otherwise a policy name, which must be among ``policies``.

    Raises:
        ValueError: a named reference that is not among ``policies``.
    """
    policies = list(dict.fromkeys(policies))
    if reference is None or reference.lower() == "none":
        return None
    if reference == AUTO:
        return next((p for p in REFERENCE_POLICIES if p in policies), None) if len(policies) > 1 else None
    if reference not in policies:
        raise ValueError(f"reference policy {reference!r} is not among the policies {policies}")
    return reference



def _group_aggregates(recs: Sequence[Mapping], key: str) -> dict[str, dict]:
    parts: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        parts[r[key]].append(r)
    return {g: aggregate(parts[g], fields=("S", "R", "loss", "credits")) for g in sorted(parts)}


def token_means(records: Sequence[Mapping]) -> dict[str, float | None]:
    """Mean ``prompt_tokens`` and ``completion_tokens`` per case (plain means over the records that
    have them, so cost compares across models; ``None`` for a policy without token counts, e.g. a baseline)."""
    out: dict[str, float | None] = {}
    for k in ("prompt_tokens", "completion_tokens"):
        vals = [r[k] for r in records if is_int(r.get(k))]
        out[k] = float(sum(vals) / len(vals)) if vals else None
    return out


def leaderboard(records: Sequence[Mapping], reference: str | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                complete: bool = False) -> list[dict]:
    """One row per policy, sorted by S (then name).

    Columns: aggregate ``S, R, loss, floor, credits, calls, n, valid`` (weights of
    :func:`fwgym.core.scoring.case_weights`); ``prompt_tokens``, ``completion_tokens`` (mean per case,
    :func:`token_means`); ``S[<cohort>]``, ``loss[<cohort>]``, ``credits[<cohort>]``
    per cohort and ``S[<lead>]``, ``loss[<lead>]``, ``credits[<lead>]`` per lead (each aggregated
    over its own cases with the same weighting rules); with ``reference``: ``reference`` and the
    paired bootstrap (:func:`~fwgym.evaluation.bootstrap.paired_bootstrap`) point estimates and 95%
    intervals ``dS, dS_lo, dS_hi, dloss, dloss_lo, dloss_hi`` of ``policy - reference``.

    Args:
        records: result records (:class:`~fwgym.evaluation.records.Record`) of one or more policies on
            the same cases.
        reference: a policy name, ``None`` (no intervals) or ``"auto"`` (:func:`reference_policy`).
        n_boot, seed: bootstrap draws and seed (protocol: 10,000 and 1701).
        complete: require the whole frozen split index (:func:`~fwgym.evaluation.records.check_result_set`).

    Raises:
        ValueError: as :func:`~fwgym.evaluation.records.check_result_set`; unknown ``reference``.
    """
    check_result_set(records, complete=complete)
    groups = by_policy(records)
    reference = reference_policy(list(groups), reference)
    boot = None
    if reference is not None:
        ref_recs = groups[reference]
        boot = ClusterBootstrap(ref_recs, n_boot, seed)
    rows = []
    for policy, recs in groups.items():
        row = {"policy": policy, **aggregate(recs), **token_means(recs)}
        if reference is not None:
            bs = paired_bootstrap(records, reference, policy, n_boot, seed, bootstrap=boot)
            row["reference"] = reference
            for m in ("S", "loss"):
                row[f"d{m}"], row[f"d{m}_lo"], row[f"d{m}_hi"] = bs[m]["diff"], bs[m]["lo"], bs[m]["hi"]
        for key in ("cohort", "lead"):
            for g, agg in _group_aggregates(recs, key).items():
                for m in ("S", "loss", "credits"):
                    row[f"{m}[{g}]"] = agg[m]
        rows.append(row)
    rows.sort(key=lambda r: (r["S"], r["policy"]))
    return rows


def _ci(row: Mapping, m: str, digits: int) -> str:
    if f"d{m}" not in row:
        return ""
    if row["policy"] == row.get("reference"):
        return "(reference)"
    return f"{row[f'd{m}']:+.{digits}f} [{row[f'd{m}_lo']:+.{digits}f}, {row[f'd{m}_hi']:+.{digits}f}]"


def label_text(labels: Mapping[str, str] | None) -> str:
    """``"k1=v1, k2=v2"`` of a run's labels (``fwgym evaluate --label KEY=VALUE``), keys sorted (as the
    manifest stores them); ``""`` for none."""
    return ", ".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def leaderboard_table(rows: Sequence[Mapping], suite: str = "decision") -> Table:
    """The main table of :func:`leaderboard` rows: policy, S, R, the suite's loss (decision loss, or
    RCRPS in the forecast suite: :func:`fwgym.core.metrics.suite_metric`), credits, calls, valid/n, the mean
    tokens per case when a row has token counts (LLM agents), the run labels when a row has some
    (``labels``: ``{key: value}``) and, when the rows carry a reference, the paired-bootstrap 95%
    intervals of ``ΔS`` and ``Δ<loss>``.

    Narrow outputs (a terminal) use the short headers (``ΔS [95% CI]``: the header line names the
    reference; ``valid`` as a count when every row has the same number of cases, named in the header)
    and leave columns out by priority: policy and S never, then, kept longest first, ΔS, credits, the
    loss, R, valid, calls, Δloss, tokens, labels (:attr:`Table.priority`).

    Raises:
        ValueError: an unknown suite.
    """
    metric = suite_metric(suite)
    loss = metric.loss_name
    ref = rows[0].get("reference") if rows else None
    same_n = len({r["n"] for r in rows}) == 1
    n = rows[0]["n"] if rows else 0
    head = ["policy", "S", "R", loss, "credits", "calls", "valid"]
    short = ["policy", "S", "R", loss, "credits", "calls", f"valid/{n}" if same_n else "valid"]
    prio = [0, 0, 4, 3, 2, 6, 5]
    tokens = any(r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None for r in rows)
    labels = any(r.get("labels") for r in rows)
    if tokens:
        head.append("tokens/case (prompt + completion)")
        short.append("tokens/case")
        prio.append(8)
    if labels:
        head.append("labels")
        short.append("labels")
        prio.append(9)
    if ref:
        head += [f"ΔS vs {ref} [95% CI]", f"Δ{loss} vs {ref} [95% CI]"]
        short += ["ΔS [95% CI]", f"Δ{loss} [95% CI]"]
        prio += [1, 7]
    body = []
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}", f"{r['R']:.4f}", f"{r['loss']:.5f}", f"{r['credits']:,.1f}",
                 f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"]
        if tokens:
            pt, ct = r.get("prompt_tokens"), r.get("completion_tokens")
            cells.append("" if pt is None and ct is None else f"{pt or 0:,.0f} + {ct or 0:,.0f}")
        if labels:
            cells.append(label_text(r.get("labels")))
        if ref:
            cells += [_ci(r, "S", 4), _ci(r, "loss", 5)]
        body.append(tuple(cells))
    return Table(None, tuple(head), ("l",) + ("r",) * (len(head) - 1), tuple(body), tuple(short), tuple(prio))


def narrow_cells(table: Table) -> Table:
    """``table`` (of :func:`leaderboard_table`) as a narrow output shows it: short headers, and the
    valid column as a count when its header holds the number of cases (``valid/1259``)."""
    if table.short is None:
        return table
    rows = table.rows
    for k, h in enumerate(table.short):
        if h.startswith("valid/"):
            rows = tuple(r[:k] + (r[k].split("/")[0],) + r[k + 1:] for r in rows)
    return Table(table.title, table.short, table.align, rows, None, table.priority)


def breakdown_tables(rows: Sequence[Mapping], suite: str = "decision") -> list[Table]:
    """The per-cohort and per-lead tables of :func:`leaderboard` rows: S, then the suite's loss
    (titled ``"S by cohort and lead:"`` and ``"decision loss by cohort and lead:"``, or ``"RCRPS by
    ..."`` in the forecast suite).

    Raises:
        ValueError: an unknown suite.
    """
    metric = suite_metric(suite)
    out = []
    if not rows:
        return out
    for m, digits, title in (("S", 4, "S"), ("loss", 5, metric.metric_name)):
        cols = [k for k in rows[0] if k.startswith(f"{m}[")]
        if not cols:
            continue
        head = ("policy",) + tuple(c[len(m) + 1: -1] for c in cols)
        body = tuple((r["policy"],) + tuple(f"{r[c]:.{digits}f}" for c in cols) for r in rows)
        out.append(Table(f"{title} by cohort and lead:", head, ("l",) + ("r",) * len(cols), body))
    return out


def format_leaderboard(rows: Sequence[Mapping], suite: str = "decision") -> str:
    """Markdown table of :func:`leaderboard` rows (:func:`leaderboard_table`; ``"(no results)"`` for none)."""
    if not rows:
        return "(no results)"
    return markdown_table(leaderboard_table(rows, suite))


def format_breakdowns(rows: Sequence[Mapping], suite: str = "decision") -> str:
    """Markdown tables of the per-cohort and per-lead columns of :func:`leaderboard` rows (S and the
    suite's loss: :func:`breakdown_tables`)."""
    return "\n\n".join(markdown_table(t) for t in breakdown_tables(rows, suite))


def format_latex(rows: Sequence[Mapping], suite: str = "decision", comment: str | None = None) -> str:
    """The main leaderboard table (:func:`leaderboard_table`) as a booktabs ``tabular``
    (:func:`latex_table`), with ``$S$`` and ``$R$`` in math mode and the interval columns headed
    ``$\\Delta S$ [95\\% CI]`` (the reference policy is the row marked "(reference)" and is named in
    the ``%`` comment above the table)."""
    table = leaderboard_table(rows, suite)
    ref = rows[0].get("reference") if rows else None
    head = []
    for c in table.columns:
        if ref and c.endswith(f" vs {ref} [95% CI]"):
            c = c[: -len(f" vs {ref} [95% CI]")] + " [95% CI]"
        head.append(c)
    note = f"intervals: policy - {ref} (paired series-cluster bootstrap, 95%)" if ref else None
    comment = "\n".join(x for x in (comment, note) if x) or None
    return latex_table(Table(table.title, tuple(head), table.align, table.rows), comment)


def format_json(rows: Sequence[Mapping], suite: str = "decision", **about) -> str:
    """:func:`leaderboard` rows as a JSON document: ``{"suite", "metric": {"loss", "R", "formula"},
    **about, "rows": [...]}`` with every column of every row (``None`` as ``null``), indented.

    Args:
        about: further JSON-safe fields to state (e.g. ``split``, ``reference``, ``n_boot``, ``seed``).

    Raises:
        ValueError: an unknown suite, or a non-finite number in a row (JSON has no NaN).
    """
    metric = suite_metric(suite, credit_weight_of_rows(rows) if suite == "forecast" else None)
    doc = {"suite": suite, "metric": {"loss": metric.loss_name, "loss_description": metric.loss_label,
                                      "R": metric.R_name, "formula": metric.formula},
           **about, "rows": [dict(r) for r in rows]}
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)


def write_leaderboard_files(out_dir: str | Path, rows: Sequence[Mapping], header: Header,
                            suite: str = "decision") -> dict[str, Path]:
    """Write a run directory's ``leaderboard.md`` (the header as a paragraph, the main table and the
    breakdowns) and ``leaderboard.csv`` (every column of every row, with the header's marks as columns:
    :func:`fwgym.evaluation.header.mark_rows`); the one writer of both for ``fwgym evaluate`` and
    :func:`fwgym.evaluation.write_results`.

    Returns:
        ``{"markdown": path, "csv": path}``.
    """
    out = Path(out_dir)
    md = out / "leaderboard.md"
    md.write_text(header.markdown() + "\n\n" + format_leaderboard(rows, suite) + "\n\n"
                  + format_breakdowns(rows, suite) + "\n", encoding="utf-8")
    return {"markdown": md, "csv": write_csv(mark_rows(rows, header.marks), out / "leaderboard.csv")}


def credit_weight_of_rows(rows: Sequence[Mapping]) -> float | None:
    """The forecast suite's credit weight ``w`` of :func:`leaderboard` rows (``S = R + w * credits / B``
    of the aggregates, from a row that spent credits; ``None`` when none did). Aggregates are weighted
    means of the records, so ``w`` passes through them."""
    from fwgym.core.metrics import credit_weight_of

    return credit_weight_of([{"S": r["S"], "R": r["R"], "credits": r["credits"]} for r in rows
                             if r.get("credits")]) if rows else None


