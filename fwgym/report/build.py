"""Build the static HTML report (see :mod:`fwgym.report`)."""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fwgym.core.cases import CHART_HISTORY_HOURS
from fwgym.plots import submitted_forecast, suite_metric
from fwgym.report import charts
from fwgym.traces import (bands_from_calls, calls_from_log, calls_from_trace, load_traces, trace_results,
                                 transcript)

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


def slug(name: str) -> str:
    """File-name-safe form of a policy name (a short hash is added when characters had to change)."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "policy"
    return s if s == name else f"{s}-{zlib.crc32(name.encode()):08x}"


def _fmt(v, spec: str = ".4f") -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    try:
        out = format(v, spec)
    except (TypeError, ValueError):
        return str(v)
    if out[:1] == "-" and not out.strip("-+0.,"):  # a negative zero after rounding
        out = ("+" if "+" in spec else "") + out[1:]
    return out


def sentence(text) -> str:
    """``text`` with its first character upper case and the rest as it is (Jinja's ``capitalize`` lowers the
    rest: "RCRPS (capped at 5)" would read "Rcrps (capped at 5)")."""
    text = str(text)
    return text[:1].upper() + text[1:]


def _num(v) -> str:
    """Full-precision sort key of a table cell."""
    if v is None or isinstance(v, bool):
        return "" if v is None else str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return repr(f) if np.isfinite(f) else ""


def _is_report(out: Path) -> bool:
    """``out`` holds a report written by this module (its index names fwgym as the generator)."""
    try:
        return '<meta name="generator" content="fwgym' in (out / "index.html").read_text(encoding="utf-8")[:2000]
    except OSError:
        return False


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("fwgym.report", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = _fmt
    env.filters["num"] = _num
    env.filters["slug"] = slug
    env.filters["sentence"] = sentence
    return env


def _read_sources(paths: Sequence[str | Path], allow_unverified: bool = False) -> tuple[list[dict], list[dict], list[str],
                                                                                     object]:
    """Records (read, re-scored, checked and merged by :func:`fwgym.evaluation.load_results`: runs of one
    suite, split, sigma, budget and version only) and the sources' metadata (``path``, ``suite``,
    ``created``, ``version``, ``split``, ``verified``), the notes of the merge (``UNVERIFIED`` first) and
    the leaderboard header with its marks (:func:`fwgym.evaluation.header.make_header`; ``None``: no records).

    Raises:
        ValueError: sources of different suites or settings, edited records, as :func:`fwgym.evaluation.load_results`.
    """
    from fwgym.evaluation import load_results

    from fwgym.evaluation.header import make_header, result_set_marks

    rs = load_results(paths, allow_partial=True, allow_unverified=allow_unverified)
    suite = rs.settings["suite"]
    metas = [{"path": str(src.path.parent if src.path.name == "results.jsonl" else src.path), "suite": suite,
              "created": (src.manifest or {}).get("created"), "version": src.fwgym_version,
              "split": src.settings.get("split"), "verified": src.verified} for src in rs.sources]
    header = make_header(rs.records, suite=suite, formula="", marks=result_set_marks(rs)) if rs.records else None
    return rs.records, metas, list(rs.notes), header


class _Cases:
    """Hindsight data of a case under a suite's env settings (cached): :class:`fwgym.plots.CaseData`
    (the case, scored and raw target, perfect-demand plan, Region of Interest, scenario, context text)."""

    def __init__(self):
        self._data: dict = {}

    def env(self, domain: str, split: str, suite: str):
        from fwgym.plots import suite_env

        return suite_env(domain, split, suite)

    def get(self, rec: dict, suite: str):
        from fwgym.plots import case_data

        key = (rec["case_id"], suite)
        if key not in self._data:
            self._data[key] = case_data(rec, suite)
        return self._data[key]


def _replay(policy: str, rec: dict, cases: _Cases, suite: str) -> tuple[list[dict] | None, str]:
    """Rerun a registered baseline on the case and log every tool call; the log is used only when
    the rerun reproduces the recorded score, credits and validity."""
    from fwgym.agents.base import run_episode
    from fwgym.baselines.oracles import oracle_grant
    from fwgym.baselines.registry import TSFM_POLICIES, make_policy
    from fwgym.wrappers.record import RecordToolCalls

    if policy in TSFM_POLICIES:
        return None, "TSFM policies are not replayed"
    try:
        agent = make_policy(policy)
    except (ValueError, KeyError):
        return None, ""

    env = RecordToolCalls(cases.env(rec["domain"], rec["split"], suite))
    try:
        out = run_episode(env, agent, options={"case_id": rec["case_id"]}, hindsight=oracle_grant(agent)).record
    except Exception as exc:  # a failing replay must not stop the report
        return None, f"replay failed: {type(exc).__name__}: {str(exc)[:200]}"
    same = (abs(float(out["S"]) - float(rec["S"])) <= 1e-9 * max(1.0, abs(float(rec["S"])))
            and float(out["credits"]) == float(rec["credits"]) and bool(out["valid"]) == bool(rec["valid"]))
    if not same:
        return None, (f"a replay of {policy} gave S {out['S']:.6f}, credits {out['credits']} "
                      f"(recorded S {rec['S']:.6f}, credits {rec['credits']}): the calls are not shown in order")
    return env.calls, ""


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


def _block_table(case, rec: dict, data) -> list[dict]:
    from fwgym.core.series import hour_to_iso

    y = data.target
    rows = []
    for b in range(8):
        h0 = int(case.target_start) + 3 * b
        lv = (rec.get("levels") or [None] * 8)[b]
        rows.append({"block": f"b{b:02d}", "start": hour_to_iso(h0)[11:16], "end": hour_to_iso(h0 + 3)[11:16],
                     "level": lv, "capacity": None if lv is None else lv * case.scale,
                     "perfect": data.perfect_levels[b] * case.scale, "demand_mean": float(y[3 * b: 3 * b + 3].mean()),
                     "demand_max": float(y[3 * b: 3 * b + 3].max())})
    return rows


def _hour_table(case, data, submitted) -> list[dict]:
    """Rows of the forecast suite's hourly table: the scored target, the raw series where a scenario
    changed it, the Region of Interest, bounds and the submitted forecast's 10/50/90% quantiles."""
    from fwgym.plots import forecast_band
    from fwgym.core.series import hour_to_iso

    band = forecast_band(submitted) if submitted is not None else None
    rows = []
    for h in range(24):
        rows.append({"hour": hour_to_iso(int(case.target_start) + h)[11:16], "target": float(data.target[h]),
                     "raw": float(data.raw_target[h]), "roi": bool(data.roi[h]) if data.roi is not None else False,
                     "upper": None if data.upper is None or not np.isfinite(data.upper[h]) else float(data.upper[h]),
                     "lower": None if data.lower is None or not np.isfinite(data.lower[h]) else float(data.lower[h]),
                     "q10": None if band is None else float(band[h, 0]), "q50": None if band is None else float(band[h, 1]),
                     "q90": None if band is None else float(band[h, 2])})
    return rows


