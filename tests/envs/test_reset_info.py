"""The episode's public facts in the reset info (``info["episode"]``): what they hold, that they equal the case
the context is rendered from, and that no hindsight value reaches them."""
import json
import pickle

import numpy as np
import pytest

import fwgym.core.cases
from fwgym.core.contract import ALPHA, DECISION_IDS, GRID, RAMP
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.core.series import hour_to_iso

KEYS = ["case", "history", "target", "contract", "task", "tools", "budget", "max_calls", "scenario"]


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_the_facts_are_those_of_the_case(domain):
    env = FWBenchEnv(domain, split="test", budget=5000, max_calls=7, tools=("classical_plan",))
    for case in env.cases[::41]:
        obs, info = env.reset(options={"case_id": case.case_id})
        facts = info["episode"]
        assert list(facts) == KEYS and facts["case"] == case.summary()
        assert facts["history"] == {"start": hour_to_iso(case.history_start), "end": hour_to_iso(case.last_visible),
                                    "hours": 336} and len(obs["history"]) == 336
        assert facts["target"] == {"date": case.target_date.isoformat(), "weekday": case.target_date.weekday(),
                                   "start": hour_to_iso(case.target_start), "end": hour_to_iso(case.target_start + 24),
                                   "steps": [27, 50] if case.lead == "day_ahead" else [171, 194]}
        c = facts["contract"]
        assert c["decision_ids"] == list(DECISION_IDS) and c["normalised_grid"] == GRID.tolist() and len(GRID) == 33
        assert c["scale"] == case.scale and np.isclose(c["scale"], np.mean(case.history), rtol=1e-12, atol=0)
        assert c["shortage_weights"] == case.shortage.tolist() and (c["ramp"], c["surplus_price"]) == (RAMP, ALPHA)
        assert c["unit"] == case.series.unit
        assert facts["tools"] == ["classical_plan", "submit", "abstain"] and facts["task"] == "decision"
        assert (facts["budget"], facts["max_calls"]) == (5000, 7)
        assert facts["scenario"] is None  # no scenario note in a protocol decision env


def test_the_facts_are_plain_data_and_fresh_per_episode():
    env = FWBenchEnv("cycle_hire", split="dev", scenarios=True, task="forecast")
    _, info = env.reset(seed=4)
    facts = info["episode"]
    assert json.loads(json.dumps(facts)) == facts and pickle.loads(pickle.dumps(facts)) == facts
    assert facts["contract"] is None and facts["task"] == "forecast"  # no capacity contract in forecast envs
    facts["tools"].append("teleport")
    facts["case"]["scale"] = -1.0
    _, again = env.reset(seed=4)
    assert "teleport" not in again["episode"]["tools"] and again["episode"]["case"]["scale"] > 0
    *_, step_info = env.step({"tool": "catalog"})
    assert "episode" not in step_info  # only the reset info carries the facts


def test_no_hindsight_value_reaches_the_facts(monkeypatch):
    """Replace every realised target by other values: the facts (and the observation) must not move."""
    env = FWBenchEnv("electricity", split="test")
    ids = [c.case_id for c in env.cases[::97]]
    before = [env.reset(options={"case_id": cid})[1]["episode"] for cid in ids]
    monkeypatch.setattr(fwgym.core.cases.Case, "target", lambda self: np.full(24, 7.0 * self.scale))
    after = [env.reset(options={"case_id": cid})[1]["episode"] for cid in ids]
    assert after == before
    for cid, facts in zip(ids, after):
        case = fwgym.core.cases.get_case(cid)
        assert facts["history"]["end"] == hour_to_iso(case.as_of - 3)  # the last visible hour is as_of - 3 h
