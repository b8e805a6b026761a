"""Numeric observation features for reinforcement learning (DESIGN §9, issue 5).

Everything here is computed from the **raw observation stream** of an
:class:`~fwgym.envs.fwbench.FWBenchEnv` (``history``, ``last_result``, ``budget_left``, ``calls_left``)
and from nothing else: no :class:`~fwgym.core.cases.Case`, no ``hindsight()``. (The wrappers read the tool
result from ``info["tool_result"]``, the same dict that ``last_result`` carries as JSON, so that they
can run the env with ``text_observations=False`` and skip the text rendering.) The case
metadata (as_of, lead, target date, scale, budget, call limit, tools, model availability) comes from
one free ``catalog`` call that every feature-based episode makes right after ``reset``. Because the
features are a pure function of what an agent sees, a learned policy can rebuild them exactly from
the observations it receives in :func:`fwgym.agents.run_episode`
(:class:`fwgym.agents.sb3.SB3Agent`), and they cannot leak the target. What an episode has shown so
far is kept by :class:`~fwgym.rl.tracker.EpisodeTracker` (:mod:`fwgym.rl.tracker`, re-exported here).

Feature vector (``float32``, shape ``(N_FEATURES,) = (403,)``; bounds in :func:`feature_space`):

=========  ==========================================================================  ===========
index      feature                                                                     range
=========  ==========================================================================  ===========
0..335     ``history[i] / scale`` (scale = mean of the visible history); 335 = last       [0, 50]
           visible hour (as_of - 3 h)
336, 337   sin, cos of 2*pi*hour(as_of, UTC)/24                                         [-1, 1]
338..344   weekday of the target date, one-hot (Mon..Sun; local date for cycle hire)    {0, 1}
345, 346   sin, cos of 2*pi*(day of year of the target date - 1)/365.25                 [-1, 1]
347, 348   lead one-hot (day_ahead, week_ahead)                                         {0, 1}
349, 350   domain one-hot (electricity, cycle_hire)                                     {0, 1}
351        (log10(scale) + 2) / 8 (scale in raw units: MW or departures/hour)           [0, 1]
352        credits left / budget                                                        [0, 1]
353        tool calls left / call limit                                                 [0, 1]
354..381   per priced model, in :data:`~fwgym.forecasters.registry.PRICED_MODELS`       see below
           order (seasonal_empirical, chronos_bolt_tiny, chronos2, timesfm25), 7 each:
           +0 available (in this env's pool and its weights resolvable)                 {0, 1}
           +1 price of a full-context covering forecast / budget                        [0, 20]
           +2 affordable now (price <= credits left)                                    {0, 1}
           +3 a covering forecast was bought this episode                              {0, 1}
           +4 expected loss of the plan under that forecast (0 if none)                 [0, 10]
           +5 a replay of this model was bought this episode                            {0, 1}
           +6 the first such replay's mean pinball loss / scale (0 if none)             [0, 10]
382..397   per classical method, in :data:`~fwgym.forecasters.classical.CLASSICAL_METHODS`
           order, 2 each: +0 its plan is known (classical_plan or plan called)          {0, 1}
           +1 the plan's expected loss under the method's own distribution (0 if none)  [0, 10]
398        least expected loss among all plans seen (0 if none; NaN losses skipped)     [0, 10]
399        at least one plan is known                                                   {0, 1}
400        forecasts bought / 4 (every bought forecast, covering or not)                [0, 3]
401        models replayed / 4 (distinct models with a bought replay)                   [0, 3]
402        credits spent / budget                                                       [0, 1]
=========  ==========================================================================  ===========

``FEATURE_NAMES[i]`` names feature ``i``; :func:`feature_index` maps a name back. Expected losses
are in normalised units (the decision loss of DESIGN §3, demand divided by scale).

**Feature sets.** Wrappers take ``features="all"`` (the 403 above, default), ``"compact"`` or any
sequence of feature names (kept in the order given). ``"compact"`` (56 features) keeps the lead and
domain one-hots, ``log_scale``, the budget/call fractions and every model/method/summary feature
(indices 347..402 of the table), and drops the raw history and the calendar features
(as_of hour, target weekday, day of year). Reason, measured on the dev split (the pre-test split for
model selection): a ridge-regression method selector fitted on 5,000 train cases reached dev S 0.457
with the compact inputs, but 0.53-0.58 with the calendar and history inputs, which fit the train
years and do not transfer (best fixed policy on dev: 0.492).
"""
from __future__ import annotations

