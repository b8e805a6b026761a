"""The pedestrian domain through the Domain spec: opt-in registration (the protocol's defaults unchanged), every
suite played and re-scored, sigma reproduced by the calibration, the CLI, the scenario families, RL features."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from fwgym.core.scoring import BUDGET, load_sigma
from fwgym.domains import DOMAINS, get_domain, unregister_domain
from fwgym.domains import pedestrian as D
from fwgym.evaluation import SUITES, evaluate, verify_record
from fwgym.evaluation.verify import RunSettings

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}


@pytest.fixture(scope="module")
def ped():
    """The domain registered for this module's tests, unregistered afterwards (other tests see the protocol's)."""
    domain = get_domain("pedestrian")
    yield domain
    unregister_domain("pedestrian")


def _settings(suite: str) -> RunSettings:
    return RunSettings(suite=suite, split="test", sigma=load_sigma(domains=["pedestrian"]), budget=BUDGET,
                       scenario_seed=0, credit_weight=0.0)


def test_opt_in_leaves_the_protocol_alone():
    """``import fwgym`` registers the pedestrian env ids but not the domain: the protocol's domains, FWBench-v0,
    the packaged sigma and the RL feature layout (v1, 403 features) are unchanged until it is asked for."""
    code = """
import gymnasium as gym, fwgym
from fwgym.domains import domain_names
import fwgym.rl.features as F
print(domain_names(), F.FEATURE_VERSION, F.N_FEATURES, gym.spec("FWBench-v0").kwargs["domain"])
from fwgym.core.scoring import load_sigma
print(sorted(load_sigma()))
env = gym.make("FWBench-Pedestrian-v0", split="test")
print(domain_names(), env.unwrapped.domains)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "('electricity', 'cycle_hire') 1 403 ('electricity', 'cycle_hire')"
    assert lines[1] == "['cycle_hire', 'electricity']"
    assert lines[2] == "('electricity', 'cycle_hire', 'pedestrian') ('pedestrian',)"


def test_the_spec(ped):
    from fwgym.envs import opt_in_env_ids

    assert ped is D.SPEC and not ped.protocol and ped.name not in DOMAINS
    assert (ped.env_name, ped.id_prefix, ped.unit, ped.time_zone) == ("Pedestrian", "ped", "people/hour",
                                                                      "Pacific/Auckland")
    assert load_sigma(domains=["pedestrian"])["pedestrian"] == D.SIGMA
    assert "pedestrian" not in load_sigma()
    # the env name the opt-in ids use before registration is the spec's
    assert "".join(p.title() for p in ped.name.split("_")) == ped.env_name
    assert set(opt_in_env_ids()) <= {"FWBench-Pedestrian-v0", "FWBench-Pedestrian-Context-v0",
                                     "FWBench-Pedestrian-Forecast-v0"}
    assert gym.spec("FWBench-Pedestrian-Forecast-v0").kwargs["domain"] == "pedestrian"


def test_context_text(ped):
    env = gym.make("FWBench-Pedestrian-Context-v0", split="test")
    obs, _ = env.reset(options={"case_id": "ped-45_queen_street-2025-02-11-day_ahead"})
    ctx = obs["context"]
    assert "hourly pedestrian counts (people counted per hour, both directions) at the 45 Queen Street sensor in " \
           "lower Queen Street" in ctx
    assert "In February 2024 (same month last year)" in ctx and "Waitangi Day (Thu 06 Feb)" in ctx
    assert "people/hour" in ctx and "Context: " in ctx
    note = ctx.split("Context: ", 1)[1].split("\n", 1)[0]
    case = next(c for c in env.unwrapped.cases if c.case_id == "ped-45_queen_street-2025-02-11-day_ahead")
    from fwgym.context.scenarios import make_scenario

    sc = make_scenario(case)  # the env's scenario (seed 0): a note of the held-out pool
    assert sc.text == note and sc.variant["pool"] == "held_out" and sc.family in D.FAMILIES


