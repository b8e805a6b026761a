"""The leaderboard: one row per policy from result records (DESIGN §5), its Markdown and CSV forms.

Rows aggregate with the cohort weights of :func:`fwgym.scoring.case_weights`, carry per-cohort and
per-lead breakdowns and, against a reference policy (:func:`reference_policy`), the paired
series-cluster bootstrap intervals of :mod:`fwgym.evaluation.bootstrap`.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Mapping, Sequence

from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.records import by_policy, check_result_set
from fwgym.scoring import aggregate

__all__ = ["DEFAULT_REFERENCE", "REFERENCE_POLICIES", "AUTO", "reference_policy", "leaderboard", "token_means",
           "format_leaderboard", "format_breakdowns", "write_csv"]

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
        vals = [r[k] for r in records if isinstance(r.get(k), int) and not isinstance(r.get(k), bool)]
        out[k] = float(sum(vals) / len(vals)) if vals else None
    return out


def leaderboard(records: Sequence[Mapping], reference: str | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                complete: bool = False) -> list[dict]:
    """One row per policy, sorted by S (then name).

    Columns: aggregate ``S, R, loss, floor, credits, calls, n, valid`` (weights of
    :func:`fwgym.scoring.case_weights`); ``prompt_tokens``, ``completion_tokens`` (mean per case,
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


def _ci(row: dict, m: str, digits: int) -> str:
    if f"d{m}" not in row:
        return ""
    if row["policy"] == row.get("reference"):
        return "(reference)"
    return f"{row[f'd{m}']:+.{digits}f} [{row[f'd{m}_lo']:+.{digits}f}, {row[f'd{m}_hi']:+.{digits}f}]"


def format_leaderboard(rows: Sequence[Mapping]) -> str:
    """Markdown table of :func:`leaderboard` rows: policy, S, R, loss, credits, calls, valid/n, the mean
    tokens per case when a row has token counts (LLM agents) and, when the rows carry a reference, the paired-bootstrap 95% intervals of ``ΔS`` and ``Δloss``."""
    if not rows:
        return "(no results)"
    ref = rows[0].get("reference")
    head = ["policy", "S", "R", "loss", "credits", "calls", "valid"]
    tokens = any(r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None for r in rows)
    if tokens:
        head.append("tokens/case (prompt + completion)")
    if ref:
        head += [f"ΔS vs {ref} [95% CI]", f"Δloss vs {ref} [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for r in rows:
        cells = [r["policy"], f"{r['S']:.4f}", f"{r['R']:.4f}", f"{r['loss']:.5f}", f"{r['credits']:,.1f}",
                 f"{r['calls']:.2f}", f"{r['valid']}/{r['n']}"]
        if tokens:
            p, c = r.get("prompt_tokens"), r.get("completion_tokens")
            cells.append("" if p is None and c is None else f"{p or 0:,.0f} + {c or 0:,.0f}")
        if ref:
            cells += [_ci(r, "S", 4), _ci(r, "loss", 5)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_breakdowns(rows: Sequence[Mapping]) -> str:
    """Markdown tables of the per-cohort and per-lead columns of :func:`leaderboard` rows (S and loss)."""
    if not rows:
        return ""
    out = []
    for m, digits, title in (("S", 4, "S"), ("loss", 5, "decision loss")):
        cols = [k for k in rows[0] if k.startswith(f"{m}[")]
        if not cols:
            continue
        head = ["policy"] + [c[len(m) + 1 : -1] for c in cols]
        lines = [f"{title} by cohort and lead:", "", "| " + " | ".join(head) + " |",
                 "|" + "|".join(["---"] + ["---:"] * len(cols)) + "|"]
        for r in rows:
            lines.append("| " + " | ".join([r["policy"]] + [f"{r[c]:.{digits}f}" for c in cols]) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def write_csv(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Write :func:`leaderboard` rows as CSV (header = the union of row keys, first row's order first)."""
    p = Path(path)
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0]) if rows else ["policy"]
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(p, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return p

