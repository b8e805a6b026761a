"""The HTML report built from a small real evaluation (always runs; no browser needed).

Checks the files, the leaderboard rows against :func:`fwgym.evaluation.leaderboard` on the results
file, that every local link resolves, that no page references a network URL, invalid-episode and
transcript content, episode selection, trace reading and the ``fwgym report`` command.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from fwgym.evaluation import leaderboard
from fwgym.report import build_report, load_traces, select_episodes, slug


class _Page(HTMLParser):
    """Links, ids, the leaderboard rows of each tab and the transcript messages of one page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.rows: dict[str, list[dict]] = {}
        self.msgs: list[str] = []
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for k in ("href", "src", "xlink:href"):
            if a.get(k):
                self.links.append((tag, a[k]))
        if tag == "table" and "leaderboard" in (a.get("class") or ""):
            self._table = a["data-tab"]
            self.rows[self._table] = []
        elif tag == "tr" and self._table and "data-policy" in a:
            self._row = {"policy": a["data-policy"], "cells": []}
        elif tag == "td" and self._row is not None:
            self._cell = {"value": a.get("data-value"), "text": ""}
        elif tag == "details" and "msg" in (a.get("class") or "").split():
            self.msgs.append(a.get("class"))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row["cells"].append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


COLS = {"S": 2, "R": 3, "loss": 4, "credits": 5, "calls": 6}  # cell index in a leaderboard row


def test_files_and_pages(report_site):
    out, rep = report_site["out"], report_site["report"]
    assert (out / "index.html").is_file() and rep.index == out / "index.html"
    assert (out / "assets" / "report.css").is_file() and (out / "assets" / "report.js").is_file()
    assert (out / "leaderboard.csv").is_file()
    assert set(rep.policy_pages) == set(report_site["policies"])
    for p, path in rep.policy_pages.items():
        assert path == out / "policies" / f"{slug(p)}.html" and path.is_file()
    # max_episode_pages=None: one page per episode
    assert len(rep.episode_pages) == len(report_site["records"])
    for (p, cid), path in rep.episode_pages.items():
        assert path.is_file() and path.name == f"{cid}.html"
    assert rep.reference == "hour_of_day_empirical"
    assert rep.seconds > 0


def test_leaderboard_rows_match_results(report_site):
    records = report_site["records"]
    page = _parse(report_site["out"] / "index.html")
    expect = {r["policy"]: r for r in leaderboard(records, reference="hour_of_day_empirical")}
    rows = page.rows["all"]
    assert [r["policy"] for r in rows] == list(expect)  # one row per policy, in S order
    for row in rows:
        e = expect[row["policy"]]
        for key, i in COLS.items():
            assert float(row["cells"][i]["value"]) == pytest.approx(e[key], rel=1e-12, abs=1e-15), (row["policy"], key)
        assert row["cells"][COLS["S"]]["text"].strip() == f"{e['S']:.4f}"
        assert row["cells"][COLS["loss"]]["text"].strip() == f"{e['loss']:.5f}"
        assert row["cells"][7]["text"].strip() == f"{e['valid']}/{e['n']}"
        ci = row["cells"][8]["text"]
        if row["policy"] == "hour_of_day_empirical":
            assert "reference" in ci
        else:
            assert f"{e['dS']:+.4f}" in ci and f"{e['dS_lo']:+.4f}" in ci and f"{e['dS_hi']:+.4f}" in ci
    # a tab per cohort and per lead, each with the subset's own aggregates
    cohorts = sorted({r["cohort"] for r in records})
    leads = sorted({r["lead"] for r in records})
    assert set(page.rows) == {"all"} | {f"cohort-{c}" for c in cohorts} | {f"lead-{x}" for x in leads}
    sub = [r for r in records if r["lead"] == leads[0]]
    want = {r["policy"]: r["S"] for r in leaderboard(sub)}
    got = {r["policy"]: float(r["cells"][COLS["S"]]["value"]) for r in page.rows[f"lead-{leads[0]}"]}
    assert got == pytest.approx(want, rel=1e-12)


def test_links_resolve_and_no_network(report_site):
    out = report_site["out"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in files)
    for f in files:
        if f.suffix in (".html", ".css", ".js"):
            text = f.read_text(encoding="utf-8")
            assert not re.search(r"https?://", text, re.I), f"{f} references a network URL"
        if f.suffix != ".html":
            continue
        page = _parse(f)
        for tag, link in page.links:
            parts = urlsplit(link)
            assert parts.scheme in ("", "data") and not parts.netloc, f"{f}: {link}"
            if parts.scheme == "data":
                continue
            if not parts.path:  # an in-page anchor
                assert parts.fragment in page.ids, f"{f}: broken anchor {link}"
                continue
            target = (f.parent / unquote(parts.path)).resolve()
            assert target.is_file(), f"{f}: broken link {link}"
            assert out.resolve() in target.parents, f"{f}: link {link} leaves the site"


