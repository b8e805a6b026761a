"""The leaderboard: one row per policy from result records (DESIGN §5), and its forms: Markdown, CSV,
LaTeX (booktabs) and JSON, labelled with the suite's metric names (:func:`fwgym.suites.suite_metric`).

Rows aggregate with the cohort weights of :func:`fwgym.core.scoring.case_weights`, carry per-cohort and
per-lead breakdowns and, against a reference policy (:func:`reference_policy`), the paired
series-cluster bootstrap intervals of :mod:`fwgym.evaluation.bootstrap`.
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.records import by_policy, check_result_set
from fwgym.suites import reference_policies, suite_metric
from fwgym.core.scoring import aggregate
from fwgym.validation import is_int

__all__ = ["DEFAULT_REFERENCE", "REFERENCE_POLICIES", "AUTO", "reference_policy", "leaderboard", "token_means",
           "Table", "leaderboard_table", "breakdown_tables", "markdown_table", "latex_table", "latex_escape",
           "format_leaderboard", "format_breakdowns", "format_latex", "format_json", "format_csv", "write_csv",
           "mark_rows"]

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


@dataclass(frozen=True)
class Table:
    """A table of formatted cells, rendered as Markdown (:func:`markdown_table`), LaTeX
    (:func:`latex_table`) or, by the command line, as an aligned terminal table.

    Attributes:
        title: a caption line (``None``: none).
        columns: the header cells.
        align: ``"l"`` or ``"r"`` per column.
        rows: the body, one tuple of cell strings per row (as many cells as ``columns``).
    """

    title: str | None
    columns: tuple[str, ...]
    align: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _ci(row: Mapping, m: str, digits: int) -> str:
    if f"d{m}" not in row:
        return ""
    if row["policy"] == row.get("reference"):
        return "(reference)"
    return f"{row[f'd{m}']:+.{digits}f} [{row[f'd{m}_lo']:+.{digits}f}, {row[f'd{m}_hi']:+.{digits}f}]"


def leaderboard_table(rows: Sequence[Mapping], suite: str = "decision") -> Table:
    """The main table of :func:`leaderboard` rows: policy, S, R, the suite's loss (decision loss, or
    RCRPS in the forecast suite: :func:`fwgym.suites.suite_metric`), credits, calls, valid/n, the mean
    tokens per case when a row has token counts (LLM agents) and, when the rows carry a reference, the
    paired-bootstrap 95% intervals of ``ΔS`` and ``Δ<loss>``.

    Raises:
        ValueError: an unknown suite.
    """
    metric = suite_metric(suite)
    loss = metric.loss_name
    ref = rows[0].get("reference") if rows else None
    head = ["policy", "S", "R", loss, "credits", "calls", "valid"]
    tokens = any(r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None for r in rows)
    if tokens:
        head.append("tokens/case (prompt + completion)")
    if ref:
        head += [f"ΔS vs {ref} [95% CI]", f"Δ{loss} vs {ref} [95% CI]"]
    body = []
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}", f"{r['R']:.4f}", f"{r['loss']:.5f}", f"{r['credits']:,.1f}",
                 f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"]
        if tokens:
            pt, ct = r.get("prompt_tokens"), r.get("completion_tokens")
            cells.append("" if pt is None and ct is None else f"{pt or 0:,.0f} + {ct or 0:,.0f}")
        if ref:
            cells += [_ci(r, "S", 4), _ci(r, "loss", 5)]
        body.append(tuple(cells))
    return Table(None, tuple(head), ("l",) + ("r",) * (len(head) - 1), tuple(body))


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


def _md_cell(s: str) -> str:
    return s.replace("|", r"\|")


def markdown_table(table: Table) -> str:
    """A :class:`Table` as a GitHub-flavoured Markdown table (``|`` in cells escaped; the title, if any,
    and a blank line above it)."""
    sep = {"l": "---", "r": "---:"}

    def line(cells) -> str:
        return "|" + "|".join(f" {_md_cell(c)} " if c else " " for c in cells) + "|"

    lines = [line(table.columns), "|" + "|".join(sep[a] for a in table.align) + "|"]
    lines += [line(row) for row in table.rows]
    return "\n".join(([table.title, ""] if table.title else []) + lines)


def format_leaderboard(rows: Sequence[Mapping], suite: str = "decision") -> str:
    """Markdown table of :func:`leaderboard` rows (:func:`leaderboard_table`; ``"(no results)"`` for none)."""
    if not rows:
        return "(no results)"
    return markdown_table(leaderboard_table(rows, suite))


def format_breakdowns(rows: Sequence[Mapping], suite: str = "decision") -> str:
    """Markdown tables of the per-cohort and per-lead columns of :func:`leaderboard` rows (S and the
    suite's loss: :func:`breakdown_tables`)."""
    return "\n\n".join(markdown_table(t) for t in breakdown_tables(rows, suite))


#: LaTeX's special characters in text mode and what stands for each
_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_SIGNED = re.compile(r"(?<![\w.])([+\-])(\d[\d,]*(?:\.\d+)?)")


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped for text mode (``_`` -> ``\\_``, ...), the Greek
    and operator symbols of the column names in math mode (``Δ`` -> ``$\\Delta$``, ``σ``, ``−``, ``·``),
    and signed numbers (``+0.0123``, ``-1.5``) in math mode, so their signs print as plus and minus."""
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)
    out = _SIGNED.sub(lambda m: f"${m.group(1)}{m.group(2).replace(',', '{,}')}$", out)
    for sym, tex in (("Δ", r"$\Delta$"), ("σ", r"$\sigma$"), ("−", "$-$"), ("·", r"$\cdot$")):
        out = out.replace(sym, tex)
    return out


#: header cells set in math mode by :func:`latex_table`
_LATEX_HEADS = {"S": "$S$", "R": "$R$", "ΔS [95% CI]": r"$\Delta S$ [95\% CI]"}


def latex_table(table: Table, comment: str | None = None) -> str:
    """A :class:`Table` as a booktabs ``tabular`` (``\\toprule``, ``\\midrule``, ``\\bottomrule``) that a
    paper can ``\\input`` inside its own ``table`` float (caption and label are the paper's); needs
    ``\\usepackage{booktabs}``. ``comment``: ``%`` lines above the table (e.g. what it shows)."""
    lines = [f"% {c}" for c in (comment.splitlines() if comment else [])]
    lines.append(r"% needs \usepackage{booktabs}")
    lines.append(r"\begin{tabular}{" + "".join(table.align) + "}")
    lines.append(r"\toprule")
    lines.append(" & ".join(_LATEX_HEADS.get(c) or latex_escape(c) for c in table.columns) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in table.rows]
    lines.append(r"\bottomrule")
    lines.append(r"\end{tabular}")
    return "\n".join(lines)


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


def format_json(rows: Sequence[Mapping], suite: str = "decision", credit_weight: float | None = None, **about) -> str:
    """:func:`leaderboard` rows as a JSON document: ``{"suite", "metric": {"loss", "R", "formula"},
    **about, "rows": [...]}`` with every column of every row (``None`` as ``null``), indented.

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
           **about, "rows": [dict(r) for r in rows]}
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)


