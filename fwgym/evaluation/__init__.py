"""Evaluation (DESIGN §5, §9): run policies on benchmark cases, keep their records, rank them.

The flow, one module each:

* :mod:`~fwgym.evaluation.runner`: case selection, the suites' env settings, local processes or Ray
  (:func:`evaluate`);
* :mod:`~fwgym.evaluation.records`: the ONE record schema (:class:`Record`) and the checks of record sets;
* :mod:`~fwgym.evaluation.rundir`: run directories: created or resumed, records appended per episode,
  finished (:class:`RunDir`, :func:`default_run_dir`);
* :mod:`~fwgym.evaluation.manifest`: the run manifest (``manifest.json``: command, settings, versions,
  model revisions, preflight, counts, record hashes);
* :mod:`~fwgym.evaluation.verify`: re-scoring stored records from the packaged data (:func:`verify_record`);
* :mod:`~fwgym.evaluation.results`: reading, checking and merging result sources (:func:`load_results`,
  :func:`read_results`) and writing a finished record set (:func:`write_results`);
* :mod:`~fwgym.evaluation.bootstrap`: the paired series-cluster bootstrap (:func:`paired_bootstrap`);
* :mod:`~fwgym.evaluation.leaderboard`: the table, its Markdown and CSV forms, the reference policy;
* :mod:`~fwgym.evaluation.header`: the one header of every leaderboard artefact and its marks (PARTIAL,
  NOT HASH-CHECKED, EXPOSED, W=<w>; the per-row marks of :mod:`~fwgym.evaluation.marks`); :mod:`~fwgym.evaluation.formats`: tables as Markdown, LaTeX and CSV;
* the paper's analyses: :mod:`~fwgym.evaluation.compare` (paired comparison of two runs, stability),
  :mod:`~fwgym.evaluation.weights` (loss-cost weight sensitivity), :mod:`~fwgym.evaluation.profile`
  (per-episode resources).

Sigma calibration, which runs an evaluation, is :mod:`fwgym.evaluation.calibration`.
"""
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap, paired_bootstrap
from fwgym.evaluation.leaderboard import (AUTO, DEFAULT_REFERENCE, REFERENCE_POLICIES, format_breakdowns,
                                          format_leaderboard, leaderboard, reference_policy, write_csv)
from fwgym.evaluation.manifest import MANIFEST_FILE, read_manifest
from fwgym.evaluation.records import (ACCOUNTING_FIELDS, CORE_FIELDS, ENV_FIELDS, FORECAST_TASK_FIELDS, RECORD_FIELDS,
                                      RUN_FIELDS, Record, by_policy, check_record, check_result_set, coverage,
                                      is_scored, split_index)
from fwgym.evaluation.results import ResultSet, load_results, read_results, run_meta, write_results
from fwgym.evaluation.rundir import RESULTS_FILE, TRACES_FILE, RunDir, default_run_dir
from fwgym.evaluation.runner import SUITES, evaluate, policy_label, run_preflight, select_cases
from fwgym.evaluation.verify import rescore, verify_record

__all__ = [
    # runner
    "SUITES", "evaluate", "select_cases", "policy_label", "run_preflight",
    # records
    "Record", "RECORD_FIELDS", "ENV_FIELDS", "CORE_FIELDS", "FORECAST_TASK_FIELDS", "RUN_FIELDS", "ACCOUNTING_FIELDS",
    "check_record", "by_policy", "check_result_set", "coverage", "split_index", "is_scored",
    # run directories, manifest, verification, results files
    "RunDir", "default_run_dir", "RESULTS_FILE", "TRACES_FILE", "MANIFEST_FILE", "read_manifest", "rescore",
    "verify_record", "ResultSet", "load_results", "write_results", "read_results", "run_meta",
    # bootstrap
    "N_BOOT", "BOOT_SEED", "ClusterBootstrap", "paired_bootstrap",
    # leaderboard
    "AUTO", "DEFAULT_REFERENCE", "REFERENCE_POLICIES", "reference_policy", "leaderboard", "format_leaderboard",
    "format_breakdowns", "write_csv",
]

