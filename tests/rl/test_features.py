"""FeatureObservation / feature vector: documented indices, values, env checker, and no leakage."""
import contextlib
import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytestmark = pytest.mark.filterwarnings("ignore:.*different from the unwrapped")

from fwgym.core.cases import get_case
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS
from fwgym.core.tariff import price
from fwgym.rl import FEATURE_NAMES, N_FEATURES, FeatureObservation, MacroActionWrapper, feature_index
from fwgym.rl.features import feature_space

ELEC = "elec-ISNE-2024-07-19-day_ahead"
CYCLE = "cycle-14-2015-10-05-week_ahead"


def test_feature_names_match_the_documented_indices():
    assert N_FEATURES == len(FEATURE_NAMES) == 403 == len(set(FEATURE_NAMES))
    documented = {"history_000": 0, "history_335": 335, "as_of_hour_sin": 336, "as_of_hour_cos": 337,
                  "target_weekday_mon": 338, "target_weekday_sun": 344, "target_doy_sin": 345, "target_doy_cos": 346,
                  "lead_day_ahead": 347, "lead_week_ahead": 348, "domain_electricity": 349, "domain_cycle_hire": 350,
                  "log_scale": 351, "budget_left_frac": 352, "calls_left_frac": 353,
                  "model_seasonal_empirical_available": 354, "model_seasonal_empirical_replay_pinball_scaled": 360,
                  "model_timesfm25_available": 354 + 3 * 7, "method_weekday_empirical_known": 382,
                  "method_level_adjusted_weekly_expected_loss": 397, "best_expected_loss": 398, "any_plan_known": 399,
                  "forecasts_bought_div4": 400, "replays_div4": 401, "spent_frac": 402}
    for name, i in documented.items():
        assert feature_index(name) == i, name
    assert [FEATURE_NAMES[382 + 2 * k] for k in range(8)] == [f"method_{m}_known" for m in CLASSICAL_METHODS]
    assert [FEATURE_NAMES[354 + 7 * k] for k in range(4)] == [f"model_{m}_available" for m in PRICED_MODELS]
    with pytest.raises(KeyError, match="unknown feature"):
        feature_index("nope")


@pytest.mark.parametrize("case_id", [ELEC, CYCLE])
def test_reset_features_encode_the_case(case_id):
    domain = "cycle_hire" if case_id.startswith("cycle") else "electricity"
    env = FeatureObservation(FWBenchEnv(domain, split="test"))
    x, info = env.reset(options={"case_id": case_id})
    case = get_case(case_id)
    assert x.dtype == np.float32 and x.shape == (403,) and env.observation_space.contains(x)
    assert info["calls"] == 1  # the catalog call
    np.testing.assert_allclose(x[:336], np.asarray(case.history, np.float32) / case.scale, rtol=1e-6)
    onehot = x[338:345]
    assert onehot.sum() == 1 and onehot[case.target_weekday] == 1
    assert x[feature_index(f"lead_{case.lead}")] == 1 and x[347:349].sum() == 1
    assert x[feature_index(f"domain_{domain}")] == 1 and x[349:351].sum() == 1
    hour = case.as_of % 24
    assert x[336] == pytest.approx(math.sin(2 * math.pi * hour / 24), abs=1e-6)
    assert x[feature_index("log_scale")] == pytest.approx((math.log10(case.scale) + 2) / 8, abs=1e-6)
    assert x[feature_index("budget_left_frac")] == 1.0
    assert x[feature_index("calls_left_frac")] == pytest.approx(11 / 12)
    p = price("seasonal_empirical", 336, case.horizon)["credits"]
    assert x[feature_index("model_seasonal_empirical_price_frac")] == pytest.approx(p / 113_726, rel=1e-6)
    assert x[feature_index("model_seasonal_empirical_available")] == 1
    assert x[feature_index("model_timesfm25_affordable")] == 0
    assert x[398:].sum() == 0  # nothing learned yet


