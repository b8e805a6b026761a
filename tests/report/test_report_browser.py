"""The report in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Asserts that the leaderboard shows one row per policy with the results' values, that clicking a
column header sorts and a tab switches the table, that episode pages show the chart and (for traced
agents) the transcript, that pages fit a phone's width, that no request leaves ``file://`` and that
the console has no error. Screenshots go to ``$FWGYM_ARTIFACTS`` (or a temporary folder).

Skipped, with the reason, only when Playwright or Chromium cannot be found. Playwright never
downloads a browser here: it runs the system Chromium (``$FWGYM_CHROMIUM`` or ``/usr/bin/chromium``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fwgym.evaluation import leaderboard

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for c in (os.environ.get("FWGYM_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
              shutil.which("chromium-browser")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser test skipped: the playwright package is not installed (pip install playwright)")
    exe = _chromium()
    if exe is None:
        pytest.skip("browser test skipped: no Chromium at /usr/bin/chromium or on PATH "
                    "(apt-get install -y chromium, or set FWGYM_CHROMIUM)")
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Watch:
    """A page with its console errors, page errors and any request that is not file:// or data:."""

    def __init__(self, browser, width=1280, height=900):
        self.ctx = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.remote: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))

        def route(r):
            url = r.request.url
            if url.startswith(("file://", "data:")):
                r.continue_()
            else:
                self.remote.append(url)
                r.abort()

        self.page.route("**/*", route)

    def goto(self, path: Path):
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")

    def close(self):
        self.ctx.close()

    def check(self):
        assert not self.remote, f"network requests: {self.remote}"
        assert not self.errors, f"browser errors: {self.errors}"


def _table(page, tab="all"):
    return page.eval_on_selector_all(
        f"#tab-{tab} table tbody tr",
        "rows => rows.map(r => [r.getAttribute('data-policy'), ...Array.from(r.cells).map(c => c.textContent.trim())])")


def test_leaderboard_sorting_and_tabs(browser, report_site, artifacts_dir):
    out, records = report_site["out"], report_site["records"]
    expect = {r["policy"]: r for r in leaderboard(records, reference="hour_of_day_empirical")}
    w = Watch(browser)
    try:
        w.goto(out / "index.html")
        page = w.page
        assert page.title().endswith("fwgym benchmark report: test split")  # after its marks (PARTIAL: ...)
        rows = _table(page)
        assert [r[0] for r in rows] == list(expect)  # one row per policy, by S
        for policy, _rank, name, s, r_, loss, credits, calls, valid, *ci in rows:
            e = expect[policy]
            assert name.startswith(policy)
            assert (s, r_, loss, credits, calls) == (f"{e['S']:.4f}", f"{e['R']:.4f}", f"{e['loss']:.5f}",
                                                      f"{e['credits']:,.1f}", f"{e['calls']:.2f}")
            assert valid == f"{e['valid']}/{e['n']}"
        assert page.is_visible("#tab-all table") and not page.is_visible("#tab-lead-day_ahead table")
        page.screenshot(path=str(artifacts_dir / "index.png"), full_page=True)

        # sort by S: first click flips the initial ascending order
        page.click("#tab-all th[data-key=S]")
        assert page.get_attribute("#tab-all th[data-key=S]", "aria-sort") == "descending"
        assert [r[0] for r in _table(page)] == sorted(expect, key=lambda p: expect[p]["S"], reverse=True)
        page.click("#tab-all th[data-key=S]")
        assert [r[0] for r in _table(page)] == sorted(expect, key=lambda p: expect[p]["S"])
        # by credits (ties keep their order: Array.prototype.sort is stable)
        page.click("#tab-all th[data-key=credits]")
        got = [expect[r[0]]["credits"] for r in _table(page)]
        assert got == sorted(got) and page.get_attribute("#tab-all th[data-key=S]", "aria-sort") is None
        page.click("#tab-all th[data-key=loss]")
        got = [expect[r[0]]["loss"] for r in _table(page)]
        assert got == sorted(got)
        page.click("#tab-all th[data-key=R]")
        page.click("#tab-all th[data-key=R]")
        got = [expect[r[0]]["R"] for r in _table(page)]
        assert got == sorted(got, reverse=True)

        # tabs: the lead tab shows that subset's own table
        page.click("#tabbtn-lead-day_ahead")
        assert page.is_visible("#tab-lead-day_ahead table") and not page.is_visible("#tab-all table")
        sub = {r["policy"]: r["S"] for r in leaderboard([r for r in records if r["lead"] == "day_ahead"])}
        assert {r[0]: r[3] for r in _table(page, "lead-day_ahead")} == {p: f"{v:.4f}" for p, v in sub.items()}
        page.screenshot(path=str(artifacts_dir / "index_tab_day_ahead.png"), full_page=False)
        assert page.locator(".frontiers svg").count() >= 1
        w.check()
    finally:
        w.close()