import math
from datetime import date
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fwgym.core.cases import HISTORY_HOURS, LEADS
from fwgym.domains import DOMAINS, domain_names
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS
from fwgym.rl.tracker import CATALOG_CALL, CaseMeta, EpisodeTracker, check_raw_env, start_episode

__all__ = ["FEATURE_SCHEMA", "FEATURE_DOMAINS", "FEATURE_VERSION", "check_feature_version", "CATALOG_CALL", "HISTORY_MAX", "LOSS_MAX", "PRICE_MAX", "MODEL_FIELDS", "METHOD_FIELDS",
           "WEEKDAYS", "FEATURE_NAMES", "N_FEATURES", "feature_index", "FEATURE_SETS", "resolve_features",
           "feature_space", "episode_fixed", "CaseMeta", "EpisodeTracker", "feature_vector", "check_raw_env", "start_episode",
           "FeatureObservation"]

#: bumped whenever the meaning or order of a feature changes
FEATURE_SCHEMA = 1
#: the domains with a one-hot slot: every domain registered when this module is first imported, the
#: protocol's first (:func:`fwgym.domains.domain_names`); register plug-in domains before importing fwgym.rl
FEATURE_DOMAINS: tuple[str, ...] = domain_names()
#: the feature version stored with trained models (:func:`check_feature_version`): :data:`FEATURE_SCHEMA`
#: when the slots are the protocol's two domains, else ``"<schema>+<domain>+..."`` naming every further slot
#: (a policy trained with other domain slots has another input layout)
FEATURE_VERSION: int | str = FEATURE_SCHEMA if FEATURE_DOMAINS == DOMAINS else \
    f"{FEATURE_SCHEMA}+" + "+".join(d for d in FEATURE_DOMAINS if d not in DOMAINS)

HISTORY_MAX = 50.0
LOSS_MAX = 10.0
PRICE_MAX = 20.0
MODEL_FIELDS = ("available", "price_frac", "affordable", "bought", "bought_expected_loss", "replayed", "replay_pinball_scaled")
METHOD_FIELDS = ("known", "expected_loss")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _names() -> tuple[str, ...]:
    names = [f"history_{i:03d}" for i in range(HISTORY_HOURS)]
    names += ["as_of_hour_sin", "as_of_hour_cos"] + [f"target_weekday_{d}" for d in WEEKDAYS]
    names += ["target_doy_sin", "target_doy_cos"] + [f"lead_{lead}" for lead in LEADS] + [f"domain_{d}" for d in FEATURE_DOMAINS]
    names += ["log_scale", "budget_left_frac", "calls_left_frac"]
    names += [f"model_{m}_{f}" for m in PRICED_MODELS for f in MODEL_FIELDS]
    names += [f"method_{m}_{f}" for m in CLASSICAL_METHODS for f in METHOD_FIELDS]
    names += ["best_expected_loss", "any_plan_known", "forecasts_bought_div4", "replays_div4", "spent_frac"]
    return tuple(names)


#: name of every feature, in order
FEATURE_NAMES: tuple[str, ...] = _names()
N_FEATURES = len(FEATURE_NAMES)
_INDEX = {n: i for i, n in enumerate(FEATURE_NAMES)}


