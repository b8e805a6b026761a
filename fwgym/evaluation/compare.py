"""Paired comparison of two runs (the FWBench paper's ablations, Table 4) and their stability.

Two runs that differ in a setting (the forecast pool, the prompt's objective, the model, a server-side
thinking switch, a seed) are compared on the cases both played: for each policy of A paired with a
policy of B (by name, or the one policy of each run, or named pairs), the difference ``B - A`` of the
aggregate S, R, loss, credits and valid share, with the paired series-cluster bootstrap interval of
:func:`fwgym.evaluation.bootstrap.paired_bootstrap` (the leaderboard's: 10,000 resamples of the series,
seed 1701, re-aggregated with the cohort weights), on every common case and, optionally, on the cases
valid in both (``valid_in_both``), each also by cohort and by lead.

Runs of different suites, splits, sigma, scenario seeds or scorer versions are refused (their cases,
targets or scores differ); every other setting that differs is listed (:func:`differing_settings`).

Stability (:func:`stability`): when both runs hold several policies (e.g. two repeats of the same job),
the rankings on the common cases are compared (Kendall's tau-b, the same first policy) and, for every
policy, whether its paired interval against the reference policy changes sign between the runs
(below 0, containing 0, above 0).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from fwgym.core.scoring import aggregate
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.formats import Table
from fwgym.evaluation.manifest import canonical_json

__all__ = ["REFUSED_SETTINGS", "LISTED_SETTINGS", "METRICS", "check_comparable", "differing_settings",
           "policy_pairs", "compare_pair", "compare", "stability", "comparison_table", "breakdown_table",
           "stability_table", "verdict", "pair_lines"]

#: settings two compared runs must share: the cases (split), their targets (suite, scenario seed) and
#: the scores (sigma, scorer version)
REFUSED_SETTINGS: tuple[str, ...] = ("suite", "split", "sigma", "scenario_seed", "scorer_version")
#: settings listed when they differ (the ablation's variable and anything else that changed)
LISTED_SETTINGS: tuple[str, ...] = ("forecast_pool", "registered_prices", "budget", "credit_weight", "max_calls",
                                    "labels", "objective", "domains", "lead", "limit", "n_cases", "fwgym_version",
                                    "env_kwargs", "forecast_store", "plugin_code")
#: the compared record fields (``valid_share``: 1 for a valid episode, else 0)
METRICS: tuple[str, ...] = ("S", "R", "loss", "credits", "valid_share")
_DIGITS = {"S": 4, "R": 4, "loss": 5, "credits": 1, "valid_share": 3}


def check_comparable(a: Mapping, b: Mapping, where: tuple[str, str] = ("A", "B")) -> None:
    """Refuse two runs' settings that differ in a :data:`REFUSED_SETTINGS` entry.

    Raises:
        ValueError: names the setting and both values.
    """
    for k in REFUSED_SETTINGS:
        if canonical_json(a.get(k)) != canonical_json(b.get(k)):
            raise ValueError(f"runs differ in {k}: {where[0]} has {a.get(k)!r}, {where[1]} has {b.get(k)!r}; a paired "
                             f"comparison needs the same cases, targets and scores (suite, split, sigma, scenario seed, "
                             "scorer version)")


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _short(v: Any, limit: int = 200) -> str:
    text = canonical_json(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def differing_settings(a: Mapping, b: Mapping, agents: Sequence[tuple[str, str]] = ()) -> list[str]:
    """``["name: A -> B", ...]`` for the :data:`LISTED_SETTINGS` that differ between two runs' settings
    and, for each pair ``(policy in A, policy in B)`` of ``agents``, every differing leaf of the two
    agents' settings (``agent.extra_body.chat_template_kwargs.enable_thinking: true -> false``)."""
    out = []
    for k in LISTED_SETTINGS:
        x, y = a.get(k), b.get(k)
        if canonical_json(x) != canonical_json(y):
            out.append(f"{k}: {_short(x)} -> {_short(y)}")
    for pa, pb in agents:
        da = _flat(((a.get("agents") or {}).get(pa)), "")
        db = _flat(((b.get("agents") or {}).get(pb)), "")
        if not isinstance((a.get("agents") or {}).get(pa), Mapping) and not isinstance(
                (b.get("agents") or {}).get(pb), Mapping):
            continue  # named baselines: their description is their name
        for key in sorted(set(da) | set(db), key=str):
            if canonical_json(da.get(key)) != canonical_json(db.get(key)):
                name = pa if pa == pb else f"{pa}/{pb}"
                out.append(f"agent {name}{'.' + key if key else ''}: {_short(da.get(key))} -> {_short(db.get(key))}")
    return out