def test_episode_pages_content(report_site):
    rep, records = report_site["report"], report_site["records"]
    by = {(r["policy"], r["case_id"]): r for r in records}
    # the chart is inline SVG; invalid episodes say why
    invalid = [(k, r) for k, r in by.items() if not r["valid"]]
    assert invalid, "the scripted agent's cycle-hire episodes must be invalid"
    for key, r in invalid:
        html = rep.episode_pages[key].read_text()
        assert "Invalid episode" in html and r["status"] in html
        assert r["reason"] and r["reason"][:40].replace("'", "&#39;") in html
    valid_key = next(k for k, r in by.items() if r["valid"] and k[0] == "seasonal_empirical")
    html = rep.episode_pages[valid_key].read_text()
    assert html.count("<svg") == 2 and 'viewBox="' in html  # the overview and the target day
    # replayed baseline: the calls in order, with the forecast's credits
    assert "deterministic replay" in html
    assert re.search(r"<code>forecast</code>.*?<code>plan</code>.*?<code>submit</code>", html, re.S)
    credits = by[valid_key]["credits"]
    assert credits > 0 and f"<td class=\"num\">{credits:,.0f}</td>" in html
    # case metadata
    case_id = valid_key[1]
    from fwgym.core.cases import get_case

    s = get_case(case_id).summary()
    for k in ("as_of", "target_start", "target_end", "series_id", "lead"):
        assert s[k] in html


def test_transcripts(report_site):
    rep, traces = report_site["report"], report_site["traces"]
    tmap, _ = load_traces([traces])
    for policy in report_site["traced"]:
        keys = [k for k in rep.episode_pages if k[0] == policy]
        assert keys
        for key in keys:
            page = _parse(rep.episode_pages[key])
            assert len(page.msgs) == len(tmap[key]["messages"])
            html = rep.episode_pages[key].read_text()
            assert "Transcript" in html and "(from the trace)" in html
    if "scripted_chat" in report_site["traced"]:
        key = next(k for k in rep.episode_pages if k[0] == "scripted_chat")
        html = rep.episode_pages[key].read_text()
        assert "The weekday profile is a good start." in html  # the reasoning of reply 1
        assert "classical_plan" in html and "agent status" in html
    key = next(k for k in rep.episode_pages if k[0] == "scripted_minimal")
    html = rep.episode_pages[key].read_text()
    assert "seasonal_empirical 10-90%" in html  # the purchased forecast's band is in the chart's legend


def test_select_episodes():
    recs = [{"case_id": f"c{i:02d}", "S": float(i)} for i in range(20)]
    sel = select_episodes(recs, 6, seed_text="p")
    why = {r["case_id"]: w for r, w in sel}
    assert [w for w in why.values()].count("worst") == 2 and {"c18", "c19"} <= set(why)
    assert {"c00", "c01"} <= set(why) and why["c00"] == "best"
    assert len(sel) == 6 and sel == select_episodes(recs, 6, seed_text="p")
    assert [r["S"] for r, _ in sel] == sorted(r["S"] for r, _ in sel)
    assert len(select_episodes(recs, None)) == 20 and len(select_episodes(recs, 0)) == 0
    assert [r["case_id"] for r, _ in select_episodes(recs, 3, prefer=lambda r: r["S"] > 16)] == ["c17", "c18", "c19"]


def test_load_traces_errors_and_tolerance(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"policy": "a", "case_id": "x", "messages": [], "unknown": 1}) + "\n\n"
                 + json.dumps({"policy": "a", "messages": []}) + "\n")
    traces, warnings = load_traces(f)
    assert list(traces) == [("a", "x")] and any("without policy or case_id" in w for w in warnings)
    f.write_text('{"policy": "a", "case_id": "x"}\nnot json\n')
    with pytest.raises(ValueError, match=r"t\.jsonl:2"):
        load_traces([f])
    with pytest.raises(FileNotFoundError):
        load_traces([tmp_path / "missing.jsonl"])


def test_build_options_and_errors(report_site, tmp_path):
    res = report_site["results"]
    rep = build_report([res], tmp_path / "small", max_episode_pages=2, reference=None, replay=False)
    per = {}
    for p, _ in rep.episode_pages:
        per[p] = per.get(p, 0) + 1
    assert per and max(per.values()) <= 2 and rep.reference is None
    html = (tmp_path / "small" / "index.html").read_text()
    assert "ΔS [95% CI]" not in html
    with pytest.raises(ValueError, match="reference"):
        build_report([res], tmp_path / "bad", reference="nope")
    with pytest.raises(FileNotFoundError):
        build_report([tmp_path / "missing"], tmp_path / "bad")


