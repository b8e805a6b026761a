"""Build the static HTML report (see :mod:`fwgym.report`)."""
from __future__ import annotations

import contextlib
import shutil
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from fwgym.core.cases import CHART_HISTORY_HOURS
from fwgym.suites import suite_metric
from fwgym.report import charts
from fwgym.report.episodes import WORKER as _WORKER
from fwgym.report.episodes import Cases
from fwgym.report.episodes import episode_page as _episode_page
from fwgym.report.templating import environment, is_report, slug
from fwgym.traces import load_traces

if TYPE_CHECKING:
    from fwgym.evaluation.header import Header

#: default number of episode pages per policy (a third worst, a third best, the rest random)
DEFAULT_EPISODE_PAGES = 6
ASSETS = ("report.css", "report.js")


@dataclass
class Report:
    """What :func:`build_report` wrote.

    Attributes:
        out_dir: the site's folder. index: ``index.html``.
        policy_pages: ``{policy: path}``. episode_pages: ``{(policy, case_id): path}``.
        case_pages: ``{case_id: path}`` (every policy on one case). cases_index: ``cases/index.html``.
        suite: the results' suite (``decision``, ``context`` or ``forecast``).
        reference: the policy the intervals compare against (``None``: no intervals).
        warnings: things the reader of the build log should know (unmatched traces, failed replays).
        seconds: build time.
    """

    out_dir: Path
    index: Path
    policy_pages: dict[str, Path] = field(default_factory=dict)
    episode_pages: dict[tuple[str, str], Path] = field(default_factory=dict)
    case_pages: dict[str, Path] = field(default_factory=dict)
    cases_index: Path | None = None
    suite: str = "decision"
    reference: str | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def pages(self) -> list[Path]:
        """Every HTML page written."""
        return [self.index, *self.policy_pages.values(), *self.episode_pages.values(), *self.case_pages.values(),
                *([self.cases_index] if self.cases_index else [])]


# ---------------------------------------------------------------------------------------------
# helpers


def cohort_weights_text(records: Sequence[Mapping]) -> str:
    """The aggregation's cohort shares of ``records`` in words (FWBench protocol §5.3: each domain present an
    equal share, each cohort an equal share of its domain): ``"each electricity cohort 1/6, cycle hire 1/2"``."""
    from fractions import Fraction

    cohorts: dict[str, set[str]] = {}
    for r in records:
        cohorts.setdefault(r["domain"], set()).add(r["cohort"])
    parts = []
    for d, cs in cohorts.items():
        w = Fraction(1, len(cohorts) * len(cs))
        name = d.replace("_", " ")
        parts.append(f"each {name} cohort {w}" if len(cs) > 1 else f"{name} {w}")
    return ", ".join(parts)


def _read_sources(paths: Sequence[str | Path], allow_unverified: bool = False) -> tuple[list[dict], list[dict], list[str],
                                                                                     Header | None]:
    """Records (read, re-scored, checked and merged by :func:`fwgym.evaluation.load_results`: runs of one
    suite, split, sigma, budget and version only) and the sources' metadata (``path``, ``suite``,
    ``credit_weight``, ``created``, ``version``, ``split``, ``verified``), the notes of the merge (``NOT
    HASH-CHECKED`` first) and the leaderboard header with its marks (:func:`fwgym.evaluation.header.make_header`;
    ``None``: no records).

    Raises:
        ValueError: sources of different suites or settings, edited records, as :func:`fwgym.evaluation.load_results`.
    """
    from fwgym.evaluation import load_results

    from fwgym.evaluation.header import make_header, result_set_marks

    rs = load_results(paths, allow_partial=True, allow_unverified=allow_unverified)
    suite = rs.settings["suite"]
    credit_weight = rs.settings.get("credit_weight")
    metas = [{"path": str(src.path.parent if src.path.name == "results.jsonl" else src.path), "suite": suite,
              "credit_weight": credit_weight, "created": (src.manifest or {}).get("created"), "version": src.fwgym_version,
              "split": src.settings.get("split"), "verified": src.verified} for src in rs.sources]
    header = make_header(rs.records, suite=suite, formula="", marks=result_set_marks(rs),
                         row_marks=rs.marks) if rs.records else None
    return rs.records, metas, list(rs.notes), header


