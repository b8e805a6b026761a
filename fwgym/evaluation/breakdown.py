"""Scores by the note's scenario family and Context is Key context type (issue 27), with and without
RCRPS's bound-violation term: the ONE breakdown the leaderboard (every format) and the report show.

A context or forecast record names its note's family (``scenario``) and CiK context types
(``context_types``, e.g. ``["c_cov", "c_f"]``). Groups:

* ``family``: ``<domain>/<family>`` (the same family name in two domains is two groups: its notes, its
  bounds and its alpha differ);
* ``context_type``: each CiK type a record lists (a record with ``["c_h", "c_f"]`` counts in both).

Each group is aggregated over its own cases with the leaderboard's weights
(:func:`fwgym.core.scoring.aggregate`: domains equal, cohorts equal inside a domain, series x lead groups
equal inside a cohort). Metrics per group:

* decision suites (the context suite): ``S``, ``R``, ``loss``;
* the forecast suite: ``S``, ``R`` (the capped mean RCRPS, ``min(RCRPS, 5)`` per case) and
  ``R_no_violation``, the capped mean of the same RCRPS without its bound-violation term
  (``min(rcrps_no_violation, 5)`` per case: :func:`fwgym.core.scoring.rcrps_terms`); ``R - R_no_violation`` is
  what the bounds cost (CiK's ``beta = 10`` term). Records without ``rcrps_no_violation`` (written before
  it existed) give no ``R_no_violation`` column.

The leaderboard stores every value as a column of its policy row, ``<metric>[<grouping>:<group>]``
(e.g. ``R_no_violation[family:cycle_hire/station_closure]``, ``S[context_type:c_cov]``), and
the cases of each group as ``n[<grouping>:<group>]``.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

from fwgym.suites import infer_suite
from fwgym.core.scoring import RCRPS_CAP, aggregate
from fwgym.evaluation.records import by_policy

__all__ = ["GROUPINGS", "GROUPING_TITLES", "breakdown_metrics", "record_groups", "context_breakdown",
           "breakdown_columns", "column_key", "parse_column_key", "with_no_violation", "forecast_columns", "breakdown_records"]

#: the groupings, in display order
GROUPINGS: tuple[str, ...] = ("family", "context_type")
#: what each grouping is called in a sentence or a table title
GROUPING_TITLES: dict[str, str] = {"family": "scenario family", "context_type": "CiK context type"}


def breakdown_metrics(suite: str, records: Sequence[Mapping] = ()) -> tuple[str, ...]:
    """The metrics of the breakdown of a suite: ``("S", "R", "loss")`` in the decision suites,
    ``("S", "R", "R_no_violation")`` in the forecast suite (``("S", "R")`` when a record lacks
    ``rcrps_no_violation``)."""
    if suite != "forecast":
        return ("S", "R", "loss")
    if any(r.get("rcrps_no_violation") is None for r in records if r.get("scored", True) is not False
           and r.get("status") != "harness_error"):
        return ("S", "R")
    return ("S", "R", "R_no_violation")


def record_groups(record: Mapping) -> dict[str, list[str]]:
    """``{grouping: [group, ...]}`` of one record (``{}`` for a record without a scenario)."""
    family = record.get("scenario")
    if not family:
        return {}
    return {"family": [f"{record['domain']}/{family}"], "context_type": list(record.get("context_types") or [])}


def column_key(metric: str, grouping: str, group: str) -> str:
    """The leaderboard column of one value: ``"<metric>[<grouping>:<group>]"``."""
    return f"{metric}[{grouping}:{group}]"


def parse_column_key(key: str) -> tuple[str, str, str] | None:
    """``(metric, grouping, group)`` of a :func:`column_key` column, ``None`` for any other column."""
    if not key.endswith("]") or "[" not in key:
        return None
    metric, _, rest = key[:-1].partition("[")
    grouping, sep, group = rest.partition(":")
    if not sep or grouping not in GROUPINGS:
        return None
    return metric, grouping, group


def with_no_violation(records: Sequence[Mapping]) -> list[dict]:
    """Copies of forecast records with ``R_no_violation = min(rcrps_no_violation, 5)`` (``None`` for a
    record without ``rcrps_no_violation``: written before it existed, or not scored)."""
    return [{**r, "R_no_violation": (min(float(r["rcrps_no_violation"]), RCRPS_CAP)
                                     if r.get("rcrps_no_violation") is not None else None)} for r in records]


def forecast_columns(records: Sequence[Mapping]) -> dict[str, float | None]:
    """The forecast suite's extra aggregates of one policy's records (the leaderboard's weights):

    * ``R_no_violation``: weighted mean of ``min(rcrps_no_violation, 5)`` (``None`` when a record lacks it);
    * ``R_fair``: weighted mean of ``min(rcrps_fair, 5)``, CiK's fair estimator, with invalid episodes
      at the cap 5 (as a failed CiK instance); ``None`` unless every valid record has ``rcrps_fair``
      (sample submissions only: the fair estimator is for independent model draws, never the score).

    Raises:
        ValueError: as :func:`fwgym.core.scoring.aggregate`.
    """
    scored = [r for r in records if r.get("scored", True) is not False and r.get("status") != "harness_error"]
    out: dict[str, float | None] = {"R_no_violation": None, "R_fair": None}
    if scored and all(r.get("rcrps_no_violation") is not None for r in scored):
        out["R_no_violation"] = aggregate(with_no_violation(scored), fields=("R_no_violation",))["R_no_violation"]
    if scored and all(r.get("rcrps_fair") is not None for r in scored if r["valid"]):
        fair = [{**r, "R_fair": min(float(r["rcrps_fair"]), RCRPS_CAP) if r["valid"] else RCRPS_CAP} for r in scored]
        out["R_fair"] = aggregate(fair, fields=("R_fair",))["R_fair"]
    return out


def context_breakdown(records: Sequence[Mapping], suite: str | None = None) -> list[dict]:
    """The breakdown of result records by scenario family and CiK context type.

    Args:
        records: result records (:class:`~fwgym.evaluation.records.Record`) of one or more policies;
            records without a scenario (the decision suite) are left out.
        suite: ``"decision"``, ``"context"`` or ``"forecast"`` (default: inferred from the records,
            :func:`fwgym.suites.infer_suite`).

    Returns:
        One dict per (policy, grouping, group), ordered by policy (first appearance), grouping
        (:data:`GROUPINGS`) and group name: ``{"policy", "grouping", "group", "n" (cases), "valid"
        (valid episodes), <metric>: weighted mean}`` for each of :func:`breakdown_metrics`; ``[]``
        when no record has a scenario.

    Raises:
        ValueError: as :func:`fwgym.core.scoring.aggregate` (unscored records, non-finite values).
    """
    suite = infer_suite(records, suite)
    metrics = breakdown_metrics(suite, records)
    out = []
    for policy, recs in by_policy(records).items():
        if "R_no_violation" in metrics:
            recs = with_no_violation(recs)
        parts: dict[tuple[str, str], list[Mapping]] = defaultdict(list)
        for r in recs:
            for grouping, groups in record_groups(r).items():
                for g in groups:
                    parts[(grouping, g)].append(r)
        for grouping in GROUPINGS:
            for g in sorted(k[1] for k in parts if k[0] == grouping):
                agg = aggregate(parts[(grouping, g)], fields=metrics)
                out.append({"policy": policy, "grouping": grouping, "group": g, "n": agg["n"], "valid": agg["valid"],
                            **{m: agg[m] for m in metrics}})
    return out


def breakdown_columns(records: Sequence[Mapping], suite: str | None = None) -> dict[str, dict[str, float | int]]:
    """:func:`context_breakdown` as leaderboard columns: ``{policy: {column_key(metric, grouping, group):
    value, column_key("n", grouping, group): cases}}`` (``{}`` without scenarios)."""
    cols: dict[str, dict[str, float | int]] = defaultdict(dict)
    rows = context_breakdown(records, suite)
    metrics = [k for k in (rows[0] if rows else {}) if k not in ("policy", "grouping", "group", "n", "valid")]
    for b in rows:
        c = cols[b["policy"]]
        for m in metrics:
            c[column_key(m, b["grouping"], b["group"])] = b[m]
        c[column_key("n", b["grouping"], b["group"])] = b["n"]
    return dict(cols)


def breakdown_records(rows: Sequence[Mapping]) -> list[dict]:
    """The breakdown columns of leaderboard rows (:func:`breakdown_columns`) back in the long form of
    :func:`context_breakdown`: ``{"policy", "grouping", "group", "n", <metric>: value, ...}`` per
    (policy, grouping, group), in the rows' order (``[]`` without breakdown columns)."""
    out: dict[tuple[str, str, str], dict] = {}
    for r in rows:
        for k, v in r.items():
            parsed = parse_column_key(k)
            if parsed is None:
                continue
            m, grouping, g = parsed
            out.setdefault((r["policy"], grouping, g), {"policy": r["policy"], "grouping": grouping, "group": g})[m] = v
    return list(out.values())
