"""A packaged file that fails its sha256 check is never an agent-visible result (fwgym.errors.DataIntegrityError):
the tools let it through, ``env.step`` / ``env.reset`` / the env constructor raise it, ``run_episode`` does not
score it as the agent's failure. Every packaged score file is checked: the extended tariff, sigma.json, the two
balancing-authority CSVs and the two Parquet files."""
import json

import numpy as np
import pytest

import fwgym.data as fdata
from fwgym.core import cases, series
from fwgym.domains import electricity
from fwgym.context import text as context
from fwgym.context import scenarios
from fwgym.core import tariff
from fwgym.agents import run_episode
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.errors import DataIntegrityError
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.registry import POOLS
from fwgym.tools import parse_action
from tests.tools.conftest import CASE_ID


def test_one_class_under_both_names():
    assert fdata.DataIntegrityError is DataIntegrityError and issubclass(DataIntegrityError, RuntimeError)




def _extended_env():
    env = FWBenchEnv("electricity", split="test", case_ids=[CASE_ID], models=list(POOLS["extended"]))
    env.reset(options={"case_id": CASE_ID})
    return env


@pytest.mark.parametrize("tool, args", [
    ("catalog", {}),
    ("quote", {"model": "ets"}),
    ("forecast", {"model": "ets"}),
    ("replay", {"model": "ets", "origin": "2024-07-10T00:00:00Z"}),
])
def test_an_edited_extended_tariff_raises_out_of_step(edited_tariff, tool, args):
    env = _extended_env()
    with pytest.raises(DataIntegrityError, match="tariff_extended.json failed its sha256 check"):
        env.step(json.dumps({"tool": tool, "args": args}))
    assert env.unwrapped.episode.spent == 0  # nothing charged
    with pytest.raises(RuntimeError, match="interrupted"):  # the episode cannot be continued (or scored)
        env.step({"tool": "submit", "args": {"levels": [1.0] * 8}})


def test_protocol_models_do_not_need_the_extended_file(edited_tariff):
    env = FWBenchEnv("electricity", split="test", case_ids=[CASE_ID])  # the protocol pool
    env.reset(options={"case_id": CASE_ID})
    obs, _, _, _, info = env.step({"tool": "quote", "args": {"model": "seasonal_empirical"}})
    assert info["tool_result"]["ok"] and info["tool_result"]["result"]["credits"] == 1027


class _QuoteThenSubmit:
    """An agent whose failures would be scored (``agent_errors="score"``): quote ets, then submit."""

    def __init__(self, raise_itself=False):
        self.raise_itself, self.n = raise_itself, 0

    def act(self, obs):
        self.n += 1
        if self.raise_itself:
            tariff.price("ets", 336, 50)  # the agent's own fwgym code reads the corrupted file
        if self.n == 1:
            return {"tool": "quote", "args": {"model": "ets"}}
        return {"tool": "submit", "args": {"levels": [1.0] * 8}}


@pytest.mark.parametrize("raise_itself", [False, True])
def test_run_episode_never_scores_a_corrupted_install(edited_tariff, raise_itself):
    env = FWBenchEnv("electricity", split="test", case_ids=[CASE_ID], models=list(POOLS["extended"]))
    with pytest.raises(DataIntegrityError, match="tariff_extended.json"):
        run_episode(env, _QuoteThenSubmit(raise_itself), options={"case_id": CASE_ID}, agent_errors="score")


class _CorruptedForecaster(QuantileForecaster):
    """A forecaster whose inference reads a packaged file that fails its check."""

    name = "chronos_bolt_tiny"
    bounded = True

    def _predict(self, context, horizon):
        raise DataIntegrityError("data file x.json failed its sha256 check")


@pytest.mark.parametrize("tool, args", [("forecast", {"model": "chronos_bolt_tiny"}),
                                        ("replay", {"model": "chronos_bolt_tiny", "origin": "2024-07-10T00:00:00Z"})])
def test_inference_that_reads_a_corrupted_file_is_not_a_backend_error(make_episode, tool, args):
    ep = make_episode(forecasters={"chronos_bolt_tiny": _CorruptedForecaster()})
    with pytest.raises(DataIntegrityError, match="x.json failed its sha256 check"):
        ep.apply(parse_action({"tool": tool, "args": args}))
    assert ep.calls == 0  # never counted as the agent's call


def test_other_failures_of_a_handler_are_still_results(make_episode):
    """Only DataIntegrityError escapes: another exception of a handler stays an internal_error result."""
    from fwgym.tools.actions import Tool

    def broken(ep, args):
        raise RuntimeError("boom")

    ep = make_episode(tools={"catalog": Tool("catalog", "", {"type": "object"}, broken)})
    out = ep.apply(parse_action({"tool": "catalog", "args": {}}))
    assert out.result["error"]["code"] == "internal_error" and "boom" in out.result["error"]["message"]
    assert ep.calls == 1


# -- the packaged score files (fwgym/data/sha256.json) -------------------------------------------------


@pytest.fixture
def fresh_caches(monkeypatch):
    """Nothing read from the packaged files is cached (series, cases, zones, context), so they are read again."""
    monkeypatch.setattr(fdata, "_CACHE", {})
    monkeypatch.setattr(series, "_CACHE", {})
    cached = [getattr(m, n) for m in (cases, scenarios, context, electricity) for n, f in vars(m).items()
              if hasattr(f, "cache_clear")]
    for f in cached:
        f.cache_clear()
    yield
    for f in cached:  # rebuilt from the (restored) series cache by the next user
        f.cache_clear()


def _edit_manifest(monkeypatch, tmp_path, relpath):
    """The manifest's digest of ``relpath`` no longer matches the file: what an edited file looks like."""
    doc = json.loads(fdata.MANIFEST_PATH.read_text())
    assert relpath in doc["files"]
    doc["files"][relpath] = "0" * 64
    (tmp_path / "sha256.json").write_text(json.dumps(doc))
    monkeypatch.setattr(fdata, "MANIFEST_PATH", tmp_path / "sha256.json")


@pytest.mark.parametrize("relpath, env_kwargs", [
    ("config/sigma.json", {"domain": "electricity"}),
    ("data/balancing_authorities.csv", {"domain": "electricity"}),
    ("data/balancing_authority_zones.csv", {"domain": "electricity", "scenarios": True}),
    ("data/eia930_demand.parquet", {"domain": "electricity"}),
    ("data/tfl_cycle_hire.parquet", {"domain": "cycle_hire"}),
])
def test_every_packaged_score_file_raises_out_of_the_env(fresh_caches, monkeypatch, tmp_path, relpath, env_kwargs):
    _edit_manifest(monkeypatch, tmp_path, relpath)
    with pytest.raises(DataIntegrityError, match=f"{relpath.split('/')[-1]} failed its sha256 check"):
        env = FWBenchEnv(split="test", **env_kwargs)
        env.reset(seed=0)
        for _ in range(3):  # the first calls of an agent: nothing reaches it as a result
            _, _, terminated, _, info = env.step({"tool": "catalog", "args": {}})
            assert info["tool_result"]["ok"], info["tool_result"]


def test_the_unedited_files_pass(fresh_caches):
    env = FWBenchEnv("electricity", split="test", scenarios=True)
    obs, _ = env.reset(seed=0)
    assert np.isfinite(env.unwrapped.episode.case.scale)
