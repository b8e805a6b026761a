"""A new dataset is one module plus its data: a toy domain registered from outside the package (synthetic series
written by this test, tests/domains/toy.py) plays every suite (decision, context, forecast) with fixed baselines,
oracles and the runner, is re-scored by the verifier and read back by the CLI, without any edit of fwgym."""
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from fwgym.context.alpha import rcrps_alpha
from fwgym.context.scenarios import make_scenario, register_scenario_family
from fwgym.core.cases import HISTORY_HOURS, LEADS, build_cases, case_quality, get_case, parse_case_id
from fwgym.core.scoring import BUDGET, load_sigma
from fwgym.domains import DOMAINS, get_domain, register_domain, unregister_domain
from fwgym.envs import ENV_IDS, register_envs
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import SUITES, evaluate, verify_record
from fwgym.evaluation.verify import RunSettings
from tests.domains.toy import AUCKLAND, FESTIVAL, SHOPS, START, TOY_SIGMA, epoch_hour, make_toy_domain, toy_values, \
    write_toy_data

ROOT = Path(__file__).resolve().parents[2]
TOY_IDS = ("FWBench-Toy-v0", "FWBench-Toy-Context-v0", "FWBench-Toy-Forecast-v0")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    path, digest = write_toy_data(tmp_path_factory.mktemp("toy-data"))
    register_scenario_family(FESTIVAL, replace=True)
    domain = register_domain(make_toy_domain(path, digest))
    register_envs()
    yield domain
    unregister_domain("toy")
    for env_id in TOY_IDS:
        gym.registry.pop(env_id, None)


def _expected_cases(split_dates: dict[str, tuple]) -> set[str]:
    """Brute force, from the test's own arrays: the (shop, date, lead) whose 336-hour history and 24 target hours
    are all present with a positive mean and no complete Auckland day of zero sales in the history."""
    out = set()
    for shop in SHOPS:
        v = toy_values(shop)
        for dates in split_dates.values():
            for d in dates:
                t0 = epoch_hour(datetime(d.year, d.month, d.day, tzinfo=AUCKLAND)) - epoch_hour(START)
                for lead, days in LEADS.items():
                    h0 = t0 - 24 * days - 2 - HISTORY_HOURS
                    hist, tgt = v[h0:h0 + HISTORY_HOURS], v[t0:t0 + 24]
                    if not (np.isfinite(hist).all() and np.isfinite(tgt).all() and hist.mean() > 0):
                        continue
                    day = (START + timedelta(hours=h0)).astimezone(AUCKLAND).date()
                    zero_day = False
                    while True:
                        a = epoch_hour(datetime(day.year, day.month, day.day, tzinfo=AUCKLAND)) - epoch_hour(START)
                        nxt = day + timedelta(days=1)
                        b = epoch_hour(datetime(nxt.year, nxt.month, nxt.day, tzinfo=AUCKLAND)) - epoch_hour(START)
                        if b > h0 + HISTORY_HOURS:
                            break
                        if a >= h0 and v[a:b].sum() == 0:
                            zero_day = True
                        day = nxt
                    if not zero_day:
                        out.add(f"toy-{shop}-{d.isoformat()}-{lead}")
    return out


def test_the_toy_domains_cases_follow_its_spec(toy):
    test = build_cases("toy", "test")
    assert {c.case_id for c in test} == _expected_cases(toy.calendars["test"])
    assert {c.case_id for c in build_cases("toy", "dev")} == _expected_cases(toy.calendars["dev"])
    assert {c.cohort for c in test} == {"toy-september", "toy-october"}
    assert "toy-east-2021-09-26-day_ahead" not in {c.case_id for c in test}  # the closed day is in its history
    east = get_domain("toy")
    from fwgym.core.series import load_series

    s = load_series("toy")["east"]
    start = epoch_hour(datetime(2021, 9, 26, tzinfo=AUCKLAND))
    assert case_quality(s, start, "day_ahead") == "inactive_history_day" and east.quality_rules
    # the clocks go forward on 2021-09-26: the target day starts at local midnight, 12:00 UTC the day before (NZST)
    c = next(c for c in test if c.target_date.isoformat() == "2021-09-26" and c.lead == "day_ahead")
    assert c.target_start == epoch_hour(datetime(2021, 9, 25, 12, tzinfo=timezone.utc)) and c.as_of == c.target_start - 24
    assert c.series.name == f"{c.series_id.title()} Widgets" and c.series.unit == "widgets/hour"
    assert parse_case_id(c.case_id) == ("toy", c.series_id, c.target_date, "day_ahead")
    assert get_case(c.case_id) is c
    train = build_cases("toy", "train")
    first_eval = min(x.history_start for x in build_cases("toy", "dev") + test)
    assert train and max(x.target_start + 24 for x in train) <= first_eval and {x.cohort for x in train} == {"toy-train"}


