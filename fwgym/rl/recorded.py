"""The (case, menu entry) outcomes behind the native RL envs, by row: :class:`Outcomes`.

Slot ``s`` (one per case) owns rows ``1 + s*(E+1) + e``: ``e < E`` the outcome of menu entry ``e`` played from the
case's reset, ``e == E`` the reset itself; row 0 is empty. Per row: the features that vary within an episode,
reward, terminated, truncated, the action mask after it and its info (an :class:`~fwgym.rl.infos.InfoStore` row);
per slot the features fixed within an episode (history, calendar, lead, domain, scale).

Two sources, the same rows:

* an **outcome table** (:mod:`fwgym.rl.outcomes`): every row of every case of the split, read from the memory-mapped
  files (nothing is recorded; the env's feature set is a selection of the table's columns);
* **recording**: a row is played the first time it is needed, through one :class:`~fwgym.rl.macro.MacroActionWrapper`
  over :class:`~fwgym.envs.fwbench.FWBenchEnv` (``reset(options={"case_id": ...})``, then the entry), and kept for the
  life of the process (measured ~9 KB per case with its reset and two entries recorded, all 403 features).

Either way every number is one the real env returned; nothing here computes a loss, a plan or a score.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from fwgym.rl.infos import record_part, record_slice

__all__ = ["Outcomes"]

_GUIDE_MAX = 1 << 22  # the largest guide table (4 M buckets, 16 MB of int32)


def _guide_table(bounds: np.ndarray, max_k: int = _GUIDE_MAX) -> tuple[np.ndarray, int, int, np.ndarray]:
    """The guide table of sorted ``bounds`` (float64 (n,), the last ``inf``) for :meth:`Outcomes.case_index`.

    ``K`` (a power of two, so ``k / K`` and ``u * K`` are exact) is the smallest from ``4 n`` whose fullest bucket
    ``(k/K, (k+1)/K)`` holds ``M <= 2`` bounds, at most ``2**22`` (then ``M`` is whatever it is: still exact, more
    comparisons; ``max_k`` lowers the cap). Returns ``(G int32 (K,), K, M >= 1, bounds padded with M infs)``, ``G[k]`` the number of bounds
    ``<= k/K``.
    """
    n = len(bounds)
    k = 1 << max(int(np.ceil(np.log2(max(4 * n, 2)))), 1)
    while True:
        edges = np.arange(k + 1, dtype=np.float64) / k
        g = np.searchsorted(bounds, edges, side="right")
        inner = np.searchsorted(bounds, edges[1:], side="left") - g[:-1]
        m = max(int(inner.max()), 1)
        if m <= 2 or 2 * k > max_k:
            break
        k *= 2
    padded = np.concatenate([bounds, np.full(m, np.inf)])
    return g[:-1].astype(np.int32 if n < (1 << 31) else np.int64), k, m, padded


class Outcomes:
    """Outcome rows of one macro env's pool (module docstring).

    Args:
        oracle: the real env (a :class:`~fwgym.rl.macro.MacroActionWrapper` over ``FWBenchEnv``, as
            :func:`fwgym.rl.make_rl_env` builds it with ``outcome_table=False``): its pool, weights, menu, spaces, and
            the episodes it plays when recording.
        table: an :class:`~fwgym.rl.outcomes.OutcomeTable` holding every case of the pool (already matched to the
            env), or ``None`` to record.

    Attributes:
        menu, entries (E), cases (the pool), cum_weights (float64, the env's cumulative aggregation weights),
        recorded (``{"cases", "steps"}`` played through the real env so far; 0 with a table), table.
    """

    def __init__(self, oracle, table=None):
        from fwgym.rl.features import episode_fixed, feature_index

        self.oracle, self.table = oracle, table
        self.menu = oracle.menu
        self.entries = E = len(self.menu)
        self.stride = E + 1
        inner = oracle.unwrapped
        self.cases = inner.cases
        self.cum_weights = np.asarray(inner._cum_weights, dtype=np.float64)
        # the draw searches cum_weights[:-1] + [inf]: the same index as min(searchsorted(cum_weights), n - 1)
        self.draw_bounds = self.cum_weights.copy()
        self.draw_bounds[-1] = np.inf
        self._guide, self._guide_k, self._guide_m, self._guide_bounds = _guide_table(self.draw_bounds)
        names = list(oracle.controller.feature_names)
        self.n_obs = len(names)
        k = episode_fixed(names)
        cut = feature_index("budget_left_frac")
        fixed = np.array([feature_index(f) < cut for f in names], dtype=bool)
        self.fixed_pos, self.var_pos = np.flatnonzero(fixed), np.flatnonzero(~fixed)
        self.fixed_first = k == len(self.fixed_pos)  # the usual layout: the fixed features first (a concatenation)
        self.recorded = {"cases": 0, "steps": 0}
        self.record: np.ndarray | None = None  # a table's packed records (rows, bytes) uint8 (gather)
        self._fields: dict[str, tuple] = {}  # record_slice()s of the parts a step slices from gathered records
        if table is not None:
            self._from_table(table, names)
            return
        cap = 64
        self._reset_obs = np.zeros((cap, self.n_obs), dtype=np.float32)
        rows = 1 + cap * self.stride
        self._obs = np.zeros((rows, len(self.var_pos)), dtype=np.float32)
        self.reward = np.zeros(rows, dtype=np.float64)
        self.terminated = np.zeros(rows, dtype=bool)
        self.truncated = np.zeros(rows, dtype=bool)
        self.masks = np.zeros((rows, E), dtype=bool)
        self._info_row = np.zeros(rows, dtype=np.int64)  # row in the info store; 0 = not recorded yet
        from fwgym.rl.infos import InfoStore

        self.infos = InfoStore(1024)
        self._slot_of_case = np.full(len(self.cases), -1, dtype=np.int64)
        self._reset_row_of_case = np.full(len(self.cases), -1, dtype=np.int64)
        self._slot_of_id: dict[str, int] = {}
        self._slot_ids: list[str] = []
        self._fresh: int | None = None  # the slot whose reset the oracle is at (no step taken yet)

    def _from_table(self, table, names: list[str]) -> None:
        if list(table.menu) != [e.name for e in self.menu]:
            raise ValueError(f"outcome table {table.path} has another menu than this env")
        col = {n: i for i, n in enumerate(table.features)}
        pos = [col[n] for n in names]
        nf = table.n_fixed
        fsel = [p for p in pos if p < nf]
        vsel = [p - nf for p in pos if p >= nf]
        if len(fsel) != len(self.fixed_pos):  # pragma: no cover - the same rule splits both
            raise ValueError("the table's fixed features differ from this env's")
        self._reset_obs = table.reset_obs if pos == list(range(len(table.features))) else \
            np.ascontiguousarray(table.reset_obs[:, pos])
        nv = table.obs.shape[1]
        self._obs = table.obs if vsel == list(range(nv)) else np.ascontiguousarray(table.obs[:, vsel])
        self.reward, self.terminated, self.truncated, self.masks = table.reward, table.terminated, table.truncated, table.masks
        self.record = table.record
        wanted = ("reward", "terminated", "truncated") + (("obs",) if self._obs is table.obs else ())  # obs: every
        # varying feature in the table's order, sliced from the gathered records (else a selection of its columns)
        self._fields = {k: record_slice(*table.record_fields[k]) for k in wanted}
        self.infos = table.infos
        self._info_row = None  # table rows are info rows
        self._slot_of_case = np.array([table.slot[c.case_id] for c in self.cases], dtype=np.int64)
        self._reset_row_of_case = 1 + self._slot_of_case * self.stride + self.entries
        self._slot_of_id = table.slot

    # -- slots -------------------------------------------------------------------------------------------------

    def slots_of_cases(self, case_index: np.ndarray) -> np.ndarray:
        """The slots of pool cases (indices into :attr:`cases`), recording the resets of cases not seen yet."""
        slots = self._slot_of_case[case_index]
        if self._info_row is not None:
            new = slots < 0
            if new.any():
                for k in np.flatnonzero(new):
                    c = int(case_index[k])
                    if self._slot_of_case[c] < 0:
                        cid = self.cases[c].case_id
                        s = self._slot_of_id.get(cid)
                        self._slot_of_case[c] = s if s is not None else self._new_slot(cid)
                        self._reset_row_of_case[c] = 1 + self._slot_of_case[c] * self.stride + self.entries
                    slots[k] = self._slot_of_case[c]
        return slots

    def case_index(self, u: np.ndarray) -> np.ndarray:
        """The pool indices (int32, int64 for pools of 2**31 cases or more; shape of ``u``) that uniforms ``u`` in [0, 1) draw: exactly
        ``np.searchsorted(draw_bounds, u, side="right")`` (what ``FWBenchEnv.reset`` computes), found with a guide
        table (Chen and Asau 1974, indexed search; Devroye 1986, *Non-Uniform Random Variate Generation*, III.2.4):
        bucket ``floor(u*K)`` gives the count of bounds <= its left edge, then at most ``M`` comparisons."""
        lo = self._guide[(u * self._guide_k).astype(np.int64)]
        b = self._guide_bounds
        idx = lo + (b[lo] <= u)
        for j in range(1, self._guide_m):
            idx += b[lo + j] <= u
        return idx

    def draw_reset_rows(self, u: np.ndarray) -> np.ndarray:
        """The reset rows of the cases that uniforms ``u`` draw (as ``FWBenchEnv.reset`` draws a case)."""
        case_index = self.case_index(u)
        rows = self._reset_row_of_case[case_index]
        if self._info_row is not None and (rows < 0).any():
            self.slots_of_cases(case_index)
            rows = self._reset_row_of_case[case_index]
        return rows

    def slot_of_id(self, case_id) -> int:
        """The slot of ``case_id`` (any case of the env's domains and split, as ``reset(options={"case_id": ...})``).

        Raises:
            ValueError: a case id the env refuses; with a table, a valid case the table does not hold.
        """
        s = self._slot_of_id.get(case_id) if isinstance(case_id, str) else None
        if s is not None:
            return s
        if self._info_row is None:
            self.oracle.reset(options={"case_id": case_id})  # the env's own refusal of a bad id
            raise ValueError(f"case {case_id!r} is not in the outcome table {self.table.path}; make the env with "
                             "outcome_table=False to play it")
        return self._new_slot(case_id)

    def case_of_row(self, row: int) -> str:
        """The case id of a row."""
        slot = (int(row) - 1) // self.stride
        return self.table.case_ids[slot] if self._info_row is None else self._slot_ids[slot]

    def reset_rows(self, slots: np.ndarray) -> np.ndarray:
        return 1 + slots * self.stride + self.entries

    def slots_of_rows(self, rows: np.ndarray) -> np.ndarray:
        return (rows - 1) // self.stride

    # -- recording ---------------------------------------------------------------------------------------------

    def _grow(self, slots_needed: int) -> None:
        cap = self._reset_obs.shape[0]
        if slots_needed <= cap:
            return
        new = max(2 * cap, slots_needed)
        f = np.zeros((new, self.n_obs), dtype=np.float32)
        f[:cap] = self._reset_obs
        self._reset_obs = f
        rows_old, rows_new = 1 + cap * self.stride, 1 + new * self.stride
        for name in ("_obs", "reward", "terminated", "truncated", "masks", "_info_row"):
            old = getattr(self, name)
            a = np.zeros((rows_new, *old.shape[1:]), dtype=old.dtype)
            a[:rows_old] = old
            setattr(self, name, a)

    def _record(self, row: int, slot: int, obs, info: dict, reset: bool) -> None:
        obs = np.asarray(obs)
        if obs.dtype != np.float32 or obs.shape != (self.n_obs,):  # pragma: no cover - the wrapper's Box
            raise RuntimeError(f"unexpected observation {obs.dtype} {obs.shape}")
        if reset:
            self._reset_obs[slot] = obs
        elif not np.array_equal(obs[self.fixed_pos], self._reset_obs[slot, self.fixed_pos]):  # pragma: no cover
            raise RuntimeError("an episode-fixed feature changed within the episode; the native env cannot batch it")
        self._obs[row] = obs[self.var_pos]
        self.masks[row] = self.oracle.action_masks()
        self._info_row[row] = self.infos.add(info)

    def _new_slot(self, case_id) -> int:
        """Record the reset of ``case_id`` (played through the real env, which validates the id) in a new slot."""
        slot = len(self._slot_ids)
        self._grow(slot + 1)
        obs, info = self.oracle.reset(options={"case_id": case_id})
        self._record(1 + slot * self.stride + self.entries, slot, obs, info, reset=True)
        self._slot_ids.append(case_id)
        self._slot_of_id[case_id] = slot
        self.recorded["cases"] += 1
        self._fresh = slot
        return slot

    def _record_step(self, slot: int, entry: int) -> None:
        """Play ``entry`` on the slot's case through the real env (reset + one macro step) and record it."""
        if self._fresh != slot:
            self.oracle.reset(options={"case_id": self._slot_ids[slot]})
        self._fresh = None
        obs, reward, terminated, truncated, info = self.oracle.step(entry)
        row = 1 + slot * self.stride + entry
        self.reward[row], self.terminated[row], self.truncated[row] = float(reward), bool(terminated), bool(truncated)
        self._record(row, slot, obs, info, reset=False)
        self.recorded["steps"] += 1

    def ensure(self, rows: np.ndarray) -> np.ndarray:
        """Record the rows not recorded yet; returns the info store rows of ``rows``."""
        if self._info_row is None:
            return rows
        info_rows = self._info_row[rows]
        missing = info_rows == 0
        if missing.any():
            for i in np.flatnonzero(missing):  # first visit of a (case, entry): play it through the real env
                r = int(rows[i])
                if self._info_row[r] == 0:
                    s, e = divmod(r - 1, self.stride)
                    self._record_step(s, e)
            info_rows = self._info_row[rows]
        return info_rows

    def precompute(self, case_ids: Sequence[str] | None = None, entries: Sequence[int] | None = None) -> dict:
        """Record ``case_ids`` (default: the pool) x ``entries`` (default: the menu) now (nothing to do with a table).

        Raises:
            ValueError: a case id the env refuses, an entry outside the menu.
        """
        ids = [c.case_id for c in self.cases] if case_ids is None else list(case_ids)
        entries = list(range(self.entries)) if entries is None else [int(e) for e in entries]
        if any(not 0 <= e < self.entries for e in entries):
            raise ValueError(f"entries must be menu indices 0..{self.entries - 1}, got {entries}")
        for cid in ids:
            s = self.slot_of_id(cid)
            self.ensure(np.array([1 + s * self.stride + e for e in entries], dtype=np.int64))
        return dict(self.recorded)

    # -- reading -----------------------------------------------------------------------------------------------

    def gather(self, rows: np.ndarray) -> np.ndarray | None:
        """``(len(rows), bytes)`` uint8: the packed records of ``rows`` (a fresh array; one random read per row), to
        pass as ``block`` to :meth:`observations`, :meth:`outcome` and :meth:`InfoStore.batch
        <fwgym.rl.infos.InfoStore.batch>`; ``None`` without a table (recorded rows are separate arrays)."""
        return None if self.record is None else self.record[rows]

    def _part(self, name: str, block: np.ndarray) -> np.ndarray:
        return record_part(block, self._fields[name])

    def outcome(self, rows: np.ndarray, block: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(reward (n,) float64, terminated, truncated (n,) bool)`` of ``rows``, fresh arrays; ``block``:
        :meth:`gather`'s records of ``rows``, when the caller has them."""
        if block is None:
            return self.reward[rows], self.terminated[rows], self.truncated[rows]
        return (self._part("reward", block).copy(), self._part("terminated", block).copy(),
                self._part("truncated", block).copy())

    def observations(self, rows: np.ndarray, slots: np.ndarray | None = None,
                     reset_block: np.ndarray | None = None, block: np.ndarray | None = None) -> np.ndarray:
        """``(len(rows), n)`` float32: the features of each row (a fresh array); ``slots``: the rows' slots, if known.

        ``reset_block``: the caller's own ``(len(rows), n)`` copy of the reset observations of the rows' slots, written
        over and returned (a contiguous block instead of a gather of the reset rows; the episode-fixed features are
        the reset's). ``block``: :meth:`gather`'s records of ``rows``, when the caller has them.
        """
        if reset_block is None:
            reset_block = self._reset_obs[(rows - 1) // self.stride if slots is None else slots]
        var = self._obs[rows] if block is None or "obs" not in self._fields else self._part("obs", block)
        if self.fixed_first:
            reset_block[:, len(self.fixed_pos):] = var
        else:
            reset_block[:, self.var_pos] = var
        return reset_block

    def reset_observations(self, slots: np.ndarray) -> np.ndarray:
        """``(len(slots), n)`` float32: the reset observations of ``slots`` (a fresh array)."""
        return self._reset_obs[slots]

    def observation(self, row: int) -> np.ndarray:
        """The features of one row, ``(n,)`` float32 (a fresh array)."""
        return self.observations(np.array([row], dtype=np.int64))[0]
