"""The FWBench decision environment (DESIGN §7): one case per episode, JSON tool-call actions.

Observation (``gymnasium.spaces.Dict``):

* ``history``: Box(336,) float32, visible history in raw units (MW or departures/hour);
* ``context``: Text, the case context (:func:`fwgym.context.text.render_context`);
* ``last_result``: Text, compact JSON of the last tool result (``""`` after reset);
* ``budget_left``: Box(1,) float32, credits left;
* ``calls_left``: Discrete(max_calls + 1), tool calls left.

Action: a JSON tool call ``{"tool": NAME, "args": {...}}`` as a string (the ``Text`` action space)
or an already parsed dict. Malformed actions return an error result and count as a call.

Reward: ``reward="terminal"`` (default) pays ``-S`` at termination; ``reward="dense"`` pays the
credit part of S when credits are charged and the rest at termination, summing to ``-S``: in decision
envs ``-0.5 * credits / budget`` per charge and ``-0.5 * R`` at the end; in forecast envs
``-credit_weight * credits / budget`` per charge and ``-min(RCRPS, 5)`` at the end.

``info``: ``case_id``, ``calls``, ``credits``, ``budget_left``; after a step also ``tool_result``, the
tool result as a dict (what ``last_result`` carries as JSON); at termination the episode's outcome
(loss, floor, R, S, status, ...).

With ``text_observations=False`` the two Text fields are empty strings and nothing is rendered
(no context text, no JSON): numeric agents (the RL wrappers of :mod:`fwgym.wrappers`) read
``info["tool_result"]`` instead, which saves most of a step's cost.

An exception that escapes ``step`` (tools turn every agent error into a result, so this is an
interrupt such as Ctrl-C, or a bug) leaves the episode's ledger incomplete (a forecast may have been
charged without its call being counted or its dense reward paid): later ``step`` calls raise
``RuntimeError`` until ``reset``.

Termination: a ``submit`` (valid plan, or an invalid one when ``invalid_submission="terminate"``),
an ``abstain`` (status ``abstained``, invalid, with the agent's reason), or call ``max_calls + 1``
(status ``call_limit_exceeded``, invalid) when ``call_limit="terminate"``.
"""
from __future__ import annotations

import bisect
import copy
import string
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fwgym.core.cases import HISTORY_HOURS, Case, build_cases, get_case, parse_case_id
from fwgym.context.text import render_context
from fwgym.core.contract import ALPHA, DECISION_IDS, GRID_LEVELS, RAMP
from fwgym.envs.settings import (check_credit_weight, check_domains, check_episode_rules,
                                 check_forecast_timeout, resolve_tools)
from fwgym.envs.spaces import PrintableText
from fwgym.errors import HARNESS_ERROR
from fwgym.forecasters.covering import target_quantiles
from fwgym.forecasters.registry import check_models, get_forecaster
from fwgym.forecasters.store import active_store, open_store
from fwgym.core.optimizer import perfect_demand_plan
from fwgym.context.alpha import case_alpha
from fwgym.context.scenarios import make_scenario
from fwgym.core.series import hour_to_iso
from fwgym.core.metrics import task_metric
from fwgym.core.scorer import score_submission
from fwgym.core.scoring import BUDGET, case_weights, crps_ensemble, load_sigma, quantile_atoms
from fwgym.core.tariff import HORIZON_BUCKETS
from fwgym.tools import (MAX_CALLS, REGISTRY, TERMINATE, CallOutcome, Episode, ToolCall, ToolError,
                         parse_action, result_json)
from fwgym.tools.registry import pool_facts, tool_pool
from fwgym.tools.results import ToolResult
from fwgym.validation import check_int

__all__ = ["CHARSET", "MAX_TEXT", "FWBenchEnv", "RenderModeError"]

#: Characters of every Text space: all printable ASCII (space, newline and punctuation included).
CHARSET = string.printable
MAX_TEXT = 1 << 17


