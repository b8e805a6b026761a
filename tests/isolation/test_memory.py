"""``memory="none"`` (``--agent-memory none``, the default on the sealed split): a fresh worker process for
every episode, so an agent keeps nothing from one case to the next, neither in its interpreter nor (in the
sandbox) in a file; ``memory="worker"`` keeps the worker (and its module state) from episode to episode."""
import json
import os
from argparse import Namespace
from pathlib import Path

import pytest

from fwgym.agents import run_episode
from fwgym.agents.isolation import IsolatedAgent, IsolatedAgentFactory
from fwgym.cli.agent_kinds.isolation import agent_memory
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.isolation import sandbox

AGENTS = Path(__file__).with_name("attack_agents.py")
CASES = ("cycle-101-2015-10-05-day_ahead", "cycle-193-2015-10-09-day_ahead", "cycle-307-2015-10-13-week_ahead")
SANDBOXED = sandbox.status()["isolation"] == "sandbox"


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv("cycle_hire", split="test")


def _play(env, agent) -> list[dict]:
    seen = []
    for cid in CASES:
        rec = run_episode(env, agent, options={"case_id": cid}).record
        assert rec["valid"], rec
        seen.append(agent._remote.call("remembered"))
    return seen


def test_memory_none_gives_every_episode_a_fresh_process(env):
    agent = IsolatedAgent(f"{AGENTS}:Remembers", memory="none")
    seen = _play(env, agent)
    assert len({s["pid"] for s in seen}) == 3  # three processes
    assert [s["in_process"] for s in seen] == [1, 1, 1]
    if SANDBOXED:  # and no file survives: its TMPDIR goes with its worker, it may write nowhere else
        assert [s["in_file"] for s in seen] == [1, 1, 1]
    agent.close()


def test_memory_worker_keeps_the_worker_between_episodes(env):
    agent = IsolatedAgent(f"{AGENTS}:Remembers", memory="worker")
    seen = _play(env, agent)
    assert len({s["pid"] for s in seen}) == 1 and [s["in_process"] for s in seen] == [1, 2, 3]
    agent.terminate()


def test_a_used_worker_without_memory_never_goes_back_to_the_pool(env):
    factory = IsolatedAgentFactory(f"{AGENTS}:Remembers", memory="none")
    a = factory()
    run_episode(env, a, options={"case_id": CASES[0]})
    pid = a.pid
    a.close()  # back to the pool? Not after an episode: it is killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    b = factory()
    assert b.pid != pid
    b.close()


def test_the_description_says_memory_and_isolation_and_the_sealed_split_defaults_to_none():
    d = IsolatedAgentFactory(f"{AGENTS}:Remembers", memory="none")
    assert json.loads(json.dumps(d))["memory"] == "none"
    assert d["isolation"] == ("sandbox" if SANDBOXED else "process")
    assert IsolatedAgentFactory(f"{AGENTS}:Remembers")["memory"] == "worker"
    off = IsolatedAgentFactory(f"{AGENTS}:Remembers", sandbox="off")
    assert off["isolation"] == "process" and off["sandbox"] == "off" and "turned off" in off["isolation_note"]
    assert agent_memory(Namespace(split="sealed", agent_memory=None)) == "none"
    assert agent_memory(Namespace(split="test", agent_memory=None)) == "worker"
    assert agent_memory(Namespace(split="sealed", agent_memory="worker")) == "worker"
    with pytest.raises(ValueError, match="memory must be one of"):
        IsolatedAgentFactory(f"{AGENTS}:Remembers", memory="some")
