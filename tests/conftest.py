import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the RL envs read the default outcome tables (fwgym.rl.outcomes) when present; tests play the env itself unless a
# test builds a table and passes it (a developer's ~/.cache must not change what a test runs)
os.environ["FWGYM_OUTCOME_TABLES"] = "off"

import pytest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (or set FWGYM_RUN_SLOW=1)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long test (real model weights); skipped unless --runslow or FWGYM_RUN_SLOW=1")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("FWGYM_RUN_SLOW", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="slow test: use --runslow or FWGYM_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# -- fixtures shared by the chat-wrapper and LLM-agent tests (modules may override them) -----------


@pytest.fixture(scope="module")
def env():
    """A dev-split electricity decision env."""
    from fwgym.envs.fwbench import FWBenchEnv

    return FWBenchEnv("electricity", split="dev")


@pytest.fixture(scope="module")
def case_id(env):
    return env.cases[0].case_id


@pytest.fixture(scope="module")
def plan_and_score(env, case_id):
    """The hour-of-day plan of the case and the S of submitting it directly to the env."""
    import json

    env.reset(options={"case_id": case_id})
    obs, *_ = env.step({"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}})
    decisions = json.loads(obs["last_result"])["result"]["plan"]["decisions"]
    env.reset(options={"case_id": case_id})
    _, _, term, _, info = env.step({"tool": "submit", "args": {"decisions": decisions}})
    assert term and info["valid"]
    return decisions, info["S"]


# -- a tampered extended tariff (tests/tools/test_data_integrity.py, tests/cli/test_evaluate_integrity.py) --

@pytest.fixture
def edited_tariff(monkeypatch):
    """The tariff module as at import (extended file not read yet), its pinned digest no longer the file's:
    what an edited ``tariff_extended.json`` looks like to fwgym."""
    from fwgym.core import tariff

    monkeypatch.setattr(tariff, "_EXTENDED", None)
    monkeypatch.setattr(tariff, "_ROWS", dict(tariff.TARIFF))
    monkeypatch.setattr(tariff, "_SOURCES", {m: "protocol" for m in tariff.TARIFF})
    monkeypatch.setattr(tariff, "EXTENDED_TARIFF_SHA256", "0" * 64)
    tariff._price.cache_clear()
    yield
    tariff._price.cache_clear()