def test_cli_report(report_site, tmp_path, capsys):
    from fwgym.cli import main

    out = tmp_path / "cli"
    rc = main(["report", str(report_site["results"]), "-o", str(out), "--traces", str(report_site["traces"]),
               "--episodes", "1", "--reference", "weekday_empirical", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "index.html" in text and (out / "index.html").is_file()
    assert "ΔS vs weekday_empirical" in (out / "policies" / "hour_of_day_empirical.html").read_text()
    assert len(list((out / "episodes").rglob("*.html"))) == len(report_site["policies"])
    assert main(["report", str(report_site["results"]), "-o", str(tmp_path / "x"), "--reference", "nope"]) == 2
    assert main(["report", str(report_site["results"]), "-o", str(tmp_path / "y"), "--episodes", "all",
                 "--reference", "none", "--no-replay", "--no-progress", "--workers", "2"]) == 0
    assert len(list((tmp_path / "y" / "episodes").rglob("*.html"))) == len(report_site["records"])


def test_rebuild_replaces_old_pages(report_site, tmp_path):
    out = tmp_path / "again"
    first = build_report([report_site["results"]], out, max_episode_pages=3, replay=False, reference=None)
    stale = next(iter(first.episode_pages.values()))
    second = build_report([report_site["results"]], out, max_episode_pages=0, replay=False, reference=None)
    assert not second.episode_pages and not stale.exists()
    assert not list((out / "episodes").rglob("*.html")) and (out / "index.html").is_file()


def test_context_suite(tmp_path):
    """Results of the context suite: the scenario, its Region of Interest and the transformed target."""
    from fwgym.evaluation import SUITES, evaluate, run_meta, write_results

    recs = evaluate(["context_hour_of_day_empirical", "hour_of_day_empirical"], split="test", limit=1, progress=False,
                    env_kwargs=SUITES["context"])
    write_results(recs, tmp_path / "ctx", {**run_meta("test", ["context_hour_of_day_empirical"], 1), "suite": "context"})
    rep = build_report([tmp_path / "ctx"], tmp_path / "site", max_episode_pages=None)
    assert len(rep.episode_pages) == len(recs) and not rep.warnings  # the replays reproduce the scores
    html = next(iter(rep.episode_pages.values())).read_text()
    assert "scenario <code>" in html and "after the scenario's transformation" in html
    assert "deterministic replay" in html
    assert "Context suite: S = (R + credits / 113,726) / 2" in html and "on the scenario-transformed target" in html
    from fwgym import plots

    changed = [(k, r) for k, r in ((k, next(x for x in recs if (x["policy"], x["case_id"]) == k)) for k in rep.episode_pages)
               if plots.case_data(r, "context").changed]
    assert changed, "a scenario that changes the target is among the cases"
    for k, _ in changed:
        page = rep.episode_pages[k].read_text()
        assert "raw series (no scenario)" in page and "scored target (with scenario)" in page


def test_cli_default_matches_the_package():
    from fwgym.cli import build_parser
    from fwgym.report import DEFAULT_EPISODE_PAGES

    args = build_parser().parse_args(["report", "r", "-o", "x"])
    assert args.episodes == DEFAULT_EPISODE_PAGES and args.reference is None and args.workers == 1


# ---------------------------------------------------------------------------------------------
# suites, frontiers per tab, case pages, fitted charts


def test_decision_suite_labels(report_site):
    out = report_site["out"]
    html = (out / "index.html").read_text()
    assert "Decision suite: S = (R + credits / 113,726) / 2 with R = (loss − F) / σ" in html
    assert "RCRPS" not in html
    ep = next(iter(report_site["report"].episode_pages.values())).read_text()
    assert "Decision suite: S = (R + credits / 113,726) / 2" in ep and "R = (loss − F)/σ" in ep
    assert report_site["report"].suite == "decision"


def test_frontier_per_tab(report_site):
    html = (report_site["out"] / "index.html").read_text()
    page = _parse(report_site["out"] / "index.html")
    tabs = set(page.rows)
    got = re.findall(r'<figure class="figure frontier" data-tab-for="([^"]+)"', html)
    assert sorted(got) == sorted(tabs) and len(got) == len(tabs)  # one frontier per leaderboard tab
    for t in tabs:
        fig = html.split(f'data-tab-for="{t}"', 1)[1].split("</figure>", 1)[0]
        assert "<svg" in fig and "decision loss (normalised) against mean credits per case" in fig


def test_case_pages(report_site):
    rep, records = report_site["report"], report_site["records"]
    cases = sorted({r["case_id"] for r in records})
    assert sorted(rep.case_pages) == cases and rep.cases_index.is_file()
    index = rep.cases_index.read_text()
    for cid in cases:
        assert f'href="{cid}.html"' in index
        html = rep.case_pages[cid].read_text()
        rows = re.findall(r'<tr data-policy="([^"]+)"', html)
        recs = sorted((r for r in records if r["case_id"] == cid), key=lambda r: (r["S"], r["policy"]))
        assert rows == [r["policy"] for r in recs]  # every policy, by S on this case
        for r in recs:
            assert f'{r["S"]:.4f}' in html
        for p in rows:  # episode links where a page exists
            if (p, cid) in rep.episode_pages:
                assert f'../episodes/{slug(p)}/{cid}.html' in html
    ep = rep.episode_pages[next(iter(rep.episode_pages))]
    assert f'../../cases/{ep.stem}.html' in ep.read_text()


def test_forecast_report(forecast_site):
    from fwgym import plots

    rep, records, out = forecast_site["report"], forecast_site["records"], forecast_site["out"]
    assert rep.suite == "forecast"
    html = (out / "index.html").read_text()
    assert "Forecast suite: S = R + w · credits / 113,726 with w = 0 and R = min(RCRPS, 5)" in html
    assert "ΔRCRPS [95% CI]" in html and ">RCRPS</th>" in html and "Δloss" not in html
    assert "RCRPS (capped at 5) against mean credits per case" in html
    assert "decision loss" not in html
    # the breakdown by scenario family and context type, with and without the violation term (issue 27)
    from fwgym.evaluation import leaderboard
    from fwgym.evaluation.breakdown import context_breakdown

    assert "By scenario family" in html and "By CiK context type" in html and ">w/o viol.</th>" in html
    row = next(r for r in leaderboard(records) if r["policy"] == records[0]["policy"])
    assert 'data-key="R_no_violation"' in html and f"{row['R_no_violation']:.4f}" in html
    for b in context_breakdown(records):
        assert f"<td data-value=\"{b['group']}\" class=\"pol\">{b['group']}</td>" in html
        assert f"{b['R_no_violation']:.4f}" in html and f"{b['R'] - b['R_no_violation']:.4f}" in html
    for (p, cid), path in rep.episode_pages.items():
        page = path.read_text()
        assert "Submitted forecast by hour" in page and "Capacities by block" not in page
        assert "submitted forecast 10-90%" in page and "perfect-demand plan" not in page  # replayed: shown
        assert "R = min(RCRPS, 5)" in page and "(uncapped, on the scenario-transformed target)" in page
        rec = next(r for r in records if (r["policy"], r["case_id"]) == (p, cid))
        data = plots.case_data(rec, "forecast")
        rows = re.findall(r"<tr(?: class=\"roi\")?><td>(\d\d:\d\d)</td><td>([\d,.]+)</td>", page)
        assert len(rows) == 24
        assert [float(v.replace(",", "")) for _, v in rows] == pytest.approx(data.target.tolist(), abs=0.0501)
        if data.changed:
            assert "raw series (no scenario)" in page
        medians = re.findall(r"<td>([\d,.]+)</td><td>([\d,.]+)</td><td>([\d,.]+)</td></tr>", page)
        assert len(medians) >= 24 and all(float(a.replace(",", "")) <= float(c.replace(",", "")) for a, _, c in medians)
    policy_page = rep.policy_pages[records[0]["policy"]].read_text()
    assert "An invalid forecast scores the RCRPS cap" not in policy_page or "Invalid episodes" in policy_page
    assert "<th scope=\"col\" data-sort=\"num\">RCRPS</th>" in policy_page


def test_mixed_suites_are_refused(report_site, forecast_site, tmp_path):
    with pytest.raises(ValueError, match="runs differ in suite"):
        build_report([report_site["results"], forecast_site["results"]], tmp_path / "mixed")


def test_episode_chart_axes_fit_the_data(report_site):
    from fwgym import plots
    from fwgym.report import charts

    rec = next(r for r in report_site["records"] if r["domain"] == "electricity" and r["policy"] == "weekday_empirical")
    data = plots.case_data(rec, "decision")
    ch = charts.episode_charts(data, rec)
    lo, hi = ch["ylim"]["zoom"]
    shown = np.concatenate([data.target, np.repeat(np.asarray(rec["levels"]) * data.case.scale, 3),
                            np.repeat(np.asarray(data.perfect_levels) * data.case.scale, 3)])
    span = shown.max() - shown.min()
    assert lo == pytest.approx(shown.min() - 0.06 * span) and hi == pytest.approx(shown.max() + 0.06 * span)
    assert lo > 0  # electricity load: the axis does not start at 0
    assert 'id="ep-zoom-target"' in ch["target"] and 'id="ep-zoom-axes"' in ch["target"]
    assert 'id="ep-overview-target"' in ch["overview"]