def check_feature_version(stored: Any, where: str = "the policy") -> None:
    """Refuse a trained model whose stored ``feature_version`` is not this process's :data:`FEATURE_VERSION`.

    Raises:
        ValueError: the versions differ; the message names both and, when they differ in their domain
            slots, the domains each has.
    """
    if stored == FEATURE_VERSION:
        return
    msg = f"{where}: trained on fwgym features v{stored}; this fwgym computes v{FEATURE_VERSION}"
    schema = str(stored).split("+")[0]
    if schema == str(FEATURE_SCHEMA):
        theirs = [*DOMAINS, *str(stored).split("+")[1:]]
        msg += (f" (the same features with other domain one-hot slots: the policy has {theirs}, this process "
                f"{list(FEATURE_DOMAINS)}; register the same domains, in the same order, before importing fwgym.rl)")
    raise ValueError(msg)


def feature_index(name: str) -> int:
    """Index of feature ``name`` in the vector.

    Raises:
        KeyError: unknown feature name (see :data:`FEATURE_NAMES`).
    """
    try:
        return _INDEX[name]
    except KeyError:
        raise KeyError(f"unknown feature {name!r}; see fwgym.rl.features.FEATURE_NAMES") from None


def _bounds() -> tuple[np.ndarray, np.ndarray]:
    low = np.zeros(N_FEATURES, dtype=np.float32)
    high = np.ones(N_FEATURES, dtype=np.float32)
    high[:HISTORY_HOURS] = HISTORY_MAX
    for n in ("as_of_hour_sin", "as_of_hour_cos", "target_doy_sin", "target_doy_cos"):
        low[_INDEX[n]] = -1.0
    for m in PRICED_MODELS:
        high[_INDEX[f"model_{m}_price_frac"]] = PRICE_MAX
        high[_INDEX[f"model_{m}_bought_expected_loss"]] = LOSS_MAX
        high[_INDEX[f"model_{m}_replay_pinball_scaled"]] = LOSS_MAX
    for m in CLASSICAL_METHODS:
        high[_INDEX[f"method_{m}_expected_loss"]] = LOSS_MAX
    high[_INDEX["best_expected_loss"]] = LOSS_MAX
    high[_INDEX["forecasts_bought_div4"]] = 3.0
    high[_INDEX["replays_div4"]] = 3.0
    return low, high


_LOW, _HIGH = _bounds()

_CALENDAR = {"as_of_hour_sin", "as_of_hour_cos", "target_doy_sin", "target_doy_cos"} | {f"target_weekday_{d}" for d in WEEKDAYS}
#: named feature sets (see the module docstring)
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "all": FEATURE_NAMES,
    "compact": tuple(n for n in FEATURE_NAMES[HISTORY_HOURS:] if n not in _CALENDAR),
}


def resolve_features(features: str | Sequence[str] = "all") -> tuple[str, ...]:
    """Feature names of a set name (``"all"``, ``"compact"``) or of an explicit sequence of names.

    Raises:
        ValueError: unknown set name, unknown or repeated feature name, or an empty selection.
    """
    if isinstance(features, str):
        if features not in FEATURE_SETS:
            raise ValueError(f"unknown feature set {features!r}; expected one of {list(FEATURE_SETS)} or a list of names")
        return FEATURE_SETS[features]
    names = tuple(features)
    bad = [n for n in names if n not in _INDEX]
    if bad or not names or len(set(names)) != len(names):
        raise ValueError(f"features must be distinct names of FEATURE_NAMES (unknown: {bad[:5]}, n={len(names)})")
    return names


_INDICES_CACHE: dict = {}


def _indices(features: str | Sequence[str]) -> np.ndarray | None:
    key = features if isinstance(features, str) else tuple(features)
    hit = _INDICES_CACHE.get(key, False)
    if hit is False:
        names = resolve_features(features)
        hit = None if names == FEATURE_NAMES else np.array([_INDEX[n] for n in names], dtype=np.int64)
        if len(_INDICES_CACHE) < 1024:
            _INDICES_CACHE[key] = hit
    return hit


