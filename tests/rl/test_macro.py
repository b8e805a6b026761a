"""Macro-action wrappers: env checkers, menus, masks, invalid choices, dense reward sums to -S."""
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from fwgym.core.cases import get_case
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.base import Availability, QuantileForecaster
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.forecasters.registry import PRICED_MODELS
from fwgym.rl import SEQUENTIAL_MENU, SINGLE_MENU, MacroActionWrapper, SequentialMacroWrapper, make_rl_env

pytestmark = pytest.mark.filterwarnings("ignore:.*different from the unwrapped")

DAY = "elec-ISNE-2024-07-19-day_ahead"
WEEK = "cycle-14-2015-10-05-week_ahead"
NAMES = [e.name for e in SEQUENTIAL_MENU]


def idx(name):
    return NAMES.index(name)


class FakeTSFM(QuantileForecaster):
    """An always-available stand-in for a TSFM: quantiles spread around the last visible day."""

    min_context = 2
    revision = "fake"

    def __init__(self, name):
        self.name = name

    def availability(self):
        return Availability(True, source="test")

    def _predict(self, context, horizon):
        day = np.resize(context[-24:], horizon)
        return day[:, None] * np.linspace(0.8, 1.2, 9)[None, :]


def env_for(case_id, **kw):
    domain = "cycle_hire" if case_id.startswith("cycle") else "electricity"
    return FWBenchEnv(domain, split="test", **kw)


def test_menus():
    assert [e.name for e in SINGLE_MENU] == ([f"plan_submit:{m}" for m in CLASSICAL_METHODS]
                                            + [f"buy_plan_submit:{m}" for m in PRICED_MODELS])
    assert len(SEQUENTIAL_MENU) == 28 and SEQUENTIAL_MENU[:12] == SINGLE_MENU
    assert all(e.final for e in SINGLE_MENU) and not any(e.final for e in SEQUENTIAL_MENU[12:])


@pytest.mark.parametrize("variant", ["macro", "sequential"])
def test_both_env_checkers_pass(variant):
    env = make_rl_env(domain="all", split="test", variant=variant)
    sb3_check_env(env)
    gym_check_env(env, skip_render_check=True)
    assert env.action_space.n == (12 if variant == "macro" else 28)
    assert env.observation_space.shape == (403,)


def test_compact_features_pass_the_checkers():
    env = make_rl_env(domain="cycle_hire", split="test", variant="sequential", features="compact")
    assert env.observation_space.shape == (56,)
    sb3_check_env(env)
    gym_check_env(env, skip_render_check=True)


def test_busiest_station_training_pool():
    from fwgym.core.cases import build_cases, busiest_stations

    env = make_rl_env(domain="all", split="train", cycle_hire_stations="busiest")
    pool = env.unwrapped.cases
    cycle = [c for c in pool if c.domain == "cycle_hire"]
    assert {c.series_id for c in cycle} == set(busiest_stations())
    assert len(cycle) < len(build_cases("cycle_hire", "train"))
    assert sum(c.domain == "electricity" for c in pool) == len(build_cases("electricity", "train"))
    with pytest.raises(ValueError, match="cycle_hire_stations"):
        make_rl_env(split="test", cycle_hire_stations="some")


