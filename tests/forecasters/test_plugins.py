"""Plug-in forecasters and the extended pool: a model registered in memory, or through an entry point of
an installed distribution, is quoted, bought, planned on and scored through ``env.step``; it is a
fixed policy, a catalog-oracle candidate and an RL macro entry; the protocol's pool, menus and
features stay as they are."""
from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fwgym.agents import run_episode
from fwgym.baselines.oracles import oracle_grant
from fwgym.baselines import make_policy, policy_names
from fwgym.baselines.oracles import MenuOracle
from fwgym.baselines.registry import EXTENDED_POLICIES, policy_models, unavailable_policies
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters import registry
from fwgym.forecasters.base import Availability
from fwgym.forecasters.registry import (EXTENDED_MODELS, PRICED_MODELS, ForecasterSpec, PluginError, check_models,
                                        describe_pool, get_forecaster, known_models, load_entry_points,
                                        register_forecaster, unregister_forecaster)
from fwgym.core.tariff import price
from fwgym.rl.features import FeatureObservation, feature_index
from fwgym.rl.macro import SEQUENTIAL_MENU, SINGLE_MENU, MacroActionWrapper, SequentialMacroWrapper, menu_for
from plugin_toys import WeeklyRepeatQuantiles  # a module a plug-in's worker process can import

CASE = "cycle-101-2015-10-05-day_ahead"
ROWS = {96: [900, 900, 950, 1000, 1100, 1200], 336: [1000, 1001, 1050, 1100, 1200, 1300]}


@pytest.fixture
def plugin():
    spec = register_forecaster("weekly_toy", WeeklyRepeatQuantiles, ROWS, min_context=180,
                               description="test plug-in")
    yield spec
    unregister_forecaster("weekly_toy")


def _steps(env, calls):
    infos = []
    for c in calls:
        _, reward, term, _, info = env.step(c)
        infos.append((reward, term, info))
    return infos


def test_protocol_pool_menus_and_policies_are_unchanged():
    assert check_models(None) == PRICED_MODELS and FWBenchEnv("electricity", split="dev").models == PRICED_MODELS
    assert menu_for("macro") == SINGLE_MENU and menu_for("sequential") == SEQUENTIAL_MENU
    assert menu_for("macro", PRICED_MODELS) == SINGLE_MENU and menu_for("macro", ("seasonal_empirical",)) == SINGLE_MENU
    assert describe_pool(PRICED_MODELS) == {"pool": "protocol", "models": list(PRICED_MODELS),
                                            "tariff": {m: "protocol" for m in PRICED_MODELS}}
    d = describe_pool(EXTENDED_MODELS)
    assert d["pool"] == "extended" and d["extended_tariff"]["sha256"] and d["tariff"]["sarima"] == "extended"
    assert describe_pool(("seasonal_empirical", "ets"))["pool"] == "custom"
    assert set(EXTENDED_POLICIES) <= set(policy_names())
    assert policy_models("catalog_oracle") == PRICED_MODELS and policy_models("catalog_oracle_extended") == EXTENDED_MODELS
    assert policy_models("ets") == ("ets",) and policy_models("weekday_empirical") == ()