def select_episodes(recs: Sequence[dict], n: int | None, seed_text: str = "",
                    prefer: Callable[[dict], bool] | None = None) -> list[tuple[dict, str]]:
    """Episodes that get a page: ``n // 3`` worst and ``n // 3`` best by S, the rest drawn at random
    (seeded by ``seed_text``); every episode when ``n`` is ``None`` or at least their number.

    Args:
        recs: one policy's records. n: pages wanted (``None``: all).
        prefer: when given and true for some records, only those are candidates when ``n`` is set (e.g.
            episodes with a trace).

    Returns:
        ``[(record, why), ...]`` with ``why`` in ``"worst"``, ``"best"``, ``"random"``, ``"all"``, in
        increasing S.
    """
    pool = list(recs)
    if n is not None and prefer is not None and any(prefer(r) for r in pool):
        pool = [r for r in pool if prefer(r)]
    if n is None or n >= len(pool):
        return [(r, "all") for r in sorted(pool, key=lambda r: (r["S"], r["case_id"]))]
    order = sorted(pool, key=lambda r: (r["S"], r["case_id"]))
    k = n // 3
    picks: dict[str, str] = {}
    for r in order[len(order) - k:] if k else []:
        picks[r["case_id"]] = "worst"
    for r in order[:k]:
        picks.setdefault(r["case_id"], "best")
    rest = [r for r in order if r["case_id"] not in picks]
    rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
    for i in sorted(rng.choice(len(rest), size=min(n - len(picks), len(rest)), replace=False)):
        picks[rest[int(i)]["case_id"]] = "random"
    return [(r, picks[r["case_id"]]) for r in order if r["case_id"] in picks]


def _tabs(records: Sequence[dict], reference: str | None, n_boot: int, seed: int) -> list[dict]:
    from fwgym.evaluation import leaderboard

    tabs = [("all", "All cases", list(records))]
    for key, title in (("cohort", "cohort"), ("lead", "lead")):
        for g in sorted({r[key] for r in records}):
            tabs.append((f"{key}-{g}", g, [r for r in records if r[key] == g]))
    out = []
    for tid, title, recs in tabs:
        rows = leaderboard(recs, reference=reference, n_boot=n_boot, seed=seed)
        out.append({"id": slug(tid), "title": title, "rows": rows, "cases": len({r["case_id"] for r in recs}),
                    "records": recs})
    return out


def _context_breakdown(rows: Sequence[dict], suite: str) -> list[dict]:
    """The index page's breakdown by scenario family and context type, in long form (one row per policy
    and group: :func:`fwgym.evaluation.breakdown.breakdown_records` of the all-cases leaderboard rows):
    ``[{"grouping", "title", "metrics": [(key, label, digits)], "rows": [...]}]``, ``[]`` without scenarios."""
    from fwgym.evaluation.breakdown import GROUPING_TITLES, breakdown_records

    long = breakdown_records(rows)
    if suite == "forecast":
        for b in long:
            if b.get("R_no_violation") is not None:
                b["violation"] = b["R"] - b["R_no_violation"]
        metrics = [("R", "RCRPS", 4), ("R_no_violation", "RCRPS w/o violation", 4), ("violation", "violation term", 4)]
        if any(abs(r["S"] - r["R"]) > 1e-12 for r in rows):
            metrics.insert(0, ("S", "S", 4))
        if not any(b.get("R_no_violation") is not None for b in long):
            metrics = [m for m in metrics if m[0] in ("S", "R")]
    else:
        metrics = [("S", "S", 4), ("R", "R", 4), ("loss", "decision loss", 5)]
    return [{"grouping": g, "title": GROUPING_TITLES[g], "metrics": metrics,
             "rows": [b for b in long if b["grouping"] == g]} for g in GROUPING_TITLES if any(b["grouping"] == g for b in long)]