def test_navigation_chart_and_transcript(browser, report_site, artifacts_dir):
    out, rep = report_site["out"], report_site["report"]
    w = Watch(browser)
    try:
        page = w.page
        w.goto(out / "index.html")
        policy = report_site["traced"][-1]
        page.click(f"#tab-all tr[data-policy='{policy}'] a")
        page.wait_for_load_state("load")
        assert page.url.endswith(f"policies/{policy}.html")
        assert page.locator("#episodes tbody tr").count() == sum(r["policy"] == policy for r in report_site["records"])
        page.fill("input[data-filter=episodes]", "cycle-")
        visible = page.eval_on_selector_all("#episodes tbody tr", "rs => rs.filter(r => !r.hidden).length")
        assert visible == sum(r["policy"] == policy and r["domain"] == "cycle_hire" for r in report_site["records"])
        page.fill("input[data-filter=episodes]", "")
        page.click("#episodes tbody tr a")
        page.wait_for_load_state("load")
        assert "/episodes/" in page.url
        assert page.locator("figure.chart svg").count() == 2
        for sel in ("figure.chart .overview svg", "figure.chart .zoom svg"):
            box = page.locator(sel).bounding_box()
            assert box["width"] > 300 and box["height"] > 150, (sel, box)
        msgs = page.locator(".transcript details.msg")
        assert msgs.count() >= 3
        assert page.locator(".transcript details.msg.role-system[open]").count() == 0  # the system message starts closed
        page.click("[data-toggle-all=tr]")
        assert page.locator(".transcript details.msg:not([open])").count() == 0
        assert page.locator(".transcript details.msg.role-assistant").first.is_visible()
        page.screenshot(path=str(artifacts_dir / f"episode_{policy}.png"), full_page=True)
        page.click("[data-collapse-all=tr]")
        assert page.locator(".transcript details.msg[open]").count() == 0
        w.check()

        # an invalid episode and a replayed baseline's episode
        inv = next(k for k, r in ((k, r) for k in rep.episode_pages for r in report_site["records"]
                                  if (r["policy"], r["case_id"]) == k) if not r["valid"])
        w.goto(rep.episode_pages[inv])
        assert page.is_visible(".callout.bad") and "Invalid episode" in page.inner_text(".callout.bad")
        page.screenshot(path=str(artifacts_dir / "episode_invalid.png"), full_page=True)
        base = next(k for k in rep.episode_pages if k[0] == "seasonal_empirical" and k[1].startswith("elec-"))
        w.goto(rep.episode_pages[base])
        assert page.locator("figure.chart svg").count() == 2
        assert page.locator("table.calls tbody tr").count() == 3
        page.screenshot(path=str(artifacts_dir / "episode_seasonal_empirical.png"), full_page=True)
        w.check()
    finally:
        w.close()


def test_phone_width(browser, report_site, artifacts_dir):
    out, rep = report_site["out"], report_site["report"]
    w = Watch(browser, width=390, height=844)
    try:
        page = w.page
        key = next(k for k in rep.episode_pages if k[0] == report_site["traced"][0])
        for name, path in (("index", out / "index.html"), ("policy", rep.policy_pages["weekday_empirical"]),
                           ("episode", rep.episode_pages[key])):
            w.goto(path)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name} page is {overflow}px wider than a phone screen"
            page.screenshot(path=str(artifacts_dir / f"phone_{name}.png"), full_page=True)
        w.check()
    finally:
        w.close()


# ---------------------------------------------------------------------------------------------
# layout at desktop and phone widths, sticky headers, fitted chart axes, the frontier of the
# selected tab, case pages, the forecast suite

DESKTOP_WIDTHS = (1366, 1440, 1536, 1920)
PHONE_WIDTH = 390