def mark_rows(rows: Sequence[Mapping], unverified: Iterable[str] = (), partial: bool = False) -> list[dict]:
    """:func:`leaderboard` rows with two columns saying what vouches for them, for outputs that carry
    no header (CSV): ``verified`` (``False`` for the policies in ``unverified``: records from a source
    without a manifest, :attr:`fwgym.evaluation.ResultSet.unverified`) and ``partial`` (``partial``:
    the cases are not the whole split, :func:`fwgym.evaluation.coverage`), both ``bool`` on every row."""
    unverified = set(unverified)
    return [{**r, "verified": r["policy"] not in unverified, "partial": bool(partial)} for r in rows]


def _csv_cell(v):
    return ("true" if v else "false") if isinstance(v, bool) else v


def format_csv(rows: Sequence[Mapping]) -> str:
    """:func:`leaderboard` rows as CSV text (RFC 4180: ``\r\n`` line ends; header = the union of row keys,
    first row's order first; ``None`` as an empty cell; booleans as ``true`` / ``false``)."""
    fields = list(rows[0]) if rows else ["policy"]
    for r in rows:
        fields += [k for k in r if k not in fields]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def write_csv(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Write :func:`leaderboard` rows as CSV (:func:`format_csv`) to ``path`` (parent folders created)."""
    p = Path(path)
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", newline="") as fh:
        fh.write(format_csv(rows))
    return p
