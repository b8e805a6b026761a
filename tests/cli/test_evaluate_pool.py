"""``fwgym evaluate --pool protocol|extended``: the env's forecast pool, the default policies, the manifest,
and ``--resume`` refusing another pool."""
import json

import pytest

from fwgym.baselines import registry
from fwgym.cli import main
from fwgym.forecasters.registry import EXTENDED_MODELS, PRICED_MODELS


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def extended_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool") / "ext"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--pool", "extended", "--policies", "ets", "hour_of_day_empirical"]) == 0
    return out


def test_extended_pool_is_a_setting_of_the_run(extended_run):
    m = _manifest(extended_run)
    assert m["settings"]["env_kwargs"] == {"models": list(EXTENDED_MODELS)}
    assert m["settings"]["forecast_pool"] == list(EXTENDED_MODELS) and m["args"]["pool"] == "extended"
    recs = [json.loads(x) for x in (extended_run / "results.jsonl").read_text().splitlines()]
    ets = next(r for r in recs if r["policy"] == "ets")
    assert ets["valid"] and ets["credits"] > 0 and ets["tool_counts"].get("forecast") == 1  # it bought an ETS forecast


def test_protocol_pool_is_the_default_and_unchanged(tmp_path):
    out = tmp_path / "p"
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(out), "--policies", "hour_of_day_empirical"]) == 0
    m = _manifest(out)
    assert m["settings"]["env_kwargs"] == {} and m["settings"]["forecast_pool"] == list(PRICED_MODELS)
    assert m["args"]["pool"] == "protocol"


def test_extended_policies_need_the_extended_pool(tmp_path, capsys):
    for policy in ("ets", "catalog_oracle_extended"):
        assert main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--out", str(tmp_path / policy),
                     "--policies", policy]) == 2
        assert f"policies ['{policy}'] buy models of the extended forecast pool; run them with --pool extended" in \
            capsys.readouterr().err


def test_resume_refuses_another_pool(extended_run, capsys):
    assert main(["evaluate", "--resume", str(extended_run), "--pool", "protocol", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--pool: the run has \"extended\", this command gives \"protocol\"" in err
    assert main(["evaluate", "--resume", str(extended_run), "--no-progress"]) == 0  # complete: nothing to play


@pytest.mark.parametrize("pool", ["protocol", "extended"])
def test_default_policies_follow_the_pool(monkeypatch, tmp_path, pool):
    seen = {}

    def fake(suite, include_tsfm=True, pool="protocol"):
        seen.update(suite=suite, pool=pool)
        return ["hour_of_day_empirical"], {}

    monkeypatch.setattr(registry, "suite_policies", fake)
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--out",
                 str(tmp_path / pool), "--pool", pool, "--suite", "context", "--no-tsfm"]) == 0
    assert seen == {"suite": "context", "pool": pool}


# --- --models: plug-in (and built-in) models added to the run's pool ---------------------------------------------

import importlib  # noqa: E402

from fwgym.forecasters import registry as forecasters  # noqa: E402
from fwgym.forecasters.seasonal import SeasonalEmpirical  # noqa: E402

#: the plug-in's tariff: the day-ahead cases' horizon (50 h) is priced in bucket 64, the week-ahead ones' (194 h) in 240
TOY_ROWS = {96: [500, 510, 520, 530, 540, 550], 336: [600, 611, 622, 633, 644, 655]}
TOY_CREDITS = {"day_ahead": 611, "week_ahead": 644}
CYCLE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress"]


@pytest.fixture
def toy():
    """A plug-in registered in this process: the seasonal-empirical forecaster under its own name and tariff
    (so its plans are seasonal_empirical's, and only its credits differ)."""
    forecasters.register_forecaster("toy_seasonal", SeasonalEmpirical, TOY_ROWS, description="test plug-in")
    yield "toy_seasonal"
    forecasters.unregister_forecaster("toy_seasonal")