#: boxes of every visible table: the table inside its wrapper and the viewport, no scrolling wrapper,
#: no cell whose content is wider than the cell (what "clipped" means on screen)
_MEASURE = """() => {
  const vw = document.documentElement.clientWidth, bad = [];
  let n = 0;
  document.querySelectorAll('table').forEach((t, i) => {
    if (!t.offsetParent) return;  // inside a hidden tab panel
    n += 1;
    const wrap = t.closest('.table-wrap') || t.parentElement;
    const tb = t.getBoundingClientRect(), wb = wrap.getBoundingClientRect();
    const name = (t.id || t.className || 'table') + '#' + i;
    if (tb.right > wb.right + 1 || tb.left < wb.left - 1) bad.push([name, 'table outside its box', tb.width, wb.width]);
    if (wrap.scrollWidth > wrap.clientWidth + 1) bad.push([name, 'scrolling box', wrap.scrollWidth, wrap.clientWidth]);
    if (tb.right > vw + 1) bad.push([name, 'beyond the viewport', tb.right, vw]);
    t.querySelectorAll('td, th').forEach(c => {
      const r = c.getBoundingClientRect();
      if (!r.width) return;
      if (r.right > vw + 1 || r.right > wb.right + 1) bad.push([name, 'cell outside', c.textContent.trim().slice(0, 40), r.right]);
      if (c.scrollWidth > c.clientWidth + 1) bad.push([name, 'content wider than its cell', c.textContent.trim().slice(0, 40), c.scrollWidth, c.clientWidth]);
    });
  });
  return {overflow: document.documentElement.scrollWidth - window.innerWidth, tables: n, bad: bad.slice(0, 12)};
}"""


def _pages(site, extra=()):
    rep = site["report"]
    traced = [k for k in rep.episode_pages if k[0] in site.get("traced", [])]
    replayed = [k for k in rep.episode_pages if k[0] == "seasonal_empirical"]
    keys = (traced[:1] + replayed[:1]) or list(rep.episode_pages)[:2]
    return ([("index", rep.index), ("policy", next(iter(rep.policy_pages.values()))), ("cases", rep.cases_index),
             ("case", next(iter(rep.case_pages.values())))] + [(f"episode-{k[0]}", rep.episode_pages[k]) for k in keys]
            + list(extra))


def _check_layout(w, name, width):
    got = w.page.evaluate(_MEASURE)
    assert got["overflow"] <= 1, f"{name} at {width}px: the page is {got['overflow']}px wider than the window"
    assert got["tables"] >= 1 and not got["bad"], f"{name} at {width}px: {got['bad']}"


@pytest.mark.parametrize("width", DESKTOP_WIDTHS + (PHONE_WIDTH,))
def test_no_clipped_tables(browser, report_site, forecast_site, artifacts_dir, width):
    w = Watch(browser, width=width, height=900)
    try:
        fc = forecast_site["report"]
        for name, path in _pages(report_site) + [("forecast-index", fc.index),
                                                 ("forecast-episode", next(iter(fc.episode_pages.values())))]:
            w.goto(path)
            _check_layout(w, name, width)
            if name == "index":  # every tab's table
                for btn in w.page.locator(".tabs [role=tab]").all():
                    btn.click()
                    _check_layout(w, f"index tab {btn.get_attribute('id')}", width)
                w.page.click("#tabbtn-all")
            w.page.screenshot(path=str(artifacts_dir / f"w{width}_{name}.png"), full_page=True)
        w.check()
    finally:
        w.close()


def test_sticky_headers(browser, report_site, artifacts_dir):
    w = Watch(browser, width=1366, height=240)  # shorter than the tables, so the page scrolls inside them
    try:
        page = w.page
        stuck = []
        for path, table in ((report_site["out"] / "index.html", "#tab-all table"),
                            (next(iter(report_site["report"].case_pages.values())), "#case-policies"),
                            (next(iter(report_site["report"].policy_pages.values())), "#episodes")):
            w.goto(path)
            start = page.evaluate(f"() => document.querySelector('{table}').getBoundingClientRect().top + window.scrollY")
            page.evaluate(f"() => window.scrollTo(0, {start} + 60)")
            box = page.evaluate(f"""() => {{ const t = document.querySelector('{table}');
                const h = t.tHead.rows[0].cells[0].getBoundingClientRect(), b = t.getBoundingClientRect();
                return [h.top, h.bottom, b.top, b.bottom]; }}""")
            head_top, head_bottom, table_top, table_bottom = box
            if table_top > -30:  # the page ends before the window can scroll into this table
                continue
            assert table_bottom > head_bottom, (path.name, box)
            assert abs(head_top) <= 1, f"{path.name}: the header row scrolled away ({head_top}px from the top)"
            stuck.append(path.name)
            page.screenshot(path=str(artifacts_dir / f"sticky_{path.stem}.png"))
        assert "index.html" in stuck and len(stuck) >= 2, stuck
        w.check()
    finally:
        w.close()


