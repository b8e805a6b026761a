"""Isolated agents (fwgym.agents.isolation, the worker fwgym.isolation.worker, ``--agent module:factory``):
they run in another process that sees only observations, the reset info and records; a hostile agent that
walks the stack, the garbage collector and fwgym's modules finds neither hindsight nor the target; agents that
raise, hang, exit or reply junk fail as agents; the records equal the in-process agent's."""
import functools
import json
import os
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from fwgym.isolation import protocol
from fwgym.isolation import worker
from fwgym.agents.base import HindsightGrant, _takes_argument, reset_agent, run_episode
from fwgym.agents.isolation import (AgentFailure, IsolatedAgent, IsolatedAgentFactory, RemoteObject, plain_data,
                                    worker_argv)
from fwgym.baselines import FixedMethodAgent
from fwgym.cli import main
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import evaluate
from fwgym.evaluation.records import EVALUATION_FIELDS, stable_record  # noqa: E402

AGENTS = Path(__file__).with_name("isolation_agents.py")
CASES = ("elec-PJM-2024-08-11-week_ahead", "elec-AECI-2024-08-03-day_ahead")


def target(name: str) -> str:
    return f"{AGENTS}:{name}"


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv("electricity", split="test")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def _core(record: dict) -> dict:
    """A record without fields that belong to the run rather than to the episode."""
    # not the measured times and memory, nor what the evaluation adds (exposed: fwgym.evaluation.evaluate's, not the env's)
    return {k: v for k, v in stable_record(record).items() if k not in ("episode_id", *EVALUATION_FIELDS)}


# -- the protocol: plain data both ways ---------------------------------------------------------------


def test_replies_are_json_and_junk_is_refused():
    assert protocol.decode_reply(protocol.encode_reply({"tool": "submit", "x": np.arange(3), "y": np.float32(0.5)})) == \
        {"ok": {"tool": "submit", "x": [0, 1, 2], "y": 0.5}}
    err = protocol.decode_reply(protocol.encode_reply(object()))["error"]
    assert err["type"] == "builtins.TypeError" and "cannot be sent to the evaluator" in err["message"]
    for junk in (pickle.dumps({"ok": 1}), b"[1, 2]", b'{"ok": 1, "error": 2}', b'{"error": {"type": 1}}', b"\xff"):
        with pytest.raises(ValueError):
            protocol.decode_reply(junk)


def test_requests_carry_only_plain_data(env):
    obs, info = env.reset(options={"case_id": CASES[0]})
    assert plain_data(info) == info and plain_data(obs)["history"] is obs["history"]
    for bad in (env, env.unwrapped.hindsight, np.array([object()]), {"x": [lambda: 0]}):
        with pytest.raises(TypeError, match="not plain data"):
            plain_data(bad)


def test_the_worker_applies_the_reset_rule_of_run_episode():
    class Kw:
        def reset(self, info=None, *, strict=False): ...

    class Star:
        def reset(self, *args): ...

    class KwOnly:
        def reset(self, *, info=None): ...

    class Plain:
        def reset(self): ...

    for cls in (Kw, Star, KwOnly, Plain):
        assert worker._takes_argument(cls().reset) == _takes_argument(cls().reset)
    assert [worker._takes_argument(c().reset) for c in (Kw, Star, KwOnly, Plain)] == [True, True, False, False]
    seen = []
    for fn in (reset_agent, worker.call_reset):
        a = type("A", (), {"reset": lambda self, info: seen.append(info)})()
        fn(a, {"x": 1})
        fn(object(), {"x": 1})
    assert seen == [{"x": 1}, {"x": 1}]


def test_frames_of_wrong_size_are_refused(tmp_path):
    import io

    buf = io.BytesIO()
    protocol.write_frame(buf, b"x" * 100)
    buf.seek(0)
    with pytest.raises(protocol.FrameError, match="exceeds the limit"):
        protocol.read_frame(buf, max_bytes=99)
    buf.seek(0)
    assert protocol.read_frame(buf, max_bytes=100) == b"x" * 100 and protocol.read_frame(buf) is None
    with pytest.raises(protocol.FrameError, match="ended"):
        protocol.read_frame(io.BytesIO(protocol.HEADER.pack(10) + b"abc"))
    assert worker_argv() == [os.sys.executable, worker.__file__] and worker_argv("a 'b c'") == ["a", "b c"]
    with pytest.raises(ValueError, match="empty"):
        worker_argv("")


# -- the isolated agent is an agent like any other ------------------------------------------------------


