"""``fwgym list``: env ids (tool-call and RL), suites, policies, forecast models with their availability,
pools and agent kinds, as tables and as JSON; and the missing-weights hint (``hf download``)."""
import json

import gymnasium as gym
import pytest

from fwgym.baselines.registry import policy_names, suite_policies
from fwgym.cli import main
from fwgym.cli.agent_kinds import agent_kinds
from fwgym.envs import ENV_IDS, RL_ENV_IDS
from fwgym.evaluation import SUITES
from fwgym.forecasters.registry import EXTENDED_MODELS, POOLS, known_models
from fwgym.forecasters.tsfm import Chronos2


def _json(capsys, *sections):
    capsys.readouterr()
    assert main(["list", *sections, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_lists_everything(capsys):
    doc = _json(capsys)
    assert list(doc) == ["envs", "suites", "policies", "models", "pools", "agents"]
    ids = [e["id"] for e in doc["envs"]]
    assert ids == list(ENV_IDS) + list(RL_ENV_IDS) and all(i in gym.registry for i in ids)
    assert {e["kind"] for e in doc["envs"] if e["id"].startswith("FWBench-RL-")} == {"rl"}
    assert [s["suite"] for s in doc["suites"]] == list(SUITES)
    forecast = next(s for s in doc["suites"] if s["suite"] == "forecast")
    assert forecast["formula"] == "S = R + 0·c/B, R = min(RCRPS, 5)" and forecast["env_kwargs"] == SUITES["forecast"]
    decision = next(s for s in doc["suites"] if s["suite"] == "decision")
    assert decision["default_policies"]["extended"] == suite_policies("decision", False, "extended")[0]
    assert [p["policy"] for p in doc["policies"]] == policy_names()
    ets = next(p for p in doc["policies"] if p["policy"] == "ets")
    assert ets["models"] == ["ets"] and ets["default_in"] == ["decision/extended", "context/extended"]
    ox = next(p for p in doc["policies"] if p["policy"] == "catalog_oracle_extended")
    assert ox["kind"] == "hindsight oracle" and ox["models"] == list(EXTENDED_MODELS)
    assert next(p for p in doc["policies"] if p["policy"] == "chronos2")["needs_weights"] is True
    assert [m["model"] for m in doc["models"]] == list(known_models())
    by = {m["model"]: m for m in doc["models"]}
    assert by["seasonal_empirical"]["available"] is True and by["ets"]["pools"] == ["extended"]
    assert by["chronos2"]["model_id"] == "amazon/chronos-2" and isinstance(by["chronos2"]["available"], bool)
    for m in doc["models"]:
        assert m["available"] or m["reason"]  # an unavailable model says why
    assert doc["pools"] == [{"pool": k, "models": list(v), "default": k == "protocol"} for k, v in POOLS.items()]
    assert [a["kind"] for a in doc["agents"]] == sorted(agent_kinds())


def test_sections_tables_and_no_check(capsys):
    doc = _json(capsys, "pools", "envs")
    assert list(doc) == ["envs", "pools"]
    assert main(["list", "models", "--no-check", "--json"]) == 0
    assert {m["available"] for m in json.loads(capsys.readouterr().out)["models"]} == {None}
    assert main(["list", "envs", "policies", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("env ids (gymnasium.make):\nid ") and "FWBench-RL-Sequential-v0" in out
    assert "policies (fwgym evaluate --policies):" in out and "|" not in out
    with pytest.raises(SystemExit) as exc:
        main(["list", "nothing"])
    assert exc.value.code == 2 and "invalid section 'nothing'" in capsys.readouterr().err
    assert main(["list", "pools"]) == 0  # not a terminal: Markdown
    assert "| protocol (default) | seasonal_empirical, chronos_bolt_tiny, chronos2, timesfm25 |" in capsys.readouterr().out


def test_missing_weights_hint_names_hf_download(tmp_path, capsys):
    reason = Chronos2(local_dir=tmp_path).availability().reason  # a directory without config.json
    assert "hf download amazon/chronos-2" in reason and "huggingface-cli download" not in reason
    doc = _json(capsys, "models")
    for m in doc["models"]:
        assert "huggingface-cli download" not in m["reason"]


def test_models_say_where_they_come_from(capsys):
    """A plug-in's row names its origin (an entry point's distribution and object, or an in-process
    registration) instead of passing for a built-in model; the entry-point case is
    tests/cli/test_evaluate_pool.py::test_an_entry_point_plugin_is_listed_with_its_origin_and_evaluated."""
    from fwgym.forecasters.registry import register_forecaster, unregister_forecaster
    from fwgym.forecasters.seasonal import SeasonalEmpirical

    register_forecaster("toy_listed", SeasonalEmpirical, {336: [1, 2, 3, 4, 5, 6]})
    try:
        by = {m["model"]: m for m in _json(capsys, "models")["models"]}
        assert by["toy_listed"]["origin"] == "registered in-process"
        assert {by[m]["origin"] for m in EXTENDED_MODELS} == {"fwgym (built-in)"}
        assert main(["list", "models", "--format", "markdown"]) == 0
        out = capsys.readouterr().out
        assert "| model | from | pools | tariff | weights | available |" in out
        assert "| toy_listed | registered in-process | - | registered | - | yes |" in out
        assert "| seasonal_empirical | fwgym (built-in) | protocol, extended, no_tsfm | protocol | - | yes |" in out
        assert "| ets | fwgym (built-in) | extended | extended | - | yes (statsmodels) |" in out
    finally:
        unregister_forecaster("toy_listed")


def test_fwgym_list_labels_every_oracle_as_a_hindsight_oracle():
    from fwgym.baselines.registry import HINDSIGHT_POLICIES
    from fwgym.cli.listing import policies

    kinds = {r["policy"]: r["kind"] for r in policies()}
    assert {n for n, k in kinds.items() if k == "hindsight oracle"} == set(HINDSIGHT_POLICIES)
    assert kinds["catalog_oracle_no_tsfm"] == "hindsight oracle"