def test_bad_pools_and_registrations():
    for bad, match in ((["ets", "ets"], "twice"), (["nope"], "unknown models"), ([3], "strings")):
        with pytest.raises(ValueError, match=match):
            check_models(bad)
    with pytest.raises(ValueError, match="unknown models"):
        FWBenchEnv("electricity", split="dev", models=("seasonal_empirical", "nope"))
    with pytest.raises(ValueError, match="built-in"):
        register_forecaster("sarima", WeeklyRepeatQuantiles, ROWS)
    with pytest.raises(ValueError, match="model name"):
        register_forecaster("bad name", WeeklyRepeatQuantiles, ROWS)
    with pytest.raises(TypeError):
        register_forecaster("x1", "not callable", ROWS)
    with pytest.raises(ValueError):
        register_forecaster("x1", WeeklyRepeatQuantiles, {336: [1, 2]})
    with pytest.raises(ValueError, match="min_context"):
        register_forecaster("x1", WeeklyRepeatQuantiles, ROWS, min_context=400)
    assert "x1" not in known_models()
    with pytest.raises(ValueError, match="unknown model"):
        price("x1", 336, 50)
    register_forecaster("x2", lambda: "not a forecaster", ROWS)
    try:
        with pytest.raises(PluginError, match="expected a fwgym.forecasters.QuantileForecaster"):
            get_forecaster("x2")
        with pytest.raises(ValueError, match="already registered"):
            register_forecaster("x2", WeeklyRepeatQuantiles, ROWS)
    finally:
        unregister_forecaster("x2")
    with pytest.raises(ValueError, match="not a registered plug-in"):
        unregister_forecaster("x2")


def test_in_memory_plugin_is_bought_planned_and_scored(plugin):
    assert "weekly_toy" in known_models() and "weekly_toy" in policy_names()
    f = get_forecaster("weekly_toy")
    assert f.name == "weekly_toy" and f.min_context == 180  # the registration's min_context
    assert price("weekly_toy", 336, 50)["credits"] == 1001
    models = EXTENDED_MODELS + ("weekly_toy",)
    env = FWBenchEnv("cycle_hire", split="test", models=models, reward="dense")
    env.reset(options={"case_id": CASE})
    (_, _, cat), (_, _, quote), (r_buy, _, buy), (_, _, plan), (_, _, replay) = _steps(env, [
        {"tool": "catalog"},
        {"tool": "quote", "args": {"model": "weekly_toy", "context_steps": 96}},
        {"tool": "forecast", "args": {"model": "weekly_toy"}},
        {"tool": "plan", "args": {"forecast_id": "f1"}},
        {"tool": "replay", "args": {"model": "weekly_toy", "origin": "2015-10-02T20:00:00Z", "context_steps": 200,
                                    "horizon": 24}}])
    entry = next(m for m in cat["tool_result"]["result"]["models"] if m["model"] == "weekly_toy")
    assert entry["available"] and entry["min_context"] == 180 and entry["credits_full_context_covering_horizon"] == 1001
    assert quote["tool_result"]["error"]["code"] == "invalid_arguments"  # context 96 < min_context 180, free
    assert buy["tool_result"]["ok"] and buy["tool_result"]["result"]["credits"] == 1001 and buy["credits"] == 1001
    assert r_buy == pytest.approx(-0.5 * 1001 / 113726)
    q = np.array(buy["tool_result"]["result"]["quantiles"])
    case = env.episode.case
    assert q.shape == (50, 9) and np.allclose(q, WeeklyRepeatQuantiles().predict_quantiles(case.history, 50), atol=5e-7)
    assert replay["tool_result"]["ok"] and replay["credits"] == 1001 + 1000
    decisions = plan["tool_result"]["result"]["plan"]["decisions"]
    _, r_end, term, _, info = env.step({"tool": "submit", "args": {"decisions": decisions}})
    assert term and info["valid"] and info["credits"] == 2001
    assert r_buy + (-0.5 * 1000 / 113726) + r_end == pytest.approx(-info["S"])
    assert info["forecast_crps"]["f1"]["model"] == "weekly_toy"
    # the fixed policy of the plug-in and the catalog oracle over a pool holding it
    rec = run_episode(env, make_policy("weekly_toy"), options={"case_id": CASE}).record
    assert rec["status"] == "submitted" and rec["credits"] == 1001
    oracle = MenuOracle("catalog", models=models)
    rec = run_episode(env, oracle, options={"case_id": CASE}, hindsight=oracle_grant(oracle)).record
    assert "weekly_toy" in oracle.candidates and oracle.candidates["weekly_toy"]["credits"] == 1001
    assert rec["credits"] == oracle.candidates[oracle.choice]["credits"]
    assert {"ets", "theta", "sarima", "mstl_ets"} <= set(oracle.candidates)