def test_summaries_follow_the_tool_results():
    env = FeatureObservation(FWBenchEnv("electricity", split="test", reward="dense"))
    env.reset(options={"case_id": ELEC})
    x, *_ = env.step({"tool": "classical_plan", "args": {"method": "weekly_repeat"}})
    el = env.tracker.plans["weekly_repeat"]["expected_loss"]
    assert x[feature_index("method_weekly_repeat_known")] == 1
    assert x[feature_index("method_weekly_repeat_expected_loss")] == pytest.approx(el, rel=1e-6)
    assert x[feature_index("best_expected_loss")] == pytest.approx(el, rel=1e-6)
    x, *_ = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336, "horizon": 50}})
    assert x[feature_index("model_seasonal_empirical_bought")] == 1
    assert x[feature_index("forecasts_bought_div4")] == 0.25
    assert x[feature_index("spent_frac")] == pytest.approx(1027 / 113_726, rel=1e-6)
    x, *_ = env.step({"tool": "plan", "args": {"forecast_id": "f1"}})
    fel = env.tracker.bought_plan("seasonal_empirical")["expected_loss"]
    assert x[feature_index("model_seasonal_empirical_bought_expected_loss")] == pytest.approx(fel, rel=1e-6)
    assert x[feature_index("best_expected_loss")] == pytest.approx(min(el, fel), rel=1e-6)
    x, *_ = env.step({"tool": "replay", "args": {"model": "seasonal_empirical", "origin": "2024-07-15T21:00:00Z",
                                                  "context_steps": 168, "horizon": 48}})
    assert x[feature_index("model_seasonal_empirical_replayed")] == 1
    assert x[feature_index("model_seasonal_empirical_replay_pinball_scaled")] > 0
    assert x[feature_index("calls_left_frac")] == pytest.approx(7 / 12)
    assert env.observation_space.contains(x)


def test_feature_sets():
    from fwgym.rl.features import FEATURE_SETS, resolve_features

    compact = resolve_features("compact")
    assert len(compact) == 56 and compact == FEATURE_SETS["compact"]
    assert not any(n.startswith(("history_", "target_", "as_of_")) for n in compact)
    assert {"lead_day_ahead", "domain_cycle_hire", "log_scale", "budget_left_frac", "spent_frac"} <= set(compact)
    full = FeatureObservation(FWBenchEnv("electricity", split="test"))
    small = FeatureObservation(FWBenchEnv("electricity", split="test"), features="compact")
    mine = FeatureObservation(FWBenchEnv("electricity", split="test"), features=["spent_frac", "lead_week_ahead"])
    assert small.observation_space.shape == (56,) and mine.observation_space.shape == (2,)
    xs = [e.reset(options={"case_id": ELEC})[0] for e in (full, small, mine)]
    np.testing.assert_array_equal(xs[1], xs[0][[feature_index(n) for n in compact]])
    np.testing.assert_array_equal(xs[2], [0.0, 0.0])
    for bad in ("nope", ["history_000", "history_000"], ["x"], []):
        with pytest.raises(ValueError):
            resolve_features(bad)


def test_gymnasium_check_env_and_random_tool_calls_stay_in_space():
    env = FeatureObservation(FWBenchEnv(("electricity", "cycle_hire"), split="test"))
    check_env(env, skip_render_check=True)
    env.action_space.seed(0)
    x, _ = env.reset(seed=0)
    for _ in range(5):
        x, r, term, trunc, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(x)


def test_wrapping_errors():
    with pytest.raises(TypeError, match="raw FWBench env"):
        FeatureObservation(MacroActionWrapper(FWBenchEnv("electricity", split="test")))
    with pytest.raises(ValueError, match="catalog"):
        FeatureObservation(FWBenchEnv("electricity", split="test", tools=["classical_plan"]))
    with pytest.raises(RuntimeError, match="catalog call after reset failed"):
        FeatureObservation(FWBenchEnv("electricity", split="test", max_calls=0)).reset(seed=0)
    assert feature_space().shape == (403,)


def test_works_on_gymnasium_make():
    env = FeatureObservation(gym.make("FWBench-CycleHire-v0", split="test"))
    x, info = env.reset(seed=1)
    assert env.observation_space.contains(x)


# ---------------------------------------------------------------------------------------------
# leakage: features never depend on values at or after as_of - 2 h


@contextlib.contextmanager
def altered_future(case_id):
    """Replace every value of the case's series from as_of - 2 h on (NaN gaps kept) and restore."""
    case = get_case(case_id)
    s = case.series
    original = s.values
    vals = original.copy()
    i0 = case.as_of - 2 - s.start_hour
    vals[i0:] = vals[i0:] * 3.0 + 11.0
    object.__setattr__(s, "values", vals)
    try:
        yield
    finally:
        object.__setattr__(s, "values", original)


