"""The resource profile of an episode (fwgym.agents.resources, run_episode): every record carries wall and CPU
seconds and the episode's own peak RSS; a worker process's CPU and memory are added; PSS for long episodes."""
import os
import time

import numpy as np

from fwgym.agents import run_episode
from fwgym.agents.resources import PSS_MIN_WALL_S, EpisodeMeter
from fwgym.envs.fwbench import FWBenchEnv


class Busy:
    """Allocates ``mib`` MiB and burns ``cpu`` seconds of CPU before it submits the hour-of-day plan."""

    def __init__(self, mib=0, cpu=0.0, sleep=0.0):
        self.mib, self.cpu, self.sleep, self.n = mib, cpu, sleep, 0

    def reset(self):
        self.n = 0

    def act(self, obs):
        self.n += 1
        if self.n == 1:
            block = np.ones(self.mib * 2**20 // 8) if self.mib else None
            t = time.process_time()
            while time.process_time() - t < self.cpu:
                pass
            time.sleep(self.sleep)
            del block
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        import json

        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}


def test_fields_present_positive_and_per_episode():
    env = FWBenchEnv("electricity", split="test")
    case = env.cases[0].case_id
    small = run_episode(env, Busy(), options={"case_id": case}).record
    assert small["episode_wall_s"] > 0 and small["cpu_s"] >= 0 and small["peak_rss_mib"] > 10
    assert small["pss_mib"] is None  # a short episode: PSS is not read
    big = run_episode(env, Busy(mib=200, cpu=0.3), options={"case_id": case}).record
    assert big["cpu_s"] >= 0.3 and big["episode_wall_s"] >= 0.3
    if os.path.exists("/proc/self/clear_refs"):  # Linux: the episode's own peak, reset at each start
        assert big["peak_rss_mib"] >= small["peak_rss_mib"] + 150
        after = run_episode(env, Busy(), options={"case_id": case}).record
        assert after["peak_rss_mib"] < big["peak_rss_mib"] - 150
    slow = run_episode(env, Busy(sleep=PSS_MIN_WALL_S), options={"case_id": case}).record
    if os.path.exists("/proc/self/smaps_rollup"):
        assert 10 < slow["pss_mib"] <= slow["peak_rss_mib"] + 1


def test_a_worker_process_is_counted():
    import subprocess
    import sys

    from fwgym.agents.resources import _worker_cpu_s

    proc = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                             "while time.process_time()-t<0.5: pass\nimport time; time.sleep(60)"])
    try:
        agent = type("Remote", (), {"pid": proc.pid})()
        meter = EpisodeMeter(agent)
        deadline = time.monotonic() + 60
        while (_worker_cpu_s(proc.pid) or 0) < 0.5 and time.monotonic() < deadline:  # until it has burnt its CPU
            time.sleep(0.05)
        got = meter.stop()
        if os.path.exists(f"/proc/{proc.pid}/stat"):
            assert got["cpu_s"] >= 0.3  # the worker burnt ~0.5 s while this process slept
            alone = EpisodeMeter(None)
            assert got["peak_rss_mib"] > alone.stop()["peak_rss_mib"]  # the worker's memory is added
    finally:
        proc.kill()
        proc.wait()


def test_a_meter_never_raises_for_a_vanished_worker():
    agent = type("Gone", (), {"pid": 2**22 + 12345})()
    got = EpisodeMeter(agent).stop()
    assert got["episode_wall_s"] >= 0 and got["cpu_s"] is None and got["peak_rss_mib"] is None
    assert EpisodeMeter(type("Odd", (), {"pid": "x"})()).stop()["cpu_s"] is not None
