"""The leaderboard: one row per policy from result records (DESIGN §5), and its forms: Markdown, CSV,
LaTeX (booktabs) and JSON (:mod:`fwgym.evaluation.formats`), labelled with the suite's metric names
(:func:`fwgym.suites.suite_metric`) under the one header of :mod:`fwgym.evaluation.header`.

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
from fwgym.evaluation.breakdown import (GROUPING_TITLES, GROUPINGS, breakdown_columns, breakdown_records,
                                        forecast_columns, parse_column_key, with_no_violation)
from fwgym.evaluation.formats import Table, format_csv, latex_escape, latex_table, markdown_table, write_csv
from fwgym.evaluation.header import Header, mark_rows
from fwgym.evaluation.records import by_policy, check_result_set
from fwgym.suites import infer_suite, reference_policies, suite_metric
from fwgym.core.scoring import aggregate
from fwgym.validation import is_int

__all__ = ["DEFAULT_REFERENCE", "REFERENCE_POLICIES", "AUTO", "reference_policy", "leaderboard", "token_means",
           "Table", "leaderboard_table", "breakdown_tables", "context_tables", "markdown_table", "latex_table", "latex_escape",
           "format_leaderboard", "format_breakdowns", "format_latex", "format_json", "format_csv", "write_csv",
           "mark_rows", "write_leaderboard_files", "label_text", "narrow_cells"]

#: policies the intervals compare against by default, the first present wins: the protocol's sigma
#: policy (hour-of-day empirical) and its forecast-task twin that submits the same samples
REFERENCE_POLICIES: tuple[str, ...] = reference_policies()
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
    parts: dict[str, list[Mapping]] = defaultdict(list)
    for r in recs:
        parts[r[key]].append(r)
    return {g: aggregate(parts[g], fields=("S", "R", "loss", "credits")) for g in sorted(parts)}


def _loss_key(suite: str) -> str:
    """The row column the tables show as the suite's loss: ``loss`` (decision loss), or ``R`` in the forecast
    suite (the capped mean RCRPS; the uncapped mean ``loss`` stays in the CSV and JSON rows)."""
    return "R" if suite == "forecast" else "loss"


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
    over its own cases with the same weighting rules; ``R[...]`` in place of ``loss[...]`` in the
    forecast suite); with ``reference``: ``reference`` and the
    paired bootstrap (:func:`~fwgym.evaluation.bootstrap.paired_bootstrap`) point estimates and 95%
    intervals ``dS, dS_lo, dS_hi`` and ``dloss, dloss_lo, dloss_hi`` of ``policy - reference``.

    Forecast-suite records (they carry ``rcrps``) add ``R_no_violation`` (the capped mean RCRPS without
    its bound-violation term) and ``R_fair`` (the capped mean of CiK's fair RCRPS, when every valid
    record has one: :func:`fwgym.evaluation.breakdown.forecast_columns`); their intervals are on the
    capped means: ``dR, dR_lo, dR_hi`` and ``dR_no_violation, ...`` in place of ``dloss`` (``loss``
    is the uncapped mean RCRPS, which one absurd accepted forecast can dominate).

    Records with a scenario (the context and forecast suites) add the breakdown by scenario family
    and CiK context type, ``<metric>[family:<domain>/<family>]`` and ``<metric>[context_type:<type>]``
    with ``n[...]`` (:func:`fwgym.evaluation.breakdown.breakdown_columns`).

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
    forecast = infer_suite(records) == "forecast"
    if forecast:
        records = with_no_violation(records)
    groups = by_policy(records)
    reference = reference_policy(list(groups), reference)
    compared: tuple[str, ...] = ("S", "loss")
    if forecast:
        compared = ("S", "R") + (("R_no_violation",) if all(r["R_no_violation"] is not None for r in records) else ())
    boot = None
    if reference is not None:
        ref_recs = groups[reference]
        boot = ClusterBootstrap(ref_recs, n_boot, seed)
    context = breakdown_columns(records)
    rows = []
    for policy, recs in groups.items():
        row = {"policy": policy, **aggregate(recs), **(forecast_columns(recs) if forecast else {}), **token_means(recs)}
        if reference is not None:
            bs = paired_bootstrap(records, reference, policy, n_boot, seed, metrics=compared, bootstrap=boot)
            row["reference"] = reference
            for m in compared:
                row[f"d{m}"], row[f"d{m}_lo"], row[f"d{m}_hi"] = bs[m]["diff"], bs[m]["lo"], bs[m]["hi"]
        for key in ("cohort", "lead"):
            for g, agg in _group_aggregates(recs, key).items():
                for m in ("S", "R" if forecast else "loss", "credits"):
                    row[f"{m}[{g}]"] = agg[m]
        row.update(context.get(policy, {}))
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
    RCRPS in the forecast suite: :func:`fwgym.suites.suite_metric`), credits, calls, valid/n, the mean
    tokens per case when a row has token counts (LLM agents), the run labels when a row has some
    (``labels``: ``{key: value}``) and, when the rows carry a reference, the paired-bootstrap 95%
    intervals of ``ΔS`` and ``Δ<loss>``.

    Narrow outputs (a terminal) use the short headers (``ΔS [95% CI]``: the header line names the
    reference; ``valid`` as a count when every row has the same number of cases, named in the header)
    and leave columns out by priority: policy and S never, then, kept longest first, ΔS, credits, the
    loss, R, valid, calls, Δloss, the forecast suite's further RCRPS columns, tokens, labels
    (:attr:`Table.priority`).

    The forecast suite's table: policy, S, ``RCRPS`` (the capped mean, R), ``RCRPS w/o violation``
    (the capped mean without the bound-violation term), ``RCRPS fair (CiK)`` when a row has it
    (:func:`fwgym.evaluation.breakdown.forecast_columns`), credits, calls, valid, tokens, and the
    intervals of ``ΔS``, ``ΔRCRPS`` and ``ΔRCRPS w/o violation`` (on the capped means).

    Raises:
        ValueError: an unknown suite.
    """
    metric = suite_metric(suite)
    loss = metric.loss_name
    ref = rows[0].get("reference") if rows else None
    forecast = suite == "forecast"
    fair = forecast and any(r.get("R_fair") is not None for r in rows)
    nv = forecast and any(r.get("R_no_violation") is not None for r in rows)
    same_n = len({r["n"] for r in rows}) == 1
    n = rows[0]["n"] if rows else 0
    valid = f"valid/{n}" if same_n else "valid"
    if forecast:
        head = ["policy", "S", f"{loss} (capped mean)"] + ([f"{loss} w/o violation"] if nv else []) \
            + ([f"{loss} fair (CiK)"] if fair else []) + ["credits", "calls", "valid"]
        short = ["policy", "S", loss] + ([f"{loss} w/o viol."] if nv else []) + ([f"{loss} fair"] if fair else []) \
            + ["credits", "calls", valid]
        prio = [0, 0, 3] + ([8] if nv else []) + ([9] if fair else []) + [2, 6, 5]
    else:
        head = ["policy", "S", "R", loss, "credits", "calls", "valid"]
        short = ["policy", "S", "R", loss, "credits", "calls", valid]
        prio = [0, 0, 4, 3, 2, 6, 5]
    tokens = any(r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None for r in rows)
    labels = any(r.get("labels") for r in rows)
    if tokens:
        head.append("tokens/case (prompt + completion)")
        short.append("tokens/case")
        prio.append(10)
    if labels:
        head.append("labels")
        short.append("labels")
        prio.append(11)
    deltas = [("S", "S", 4), (_loss_key(suite), loss, 4 if forecast else 5)] + ([("R_no_violation", f"{loss} w/o violation", 4)]
                                                              if nv and ref and "dR_no_violation" in rows[0] else [])
    if ref:
        head += [f"Δ{name} vs {ref} [95% CI]" for _, name, _ in deltas]
        short += [f"Δ{name} [95% CI]" for _, name, _ in deltas]
        prio += [1, 7, 8][:len(deltas)]
    body = []
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}"]
        if forecast:
            cells.append(f"{r['R']:.4f}")
            cells += [_num(r.get("R_no_violation"), 4)] if nv else []
            cells += [_num(r.get("R_fair"), 4)] if fair else []
        else:
            cells += [f"{r['R']:.4f}", f"{r['loss']:.5f}"]
        cells += [f"{r['credits']:,.1f}", f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"]
        if tokens:
            pt, ct = r.get("prompt_tokens"), r.get("completion_tokens")
            cells.append("" if pt is None and ct is None else f"{pt or 0:,.0f} + {ct or 0:,.0f}")
        if labels:
            cells.append(label_text(r.get("labels")))
        if ref:
            cells += [_ci(r, key, digits) for key, _, digits in deltas]
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


def _num(v, digits: int) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def breakdown_tables(rows: Sequence[Mapping], suite: str = "decision") -> list[Table]:
    """The per-cohort and per-lead tables of :func:`leaderboard` rows: S, then the suite's loss
    (titled ``"S by cohort and lead:"`` and ``"decision loss by cohort and lead:"``, or ``"RCRPS by
    ..."`` in the forecast suite, the capped mean), then the context tables
    (:func:`context_tables`).

    Raises:
        ValueError: an unknown suite.
    """
    metric = suite_metric(suite)
    out: list[Table] = []
    if not rows:
        return out
    for m, digits, title in (("S", 4, "S"), (_loss_key(suite), 5 if suite != "forecast" else 4, metric.metric_name)):
        cols = [k for k in rows[0] if k.startswith(f"{m}[") and parse_column_key(k) is None]
        if not cols:
            continue
        head = ("policy",) + tuple(c[len(m) + 1: -1] for c in cols)
        body = tuple((r["policy"],) + tuple(f"{r[c]:.{digits}f}" for c in cols) for r in rows)
        out.append(Table(f"{title} by cohort and lead:", head, ("l",) + ("r",) * len(cols), body))
    return out + context_tables(rows, suite)


#: the context tables' metrics per suite: (row column metric, digits, title)
_CONTEXT_METRICS = {"forecast": (("R", 4, "RCRPS (capped mean)"),
                                 ("R_no_violation", 4, "RCRPS without the violation term (capped mean)"),
                                 ("S", 4, "S")),
                    "decision": (("S", 4, "S"), ("loss", 5, "decision loss"))}


def context_tables(rows: Sequence[Mapping], suite: str = "decision") -> list[Table]:
    """The tables of the breakdown by scenario family and CiK context type of :func:`leaderboard` rows
    (:mod:`fwgym.evaluation.breakdown`): one per grouping and metric, a row per policy, a column per
    group headed ``<group> (n=<cases>)``; in the forecast suite RCRPS, RCRPS without the violation term
    (both capped means) and S (only when it differs from RCRPS: a credit weight); in the decision suites
    S and the decision loss. ``[]`` for rows without the breakdown (the decision suite).
    """
    if not rows:
        return []
    keys = [k for k in (parse_column_key(c) for c in rows[0]) if k is not None]
    out = []
    for m, digits, title in _CONTEXT_METRICS["forecast" if suite == "forecast" else "decision"]:
        if m == "S" and suite == "forecast" and all(abs(r["S"] - r["R"]) < 1e-12 for r in rows):
            continue  # S = R without a credit weight: the same table twice
        for grouping in GROUPINGS:
            groups = [g for mm, gr, g in keys if mm == m and gr == grouping]
            if not groups:
                continue
            head = ("policy",) + tuple(f"{g} (n={rows[0].get(f'n[{grouping}:{g}]')})" for g in groups)
            body = tuple((r["policy"],) + tuple(_num(r.get(f"{m}[{grouping}:{g}]"), digits) for g in groups)
                         for r in rows)
            out.append(Table(f"{title} by {GROUPING_TITLES[grouping]}:", head, ("l",) + ("r",) * len(groups), body))
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
    the ``%`` comment above the table); in the context and forecast suites followed by one ``tabular``
    per table of the breakdown by scenario family and context type (:func:`context_tables`), each
    with its title as a ``%`` comment."""
    table = leaderboard_table(rows, suite)
    ref = rows[0].get("reference") if rows else None
    head = []
    for c in table.columns:
        if ref and c.endswith(f" vs {ref} [95% CI]"):
            c = c[: -len(f" vs {ref} [95% CI]")] + " [95% CI]"
        head.append(c)
    note = f"intervals: policy - {ref} (paired series-cluster bootstrap, 95%)" if ref else None
    comment = "\n".join(x for x in (comment, note) if x) or None
    parts = [latex_table(Table(table.title, tuple(head), table.align, table.rows), comment)]
    parts += [latex_table(Table(None, t.columns, t.align, t.rows), t.title) for t in context_tables(rows, suite)]
    return "\n\n".join(parts)


def format_json(rows: Sequence[Mapping], suite: str = "decision", credit_weight: float | None = None, **about) -> str:
    """:func:`leaderboard` rows as a JSON document: ``{"suite", "metric": {"loss", "R", "formula"},
    **about, "rows": [...], "breakdown": [...]}`` with every column of every row (``None`` as ``null``)
    and the breakdown by scenario family and context type in long form
    (:func:`fwgym.evaluation.breakdown.breakdown_records`; ``[]`` in the decision suite), indented.

    Args:
        suite, credit_weight: the run's suite and (forecast suite) credit weight, as its manifest states
            them (:attr:`fwgym.evaluation.ResultSet.settings`).
        about: further JSON-safe fields to state (e.g. ``split``, ``reference``, ``n_boot``, ``seed``).

    Raises:
        ValueError: an unknown suite, or a non-finite number in a row (JSON has no NaN).
    """
    metric = suite_metric(suite, credit_weight)
    doc = {"suite": suite, "metric": {"loss": metric.loss_name, "loss_description": metric.loss_label,
                                      "R": metric.R_name, "formula": metric.formula},
           **about, "rows": [dict(r) for r in rows], "breakdown": breakdown_records(rows)}
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)


def write_leaderboard_files(out_dir: str | Path, rows: Sequence[Mapping], header: Header,
                            suite: str = "decision") -> dict[str, Path]:
    """Write a run directory's ``leaderboard.md`` (the header as a paragraph, the main table and the
    breakdowns) and ``leaderboard.csv`` (every column of every row, with the header's marks and row marks as
    columns: :meth:`fwgym.evaluation.header.Header.csv_rows`); the one writer of both for ``fwgym evaluate``
    and :func:`fwgym.evaluation.write_results`.

    Returns:
        ``{"markdown": path, "csv": path}``.
    """
    out = Path(out_dir)
    md = out / "leaderboard.md"
    md.write_text(header.markdown() + "\n\n" + format_leaderboard(rows, suite) + "\n\n"
                  + format_breakdowns(rows, suite) + "\n", encoding="utf-8")
    return {"markdown": md, "csv": write_csv(header.csv_rows(rows), out / "leaderboard.csv")}


