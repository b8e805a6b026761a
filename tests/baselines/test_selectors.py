"""Backtest selectors: window layout, visible-data-only choice, tie-breaking and the submitted plan."""
import numpy as np
import pytest

import fwgym.core.cases
from fwgym.agents.base import run_episode
from fwgym.baselines import make_policy
from fwgym.baselines import selectors as S
from fwgym.core.cases import build_cases
from fwgym.core.contract import shortage_weights
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters.classical import CLASSICAL_METHODS
from fwgym.core.optimizer import cost_table, optimal_plan, plan_loss
from fwgym.tools import classical_plan_result

NAMES = ("backtest_selector_4", "backtest_selector_8", "lead_matched_selector")


def test_short_lead_window_layout():
    w4, w8 = S.short_lead_windows(4), S.short_lead_windows(8)
    assert [w.target_start for w in w4] == [290, 266, 242, 218]
    assert [w.target_start for w in w8] == [290, 278, 266, 254, 242, 230, 218, 206]
    assert set(w4) <= set(w8)
    for w in w8:
        assert w.hist_start == 0 and w.hist_stop == w.target_start - 2  # crop at a - 3, expanding history
        assert w.hist_stop >= S.MIN_METHOD_HISTORY and w.target_start + 24 <= 336
    # window 1 is the last complete visible day [as_of - 48 h, as_of - 24 h) (as_of has index 338)
    assert w4[0].target_start == 338 - 48
    with pytest.raises(ValueError):
        S.short_lead_windows(5)
    with pytest.raises(ValueError):
        S.short_lead_windows(0)
    with pytest.raises(ValueError):
        S.short_lead_windows(8, history_hours=250)  # the oldest window's history would start before index 0
    assert [w.hist_stop - w.hist_start for w in S.short_lead_windows(4, history_hours=192)] == [192] * 4


def test_lead_matched_window_layout():
    windows, used = S.lead_matched_windows(1)
    assert used == 1 and len(windows) == 4
    for w in windows:
        assert w.hist_stop - w.hist_start == 192
        assert w.target_start - (w.hist_stop - 1) == 27  # forecast steps 27..50 after the crop, as day-ahead
        assert (338 - w.target_start) % 24 == 0  # whole days of the case's calendar
    assert windows[-1].hist_start == 0 and windows[0].target_start + 24 <= 336
    # a week-ahead window cannot fit with 192 history hours: capped at the longest lead that fits
    assert S.lead_matched_windows(7) == (windows, 1)


def test_window_shortage_follows_the_contract_calendar():
    for wd in range(7):
        for d in range(-6, 1):
            np.testing.assert_array_equal(S.window_shortage(wd, 362, 362 + 24 * d), shortage_weights((wd + d) % 7))
    half = S.window_shortage(0, 362, 362 - 12)  # from noon Sunday to noon Monday
    np.testing.assert_array_equal(half, np.r_[shortage_weights(6)[12:], shortage_weights(0)[:12]])


def test_window_losses_match_a_hand_computation():
    case = build_cases("cycle_hire", "test")[5]
    w = S.short_lead_windows(4)[2]
    start = 335 + case.target_steps[0]
    L = S.window_losses(case.history, case.target_weekday, start, (w,))
    past = case.history[: w.hist_stop]
    actual = case.history[w.target_start : w.target_start + 24]
    sw = shortage_weights((case.target_weekday + (w.target_start - start) // 24) % 7)
    hours = np.arange(336)
    for k, m in enumerate(S.METHODS):
        samples = CLASSICAL_METHODS[m](past, hours[: w.hist_stop], hours[w.target_start : w.target_start + 24])
        plan = optimal_plan(samples, past.mean(), sw).plan
        assert L[0, k] == plan_loss(cost_table(actual.reshape(24, 1), past.mean(), sw), plan.indices)


def test_select_method_ties_by_name_and_skips_empty_windows():
    methods = ("b", "a", "c")
    assert S.select_method(np.array([[1.0, 2.0, 1.0], [2.0, 1.0, 2.0]]), methods) == "a"  # 3-way tie -> a
    assert S.select_method(np.array([[1.0, 2.0, 0.5], [np.nan, np.nan, np.nan]]), methods) == "c"
    with pytest.raises(ValueError):
        S.select_method(np.zeros((2, 2)), methods)


def _cases():
    out = []
    for d in ("electricity", "cycle_hire"):
        cs = build_cases(d, "test")
        out += [cs[i] for i in range(0, len(cs), max(1, len(cs) // 6))][:6]
    return out


def _run(names, cases):
    envs = {d: FWBenchEnv(domain=d, split="test") for d in ("electricity", "cycle_hire")}
    out = {}
    for name in names:
        agent = make_policy(name)
        for c in cases:
            rec = run_episode(envs[c.domain], agent, options={"case_id": c.case_id}).record
            out[(name, c.case_id)] = (agent.choice, agent.losses.copy(), rec)
    return out


def test_selectors_submit_their_choice_and_use_no_target_data(monkeypatch):
    cases = _cases()
    S._CACHE.clear()
    normal = _run(NAMES, cases)
    for (name, cid), (choice, losses, rec) in normal.items():
        case = fwgym.core.cases.get_case(cid)
        assert rec["valid"] and rec["credits"] == 0 and rec["calls"] == 1
        assert rec["tool_counts"] == {"classical_plan": 1, "submit": 1}
        assert rec["levels"] == list(classical_plan_result(case, choice).plan.levels)
        assert choice == S.select_method(losses)
    # replace every realised target by other (valid) values: the choices and window losses must not move
    S._CACHE.clear()
    monkeypatch.setattr(fwgym.core.cases.Case, "target", lambda self: np.full(24, 3.0 * self.scale))
    patched = _run(NAMES, cases)
    for key, (choice, losses, rec) in patched.items():
        assert choice == normal[key][0]
        np.testing.assert_array_equal(losses, normal[key][1])
        assert rec["levels"] == normal[key][2]["levels"]
        assert rec["loss"] != normal[key][2]["loss"]  # the patch did reach the scorer


def test_selector_falls_back_to_the_catalog_without_the_episode_facts():
    case = build_cases("electricity", "test")[7]
    env = FWBenchEnv(domain="electricity", split="test")
    ref = make_policy("lead_matched_selector")
    run_episode(env, ref, options={"case_id": case.case_id})
    agent = make_policy("lead_matched_selector")
    agent.reset()  # the old protocol: no reset info, so the target window is asked from the catalog
    obs, _ = env.reset(options={"case_id": case.case_id})
    actions = []
    for _ in range(4):
        action = agent.act(obs)
        actions.append(action["tool"])
        obs, _, done, _, info = env.step(action)
        if done:
            break
    assert actions == ["catalog", "classical_plan", "submit"]
    assert agent.choice == ref.choice and info["valid"] and info["calls"] == 2
    assert S.contract_from_episode(None) is None
    facts = env.reset(options={"case_id": case.case_id})[1]["episode"]
    assert S.contract_from_episode(facts) == (case.target_steps[0], case.target_date.weekday())


def test_registry_names():
    assert make_policy("backtest_selector_8").n_windows == 8
    assert make_policy("lead_matched_selector").mode == "lead_matched"
    with pytest.raises(ValueError):
        S.BacktestSelector(4, mode="oracle")
