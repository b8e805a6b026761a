"""fwgym.tools.info: catalog and history (the visible window only)."""
import numpy as np
import pytest

from fwgym.core.contract import GRID
from fwgym.tools import parse_action

CUT = "2024-07-17T22:00:00Z"  # as_of - 2 h of the case: never visible


def run(ep, tool, **args):
    return ep.apply(parse_action({"tool": tool, "args": args})).result


def test_catalog_contract_by_hand(make_episode):
    ep = make_episode()
    res = run(ep, "catalog")["result"]
    blocks = res["contract"]["blocks"]
    assert [b["decision_id"] for b in blocks] == [f"b{i:02d}" for i in range(8)]
    assert blocks[0] == {"decision_id": "b00", "start": "2024-07-19T00:00:00Z", "end": "2024-07-19T03:00:00Z"}
    assert blocks[7] == {"decision_id": "b07", "start": "2024-07-19T21:00:00Z", "end": "2024-07-20T00:00:00Z"}
    c = res["contract"]
    assert c["normalised_grid"][:3] == [0.4, 0.45, 0.5] and c["normalised_grid"][-1] == 2.0 and len(c["normalised_grid"]) == 33
    assert c["capacity_grid"] == (GRID * 17618.303571428572).tolist() and c["scale"] == 17618.303571428572
    assert (c["ramp"], c["surplus_price"], c["unit"]) == (0.3, 0.3, "MW")
    assert c["shortage_weights"] == [1.0] * 12 + [2.0] * 6 + [1.5] * 6  # Friday: 4 mod 4 = 0, pattern unrotated
    assert res["tariff"]["seasonal_empirical"] == {"336": [400, 1027, 1588, 3065, 3756, 5206]}
    assert res["tools"][-2:] == ["abstain", "submit"] and res["task"] == "decision"
    assert res["case"]["last_visible"] == "2024-07-17T21:00:00Z" and res["case"]["target_steps"] == [27, 50]


def test_catalog_prices_the_covering_request_and_tracks_the_ledger(make_episode):
    ep = make_episode(budget=2000)
    models = {m["model"]: m for m in run(ep, "catalog")["result"]["models"]}
    se = models["seasonal_empirical"]
    assert se["credits_full_context_covering_horizon"] == 1027 and se["affordable"] and se["available"]
    assert models["timesfm25"]["credits_full_context_covering_horizon"] == 1187691 and not models["timesfm25"]["affordable"]
    assert models["chronos_bolt_tiny"]["note"].startswith("native horizon 64")
    assert run(ep, "forecast", model="seasonal_empirical")["ok"]
    res = run(ep, "catalog")["result"]
    assert res["budget"] == {"budget": 2000, "spent": 1027, "remaining": 973}
    assert res["calls"] == {"limit": 12, "used": 2, "remaining": 10}  # this catalog is call 3: counted after it runs
    assert not {m["model"]: m for m in res["models"]}["seasonal_empirical"]["affordable"]  # 1027 > 973


def test_catalog_takes_no_arguments(make_episode):
    err = run(make_episode(), "catalog", last=3)["error"]
    assert err["code"] == "invalid_arguments" and "unknown argument(s) ['last']" in err["message"]


def test_history_last_n_hours(make_episode, case):
    res = run(make_episode(), "history", last=3)["result"]
    assert res["timestamps"] == ["2024-07-17T19:00:00Z", "2024-07-17T20:00:00Z", "2024-07-17T21:00:00Z"]
    assert res["values"] == case.history[-3:].tolist() and (res["series_id"], res["unit"]) == ("ISNE", "MW")
    assert len(run(make_episode(), "history")["result"]["values"]) == 48  # the default


def test_history_range_is_inclusive_and_inside_the_window(make_episode, case):
    ep = make_episode()
    res = run(ep, "history", start="2024-07-03T22:00:00Z", end="2024-07-04T01:00:00+00:00")["result"]
    assert res["values"] == case.history[:4].tolist() and res["timestamps"][0] == "2024-07-03T22:00:00Z"
    full = run(ep, "history", start="2024-07-03T22:00:00Z")["result"]
    assert np.array_equal(full["values"], case.history) and full["timestamps"][-1] == "2024-07-17T21:00:00Z"
    assert run(ep, "history", end="2024-07-04T02:00:00+04:00")["result"]["values"] == case.history[:1].tolist()


@pytest.mark.parametrize("args,code,needle", [
    ({"end": CUT}, "out_of_range", "never visible"),
    ({"start": "2024-07-03T21:00:00Z"}, "out_of_range", "2024-07-03T22:00:00Z .. 2024-07-17T21:00:00Z"),
    ({"start": "2024-07-05T00:00:00Z", "end": "2024-07-04T00:00:00Z"}, "invalid_arguments", "'end' is before 'start'"),
    ({"last": 3, "start": "2024-07-05T00:00:00Z"}, "invalid_arguments", "not both"),
    ({"last": 337}, "invalid_arguments", "1..336"),
    ({"last": 2.5}, "invalid_arguments", "must be an integer"),
    ({"last": True}, "invalid_arguments", "must be an integer"),
    ({"start": "2024-07-05T00:00:00"}, "invalid_arguments", "time-zone-aware"),
    ({"start": 5}, "invalid_arguments", "ISO 8601 timestamp string"),
])
def test_history_refusals(make_episode, args, code, needle):
    err = run(make_episode(), "history", **args)["error"]
    assert err["code"] == code and needle in err["message"], err



def test_catalog_tariff_lists_the_rows_of_every_pool_model():
    # the protocol table (and only it) in a protocol env; an extended pool adds its models' frozen rows
    import json
    from pathlib import Path

    import fwgym
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.forecasters import EXTENDED_MODELS
    from fwgym.core.tariff import TARIFF

    frozen = json.loads((Path(fwgym.__file__).parent / "config" / "tariff_extended.json").read_text())["rows"]
    env = FWBenchEnv(domain="electricity", split="dev")
    env.reset(seed=0)
    assert list(env.step({"tool": "catalog"})[-1]["tool_result"]["result"]["tariff"]) == list(TARIFF)
    env = FWBenchEnv(domain="electricity", split="dev", models=EXTENDED_MODELS)
    env.reset(seed=0)
    table = env.step({"tool": "catalog"})[-1]["tool_result"]["result"]["tariff"]
    extra = [m for m in EXTENDED_MODELS if m not in TARIFF]
    assert extra and list(table) == list(TARIFF) + extra
    assert {m: table[m] for m in extra} == {m: frozen[m] for m in extra}