def test_isolated_agent_records_equal_the_in_process_agent(env):
    agent = IsolatedAgent(target("PlanAgent"), {"method": "weekday_empirical"})
    assert agent.isolated and agent.name == "plan_agent" and agent.pid != os.getpid()
    from isolation_agents import PlainReset, PlanAgent  # the same classes, in this process

    local = PlanAgent("weekday_empirical")
    for cid in CASES:
        rec, ref = (run_episode(env, a, options={"case_id": cid}).record for a in (agent, local))
        assert stable_record(rec) == stable_record(ref) and rec["valid"]
    # reset(info), end_episode(record) and episode_stats() reached the hosted agent, in order
    assert agent.episode_stats() == {"model_turns": 2, "seen": list(CASES), "ended": list(CASES)}
    plain = IsolatedAgent(target("PlainReset"))
    for _ in range(2):
        assert stable_record(run_episode(env, plain, options={"case_id": CASES[0]}).record) == \
            stable_record(run_episode(env, PlainReset(), options={"case_id": CASES[0]}).record)
    assert plain.episode_stats()["seen"] == ["called", "called"]  # reset() without the info
    pid = agent.pid
    agent.close()  # back to the pool: the next agent of this spec gets the same worker and a fresh agent
    assert agent.pid is None
    with pytest.raises(AgentFailure, match="gone"):
        agent.act({})
    again = IsolatedAgent(target("PlanAgent"), {"method": "weekday_empirical"})
    assert again.pid == pid and again.episode_stats()["seen"] == []
    again.terminate()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_episode_stats_only_when_the_hosted_agent_has_it(tmp_path):
    (tmp_path / "bare.py").write_text("class Bare:\n    def act(self, obs):\n        return {'tool': 'catalog'}\n")
    bare = IsolatedAgent(f"{tmp_path / 'bare.py'}:Bare")
    assert bare.name == "Bare" and not hasattr(bare, "episode_stats") and not hasattr(bare, "set_hindsight")
    assert hasattr(IsolatedAgent(target("PlanAgent")), "episode_stats")


def test_refused_agents_and_targets(tmp_path):
    with pytest.raises(ValueError, match="requires_hindsight"):
        IsolatedAgent(target("Oracle"))
    with pytest.raises(ValueError, match="without an act"):
        IsolatedAgent(target("NoAct"))
    with pytest.raises(AgentFailure, match="this factory fails") as exc:
        IsolatedAgent(target("failing_factory"))
    assert exc.value.kind == "raised" and exc.value.remote_type == "builtins.ValueError"
    with pytest.raises(AgentFailure, match="ModuleNotFoundError.*no_such_module"):
        IsolatedAgent("no_such_module:make")
    with pytest.raises(AgentFailure, match="FileNotFoundError"):
        IsolatedAgent(f"{tmp_path / 'missing.py'}:make")
    with pytest.raises(AgentFailure, match="MODULE:FACTORY"):
        IsolatedAgent("no-colon")
    with pytest.raises(ValueError, match="> 0"):
        IsolatedAgent(target("PlanAgent"), call_timeout=0)
    with pytest.raises(TypeError, match="not plain data"):
        IsolatedAgent(target("PlanAgent"), {"method": object()})


def test_the_guard_hides_case_data_hindsight_and_scorer(env, tmp_path, monkeypatch):
    monkeypatch.setenv("FWGYM_TEST_API_KEY", "sk-secret")
    monkeypatch.setenv("FWGYM_TEST_HF_TOKEN", "hf-secret")
    monkeypatch.setenv("FWGYM_TEST_SETTING", "plain")
    report = tmp_path / "probe.json"
    probe = IsolatedAgent(target("ImportProbe"), {"report": str(report)}, write_paths=[tmp_path])
    assert run_episode(env, probe, options={"case_id": CASES[0]}).record["status"] == "abstained"
    found = json.loads(report.read_text())
    assert found["pid"] != os.getpid()
    from isolation_agents import PRIVATE_MODULES, PUBLIC_MODULES

    assert {m: found["imports"][m] for m in PRIVATE_MODULES} == dict.fromkeys(PRIVATE_MODULES, "ModuleNotFoundError")
    assert {m: found["imports"][m] for m in PUBLIC_MODULES} == dict.fromkeys(PUBLIC_MODULES, "imported")
    import fwgym

    assert found["fwgym_has_env"] is False and found["fwgym_version"] == fwgym.__version__
    guard = worker.ImportGuard()
    assert not [m for m in found["loaded"] if guard.refuses(m)], found["loaded"]
    assert found["stdin"] == ""  # the agent's stdin is /dev/null, not the protocol
    assert found["secrets"] == []  # a scrubbed environment (WORKER_ENV): keys, tokens, other settings stay here
    # without the guard (and the sandbox, which keeps fwgym/data unreadable) the same probe imports them: the
    # guard is what stops it
    open_probe = IsolatedAgent(target("ImportProbe"), {"report": str(report)}, guard=False, sandbox="off")
    run_episode(env, open_probe, options={"case_id": CASES[0]})
    assert json.loads(report.read_text())["imports"]["fwgym.core.cases"] == "imported"


