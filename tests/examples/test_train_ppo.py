"""examples/train_ppo.py: the quick run end to end (dev selection before one test evaluation, curves equal
to the episode loop, bootstrap intervals, purchase tables), the training-pool draw and the purchase table
on hand-made records."""
import json
import runpy
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def example():
    return runpy.run_path(str(ROOT / "examples" / "train_ppo.py"))


def test_quick_run_selects_on_dev_and_tests_once(example, tmp_path, capsys, monkeypatch):
    import fwgym.evaluation
    from fwgym.envs.fwbench import FWBenchEnv

    events = []
    evaluate, init = fwgym.evaluation.evaluate, FWBenchEnv.__init__

    def logged_evaluate(policies, split="test", **kw):
        events.append(("evaluate", split))
        return evaluate(policies, split=split, **kw)

    def logged_init(self, *a, **kw):
        events.append(("env", kw.get("split", "train")))
        init(self, *a, **kw)

    monkeypatch.setattr(fwgym.evaluation, "evaluate", logged_evaluate)
    monkeypatch.setattr(FWBenchEnv, "__init__", logged_init)
    assert example["main"](["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out

    # the test split is reached once, by one evaluate call after every dev evaluation, and by nothing else
    assert [e for e in events if e[0] == "evaluate"] == [("evaluate", "dev"), ("evaluate", "test")]
    first_test = next(i for i, e in enumerate(events) if e == ("env", "test"))
    assert events.index(("evaluate", "test")) < first_test
    assert {e[1] for e in events[:events.index(("evaluate", "test"))] if e[0] == "env"} <= {"train", "dev"}

    s = json.loads((tmp_path / "summary.json").read_text())
    search = s["dev_search"]
    assert len(search) == 2 * 1 * 3  # 2 feature sets x 1 learning rate x 3 seeds (quick)
    for r in search:  # the learning curve's table equals the episode loop on every dev case and in aggregate
        assert r["curve_check_max_abs"] == 0.0 and abs(r["curve_end_minus_dev_S"]) < 1e-12
        assert r["curve"][0][0] == 0 and r["curve"][-1][0] == r["steps"] >= 2048
    means = {}
    for r in search:
        means.setdefault((r["features"], r["lr"]), []).append(r["dev_S"])
    chosen = min(means, key=lambda k: sum(means[k]) / len(means[k]))
    assert (s["chosen"]["features"], s["chosen"]["lr"]) == chosen
    best = min(s["dev_fixed"], key=lambda p: (s["dev_fixed"][p], p) if p != "free_menu_oracle" else (float("inf"), p))
    assert s["best_fixed_dev"]["policy"] == best

    learned = [r["name"] for r in search if (r["features"], r["lr"]) == chosen]
    assert len(learned) == 3 and set(learned) <= set(s["test"])
    assert {"free_menu_oracle", "catalog_oracle_extended", best, "ets", "mstl_ets"} <= set(s["test"])
    ref = s["test"][best]["S"]
    for b, name in zip(s["bootstrap"], learned):
        assert b["policy"] == name and b["reference"] == best
        assert b["diff"] == pytest.approx(s["test"][name]["S"] - ref, abs=1e-12) and b["lo"] <= b["diff"] <= b["hi"]
        assert f"{name}: test S" in out and "95% CI" in out
    groups = s["purchases"]["groups"]
    assert {(g["domain"], g["lead"]) for g in groups} == {(d, lead) for d in ("electricity", "cycle_hire")
                                                         for lead in ("day_ahead", "week_ahead")}
    assert sum(g["cases"] for g in groups) == s["test_cases"] == 10
    assert {r["model"] for r in s["purchases"]["models"]} == {"seasonal_empirical", "ets", "theta", "sarima", "mstl_ets"}
    assert "DEV split" in out and "TEST split" in out and "| domain | lead | model |" in out
    png = (tmp_path / "learning_curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    for split in ("dev", "test"):
        assert (tmp_path / split / "results.jsonl").is_file()
    assert len(list(tmp_path.glob("ppo_*.zip"))) == 6


def test_train_pool_draw(example):
    from fwgym.core.cases import build_cases

    a, b = example["train_case_ids"](9, 3), example["train_case_ids"](9, 3)
    assert a == b and len(set(a)) == 9 and example["train_case_ids"](9, 4) != a
    elec = {c.case_id: i for i, c in enumerate(build_cases("electricity", "train"))}
    cyc = {c.case_id: i for i, c in enumerate(build_cases("cycle_hire", "train"))}
    assert all(c in elec for c in a[:4]) and all(c in cyc for c in a[4:])  # 9 // 2 electricity, the rest cycle hire
    assert [elec[c] for c in a[:4]] == sorted(elec[c] for c in a[:4])
    with pytest.raises(ValueError, match=">= 2"):
        example["train_case_ids"](1, 0)


def _rec(policy, case, S, credits=0, bought=()):
    cid, series = case
    return {"policy": policy, "case_id": cid, "domain": "cycle_hire", "cohort": "cycle_hire-oct", "series_id": series,
            "lead": "day_ahead", "S": S, "credits": credits, "valid": True,
            "forecast_crps": {f"f{i}": {"model": m, "crps": 1.0, "crps_scaled": 0.1} for i, m in enumerate(bought)}}


def test_purchase_table_by_hand(example):
    """Two cases (two stations, one group: weights 1/2 each); free methods weekday 0.4/0.2, hour-of-day
    0.3/0.5; ets 0.25/0.6 (beats every free plan on case 1 only); the learned policy buys ets on case 1."""
    c1, c2 = ("cycle-1-2015-10-01-day_ahead", "1"), ("cycle-2-2015-10-01-day_ahead", "2")
    recs = [_rec("weekday_empirical", c1, 0.4), _rec("weekday_empirical", c2, 0.2),
            _rec("hour_of_day_empirical", c1, 0.3), _rec("hour_of_day_empirical", c2, 0.5),
            _rec("ets", c1, 0.25, 6230, ["ets"]), _rec("ets", c2, 0.6, 6230, ["ets"]),
            _rec("L", c1, 0.25, 6230, ["ets"]), _rec("L", c2, 0.2),
            _rec("O", c1, 0.25, 6230, ["ets"]), _rec("O", c2, 0.2)]
    t = example["purchase_tables"](recs, ["L"], "O", ["ets"])
    (g,) = t["groups"]
    assert (g["domain"], g["lead"], g["cases"]) == ("cycle_hire", "day_ahead", 2)
    assert g["best_free"] == "weekday_empirical" and g["best_free_S"] == pytest.approx(0.3)  # (0.4 + 0.2) / 2 < 0.4
    assert g["best_priced"] == "ets" and g["dS_best_priced_vs_best_free"] == pytest.approx(0.425 - 0.3)
    assert g["learned_buy_rate"] == [0.5] and g["oracle_buy_rate"] == 0.5 and g["learned_models"] == ["ets"]
    assert g["bought_episodes"] == 1 and g["mean_dS_bought_vs_best_free"] == pytest.approx(0.25 - 0.4)
    (m,) = t["models"]
    assert m["paid_rate"] == 0.5 and m["oracle_pick_rate"] == 0.5 and m["learned_buy_rate"] == [0.5]
    assert m["mean_credits"] == 6230 and m["dS_vs_best_free"] == pytest.approx(0.125)
    text = example["format_purchases"](t)
    assert "| cycle_hire | day_ahead | ets | 6,230 | 50.0% | 50.0% | 50.0% | +0.1250 |" in text


def test_the_step_count_printed_is_the_one_trained(example):
    rollout = example["ppo_hyperparams"]()["rollout"]
    assert example["trained_steps"](20_000) == 20_480 == 20 * rollout
    assert example["trained_steps"](rollout) == rollout and example["trained_steps"](1) == rollout