def test_a_held_out_split_is_said_once(monkeypatch):
    import warnings

    from fwgym.rl import HeldOutSplitWarning
    from fwgym.rl import env as env_module

    monkeypatch.setattr(env_module, "_WARNED_SPLITS", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_rl_env(split="train", outcome_table=False)
        make_rl_env(split="dev", outcome_table=False)
    with pytest.warns(HeldOutSplitWarning, match="held-out 'test' split.*report test once through fwgym evaluate"):
        make_rl_env(split="test", outcome_table=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeldOutSplitWarning)
        make_rl_env(split="test", outcome_table=False)  # once per process and split
        from fwgym.rl.outcomes.build import table_env

        monkeypatch.setattr(env_module, "_WARNED_SPLITS", set())
        table_env("test", "macro").close()  # building a held-out split's table is not training on it
        with pytest.raises(ValueError):
            make_rl_env(split="bogus", outcome_table=False)  # checked before it is said


def test_a_held_out_split_warning_turned_into_an_error_raises_every_time(monkeypatch):
    """``simplefilter("error", HeldOutSplitWarning)`` (or pytest's ``-W error::...``) refuses every held-out RL env of
    the process, not only the first (the split is noted as said after the warning)."""
    import warnings

    from fwgym.rl import HeldOutSplitWarning
    from fwgym.rl import env as env_module

    monkeypatch.setattr(env_module, "_WARNED_SPLITS", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeldOutSplitWarning)
        for _ in range(2):
            with pytest.raises(HeldOutSplitWarning):
                make_rl_env(split="test", outcome_table=False)
    with pytest.warns(HeldOutSplitWarning):
        make_rl_env(split="test", outcome_table=False).close()


def test_building_a_held_out_table_does_not_silence_a_later_training_env(monkeypatch):
    """table_env (rl build / rl list / rl verify --recompute) silences the warning for itself only: an RL env made
    afterwards on the same held-out split in the process is still said."""
    from fwgym.rl import HeldOutSplitWarning
    from fwgym.rl import env as env_module
    from fwgym.rl.outcomes.build import table_env

    monkeypatch.setattr(env_module, "_WARNED_SPLITS", set())
    table_env("test", "macro").close()
    with pytest.warns(HeldOutSplitWarning):
        make_rl_env(split="test", outcome_table=False).close()


def test_masks_offline_default_pool():
    env = MacroActionWrapper(env_for(DAY))
    x, info = env.reset(options={"case_id": DAY})
    m = env.action_masks()
    assert m.dtype == bool and m.shape == (12,)
    np.testing.assert_array_equal(info["action_mask"], m)
    expect = {"seasonal_empirical": True, "chronos_bolt_tiny": False, "chronos2": False, "timesfm25": False}
    from fwgym.forecasters.registry import get_forecaster

    for model in ("chronos_bolt_tiny", "chronos2"):  # masked because the weights are not resolvable here
        expect[model] = get_forecaster(model).availability().available
    assert m[:8].all()
    assert {e.target: bool(v) for e, v in zip(SINGLE_MENU[8:], m[8:])} == expect


def test_masks_follow_budget_tools_availability_and_pool():
    fakes = {"chronos_bolt_tiny": FakeTSFM("chronos_bolt_tiny"), "chronos2": FakeTSFM("chronos2")}
    env = MacroActionWrapper(env_for(DAY, forecasters=fakes))
    env.reset(options={"case_id": DAY})
    assert env.action_masks().tolist() == [True] * 11 + [False]  # TimesFM never affordable under B
    env = MacroActionWrapper(env_for(DAY, forecasters=fakes, budget=10_000))  # seasonal 1027, bolt 8452
    env.reset(options={"case_id": DAY})
    assert env.action_masks()[8:].tolist() == [True, True, False, False]
    env = MacroActionWrapper(env_for(DAY, forecasters=fakes, budget=1_000))
    env.reset(options={"case_id": DAY})
    assert env.action_masks()[8:].tolist() == [False] * 4
    env = MacroActionWrapper(env_for(DAY, forecasters=fakes, models=["seasonal_empirical", "chronos2"]))
    env.reset(options={"case_id": DAY})
    assert env.action_masks()[8:].tolist() == [True, False, True, False]
    env = MacroActionWrapper(env_for(DAY, tools=["catalog", "classical_plan"]))
    env.reset(options={"case_id": DAY})
    assert env.action_masks().tolist() == [True] * 8 + [False] * 4


def test_fake_tsfm_purchase_runs_and_sums_to_minus_s():
    env = MacroActionWrapper(env_for(WEEK, reward="dense", forecasters={"chronos2": FakeTSFM("chronos2")}))
    env.reset(options={"case_id": WEEK})
    x, r, term, trunc, info = env.step(idx("buy_plan_submit:chronos2"))
    assert term and info["valid"] and info["credits"] == 113_726 and info["macro_steps"] == 3
    assert r == pytest.approx(-info["S"], abs=1e-12)


@pytest.mark.parametrize("case_id", [DAY, WEEK])
@pytest.mark.parametrize("entry", range(12))
def test_single_step_dense_reward_is_minus_s(case_id, entry):
    env = MacroActionWrapper(env_for(case_id, reward="dense"))
    env.reset(options={"case_id": case_id})
    valid = env.action_masks()[entry]
    x, r, term, trunc, info = env.step(entry)
    assert term and not trunc and env.observation_space.contains(x)
    assert r == pytest.approx(-info["S"], abs=1e-12)
    assert info["macro"] == SINGLE_MENU[entry].name and info["macro_valid"] == valid
    assert info["valid"] == valid
    if SINGLE_MENU[entry].target == "seasonal_empirical":
        assert info["credits"] > 0 and info["tool_counts"]["forecast"] == 1
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_masked_choice_ends_invalid_without_fallback_or_charge():
    env = MacroActionWrapper(env_for(DAY, budget=500))
    env.reset(options={"case_id": DAY})
    assert not env.action_masks()[8]
    x, r, term, trunc, info = env.step(8)  # seasonal_empirical is unaffordable at 500 credits
    assert term and not info["valid"] and info["status"] == "abstained"
    assert "masked macro entry 'buy_plan_submit:seasonal_empirical'" in info["reason"]
    assert info["credits"] == 0 and "forecast" not in info["tool_counts"] and "classical_plan" not in info["tool_counts"]
    assert info["R"] > 5 and r == pytest.approx(-info["S"])
    assert not info["action_mask"].any() and not env.action_masks().any()  # the episode is over
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_sequential_episode_with_purchases_sums_to_minus_s_and_reuses_the_forecast():
    env = SequentialMacroWrapper(env_for(DAY, reward="dense"))
    env.reset(options={"case_id": DAY})
    total, steps = 0.0, 0
    for name in ["inspect:weekday_empirical", "replay:seasonal_empirical", "inspect:hour_of_day_empirical",
                 "buy:seasonal_empirical"]:
        assert env.action_masks()[idx(name)], name
        x, r, term, trunc, info = env.step(idx(name))
        total += r
        steps += 1
        assert not term and env.observation_space.contains(x)
    assert not env.action_masks()[idx("inspect:weekday_empirical")]  # already known
    assert not env.action_masks()[idx("buy:seasonal_empirical")]  # already bought
    assert env.action_masks()[idx("buy_plan_submit:seasonal_empirical")]
    assert total == pytest.approx(-0.5 * 2 * 1027 / 113_726, abs=1e-12)
    x, r, term, trunc, info = env.step(idx("buy_plan_submit:seasonal_empirical"))
    total += r
    assert term and info["valid"] and info["macro_steps"] == 1  # reuses the planned forecast: submit only
    assert info["credits"] == 2 * 1027 and info["tool_counts"]["forecast"] == 1
    assert total == pytest.approx(-info["S"], abs=1e-12)


def test_sequential_known_plan_is_submitted_without_a_call():
    env = SequentialMacroWrapper(env_for(WEEK, reward="dense"))
    env.reset(options={"case_id": WEEK})
    env.step(idx("inspect:weekly_repeat"))
    plan = env.tracker.plans["weekly_repeat"]["decisions"]
    x, r, term, trunc, info = env.step(idx("plan_submit:weekly_repeat"))
    assert term and info["valid"] and info["macro_steps"] == 1 and info["calls"] == 2
    assert info["levels"] == pytest.approx([d["value"] / get_case(WEEK).scale for d in plan])


def test_sequential_masked_info_choice_is_invalid():
    env = SequentialMacroWrapper(env_for(DAY))
    env.reset(options={"case_id": DAY})
    env.step(idx("inspect:weekday_empirical"))
    x, r, term, trunc, info = env.step(idx("inspect:weekday_empirical"))
    assert term and not info["valid"] and not info["macro_valid"]


@pytest.mark.parametrize("seed", range(6))
def test_random_masked_sequential_play_always_ends_valid_within_the_call_limit(seed):
    env = SequentialMacroWrapper(FWBenchEnv(("electricity", "cycle_hire"), split="test", reward="dense", max_calls=6))
    rng = np.random.default_rng(seed)
    x, info = env.reset(seed=seed)
    total = 0.0
    for step in range(1, 7):
        mask = env.action_masks()
        assert mask[:8].any()  # a final entry is always available
        x, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        total += r
        if term:
            break
    assert term and info["valid"] and info["calls"] <= 6
    assert total == pytest.approx(-info["S"], abs=1e-12)


def test_terminal_reward_mode_pays_minus_s_at_the_end():
    env = SequentialMacroWrapper(env_for(DAY, reward="terminal"))
    env.reset(options={"case_id": DAY})
    _, r1, *_ = env.step(idx("buy:seasonal_empirical"))
    _, r2, term, _, info = env.step(idx("buy_plan_submit:seasonal_empirical"))
    assert r1 == 0.0 and term and r2 == pytest.approx(-info["S"])


def test_wrapper_argument_errors():
    with pytest.raises(ValueError, match="invalid_submission"):
        MacroActionWrapper(env_for(DAY, invalid_submission="error"))
    with pytest.raises(ValueError, match="max_calls"):
        MacroActionWrapper(env_for(DAY, max_calls=1))
    with pytest.raises(ValueError, match="variant"):
        MacroActionWrapper(env_for(DAY), variant="nope")
    with pytest.raises(ValueError, match="catalog"):
        MacroActionWrapper(env_for(DAY, tools=["classical_plan"]))
    for kw in ({"tools": ["catalog"]}, {"tools": ["catalog", "forecast", "plan", "replay"], "models": ["seasonal_empirical"]}):
        with pytest.raises(ValueError, match="classical_plan"):  # every entry could be masked before the end
            MacroActionWrapper(env_for(DAY, **kw), variant="sequential")
    env = MacroActionWrapper(env_for(DAY))
    env.reset(options={"case_id": DAY})
    with pytest.raises(ValueError, match="macro index"):
        env.step(12)
    for bad in (1.7, 1.0, "3", True, np.array([1, 2]), np.array([0.0]), None):
        with pytest.raises(ValueError, match="one integer index"):
            env.step(bad)
    _, _, term, _, _ = env.step(np.array([0]))  # SB3 passes 1-element integer arrays
    assert term


def test_maskable_ppo_respects_the_masks():
    from sb3_contrib import MaskablePPO

    env = make_rl_env(domain="electricity", split="test", variant="sequential", budget=2_000)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    for seed in range(5):
        x, info = env.reset(seed=seed)
        term = False
        while not term:
            mask = env.action_masks()
            a, _ = model.predict(x, action_masks=mask, deterministic=False)
            assert mask[int(a)]
            x, r, term, trunc, info = env.step(a)
        assert info["valid"]


@pytest.mark.parametrize("variant", ["macro", "sequential"])
def test_rl_env_without_text_matches_a_wrapped_text_env(variant):
    # make_rl_env skips the text rendering (info["tool_result"]); a wrapper on a text env parses the JSON:
    # the same seeds give the same features, masks and rewards
    fast = make_rl_env(domain="all", split="test", variant=variant)
    text = MacroActionWrapper(FWBenchEnv(("electricity", "cycle_hire"), split="test", reward="dense"), variant=variant)
    assert fast.unwrapped.text_observations is False and text.unwrapped.text_observations is True
    rng = np.random.default_rng(0)
    for ep in range(6):
        f_obs, f_info = fast.reset(seed=ep)
        t_obs, t_info = text.reset(seed=ep)
        done = False
        while not done:
            assert np.array_equal(f_obs, t_obs) and np.array_equal(f_info["action_mask"], t_info["action_mask"])
            a = int(rng.choice(np.flatnonzero(fast.action_masks())))
            f_obs, f_r, f_t, f_tr, f_info = fast.step(a)
            t_obs, t_r, t_t, t_tr, t_info = text.step(a)
            assert (f_r, f_t, f_tr) == (t_r, t_t, t_tr)
            done = f_t or f_tr
        assert f_info["S"] == t_info["S"] and f_info["case_id"] == t_info["case_id"]


def test_masks_are_recomputed_after_every_step():
    env = make_rl_env(domain="electricity", split="test", variant="sequential")
    env.reset(options={"case_id": DAY})
    m0 = env.action_masks()
    assert m0[idx("inspect:weekday_empirical")]
    m0[:] = False  # a returned mask is a copy
    assert env.action_masks()[idx("inspect:weekday_empirical")]
    _, _, _, _, info = env.step(idx("inspect:weekday_empirical"))
    assert not env.action_masks()[idx("inspect:weekday_empirical")] and not info["action_mask"][idx("inspect:weekday_empirical")]
    assert env.action_masks()[idx("plan_submit:weekday_empirical")]


def test_action_masks_before_reset_is_a_clear_error_and_reset_info_is_small():
    import gymnasium as gym

    import fwgym  # noqa: F401

    for env in (make_rl_env(split="dev"), gym.make("FWBench-RL-Macro-v0", split="dev"),
                make_rl_env(split="dev", variant="sequential")):
        with pytest.raises(RuntimeError, match=r"before reset\(\)"):
            env.get_wrapper_attr("action_masks")()
        _, info = env.reset(seed=0)
        assert set(info) == {"case_id", "calls", "credits", "budget_left", "action_mask"}  # no catalog result
        assert info["action_mask"].tolist() == env.get_wrapper_attr("action_masks")().tolist()
        assert info["calls"] == 1 and info["credits"] == 0


def test_sb3_on_a_text_env_names_the_rl_ids():
    pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    import fwgym  # noqa: F401

    for make in (lambda: PPO("MlpPolicy", "FWBench-Electricity-v0"), lambda: make_vec_env("FWBench-v0", n_envs=2),
                 lambda: PPO("MlpPolicy", gym.make("FWBench-v0"))):
        with pytest.raises(TypeError, match="FWBench-RL-Macro-v0.*FWBench-RL-Sequential-v0"):
            make()
    assert gym.make("FWBench-v0").observation_space["context"].shape is None  # what gymnasium sees is unchanged
    with pytest.raises(ValueError, match="render_mode"):  # still a ValueError for everyone else
        gym.make("FWBench-v0", render_mode="human")