def test_the_toy_domain_has_env_ids_but_the_protocol_ids_keep_their_domains(toy):
    env = gym.make("FWBench-Toy-Forecast-v0", split="test")
    assert env.unwrapped.domains == ("toy",) and env.unwrapped.task == "forecast" and env.unwrapped.scenarios
    assert ENV_IDS["FWBench-v0"]["domain"] == ("electricity", "cycle_hire") == DOMAINS
    assert gym.spec("FWBench-v0").kwargs["domain"] == ("electricity", "cycle_hire")
    obs, info = env.reset(seed=0)
    assert "hourly widget sales of the shop" in obs["context"] and "(New Zealand)" in obs["context"]
    assert "In the 2 weeks before the visible history" in obs["context"] and "street festival" in obs["context"]
    assert load_sigma(domains=["toy"])["toy"] == TOY_SIGMA and "toy" not in load_sigma()


def _settings(suite: str) -> RunSettings:
    return RunSettings(suite=suite, split="test", sigma=load_sigma(domains=["toy"]), budget=BUDGET, scenario_seed=0,
                       credit_weight=0.0)


def test_the_decision_suite_on_the_toy_domain(toy):
    policies = ["hour_of_day_empirical", "seasonal_empirical", "free_menu_oracle", "catalog_oracle", "perfect_demand"]
    recs = evaluate(policies, split="test", domains=["toy"], progress=False)
    n = len(build_cases("toy", "test"))
    assert len(recs) == n * len(policies) and {r["domain"] for r in recs} == {"toy"}
    for r in recs:
        assert r["R"] == pytest.approx((r["loss"] - r["floor"]) / TOY_SIGMA, rel=1e-12)
        assert r["S"] == 0.5 * (r["R"] + r["credits"] / BUDGET)
        verify_record(r, _settings("decision"))
    by = {p: [r for r in recs if r["policy"] == p] for p in policies}
    assert all(r["R"] == 0.0 and r["credits"] == 0 for r in by["perfect_demand"])
    assert all(r["credits"] > 0 for r in by["seasonal_empirical"])  # it buys its forecast
    free = np.array([r["S"] for r in by["free_menu_oracle"]])
    hod = np.array([r["S"] for r in by["hour_of_day_empirical"]])
    assert np.all(free <= hod + 1e-12)  # the hindsight choice among free methods includes hour_of_day_empirical


def test_the_context_and_forecast_suites_on_the_toy_domain(toy):
    ctx = evaluate(["hour_of_day_empirical", "context_hour_of_day_empirical", "perfect_demand"], split="test",
                   domains=["toy"], env_kwargs=SUITES["context"], progress=False)
    assert {r["scenario"] for r in ctx} == {"toy_festival"}
    for r in ctx:
        verify_record(r, _settings("context"))
    assert all(r["R"] == 0.0 for r in ctx if r["policy"] == "perfect_demand")  # on the festival's target
    case = build_cases("toy", "test")[0]
    sc = make_scenario(case)
    np.testing.assert_array_equal(sc.apply(case.target())[sc.roi], np.rint(case.target()[sc.roi] * 2.0))
    fc = evaluate(["hour_of_day_empirical_samples", "context_hour_of_day_empirical"], split="test", domains=["toy"],
                  env_kwargs=SUITES["forecast"], progress=False)
    for r in fc:
        verify_record(r, _settings("forecast"))
        assert 0 < r["rcrps"] < 5 and r["S"] == r["R"] == r["rcrps"]
    # alpha = 1 / mean range of the festival's targets over the series' train cases (Context is Key §5.1)
    r = fc[0]
    train = [c for c in build_cases("toy", "train") if c.series_id == r["series_id"]]
    assert len(train) > 200  # 200 evenly spaced train cases (fwgym.context.alpha.ALPHA_SCENARIO_CASES)
    train = [train[i] for i in np.unique(np.linspace(0, len(train) - 1, 200).round().astype(int))]
    ranges = [np.ptp(make_scenario(c, 0, "toy_festival").apply(c.target())) for c in train]
    assert r["alpha"] == rcrps_alpha("toy", r["series_id"], "toy_festival") == pytest.approx(1 / np.mean(ranges))