def _records(out):
    return {(r["policy"], r["case_id"]): r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def _error_line(err):
    """The one ``fwgym: error:`` line of a user error (stderr may hold notes before it)."""
    lines = [x for x in err.splitlines() if x.startswith("fwgym: error:")]
    assert len(lines) == 1 and err.endswith(lines[0] + "\n"), err
    return lines[0]


@pytest.fixture
def toy_run(toy, tmp_path):
    out = tmp_path / "toy"
    assert main(CYCLE + ["--out", str(out), "--models", toy, "--policies", toy, "seasonal_empirical",
                         "catalog_oracle"]) == 0
    return out


def test_models_adds_a_plugin_to_the_pool_and_the_manifest(toy_run, toy):
    m = _manifest(toy_run)
    pool = list(PRICED_MODELS) + [toy]
    assert m["args"]["models"] == [toy] and m["args"]["pool"] == "protocol"
    assert m["settings"]["env_kwargs"] == {"models": pool} and m["settings"]["forecast_pool"] == pool
    assert m["forecast_pool"]["pool"] == "custom" and m["forecast_pool"]["models"] == pool
    assert m["forecast_pool"]["plugins"] == {toy: "register_forecaster"}
    assert m["forecast_pool"]["tariff"][toy] == "registered"
    assert m["models"][toy]["class"] == "fwgym.forecasters.seasonal.SeasonalEmpirical"
    recs = _records(toy_run)
    (case,) = {c for _, c in recs}
    mine, seasonal, oracle = recs[toy, case], recs["seasonal_empirical", case], recs["catalog_oracle", case]
    assert mine["valid"] and mine["tool_counts"].get("forecast") == 1
    assert mine["credits"] == TOY_CREDITS[mine["lead"]]  # the plug-in's tariff, not seasonal_empirical's
    assert mine["loss"] == seasonal["loss"] and mine["levels"] == seasonal["levels"]  # the same forecaster's plan
    assert seasonal["credits"] != mine["credits"]
    assert oracle["valid"] and oracle["S"] <= min(mine["S"], seasonal["S"])  # the catalog oracle runs beside it


def test_a_plugin_policy_without_models_says_which_option_adds_it(toy, tmp_path, capsys):
    assert main(CYCLE + ["--out", str(tmp_path / "a"), "--policies", toy]) == 2
    assert _error_line(capsys.readouterr().err) == (
        f"fwgym: error: policies ['{toy}'] buy models outside the run's forecast pool (seasonal_empirical, "
        f"chronos_bolt_tiny, chronos2, timesfm25): {toy}; add them with --models {toy}")
    assert main(CYCLE + ["--out", str(tmp_path / "b"), "--pool", "extended", "--policies", toy]) == 2
    assert f"add them with --models {toy}" in _error_line(capsys.readouterr().err)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_models_are_validated_against_the_registry(toy, tmp_path, capsys):
    assert main(CYCLE + ["--out", str(tmp_path / "a"), "--models", "nope", toy]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("fwgym: error: --models: unknown model 'nope'; known models: seasonal_empirical, "
                           "chronos_bolt_tiny, chronos2, timesfm25, ets, theta, sarima, mstl_ets")
    assert f", {toy} (plug-ins join through the 'fwgym.forecasters' entry-point group" in line
    for models, pool in ((["chronos2"], "protocol"), ([toy, toy], "protocol"), (["ets"], "extended")):
        assert main(CYCLE + ["--out", str(tmp_path / "b"), "--pool", pool, "--models", *models]) == 2
        assert f"--models: {models[0]} is given twice or already in the {pool} pool" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_builtin_model_joins_the_protocol_pool(tmp_path):
    out = tmp_path / "ets"
    assert main(CYCLE + ["--out", str(out), "--models", "ets", "--policies", "ets"]) == 0
    assert _manifest(out)["settings"]["forecast_pool"] == list(PRICED_MODELS) + ["ets"]
    assert _manifest(out)["forecast_pool"]["pool"] == "custom"
    (rec,) = _records(out).values()
    assert rec["valid"] and rec["credits"] > 0


def test_plugin_with_the_extended_pool_and_its_catalog_oracle(toy, tmp_path):
    out = tmp_path / "ext"
    assert main(CYCLE + ["--out", str(out), "--pool", "extended", "--models", toy, "--policies", toy,
                         "catalog_oracle_extended"]) == 0
    m = _manifest(out)
    assert m["settings"]["forecast_pool"] == list(EXTENDED_MODELS) + [toy] and m["args"]["pool"] == "extended"
    recs = _records(out)
    assert all(r["valid"] for r in recs.values())
    (mine,) = [r for (p, _), r in recs.items() if p == toy]
    assert mine["credits"] == TOY_CREDITS[mine["lead"]]


def test_default_policies_gain_the_added_models_fixed_policies(monkeypatch, toy, tmp_path):
    monkeypatch.setattr(registry, "suite_policies",
                        lambda suite, include_tsfm=True, pool="protocol": (["hour_of_day_empirical", "catalog_oracle"],
                                                                           {}))
    out = tmp_path / "d"
    assert main(CYCLE + ["--out", str(out), "--models", toy]) == 0
    assert _manifest(out)["settings"]["policies"] == ["hour_of_day_empirical", toy, "catalog_oracle"]
    out = tmp_path / "f"  # the forecast suite's defaults submit forecasts: a fixed decision policy does not join
    monkeypatch.setattr(registry, "suite_policies", lambda suite, include_tsfm=True, pool="protocol":
                        (["hour_of_day_empirical_samples"], {}))
    assert main(CYCLE + ["--out", str(out), "--suite", "forecast", "--models", toy]) == 0
    assert _manifest(out)["settings"]["policies"] == ["hour_of_day_empirical_samples"]


def test_resume_keeps_the_models_and_refuses_others(toy_run, capsys):
    assert main(["evaluate", "--resume", str(toy_run), "--models", "ets", "--no-progress"]) == 2
    assert ('--models: the run has ["toy_seasonal"], this command gives ["ets"]'
            in capsys.readouterr().err)
    assert main(["evaluate", "--resume", str(toy_run), "--no-progress"]) == 0  # complete: nothing to play


def test_runs_of_other_pools_do_not_share_a_leaderboard(toy_run, tmp_path, capsys):
    plain = tmp_path / "plain"
    assert main(CYCLE + ["--out", str(plain), "--policies", "hour_of_day_empirical"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", str(plain), str(toy_run)]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(f"fwgym: error: runs differ in forecast_pool: {plain} has {list(PRICED_MODELS)!r}, "
                           f"{toy_run} has {list(PRICED_MODELS) + ['toy_seasonal']!r}")
    other = tmp_path / "other"
    assert main(CYCLE + ["--out", str(other), "--policies", "weekday_empirical"]) == 0
    assert main(["leaderboard", str(plain), str(other)]) == 0  # the same pool: one leaderboard


# the plug-in package of the entry-point test: a distribution installed under tmp_path (dist-info + module)
_PLUGIN = '''
from fwgym.forecasters import ForecasterSpec
from fwgym.forecasters.seasonal import SeasonalEmpirical

SPEC = ForecasterSpec("ep_seasonal", SeasonalEmpirical, {336: [700, 711, 722, 733, 744, 755]})
'''


def test_an_entry_point_plugin_is_listed_with_its_origin_and_evaluated(tmp_path, monkeypatch, capsys):
    root = tmp_path / "site"
    info = root / "fwgym_cli_test_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (root / "fwgym_cli_test_plugin.py").write_text(_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fwgym-cli-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fwgym.forecasters]\nep_seasonal = fwgym_cli_test_plugin:SPEC\n")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    monkeypatch.setattr(forecasters, "_ENTRY_POINTS_LOADED", False)  # looked up again, with the new distribution
    monkeypatch.setattr(forecasters, "_ENTRY_POINT_ERROR", None)
    try:
        assert main(["list", "models", "--json"]) == 0
        row = {r["model"]: r for r in json.loads(capsys.readouterr().out)["models"]}["ep_seasonal"]
        assert row["origin"] == "entry point fwgym-cli-test-plugin:fwgym_cli_test_plugin:SPEC"
        assert row["available"] is True and row["pools"] == [] and row["tariff"] == "registered"
        out = tmp_path / "run"
        assert main(CYCLE + ["--out", str(out), "--models", "ep_seasonal", "--policies", "ep_seasonal"]) == 0
        (rec,) = _records(out).values()
        assert rec["valid"] and rec["credits"] == {"day_ahead": 711, "week_ahead": 744}[rec["lead"]]
        assert _manifest(out)["forecast_pool"]["plugins"]["ep_seasonal"].startswith(
            "entry point 'ep_seasonal' = 'fwgym_cli_test_plugin:SPEC' of distribution fwgym-cli-test-plugin 0.1")
    finally:
        if forecasters.plugin_spec("ep_seasonal") is not None:
            forecasters.unregister_forecaster("ep_seasonal")


# --- a plug-in's prices are a setting of the run: one name at two prices is two runs -----------------------------

def _priced_run(out, credits, name="priced_toy", policy="priced_toy"):
    """A run of the seasonal-empirical forecaster registered in-process as ``name`` at ``credits`` for every
    horizon bucket of the 336-step context (the price in force is the one registered when the run starts)."""
    forecasters.register_forecaster(name, SeasonalEmpirical, {336: [credits] * 6}, replace=True)
    assert main(CYCLE + ["--out", str(out), "--models", name, "--policies", policy]) == 0
    return out


def test_plugin_prices_are_recorded_and_runs_at_other_prices_do_not_share_a_leaderboard(tmp_path, capsys):
    try:
        cheap, dear = _priced_run(tmp_path / "cheap", 1000), _priced_run(tmp_path / "dear", 90000)
        rows = {"priced_toy": {"min_context": 168, "tariff": {"336": [1000] * 6}}}  # the instance's: one week
        for m, credits in ((_manifest(cheap), 1000), (_manifest(dear), 90000)):
            want = {"priced_toy": {**rows["priced_toy"], "tariff": {"336": [credits] * 6}}}
            assert m["forecast_pool"]["registered_prices"] == want and m["settings"]["registered_prices"] == want
            (rec,) = _records(cheap if credits == 1000 else dear).values()
            assert rec["credits"] == credits  # the price the run charged is the one it records
        capsys.readouterr()
        assert main(["leaderboard", str(cheap), str(dear)]) == 2
        line = _error_line(capsys.readouterr().err)
        assert line.startswith(f"fwgym: error: runs differ in registered_prices: {cheap} has "
                               f"{rows!r}, {dear} has ")
        again = _priced_run(tmp_path / "again", 90000, policy="catalog_oracle")  # the same price: one leaderboard
        assert main(["leaderboard", str(dear), str(again)]) == 0
    finally:
        forecasters.unregister_forecaster("priced_toy")


def test_resume_refuses_a_plugin_at_another_price(tmp_path, capsys):
    try:
        out = _priced_run(tmp_path / "run", 1000)
        forecasters.register_forecaster("priced_toy", SeasonalEmpirical, {336: [90000] * 6}, replace=True)
        capsys.readouterr()
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
        line = _error_line(capsys.readouterr().err)
        assert "the run's settings differ from what this fwgym would run now" in line
        assert ('registered_prices: {"priced_toy":{"min_context":168,"tariff":{"336":[1000,1000,1000,1000,1000,1000]'
                '}}} -> {"priced_toy":{"min_context":168,"tariff":{"336":[90000,') in line
        forecasters.register_forecaster("priced_toy", SeasonalEmpirical, {336: [1000] * 6}, replace=True)
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0  # its own price: accepted
    finally:
        forecasters.unregister_forecaster("priced_toy")