def test_plugin_availability_is_reported_and_refused_free():
    state = {"ok": False}
    register_forecaster("gated", WeeklyRepeatQuantiles, ROWS, availability=lambda: state["ok"])
    try:
        env = FWBenchEnv("cycle_hire", split="test", models=("seasonal_empirical", "gated"))
        env.reset(options={"case_id": CASE})
        (_, _, cat), (_, _, buy) = _steps(env, [{"tool": "catalog"}, {"tool": "forecast", "args": {"model": "gated"}}])
        entry = cat["tool_result"]["result"]["models"][1]
        assert not entry["available"] and "unavailable" in entry["unavailable_reason"]
        assert buy["tool_result"]["error"]["code"] == "model_unavailable" and buy["credits"] == 0
        assert "gated" in unavailable_policies(["gated", "weekday_empirical"])
        rec = run_episode(env, make_policy("gated"), options={"case_id": CASE}).record  # falls back, as the TSFMs do
        assert rec["status"] == "submitted" and rec["credits"] == 0
        state["ok"] = True
        assert get_forecaster("gated").availability() == Availability(True, "", "plugin")
        assert unavailable_policies(["gated"]) == {}
    finally:
        unregister_forecaster("gated")


def test_fixed_policy_outside_the_pool_is_an_error_not_a_fallback():
    env = FWBenchEnv("electricity", split="test")
    with pytest.raises(RuntimeError, match="not in the env's models= pool|models= pool"):
        run_episode(env, make_policy("ets"), options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})


def test_macro_menus_extend_after_the_protocol_entries(plugin):
    models = EXTENDED_MODELS + ("weekly_toy",)
    single = menu_for("macro", models)
    assert single[:12] == SINGLE_MENU and [e.name for e in single[12:]] == [
        f"buy_plan_submit:{m}" for m in ("ets", "theta", "sarima", "mstl_ets", "weekly_toy")]
    seq = menu_for("sequential", models)
    assert seq[:28] == SEQUENTIAL_MENU and len(seq) == 28 + 3 * 5
    assert [e.name for e in seq[-3:]] == ["buy_plan_submit:weekly_toy", "replay:weekly_toy", "buy:weekly_toy"]
    env = MacroActionWrapper(FWBenchEnv("cycle_hire", split="test", models=models, text_observations=False))
    assert env.action_space.n == 17
    _, info = env.reset(options={"case_id": CASE})
    mask = info["action_mask"]
    assert mask[16] and mask[12:16].all() and not mask[10]  # chronos2 has no weights here; timesfm25 unaffordable
    _, reward, term, _, info = env.step(16)
    assert term and info["macro"] == "buy_plan_submit:weekly_toy" and info["valid"] and info["credits"] == 1001
    assert reward == pytest.approx(-info["S"])
    seq_env = SequentialMacroWrapper(FWBenchEnv("cycle_hire", split="test", models=models, text_observations=False))
    seq_env.reset(options={"case_id": CASE})
    names = [e.name for e in seq_env.menu]
    _, _, term, _, info = seq_env.step(names.index("replay:weekly_toy"))
    assert not term and info["credits"] == price("weekly_toy", 336 - 50, 50)["credits"] == 1001
    _, _, term, _, info = seq_env.step(names.index("buy_plan_submit:ets"))
    assert term and info["valid"] and info["credits"] == 1001 + price("ets", 336, 50)["credits"]


def test_features_of_the_protocol_slots_do_not_change_with_the_pool():
    base = FeatureObservation(FWBenchEnv("electricity", split="test", text_observations=False))
    ext = FeatureObservation(FWBenchEnv("electricity", split="test", models=EXTENDED_MODELS, text_observations=False))
    a, _ = base.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    b, _ = ext.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    assert a.shape == b.shape == (403,) and np.array_equal(a, b)
    b2, *_ = ext.step({"tool": "forecast", "args": {"model": "ets"}})
    credits = price("ets", 336, 50)["credits"]
    changed = {i for i in np.flatnonzero(b2 != b)}
    assert changed == {feature_index(n) for n in ("budget_left_frac", "calls_left_frac", "forecasts_bought_div4",
                                                  "spent_frac")}  # no per-model slot for a model outside the protocol pool
    assert b2[feature_index("spent_frac")] == pytest.approx(credits / 113726)