def _hindsight_free(report: Path, cid_targets: dict) -> list[dict]:
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    for found in lines:
        target = cid_targets[found["case_id"]]
        assert not any(np.allclose(v, target) for v in found["vectors24"]), found["case_id"]
    return lines


def test_a_snooping_agent_on_the_cli_finds_neither_hindsight_nor_the_target(tmp_path, capsys):
    """The issue-17 probe: a module:factory agent that walks inspect.stack() and gc.get_objects() and imports
    fwgym submits the no-information plan when isolated, and the perfect plan (S = 0) when run in-process."""
    (tmp_path / "reports").mkdir()
    report, args = tmp_path / "reports" / "snoop.jsonl", ["--split", "test", "--limit", "2", "--domain", "electricity",
                                                          "--no-progress", "--policies", "hour_of_day_empirical"]
    kwargs = json.dumps({"report": str(report)})
    assert main(["evaluate", "--agent", target("Snoop"), "--agent-kwargs", kwargs, "--out", str(tmp_path / "iso"),
                 "--agent-write", str(tmp_path / "reports"), *args]) == 0, capsys.readouterr().err
    rows = _rows(tmp_path / "iso")
    by = {(r["policy"], r["case_id"]): r for r in rows}
    cases = sorted({c for _, c in by})
    assert len(cases) == 2
    fresh = FWBenchEnv("electricity", split="test")
    targets = {}
    for cid in cases:
        fresh.reset(options={"case_id": cid})
        targets[cid] = fresh.unwrapped.hindsight()["target"]
        # the snoop's plan is exactly the no-information plan: nothing of the target got through
        assert by["snoop", cid]["levels"] == by["hour_of_day_empirical", cid]["levels"]
        assert by["snoop", cid]["S"] == by["hour_of_day_empirical", cid]["S"] > 0
    found = _hindsight_free(report, targets)
    assert len(found) >= 2 and all(f["pid"] != os.getpid() for f in found)
    assert all(not f["hindsight"] and f["envs"] == 0 and f["frames"] > 0 for f in found)
    assert all(set(f["imports"].values()) == {"ModuleNotFoundError"} for f in found)
    # control: the same agent in the evaluating process reads hindsight from its caller's frame
    report.unlink()
    assert main(["evaluate", "--agent", target("Snoop"), "--agent-kwargs", kwargs, "--in-process",
                 "--out", str(tmp_path / "inproc"), *args]) == 0
    leaked = [r for r in _rows(tmp_path / "inproc") if r["policy"] == "snoop"]
    assert len(leaked) == 2 and all(r["S"] == 0.0 and r["valid"] for r in leaked)
    assert all(json.loads(x)["hindsight"] for x in report.read_text().splitlines())


# -- failures are the agent's -----------------------------------------------------------------------


def test_an_agent_that_raises_fails_its_call_and_keeps_its_worker(env):
    agent = IsolatedAgent(target("Raiser"), {"fail_on": [0]})
    pid = agent.pid
    agent.reset({"case_id": "x"})
    with pytest.raises(AgentFailure, match="ZeroDivisionError in act: division by zero") as exc:
        agent.act({})
    assert exc.value.kind == "raised" and "1 / 0" in exc.value.remote_traceback
    assert run_episode(env, agent, options={"case_id": CASES[0]}).record["valid"] and agent.pid == pid


def test_an_agent_that_hangs_is_killed_at_the_deadline_and_replaced_next_episode(env, tmp_path):
    agent = IsolatedAgent(target("Hanger"), {"once": str(tmp_path / "once")}, call_timeout=1.0, write_paths=[tmp_path])
    pid = agent.pid
    agent.reset({"case_id": "x"})
    t0 = time.monotonic()
    with pytest.raises(AgentFailure, match="did not answer act within 1 s") as exc:
        agent.act({})
    assert exc.value.kind == "timeout" and time.monotonic() - t0 < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung worker is gone
    with pytest.raises(AgentFailure, match="gone"):
        agent.act({})
    rec = run_episode(env, agent, options={"case_id": CASES[0]}).record  # a fresh worker, a fresh agent
    assert rec["valid"] and agent.pid not in (None, pid)


