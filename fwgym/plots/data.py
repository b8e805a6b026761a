"""The data layer of the figures: the numbers a figure draws, computed from result records without
matplotlib (frontier points with their paired-bootstrap intervals, the scored view of a case, the
suite a result source names, the display category of a policy)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from fwgym.suites import DEFAULT_SUITE, SuiteMetric, get_suite, suite_metric
from fwgym.core.scoring import BUDGET, aggregate


ORACLE_NAMES = ("perfect_demand", "catalog_oracle", "free_menu_oracle")


def results_suite(paths: Iterable[str | Path] | str | Path) -> str | None:
    """The suite named by the run manifest (``manifest.json``; ``meta.json`` of fwgym 0.1.0 results) of
    result directories (or of ``results.jsonl`` files' folders); ``None`` when no source names one
    (results written without a suite are the decision suite's).

    Raises:
        ValueError: sources of different suites (their numbers are not comparable), or a malformed manifest.
    """
    from fwgym.evaluation.manifest import read_manifest

    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: dict[str, str] = {}
    for p in map(Path, paths):
        if p.is_file() and p.name != "results.jsonl":
            continue
        folder = p if p.is_dir() else p.parent
        manifest = read_manifest(folder)
        if manifest is not None:
            s = (manifest.get("settings") or {}).get("suite")
        else:
            try:
                s = json.loads((folder / "meta.json").read_text()).get("suite")
            except (OSError, ValueError, AttributeError):
                s = None
        if s is not None:
            found[str(p)] = str(s)
    suites = sorted(set(found.values()))
    if len(suites) > 1:
        raise ValueError(f"results of different suites cannot be merged: {found}")
    return suites[0] if suites else None


# ---------------------------------------------------------------------------------------------
# figure plumbing


def policy_kind(name: str, credits: float = 0.0) -> str:
    """``"oracle"``, ``"selector"``, ``"priced"`` (mean credits > 0) or ``"fixed"`` (display category)."""
    if name in ORACLE_NAMES or "oracle" in name:
        return "oracle"
    if "selector" in name:
        return "selector"
    return "priced" if credits > 0 else "fixed"


def panel_sets(records: Sequence[dict], panels: str) -> list[tuple[str, list[dict], bool]]:
    """``[(label, records, exact), ...]``: exact = one domain (equal-S lines exact)."""
    from fwgym.domains import domain_names

    present = {r["domain"] for r in records}
    domains = [d for d in domain_names() if d in present] + sorted(present - set(domain_names()))
    if panels not in ("auto", "all", "domains", "both"):
        raise ValueError(f"panels must be 'auto', 'all', 'domains' or 'both', got {panels!r}")
    one = [("all cases" if len(domains) > 1 else domains[0], list(records), len(domains) == 1)]
    per = [(d, [r for r in records if r["domain"] == d], True) for d in domains]
    if len(domains) == 1 or panels == "all":
        return one
    return per if panels == "domains" else one + per


def intervals(recs: Sequence[dict], reference: str | None, field: str, n_boot: int, seed: int) -> dict[str, dict]:
    """``{policy: {field: (lo, hi), "credits": (lo, hi)}}``: the policy's aggregate plus the paired
    bootstrap interval of its difference to ``reference`` (:func:`fwgym.evaluation.paired_bootstrap`, every
    policy on the same resamples). A metric whose every value is >= 0 (the decision loss, RCRPS, credits)
    has its interval clipped at 0: the shifted percentile interval of a difference can reach below 0 where
    the metric cannot."""
    from fwgym.evaluation import ClusterBootstrap, by_policy, paired_bootstrap

    groups = by_policy(recs)
    if reference is None or reference not in groups:
        return {}
    boot = ClusterBootstrap(groups[reference], n_boot, seed)
    floor = {m: 0.0 if all(float(r[m]) >= 0 for r in recs) else -math.inf for m in (field, "credits")}
    out = {}
    for p, prs in groups.items():
        agg = aggregate(prs, fields=(field, "credits"))
        if p == reference:
            out[p] = {field: (agg[field], agg[field]), "credits": (agg["credits"], agg["credits"])}
            continue
        bs = paired_bootstrap(recs, reference, p, n_boot=n_boot, seed=seed, metrics=(field, "credits"), bootstrap=boot)
        out[p] = {m: (max(agg[m] - bs[m]["diff"] + bs[m]["lo"], floor[m]), agg[m] - bs[m]["diff"] + bs[m]["hi"])
                  for m in (field, "credits")}
    return out


def frontier_points(records: Sequence[dict], suite: str | None = None, reference: str | None = "auto",
                    n_boot: int | None = None, seed: int | None = None, budget: float = BUDGET,
                    credit_weight: float | None = None) -> list[dict]:
    """The numbers behind a frontier panel: one dict per policy with its aggregate ``S, R, loss,
    floor, credits, calls, n, valid``, ``y`` (the suite's frontier metric, :attr:`SuiteMetric.y_field`)
    and, with a reference, ``y_ci`` and ``credits_ci``: ``(lo, hi)`` = the policy's aggregate minus the
    paired bootstrap difference plus its 95% interval ends (:func:`fwgym.evaluation.paired_bootstrap`,
    ``policy - reference``; the reference's own interval is its point).

    Args:
        records: one suite's records of several policies on the same cases.
        suite, reference, n_boot, seed, budget, credit_weight: as :func:`plot_frontier`.

    Raises:
        ValueError: as :func:`fwgym.evaluation.check_result_set`; an unknown reference.
    """
    from fwgym.evaluation import BOOT_SEED, N_BOOT, check_result_set, reference_policy

    check_result_set(records)
    metric = suite_metric(suite or DEFAULT_SUITE, credit_weight)
    pts = panel_points(records, metric)
    names = sorted(q["policy"] for q in pts)
    reference = reference_policy(names, reference)
    ci = intervals(records, reference, metric.y_field, N_BOOT if n_boot is None else n_boot,
                    BOOT_SEED if seed is None else seed)
    for q in pts:
        got = ci.get(q["policy"])
        q["y_ci"] = got[metric.y_field] if got else None
        q["credits_ci"] = got["credits"] if got else None
    return pts


def panel_points(recs: Sequence[dict], metric: SuiteMetric) -> list[dict]:
    from fwgym.evaluation import by_policy

    out = []
    for p, prs in by_policy(recs).items():
        a = aggregate(prs)
        out.append({"policy": p, **a, "y": a[metric.y_field]})
    return out


@dataclass
class CaseData:
    """Hindsight data of one case as its suite scored it (for figures made after the run).

    Attributes:
        case: the :class:`~fwgym.core.cases.Case`. suite: the suite.
        target: float64 (24,) the SCORED target in raw units (scenario-transformed in the context and
            forecast suites). raw_target: float64 (24,) the series' realised values.
        perfect_levels: the perfect-demand plan's 8 normalised levels on ``target`` (decision suites),
            else ``None``.
        roi: bool (24,) Region of Interest of the scenario, or ``None``. scenario: its family or ``None``.
        lower, upper: float (24,) scenario bounds (NaN where unbounded) or ``None``.
        context: the context text the agent saw.
    """

    case: Any
    suite: str
    target: np.ndarray
    raw_target: np.ndarray
    perfect_levels: list[float] | None
    roi: np.ndarray | None
    scenario: str | None
    lower: np.ndarray | None
    upper: np.ndarray | None
    context: str

    @property
    def changed(self) -> bool:
        """The scenario changed the target (the raw series differs from what was scored)."""
        return not np.array_equal(self.target, self.raw_target)


_ENVS: dict = {}


def suite_env(domain: str, split: str, suite: str = "decision"):
    """The :class:`~fwgym.envs.fwbench.FWBenchEnv` of a suite (its :attr:`fwgym.suites.Suite.env_kwargs`),
    one per (domain, split, suite) in this process, for re-reading cases after a run.

    Raises:
        ValueError: an unknown suite, domain or split.
    """
    from fwgym.envs.fwbench import FWBenchEnv
    spec = get_suite(suite)
    key = (domain, split, suite)
    if key not in _ENVS:
        _ENVS[key] = FWBenchEnv(domain=domain, split=split, **spec.env_kwargs)
    return _ENVS[key]


def case_data(record: dict, suite: str = "decision") -> CaseData:
    """The scored view of a record's case: reset the suite's env on the case (cached per domain, split
    and suite) and read its hindsight (target, perfect plan, scenario).

    Args:
        record: a result record (``case_id``, ``domain``, ``split``).
        suite: the suite the record was scored in (:data:`fwgym.suites.SUITES`).

    Raises:
        ValueError: an unknown suite or case.
    """
    env = suite_env(record["domain"], record["split"], suite)
    env.reset(options={"case_id": record["case_id"]})
    h = env.hindsight()
    sc = env.episode.scenario
    case = env.episode.case
    return CaseData(case=case, suite=suite, target=np.asarray(h["target"], dtype=np.float64),
                    raw_target=np.asarray(case.target(), dtype=np.float64),
                    perfect_levels=[float(x) for x in h["perfect_plan"].levels] if suite != "forecast" else None,
                    roi=h.get("roi"), scenario=h.get("scenario"),
                    lower=None if sc is None or sc.lower is None else np.asarray(sc.lower, dtype=np.float64),
                    upper=None if sc is None or sc.upper is None else np.asarray(sc.upper, dtype=np.float64),
                    context=env.context)