_PLUGIN_MODULE = '''
import numpy as np
from fwgym.forecasters import ForecasterSpec, QuantileForecaster
from fwgym.core.optimizer import QUANTILE_LEVELS

class DemoWeekly(QuantileForecaster):
    min_context = 200
    bounded = True
    def _predict(self, context, horizon):
        base = context[-168:][np.arange(horizon) % 168]
        diffs = context[168:] - context[:-168]
        return np.maximum(base[:, None] + np.quantile(diffs, QUANTILE_LEVELS)[None, :], 0.0)

SPEC = ForecasterSpec("demo_weekly", DemoWeekly, {"336": [777, 778, 779, 780, 781, 782]})

def make_spec():
    return ForecasterSpec("demo_callable", DemoWeekly, {"96": [5] * 6, "336": [6] * 6}, min_context=96)
'''


def _only_under(roots):
    """An ``importlib.metadata.entry_points`` that sees only the distributions under ``roots`` (the test's own),
    so that a plug-in installed beside fwgym (as the README describes) changes nothing these tests count."""
    import importlib.metadata as md

    def entry_points(**params):
        eps = [ep for d in md.distributions(path=[str(r) for r in roots]) for ep in d.entry_points]
        return md.EntryPoints(eps).select(**params) if params else md.EntryPoints(eps)
    return entry_points


@pytest.fixture
def only_test_plugins(monkeypatch):
    """``isolate(*roots)``: for the rest of the test, entry points come from the distributions under ``roots`` only,
    and the plug-ins that installed distributions registered earlier in this process are out of the registry."""
    def isolate(*roots):
        monkeypatch.setattr(importlib.metadata, "entry_points", _only_under(roots))
        monkeypatch.setattr(registry, "_PLUGINS", {n: s for n, s in registry._PLUGINS.items()
                                                   if not s.source.startswith("entry point")})
        monkeypatch.setattr(registry, "_ENTRY_POINT_ORIGINS", {})
    return isolate


def _install(root, name, entry_points, module=_PLUGIN_MODULE):
    """A minimal installed distribution (dist-info + module) under ``root`` (put on sys.path)."""
    pkg = name.replace("-", "_")
    (root / f"{pkg}.py").write_text(module)
    info = root / f"{pkg}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fwgym.forecasters]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    return root


_SCRIPT = inspect.getsource(_only_under) + textwrap.dedent('''
    import importlib.metadata
    import sys
    importlib.metadata.entry_points = _only_under(sys.argv[1:])  # the test's distribution only, not installed plug-ins
    import json
    from fwgym.agents import run_episode
    from fwgym.baselines import make_policy
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.forecasters import known_models
    from fwgym.rl.macro import MacroActionWrapper
    models = ("seasonal_empirical", "demo_weekly", "demo_callable")
    env = FWBenchEnv("cycle_hire", split="test", models=models)   # looks the entry points up (once)
    env.reset(options={"case_id": "%s"})
    out = {"known": list(known_models())}
    for call in ({"tool": "catalog"}, {"tool": "forecast", "args": {"model": "demo_weekly"}},
                 {"tool": "plan", "args": {"forecast_id": "f1"}}):
        obs, r, term, trunc, info = env.step(call)
        out[call["tool"]] = info["tool_result"]
    obs, r, term, trunc, info = env.step({"tool": "submit", "args": {"decisions": out["plan"]["result"]["plan"]["decisions"]}})
    out["submit"] = {"term": term, "valid": info["valid"], "credits": info["credits"], "S": info["S"]}
    out["fixed"] = run_episode(env, make_policy("demo_callable"), options={"case_id": "%s"}).record["credits"]
    m = MacroActionWrapper(FWBenchEnv("cycle_hire", split="test", models=models, text_observations=False))
    m.reset(options={"case_id": "%s"})
    names = [e.name for e in m.menu]
    _, _, term, _, info = m.step(names.index("buy_plan_submit:demo_weekly"))
    out["macro"] = {"names": names[12:], "valid": info["valid"], "credits": info["credits"]}
    print(json.dumps(out))
''' % (CASE, CASE, CASE))


