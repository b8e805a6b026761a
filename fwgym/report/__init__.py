"""Browsable benchmark report: a self-contained static HTML site built from result files (DESIGN §9).

``fwgym report results/test -o report/`` (or :func:`build_report`) writes::

    report/index.html                      leaderboard (sortable; tabs per cohort and lead; 95% CIs),
                                           loss-credits frontier, tool-use mix, links to policies
    report/leaderboard.csv                 the leaderboard rows (all columns)
    report/policies/<policy>.html          aggregates, breakdowns, S distribution, every episode
    report/episodes/<policy>/<case>.html   case metadata, chart, capacities, tool calls, transcript
    report/assets/report.css, report.js    the only files pages load

Pages are rendered from Jinja2 templates shipped in ``fwgym/report/templates/``; figures are
matplotlib SVG inlined in the pages (text kept as text); the script is a few lines of vanilla JS
(table sorting, tabs, a filter box). Nothing is fetched from a network: open ``index.html`` from the
disk or any static host. Results are post-episode, so episode pages show the realised demand.

Traces of LLM agents (``--traces``; schema in :mod:`fwgym.report.traces`) add the full transcript
and the ordered tool calls to those agents' episode pages. For registered baselines the calls are
recovered by replaying the episode (deterministic), and shown only when the replay reproduces the
recorded score; otherwise the page lists the record's tool counts.

Needs the ``plots`` extra (matplotlib, jinja2).
"""
from fwgym.report.build import DEFAULT_EPISODE_PAGES, Report, build_report, select_episodes, slug
from fwgym.report.traces import load_traces

__all__ = ["build_report", "load_traces", "select_episodes", "slug", "Report", "DEFAULT_EPISODE_PAGES"]