def test_episode_chart_axes_fit_the_data(browser, report_site):
    rep = report_site["report"]
    key = next(k for k in rep.episode_pages if k[0] == "seasonal_empirical" and k[1].startswith("elec-"))
    w = Watch(browser, width=1366)
    try:
        w.goto(rep.episode_pages[key])
        for panel in ("overview", "zoom"):
            got = w.page.evaluate(f"""() => {{
                const ax = document.getElementById('ep-{panel}-axes').getBoundingClientRect();
                const els = [document.getElementById('ep-{panel}-target'),
                             ...document.querySelectorAll('[id^="ep-{panel}-data"]')];
                const top = Math.min(...els.map(e => e.getBoundingClientRect().top));
                const bottom = Math.max(...els.map(e => e.getBoundingClientRect().bottom));
                return [ax.top, ax.bottom, top, bottom, els.length]; }}""")
            ax_top, ax_bottom, top, bottom, n = got
            height = ax_bottom - ax_top
            assert n >= 3 and height > 100, got
            # fitted: the drawn data fill the axes' height (a 6% margin above and below), the axis does not start at 0
            assert (bottom - top) / height > 0.84, (panel, got)
            assert (ax_bottom - bottom) / height < 0.09 and (top - ax_top) / height < 0.09, (panel, got)
        w.check()
    finally:
        w.close()


def test_frontier_follows_the_selected_tab(browser, report_site):
    w = Watch(browser, width=1366)
    try:
        page = w.page
        w.goto(report_site["out"] / "index.html")
        tabs = [b.get_attribute("aria-controls")[4:] for b in page.locator(".tabs [role=tab]").all()]
        assert page.locator("figure.frontier").count() == len(tabs)
        for tab in ["all"] + [t for t in tabs if t != "all"]:
            page.click(f"#tabbtn-{tab}")
            shown = page.eval_on_selector_all("figure.frontier", "fs => fs.filter(f => f.offsetParent).map(f => f.getAttribute('data-tab-for'))")
            assert shown == [tab], (tab, shown)
            label = page.get_attribute(f"figure.frontier[data-tab-for='{tab}'] svg", "aria-label")
            title = page.inner_text(f"#tabbtn-{tab}").rsplit(" ", 1)[0].strip()
            assert title in label, (label, title)
            box = page.locator(f"figure.frontier[data-tab-for='{tab}'] svg").bounding_box()
            assert box["width"] > 600 and box["height"] > 200
        w.check()
    finally:
        w.close()


def test_case_page_compares_every_policy(browser, report_site, artifacts_dir):
    rep, records = report_site["report"], report_site["records"]
    key = next(k for k in rep.episode_pages if k[0] == "seasonal_empirical")
    w = Watch(browser, width=1366)
    try:
        page = w.page
        w.goto(rep.episode_pages[key])
        page.click("a.case-link")
        page.wait_for_load_state("load")
        assert page.url.endswith(f"cases/{key[1]}.html")
        rows = page.eval_on_selector_all("#case-policies tbody tr",
                                         "rs => rs.map(r => [r.getAttribute('data-policy'), r.cells[2].textContent.trim()])")
        want = sorted((r for r in records if r["case_id"] == key[1]), key=lambda r: (r["S"], r["policy"]))
        assert rows == [[r["policy"], f"{r['S']:.4f}"] for r in want]
        page.screenshot(path=str(artifacts_dir / "case_page.png"), full_page=True)
        page.click("#case-policies tbody tr a[href*='episodes/']")  # back to an episode page
        page.wait_for_load_state("load")
        assert "/episodes/" in page.url
        w.goto(rep.cases_index)
        assert page.locator("#cases tbody tr").count() == len({r["case_id"] for r in records})
        w.check()
    finally:
        w.close()


