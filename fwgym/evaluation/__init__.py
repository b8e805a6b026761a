"""Evaluation (DESIGN §5, §9): run policies on benchmark cases, keep their records, rank them.

The flow, one module each:

* :mod:`~fwgym.evaluation.runner`: case selection, the suites' env settings, local processes or Ray
  (:func:`evaluate`);
* :mod:`~fwgym.evaluation.records`: the ONE record schema (:class:`Record`) and the checks of record sets;
* :mod:`~fwgym.evaluation.results`: ``results.jsonl`` and ``meta.json`` (:func:`write_results`,
  :func:`read_results`);
* :mod:`~fwgym.evaluation.bootstrap`: the paired series-cluster bootstrap (:func:`paired_bootstrap`);
* :mod:`~fwgym.evaluation.leaderboard`: the table, its Markdown and CSV forms, the reference policy.

Sigma calibration, which runs an evaluation, is :mod:`fwgym.calibration`.
"""
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.leaderboard import (AUTO, DEFAULT_REFERENCE, REFERENCE_POLICIES, format_breakdowns,
                                          format_leaderboard, leaderboard, reference_policy, write_csv)
from fwgym.evaluation.records import (CORE_FIELDS, ENV_FIELDS, FORECAST_TASK_FIELDS, RECORD_FIELDS, Record,
                                      by_policy, check_record, check_result_set, coverage, split_index)
from fwgym.evaluation.results import RESULTS_FILE, read_results, run_meta, write_results
from fwgym.evaluation.runner import SUITES, evaluate, policy_label, select_cases

__all__ = [
    # runner
    "SUITES", "evaluate", "select_cases", "policy_label",
    # records
    "Record", "RECORD_FIELDS", "ENV_FIELDS", "CORE_FIELDS", "FORECAST_TASK_FIELDS", "check_record", "by_policy",
    "check_result_set", "coverage", "split_index",
    # results files
    "RESULTS_FILE", "write_results", "read_results", "run_meta",
    # bootstrap
    "N_BOOT", "BOOT_SEED", "ClusterBootstrap", "paired_bootstrap",
    # leaderboard
    "AUTO", "DEFAULT_REFERENCE", "REFERENCE_POLICIES", "reference_policy", "leaderboard", "format_leaderboard",
    "format_breakdowns", "write_csv",
]