def test_an_agent_that_exits_is_replaced_next_episode(env, tmp_path):
    agent = IsolatedAgent(target("Exiter"), {"code": 3, "once": str(tmp_path / "once")}, write_paths=[tmp_path])
    pid = agent.pid
    agent.reset({"case_id": "x"})
    with pytest.raises(AgentFailure, match="exit status 3") as exc:
        agent.act({})
    assert exc.value.kind == "exited"
    agent.end_episode({"case_id": "x"})  # nothing to deliver to a dead worker: no error
    assert agent.episode_stats() is None
    assert run_episode(env, agent, options={"case_id": CASES[0]}).record["valid"] and agent.pid != pid


def test_replies_that_are_not_plain_data_or_too_large_fail(env):
    agent = IsolatedAgent(target("NotPlain"))
    agent.reset({"case_id": "x"})
    with pytest.raises(AgentFailure, match="cannot be sent to the evaluator") as exc:
        agent.act({})
    assert exc.value.kind == "raised"
    big = IsolatedAgent(target("Huge"), {"chars": 20_000}, max_reply_bytes=10_000)
    big.reset({"case_id": "x"})
    pid = big.pid
    with pytest.raises(AgentFailure, match="exceeds the limit of 10000 bytes") as exc:
        big.act({})
    assert exc.value.kind == "bad_reply"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(not hasattr(__import__("fwgym.errors").errors, "AGENT_ERROR_PREFIX"),
                    reason="needs the run layer's agent-failure handling in run_episode (issue 19)")
def test_a_failing_isolated_agent_fails_its_episode_not_the_run(tmp_path):
    from fwgym.errors import AGENT_ERROR_PREFIX

    for name, kwargs in (("Raiser", {"fail_on": [0]}), ("Hanger", {"once": str(tmp_path / "h")}),
                         ("Exiter", {"once": str(tmp_path / "e")})):
        factory = IsolatedAgentFactory(target(name), kwargs, call_timeout=2.0, write_paths=[str(tmp_path)])
        recs = evaluate([factory], split="test", case_ids=list(CASES), domains=["electricity"], progress=False)
        assert len(recs) == 2 and sum(r["reason"].startswith(AGENT_ERROR_PREFIX) for r in recs) >= 1, name
        assert all(not r["valid"] for r in recs if r["reason"].startswith(AGENT_ERROR_PREFIX))


# -- the factory: pickles, JSON, workers, threads, pooling ----------------------------------------------


def test_factory_pickles_and_works_with_worker_processes_and_threads(env):
    factory = IsolatedAgentFactory(target("PlanAgent"), {"method": "weekday_empirical"}, call_timeout=30)
    assert factory.isolated and json.loads(json.dumps(factory))["target"] == target("PlanAgent")
    assert pickle.loads(pickle.dumps(factory)) == factory
    from isolation_agents import PlanAgent

    local = evaluate([functools.partial(PlanAgent, "weekday_empirical")], split="test", limit=3, progress=False)
    ref = {r["case_id"]: _core(r) for r in local}
    for workers in (1, 2):
        recs = evaluate([factory], split="test", limit=3, workers=workers, progress=False)
        assert {r["case_id"]: _core(r) for r in recs} == ref, workers

    def play(cid):
        agent = factory()
        return agent.pid, run_episode(FWBenchEnv("electricity", split="test"), agent, options={"case_id": cid}).record

    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(play, [c for c in ref if c.startswith("elec")] * 2))
    assert all(_core(rec) == ref[rec["case_id"]] for _, rec in out)
    assert len({pid for pid, _ in out}) >= 2  # concurrent agents each have a worker


def test_pooled_workers_make_a_fresh_agent_per_factory_call(env):
    factory = IsolatedAgentFactory(target("PlanAgent"))
    a = factory()
    run_episode(env, a, options={"case_id": CASES[0]})
    pid = a.pid
    del a  # its worker goes back to the pool
    b = factory()
    assert b.pid == pid and b.episode_stats()["seen"] == []  # same interpreter, new agent
    c = factory()  # the pool is empty now: a second worker
    assert c.pid != pid


def test_a_shared_policy_object_is_kept_by_the_pool():
    remote = RemoteObject(target("PlanAgent"), fresh=False)
    remote.reset({"case_id": "a"})
    pid = remote.pid
    del remote
    again = RemoteObject(target("PlanAgent"), fresh=False)
    assert again.pid == pid and again.call("episode_stats")["seen"] == ["a"]
    again.close()


# -- the CLI kind ---------------------------------------------------------------------------------------


