"""Discrete macro-actions over the FWBench tools, for stable-baselines3 (DESIGN §9, issue 5).

A macro is a whole tool sequence run inside one wrapper ``step`` through the inner env's own
``step`` (so every rule, charge and score is the env's). Two menus:

* :data:`SINGLE_MENU` (:class:`MacroActionWrapper`, 12 entries, one decision per episode):

  ====== =============================== ==================================================================
  index  name                            tool calls
  ====== =============================== ==================================================================
  0..7   ``plan_submit:<method>``        ``classical_plan(method)`` then ``submit`` of its plan (free),
                                         for each method of :data:`~fwgym.forecasters.classical.CLASSICAL_METHODS`
  8..11  ``buy_plan_submit:<model>``     ``forecast(model, context_steps=336, horizon=<covering>)``,
                                         ``plan(forecast_id)``, ``submit`` (charged at the tariff), for
                                         seasonal_empirical, chronos_bolt_tiny, chronos2, timesfm25
  ====== =============================== ==================================================================

* :data:`SEQUENTIAL_MENU` (:class:`SequentialMacroWrapper`, 28 entries): the 12 final entries above
  (a final entry reuses a plan or a forecast already obtained in the episode instead of calling again)
  plus information-gathering entries that do not end the episode:

  ====== =============================== ==================================================================
  12..19 ``inspect:<method>``            ``classical_plan(method)`` (free; its expected loss becomes a feature)
  20..23 ``replay:<model>``              ``replay(model, origin=last_visible - h, context_steps=336 - h,
                                         horizon=h)`` with ``h = min(covering horizon, 168)`` (charged):
                                         a backtest on the last visible hours, pinball loss as a feature
  24..27 ``buy:<model>``                 ``forecast(model, 336, covering horizon)`` then ``plan`` (charged)
  ====== =============================== ==================================================================

Every episode starts with one free ``catalog`` call (made by ``reset``; see
:mod:`fwgym.rl.features`), so an episode has ``max_calls - 1`` calls for macros.

**Masks.** :meth:`MacroActionWrapper.action_masks` (what sb3-contrib's ``MaskablePPO`` reads) marks
an entry invalid when its tools are not allowed, the model is not in the env's pool or its weights
are unavailable (``QuantileForecaster.availability()`` of the env's own forecaster, as reported by
``catalog``, or a ``model_unavailable`` error seen this episode), its price
(:func:`fwgym.core.tariff.price`) exceeds the credits left, too few calls are left (information entries
always keep one call in reserve for a final classical plan), or the information was already
gathered. **Choosing a masked entry ends the episode invalid** (the wrapper calls ``abstain`` with
the reason, status ``abstained``, so the protocol's invalid-plan loss applies): plain PPO, which
ignores masks, learns from that penalty; nothing silently falls back to another entry. An unmasked
final entry whose tool fails at run time (e.g. weights that fail to load) also ends invalid.

The same :class:`MacroController` drives the wrappers and the learned-policy agent
(:class:`fwgym.agents.sb3.SB3Agent`), which emits the macro's tool calls one by one on the
raw env, so a policy scores the same S in training wrappers and in ``fwgym evaluate``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fwgym.core.cases import HISTORY_HOURS
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS
from fwgym.core.series import hour_to_iso
from fwgym.core.tariff import credits_for
from fwgym.rl.features import feature_space, feature_vector, resolve_features
from fwgym.rl.tracker import CATALOG_CALL, EpisodeTracker, check_raw_env, start_episode

__all__ = ["REPLAY_MAX_HORIZON", "FINAL_KINDS", "MacroEntry", "SINGLE_MENU", "SEQUENTIAL_MENU", "MENUS", "menu_for",
           "replay_args", "calls_needed", "entry_valid", "menu_masks", "MacroProgram", "MacroController",
           "MacroActionWrapper", "SequentialMacroWrapper"]

#: the longest replay horizon used by ``replay:<model>`` entries
REPLAY_MAX_HORIZON = 168
FINAL_KINDS = ("plan_submit", "buy_plan_submit")
_TOOLS = {"plan_submit": ("classical_plan",), "inspect": ("classical_plan",), "buy_plan_submit": ("forecast", "plan"),
          "buy": ("forecast", "plan"), "replay": ("replay",)}


@dataclass(frozen=True)
class MacroEntry:
    """One menu entry.

    Attributes:
        name: ``"<kind>:<target>"``, e.g. ``"plan_submit:weekday_empirical"``.
        kind: ``plan_submit``, ``buy_plan_submit`` (final: end the episode), ``inspect``,
            ``replay`` or ``buy`` (information: the episode continues).
        target: a classical method (plan_submit, inspect) or a priced model (the others).
    """

    name: str
    kind: str
    target: str

    @property
    def final(self) -> bool:
        return self.kind in FINAL_KINDS


def _entries(kind: str, targets) -> tuple[MacroEntry, ...]:
    return tuple(MacroEntry(f"{kind}:{t}", kind, t) for t in targets)


#: one decision per episode: plan with a classical method or buy a forecast, then submit
SINGLE_MENU: tuple[MacroEntry, ...] = _entries("plan_submit", CLASSICAL_METHODS) + _entries("buy_plan_submit", PRICED_MODELS)
#: information gathering first (inspect / replay / buy), then a final entry
SEQUENTIAL_MENU: tuple[MacroEntry, ...] = (SINGLE_MENU + _entries("inspect", CLASSICAL_METHODS)
                                           + _entries("replay", PRICED_MODELS) + _entries("buy", PRICED_MODELS))
MENUS = {"macro": SINGLE_MENU, "sequential": SEQUENTIAL_MENU}


def menu_for(variant: str, models: Sequence[str] | None = None) -> tuple[MacroEntry, ...]:
    """The menu of ``variant`` over an env's forecast pool: the protocol menu (:data:`MENUS`) followed,
    for each model of ``models`` outside the protocol pool (statsmodels forecasters, plug-ins) in pool
    order, by its ``buy_plan_submit`` entry (``"macro"``) or its ``buy_plan_submit``, ``replay`` and
    ``buy`` entries (``"sequential"``, in that order). The protocol pool (``None``, the default) gives
    exactly :data:`SINGLE_MENU` / :data:`SEQUENTIAL_MENU`, so protocol indices never move.

    Raises:
        ValueError: unknown variant.
    """
    if variant not in MENUS:
        raise ValueError(f"variant must be one of {list(MENUS)}, got {variant!r}")
    extra = [m for m in (models or ()) if m not in PRICED_MODELS]
    kinds = ("buy_plan_submit",) if variant == "macro" else ("buy_plan_submit", "replay", "buy")
    return MENUS[variant] + tuple(MacroEntry(f"{k}:{m}", k, m) for m in extra for k in kinds)


def replay_args(tracker: EpisodeTracker, model: str) -> dict:
    """Arguments of the ``replay:<model>`` entry: horizon ``h = min(covering horizon, 168)``,
    origin ``last_visible - h`` (ISO), ``context_steps = 336 - h`` (the whole history before it)."""
    h = min(tracker.meta.horizon, REPLAY_MAX_HORIZON)
    return {"model": model, "origin": hour_to_iso(tracker.meta.last_visible - h), "context_steps": HISTORY_HOURS - h, "horizon": h}


def _forecast_call(tracker: EpisodeTracker, model: str) -> dict:
    return {"tool": "forecast", "args": {"model": model, "context_steps": HISTORY_HOURS, "horizon": tracker.meta.horizon}}


def _give_up(reason: str) -> dict:
    """End the episode invalid through the env's ``abstain`` tool, saying why."""
    return {"tool": "abstain", "args": {"reason": reason}}


