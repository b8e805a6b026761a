"""A native vector env for the macro RL id (``FWBench-RL-Macro-v0``), as Gymnasium's ``CartPoleVectorEnv``.

``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)`` (``vectorization_mode`` ``None`` or ``"vector_entry_point"``)
returns a :class:`MacroVectorEnv`: N macro envs stepped per call with NumPy gathers over **per-case outcomes the
real env returned** (:class:`fwgym.rl.recorded.Outcomes`): read from the split's outcome table when one is built
(``fwgym rl build --split train``, :mod:`fwgym.rl.outcomes`; the default), else played the first time they are
drawn. It returns exactly what ``gym.vector.SyncVectorEnv`` over N ``gym.make("FWBench-RL-Macro-v0")`` envs returns
(observations, rewards, terminations, truncations, infos, ``action_masks()``, seeding and autoreset; proven by
``tests/rl/test_vector.py`` on >= 10,000 episodes, table and recording alike).

**Where the numbers come from.** Nothing here computes a loss, a plan or a score: every outcome was played through
one :class:`~fwgym.rl.macro.MacroActionWrapper` over :class:`~fwgym.envs.fwbench.FWBenchEnv` (the env's own tools,
ledger and scorer). This is for **training only**: ``fwgym evaluate`` and every reported number run the one
episode loop, never this cache. It assumes what holds for every fwgym forecaster, that a (case, entry) outcome is a
deterministic function of the case (a forecaster whose result varies between calls, or a timeout that fires
sometimes, would be recorded once).

**Seeding** is SyncVectorEnv's: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` (a list seeds each),
``seed=None`` continues each sub-env's own generator; each sub-env draws its case with its own
``np.random.Generator`` (Gymnasium's ``seeding.np_random``) exactly as ``FWBenchEnv.reset`` does (one uniform, the
pool's cumulative aggregation weights, ``searchsorted(side="right")``); the uniforms are drawn in blocks, which
gives the same sequence as one draw per reset.

**Autoreset**: ``autoreset_mode`` ``"next_step"`` (default, Gymnasium's and CartPoleVectorEnv's: the step after a
termination resets that sub-env, ignores its action and returns its reset observation and info with reward 0),
``"same_step"`` (the terminating step returns the new episode's reset observation and info, with
``info["final_obs"]`` and ``info["final_info"]``; what SB3 expects, see :class:`fwgym.rl.sb3_vec.SB3VecEnv`) or
``"disabled"`` (reset sub-envs yourself with ``reset(options={"reset_mask": mask})``). Every macro step ends its
episode.

**Infos** are Gymnasium's batched dicts (``info[key]`` an array over envs plus the ``info["_key"]`` mask, nested
dicts batched recursively; :class:`fwgym.rl.infos.InfoStore`). Every array, and every mutable value in an
object array (the ``levels`` lists), is a fresh copy: changing one changes no later step. ``infos=False`` returns
``{}`` instead (as ``CartPoleVectorEnv`` does; under same-step autoreset only ``final_obs``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from fwgym.validation import check_int, is_int

__all__ = ["MacroVectorEnv"]

#: uniforms drawn per sub-env generator at a time (the same sequence as one draw per reset)
_DRAW_BLOCK = 256
_MODES = {**{m.value: m for m in AutoresetMode}, **{m.name.lower(): m for m in AutoresetMode}}


class MacroVectorEnv(VectorEnv):
    """``num_envs`` macro RL envs (``FWBench-RL-Macro-v0``) stepped together with NumPy over outcome rows (see the
    module docstring).

    Observation: ``Box(num_envs, n)`` float32 (the features of the single env). Action: ``MultiDiscrete([12] *
    num_envs)`` (one :data:`~fwgym.rl.macro.SINGLE_MENU` index per env). :meth:`action_masks` gives ``(num_envs, 12)``
    bool (what ``SyncVectorEnv.call("action_masks")`` stacks).

    Args:
        num_envs: number of sub-envs (>= 1).
        autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` (``NEXT_STEP``, the default, ``SAME_STEP`` or
            ``DISABLED``), its value (``"NextStep"``, ...) or ``"next_step"``, ``"same_step"``, ``"disabled"``.
        variant: must be ``"macro"`` (the sequential menu has multi-step episodes: use ``SyncVectorEnv`` /
            ``AsyncVectorEnv`` over ``FWBench-RL-Sequential-v0``).
        infos: ``True`` (default): the batched infos, equal to SyncVectorEnv's. ``False``: ``{}`` (as
            ``CartPoleVectorEnv``; under same-step autoreset only ``final_obs`` / ``_final_obs``).
        outcome_table: ``"auto"`` (default: the split's table when built and current, :func:`fwgym.rl.outcomes.find_table`;
            said once when absent or stale), ``False`` (record from the env), or a table directory (it must match).
        **kwargs: :func:`fwgym.rl.make_rl_env` arguments (domain, split, lead, reward, features, cycle_hire_stations,
            budget, max_calls, tools, case_ids, models, forecasters, sigma ...).

    Attributes:
        recorded: ``{"cases": resets recorded, "steps": (case, entry) outcomes recorded}``: the episodes played
            through the real env so far (0 when reading a table). table: the outcome table read, or ``None``.

    Raises:
        ValueError: ``num_envs < 1``, an unknown autoreset mode, a variant other than ``"macro"``, a table that
            cannot serve the env (given by path), or any :func:`~fwgym.rl.make_rl_env` argument error.
    """

    def __init__(self, num_envs: int = 1, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 variant: str = "macro", infos: bool = True, outcome_table: Any = "auto", **kwargs):
        from fwgym.rl.env import make_rl_env, resolve_table
        from fwgym.rl.recorded import Outcomes

        num_envs = check_int("num_envs", num_envs, minimum=1)
        if not isinstance(autoreset_mode, AutoresetMode):
            if autoreset_mode not in _MODES:
                raise ValueError(f"autoreset_mode must be one of {list(_MODES)}, got {autoreset_mode!r}")
            autoreset_mode = _MODES[autoreset_mode]
        if not isinstance(infos, (bool, np.bool_)):
            raise ValueError(f"infos must be True or False, got {infos!r}")
        self.infos = bool(infos)
        if variant != "macro":
            raise ValueError(f"the native vector env is for the macro variant (one step per episode), got variant={variant!r}; "
                             "use gymnasium's SyncVectorEnv/AsyncVectorEnv for the sequential menu")
        self.num_envs = int(num_envs)
        self.autoreset_mode = autoreset_mode
        self.metadata = {"autoreset_mode": autoreset_mode, "render_modes": []}
        self.render_mode = None
        self._oracle = make_rl_env(variant="macro", outcome_table=False, **kwargs)  # the one episode loop
        self.table = resolve_table(self._oracle, "macro", outcome_table, kwargs)
        self.env_kwargs = dict(kwargs)
        self.single_observation_space = self._oracle.observation_space
        self.single_action_space = self._oracle.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.menu = self._oracle.menu
        self._n_entries = len(self.menu)
        self._out = Outcomes(self._oracle, self.table)
        self.cases = self._out.cases
        self._gens: list = [None] * self.num_envs
        self._u = np.zeros((self.num_envs, _DRAW_BLOCK), dtype=np.float64)
        self._u_pos = np.full(self.num_envs, _DRAW_BLOCK, dtype=np.int64)
        self._rows = np.zeros(self.num_envs, dtype=np.int64)  # each env's current row
        self._slots = np.zeros(self.num_envs, dtype=np.int64)  # each env's case slot
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._ever_reset = False
        self._all = np.arange(self.num_envs)
        self._lockstep: int | None = None  # the draw position of every env, while all are at the same one
        # a private copy of every env's reset observation, while every env is at its reset row (the next step's
        # observations are written over it instead of gathering the reset rows again)
        self._block: np.ndarray | None = None

    def _keep(self, obs: np.ndarray) -> np.ndarray:
        """Keep ``obs`` (every env's reset observation) as the block; returns a copy for the caller."""
        self._block = obs
        return obs.copy()

    @property
    def recorded(self) -> dict:
        return self._out.recorded

    def precompute(self, case_ids: Sequence[str] | None = None, entries: Sequence[int] | None = None) -> dict:
        """Record the outcomes of ``case_ids`` (default: the whole pool) x ``entries`` (default: the whole menu) now,
        through the real env, so that later steps on them are cache hits (nothing to do when reading a table).

        Returns:
            a copy of :attr:`recorded`.

        Raises:
            ValueError: a case id the env refuses, an entry outside the menu.
        """
        return self._out.precompute(case_ids, entries)

    # -- seeding and case draws ----------------------------------------------------------------

    def _draw(self, envs: np.ndarray) -> np.ndarray:
        """One uniform per env of ``envs`` from its own generator, as ``FWBenchEnv.reset`` draws it."""
        if envs is self._all and self._lockstep is not None:  # every env at the same place in its block
            p = self._lockstep
            if p < _DRAW_BLOCK:
                self._lockstep = p + 1
                return self._u[:, p]
        self._sync_positions()
        pos = self._u_pos[envs]
        refill = pos >= _DRAW_BLOCK
        if refill.any():
            for k in np.flatnonzero(refill):
                i = int(envs[k])
                if self._gens[i] is None:  # never seeded: gymnasium seeds from entropy on first use
                    self._gens[i], _ = seeding.np_random(None)
                self._u[i] = self._gens[i].random(_DRAW_BLOCK)
                pos[k] = 0
        u = self._u[envs, pos]
        self._u_pos[envs] = pos + 1
        self._lockstep = int(pos[0]) + 1 if envs is self._all and (pos == pos[0]).all() else None
        return u

    def _sync_positions(self) -> None:
        """Write the lock-step position back to every env (before a draw of some envs only)."""
        if self._lockstep is not None:
            self._u_pos[:] = self._lockstep
            self._lockstep = None

    def _reset_rows(self, envs: np.ndarray, case_id=None) -> np.ndarray:
        """The reset rows of ``envs``: ``case_id`` for all, or each env's weighted case draw."""
        out = self._out
        if case_id is not None:
            return np.full(len(envs), out.reset_rows(np.int64(out.slot_of_id(case_id))), dtype=np.int64)
        if envs is not self._all:
            self._sync_positions()
        return out.draw_reset_rows(self._draw(envs))

    # -- gymnasium API -------------------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env (or those of ``options["reset_mask"]``), seeded as SyncVectorEnv seeds (``seed + i``,
        a list, or ``None`` to continue each generator); ``options["case_id"]`` plays that case in every reset env.

        Returns:
            ``(observations (num_envs, n) float32, batched info)``.

        Raises:
            ValueError, TypeError: a seed list of the wrong length, a bad ``reset_mask``, unknown option keys, or a
                case id the env refuses (another split or domain, unknown).
        """
        n = self.num_envs
        if seed is None:
            seeds = [None] * n
        elif is_int(seed):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(f"If seeds are passed as a list the length must match num_envs={n} but got length={len(seeds)}.")
        options = dict(options) if options else {}
        reset_mask = options.pop("reset_mask", None)
        unknown = set(options) - {"case_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; supported: ['case_id', 'reset_mask']")
        if reset_mask is not None:
            if not isinstance(reset_mask, np.ndarray):
                raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
            if reset_mask.shape != (n,):
                raise ValueError(f"`options['reset_mask']` must have shape `({n},)`, got {reset_mask.shape}")
            if reset_mask.dtype != np.bool_:
                raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
            if not reset_mask.any():
                raise ValueError("`options['reset_mask']` must contain a boolean array with at least one True value, "
                                 f"got reset_mask={reset_mask}")
            envs = np.flatnonzero(reset_mask)
        else:
            envs = self._all
        if any(s is not None for s in seeds) or envs is not self._all:
            self._sync_positions()
        for i in envs:
            if seeds[i] is not None:
                self._gens[i], _ = seeding.np_random(seeds[i])
                self._u_pos[i] = _DRAW_BLOCK
        rows = self._reset_rows(envs, options.get("case_id"))
        self._rows[envs] = rows
        self._slots[envs] = self._out.slots_of_rows(rows)
        self._autoreset[envs] = False
        self._ever_reset = True
        info = {}
        if self.infos:
            info_rows = self._out.ensure(self._rows)
            info = self._out.infos.batch(info_rows, only=reset_mask)
        self._block = None
        if envs is self._all:
            return self._keep(self._out.reset_observations(self._slots)), info
        return self._out.observations(self._rows, self._slots), info

    def step(self, actions):
        """Step every sub-env with its menu index (under next-step autoreset, the envs whose episode ended at the
        previous step are reset instead and their actions ignored).

        Returns:
            ``(observations (num_envs, n) float32, rewards (num_envs,) float64, terminations, truncations
            (num_envs,) bool, batched info)``.

        Raises:
            RuntimeError: ``reset`` was never called.
            ValueError: ``actions`` is not ``num_envs`` integer indices of the menu.
            AssertionError: under ``autoreset_mode="disabled"``, a step of an env whose episode has ended (as
                SyncVectorEnv asserts).
        """
        if not self._ever_reset:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(actions)
        n, E, out = self.num_envs, self._n_entries, self._out
        if a.shape != (n,) or a.dtype.kind not in "iu":
            raise ValueError(f"actions must be {n} integer menu indices (shape ({n},)), got a {a.dtype} array of shape {a.shape}")
        mode = self.autoreset_mode
        block, self._block = self._block, None
        if mode == AutoresetMode.DISABLED:
            assert not self._autoreset.any(), f"{self._autoreset=}"
        resetting = self._autoreset if mode == AutoresetMode.NEXT_STEP and self._autoreset.any() else None
        if resetting is not None and resetting.all():  # every env resets (a macro step ends every episode)
            rows = self._reset_rows(self._all)
            self._rows = rows
            self._slots = slots = out.slots_of_rows(rows)
            self._autoreset = np.zeros(n, dtype=bool)
            info = out.infos.batch(out.ensure(rows)) if self.infos else {}
            return self._keep(out.reset_observations(slots)), np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), info
        act = a if resetting is None else a[~resetting]
        if (act.astype(np.uint64, copy=False) >= E).any():  # negative indices wrap to huge ones
            raise ValueError(f"macro index must be in 0..{E - 1}, got {int(act[(act < 0) | (act >= E)][0])}")
        rows = self._rows - E + a.astype(np.int64, copy=False)  # from each env's reset row to its entry's row
        slots = self._slots
        if resetting is not None:  # next-step autoreset of the envs that ended
            rows[resetting] = self._reset_rows(np.flatnonzero(resetting))
            slots = out.slots_of_rows(rows)
        info_rows = out.ensure(rows)
        records = out.gather(rows)  # with a table: each env's packed record, read once for the whole step
        reward, term, trunc = out.outcome(rows, records)
        if resetting is not None:
            reward[resetting], term[resetting], trunc[resetting] = 0.0, False, False
            self._rows, self._slots = rows, slots
            self._autoreset = term | trunc
            return (out.observations(rows, slots, block=records), reward, term, trunc,
                    out.infos.batch(info_rows, block=records) if self.infos else {})
        done = term | trunc
        if mode == AutoresetMode.SAME_STEP and done.any():
            envs = self._all if done.all() else np.flatnonzero(done)
            final = out.observations(rows, slots, block, records)
            final_obs = np.full(n, None, dtype=object)
            final_obs[envs] = np.fromiter((final[i] for i in envs), dtype=object, count=len(envs))
            new_rows = rows.copy()
            new_rows[envs] = self._reset_rows(envs)
            self._rows = new_rows
            self._slots = new_slots = out.slots_of_rows(new_rows)
            obs = self._keep(out.reset_observations(new_slots)) if envs is self._all else out.observations(new_rows, new_slots)
            if not self.infos:
                return obs, reward, term, trunc, {"final_obs": final_obs, "_final_obs": done.copy()}
            rest = out.infos.batch(out.ensure(new_rows))
            info = {"final_obs": final_obs, "_final_obs": done.copy(),
                    "final_info": out.infos.batch(info_rows, block=records) if envs is self._all else
                    out.infos.batch(info_rows, only=done), "_final_info": done.copy(), **rest}
            return obs, reward, term, trunc, info
        self._rows = rows
        self._autoreset = done
        obs = out.observations(rows, slots, block, records)
        return obs, reward, term, trunc, out.infos.batch(info_rows, block=records) if self.infos else {}

    def action_masks(self) -> np.ndarray:
        """``(num_envs, 12)`` bool: each sub-env's allowed menu entries now (all False for an env whose episode has
        just ended, until its reset), as the single env's ``action_masks()``.

        Raises:
            RuntimeError: before the first ``reset()`` (as the single env).
        """
        if not self._ever_reset:
            raise RuntimeError("MacroVectorEnv.action_masks() before reset(): call reset() first (the masks depend on "
                               "each sub-env's case)")
        return self._out.masks[self._rows]

    def call(self, name: str, *args, **kwargs) -> tuple:
        """``SyncVectorEnv.call`` for ``"action_masks"`` (a tuple of per-env masks).

        Raises:
            AttributeError: any other name (the sub-envs are rows of a table here, not env objects).
        """
        if name == "action_masks":
            return tuple(self.action_masks())
        raise AttributeError(f"MacroVectorEnv supports call('action_masks') only, got {name!r}")

    def close_extras(self, **kwargs):
        self._oracle.close()