def test_cli_module_factory_kind(tmp_path, capsys, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agents.py").write_text(AGENTS.read_text())
    monkeypatch.chdir(tmp_path)  # MODULE:FACTORY imports from the working directory, as python -m does
    common = ["--split", "test", "--limit", "1", "--no-progress", "--policies", "weekday_empirical"]
    assert main(["evaluate", "--agent", "mypkg.agents:PlanAgent", "--agent-kwargs", '{"method": "weekday_empirical"}',
                 "--agent-name", "mine", "--out", str(tmp_path / "a"), *common]) == 0, capsys.readouterr().err
    rows = _rows(tmp_path / "a")
    by = {(r["policy"], r["case_id"]): r for r in rows}
    assert {p for p, _ in by} == {"mine", "weekday_empirical"} and len(rows) == 4
    assert all((by["mine", c]["S"], by["mine", c]["levels"]) == (by["weekday_empirical", c]["S"],
                                                               by["weekday_empirical", c]["levels"]) for _, c in by)
    assert main(["evaluate", "--agent", "mypkg.agents:PlanAgent", "--in-process", "--agent-kwargs",
                 '{"method": "weekday_empirical"}', "--agent-name", "mine", "--out", str(tmp_path / "b"), *common]) == 0
    assert [_core(r) for r in _rows(tmp_path / "b")] == [_core(r) for r in rows]
    capsys.readouterr()
    for agent, extra, message in (
            ("mypkg.agents:Oracle", [], "requires_hindsight"),
            ("mypkg.agents:Oracle", ["--in-process"], "requires hindsight"),
            ("mypkg.agents:NoAct", [], "without an act"),
            ("mypkg.agents:failing_factory", [], "this factory fails"),
            ("nope.mod:make", [], "No module named 'nope'"),
            ("nope.mod:make", ["--in-process"], "No module named 'nope'"),
            ("./missing.py:make", [], "no such file"),
            ("mypkg.agents:PlanAgent", ["--agent-kwargs", "[1]"], "JSON object"),
            ("python", [], "name your agent's factory"),
            ("nokind", [], "unknown agent kind 'nokind'")):
        assert main(["evaluate", "--agent", agent, *extra, "--out", str(tmp_path / "x"), *common]) == 2, agent
        assert message in capsys.readouterr().err, agent


def test_worker_command_runs_the_worker_through_another_command(tmp_path, env):
    """--agent-worker-command replaces the command (e.g. sudo -u / a container); here a shell wrapper that
    records it ran, then starts the worker script."""
    mark = tmp_path / "wrapper.ran"
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\necho ran > {mark}\nexec {os.sys.executable} {worker.__file__}\n")
    wrapper.chmod(0o755)
    agent = IsolatedAgent(target("PlanAgent"), worker_command=str(wrapper))
    assert run_episode(env, agent, options={"case_id": CASES[0]}).record["valid"] and mark.read_text() == "ran\n"


def test_hindsight_is_never_granted_to_an_isolated_agent(env):
    agent = IsolatedAgent(target("PlanAgent"))
    with pytest.raises(ValueError, match="runs isolated"):
        HindsightGrant(agent)
    grant = HindsightGrant(FixedMethodAgent("weekday_empirical"))
    with pytest.raises(ValueError, match="grant is for"):
        run_episode(env, agent, options={"case_id": CASES[0]}, hindsight=grant)


def test_workers_end_with_the_evaluator(tmp_path):
    """A hung agent's worker does not outlive the evaluating process (killed with SIGKILL)."""
    import subprocess
    import sys

    code = (f"import sys, time; sys.path.insert(0, {str(AGENTS.parent)!r})\n"
            "from fwgym.agents.isolation import IsolatedAgent\n"
            f"a = IsolatedAgent({target('Hanger')!r}, {{'once': {str(tmp_path / 'once')!r}}}, "
            f"write_paths=[{str(tmp_path)!r}])\n"
            "print(a.pid, flush=True)\n"
            "a.reset({'case_id': 'x'})\n"
            "a.act({})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    pid = int(proc.stdout.readline())
    os.kill(proc.pid, 9)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, 9)
        raise AssertionError("the worker outlived its evaluator")


def test_the_worker_script_imports_no_fwgym_module(tmp_path):
    """The worker file is standalone (standard library only until an agent is loaded), so it runs where fwgym
    (and its data) is not installed, e.g. in a container; as the evaluator starts it, by path."""
    import subprocess
    import sys

    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('w', {worker.__file__!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in ('fwgym', 'numpy', 'gymnasium'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(out.stdout) == []