def test_the_cli_runs_and_ranks_the_toy_domain(toy, tmp_path, capsys):
    from fwgym.cli import main
    from fwgym.evaluation import load_results

    out = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--domain", "toy", "--suite", "forecast", "--no-progress",
                 "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["sigma"]["toy"] == TOY_SIGMA and manifest["settings"]["domains"] == ["toy"]
    rs = load_results([out])  # re-scored and hash-checked
    assert rs.settings["suite"] == "forecast" and {r["domain"] for r in rs.records} == {"toy"}
    assert main(["leaderboard", str(out)]) == 0
    assert "suite=forecast" in capsys.readouterr().out


def test_a_domain_with_a_used_name_prefix_or_a_bad_spec_is_refused(toy, tmp_path):
    from dataclasses import replace

    from fwgym.domains import DomainError

    with pytest.raises(DomainError, match="already registered"):
        register_domain(make_toy_domain(Path(toy.series_file.path), toy.series_file.sha256))
    with pytest.raises(DomainError, match="id_prefix 'elec'"):
        register_domain(replace(toy, name="toy2", env_name="Toy2", id_prefix="elec"))
    with pytest.raises(DomainError, match="built in"):
        register_domain(replace(get_domain("electricity"), title="x"), replace=True)
    with pytest.raises(ValueError, match="lacks the \\['dev'\\] split"):
        replace(toy, calendars={"test": toy.calendars["test"]})
    with pytest.raises(ValueError, match="is in 'dev' and 'test'"):
        replace(toy, calendars={"dev": toy.calendars["test"], "test": toy.calendars["test"]})
    with pytest.raises(ValueError, match="time zone"):
        replace(toy, time_zone="Mars/Olympus")
    with pytest.raises(ValueError, match="sha256"):
        replace(toy, series_file=type(toy.series_file)(tmp_path / "x.parquet"))
    with pytest.raises(ValueError, match=r"unknown domain\(s\) \['nope'\]; expected some of \['electricity', 'cycle_hire', 'toy'\]"):
        FWBenchEnv("nope")
    with pytest.raises(ValueError, match="unknown domain 'nope'"):
        get_domain("nope")


def test_rl_features_take_their_domain_slots_from_the_registry(tmp_path):
    """Registered before fwgym.rl: one more one-hot slot and feature version '1+toy'; a policy saved with the
    protocol's slots (v1) is refused with a message naming both layouts. Registered after: a clear error."""
    code = f"""
import sys
from pathlib import Path
from tests.domains.toy import FESTIVAL, make_toy_domain, write_toy_data
from fwgym.context.scenarios import register_scenario_family
from fwgym.domains import register_domain
path, digest = write_toy_data(Path({str(tmp_path)!r}))
register_scenario_family(FESTIVAL)
if sys.argv[1] == "before":
    register_domain(make_toy_domain(path, digest))
import fwgym.rl.features as F
from fwgym.rl import make_rl_env
if sys.argv[1] == "after":
    register_domain(make_toy_domain(path, digest))
print(F.FEATURE_VERSION, F.N_FEATURES, F.FEATURE_DOMAINS)
env = make_rl_env(domain="toy", split="test")
try:
    env.reset(seed=0)
    print("reset ok", env.observation_space.shape)
except ValueError as exc:
    print("refused:", exc)
try:
    F.check_feature_version(1, "ppo.zip")
except ValueError as exc:
    print("version:", exc)
"""
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    before = subprocess.run([sys.executable, "-c", code, "before"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert before.returncode == 0, before.stderr
    lines = before.stdout.splitlines()
    assert lines[0] == "1+toy 404 ('electricity', 'cycle_hire', 'toy')" and lines[1] == "reset ok (404,)"
    assert lines[2].startswith("version: ppo.zip: trained on fwgym features v1; this fwgym computes v1+toy")
    assert "['electricity', 'cycle_hire']" in lines[2] and "before importing fwgym.rl" in lines[2]
    after = subprocess.run([sys.executable, "-c", code, "after"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert after.returncode == 0, after.stderr
    lines = after.stdout.splitlines()
    assert lines[0] == "1 403 ('electricity', 'cycle_hire')"
    assert lines[1].startswith("refused: domain 'toy' has no feature slot") and "registered after" in lines[1]
    assert len(lines) == 2  # a v1 policy loads where the slots are the protocol's