def test_entry_point_plugin_of_an_installed_distribution(tmp_path):
    root = _install(tmp_path, "fwgym-demo-plugin", {"demo_weekly": "fwgym_demo_plugin:SPEC",
                                                    "demo_callable": "fwgym_demo_plugin:make_spec"})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", _SCRIPT, str(root)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["known"][-2:] == ["demo_callable", "demo_weekly"]  # loaded in entry-point name order
    models = {m["model"]: m for m in out["catalog"]["result"]["models"]}
    assert models["demo_weekly"]["credits_full_context_covering_horizon"] == 778 and models["demo_callable"]["min_context"] == 96
    assert out["forecast"]["ok"] and out["forecast"]["result"]["credits"] == 778
    assert out["submit"] == {**out["submit"], "term": True, "valid": True, "credits": 778}
    assert np.isfinite(out["submit"]["S"])
    assert out["fixed"] == 6
    assert out["macro"] == {"names": ["buy_plan_submit:demo_weekly", "buy_plan_submit:demo_callable"], "valid": True,
                            "credits": 778}


def test_entry_points_in_process_and_their_errors(tmp_path, monkeypatch, only_test_plugins):
    only_test_plugins(tmp_path / "good", tmp_path / "bad")
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(registry, "_ENTRY_POINT_ERROR", None)
    (tmp_path / "good").mkdir()
    good = _install(tmp_path / "good", "fwgym-demo-plugin", {"demo_weekly": "fwgym_demo_plugin:SPEC"})
    monkeypatch.syspath_prepend(str(good))
    try:
        assert load_entry_points(reload=True) == ["demo_weekly"]
        assert load_entry_points() == ["demo_weekly"]  # once: not loaded again
        # its module ran in a worker process only (issue 25): never imported here; its code and distribution pinned
        assert "fwgym_demo_plugin" not in sys.modules
        fp = get_forecaster("demo_weekly").fingerprint()
        assert fp["distribution"] == {"name": "fwgym-demo-plugin", "version": "0.1"}
        assert set(fp["code"]) == {"fwgym_demo_plugin", "fwgym.forecasters.base"}
        assert registry.plugin_spec("demo_weekly").source.startswith("entry point 'demo_weekly'")
        assert "fwgym-demo-plugin 0.1" in registry.plugin_spec("demo_weekly").source
        assert registry.model_origin("demo_weekly") == "entry point fwgym-demo-plugin:fwgym_demo_plugin:SPEC"
        assert price("demo_weekly", 200, 194)["credits"] == 781
        # a broken plug-in next to it: named clearly, raised every time, the built-in pool unaffected
        (tmp_path / "bad").mkdir()
        bad = _install(tmp_path / "bad", "fwgym-broken-plugin", {"broken": "fwgym_broken_plugin:SPEC"},
                       module="import a_module_that_does_not_exist\n")
        monkeypatch.syspath_prepend(str(bad))
        for _ in range(2):
            with pytest.raises(PluginError, match=r"entry point 'broken' = 'fwgym_broken_plugin:SPEC' of distribution "
                                                  r"fwgym-broken-plugin 0.1.*ModuleNotFoundError"):
                load_entry_points(reload=_ == 0)
        with pytest.raises(PluginError):
            check_models(["broken"])
        assert FWBenchEnv("electricity", split="dev").models == PRICED_MODELS  # no lookup for the protocol's pool
        assert check_models(EXTENDED_MODELS) == EXTENDED_MODELS
    finally:
        if registry.plugin_spec("demo_weekly") is not None:
            unregister_forecaster("demo_weekly")