def _submit(decisions) -> dict:
    return {"tool": "submit", "args": {"decisions": decisions}}


def calls_needed(entry: MacroEntry, tracker: EpisodeTracker) -> int:
    """Counted tool calls ``entry`` makes from the tracker's state (``submit`` is free)."""
    k, t = entry.kind, entry.target
    if k == "plan_submit":
        return 0 if t in tracker.plans else 1
    if k == "buy_plan_submit":
        return 0 if tracker.bought_plan(t) else (1 if t in tracker.bought else 2)
    return 2 if k == "buy" else 1


def entry_valid(entry: MacroEntry, tracker: EpisodeTracker) -> bool:
    """Whether ``entry`` is allowed now (the mask rule of the module docstring)."""
    meta = tracker.meta
    if meta is None or tracker.terminated:
        return False
    if any(tool not in meta.tools for tool in _TOOLS[entry.kind]):
        return False
    k, t = entry.kind, entry.target
    need = calls_needed(entry, tracker)
    if entry.final:
        if need > tracker.calls_left:
            return False
    else:
        has_free_final = bool(tracker.plans) or any(tracker.bought_plan(m) for m in tracker.bought)
        if need + (0 if has_free_final else 1) > tracker.calls_left:
            return False
    if k in ("plan_submit", "inspect"):
        return not (k == "inspect" and t in tracker.plans)
    # priced-model entries
    if t not in meta.models:
        return False
    if k == "buy_plan_submit" and t in tracker.bought:
        return True  # already paid for; planning/submitting is free
    if k == "buy" and t in tracker.bought or k == "replay" and t in tracker.replays:
        return False
    if not tracker.available.get(t, False):
        return False
    if k == "replay":
        a = replay_args(tracker, t)
        if a["context_steps"] < meta.min_context.get(t, 1):
            return False
        credits = credits_for(t, a["context_steps"], a["horizon"])
    else:
        credits = tracker.full_price(t)
    return credits <= tracker.budget_left