def episode_fixed(features: Sequence[str]) -> int:
    """How many leading names of ``features`` are fixed within an episode (once the catalog is known: history,
    calendar, lead, domain, scale, i.e. every feature before ``budget_left_frac``); the rest change with its steps.

    Raises:
        KeyError: an unknown feature name.
    """
    cut = _INDEX["budget_left_frac"]
    n = 0
    for name in features:
        if feature_index(name) >= cut:
            break
        n += 1
    return n


def feature_space(features: str | Sequence[str] = "all") -> spaces.Box:
    """The observation space of a feature set: ``Box(low, high, (n,), float32)`` (n = 403 for
    ``"all"``, 56 for ``"compact"``) with the per-feature bounds of the module table (every feature
    is clipped into them).

    Raises:
        ValueError: see :func:`resolve_features`.
    """
    idx = _indices(features)
    low, high = (_LOW, _HIGH) if idx is None else (_LOW[idx], _HIGH[idx])
    return spaces.Box(low=low.copy(), high=high.copy(), dtype=np.float32)





def feature_vector(tracker: EpisodeTracker, features: str | Sequence[str] = "all") -> np.ndarray:
    """The feature vector of the tracker's current state (see the module table).

    Args:
        tracker: the episode's :class:`EpisodeTracker` (after the catalog call).
        features: a feature set name or a sequence of feature names (default: all 403).

    Returns:
        float32 array (n,), clipped into :func:`feature_space` of the same set.

    Raises:
        RuntimeError: the tracker has not seen a ``catalog`` result yet.
        ValueError: see :func:`resolve_features`.
    """
    x = _full_vector(tracker)
    idx = _indices(features)
    return x if idx is None else x[idx]


_I = _INDEX
_I_WEEKDAY = {d: _I[f"target_weekday_{d}"] for d in WEEKDAYS}
_I_METHOD = {m: tuple(_I[f"method_{m}_{f}"] for f in METHOD_FIELDS) for m in CLASSICAL_METHODS}
#: features from here on change within an episode (budget, calls, models, methods, summary); the
#: ones before are fixed once the catalog is known (history, calendar, lead, domain, scale)
_DYNAMIC = _I["budget_left_frac"]
_N_DYNAMIC = N_FEATURES - _DYNAMIC
_MODEL0 = {m: _I[f"model_{m}_{MODEL_FIELDS[0]}"] - _DYNAMIC for m in PRICED_MODELS}  # offsets in the dynamic part
_METHOD0 = {m: _I[f"method_{m}_{METHOD_FIELDS[0]}"] - _DYNAMIC for m in CLASSICAL_METHODS}
_D_BUDGET_LEFT, _D_CALLS_LEFT, _D_BEST, _D_ANY_PLAN, _D_FORECASTS, _D_REPLAYS, _D_SPENT = (_I[n] - _DYNAMIC for n in (
    "budget_left_frac", "calls_left_frac", "best_expected_loss", "any_plan_known", "forecasts_bought_div4",
    "replays_div4", "spent_frac"))


_TAIL = HISTORY_HOURS  # features 336..351 (calendar, lead, domain, scale), offsets in the static tail
_T_HOUR = (_I["as_of_hour_sin"] - _TAIL, _I["as_of_hour_cos"] - _TAIL)
_T_DOY = (_I["target_doy_sin"] - _TAIL, _I["target_doy_cos"] - _TAIL)
_T_WEEKDAY = tuple(_I_WEEKDAY[d] - _TAIL for d in WEEKDAYS)
_T_ONE_HOT = {**{lead: _I[f"lead_{lead}"] - _TAIL for lead in LEADS}, **{d: _I[f"domain_{d}"] - _TAIL for d in FEATURE_DOMAINS}}
_T_LOG_SCALE = _I["log_scale"] - _TAIL