def test_tabs_are_reachable_by_keyboard(browser, report_site):
    """WAI-ARIA tabs: Tab reaches the selected tab, the arrow keys select the next / previous one (wrapping),
    Home / End the first / last; the selected tab is the only one in the Tab order."""
    w = Watch(browser)
    try:
        page = w.page
        w.goto(report_site["out"] / "index.html")
        ids = page.eval_on_selector_all(".tabs [role=tab]", "bs => bs.map(b => b.id)")
        assert len(ids) >= 3

        def state():
            return page.evaluate("""() => [document.activeElement.id,
                Array.from(document.querySelectorAll('.tabs [role=tab]')).filter(b => b.getAttribute('aria-selected')
                    === 'true').map(b => b.id),
                Array.from(document.querySelectorAll('.tabs [role=tab]')).filter(b => b.tabIndex === 0).map(b => b.id),
                Array.from(document.querySelectorAll('[role=tabpanel]')).filter(p => !p.hidden).map(p => p.id)]""")

        page.focus(f"#{ids[0]}")
        for key, k in (("ArrowRight", 1), ("ArrowRight", 2), ("ArrowLeft", 1), ("End", len(ids) - 1),
                       ("ArrowRight", 0), ("ArrowLeft", len(ids) - 1), ("Home", 0)):
            page.keyboard.press(key)
            focused, selected, tabbable, panels = state()
            assert (focused, selected, tabbable) == (ids[k], [ids[k]], [ids[k]]), key
            assert panels == [ids[k].replace("tabbtn-", "tab-")], key
        w.check()
    finally:
        w.close()


#: every number (a run of digits with its sign, separators and decimals) in a table cell that a card layout
#: broke over two lines: ``[cell text, number]`` (not in code: tool-call JSON wraps as code does)
_SPLIT_NUMBERS = r"""() => {
  const bad = [], re = /[+\u2212-]?\d[\d,.]*(?:\/\d+)?%?/g;
  document.querySelectorAll('table td').forEach(td => {
    if (!td.offsetParent || td.closest('table.calls')) return;  // tool calls: JSON text, wrapped as code
    const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.parentElement.closest('pre, code')) continue;
      let m;
      while ((m = re.exec(n.textContent)) !== null) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set(Array.from(r.getClientRects()).filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (tops.size > 1) bad.push([td.textContent.trim().slice(0, 40), m[0]]);
      }
    }
  });
  return bad.slice(0, 10);
}"""


@pytest.mark.parametrize("width", (320, 390))
def test_phone_cards_keep_numbers_whole(browser, report_site, width):
    """On a phone the tables become cards; a number is never broken over two lines (the cards wrapped "10/10"
    as "1" / "0/10" and cut long numbers)."""
    w = Watch(browser, width=width, height=844)
    try:
        for _name, path in _pages(report_site):
            w.goto(path)
            assert w.page.evaluate(_SPLIT_NUMBERS) == [], (_name, width)
        w.check()
    finally:
        w.close()


def test_forecast_suite_pages(browser, forecast_site, artifacts_dir):
    rep = forecast_site["report"]
    w = Watch(browser, width=1440)
    try:
        page = w.page
        w.goto(rep.index)
        assert "min(RCRPS, 5)" in page.inner_text("footer")
        assert page.inner_text("#fr-h") == "RCRPS (capped at 5) against credits"  # not "Rcrps"
        heads = page.eval_on_selector_all("#tab-all thead th", "ths => ths.map(t => t.textContent.trim())")
        assert any(h.startswith("RCRPS") for h in heads) and not any(h.startswith("loss") for h in heads)
        path = next(iter(rep.episode_pages.values()))
        w.goto(path)
        legend = page.eval_on_selector_all("ul.legend li", "ls => ls.map(l => l.textContent.trim())")
        assert "submitted forecast 10-90%" in legend and "submitted forecast median" in legend
        assert "submitted capacities" not in legend
        assert page.locator("table.hours tbody tr").count() == 24
        page.screenshot(path=str(artifacts_dir / "forecast_episode.png"), full_page=True)
        w.check()
    finally:
        w.close()