def test_the_decision_suite(ped):
    policies = ["hour_of_day_empirical", "weekday_empirical", "seasonal_empirical", "free_menu_oracle",
                "catalog_oracle", "perfect_demand"]
    recs = evaluate(policies, split="test", domains=["pedestrian"], limit=12, progress=False)
    assert len(recs) == 12 * len(policies) and {r["domain"] for r in recs} == {"pedestrian"}
    for r in recs:
        assert r["R"] == pytest.approx((r["loss"] - r["floor"]) / D.SIGMA, rel=1e-12)
        assert r["S"] == 0.5 * (r["R"] + r["credits"] / BUDGET)
        verify_record(r, _settings("decision"))
    by = {p: [r for r in recs if r["policy"] == p] for p in policies}
    assert all(r["R"] == 0.0 and r["credits"] == 0 for r in by["perfect_demand"])
    assert all(r["credits"] > 0 for r in by["seasonal_empirical"])
    free = np.array([r["S"] for r in by["free_menu_oracle"]])
    assert np.all(free <= np.array([r["S"] for r in by["hour_of_day_empirical"]]) + 1e-12)
    assert {r["cohort"] for r in recs} <= {"pedestrian-february", "pedestrian-july", "pedestrian-november"}


def test_the_context_and_forecast_suites(ped):
    ctx = evaluate(["hour_of_day_empirical", "context_hour_of_day_empirical", "perfect_demand"], split="test",
                   domains=["pedestrian"], limit=16, env_kwargs=SUITES["context"], progress=False)
    assert {r["scenario"] for r in ctx} <= set(D.FAMILIES) and len({r["scenario"] for r in ctx}) >= 3
    for r in ctx:
        verify_record(r, _settings("context"))
    assert all(r["R"] == 0.0 for r in ctx if r["policy"] == "perfect_demand")
    fc = evaluate(["hour_of_day_empirical_samples", "context_hour_of_day_empirical"], split="test",
                  domains=["pedestrian"], limit=8, env_kwargs=SUITES["forecast"], progress=False)
    for r in fc:
        verify_record(r, _settings("forecast"))
        assert r["rcrps"] > 0 and r["S"] == r["R"] == min(r["rcrps"], 5.0)  # a closure's bound can cost above the cap


def test_the_context_draws_the_domains_families(ped):
    """The context draws every case's scenario from the domain's families (fwgym.context.pedestrian) among those
    that fit it: no cruise ship outside the cruise season, no one-off holiday on a weekend or a real holiday; every
    family's target is counts."""
    from fwgym.context.scenarios import fits, make_scenario
    from fwgym.core.cases import build_cases

    cases = build_cases("pedestrian", "test")
    drawn = set()
    for c in cases[::5]:
        sc = make_scenario(c, 0)
        drawn.add(sc.family)
        assert fits(c, sc.family) and sc.family in D.FAMILIES
        if c.target_date.month == 7:
            assert sc.family != "cruise_ship"
        y = sc.apply(c.target())
        assert (y >= 0).all() and np.array_equal(y, np.rint(y))
    assert drawn == set(D.FAMILIES)
    july = next(c for c in cases if c.target_date.month == 7)
    with pytest.raises(ValueError, match="does not fit"):
        make_scenario(july, 0, "cruise_ship")


def test_sigma_is_the_calibration(ped):
    """``fwgym calibrate-sigma --domain pedestrian`` (the protocol's rule: the hour-of-day policy's mean excess loss
    on the dev split) reproduces the frozen value."""
    from fwgym.evaluation.calibration import calibrate_sigma

    result = calibrate_sigma(domains=["pedestrian"], progress=False)
    assert result["cases"] == {"pedestrian": 431}
    assert result["sigma"]["pedestrian"] == pytest.approx(D.SIGMA, rel=1e-12)


def test_the_cli(ped, tmp_path, capsys):
    from fwgym.cli import main
    from fwgym.evaluation import load_results

    out = tmp_path / "run"
    assert main(["evaluate", "--split", "test", "--domain", "pedestrian", "--policies", "hour_of_day_empirical",
                 "--limit", "3", "--no-progress", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["sigma"]["pedestrian"] == D.SIGMA and manifest["settings"]["domains"] == ["pedestrian"]
    rs = load_results([out])
    assert {r["domain"] for r in rs.records} == {"pedestrian"}
    assert main(["leaderboard", str(out)]) == 0
    assert "hour_of_day_empirical" in capsys.readouterr().out
    from fwgym.cli.args import domains

    assert domains("all") == list(DOMAINS) and domains("all-domains")[:2] == list(DOMAINS)
    assert "pedestrian" in domains("all-domains")


def test_rl_features_with_the_domain_registered_first():
    code = """
from fwgym.domains import get_domain
get_domain("pedestrian")
import fwgym.rl.features as F
from fwgym.rl import make_rl_env
print(F.FEATURE_VERSION, F.N_FEATURES)
env = make_rl_env(domain=["pedestrian"], split="test")
obs, info = env.reset(seed=0)
print(obs.shape, obs[F.feature_index("domain_pedestrian")])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1+pedestrian 404", "(404,) 1.0"]