def test_a_plugin_installed_beside_fwgym_changes_nothing_these_tests_count(tmp_path, monkeypatch, only_test_plugins):
    """Issue 26 item 6: a plug-in distribution on sys.path (installed as the README says) is not seen by the
    isolated lookups, in process or in the subprocess of the installed-distribution test."""
    (tmp_path / "installed").mkdir()
    (tmp_path / "ours").mkdir()
    installed = _install(tmp_path / "installed", "fwgym-someone-elses-plugin", {"zz_model": "fwgym_someone_elses_plugin:SPEC"},
                         module=_PLUGIN_MODULE.replace('"demo_weekly"', '"zz_model"'))
    monkeypatch.syspath_prepend(str(installed))
    assert "zz_model" in {ep.name for ep in importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP)}
    ours = _install(tmp_path / "ours", "fwgym-demo-plugin", {"demo_weekly": "fwgym_demo_plugin:SPEC"})
    monkeypatch.syspath_prepend(str(ours))
    only_test_plugins(ours)
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    try:
        assert load_entry_points(reload=True) == ["demo_weekly"]
    finally:
        unregister_forecaster("demo_weekly")


def test_entry_point_spec_must_name_its_model(tmp_path, monkeypatch, only_test_plugins):
    only_test_plugins(tmp_path)
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(registry, "_ENTRY_POINT_ERROR", None)
    root = _install(tmp_path, "fwgym-demo-plugin", {"other_name": "fwgym_demo_plugin:SPEC",
                                                    "not_a_spec": "fwgym_demo_plugin:DemoWeekly"})
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(PluginError, match="not_a_spec.*expected fwgym.forecasters.ForecasterSpec"):
        load_entry_points(reload=True)
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    (root / "fwgym_demo_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[fwgym.forecasters]\nother_name = fwgym_demo_plugin:SPEC\n")
    with pytest.raises(PluginError, match="names the model 'demo_weekly'"):
        load_entry_points(reload=True)
    assert registry.plugin_spec("other_name") is None and registry.plugin_spec("demo_weekly") is None


def test_spec_is_a_public_dataclass():
    spec = ForecasterSpec("n", WeeklyRepeatQuantiles, ROWS)
    assert spec.min_context is None and spec.availability is None and spec.source == "register_forecaster"


def test_model_origin_names_where_a_model_comes_from(plugin):
    assert registry.model_origin(plugin.name) == "registered in-process"
    assert registry.model_origin("ets") == registry.model_origin("chronos2") == "fwgym (built-in)"
    with pytest.raises(ValueError, match="unknown models"):
        registry.model_origin("not_a_model")


def test_describe_pool_writes_out_the_prices_of_registered_models(plugin):
    """A registered model's rows and min_context are part of the pool's description (pinned tariffs are not
    repeated): the same name at another price, or with another min_context, is another description."""
    d = describe_pool(PRICED_MODELS + ("weekly_toy",))
    assert d["tariff"]["weekly_toy"] == "registered" and d["plugins"] == {"weekly_toy": "register_forecaster"}
    assert d["registered_prices"] == {"weekly_toy": {"tariff": {"96": ROWS[96], "336": ROWS[336]}, "min_context": 180}}
    assert "registered_prices" not in describe_pool(PRICED_MODELS) and "registered_prices" not in describe_pool(
        EXTENDED_MODELS)
    register_forecaster("weekly_toy", WeeklyRepeatQuantiles, {336: [90000] * 6}, replace=True)  # min_context: 170
    assert registry.registered_prices(["seasonal_empirical", "weekly_toy"]) == {
        "weekly_toy": {"tariff": {"336": [90000] * 6}, "min_context": 170}}
    with pytest.raises(ValueError, match="unknown models"):
        registry.registered_prices(["nope"])