def policy_pairs(a_policies: Sequence[str], b_policies: Sequence[str],
                 pairs: Iterable[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The compared ``(policy in A, policy in B)`` pairs: ``pairs`` when given (each checked), else every
    policy both runs have (in A's order), else, when each run has exactly one policy, that one pair.

    Raises:
        ValueError: a named policy missing from its run, or nothing to pair.
    """
    if pairs:
        out = [(str(x), str(y)) for x, y in pairs]
        for x, y in out:
            if x not in a_policies:
                raise ValueError(f"--pair: run A has no policy {x!r} (its policies: {', '.join(a_policies)})")
            if y not in b_policies:
                raise ValueError(f"--pair: run B has no policy {y!r} (its policies: {', '.join(b_policies)})")
        return out
    common = [p for p in a_policies if p in b_policies]
    if common:
        return [(p, p) for p in common]
    if len(a_policies) == 1 and len(b_policies) == 1:
        return [(a_policies[0], b_policies[0])]
    raise ValueError(f"the runs have no policy in common (A: {', '.join(a_policies)}; B: {', '.join(b_policies)}); "
                     "name the pairs with --pair POLICY_A POLICY_B")


def _paired_records(a: Sequence[Mapping], b: Sequence[Mapping], cases: Sequence[str]) -> list[dict]:
    """Records of A (policy ``"A"``) and B (``"B"``) on ``cases``, with ``valid_share``."""
    by_a, by_b = {r["case_id"]: r for r in a}, {r["case_id"]: r for r in b}
    out = []
    for label, by in (("A", by_a), ("B", by_b)):
        for c in cases:
            r = by[c]
            out.append({**r, "policy": label, "valid_share": 1.0 if r["valid"] else 0.0})
    return out


def _contrast(recs: list[dict], n_boot: int, seed: int) -> dict:
    """``{"n", "valid_a", "valid_b", "<m>_a", "<m>_b", "d<m>", "d<m>_lo", "d<m>_hi"}`` of paired records."""
    a = [r for r in recs if r["policy"] == "A"]
    b = [r for r in recs if r["policy"] == "B"]
    boot = ClusterBootstrap(a, n_boot, seed)
    bs = paired_bootstrap(recs, "A", "B", n_boot, seed, metrics=METRICS, bootstrap=boot)
    agg_a, agg_b = aggregate(a, fields=METRICS), aggregate(b, fields=METRICS)
    out: dict = {"n": len(a), "valid_a": agg_a["valid"], "valid_b": agg_b["valid"], "clusters": bs["clusters"]}
    for m in METRICS:
        out[f"{m}_a"], out[f"{m}_b"] = agg_a[m], agg_b[m]
        out[f"d{m}"], out[f"d{m}_lo"], out[f"d{m}_hi"] = bs[m]["diff"], bs[m]["lo"], bs[m]["hi"]
    return out


def compare_pair(a: Sequence[Mapping], b: Sequence[Mapping], *, common_cases: bool = False,
                 valid_in_both: bool = False, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                 by: Sequence[str] = ("cohort", "lead")) -> list[dict]:
    """The paired differences ``B - A`` of one policy's records in two runs.

    Args:
        a, b: the records of the policy in run A and in run B (one per case each).
        common_cases: compare on the cases both have (default: the case sets must be equal).
        valid_in_both: also compare on the common cases where both episodes are valid.
        n_boot, seed: the bootstrap's draws and seed (protocol: 10,000, 1701).
        by: record fields to break the comparison down by (each value its own rows).

    Returns:
        rows ``{"subset": "common cases" | "valid in both", "group": "all" | <cohort> | <lead>, "n",
        "valid_a", "valid_b", "S_a", "S_b", "dS", "dS_lo", "dS_hi", ...}`` for every metric of
        :data:`METRICS` (``valid_share`` = the weighted share of valid episodes); the intervals are
        percentile intervals of the paired series-cluster bootstrap (95%).

    Raises:
        ValueError: different case sets without ``common_cases``; no common case; no case valid in both
            (with ``valid_in_both``); a case twice in a run.
    """
    ids_a = [r["case_id"] for r in a]
    ids_b = {r["case_id"] for r in b}
    if len(set(ids_a)) != len(ids_a) or len(ids_b) != len(b):
        raise ValueError("a run holds two records of one policy on one case")
    common = [c for c in ids_a if c in ids_b]
    if not common_cases and (len(common) != len(ids_a) or len(common) != len(ids_b)):
        raise ValueError(f"the runs cover different cases (A {len(ids_a)}, B {len(ids_b)}, {len(common)} in common); "
                         "compare them on their common cases with --common-cases")
    if not common:
        raise ValueError("the runs have no case in common")
    subsets = [("common cases", common)]
    if valid_in_both:
        va = {r["case_id"] for r in a if r["valid"]}
        vb = {r["case_id"] for r in b if r["valid"]}
        both = [c for c in common if c in va and c in vb]
        if not both:
            raise ValueError("no common case is valid in both runs (--valid-in-both)")
        subsets.append(("valid in both", both))
    rows = []
    for subset, cases in subsets:
        recs = _paired_records(a, b, cases)
        rows.append({"subset": subset, "group": "all", **_contrast(recs, n_boot, seed)})
        for key in by:
            for g in sorted({r[key] for r in recs}):
                part = [r for r in recs if r[key] == g]
                rows.append({"subset": subset, "group": g, **_contrast(part, n_boot, seed)})
    return rows


def compare(records_a: Sequence[Mapping], records_b: Sequence[Mapping], pairs: Sequence[tuple[str, str]], **kw) -> list[dict]:
    """:func:`compare_pair` for every pair ``(policy in A, policy in B)``: rows with ``policy_a`` and
    ``policy_b`` first (keyword arguments as :func:`compare_pair`)."""
    out = []
    for pa, pb in pairs:
        a = [r for r in records_a if r["policy"] == pa]
        b = [r for r in records_b if r["policy"] == pb]
        out += [{"policy_a": pa, "policy_b": pb, **row} for row in compare_pair(a, b, **kw)]
    return out


def verdict(lo: float, hi: float) -> str:
    """``"-"`` (the interval lies below 0), ``"+"`` (above 0) or ``"0"`` (it contains 0)."""
    return "-" if hi < 0 else "+" if lo > 0 else "0"


def stability(records_a: Sequence[Mapping], records_b: Sequence[Mapping], reference: str | None,
              n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> dict:
    """Run-to-run stability of two runs of the same policies (e.g. repeats), on their common cases.

    Returns:
        ``{"policies", "n_cases", "rank_a", "rank_b" ({policy: rank, 1 = best by S}), "kendall_tau_b",
        "same_first", "reference", "rows"}`` where ``rows`` hold, per policy, ``S_a``, ``S_b``, ``rank_a``,
        ``rank_b`` and, against ``reference`` (``None``: none), ``dS_a``, ``dS_lo_a``, ``dS_hi_a`` (and
        ``_b``), ``verdict_a``, ``verdict_b`` (:func:`verdict`) and ``sign_changed``.

    Raises:
        ValueError: fewer than two common policies, no common case, or a reference not among them.
    """
    from scipy.stats import kendalltau

    from fwgym.evaluation.leaderboard import leaderboard

    pa = list(dict.fromkeys(r["policy"] for r in records_a))
    pb = set(r["policy"] for r in records_b)
    policies = [p for p in pa if p in pb]
    if len(policies) < 2:
        raise ValueError("run-to-run stability needs at least two policies in both runs")
    if reference is not None and reference not in policies:
        raise ValueError(f"the reference policy {reference!r} is not in both runs")
    cases_a = {p: {r["case_id"] for r in records_a if r["policy"] == p} for p in policies}
    cases_b = {p: {r["case_id"] for r in records_b if r["policy"] == p} for p in policies}
    common = set.intersection(*cases_a.values(), *cases_b.values())
    if not common:
        raise ValueError("the runs have no case that every common policy played in both")
    sel_a = [r for r in records_a if r["policy"] in policies and r["case_id"] in common]
    sel_b = [r for r in records_b if r["policy"] in policies and r["case_id"] in common]
    rows_a = {r["policy"]: r for r in leaderboard(sel_a, reference=reference, n_boot=n_boot, seed=seed)}
    rows_b = {r["policy"]: r for r in leaderboard(sel_b, reference=reference, n_boot=n_boot, seed=seed)}

    def ranks(rows):
        return {p: 1 + sum(q["S"] < rows[p]["S"] for q in rows.values()) for p in rows}

    rank_a, rank_b = ranks(rows_a), ranks(rows_b)
    order = sorted(policies, key=lambda p: (rows_a[p]["S"], p))
    tau = kendalltau([rows_a[p]["S"] for p in order], [rows_b[p]["S"] for p in order]).statistic
    out_rows = []
    for p in order:
        row = {"policy": p, "S_a": rows_a[p]["S"], "S_b": rows_b[p]["S"], "rank_a": rank_a[p], "rank_b": rank_b[p]}
        if reference is not None and p != reference:
            for side, r in (("a", rows_a[p]), ("b", rows_b[p])):
                row[f"dS_{side}"], row[f"dS_lo_{side}"], row[f"dS_hi_{side}"] = r["dS"], r["dS_lo"], r["dS_hi"]
                row[f"verdict_{side}"] = verdict(r["dS_lo"], r["dS_hi"])
            row["sign_changed"] = row["verdict_a"] != row["verdict_b"]
        out_rows.append(row)
    first_a = min(policies, key=lambda p: (rows_a[p]["S"], p))
    first_b = min(policies, key=lambda p: (rows_b[p]["S"], p))
    return {"policies": order, "n_cases": len(common), "rank_a": rank_a, "rank_b": rank_b,
            "kendall_tau_b": None if tau is None or not math.isfinite(tau) else float(tau),
            "same_first": first_a == first_b, "first_a": first_a, "first_b": first_b, "reference": reference,
            "rows": out_rows}


#: the subsets' names in tables
_SHORT_SUBSET = {"common cases": "common", "valid in both": "valid in both"}


def pair_lines(pairs: Sequence[Sequence[str]]) -> list[str]:
    """``["catalog_oracle (A) -> catalog_oracle_no_tsfm (B)", ...]`` for the pairs of two different names
    (a table names a pair by its policy in A)."""
    return [f"{a} (A) -> {b} (B)" for a, b in pairs if a != b]


def _ci(row: Mapping, m: str) -> str:
    d = _DIGITS[m]
    return f"{row[f'd{m}']:+.{d}f} [{row[f'd{m}_lo']:+.{d}f}, {row[f'd{m}_hi']:+.{d}f}]"


def _pct(a: float, b: float) -> str:
    return "" if a == 0 else f" ({(b - a) / abs(a) * 100:+.1f}%)"


def comparison_table(rows: Sequence[Mapping], loss_name: str = "loss") -> Table:
    """The Table-4-style main table of :func:`compare` rows (their ``group == "all"`` rows): per pair (named
    by its policy in A; :func:`pair_lines` lists pairs of two names) and subset the cases, valid A -> B,
    S A -> B, and the paired differences ``B - A`` with their 95% intervals (S, R, loss, credits, valid
    share), loss and credits also as relative changes."""
    main = [r for r in rows if r["group"] == "all"]
    head = ["policy", "subset", "cases", "valid A→B", "S A→B", "ΔS [95% CI]", "ΔR [95% CI]",
            f"Δ{loss_name} [95% CI]", "Δcredits [95% CI]", "Δvalid share [95% CI]", f"{loss_name} A→B", "credits A→B"]
    prio = [0, 0, 3, 4, 2, 1, 8, 5, 6, 9, 7, 7]
    body = []
    for r in main:
        body.append((r["policy_a"], r["subset"], str(r["n"]), f"{r['valid_a']} → {r['valid_b']}",
                     f"{r['S_a']:.4f} → {r['S_b']:.4f}", _ci(r, "S"), _ci(r, "R"), _ci(r, "loss"), _ci(r, "credits"),
                     _ci(r, "valid_share"), f"{r['loss_a']:.5f} → {r['loss_b']:.5f}{_pct(r['loss_a'], r['loss_b'])}",
                     f"{r['credits_a']:,.1f} → {r['credits_b']:,.1f}{_pct(r['credits_a'], r['credits_b'])}"))
    short = ["policy", "subset", "n", "valid", "S A→B", "ΔS [95% CI]", "ΔR [95% CI]", f"Δ{loss_name} [95% CI]",
             "Δcredits [95% CI]", "Δvalid [95% CI]", f"{loss_name} A→B", "credits A→B"]
    body = [(b[0], _SHORT_SUBSET.get(b[1], b[1])) + b[2:] for b in body] if body else body
    return Table(None, tuple(head), ("l", "l") + ("r",) * (len(head) - 2), tuple(body), tuple(short), tuple(prio))


def breakdown_table(rows: Sequence[Mapping], loss_name: str = "loss") -> Table:
    """The by-cohort and by-lead rows of :func:`compare` as a table: pair, subset, group, cases and the
    paired differences of S, loss and credits with their 95% intervals."""
    part = [r for r in rows if r["group"] != "all"]
    head = ["policy", "subset", "group", "cases", "ΔS [95% CI]", f"Δ{loss_name} [95% CI]", "Δcredits [95% CI]"]
    body = tuple((r["policy_a"], _SHORT_SUBSET.get(r["subset"], r["subset"]), r["group"], str(r["n"]), _ci(r, "S"),
                  _ci(r, "loss"), _ci(r, "credits")) for r in part)
    return Table("by cohort and lead (B - A):", tuple(head), ("l", "l", "l") + ("r",) * 4, body, None,
                 (0, 0, 0, 3, 0, 1, 2))


def stability_table(st: Mapping) -> Table:
    """The rows of :func:`stability` as a table: rank and S in each run, and the paired interval against
    the reference in each run with whether its sign changed."""
    ref = st.get("reference")
    head = ["policy", "rank A", "rank B", "S A", "S B"]
    if ref:
        head += [f"ΔS vs {ref} A [95% CI]", f"ΔS vs {ref} B [95% CI]", "sign changed"]
    body = []
    for r in st["rows"]:
        cells = [r["policy"], str(r["rank_a"]), str(r["rank_b"]), f"{r['S_a']:.4f}", f"{r['S_b']:.4f}"]
        if ref:
            if "dS_a" in r:
                cells += [f"{r['dS_a']:+.4f} [{r['dS_lo_a']:+.4f}, {r['dS_hi_a']:+.4f}]",
                          f"{r['dS_b']:+.4f} [{r['dS_lo_b']:+.4f}, {r['dS_hi_b']:+.4f}]",
                          "YES" if r["sign_changed"] else "no"]
            else:
                cells += ["(reference)", "(reference)", ""]
        body.append(tuple(cells))
    short = ["policy", "#A", "#B", "S A", "S B"] + (["ΔS A [95% CI]", "ΔS B [95% CI]", "changed"] if ref else [])
    prio = [0, 0, 0, 3, 3] + ([1, 1, 0] if ref else [])
    return Table("run-to-run stability:", tuple(head), ("l",) + ("r",) * (len(head) - 1), tuple(body), tuple(short),
                 tuple(prio))
