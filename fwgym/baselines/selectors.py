"""Backtest selectors: pick one of the 8 free classical methods by its realised decision loss on
past windows inside the visible history, then submit that method's plan on the full history.

A selector sees only what every agent sees: the visible history (``observation["history"]``, 336
hourly values) and the episode's public facts (``info["episode"]`` of the env's reset, passed to
``reset(info)`` by :func:`fwgym.agents.run_episode`: the first forecast step of the target window
and the target weekday, which fixes the contract's shortage weights; without them it asks the free
``catalog`` tool once). It never reads the target. It ends with ``classical_plan(method)`` and
submits that plan unchanged (0 credits, 1 counted call; 2 with the catalog fallback).

Window layout
-------------
Positions are indices into the visible history, 0..335 (335 = the last visible hour,
``as_of - 3 h``). A window imitates a case: a pseudo decision time ``a`` (index; ``a = 338`` would be
the case's own ``as_of``), a cropped history that ends at ``a - 3`` (the protocol's 2 unseen hours), and
a 24-hour target that must lie inside the visible history (end at index <= 335).

* **Short-lead backtest** (:func:`short_lead_windows`, ``backtest_selector_4`` / ``_8``): the target is
  the day that starts at the pseudo decision time (forecast steps 3..26 after the crop). Pseudo
  decision times ``a_j = 290 - s (j - 1)``, ``j = 1..k``, spacing ``s = 96 / k`` hours (24 for k = 4,
  12 for k = 8; the 4 windows are a subset of the 8). ``a_1 = 290 = as_of - 48 h``, so window 1 is the
  last complete visible day ``[as_of - 48 h, as_of - 24 h)`` (for k = 4 every window is a whole day of
  the case's calendar; for k = 8 every other window starts 12 h later). The cropped history is
  *expanding*: every visible value before the crop (``[0, a_j - 2)``, 288 - s (j - 1) hours, >= 204).
* **Lead-matched** (:func:`lead_matched_windows`, ``lead_matched_selector``): the target starts
  ``24 x lead_days`` hours after the pseudo decision time, as in the case (steps 27..50 for
  day-ahead), and every window uses a fixed, shorter history of 192 hours (8 days: the shortest
  history on which all eight methods are defined; ``level_adjusted_weekly`` reads the 24 h one week
  before the last day). Four daily windows ``a_j = 266 - 24 (j - 1)``; window 1's target is again the
  day ``[as_of - 48 h, as_of - 24 h)``, window 4's history starts at index 0. A week-ahead window
  (170 unseen hours + 24 target hours + 192 history hours = 386 > 336) cannot fit inside the visible
  history, so week-ahead cases use the longest whole-day lead that fits four windows, which is one
  day (:data:`LEAD_MATCHED_MAX_LEAD_DAYS`); this is documented in the selector's ``lead_days_used``.

Every window is planned as its own small case: scale = mean of the window's history; the shortage
weights of the hours it covers under the contract's weekday calendar (what the contract would weigh
each hour if its day were the target day; see :func:`window_shortage`); the method's sample
distribution from :data:`CLASSICAL_METHODS` on the cropped history (relative hour indices: every
method uses only hour differences); the optimal plan from :func:`fwgym.core.optimizer.optimal_plan`; and
its realised decision loss against the visible values of the window's target hours (the realised
cost table of :func:`fwgym.core.optimizer.cost_table` with one sample, averaged over the plan's hours as
in :func:`fwgym.core.optimizer.plan_loss`). The selector picks the method with the least mean loss over
the windows (windows whose history mean is not > 0 are skipped); ties go to the alphabetically
first name. Window losses are cached by content (history, target values, weights), so windows shared
by several selectors or cases are scored once.

Known property: every cropped history is shorter than 336 hours, so ``weekday_empirical`` sees one
same-weekday value per hour in every window and scores exactly like ``weekly_repeat`` there (the tie
goes to ``weekday_empirical``, whose full-history plan uses both weeks).
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from fwgym.core.cases import GAP_HOURS, HISTORY_HOURS, parse_case_id
from fwgym.core.contract import N_BLOCKS, TARGET_HOURS, shortage_weights
from fwgym.forecasters.classical import CLASSICAL_METHODS, method_samples
from fwgym.core.optimizer import cost_table, optimal_plan, plan_loss
from fwgym.tools.results import ToolResult
from fwgym.validation import is_int

__all__ = ["AS_OF_INDEX", "MIN_METHOD_HISTORY", "LEAD_MATCHED_HISTORY", "LEAD_MATCHED_WINDOWS",
           "LEAD_MATCHED_MAX_LEAD_DAYS", "SHORT_LEAD_SPAN", "METHODS", "Window", "short_lead_windows",
           "lead_matched_windows", "window_shortage", "window_losses", "select_method", "contract_from_episode",
           "contract_from_catalog", "BacktestSelector", "backtest_selector", "lead_matched_selector"]

#: index the case's as_of would have in the visible history (last visible index 335 = as_of - 3 h)
AS_OF_INDEX = HISTORY_HOURS + GAP_HOURS  # 338
#: shortest cropped history on which all 8 classical methods are defined (hours)
MIN_METHOD_HISTORY = 192
#: fixed history length of the lead-matched windows (hours)
LEAD_MATCHED_HISTORY = 192
LEAD_MATCHED_WINDOWS = 4
#: the longest whole-day lead at which 4 lead-matched windows with 192-hour histories fit in 336 hours
LEAD_MATCHED_MAX_LEAD_DAYS = 1
SHORT_LEAD_SPAN = 96  #: hours spanned by the short-lead pseudo decision times (spacing = 96 / k)
METHODS: tuple[str, ...] = tuple(sorted(CLASSICAL_METHODS))  #: candidate order = tie-break order


@dataclass(frozen=True)
class Window:
    """One backtest window, in indices of the 336-hour visible history.

    Attributes:
        hist_start, hist_stop: the cropped history is ``history[hist_start:hist_stop]``.
        target_start: first of the 24 target indices (``target_start + 23 <= 335``).
    """

    hist_start: int
    hist_stop: int
    target_start: int

    def validate(self) -> None:
        """Raises ValueError when the window leaves the visible history or its history is too short."""
        if not (0 <= self.hist_start and self.hist_stop - self.hist_start >= MIN_METHOD_HISTORY
                and self.hist_stop <= self.target_start and self.target_start + TARGET_HOURS <= HISTORY_HOURS):
            raise ValueError(f"window {self} does not fit: needs >= {MIN_METHOD_HISTORY} history hours before the "
                             f"target and the target inside the {HISTORY_HOURS} visible hours")


def short_lead_windows(n_windows: int, history_hours: int | None = None) -> tuple[Window, ...]:
    """Windows of the short-lead backtest (module doc): pseudo decision times ``290 - s (j - 1)`` with
    ``s = 96 / n_windows``, targets at steps 3..26 after the crop, expanding histories.

    Args:
        n_windows: number of windows; ``96 / n_windows`` must be a whole number of hours and the oldest
            window must keep >= 192 history hours (4 and 8 are the benchmark's choices; 1..48 divisors of 96).
        history_hours: None (expanding: every visible hour before the crop) or a fixed length >= 192.

    Raises:
        ValueError: any other value.
    """
    if not is_int(n_windows) or n_windows < 1 or SHORT_LEAD_SPAN % n_windows:
        raise ValueError(f"n_windows must be a positive divisor of {SHORT_LEAD_SPAN} (e.g. 4 or 8), got {n_windows!r}")
    s = SHORT_LEAD_SPAN // int(n_windows)
    first = AS_OF_INDEX - 48
    out = []
    for j in range(int(n_windows)):
        a = first - s * j
        w = Window(0 if history_hours is None else a - GAP_HOURS - int(history_hours), a - GAP_HOURS, a)
        w.validate()
        out.append(w)
    return tuple(out)


def lead_matched_windows(lead_days: int, n_windows: int = LEAD_MATCHED_WINDOWS,
                         history_hours: int = LEAD_MATCHED_HISTORY) -> tuple[tuple[Window, ...], int]:
    """Windows of the lead-matched backtest (module doc) and the lead actually used.

    Args:
        lead_days: the case's lead in days (1 day-ahead, 7 week-ahead).
        n_windows: daily windows (default 4). history_hours: fixed history per window (default 192).

    Returns:
        ``(windows, lead_days_used)``; ``lead_days_used = min(lead_days, longest lead that fits)``.

    Raises:
        ValueError: ``lead_days < 1``, or no lead of at least one day fits.
    """
    if int(lead_days) != lead_days or lead_days < 1:
        raise ValueError(f"lead_days must be a positive integer, got {lead_days!r}")
    if history_hours < MIN_METHOD_HISTORY:
        raise ValueError(f"history_hours must be >= {MIN_METHOD_HISTORY}, got {history_hours}")
    # newest pseudo decision time a_1 (daily aligned with as_of) such that the oldest window's history
    # starts at index >= 0: a_k - 2 - history >= 0
    oldest = history_hours + GAP_HOURS
    oldest += (AS_OF_INDEX - oldest) % 24  # align to the case's day boundaries
    newest = oldest + 24 * (n_windows - 1)
    max_lead = (HISTORY_HOURS - TARGET_HOURS - newest) // 24
    used = min(int(lead_days), max_lead)
    if used < 1:
        raise ValueError(f"{n_windows} windows with {history_hours}-hour histories leave no room for a 1-day lead")
    out = []
    for j in range(n_windows):
        a = newest - 24 * j
        w = Window(a - GAP_HOURS - history_hours, a - GAP_HOURS, a + 24 * used)
        w.validate()
        out.append(w)
    return tuple(out), used


def window_shortage(target_weekday: int, case_target_start: int, window_target_start: int) -> np.ndarray:
    """Shortage weights of a window's 24 hours under the case's contract calendar.

    Hour ``u`` (index) lies ``d = floor((u - T) / 24)`` days from the case's target start ``T``, at
    position ``(u - T) mod 24`` of that day; its weight is the contract's weight of that position on a
    target day of weekday ``(target_weekday + d) mod 7`` (:func:`fwgym.core.contract.shortage_weights`), i.e.
    what the contract would charge for a shortage in that hour if its day were the target day.

    Args:
        target_weekday: weekday of the case's target date (Monday = 0).
        case_target_start: index of the case's first target hour (335 + first target step).
        window_target_start: index of the window's first target hour.

    Returns:
        float64 array (24,).
    """
    delta = np.arange(window_target_start, window_target_start + TARGET_HOURS) - case_target_start
    days, pos = np.floor_divide(delta, 24), np.mod(delta, 24)
    return _WEEK_TABLE[np.mod(target_weekday + days, 7), pos]


_WEEK_TABLE = np.stack([shortage_weights(d) for d in range(7)])  # (7, 24)
_CACHE: OrderedDict = OrderedDict()
_CACHE_MAX = 20_000  # windows (8 losses each)


def window_losses(history: np.ndarray, target_weekday: int, case_target_start: int,
                  windows: tuple[Window, ...], methods: tuple[str, ...] = METHODS) -> np.ndarray:
    """Realised decision loss of each method's optimal plan on each window (module doc).

    Args:
        history: the 336 visible values (raw units).
        target_weekday: weekday of the case's target date (Monday = 0).
        case_target_start: index of the case's first target hour (e.g. 335 + 27 for day-ahead).
        windows: from :func:`short_lead_windows` or :func:`lead_matched_windows`.
        methods: method names (default: the 8 free classical methods, sorted).

    Returns:
        float64 array (n_windows, n_methods) of mean hourly losses (normalised units); a row of NaN for
        a window whose history mean is not > 0.

    Raises:
        ValueError: a history that is not 336 finite values, or an unknown method.
    """
    h = np.ascontiguousarray(history, dtype=np.float64)
    if h.shape != (HISTORY_HOURS,) or not np.all(np.isfinite(h)):
        raise ValueError(f"history must be {HISTORY_HOURS} finite values, got shape {h.shape}")
    unknown = [m for m in methods if m not in CLASSICAL_METHODS]
    if unknown:
        raise ValueError(f"unknown classical methods {unknown}")
    if int(target_weekday) != target_weekday or not 0 <= target_weekday <= 6:
        raise ValueError(f"target_weekday must be 0..6, got {target_weekday!r}")
    out = np.empty((len(windows), len(methods)))
    for i, w in enumerate(windows):
        past = h[w.hist_start : w.hist_stop]
        actual = h[w.target_start : w.target_start + TARGET_HOURS]
        sw = window_shortage(int(target_weekday), int(case_target_start), w.target_start)
        # content key: the losses depend only on these values and the relative geometry, so windows
        # shared by several cases of a series (same hours) are scored once
        key = (hashlib.blake2b(past.tobytes() + actual.tobytes() + sw.tobytes(), digest_size=16).digest(),
               w.hist_stop - w.hist_start, w.target_start - w.hist_start)
        row = _CACHE.get(key)
        if row is None:
            row = _score_window(past, actual, sw, w.target_start - w.hist_start)
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.popitem(last=False)
            _CACHE[key] = row
        else:
            _CACHE.move_to_end(key)
        out[i] = [row[m] for m in methods]
    return out


_HOURS = np.arange(2 * HISTORY_HOURS, dtype=np.int64)


def _score_window(past: np.ndarray, actual: np.ndarray, sw: np.ndarray, offset: int) -> dict[str, float]:
    """``{method: realised loss}`` of every classical method on one window whose target starts
    ``offset`` hours after the first history hour (NaN if the history mean is not > 0)."""
    scale = float(past.mean())
    if not scale > 0:
        return {m: float("nan") for m in CLASSICAL_METHODS}
    realised = cost_table(actual.reshape(TARGET_HOURS, 1), scale, sw)
    past_hours, target_hours = _HOURS[: len(past)], _HOURS[offset : offset + TARGET_HOURS]
    idx = np.empty((len(CLASSICAL_METHODS), N_BLOCKS), dtype=np.int64)
    for k, m in enumerate(CLASSICAL_METHODS):
        idx[k] = optimal_plan(method_samples(m, past, past_hours, target_hours), scale, sw).plan.indices
    return {m: plan_loss(realised, idx[k]) for k, m in enumerate(CLASSICAL_METHODS)}


def select_method(losses: np.ndarray, methods: tuple[str, ...] = METHODS) -> str:
    """The method with the least mean loss over windows (NaN rows skipped); ties by name.

    Raises:
        ValueError: shape mismatch.
    """
    L = np.asarray(losses, dtype=np.float64)
    if L.ndim != 2 or L.shape[1] != len(methods):
        raise ValueError(f"losses must have shape (n_windows, {len(methods)}), got {L.shape}")
    ok = ~np.any(np.isnan(L), axis=1)
    mean = L[ok].mean(axis=0) if ok.any() else np.zeros(len(methods))
    return min(zip(mean.tolist(), methods))[1]


# -------------------------------------------------------------------------------------------------
# the target window's position and weekday


def contract_from_episode(episode: dict | None) -> tuple[int, int] | None:
    """``(first_target_step, target_weekday)`` from the episode's facts (``info["episode"]`` of the env's
    reset: ``target.steps`` and ``target.weekday``), or ``None`` without them."""
    target = (episode or {}).get("target")
    if not target:
        return None
    return int(target["steps"][0]), int(target["weekday"])


def contract_from_catalog(result: ToolResult) -> tuple[int, int]:
    """``(first_target_step, target_weekday)`` from a ``catalog`` tool result (the case id embeds the
    target date).

    Raises:
        RuntimeError: the result is an error.
    """
    if not result.get("ok"):
        raise RuntimeError(f"catalog failed: {result.get('error')}")
    case = result["result"]["case"]
    return int(case["target_steps"][0]), parse_case_id(case["case_id"])[2].weekday()


class BacktestSelector:
    """Choose a free classical method by backtest on the visible history, then submit its plan.

    Args:
        n_windows: number of short-lead windows (``mode="short_lead"``, default 4) or lead-matched
            windows (``mode="lead_matched"``, default 4).
        mode: ``"short_lead"`` or ``"lead_matched"`` (module doc).
        name: display name (default ``backtest_selector_<k>`` / ``lead_matched_selector``).

    Attributes (after an episode's first ``act``): ``choice`` (method name), ``losses`` (n_windows, 8),
    ``methods`` (column order), ``lead_days_used`` (lead-matched only).

    Raises:
        ValueError: unknown mode or impossible window count.
    """

    requires_hindsight = False

    def __init__(self, n_windows: int = 4, mode: str = "short_lead", name: str | None = None):
        if mode not in ("short_lead", "lead_matched"):
            raise ValueError(f"mode must be 'short_lead' or 'lead_matched', got {mode!r}")
        self.mode, self.n_windows = mode, int(n_windows)
        if mode == "short_lead":
            self._windows = short_lead_windows(self.n_windows)
        else:
            lead_matched_windows(1, self.n_windows)  # validates
            self._windows = None
        self.name = name or (f"backtest_selector_{self.n_windows}" if mode == "short_lead" else "lead_matched_selector")
        self.methods = METHODS
        self.reset()

    def reset(self, info: dict | None = None) -> None:
        """Start an episode; ``info`` is the env's reset info (its ``"episode"`` facts place the target
        window; without them the first action is a ``catalog`` call)."""
        self.choice = None
        self.losses = None
        self.lead_days_used = None
        self._stage = 0
        self._contract = contract_from_episode((info or {}).get("episode"))

    def act(self, observation: dict):
        last = json.loads(observation["last_result"]) if observation.get("last_result") else {}
        if self.choice is None:
            contract = self._contract
            if contract is None:
                if self._stage == 0:
                    self._stage = 1
                    return {"tool": "catalog"}
                contract = contract_from_catalog(last)
            self.choice = self._choose(np.asarray(observation["history"], dtype=np.float64), *contract)
            return {"tool": "classical_plan", "args": {"method": self.choice}}
        if not last.get("ok"):
            raise RuntimeError(f"{self.name}: classical_plan failed: {last.get('error')}")
        return {"tool": "submit", "args": {"decisions": last["result"]["plan"]["decisions"]}}

    def _choose(self, history: np.ndarray, first_step: int, target_weekday: int) -> str:
        case_target_start = HISTORY_HOURS - 1 + first_step
        if self.mode == "short_lead":
            windows = self._windows
        else:
            lead_days = max(1, round((first_step - GAP_HOURS - 1) / 24))
            windows, self.lead_days_used = lead_matched_windows(lead_days, self.n_windows)
        self.losses = window_losses(history, target_weekday, case_target_start, windows, self.methods)
        return select_method(self.losses, self.methods)


def backtest_selector(n_windows: int = 4) -> BacktestSelector:
    """``backtest_selector_<n>``: short-lead backtest over ``n`` windows (module doc)."""
    return BacktestSelector(n_windows, "short_lead")


def lead_matched_selector() -> BacktestSelector:
    """``lead_matched_selector``: 4 daily windows at the case's lead (capped at 1 day), 192-hour histories."""
    return BacktestSelector(LEAD_MATCHED_WINDOWS, "lead_matched")