def menu_masks(menu: tuple[MacroEntry, ...], tracker: EpisodeTracker) -> np.ndarray:
    """Boolean mask (len(menu),): True where :func:`entry_valid`."""
    if tracker.meta is None or tracker.terminated:  # nothing is allowed (entry_valid's first rule)
        return np.zeros(len(menu), dtype=bool)
    return np.array([entry_valid(e, tracker) for e in menu], dtype=bool)


class MacroProgram:
    """The tool calls of one chosen entry, emitted one at a time from the tracker's state.

    Args:
        entry: the chosen :class:`MacroEntry`.
        valid: its mask value when chosen; an invalid choice only ever emits an ``abstain`` call.
    """

    def __init__(self, entry: MacroEntry, valid: bool):
        self.entry, self.valid = entry, valid
        self._sent: set[str] = set()

    def _once(self, key: str) -> bool:
        if key in self._sent:
            return False
        self._sent.add(key)
        return True

    def next_call(self, tracker: EpisodeTracker) -> dict | None:
        """The next tool call, or ``None`` when an information entry has finished.

        A final entry always ends with a ``submit`` of its plan, or with an ``abstain`` (episode
        invalid, reason given) when the entry was masked or a step failed (never a different plan).
        """
        if not self.valid:
            return _give_up(f"masked macro entry {self.entry.name!r} chosen (unavailable, unaffordable or not allowed)")
        k, t = self.entry.kind, self.entry.target
        if k == "plan_submit":
            if t in tracker.plans:
                return _submit(tracker.plans[t]["decisions"])
            return ({"tool": "classical_plan", "args": {"method": t}} if self._once("plan")
                    else _give_up(f"macro entry {self.entry.name!r}: classical_plan failed"))
        if k == "inspect":
            return {"tool": "classical_plan", "args": {"method": t}} if self._once("plan") else None
        if k == "replay":
            return {"tool": "replay", "args": replay_args(tracker, t)} if self._once("replay") else None
        # buy_plan_submit / buy
        fc = tracker.bought_plan(t)
        if fc is not None:
            return _submit(fc["decisions"]) if k == "buy_plan_submit" else None
        if t not in tracker.bought:
            if self._once("forecast"):
                return _forecast_call(tracker, t)
        elif self._once("plan"):
            return {"tool": "plan", "args": {"forecast_id": tracker.bought[t]}}
        return _give_up(f"macro entry {self.entry.name!r}: the forecast or its plan failed") if k == "buy_plan_submit" else None