def _policy_band(case, policy: str, calls: list[dict] | None):
    """The policy's own predictive band: its classical method, or the last classical method it planned with."""
    from fwgym.forecasters.classical import CLASSICAL_METHODS
    from fwgym.plots import policy_forecast_band

    method = policy if policy in CLASSICAL_METHODS else None
    for c in reversed(calls or []):
        if method is None and c["tool"] in ("classical_plan", "plan") and c["ok"]:
            m = re.search(r'"method": "([a-z_]+)"', c["args"])
            if m and m.group(1) in CLASSICAL_METHODS:
                method = m.group(1)
    if method is None:
        return None
    try:
        band = policy_forecast_band(case, method)
    except Exception:  # a band is a nicety
        return None
    return None if band is None else (band[0], f"{method} predictive 10-90%")


_WORKER: dict = {}


def _episode_page(job: dict) -> tuple[str, str]:
    """Write one episode page (runs in this process or a worker); returns ``(path, replay note)``."""
    if "cases" not in _WORKER:
        _WORKER["cases"], _WORKER["env"] = _Cases(), _environment()
    cases = _WORKER["cases"]
    p, rec, suite, trace = job["policy"], job["rec"], job["suite"], job["trace"]
    data = cases.get(rec, suite)
    case = data.case
    calls, bands, source, note, actions = None, [], "counts", "", []
    if trace is not None and trace.get("steps"):
        calls, source = calls_from_trace(trace, rec.get("credits")), "trace"
        bands = bands_from_calls(trace_results(trace))
        actions = [s.get("action") for s in trace["steps"] if isinstance(s, dict)]
    elif job["replay"] and trace is None:
        log, note = _replay(p, rec, cases, suite)
        if log is not None:
            calls, source = calls_from_log(log), "replay"
            bands = bands_from_calls([_loads(e["result"]) for e in log])
            actions = [e.get("action") for e in log]
    submitted = submitted_forecast(rec, actions) if suite == "forecast" else None
    chart = charts.episode_charts(data, rec, bands=bands, policy_band=_policy_band(case, p, calls),
                                  submitted=submitted, history_hours=job["history_hours"])
    html = _WORKER["env"].get_template("episode.html").render(
        **job["context"], rec=rec, summary=case.summary(), case=case, data=data, suite=suite, chart=chart,
        blocks=_block_table(case, rec, data) if suite != "forecast" else [],
        hours=_hour_table(case, data, submitted) if suite == "forecast" else [], submitted=submitted,
        calls=calls, call_source=source, replay_note=note,
        tool_counts=sorted((rec.get("tool_counts") or {}).items()), trace=trace,
        messages=transcript(trace) if trace else None)
    path = Path(job["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return str(path), note


def _loads(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


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
            then starts with ``UNVERIFIED`` and the notes name them.
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
    env = _environment()
    _WORKER.setdefault("cases", _Cases())
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
    if _is_report(out):  # a rebuild: drop the old pages so none is left unlinked
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
    credit_weight = plots.credit_weight_of(records) if suite == "forecast" else None
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
    from fwgym.evaluation.header import mark_rows

    write_csv(mark_rows(tabs[0]["rows"], header.marks if header is not None else ()), out / "leaderboard.csv")
    codes = header.codes if header is not None else []
    site = {"title": (f"{', '.join(codes)}: " if codes else "") + (title or f"fwgym benchmark report: {'/'.join(splits)} split"),
            "marks": [m.text for m in header.marks] if header is not None else [],
            "version": __version__, "created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "reference": reference, "n_boot": n_boot, "seed": seed, "suite": suite, "metric": metric,
            "budget": BUDGET}
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
        n_cases=len({r["case_id"] for r in records}), n_episodes=len(records), splits=splits, metas=metas,
        domains=domains, traced=sorted(traced), n_episode_pages=len(ep_pages),
        max_pages=max_episode_pages, warnings=warnings, kinds=kinds)
    report.index.write_text(html, encoding="utf-8")
    report.seconds = time.perf_counter() - t0
    return report


__all__ = ["build_report", "select_episodes", "slug", "Report", "DEFAULT_EPISODE_PAGES"]