def _submission_json(submission) -> dict | None:
    """The terminal info's ``submission``: an accepted forecast as ``{"kind", "values"}`` (JSON lists,
    float64 values that read back bit for bit), ``None`` for a plan (its ``levels`` are the record's)
    and for an episode without an accepted answer."""
    if submission is None or not hasattr(submission, "kind"):
        return None
    return {"kind": submission.kind, "values": np.asarray(submission.values, dtype=np.float64).tolist()}


def _scenario_fields(scenario) -> dict:
    """The record's note metadata: ``context_types``, ``skills``, ``skeleton`` (``None`` without a scenario)."""
    if scenario is None:
        return {"context_types": None, "skills": None, "skeleton": None}
    return {"context_types": list(scenario.context_types), "skills": list(scenario.skills), "skeleton": scenario.skeleton}


def _short(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, control characters as ``?`` (render: the
    agent's tool names and arguments reach a terminal)."""
    text = "".join(ch if ch.isprintable() else "?" for ch in " ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _args_summary(args) -> str:
    """The key arguments of a tool call on one short line (render): scalars as ``k=v``, lists by length."""
    if not isinstance(args, dict):
        return ""
    parts = []
    for k, v in list(args.items())[:4]:
        if isinstance(v, (list, tuple)):
            parts.append(f"{_short(k, 20)}=[{len(v)}]")
        elif isinstance(v, dict):
            parts.append(f"{_short(k, 20)}={{...}}")
        else:
            parts.append(f"{_short(k, 20)}={_short(v, 30)}")
    return ", ".join(parts) + (", ..." if len(args) > 4 else "")


def _missing_cases_message(missing: list[str], split: str, domains, lead) -> str:
    """Why the ids are not in the pool (split, domains, lead), and where the first one is if it is a case."""
    where = f"split {split!r}, domain(s) {list(domains)}" + (f", lead {lead!r}" if lead else "")
    msg = f"case ids not in this env's pool ({where}): {missing[:5]}"
    try:
        case = get_case(missing[0])
    except ValueError as exc:
        return f"{msg}; {exc}"
    return f"{msg}; {missing[0]!r} is a case of split {case.split!r}"


class RenderModeError(ValueError, TypeError):
    """A render mode the env does not have. Also a ``TypeError``, as an env without that keyword raises, so that
    stable-baselines3 (``make_vec_env(id)`` and ``PPO(policy, id)`` first try ``render_mode="rgb_array"``) falls back
    to no rendering and reaches its real message (:data:`fwgym.envs.spaces.SB3_MESSAGE` for the text envs)."""


class FWBenchEnv(gym.Env):
    """Budgeted forecast-purchasing and capacity-decision environment on real data.

    Args:
        domain: ``"electricity"``, ``"cycle_hire"`` or a sequence of both (``FWBench-v0``).
        split: ``"train"`` (default: what a training script should see), ``"dev"`` (model selection) or
            ``"test"`` (the benchmark; ``fwgym evaluate`` and :func:`fwgym.evaluation.evaluate` default
            to it) or ``"sealed"`` (for agents with memory: no case's target in another case's prompt;
            :mod:`fwgym.core.cases`). A ``case_id`` of another split is refused at ``reset``.
        lead: ``None`` (both), ``"day_ahead"`` or ``"week_ahead"``.
        budget: credits per episode (default 113,726).
        max_calls: tool-call limit (default 12).
        reward: ``"terminal"`` or ``"dense"``.
        tools: allowed tool names (default: every registered tool).
        invalid_submission: ``"terminate"`` (protocol: an invalid plan is scored invalid) or
            ``"error"`` (an error result, counted as a call; the agent may resubmit).
        call_limit: ``"terminate"`` (protocol) or ``"error"`` (calls beyond the limit are refused
            free of charge; only ``submit`` and ``abstain`` are then accepted).
        case_ids: restrict the episode pool to these ids.
        sigma: per-domain sigma override (default: the frozen calibration).
        models: the priced forecast pool (default: the protocol's seasonal_empirical, chronos_bolt_tiny, chronos2,
            timesfm25; ``fwgym.forecasters.EXTENDED_MODELS`` adds the statsmodels forecasters; any name of
            ``fwgym.forecasters.known_models()``, plug-ins included).
        forecasters: ``{model: QuantileForecaster}`` overriding the process-wide instances, e.g.
            ``{"chronos2": Chronos2(local_dir="/models/chronos-2")}``.
        scenarios: attach a context scenario (:mod:`fwgym.context.scenarios`) to every case: its note joins the
            context and the scored target is the transformed one (Context and Forecast envs).
        scenario_seed: seed of the scenario draw (per case id).
        task: ``"decision"`` (submit 8 capacities, reward -S) or ``"forecast"`` (submit quantiles (24, 9)
            or samples (n, 24); reward ``-(min(RCRPS, 5) + credit_weight * credits / budget)``).
        credit_weight: cost weight on credits in forecast envs.
        forecast_timeout: seconds a forecast may take before the tool gives up with a ``backend_error``
            (the charge stands; the worker thread is abandoned). ``None`` waits indefinitely.
            Forecasters marked ``bounded`` (seasonal_empirical) run on the calling thread without it.
        text_observations: ``True`` (default) renders the ``context`` and ``last_result`` Text fields;
            ``False`` leaves them empty (the tool result stays available as ``info["tool_result"]``).
        forecast_store: a forecast store directory (or an open
            :class:`~fwgym.forecasters.store.ForecastStore`) that the priced tools read before running a
            forecaster (same credits, the same arrays; misses are computed live). ``None`` (default):
            the process-wide store of :func:`fwgym.forecasters.store.use_store`, if any. Either is
            verified here against this env's forecasters (shard digests, fingerprints).

    Raises:
        ValueError: unknown domain, split, lead, reward, tool or policy; empty case pool; a forecast
            store that cannot serve (:class:`~fwgym.forecasters.store.StoreError`: tampered shard,
            another forecaster's fingerprint).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        domain: str | Sequence[str] = "electricity",
        split: str = "train",
        lead: str | None = None,
        budget: int = BUDGET,
        max_calls: int = MAX_CALLS,
        reward: str = "terminal",
        tools: Sequence[str] | None = None,
        invalid_submission: str = TERMINATE,
        call_limit: str = TERMINATE,
        case_ids: Sequence[str] | None = None,
        sigma: dict[str, float] | None = None,
        models: Sequence[str] | None = None,
        forecasters: dict | None = None,
        scenarios: bool = False,
        scenario_seed: int = 0,
        task: str = "decision",
        credit_weight: float = 0.0,
        forecast_timeout: float | None = 300.0,
        render_mode: str | None = None,
        text_observations: bool = True,
        forecast_store=None,
    ):
        domains = check_domains(domain)
        check_episode_rules(split=split, lead=lead, reward=reward, invalid_submission=invalid_submission,
                            call_limit=call_limit, task=task)
        budget, max_calls = check_int("budget", budget, minimum=0), check_int("max_calls", max_calls, minimum=0)
        tools = resolve_tools(tools)
        models = check_models(models)  # default: the protocol's pool; names: fwgym.forecasters.known_models()
        forecasters = dict(forecasters or {})
        check_models(list(forecasters))
        self.models, self.forecasters = models, forecasters
        #: the pool as the tool schemas see it (each model's context range; fwgym.tools.registry.tool_pool)
        self.tool_pool = tool_pool(models, forecasters)
        self._pool_facts = pool_facts(self.tool_pool)
        self.forecast_store = None if forecast_store is None else open_store(forecast_store)
        store = self.forecast_store if self.forecast_store is not None else active_store()
        if store is not None:  # refuse a store that cannot serve now, not in the middle of an episode
            store.attach({m: forecasters.get(m) or get_forecaster(m) for m in models if m in store.models})
        credit_weight = check_credit_weight(credit_weight)
        self.scenarios, self.scenario_seed = bool(scenarios), int(scenario_seed)
        self.task, self.credit_weight = task, float(credit_weight)
        #: the task's metric: S = r_weight * R + credit_weight * credits / B (the scorer's and the dense reward's)
        self.metric = task_metric(task, self.credit_weight)
        forecast_timeout = check_forecast_timeout(forecast_timeout)
        self.forecast_timeout = forecast_timeout
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise RenderModeError(f"render_mode must be None or 'ansi', got {render_mode!r}")

        self.domains, self.split, self.lead = domains, split, lead
        self.budget, self.max_calls = int(budget), int(max_calls)
        self.reward_mode, self.tools = reward, tools
        self._tool_table = MappingProxyType({t: REGISTRY[t] for t in tools})  # what each episode allows
        self.invalid_submission, self.call_limit = invalid_submission, call_limit
        self.render_mode = render_mode
        if not isinstance(text_observations, (bool, np.bool_)):
            raise ValueError(f"text_observations must be True or False, got {text_observations!r}")
        self.text_observations = bool(text_observations)
        self.sigma = dict(sigma) if sigma is not None else load_sigma(domains=domains)

        pool: list[Case] = [c for d in domains for c in build_cases(d, split) if lead is None or c.lead == lead]
        if case_ids is not None:
            wanted = set(case_ids)
            pool = [c for c in pool if c.case_id in wanted]
            missing = wanted - {c.case_id for c in pool}
            if missing:
                raise ValueError(_missing_cases_message(sorted(missing), split, domains, lead))
        if not pool:
            raise ValueError("the case pool is empty")
        self.cases: tuple[Case, ...] = tuple(pool)
        self._case_index = {c.case_id: i for i, c in enumerate(pool)}
        self._weights = case_weights([
            {"case_id": c.case_id, "domain": c.domain, "cohort": c.cohort, "series_id": c.series_id, "lead": c.lead}
            for c in pool
        ])
        self._cum_weights: list[float] = np.cumsum(self._weights).tolist()  # a list: bisect needs no NumPy call

        self.observation_space = spaces.Dict({
            "history": spaces.Box(low=0.0, high=np.finfo(np.float32).max, shape=(HISTORY_HOURS,), dtype=np.float32),
            "context": PrintableText(max_length=MAX_TEXT, min_length=0, charset=CHARSET),
            "last_result": PrintableText(max_length=MAX_TEXT, min_length=0, charset=CHARSET),
            "budget_left": spaces.Box(low=0.0, high=float(self.budget), shape=(1,), dtype=np.float32),
            "calls_left": spaces.Discrete(self.max_calls + 1),
        })
        self.action_space = PrintableText(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.episode: Episode | None = None
        self._outcome: dict | None = None
        self._interrupted: str | None = None
        self._calls_log: list[tuple] = []  # render_mode="ansi" only: (tool, args summary, result summary, credits)

    # -- gymnasium API -------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode on a case drawn with the aggregation weights (seeded), or on
        ``options["case_id"]``.

        Returns:
            ``(observation, info)``. ``info`` holds ``case_id``, ``calls``, ``credits``, ``budget_left``
            and ``episode``: the episode's public facts as JSON-safe data, what the context text
            states in words, for agents that should not parse text (:func:`fwgym.agents.run_episode`
            passes ``info`` to ``agent.reset(info)``). Nothing in it is at or after ``as_of - 2 h``:

            * ``case``: :meth:`fwgym.core.cases.Case.summary` (case id, domain, series, unit, lead,
              ``as_of``, ``last_visible``, target start/end, ``horizon``, ``target_steps``, ``scale``,
              split, cohort);
            * ``history``: ``{"start", "end", "hours"}``, the visible window (ISO UTC hour starts,
              both inclusive; ``hours`` = 336 = the length of the ``history`` observation);
            * ``target``: ``{"date", "weekday" (Monday = 0), "start", "end" (exclusive), "steps"
              ([first, last] 1-based forecast steps after the last visible hour)}``;
            * ``contract``: ``{"decision_ids", "normalised_grid" (33 levels), "scale", "unit", "ramp",
              "surplus_price", "shortage_weights" (24)}`` in decision envs, ``None`` in forecast envs;
            * ``task``, ``tools`` (names, ``submit`` and ``abstain`` included), ``budget`` (credits),
              ``max_calls``;
            * ``pool``: the forecast pool the priced tools sell, ``[{"model", "min_context",
              "max_context", "tariff": {context bucket: [credits per horizon bucket]}}]``
              (:func:`fwgym.tools.registry.pool_facts`; what the tool schemas are built from), and
              ``horizon_buckets`` (24, 64, 96, 192, 240, 336: the tariff's columns).

        Raises:
            ValueError: unknown ``case_id``, a case of another domain or split than the env's, or
                unknown option keys.
        """
        super().reset(seed=seed)
        options = dict(options) if options else {}
        unknown = set(options) - {"case_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; supported: ['case_id']")
        if "case_id" in options:
            cid = options["case_id"]
            if cid in self._case_index:
                case = self.cases[self._case_index[cid]]
            else:  # a case the pool leaves out (another lead, not in case_ids): same domain and split only
                if parse_case_id(cid)[0] not in self.domains:  # raises a clear ValueError for malformed ids
                    raise ValueError(f"case {cid!r} is not of this env's domain(s) {list(self.domains)}")
                try:
                    case = get_case(cid, split=self.split)
                except ValueError:
                    other = get_case(cid)  # raises a clear ValueError for ids in no split
                    raise ValueError(f"case {cid!r} is in the {other.split!r} split; this env plays the {self.split!r} "
                                     f"split (make it with split={other.split!r} to play that case)") from None
        else:
            u = self.np_random.random()  # bisect_right == np.searchsorted(side="right")
            case = self.cases[min(bisect.bisect_right(self._cum_weights, u), len(self.cases) - 1)]
        scenario = make_scenario(case, self.scenario_seed) if self.scenarios else None
        # the forecasters that serve this episode's pool (the env's overrides, else the process-wide instances),
        # looked up once per episode rather than at every priced call
        forecasters = {m: self.forecasters.get(m) or get_forecaster(m) for m in self.models}
        self.episode = Episode(case=case, budget=self.budget, max_calls=self.max_calls, tools=self._tool_table,
                               models=self.models, forecasters=forecasters, task=self.task, scenario=scenario,
                               forecast_timeout=self.forecast_timeout, call_limit=self.call_limit,
                               invalid_submission=self.invalid_submission, forecast_store=self.forecast_store)
        self._outcome = None
        self._interrupted = None
        self._context = None
        self._calls_log = []
        self._history_obs = np.asarray(case.history, dtype=np.float32)
        info = self._info()
        info["episode"] = self._episode_facts(case)
        return self._observation(None), info

    def _episode_facts(self, case: Case) -> dict:
        """``info["episode"]`` of :meth:`reset` (JSON-safe; built from the case and the env's settings only)."""
        summary = case.summary()
        contract = None
        if self.task == "decision":
            contract = {"decision_ids": list(DECISION_IDS), "normalised_grid": list(GRID_LEVELS), "scale": case.scale,
                        "unit": summary["unit"], "ramp": RAMP, "surplus_price": ALPHA,
                        "shortage_weights": case.shortage.tolist()}
        return {
            "case": summary,
            "history": {"start": hour_to_iso(case.history_start), "end": summary["last_visible"], "hours": HISTORY_HOURS},
            "target": {"date": case.target_date.isoformat(), "weekday": case.target_weekday,
                       "start": summary["target_start"], "end": summary["target_end"], "steps": list(case.target_steps)},
            "contract": contract,
            "task": self.task,
            "tools": list(self.tools),
            "budget": self.budget,
            "max_calls": self.max_calls,
            # the note's CiK context types and skills (never its family, effect or values)
            "scenario": self.episode.scenario.metadata() if self.episode.scenario is not None else None,
            "pool": copy.deepcopy(self._pool_facts),
            "horizon_buckets": list(HORIZON_BUCKETS),
        }

    def step(self, action: Any):
        """One tool call: parse the action, let the episode ledger count, run and charge it
        (:meth:`fwgym.tools.Episode.apply`), pay the dense credit reward, and score the episode when
        the call ends it."""
        ep = self.episode
        if ep is None or self._outcome is not None:
            raise RuntimeError("call reset() before step() (the episode has ended)")
        if self._interrupted is not None:
            raise RuntimeError(f"call reset() before step(): a step of this episode was interrupted ({self._interrupted}), "
                               "so its ledger, call count and rewards are incomplete")
        try:
            call = parse_action(action)
            outcome = ep.apply(call)
            if self.render_mode == "ansi":
                self._log_call(call, outcome)
            reward = self._credit_reward(outcome.charged)
            if outcome.ends is None:
                return self._observation(outcome.result), reward, False, False, self._info(outcome.result)
            obs, r, terminated, truncated, info = self._terminate(outcome.ends, outcome.reason, tool=outcome.tool)
            return obs, r + reward, terminated, truncated, info
        except BaseException as exc:  # tools never raise for agent input: this is an interrupt (Ctrl-C, a signal) or a bug
            self._interrupted = type(exc).__name__
            raise

    def render(self) -> str | None:
        """The episode so far as text, with ``render_mode="ansi"`` (``None`` otherwise, or before ``reset``).

        Lines: the case (id, domain, series, lead, split, cohort), the decision time, visible window and
        target window, the scale, the task and scenario, calls used and left, credits spent and left,
        every tool call with its key arguments, its result (``ok``, the forecast id, or ``error`` and the
        code) and its charge; then the submitted plan (levels) or forecast (its kind, shape and median
        range) and, once the episode has ended, its status and score (decision loss or RCRPS, floor, R, S).
        Nothing the agent cannot see before the end is shown before the end (no target value, no floor).
        """
        if self.render_mode != "ansi" or self.episode is None:
            return None
        ep, case = self.episode, self.episode.case
        s = case.summary()
        lines = [f"FWBench episode {case.case_id}",
                 f"  {case.domain} {case.series_id} ({s['series_name']}), {case.lead}, split {case.split}, "
                 f"cohort {case.cohort}",
                 f"  as_of {s['as_of']}; visible {hour_to_iso(case.history_start)} .. {s['last_visible']}; target "
                 f"{s['target_start']} .. {s['target_end']} (steps {case.target_steps[0]}..{case.target_steps[1]})",
                 f"  scale {case.scale:.6g} {s['unit']}; task {self.task}"
                 + (f"; scenario {ep.scenario.family}" if ep.scenario is not None else ""),
                 f"  calls {ep.calls}/{ep.max_calls} ({ep.calls_left} left); credits {ep.spent:,}/{ep.budget:,} "
                 f"({ep.budget_left:,} left)"]
        lines.append("tool calls:" if self._calls_log else "tool calls: none yet")
        for i, (tool, args, result, credits) in enumerate(self._calls_log, 1):
            lines.append(f"  {i:2d}. {tool}{'(' + args + ')' if args else ''} -> {result}"
                         + (f" [{credits:,} credits]" if credits else ""))
        lines.append(self._render_answer())
        out = self._outcome
        if out is not None:
            if self.task == "forecast":
                score = f"RCRPS {out['loss']:.5f}, R {out['R']:.4f}, S {out['S']:.4f}" if out.get("S") is not None else ""
            else:
                score = (f"loss {out['loss']:.5f}, floor {out['floor']:.5f}, R {out['R']:.4f}, S {out['S']:.4f}"
                         if out.get("S") is not None else "")
            lines.append(f"episode over: {out['status']}, {'valid' if out['valid'] else 'invalid'}"
                         + (f" ({_short(out['reason'], 120)})" if out.get("reason") else "")
                         + (f"; {score}" if score else " (not scored)"))
        return "\n".join(lines) + "\n"

    def _render_answer(self) -> str:
        sub = self.episode.submission
        if sub is None:
            return "answer: none submitted yet" if self._outcome is None else "answer: none accepted"
        if hasattr(sub, "kind"):
            v = np.asarray(sub.values, dtype=np.float64)
            median = v[:, v.shape[1] // 2] if sub.kind == "quantiles" else np.median(v, axis=0)
            return (f"submitted forecast: {sub.kind} {v.shape[0]}x{v.shape[1]}, median {median.min():.6g} .. "
                    f"{median.max():.6g} over the 24 target hours")
        levels = getattr(sub, "levels", None)
        if levels is None:
            return "submitted plan"
        return "submitted plan (levels b00..b07): " + " ".join(f"{x:.2f}" for x in levels)

    def _log_call(self, call: ToolCall | ToolError, outcome: CallOutcome) -> None:
        """Note one call for :meth:`render` (tool, key arguments, result code, charge)."""
        if isinstance(call, ToolCall):
            tool, args = call.tool, _args_summary(call.args)
        else:
            tool, args = "invalid", ""
        res = outcome.result
        if res is None:
            result = "not run"
        elif res.get("ok"):
            body = res.get("result") if isinstance(res.get("result"), dict) else {}
            fid = body.get("forecast_id") if tool == "forecast" else None
            result = "ok" + (f" {fid}" if isinstance(fid, str) else "")
        else:
            error: Mapping[str, Any] = res.get("error") or {}
            result = f"error {error.get('code', '?')}"
        if outcome.ends is not None:
            result += f", ends the episode ({outcome.ends})"
        self._calls_log.append((_short(str(tool), 40), args, result, int(outcome.charged)))

    # -- helpers -------------------------------------------------------------------------------

    @property
    def context(self) -> str:
        """The current case's context text (rendered once per episode)."""
        if self._context is None:
            ep = self.episode
            self._context = render_context(ep.case, self.budget, self.max_calls, self.tools,
                                           ep.scenario.text if ep.scenario is not None else None, self.task)
        return self._context

    def _observation(self, result: ToolResult | None) -> dict:
        ep = self.episode
        if self.text_observations:
            context = self.context
            last_result = "" if result is None else result_json(result)
            if len(last_result) > MAX_TEXT:  # not reached by any tool (results and messages are capped); kept valid JSON
                last_result = result_json({"tool": str(result.get("tool"))[:60], "ok": False, "error": {
                    "code": "result_too_long", "message": f"the result has {len(last_result)} characters (limit {MAX_TEXT})"}})
        else:
            context = last_result = ""
        return {
            "history": self._history_obs.copy(),
            "context": context,
            "last_result": last_result,
            "budget_left": np.array([ep.budget_left], dtype=np.float32),
            "calls_left": np.int64(ep.calls_left),
        }

    def _info(self, result: ToolResult | None = None) -> dict:
        ep = self.episode
        info = {"case_id": ep.case.case_id, "calls": ep.calls, "credits": ep.spent, "budget_left": ep.budget_left}
        if result is not None:
            info["tool_result"] = result
        return info

    def _terminate(self, status: str, reason: str, tool: str = "submit"):
        ep = self.episode
        case = ep.case
        valid = status == "submitted" and ep.submission is not None
        outcome = {
            "case_id": case.case_id, "domain": case.domain, "cohort": case.cohort, "series_id": case.series_id,
            "lead": case.lead, "split": case.split, "credits": ep.spent, "calls": ep.calls, "valid": valid,
            "status": status, "reason": reason, "tool_counts": dict(ep.tool_counts),
            "scenario": ep.scenario.family if ep.scenario is not None else None,
            **_scenario_fields(ep.scenario),
            "forecast_crps": self._forecast_crps(),
        }
        submission = ep.submission if valid else None
        outcome.update(score_submission(case, ep.scenario, self.task, submission, ep.spent,
                                        sigma=self.sigma[case.domain], budget=self.budget,
                                        credit_weight=self.credit_weight, target=ep.target(),
                                        alpha=case_alpha(case, ep.scenario) if self.task == "forecast" else None))
        outcome["submission"] = _submission_json(submission)
        # dense: the credit part of S was paid when the credits were charged (_credit_reward), the R part is paid now
        reward = -(self.metric.r_weight * outcome["R"]) if self.reward_mode == "dense" else -outcome["S"]
        self._outcome = outcome
        result: ToolResult = {"tool": tool, "ok": valid, "result": {"status": status}} if valid else {
            "tool": str(tool)[:60], "ok": False, "error": {"code": status, "message": reason}}
        info = {**self._info(result), **self._outcome}
        return self._observation(result), float(reward), True, False, info

    def abandon(self, reason: str) -> dict:
        """End the running episode WITHOUT a score: the agent's infrastructure failed
        (:class:`fwgym.errors.HarnessError`, DESIGN §9 trust), so nothing the agent did is scored.

        Returns:
            The episode's unscored outcome, the record schema's env fields with status ``"harness_error"``,
            ``valid`` False, ``loss``, ``floor``, ``R``, ``S`` ``None`` (credits, calls and tool counts as
            charged so far). Later :meth:`step` calls raise until :meth:`reset`.

        Raises:
            RuntimeError: no episode is running (or it has ended).
        """
        ep = self.episode
        if ep is None or self._outcome is not None:
            raise RuntimeError("abandon() needs a running episode (call reset() first)")
        case = ep.case
        self._outcome = {
            "case_id": case.case_id, "domain": case.domain, "cohort": case.cohort, "series_id": case.series_id,
            "lead": case.lead, "split": case.split, "credits": ep.spent, "calls": ep.calls, "valid": False,
            "status": HARNESS_ERROR, "reason": str(reason), "tool_counts": dict(ep.tool_counts),
            "scenario": ep.scenario.family if ep.scenario is not None else None, **_scenario_fields(ep.scenario),
            "forecast_crps": {},
            "loss": None, "floor": None, "R": None, "S": None, "levels": None, "submission": None,
            "budget_left": ep.budget_left,
        }
        return dict(self._outcome)

    def _credit_reward(self, credits: int) -> float:
        """Dense reward for ``credits`` just charged: the credit part of S (0 in terminal mode)."""
        if self.reward_mode != "dense" or not credits:
            return 0.0
        return -self.metric.credit_cost(credits, self.budget or BUDGET)

    def _forecast_crps(self) -> dict:
        """CRPS (raw units and divided by scale) over the target window of each purchased forecast covering it:
        its 9 quantiles as the distribution they define (equally weighted atoms, the rule that scores
        a quantile submission, :func:`fwgym.core.scoring.score_forecast`)."""
        ep = self.episode
        out = {}
        for fid, fc in ep.forecasts.items():
            q = target_quantiles(ep.case, fc["quantiles"])
            if q is not None:
                c = float(crps_ensemble(quantile_atoms(q), ep.target(), estimator="nrg").mean())
                out[fid] = {"model": fc["model"], "crps": c, "crps_scaled": c / ep.case.scale}
        return out

    def hindsight(self) -> dict:
        """ORACLE-ONLY privileged access to the current case's realised target.

        For hindsight oracles and plots; never part of observations or info before termination.

        Returns:
            ``{"case_id", "target" (24,) raw units, "target_hours" (24,) epoch hours, "floor",
            "perfect_plan" (Plan)}``.

        Raises:
            RuntimeError: no episode is running.
        """
        if self.episode is None:
            raise RuntimeError("call reset() first")
        ep = self.episode
        best = perfect_demand_plan(ep.target(), ep.case.scale, ep.case.shortage)
        sc = ep.scenario
        return {"case_id": ep.case.case_id, "target": np.array(ep.target()), "target_hours": ep.case.target_hours.copy(),
                "floor": best.expected_loss, "perfect_plan": best.plan, "cost": best.cost,
                "roi": None if sc is None else sc.roi.copy(), "scenario": None if sc is None else sc.family}

