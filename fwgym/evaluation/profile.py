"""The per-episode resource profile of a run (the FWBench paper's Table 3): wall and CPU seconds, peak
memory (PSS where the OS gives it), tokens, tool calls and model requests per episode, by policy, cohort
and lead.

The figures are those every record carries (:class:`fwgym.evaluation.records.ResourceFields`, measured by
:func:`fwgym.agents.run_episode`; tokens and requests from the agent's ``episode_stats``). They are
plain statistics over episodes (not the score's cohort weights: a cost is paid per episode): mean,
median and 95th percentile (``numpy.quantile``, linear) of wall and CPU seconds, median and maximum peak
RSS, median PSS, mean tokens, calls and requests. A figure no episode of a group has (records written
before the fields existed, PSS of short episodes, tokens of baselines) is ``None``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from fwgym.evaluation.formats import Table

__all__ = ["PROFILE_FIELDS", "profile", "profile_table"]

#: the record fields the profile reads
PROFILE_FIELDS: tuple[str, ...] = ("episode_wall_s", "cpu_s", "peak_rss_mib", "pss_mib", "prompt_tokens",
                                   "completion_tokens", "calls", "requests", "wall_s")


def _values(recs: Sequence[Mapping], field: str) -> np.ndarray:
    vals = [r.get(field) for r in recs]
    return np.array([float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)], dtype=float)


def _stats(recs: Sequence[Mapping]) -> dict:
    out: dict = {"n": len(recs)}
    for f in ("episode_wall_s", "cpu_s"):
        v = _values(recs, f)
        out[f"{f}_mean"] = float(v.mean()) if v.size else None
        out[f"{f}_median"] = float(np.median(v)) if v.size else None
        out[f"{f}_p95"] = float(np.quantile(v, 0.95)) if v.size else None
        out[f"{f}_total"] = float(v.sum()) if v.size else None
    for f in ("peak_rss_mib", "pss_mib"):
        v = _values(recs, f)
        out[f"{f}_median"] = float(np.median(v)) if v.size else None
        out[f"{f}_max"] = float(v.max()) if v.size else None
        out[f"{f}_n"] = int(v.size)
    for f in ("prompt_tokens", "completion_tokens", "calls", "requests"):
        v = _values(recs, f)
        out[f"{f}_mean"] = float(v.mean()) if v.size else None
    return out


def profile(records: Sequence[Mapping], by: Sequence[str] = ("cohort", "lead")) -> list[dict]:
    """Resource statistics per policy, overall and per value of each field of ``by``.

    Returns:
        rows ``{"policy", "group" ("all" or a cohort / lead), "n", "episode_wall_s_mean", "_median",
        "_p95", "_total", "cpu_s_..." (the same), "peak_rss_mib_median", "_max", "_n", "pss_mib_median",
        "_max", "_n", "prompt_tokens_mean", "completion_tokens_mean", "calls_mean", "requests_mean"}``, in
        the policies' first-seen order (values ``None`` where no episode has the field).

    Raises:
        ValueError: no records.
    """
    if not records:
        raise ValueError("no result records")
    policies = list(dict.fromkeys(r["policy"] for r in records))
    rows = []
    for p in policies:
        recs = [r for r in records if r["policy"] == p]
        rows.append({"policy": p, "group": "all", **_stats(recs)})
        for key in by:
            for g in sorted({r[key] for r in recs}):
                rows.append({"policy": p, "group": g, **_stats([r for r in recs if r[key] == g])})
    return rows


def _f(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _secs(v) -> str:
    if v is None:
        return "–"
    return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"


def profile_table(rows: Sequence[Mapping], groups: bool = True) -> Table:
    """The rows of :func:`profile` as a Table-3-style table: policy, group, episodes, wall (median, mean,
    p95), CPU (median, mean), peak RSS (median, max), PSS (median), tokens per episode (prompt +
    completion), calls and requests per episode (``groups``: also the cohort and lead rows)."""
    sel = [r for r in rows if groups or r["group"] == "all"]
    head = ["policy", "group", "episodes", "wall median", "wall mean", "wall p95", "CPU median", "CPU mean",
            "peak RSS MiB median", "peak RSS MiB max", "PSS MiB median", "tokens/episode (prompt + completion)",
            "calls/episode", "requests/episode"]
    short = ["policy", "group", "n", "wall", "wall mean", "wall p95", "CPU", "CPU mean", "RSS MiB", "RSS max", "PSS",
             "tokens", "calls", "requests"]
    prio = [0, 0, 6, 1, 6, 5, 2, 7, 3, 8, 8, 4, 4, 9]
    body = []
    for r in sel:
        pt, ct = r["prompt_tokens_mean"], r["completion_tokens_mean"]
        body.append((r["policy"], r["group"], str(r["n"]), _secs(r["episode_wall_s_median"]),
                     _secs(r["episode_wall_s_mean"]), _secs(r["episode_wall_s_p95"]), _secs(r["cpu_s_median"]),
                     _secs(r["cpu_s_mean"]), _f(r["peak_rss_mib_median"], ",.0f"), _f(r["peak_rss_mib_max"], ",.0f"),
                     _f(r["pss_mib_median"], ",.0f"), "–" if pt is None and ct is None else f"{pt or 0:,.0f} + {ct or 0:,.0f}",
                     _f(r["calls_mean"], ".2f"), _f(r["requests_mean"], ".2f")))
    return Table(None, tuple(head), ("l", "l") + ("r",) * (len(head) - 2), tuple(body), tuple(short), tuple(prio))