TRACE = [{"tool": "classical_plan", "args": {"method": "calendar_residual"}},
         {"tool": "history", "args": {"last": 24}},
         "replay:seasonal_empirical", "buy:seasonal_empirical", "inspect:weekday_empirical",
         "buy_plan_submit:seasonal_empirical"]


def _features_trace(case_id):
    """Feature vectors along a fixed episode: FeatureObservation tool calls, then macro entries."""
    domain = "cycle_hire" if case_id.startswith("cycle") else "electricity"
    fo = FeatureObservation(FWBenchEnv(domain, split="test", reward="dense"))
    out = [fo.reset(options={"case_id": case_id})[0]]
    for call in TRACE[:2]:
        out.append(fo.step(call)[0])
    env = MacroActionWrapper(FWBenchEnv(domain, split="test", reward="dense"), variant="sequential")
    out.append(env.reset(options={"case_id": case_id})[0])
    names = [e.name for e in env.menu]
    info = {}
    for entry in TRACE[2:]:
        x, r, term, trunc, info = env.step(names.index(entry))
        out.append(x)
    assert term and info["valid"]
    return out, info["S"]


@pytest.mark.parametrize("case_id", [ELEC, CYCLE, "elec-ERCO-2024-02-27-week_ahead"])
def test_features_do_not_change_when_the_future_changes(case_id):
    before, s_before = _features_trace(case_id)
    with altered_future(case_id):
        after, s_after = _features_trace(case_id)
    assert s_after != pytest.approx(s_before), "the alteration must reach the scorer (probe sanity)"
    assert len(before) == len(after)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_tracker_sees_the_end_after_a_malformed_action_beyond_the_call_limit():
    # the tracker reads the tool name from the env's result, so a malformed action that ends the
    # episode (call 3 of a 2-call limit) still marks it terminated
    env = FeatureObservation(FWBenchEnv("electricity", split="test", max_calls=2))
    env.reset(options={"case_id": ELEC})
    _, _, term, _, _ = env.step({"tool": "classical_plan", "args": {"method": "weekly_repeat"}})
    assert not term and not env.tracker.terminated
    _, _, term, _, info = env.step("{not json")
    assert term and info["status"] == "call_limit_exceeded"
    assert env.tracker.terminated and env.tracker.last["tool"] == "invalid"


def test_tracker_marks_a_model_unavailable_when_loading_fails():
    from fwgym.forecasters.base import ModelUnavailable, QuantileForecaster

    class Unloadable(QuantileForecaster):
        name = "chronos_bolt_tiny"
        min_context = 2

        def load(self):
            raise ModelUnavailable("chronos_bolt_tiny: weights not found")

    env = FeatureObservation(FWBenchEnv("electricity", split="test", forecasters={"chronos_bolt_tiny": Unloadable()}))
    x, _ = env.reset(options={"case_id": ELEC})
    assert env.tracker.available["chronos_bolt_tiny"] and x[feature_index("model_chronos_bolt_tiny_available")] == 1
    x, *_ = env.step({"tool": "forecast", "args": {"model": "chronos_bolt_tiny"}})
    assert env.tracker.last["error"]["code"] == "model_unavailable"
    assert env.tracker.available == {**env.tracker.available, "chronos_bolt_tiny": False}
    assert not env.tracker.available["chronos_bolt_tiny"] and x[feature_index("model_chronos_bolt_tiny_available")] == 0
    assert env.tracker.available["seasonal_empirical"]  # only the failing model


def test_out_of_range_and_non_finite_values_are_stored_inside_the_bounds():
    from fwgym.rl.features import feature_vector

    env = FeatureObservation(FWBenchEnv("electricity", split="test", budget=100))
    env.reset(options={"case_id": ELEC})
    tr = env.tracker
    tr.plans = {"weekday_empirical": {"decisions": [], "expected_loss": math.inf},
                "weekly_repeat": {"decisions": [], "expected_loss": 12.5},
                "all_hour_empirical": {"decisions": [], "expected_loss": 0.25},
                "calendar_residual": {"decisions": [], "expected_loss": math.nan}}
    tr.replays = {"seasonal_empirical": 3.25, "chronos2": -2.0}
    x = feature_vector(tr)
    assert x[feature_index("method_weekday_empirical_expected_loss")] == 0.0  # non-finite -> 0
    assert x[feature_index("method_weekly_repeat_expected_loss")] == 10.0  # clipped to LOSS_MAX
    assert x[feature_index("method_all_hour_empirical_expected_loss")] == 0.25
    assert x[feature_index("method_calendar_residual_expected_loss")] == 0.0
    assert x[feature_index("best_expected_loss")] == 0.25  # the least of inf, 12.5, 0.25 (NaN skipped)
    assert x[feature_index("model_seasonal_empirical_replay_pinball_scaled")] == 3.25
    assert x[feature_index("model_chronos2_replay_pinball_scaled")] == 0.0
    # a 100-credit budget: timesfm25's full-context price is ~11,900 budgets -> clipped to PRICE_MAX (20)
    assert x[feature_index("model_timesfm25_price_frac")] == 20.0
    assert x[feature_index("method_weekday_empirical_known")] == 1.0
    assert env.observation_space.contains(x)


