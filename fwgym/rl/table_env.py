"""The macro RL envs read from an outcome table: :class:`TableMacroEnv` (what :func:`fwgym.rl.make_rl_env` returns
when the split's table is built; ``outcome_table=False`` for the wrapped env itself).

It returns what :class:`~fwgym.rl.macro.MacroActionWrapper` (or :class:`~fwgym.rl.macro.SequentialMacroWrapper`)
over :class:`~fwgym.envs.fwbench.FWBenchEnv` returns (observations, rewards, terminations, truncations, infos,
``action_masks()``, the seeded case draws), every number read from the table the real env filled
(``tests/rl/test_outcomes.py`` compares the two). A macro episode is one step, all in the table. A sequential
table holds each episode's reset and first step; when the first step gathers information (the episode goes on), the
wrapped env is brought to that state (reset on the case, the same first entry: what the table recorded, replayed)
and plays the rest. Training only: ``fwgym evaluate`` plays the real env.
"""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np

__all__ = ["TableMacroEnv"]


def _fresh(value):
    """A container value copied (the table's values are shared; an episode's info must not alias another's)."""
    return copy.deepcopy(value) if type(value) in (list, dict, tuple) else value


class TableMacroEnv(gym.Env):
    """A macro env over an outcome table, equal to the wrapped env it was built from (module docstring).

    Args:
        oracle: the wrapped env of the same settings (its pool, weights, spaces and menu; never stepped).
        table: an :class:`~fwgym.rl.outcomes.OutcomeTable` matched to it, holding every case of its pool.

    Attributes:
        menu, cases, table; ``controller`` and ``tracker`` do not exist (no episode is played here).
    """

    metadata = {"render_modes": []}

    def __init__(self, oracle, table):
        from fwgym.rl.recorded import Outcomes

        self._oracle, self.table = oracle, table
        self._out = Outcomes(oracle, table)
        self.menu, self.cases = self._out.menu, self._out.cases
        self.observation_space, self.action_space = oracle.observation_space, oracle.action_space
        self.render_mode = None
        self._row: int | None = None
        self._running = False
        self._live = False  # the wrapped env plays the rest of this episode (a sequential episode past its first step)
        self._first: tuple | None = None  # (case id, first entry) of a sequential episode that goes on

    def __getattr__(self, name):
        if name in ("controller", "tracker"):
            raise AttributeError(f"an env read from an outcome table plays no episode and has no {name}; make it with "
                                 "make_rl_env(..., outcome_table=False) for the wrapped env")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def _info(self, row: int) -> dict:
        info = self._out.infos.row_dict(row)
        return {k: _fresh(v) for k, v in info.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """As the wrapped env: a case drawn with the aggregation weights (seeded), or ``options["case_id"]``.

        Raises:
            ValueError: unknown option keys, or a case id the env refuses or the table does not hold.
        """
        super().reset(seed=seed)
        options = dict(options) if options else {}
        unknown = set(options) - {"case_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; supported: ['case_id']")
        out = self._out
        if "case_id" in options:
            slot = out.slot_of_id(options["case_id"])
        else:
            u = self.np_random.random()
            idx = min(int(np.searchsorted(out.cum_weights, u, side="right")), len(out.cases) - 1)
            slot = int(out.slots_of_cases(np.array([idx]))[0])
        self._row = int(out.reset_rows(np.int64(slot)))
        self._running, self._live, self._first = True, False, None
        return out.observation(self._row), self._info(self._row)

    def step(self, action):
        """One macro step (the whole episode) read from the table.

        Raises:
            RuntimeError: no episode running (call ``reset()``).
            ValueError: ``action`` is not one integer menu index (as the wrapper's).
        """
        if not self._running:
            raise RuntimeError("call reset() before step() (the episode has ended)")
        a = np.asarray(action)
        E = len(self.menu)
        if a.size != 1 or a.dtype.kind not in "iu" or isinstance(action, (bool, np.bool_)):
            raise ValueError(f"a macro action is one integer index in 0..{E - 1} (an int or a 1-element integer array), "
                             f"got {action!r:.80}")
        i = int(a.reshape(-1)[0])
        if not 0 <= i < E:
            raise ValueError(f"macro index must be in 0..{E - 1}, got {action!r:.80}")
        out = self._out
        if self._first is not None:  # past the table's first step: the wrapped env, brought to the recorded state
            if not self._live:
                self._oracle.reset(options={"case_id": self._first[0]})
                self._oracle.step(self._first[1])
                self._live = True
            result = self._oracle.step(action)
            self._running = not (result[2] or result[3])
            return result
        row = self._row - E + i
        self._row = row
        self._running = not (bool(out.terminated[row]) or bool(out.truncated[row]))
        if self._running:
            self._first = (out.case_of_row(row), i)
        return out.observation(row), float(out.reward[row]), bool(out.terminated[row]), bool(out.truncated[row]), self._info(row)

    def action_masks(self) -> np.ndarray:
        """Boolean mask (E,) of the entries allowed now, as the wrapper's.

        Raises:
            RuntimeError: before the first ``reset()``.
        """
        if self._row is None:
            raise RuntimeError("TableMacroEnv.action_masks() before reset(): call env.reset() first (the masks depend "
                               "on the case's pool, prices and budget)")
        if self._live:
            return self._oracle.action_masks()
        return self._out.masks[self._row].copy()

    def close(self):
        self._oracle.close()
