"""What an agent has seen in one episode, read from the raw observation stream: :class:`CaseMeta` (the
case metadata of the free ``catalog`` call) and :class:`EpisodeTracker` (plans, purchases, replays,
credits and calls left), plus the episode start every feature-based wrapper makes
(:func:`start_episode`: ``reset`` then :data:`CATALOG_CALL`). The numeric features of
:mod:`fwgym.rl.features` are a pure function of a tracker.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fwgym.core.cases import HISTORY_HOURS, parse_case_id
from fwgym.core.series import iso_to_hour
from fwgym.core.tariff import credits_for
from fwgym.tools import Catalog, ToolCall, ToolResult, parse_action

__all__ = ["CATALOG_CALL", "CaseMeta", "EpisodeTracker", "check_raw_env", "start_episode"]

#: the call every feature-based episode makes right after ``reset`` (free; counts as one call)
CATALOG_CALL: dict = {"tool": "catalog", "args": {}}
#: error codes of the env's terminal results (the episode has ended), whatever the tool
_TERMINAL_CODES = ("invalid_submission", "call_limit_exceeded", "abstained")


@dataclass(frozen=True)
class CaseMeta:
    """Visible metadata of the current case, read from the ``catalog`` tool result.

    Attributes:
        case_id, domain, lead, series_id, unit: as in :meth:`fwgym.core.cases.Case.summary`.
        as_of, last_visible: epoch hours (UTC).
        target_date: the (local) target date, from the case id.
        horizon: forecast steps covering the target (50 or 194).
        scale: mean of the visible history (raw units, > 0).
        budget: credits per episode; max_calls: tool-call limit.
        tools: tools this env allows; models: its priced forecast pool.
        min_context: ``{model: smallest context}`` of the pool.
    """

    case_id: str
    domain: str
    lead: str
    series_id: str
    unit: str
    as_of: int
    last_visible: int
    target_date: date
    horizon: int
    scale: float
    budget: int
    max_calls: int
    tools: tuple[str, ...]
    models: tuple[str, ...]
    min_context: dict = field(default_factory=dict)

    @classmethod
    def from_catalog(cls, result: Catalog) -> "CaseMeta":
        """Build from the ``result`` of a successful ``catalog`` call (:class:`~fwgym.tools.results.Catalog`).

        Raises:
            ValueError: the result lacks a field (not a catalog result).
        """
        try:
            case = result["case"]
            _, _, target_date, _ = parse_case_id(case["case_id"])
            return cls(case_id=case["case_id"], domain=case["domain"], lead=case["lead"], series_id=str(case["series_id"]),
                       unit=case["unit"], as_of=iso_to_hour(case["as_of"]), last_visible=iso_to_hour(case["last_visible"]),
                       target_date=target_date, horizon=int(case["horizon"]), scale=float(result["contract"]["scale"]),
                       budget=int(result["budget"]["budget"]), max_calls=int(result["calls"]["limit"]),
                       tools=tuple(result["tools"]), models=tuple(m["model"] for m in result["models"]),
                       min_context={m["model"]: int(m["min_context"]) for m in result["models"]})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a catalog result ({type(exc).__name__}: {exc})") from None


class EpisodeTracker:
    """What an agent has learned so far in one episode, updated from raw observations only.

    Call :meth:`reset` with the observation returned by ``env.reset`` and :meth:`update` with every
    action and the observation it produced. Tool results are read from ``info["tool_result"]`` when
    the step's ``info`` is passed (the env's structured result), else parsed from ``obs["last_result"]``.

    Attributes:
        meta: :class:`CaseMeta` once the ``catalog`` result has been seen, else ``None``.
        history: visible history, float32 (336,), raw units.
        budget_left: credits left (float); calls_left: tool calls left (int).
        available: ``{model: bool}`` for the env's pool (from catalog; set False by a
            ``model_unavailable`` error).
        plans: ``{method: {"decisions": [...], "expected_loss": float}}`` of classical plans seen.
        forecasts: ``{forecast_id: {"model", "covers_target", "decisions", "expected_loss"}}``
            (``decisions``/``expected_loss`` None until ``plan`` was called on it).
        bought: ``{model: forecast_id}`` of the first covering forecast bought per model.
        replays: ``{model: mean pinball loss / scale}``.
        last: the parsed last tool result (dict) or ``None``.
        terminated: the last update ended the episode (a submit, an abstain or a call beyond the limit).
        version: incremented by every :meth:`reset` and :meth:`update` (for caches of derived values).

    The features that are fixed within an episode (history, calendar, lead, domain, scale and the
    catalog's prices) are computed once per catalog result, i.e. per ``meta`` object: after editing
    ``history`` by hand, assign a new ``meta`` (e.g. ``dataclasses.replace(tracker.meta)``). The
    macro wrappers' action masks are cached per ``version``.
    """

    def __init__(self):
        self.meta: CaseMeta | None = None
        self.history = np.zeros(HISTORY_HOURS, dtype=np.float32)
        self.budget_left = 0.0
        self.calls_left = 0
        self.available: dict[str, bool] = {}
        self.plans: dict[str, dict] = {}
        self.forecasts: dict[str, dict] = {}
        self.bought: dict[str, str] = {}
        self.replays: dict[str, float] = {}
        self.last: ToolResult | None = None
        self.terminated = False
        self.version = getattr(self, "version", 0) + 1
        self._prices: dict[str, int] = {}
        self._static: tuple | None = None

    def reset(self, obs: dict) -> None:
        """Start a new episode from the ``reset`` observation."""
        self.__init__()
        self._read_obs(obs)

    def _read_obs(self, obs: dict) -> None:
        self.history = np.asarray(obs["history"], dtype=np.float32)
        b = obs["budget_left"]
        self.budget_left = float(b[0]) if type(b) is np.ndarray and b.shape == (1,) else float(np.asarray(b).reshape(-1)[0])
        self.calls_left = int(obs["calls_left"])

    def update(self, action: Any, obs: dict, info: dict | None = None) -> ToolResult | None:
        """Record ``action`` (the tool call just sent) and the observation it produced.

        Args:
            action: the tool call (JSON string or dict).
            obs: the raw observation the step returned.
            info: the step's ``info``; its ``tool_result`` (if any) is used instead of parsing
                ``obs["last_result"]`` (needed when the env has ``text_observations=False``).

        Returns:
            the parsed tool result (:class:`~fwgym.tools.results.ToolResult`) or ``None`` when
            there is none (``last_result`` empty or not JSON, no ``tool_result``).
        """
        self._read_obs(obs)
        self.version += 1
        res = info.get("tool_result") if info is not None else None
        if res is None:
            try:
                res = json.loads(obs["last_result"]) if obs["last_result"] else None
            except ValueError:
                res = None
        self.last = cast(ToolResult, res) if isinstance(res, dict) else None  # the env's result (or its JSON text)
        if self.last is None:
            return None
        # the env's result names the tool it ran ("invalid" for a malformed action); only a
        # model_unavailable error needs the action's own arguments
        tool, ok = self.last.get("tool"), bool(self.last.get("ok"))
        body = self.last.get("result") if ok else None
        error = self.last.get("error")
        code = error.get("code") if not ok and error else None
        if code in _TERMINAL_CODES or (ok and self.last.get("tool") == "submit"):
            self.terminated = True  # the env's terminal result (a refused, non-final submit is not)
        elif ok and tool == "catalog":
            cat = cast(Catalog, body)  # the catalog tool's result
            self.meta = CaseMeta.from_catalog(cat)
            self.available = {m["model"]: bool(m["available"]) for m in cat["models"]}
            self._prices = {m["model"]: int(m["credits_full_context_covering_horizon"])
                            for m in cat["models"] if "credits_full_context_covering_horizon" in m}
        elif ok and tool in ("classical_plan", "plan") and "method" in body:
            self.plans[body["method"]] = {"decisions": body["plan"]["decisions"], "expected_loss": float(body["expected_loss"])}
        elif ok and tool == "plan" and "forecast_id" in body:
            fc = self.forecasts.get(body["forecast_id"])
            if fc is not None:
                fc.update(decisions=body["plan"]["decisions"], expected_loss=float(body["expected_loss"]))
        elif ok and tool == "forecast":
            fid, model = body["forecast_id"], body["model"]
            self.forecasts[fid] = {"model": model, "covers_target": bool(body["covers_target"]),
                                   "decisions": None, "expected_loss": None}
            if body["covers_target"]:
                self.bought.setdefault(model, fid)
        elif ok and tool == "replay":
            self.replays.setdefault(body["model"], float(body["mean_pinball_loss_scaled"]))
        elif not ok and tool in ("forecast", "replay", "quote") and code == "model_unavailable":
            call = parse_action(action)
            model = call.args.get("model") if isinstance(call, ToolCall) else None
            if isinstance(model, str) and model in self.available:
                self.available[model] = False
        return self.last

    # -- derived quantities ----------------------------------------------------------------------

    def full_price(self, model: str) -> int:
        """Credits of a full-context (336) forecast covering the target horizon of this case (as the
        catalog quoted it for the env's pool; from the tariff for other models)."""
        p = self._prices.get(model)
        if p is None:
            p = self._prices[model] = credits_for(model, HISTORY_HOURS, self.meta.horizon)
        return p

    def bought_plan(self, model: str) -> dict | None:
        """The planned covering forecast bought from ``model`` (with decisions), or ``None``."""
        fid = self.bought.get(model)
        fc = self.forecasts.get(fid) if fid else None
        return fc if fc is not None and fc["decisions"] is not None else None


def check_raw_env(env: gym.Env, who: str) -> None:
    """Check that ``env`` is an fwgym decision env with the raw Dict observation and ``catalog``.

    Raises:
        TypeError: the observation space is not the raw FWBench Dict (e.g. already wrapped).
        ValueError: the env does not allow the ``catalog`` tool.
    """
    space = env.observation_space
    need = {"history", "last_result", "budget_left", "calls_left"}
    if not isinstance(space, spaces.Dict) or not need <= set(space.spaces):
        raise TypeError(f"{who} wraps the raw FWBench env (Dict observation with {sorted(need)}), got {space}")
    tools = getattr(env.unwrapped, "tools", ())
    if "catalog" not in tools:
        raise ValueError(f"{who} needs the 'catalog' tool (it reads the case metadata from it); the env allows {list(tools)}")


def start_episode(env: gym.Env, tracker: EpisodeTracker, seed: int | None, options: dict | None):
    """``env.reset`` then the free ``catalog`` call, feeding both observations to ``tracker``.

    Returns:
        ``(raw_obs, info)`` after the catalog call.

    Raises:
        RuntimeError: the catalog call failed, paid a reward or ended the episode (call limit 0).
    """
    obs, _ = env.reset(seed=seed, options=options)
    tracker.reset(obs)
    obs, reward, terminated, truncated, info = env.step(CATALOG_CALL)
    res = tracker.update(CATALOG_CALL, obs, info)
    if terminated or truncated or reward != 0.0 or res is None or not res.get("ok") or tracker.meta is None:
        raise RuntimeError(f"the catalog call after reset failed (terminated={terminated}, reward={reward}, "
                           f"result={obs['last_result'][:200]!r}); feature wrappers need max_calls >= 2")
    return obs, info
