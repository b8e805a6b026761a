"""Browsable benchmark report: a self-contained static HTML site built from result files (DESIGN §9).

``fwgym report results/test -o report/`` (or :func:`build_report`) writes::

    report/index.html                      leaderboard (sortable; tabs per cohort and lead; 95% CIs),
                                           the frontier of the selected tab, tool-use mix, links
    report/leaderboard.csv                 the leaderboard rows (all columns)
    report/policies/<policy>.html          aggregates, breakdowns, S distribution, every episode
    report/cases/index.html                every case: best, median and worst S, the reference's S
    report/cases/<case>.html               every policy on one case, with links to its episode pages
    report/episodes/<policy>/<case>.html   case metadata, chart, capacities or the submitted forecast,
                                           tool calls, transcript
    report/assets/report.css, report.js    the only files pages load

A report holds the results of one suite (the run manifest says which; mixing suites is refused) and
names that suite's metric everywhere: decision and context ``S = (R + c/B)/2``, ``R = (loss - F)/sigma``
(the context suite's loss on the scenario-transformed target); forecast ``S = R + w*c/B``,
``R = min(RCRPS, 5)`` (:func:`fwgym.plots.suite_metric`).

Pages are rendered from Jinja2 templates shipped in ``fwgym/report/templates/``; figures are
matplotlib SVG inlined in the pages (text kept as text), drawn by :mod:`fwgym.plots` (the same drawing
as ``fwgym plot``); the script is a few lines of vanilla JS (table sorting, tabs that also switch the
frontier, a filter box, cell labels for the phone layout). Tables sit in no scrolling box (their
header rows stick to the top of the window) and turn into one card per row below 720 px. Nothing is
fetched from a network: open ``index.html`` from the disk or any static host. Results are
post-episode, so pages show the scored target.

Traces of LLM agents (``--traces``; schema in :mod:`fwgym.traces`) add the full transcript,
the ordered tool calls, the bought forecasts and (forecast suite) the submitted forecast to those
agents' episode pages. For registered baselines the calls are recovered by replaying the episode
(deterministic), and shown only when the replay reproduces the recorded score; otherwise the page
lists the record's tool counts. A record that carries its own ``submission`` is drawn from it.

Needs the ``plots`` extra (matplotlib, jinja2).
"""
from fwgym.report.build import DEFAULT_EPISODE_PAGES, Report, build_report, select_episodes, slug
from fwgym.traces import load_traces

__all__ = ["build_report", "load_traces", "select_episodes", "slug", "Report", "DEFAULT_EPISODE_PAGES"]