def _static_vector(tracker: EpisodeTracker) -> np.ndarray:
    """The whole vector with features 0..351 (history, calendar, lead, domain, scale; float32,
    clipped) filled in and the dynamic part 352..402 zero: the fixed part of an episode once the
    catalog is known, so computed once per episode (each step copies it and writes the dynamic part)."""
    meta = tracker.meta
    x = np.zeros(N_FEATURES, dtype=np.float32)
    hist = np.divide(tracker.history, meta.scale, dtype=np.float64)  # cleaned and clipped in float64, then stored
    if not math.isfinite(np.add.reduce(hist)):  # a finite sum means every value is finite
        np.nan_to_num(hist, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    x[:HISTORY_HOURS] = np.minimum(np.maximum(hist, 0.0, out=hist), HISTORY_MAX, out=hist)
    tail = [0.0] * (_DYNAMIC - _TAIL)  # all inside their bounds by construction
    hour, day = meta.as_of % 24, meta.target_date
    doy = day.toordinal() - date(day.year, 1, 1).toordinal()
    tail[_T_HOUR[0]], tail[_T_HOUR[1]] = math.sin(2 * math.pi * hour / 24), math.cos(2 * math.pi * hour / 24)
    tail[_T_WEEKDAY[day.weekday()]] = 1.0
    tail[_T_DOY[0]], tail[_T_DOY[1]] = math.sin(2 * math.pi * doy / 365.25), math.cos(2 * math.pi * doy / 365.25)
    for name in (meta.lead, meta.domain):
        if name in _T_ONE_HOT:
            tail[_T_ONE_HOT[name]] = 1.0
        elif name == meta.domain:
            raise ValueError(f"domain {name!r} has no feature slot (the slots are {list(FEATURE_DOMAINS)}): it was "
                             "registered after fwgym.rl.features was imported; register plug-in domains first (or "
                             "through the fwgym.domains entry point)")
    log_scale = (math.log10(max(meta.scale, 1e-12)) + 2.0) / 8.0
    tail[_T_LOG_SCALE] = min(max(log_scale, 0.0), 1.0) if math.isfinite(log_scale) else 0.0
    x[_TAIL:_DYNAMIC] = tail
    return x


def _fit(v: float | None, high: float) -> float:
    """``v`` as the vector stores it: None, NaN and +-inf -> 0, then clipped into [0, high] (every
    dynamic feature's lower bound is 0; -0.0 is stored as 0.0)."""
    if v is None or v != v or v == math.inf or v == -math.inf:
        return 0.0
    return 0.0 if v <= 0.0 else high if v > high else v


def _episode_parts(tracker: EpisodeTracker) -> tuple:
    """What stays fixed once the catalog is known, computed once per episode (per ``meta``):
    ``(meta, static vector, dynamic template, model rows)``. The template holds the price features
    (the catalog's prices, fixed for the episode) and zeros; a model row is ``(offset, model, price,
    in the env's pool)``."""
    meta = tracker.meta
    budget = meta.budget if meta.budget > 0 else 1
    template = [0.0] * _N_DYNAMIC
    rows = []
    for m, j in _MODEL0.items():
        full = tracker.full_price(m)
        template[j + 1] = _fit(full / budget, PRICE_MAX)
        rows.append((j, m, full, m in meta.models))
    return meta, _static_vector(tracker), template, tuple(rows)


def _dynamic_values(tracker: EpisodeTracker, template: list[float], rows: tuple) -> list[float]:
    """Features 352..402 (see the module table) as Python floats, already inside their bounds:
    ``template`` (:func:`_episode_parts`) with what changes within an episode written in."""
    meta = tracker.meta
    d = template.copy()
    left = tracker.budget_left
    if meta.budget > 0:
        d[_D_BUDGET_LEFT] = _fit(left / meta.budget, 1.0)
        d[_D_SPENT] = _fit((meta.budget - left) / meta.budget, 1.0)
    if meta.max_calls > 0:
        d[_D_CALLS_LEFT] = _fit(tracker.calls_left / meta.max_calls, 1.0)
    available, bought, replays = tracker.available, tracker.bought, tracker.replays
    for j, m, full, in_pool in rows:  # +0 available, +1 price, +2 affordable, +3 bought, +4 loss, +5 replayed, +6 pinball
        if in_pool:
            a = available.get(m, False)
            d[j] = 1.0 if a is True else 0.0 if a is False or a is None else _fit(float(a), 1.0)
            d[j + 2] = 1.0 if full <= left else 0.0
        if bought and m in bought:
            d[j + 3] = 1.0
            fc = tracker.bought_plan(m)
            d[j + 4] = _fit(fc["expected_loss"], LOSS_MAX) if fc else 0.0
        if replays and m in replays:
            d[j + 5] = 1.0
            d[j + 6] = _fit(replays[m], LOSS_MAX)
    known, best = _write_plans(tracker, d)
    if tracker.forecasts:
        d[_D_FORECASTS] = _fit(len(tracker.forecasts) / 4.0, 3.0)
    if known:
        d[_D_BEST] = _fit(best, LOSS_MAX)
        d[_D_ANY_PLAN] = 1.0
    if replays:
        d[_D_REPLAYS] = _fit(len(replays) / 4.0, 3.0)
    return d


def _write_plans(tracker: EpisodeTracker, d: list[float]) -> tuple[bool, float]:
    """Write each known classical plan's flag and expected loss into ``d``; return whether any plan or bought
    forecast's plan is known and the least expected loss among them (None and NaN losses are skipped)."""
    known, best = False, math.inf
    for m, p in tracker.plans.items():
        j = _METHOD0.get(m)
        if j is not None:
            v = p["expected_loss"]
            d[j], d[j + 1], known = 1.0, _fit(v, LOSS_MAX), True
            if v is not None and v < best:
                best = v
    for fc in (tracker.forecasts or {}).values():
        v = fc["expected_loss"]
        if v is not None:
            known = True
            if v < best:
                best = v
    return known, best


def _full_vector(tracker: EpisodeTracker) -> np.ndarray:
    meta = tracker.meta
    if meta is None:
        raise RuntimeError("features need the catalog result: send CATALOG_CALL right after reset and update the tracker")
    parts = tracker._static  # the visible history and the prices are the same at every step of an episode
    if parts is None or parts[0] is not meta:
        parts = tracker._static = _episode_parts(tracker)
    x = parts[1].copy()
    x[_DYNAMIC:] = _dynamic_values(tracker, parts[2], parts[3])
    return x



class FeatureObservation(gym.Wrapper):
    """Numeric observations for the raw FWBench env; actions stay JSON tool calls.

    ``reset`` makes one free ``catalog`` call (it counts as one tool call) and returns the feature
    vector of the module table; ``step(action)`` forwards the tool call and returns the new
    features. Rewards, termination and ``info`` are the inner env's.

    Observation: ``Box(n,)`` float32 (:func:`feature_space`; n = 403 by default). Action: the inner
    env's (Text).

    Args:
        env: an :class:`~fwgym.envs.fwbench.FWBenchEnv` (possibly inside Gymnasium's default
            wrappers) with the raw Dict observation.
        features: feature set name (``"all"``, ``"compact"``) or a sequence of feature names.

    Raises:
        TypeError, ValueError: see :func:`check_raw_env` and :func:`resolve_features`.
    """

    def __init__(self, env: gym.Env, features: str | Sequence[str] = "all"):
        check_raw_env(env, "FeatureObservation")
        super().__init__(env)
        self.features = resolve_features(features)
        self.observation_space = feature_space(self.features)
        self.tracker = EpisodeTracker()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        _, info = start_episode(self.env, self.tracker, seed, options)
        return feature_vector(self.tracker, self.features), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.tracker.update(action, obs, info)
        return feature_vector(self.tracker, self.features), reward, terminated, truncated, info
