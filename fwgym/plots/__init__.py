"""Figures from result records (DESIGN §9): the loss-credits frontier, a case view and the tool-use mix.

One module per figure over a data layer:

* :mod:`~fwgym.plots.data` — the numbers a figure draws, without matplotlib: :func:`frontier_points`
  (aggregates and paired-bootstrap intervals), :func:`case_data` (the scored view of a case),
  :func:`results_suite`, :func:`policy_kind`;
* :mod:`~fwgym.plots.style` — styles, sizes, saving and marks (:func:`save_figure`, :func:`mark_figure`);
* :mod:`~fwgym.plots.frontier` — :func:`frontier_figure` / :func:`plot_frontier`: the suite's loss
  (decision loss, or capped RCRPS) against mean credits per case, one point per policy with paired
  bootstrap 95% intervals against a reference policy, and lines of equal S;
* :mod:`~fwgym.plots.case` — :func:`case_figure` / :func:`plot_case`: one case with the history tail,
  forecast bands, the submitted capacities or forecast, the perfect-demand plan and the scored target;
* :mod:`~fwgym.plots.forecast` — the submitted forecast of a record or trace and forecast bands;
* :mod:`~fwgym.plots.tools` — :func:`tools_figure` / :func:`plot_tools`: mean tool calls per case.

Matplotlib is an optional dependency (``pip install fwgym[plots]``); figures use the Agg canvas and
never change the global pyplot backend. The output format follows the file extension (``.png``,
``.svg``, ``.pdf``). Styles (:data:`STYLES`): ``"paper"`` (3.3 in one column, 7.0 in two, every text
>= 7 pt) and ``"screen"`` (the HTML report's). Every figure names the metric of its suite
(:func:`suite_metric`): the decision and context suites score ``S = (R + c/B) / 2`` with
``R = (loss - F) / sigma``, the forecast suite ``S = R + w * c/B`` with ``R = min(RCRPS, 5)``.
"""
from fwgym.suites import SUITE_NAMES, SuiteMetric, suite_metric
from fwgym.plots.case import case_figure, draw_case, fit_limits, format_time_axes, plot_case
from fwgym.plots.data import ORACLE_NAMES, CaseData, case_data, frontier_points, policy_kind, results_suite, suite_env
from fwgym.plots.forecast import forecast_band, policy_forecast_band, submitted_forecast
from fwgym.plots.frontier import frontier_figure, plot_frontier
from fwgym.plots.style import (FORMATS, MIN_FONT_PT, PAPER_WIDTHS, SAVE_DPI, SCREEN_WIDTHS, STYLES, figure_style,
                               figure_width, mark_figure, save_figure, text_sizes)
from fwgym.plots.tools import plot_tools, tools_figure

__all__ = ["plot_frontier", "plot_case", "plot_tools", "frontier_figure", "frontier_points", "case_figure", "tools_figure",
           "save_figure", "mark_figure", "figure_style", "figure_width", "policy_kind", "suite_metric", "SuiteMetric",
           "results_suite", "case_data", "CaseData", "draw_case", "format_time_axes",
           "submitted_forecast", "forecast_band", "policy_forecast_band", "fit_limits", "text_sizes", "suite_env", "FORMATS",
           "STYLES", "PAPER_WIDTHS", "SCREEN_WIDTHS", "SAVE_DPI", "MIN_FONT_PT", "SUITE_NAMES", "ORACLE_NAMES"]
