"""Checking an outcome table's values, not only its hashes (``fwgym rl verify DIR --recompute N``; docs/rl.md).

A table's sha256 manifest proves that its files are the ones the manifest lists, not that the manifest's author
played them through the env: a table whose rewards were edited, with the files' digests recomputed, passes every
hash check (:class:`~fwgym.rl.outcomes.read.OutcomeTable`), and an agent trained on it learns the edit. As the
forecast store's ``--recompute`` (:func:`fwgym.forecasters.store.verify.recompute_rows`), :func:`recompute_cases`
plays N cases drawn by a seeded generator again through the env path a build uses
(:func:`~fwgym.rl.outcomes.build.table_env`, :func:`~fwgym.rl.outcomes.build.play_case`: the macro wrapper over
:class:`~fwgym.envs.fwbench.FWBenchEnv`) and compares every row of each (the reset and each menu entry) with the
table, exactly: observation (float32 bits), reward (float64 bits), terminated, truncated, action mask and info
(types and float bits, :func:`fwgym.rl.values.encode_value`).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from fwgym.rl.outcomes.build import play_case, table_env
from fwgym.rl.values import encode_value

__all__ = ["ENV_KEYS", "table_env_kwargs", "recompute_cases"]

#: the identity fields that are env arguments (what :func:`table_env` is given to rebuild a table's env)
ENV_KEYS: tuple[str, ...] = ("budget", "max_calls", "reward", "tools", "models", "sigma", "invalid_submission",
                             "call_limit", "forecast_timeout", "scenarios", "scenario_seed")


def table_env_kwargs(identity: dict) -> dict:
    """The env arguments of a table's identity (:data:`ENV_KEYS`)."""
    return {k: identity[k] for k in ENV_KEYS}


def _info_text(info: Any) -> str:
    """An info dict as exact, key-sorted JSON (types and float bits kept; key order not compared)."""
    return json.dumps(encode_value(info), sort_keys=True, separators=(",", ":"), allow_nan=False)


def _bits(a: Any, dtype) -> bytes:
    return np.ascontiguousarray(np.asarray(a, dtype=dtype)).tobytes()


def recompute_cases(table, n: int, rng: np.random.Generator, env=None) -> dict:
    """Play ``n`` cases of ``table`` (drawn without replacement by ``rng``; every case when it has fewer) through the
    env again and compare each case's rows with the table's.

    Args:
        table: an open :class:`~fwgym.rl.outcomes.read.OutcomeTable`.
        n: how many cases (>= 1).
        rng: draws the cases (seed it to repeat a check).
        env: the env to play on (default: :func:`table_env` of the table's identity, closed afterwards).

    Returns:
        ``{"cases": cases in the table, "checked": cases played, "equal": cases whose every row matched,
        "different": [{"case_id", "entry" (menu name, or "reset"), "fields": [names]}, ...] (one per row that
        differs), "case_ids": the cases played, in draw order}``.

    Raises:
        ValueError: ``n`` < 1.
    """
    from fwgym.rl.features import episode_fixed

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    ident = table.identity
    own = env is None
    if own:
        env = table_env(ident["split"], ident["variant"], table_env_kwargs(ident))
    try:
        n_fixed = episode_fixed(env.controller.feature_names)
        total = len(table.case_ids)
        slots = rng.choice(total, size=min(int(n), total), replace=False)
        E = table.entries
        different: list[dict] = []
        equal = 0
        for slot in (int(s) for s in slots):
            cid = table.case_ids[slot]
            fresh = play_case(env, cid, n_fixed)
            bad_case = False
            for e in range(E + 1):
                row = int(table.rows_of(slot, e))
                fields = []
                if e == E:
                    obs = np.concatenate((fresh["fixed"], fresh["obs"][E]))
                    if _bits(table.reset_obs[slot], np.float32) != _bits(obs, np.float32):
                        fields.append("reset_obs")
                if _bits(table.obs[row], np.float32) != _bits(fresh["obs"][e], np.float32):
                    fields.append("obs")
                if _bits(table.reward[row], np.float64) != _bits(fresh["reward"][e], np.float64):
                    fields.append("reward")
                for name, stored in (("terminated", table.terminated), ("truncated", table.truncated),
                                     ("mask", table.masks)):
                    if _bits(stored[row], np.bool_) != _bits(fresh[name][e], np.bool_):
                        fields.append(name)
                if _info_text(table.infos.row_dict(row)) != _info_text(fresh["info"][e]):
                    fields.append("info")
                if fields:
                    bad_case = True
                    different.append({"case_id": cid, "entry": table.menu[e] if e < E else "reset", "fields": fields})
            equal += not bad_case
        return {"cases": total, "checked": len(slots), "equal": equal, "different": different,
                "case_ids": [table.case_ids[int(s)] for s in slots]}
    finally:
        if own:
            env.close()