class MacroController:
    """Menu, episode tracker and the running :class:`MacroProgram`: the state machine shared by
    the macro wrappers and :class:`~fwgym.agents.sb3.SB3Agent`.

    Protocol: ``start(reset_obs)`` returns the catalog call; after every env step call
    ``observe(call, obs)``; when ``next_call()`` returns ``None`` (no macro running) pick an entry
    from ``features()``/``action_masks()`` and ``choose(index)``; ``next_call()`` then yields its calls.

    Args:
        variant: ``"macro"`` (:data:`SINGLE_MENU`) or ``"sequential"`` (:data:`SEQUENTIAL_MENU`).
        features: feature set of :meth:`features` (``"all"``, ``"compact"`` or a sequence of names).
        models: the env's forecast pool; models outside the protocol's add entries after the protocol
            menu (:func:`menu_for`). Default: the protocol pool.

    Raises:
        ValueError: unknown variant or feature set.
    """

    def __init__(self, variant: str = "macro", features: str | Sequence[str] = "all",
                 models: Sequence[str] | None = None):
        self.variant = variant
        self.menu = menu_for(variant, models)
        self.feature_names = resolve_features(features)
        self.tracker = EpisodeTracker()
        self.program: MacroProgram | None = None
        self._masks: tuple | None = None

    def start(self, obs: dict) -> dict:
        """New episode from the ``reset`` observation; returns the first call (catalog)."""
        self.tracker.reset(obs)
        self.program = None
        return CATALOG_CALL

    def observe(self, call, obs: dict, info: dict | None = None) -> None:
        """Record a call sent to the env, the observation it produced and (optionally) the step's
        ``info`` (its ``tool_result`` is read instead of parsing ``obs["last_result"]``)."""
        self.tracker.update(call, obs, info)

    def features(self) -> np.ndarray:
        """:func:`~fwgym.rl.features.feature_vector` of the current state, float32 (n,)."""
        return feature_vector(self.tracker, self.feature_names)

    def action_masks(self) -> np.ndarray:
        """Boolean mask over the menu (True = allowed); recomputed only when the tracker changed."""
        key = (id(self.tracker), self.tracker.version)
        if self._masks is None or self._masks[0] != key:
            self._masks = (key, menu_masks(self.menu, self.tracker))
        return self._masks[1].copy()

    def choose(self, index) -> MacroEntry:
        """Start menu entry ``index`` (a masked entry ends the episode invalid through ``abstain``).

        Raises:
            ValueError: ``index`` is not one integer (an int, a NumPy integer or a 1-element integer
                array; floats, strings and bools are refused) or is outside ``0..len(menu)-1``.
        """
        a = np.asarray(index)
        if a.size != 1 or a.dtype.kind not in "iu" or isinstance(index, (bool, np.bool_)):
            raise ValueError(f"a macro action is one integer index in 0..{len(self.menu) - 1} (an int or a 1-element "
                             f"integer array), got {index!r:.80}")
        i = int(a.reshape(-1)[0])
        if not 0 <= i < len(self.menu):
            raise ValueError(f"macro index must be in 0..{len(self.menu) - 1}, got {index!r:.80}")
        entry = self.menu[i]
        self.program = MacroProgram(entry, bool(self.action_masks()[i]))
        return entry

    def next_call(self) -> dict | None:
        """Next tool call of the running macro, or ``None`` when none is running / it finished."""
        if self.program is None:
            return None
        call = self.program.next_call(self.tracker)
        if call is None:
            self.program = None
        return call