def _done(job: dict, result: tuple[str, str], report: Report, notes: Counter, bar) -> None:
    path, note = result
    report.episode_pages[(job["policy"], job["rec"]["case_id"])] = Path(path)
    if note.startswith("replay failed"):
        notes[(job["policy"], ":".join(note.split(":")[:2]))] += 1
    elif note.startswith("a replay"):
        notes[(job["policy"], "replay did not reproduce the recorded score")] += 1
    if bar is not None:
        bar.update(1)


# ---------------------------------------------------------------------------------------------
# the build


def build_report(results_paths: Iterable[str | Path] | str | Path, out_dir: str | Path,  # noqa: C901 - one branch per optional page part (traces, replay, per-suite columns)
                 traces: Iterable[str | Path] | str | Path | None = None,
                 max_episode_pages: int | None = DEFAULT_EPISODE_PAGES, reference: str | None = "auto",
                 n_boot: int | None = None, seed: int | None = None, replay: bool = True, history_hours: int = CHART_HISTORY_HOURS,
                 title: str | None = None, progress: bool = False, workers: int = 1,
                 allow_unverified: bool = False, phase: Callable[[str], Any] | None = None) -> Report:
    """Write a self-contained static HTML report of result files into ``out_dir``.

    The site needs no server and makes no network request: pages link a local stylesheet and script
    (``assets/``) and carry their figures as inline SVG (matplotlib). ``index.html`` holds the
    leaderboard (sortable; one tab for all cases, each cohort and each lead; paired-bootstrap 95%
    intervals against ``reference``), the loss-credits frontier and the tool-use mix, and links to one
    page per policy (aggregates, breakdowns, the S distribution and every episode in a sortable,
    filterable table), which link to the episode pages: case metadata, a chart of the history tail,
    purchased forecast bands, the submitted capacities and the realised demand, the tool calls in
    order with their credits, why an invalid episode is invalid and, for LLM agents, the transcript.

    Args:
        results_paths: ``results.jsonl`` files or result directories (merged as by
            :func:`fwgym.evaluation.load_results`, which re-scores every record and refuses edited records and
            runs of different settings; a run directory's manifest gives its suite).
        out_dir: output folder (created; an earlier report there is replaced: its policy and episode
            pages are removed first).
        traces: LLM trace JSONL file(s) (schema in :mod:`fwgym.traces`); matched to results by
            (policy, case_id).
        max_episode_pages: episode pages per policy (a third worst, a third best by S, the rest
            random; only traced episodes for policies with traces); ``None`` = every episode.
        reference: policy of the intervals, as :func:`fwgym.evaluation.reference_policy` takes it
            (``"auto"``: hour_of_day_empirical, or its samples variant, when present; ``None``: no intervals).
        n_boot, seed: bootstrap draws and seed (default: the protocol's 10,000 and 1701).
        replay: rerun registered baselines (not TSFM ones) on the paged episodes to list their tool
            calls in order; used only when the rerun reproduces the recorded score.
        history_hours: hours of visible history in episode charts.
        title: page title (default from the split).
        progress: show a progress bar over the episode pages.
        workers: processes writing episode pages (charts and replays dominate the build time).
        allow_unverified: accept result sources without a manifest (``--allow-unverified``); the title
            then starts with ``NOT HASH-CHECKED`` and the notes name them.
        phase: a context-manager factory called with a description around each long phase without a
            progress bar (re-scoring, intervals, figures, pages), e.g. :func:`fwgym.cli.progress.phase`
            (``None``: none).

    Returns:
        :class:`Report`.

    Raises:
        FileNotFoundError: a results or trace file is missing. ValueError: results that cannot be
            merged (see :func:`fwgym.evaluation.read_results`), an unknown ``reference`` or
            ``max_episode_pages`` < 0. ImportError: jinja2 or matplotlib missing (``pip install 'fwgym[plots]'``).
    """
    from fwgym import plots
    from fwgym.version import __version__
    from fwgym.evaluation import BOOT_SEED, N_BOOT, by_policy, coverage, reference_policy
    from fwgym.core.scoring import BUDGET

    t0 = time.perf_counter()
    if isinstance(results_paths, (str, Path)):
        results_paths = [results_paths]
    results_paths = list(results_paths)
    if not results_paths:
        raise ValueError("no results given")
    if max_episode_pages is not None and max_episode_pages < 0:
        raise ValueError(f"max_episode_pages must be >= 0 or None, got {max_episode_pages}")
    n_boot = N_BOOT if n_boot is None else n_boot
    seed = BOOT_SEED if seed is None else seed
    env = environment()
    _WORKER.setdefault("cases", Cases())
    _WORKER.setdefault("env", env)
    step = phase or (lambda what: contextlib.nullcontext())
    with step("reading and re-scoring the results"):
        records, metas, merge_notes, header = _read_sources(results_paths, allow_unverified)
    if not records:
        raise ValueError(f"no result records in {[str(p) for p in results_paths]}")
    groups = by_policy(records)
    reference = reference_policy(list(groups), reference)
    trace_map, warnings = load_traces(traces)
    warnings[:0] = merge_notes
    keys = {(r["policy"], r["case_id"]) for r in records}
    stray = sorted(k for k in trace_map if k not in keys)
    if stray:
        warnings.append(f"{len(stray)} trace(s) match no result record (e.g. {stray[0][0]} on {stray[0][1]}); not shown")
    traced = {p for p, _ in trace_map if p in groups}

    out = Path(out_dir)
    if is_report(out):  # a rebuild: drop the old pages so none is left unlinked
        for sub in ("policies", "episodes", "cases"):
            shutil.rmtree(out / sub, ignore_errors=True)
    (out / "assets").mkdir(parents=True, exist_ok=True)
    (out / "policies").mkdir(exist_ok=True)
    (out / "episodes").mkdir(exist_ok=True)
    (out / "cases").mkdir(exist_ok=True)
    for name in ASSETS:
        (out / "assets" / name).write_bytes(resources.files("fwgym.report").joinpath("static", name).read_bytes())

    with step(f"leaderboards of {1 + len({r['cohort'] for r in records}) + len({r['lead'] for r in records})} tabs"
              + (f" with {n_boot:,} bootstrap draws" if reference else "")):
        tabs = _tabs(records, reference, n_boot, seed)
    order = [r["policy"] for r in tabs[0]["rows"]]
    main_rows = {r["policy"]: r for r in tabs[0]["rows"]}
    cov = coverage(groups[order[0]])
    splits = sorted({r["split"] for r in records})
    domains = sorted({r["domain"] for r in records})
    suite = next(iter({m["suite"] for m in metas}), "decision")
    credit_weight = metas[0].get("credit_weight") if metas else None  # the manifest's, never recovered from S
    metric = suite_metric(suite, credit_weight)
    split_txt = "/".join(splits)
    frontiers = []
    fig_mark = header.figure_mark()[0] if header is not None else None
    with step(f"{len(tabs)} frontier figures"):
        for t in tabs:  # one frontier per leaderboard tab (the page shows the selected tab's)
            recs = t["records"]
            fig = plots.frontier_figure(recs, agents=sorted(traced), panels="auto", suite=suite, style="screen",
                                        columns=2, reference=reference, n_boot=n_boot, seed=seed,
                                        credit_weight=credit_weight, mark=fig_mark)
            frontiers.append({"tab": t["id"], "title": t["title"],
                              "svg": charts.svg_text(fig, label=f"{metric.y_label} against mean credits per case, "
                                                                f"{t['title']} ({split_txt})")})
        tools = plots.tools_figure(records, style="screen", columns=1, title=False)
        if fig_mark:
            plots.mark_figure(tools, fig_mark, "screen")
        tools_fig = charts.svg_text(tools, label="mean actions per case (submit included), by tool")
    from fwgym.evaluation import write_csv

    write_csv(header.csv_rows(tabs[0]["rows"]) if header is not None else tabs[0]["rows"], out / "leaderboard.csv")
    codes = header.codes if header is not None else []
    site = {"title": (f"{', '.join(codes)}: " if codes else "") + (title or f"fwgym benchmark report: {'/'.join(splits)} split"),
            "marks": [m.text for m in header.marks] if header is not None else [],
            "version": __version__, "created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "reference": reference, "n_boot": n_boot, "seed": seed, "suite": suite, "metric": metric,
            "budget": BUDGET, "cohort_weights": cohort_weights_text(records)}
    pages: dict[str, str] = {p: f"policies/{slug(p)}.html" for p in order}

    # -- choose and write episode pages --------------------------------------------------------
    chosen: dict[str, list[tuple[dict, str]]] = {}
    for p in order:
        chosen[p] = select_episodes(groups[p], max_episode_pages, seed_text=p,
                                    prefer=(lambda r, p=p: (p, r["case_id"]) in trace_map) if p in traced else None)
    ep_pages: dict[tuple[str, str], str] = {(p, r["case_id"]): f"episodes/{slug(p)}/{r['case_id']}.html"
                                            for p, lst in chosen.items() for r, _ in lst}
    case_ids = list(dict.fromkeys(r["case_id"] for r in groups[order[0]]))
    case_pages = {cid: f"cases/{cid}.html" for cid in case_ids}
    by_case: dict[str, list[str]] = defaultdict(list)
    for (p, cid) in ep_pages:
        by_case[cid].append(p)
    report = Report(out_dir=out, index=out / "index.html", reference=reference, warnings=warnings, suite=suite)
    jobs = []
    for p in order:
        plist = chosen[p]
        for k, (rec, why) in enumerate(plist):
            cid = rec["case_id"]
            jobs.append({
                "policy": p, "rec": rec, "why": why, "suite": suite,
                "trace": trace_map.get((p, cid)), "replay": replay, "history_hours": history_hours,
                "path": str(out / ep_pages[(p, cid)]),
                "context": {"site": site, "rel": "../../", "policy": p, "policy_href": f"../../{pages[p]}", "why": why,
                            "row": main_rows.get(p), "position": (k + 1, len(plist)),
                            "siblings": [(q, f"../{slug(q)}/{cid}.html") for q in by_case[cid] if q != p],
                            "case_href": f"../../{case_pages[cid]}",
                            "nav": {"prev": plist[k - 1][0]["case_id"] + ".html" if k > 0 else None,
                                    "next": plist[k + 1][0]["case_id"] + ".html" if k + 1 < len(plist) else None}}})
    bar = None
    if progress and jobs:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), unit="page", desc="report episodes", dynamic_ncols=True)
    replay_notes: Counter = Counter()
    if workers > 1 and len(jobs) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = pool.map(_episode_page, jobs, chunksize=max(1, min(8, len(jobs) // (4 * workers))))
            done = [_done(j, r, report, replay_notes, bar) for j, r in zip(jobs, results)]
    else:
        done = [_done(j, _episode_page(j), report, replay_notes, bar) for j in jobs]
    del done
    if bar is not None:
        bar.close()
    for (p, note), n in replay_notes.items():
        warnings.append(f"{p}: {n} episode page(s): {note}; their tool calls are shown as counts")

    # -- policy pages --------------------------------------------------------------------------
    with step(f"{len(order)} policy pages"):
        tpl_pol = env.get_template("policy.html")
        breakdown_keys = [t for t in tabs[1:]]
        for p in order:
            recs = groups[p]
            row = main_rows[p]
            breakdown = []
            for t in breakdown_keys:
                r = next((x for x in t["rows"] if x["policy"] == p), None)
                if r is not None:
                    breakdown.append({"title": t["title"], "row": r, "cases": t["cases"]})
            statuses = Counter(r["status"] for r in recs if not r["valid"])
            reasons = Counter((r["status"], (r.get("reason") or "")[:160]) for r in recs if not r["valid"])
            tool_mean = Counter()
            for r in recs:
                tool_mean.update(r.get("tool_counts") or {})
            episodes = [{"rec": r, "href": f"../{ep_pages[(p, r['case_id'])]}" if (p, r["case_id"]) in ep_pages else None,
                         "traced": (p, r["case_id"]) in trace_map, "case_href": f"../{case_pages[r['case_id']]}"}
                        for r in recs]
            why = {r["case_id"]: w for r, w in chosen[p]}
            html = tpl_pol.render(site=site, rel="../", policy=p, row=row, breakdown=breakdown, episodes=episodes,
                                  why=why, statuses=statuses.most_common(), reasons=reasons.most_common(8),
                                  tools=[(t, n / len(recs)) for t, n in tool_mean.most_common()],
                                  hist=charts.histogram_svg([r["S"] for r in recs], "S per episode", f"distribution of S for {p}",
                                                            invalid=sum(not r["valid"] for r in recs)),
                                  n_pages=len(chosen[p]), max_pages=max_episode_pages, traced=p in traced,
                                  kind=plots.policy_kind(p, row["credits"]) if p not in traced else "agent")
            path = out / pages[p]
            path.write_text(html, encoding="utf-8")
            report.policy_pages[p] = path

    # -- case pages: every policy on one case ---------------------------------------------------
    with step(f"{len(case_ids)} case pages"):
        by_cid: dict[str, list[dict]] = defaultdict(list)
        for r in records:
            by_cid[r["case_id"]].append(r)
        kinds = {p: ("agent" if p in traced else plots.policy_kind(p, main_rows[p]["credits"])) for p in order}
        tpl_case = env.get_template("case.html")
        case_rows = []
        ref_of = {r["case_id"]: r for r in groups[reference]} if reference else {}
        for cid in case_ids:
            recs = sorted(by_cid[cid], key=lambda r: (r["S"], r["policy"]))
            first = recs[0]
            data = _WORKER["cases"].get(first, suite)
            rows = [{"rec": r, "rank": k + 1, "policy_href": f"../{pages[r['policy']]}",
                     "episode_href": f"../{ep_pages[(r['policy'], cid)]}" if (r["policy"], cid) in ep_pages else None,
                     "traced": (r["policy"], cid) in trace_map} for k, r in enumerate(recs)]
            html = tpl_case.render(site=site, rel="../", case=data.case, summary=data.case.summary(), data=data,
                                   rows=rows, kinds=kinds, reference=ref_of.get(cid))
            path = out / case_pages[cid]
            path.write_text(html, encoding="utf-8")
            report.case_pages[cid] = path
            s_vals = [r["S"] for r in recs]
            case_rows.append({"case_id": cid, "href": f"{cid}.html", "summary": data.case.summary(), "scenario": data.scenario,
                              "best": first["policy"], "best_S": first["S"], "median_S": float(np.median(s_vals)),
                              "worst_S": recs[-1]["S"], "ref_S": ref_of[cid]["S"] if cid in ref_of else None,
                              "invalid": sum(not r["valid"] for r in recs), "n": len(recs)})
        html = env.get_template("cases.html").render(site=site, rel="../", cases=case_rows, reference=reference,
                                                     n_policies=len(order))
        report.cases_index = out / "cases" / "index.html"
        report.cases_index.write_text(html, encoding="utf-8")

    # -- index ---------------------------------------------------------------------------------
    html = env.get_template("index.html").render(
        site=site, rel="", tabs=tabs, pages=pages, frontiers=frontiers, tools_fig=tools_fig, coverage=cov,
        context_breakdown=_context_breakdown(tabs[0]["rows"], suite),
        n_cases=len({r["case_id"] for r in records}), n_episodes=len(records), splits=splits, metas=metas,
        domains=domains, traced=sorted(traced), n_episode_pages=len(ep_pages),
        max_pages=max_episode_pages, warnings=warnings, kinds=kinds)
    report.index.write_text(html, encoding="utf-8")
    report.seconds = time.perf_counter() - t0
    return report


__all__ = ["build_report", "select_episodes", "slug", "Report", "DEFAULT_EPISODE_PAGES"]
