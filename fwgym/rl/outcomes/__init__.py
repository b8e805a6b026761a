"""Outcome tables (issue 29): every macro (and first sequential) outcome of a split, computed once.

A macro episode is one decision, and its outcome is a deterministic function of the case, the pool and the prices.
``fwgym rl build --split train`` (:func:`build_table`) plays every (case, menu entry) once through the real env
and stores what it returned (observations, rewards, terminations, infos, action masks) as Arrow files with a
sha256 manifest and a fingerprint of the code, data, pool and prices (:mod:`~fwgym.rl.outcomes.format`,
:mod:`~fwgym.rl.outcomes.identity`). :func:`fwgym.rl.make_rl_env` and ``gym.make_vec("FWBench-RL-Macro-v0")``
read the default table when present (:func:`find_table`): a training-time cache, proven equal to the env path by
tests; every reported number is still scored by :func:`fwgym.agents.run_episode` on the real env.
"""
from fwgym.rl.outcomes.build import build_table
from fwgym.rl.outcomes.format import TableError, TableIntegrityError, TableStale, default_root, table_dir
from fwgym.rl.outcomes.identity import table_fingerprint, table_identity
from fwgym.rl.outcomes.read import OutcomeTable, OutcomeTableHint, find_table, open_table

__all__ = ["build_table", "OutcomeTable", "open_table", "find_table", "OutcomeTableHint", "TableError",
           "TableIntegrityError", "TableStale", "default_root", "table_dir", "table_identity", "table_fingerprint"]