class MacroActionWrapper(gym.Wrapper):
    """Discrete macro-action env over the raw FWBench env, for stable-baselines3.

    Observation: ``Box(n,)`` float32 features (:mod:`fwgym.rl.features`; n = 403 for the
    default ``features="all"``, 56 for ``"compact"``).
    Action: ``Discrete(12)`` (:data:`SINGLE_MENU`; every step ends the episode) or, with
    ``variant="sequential"``, ``Discrete(28)`` (:data:`SEQUENTIAL_MENU`); an env whose ``models=`` pool
    holds models outside the protocol's adds 1 (macro) or 3 (sequential) entries per such model at the
    end (:func:`menu_for`).
    Reward: the sum of the inner env's rewards over the macro's tool calls (with the inner env's
    ``reward="dense"`` the episode sum is exactly ``-S``; with ``"terminal"`` it is ``-S`` at the end).
    ``info``: the inner env's, plus ``macro`` (entry name), ``macro_valid``, ``macro_steps`` (inner env
    steps this macro took, ``submit`` included) and
    ``action_mask`` (for the next decision). :meth:`action_masks` serves sb3-contrib's MaskablePPO.

    Args:
        env: the raw :class:`~fwgym.envs.fwbench.FWBenchEnv` (or ``gymnasium.make`` of an FWBench
            decision id); it must keep the protocol's ``invalid_submission="terminate"`` and allow
            ``catalog``. Scenario text of the Context envs is not part of the features.
        variant: ``"macro"`` (default) or ``"sequential"``.
        features: feature set (``"all"`` default, ``"compact"``, or a sequence of feature names).

    Raises:
        TypeError: ``env`` is not the raw Dict-observation env.
        ValueError: unknown variant, a forecast-task env, ``invalid_submission != "terminate"``,
            ``max_calls < 2``, or no ``catalog`` or ``classical_plan`` tool.
    """

    def __init__(self, env: gym.Env, variant: str = "macro", features: str | Sequence[str] = "all"):
        check_raw_env(env, type(self).__name__)
        inner = env.unwrapped
        if getattr(inner, "task", "decision") != "decision":
            raise ValueError("macro wrappers need a decision env (task='decision'); forecast envs submit quantiles")
        if getattr(inner, "invalid_submission", "terminate") != "terminate":
            raise ValueError("macro wrappers need invalid_submission='terminate' (a masked choice must end the episode invalid)")
        if getattr(inner, "max_calls", 12) < 2:
            raise ValueError("macro wrappers need max_calls >= 2 (one call goes to catalog at reset)")
        if "classical_plan" not in getattr(inner, "tools", ()):
            raise ValueError("macro wrappers need the 'classical_plan' tool: a free final entry must always be open "
                             "(without it every entry can be masked before the episode ends)")
        super().__init__(env)
        self.controller = MacroController(variant, features, getattr(inner, "models", None))
        self.menu = self.controller.menu
        self.observation_space = feature_space(self.controller.feature_names)
        self.action_space = spaces.Discrete(len(self.menu))
        self._max_inner_steps = 2 * getattr(inner, "max_calls", 12) + 8
        self._running = False

    @property
    def tracker(self) -> EpisodeTracker:
        return self.controller.tracker

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        _, info = start_episode(self.env, self.controller.tracker, seed, options)
        self.controller.program = None
        self._running = True
        return self.controller.features(), {**info, "action_mask": self.action_masks()}

    def action_masks(self) -> np.ndarray:
        """Boolean mask (n,) of the entries allowed now (see the module docstring)."""
        return self.controller.action_masks()

    def step(self, action):
        if not self._running:
            raise RuntimeError("call reset() before step() (the episode has ended)")
        ctl = self.controller
        entry = ctl.choose(action)
        valid = ctl.program.valid
        total, n, terminated, truncated, info = 0.0, 0, False, False, {}
        while (call := ctl.next_call()) is not None:
            obs, reward, terminated, truncated, info = self.env.step(call)
            ctl.observe(call, obs, info)
            total += float(reward)
            n += 1
            if terminated or truncated:
                break
            if n > self._max_inner_steps:  # pragma: no cover - guarded by the masks and the env's rules
                raise RuntimeError(f"macro {entry.name} did not finish within {n} tool calls")
        if entry.final and not (terminated or truncated):  # pragma: no cover - a final always submits
            raise RuntimeError(f"final macro {entry.name} did not end the episode")
        self._running = not (terminated or truncated)
        info = {**info, "macro": entry.name, "macro_valid": valid, "macro_steps": n, "action_mask": self.action_masks()}
        return ctl.features(), total, terminated, truncated, info


class SequentialMacroWrapper(MacroActionWrapper):
    """:class:`MacroActionWrapper` with the 28-entry :data:`SEQUENTIAL_MENU`: gather information
    (inspect classical plans, replays, purchases) over several steps, then choose a final entry.
    Episodes last at most ``max_calls`` steps (calls are reserved by the masks)."""

    def __init__(self, env: gym.Env, features: str | Sequence[str] = "all"):
        super().__init__(env, variant="sequential", features=features)
