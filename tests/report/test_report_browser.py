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
        assert page.title().startswith("fwgym benchmark report")
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