def test_hand_built_extremes_are_stored_like_the_documented_rules():
    import dataclasses

    from fwgym.rl.features import feature_vector

    env = FeatureObservation(FWBenchEnv("electricity", split="test"))
    env.reset(options={"case_id": ELEC})
    tr = env.tracker
    tr.meta = dataclasses.replace(tr.meta, scale=1e-30)  # history / scale beyond float32: clipped to 50, not 0
    tr.history = tr.history.copy()
    tr.history[0] = 1e10
    tr.history[1] = np.nan
    tr.plans = {"weekly_repeat": {"decisions": [], "expected_loss": -0.0}}
    tr.forecasts = {"f1": {"model": "seasonal_empirical", "covers_target": True, "decisions": [], "expected_loss": None}}
    tr.bought = {"seasonal_empirical": "f1"}
    tr.available = {**tr.available, "chronos2": float("nan")}
    x = feature_vector(tr)
    assert x[0] == 50.0 and x[1] == 0.0
    i = feature_index("method_weekly_repeat_expected_loss")
    assert x[i] == 0.0 and not np.signbit(x[i]) and not np.signbit(x[feature_index("best_expected_loss")])
    assert x[feature_index("model_seasonal_empirical_bought_expected_loss")] == 0.0  # None -> 0, no crash
    assert x[feature_index("model_chronos2_available")] == 0.0  # NaN -> 0


def test_per_episode_parts_follow_a_new_catalog_and_a_replaced_meta():
    import dataclasses

    from fwgym.core.tariff import credits_for
    from fwgym.rl.features import feature_vector

    env = FeatureObservation(FWBenchEnv("electricity", split="test"))
    x0, _ = env.reset(options={"case_id": ELEC})
    tr = env.tracker
    price = tr.full_price("chronos2")
    assert price == credits_for("chronos2", 336, tr.meta.horizon)
    i_price, i_left = feature_index("model_chronos2_price_frac"), feature_index("budget_left_frac")
    assert x0[i_price] == np.float32(price / 113_726)
    tr.meta = dataclasses.replace(tr.meta, budget=2 * 113_726)  # the cached price features are per meta
    x1 = feature_vector(tr)
    assert x1[i_price] == np.float32(price / (2 * 113_726)) and x1[i_left] == np.float32(0.5)
    x2, *_ = env.step({"tool": "catalog", "args": {}})  # a second catalog: a new meta, the env's budget again
    assert x2[i_price] == x0[i_price] and x2[i_left] == 1.0
    assert x2[feature_index("calls_left_frac")] == np.float32(10 / 12)


def test_none_and_nan_in_hand_built_states_do_not_crash_or_depend_on_order():
    from fwgym.rl.features import feature_vector

    env = FeatureObservation(FWBenchEnv("electricity", split="test"))
    env.reset(options={"case_id": ELEC})
    tr = env.tracker
    tr.available = {**tr.available, "seasonal_empirical": None}
    best, known = feature_index("best_expected_loss"), feature_index("any_plan_known")
    for plans in ([("weekly_repeat", None), ("weekday_empirical", 0.3)], [("weekday_empirical", 0.3), ("weekly_repeat", None)],
                  [("weekly_repeat", math.nan), ("weekday_empirical", 0.3)], [("weekday_empirical", 0.3), ("weekly_repeat", math.nan)]):
        tr.plans = {m: {"decisions": [], "expected_loss": v} for m, v in plans}
        x = feature_vector(tr)
        assert x[best] == np.float32(0.3) and x[known] == 1.0, plans
        assert x[feature_index("model_seasonal_empirical_available")] == 0.0
    tr.plans = {"weekly_repeat": {"decisions": [], "expected_loss": math.nan}}  # known, but no usable loss
    x = feature_vector(tr)
    assert x[best] == 0.0 and x[known] == 1.0
