"""Cost of running agents isolated (fwgym.agents.isolation) next to the same agents in-process, in one run.

Run from the repository root::

    python benchmarks/bench_isolation.py            # ~40-60 s on 2 cores
    python benchmarks/bench_isolation.py --quick    # smoke test

What is measured (rounds of in-process and isolated passes interleaved, so load from other processes on a
shared machine affects both sides alike; medians over rounds):

1. **SB3 agent** (an untrained PPO on the macro menu, 403 features, and an untrained MaskablePPO on the
   sequential menu, 56 features; saved with ``save_policy``): ``SB3Agent(path)`` vs
   ``SB3Agent(path, isolated=True)`` over the same test cases through ``run_episode``. Isolated, only the
   policy's ``predict`` crosses the process boundary (one feature vector, and mask, per menu choice;
   the features, masks and tool calls are computed in the evaluator), so the figure per env step is the
   round-trip cost spread over the steps. The records of both must be identical.
2. **A ``module:factory`` agent** (a scripted agent: ``classical_plan`` then ``submit``, loaded from a
   file): ``IsolatedAgent`` vs the same class in-process. Here every ``reset``/``act``/``end_episode``
   crosses (observation: 336 float32 values, the context text, the last tool result).
3. **Round trip** of a no-op call, and **worker start**: a cold start (new interpreter, the agent's
   imports: torch and SB3 for the SB3 policy; loading the zip) and a pooled start (a fresh agent in an idle
   worker, what every further factory call of the same spec in a process costs).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fwgym.agents.base import run_episode  # noqa: E402
from fwgym.agents.isolation import IsolatedAgent, RemoteObject, close_idle_workers  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import select_cases  # noqa: E402

SCRIPTED = '''
import json


class Scripted:
    name = "scripted"

    def __init__(self):
        self.calls = 0

    def reset(self, info):
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            return {"tool": "classical_plan", "args": {"method": "weekday_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}

    def end_episode(self, record):
        pass

    def ping(self):
        return None

    def look(self, obs):
        return None
'''


def _pass(envs: dict, agent, cases) -> tuple[float, int, list[dict]]:
    """Seconds, env steps and records of one pass over ``cases``."""
    t0, steps, records = time.perf_counter(), 0, []
    for domain, cid in cases:
        res = run_episode(envs[domain], agent, options={"case_id": cid})
        steps += res.steps
        records.append(res.record)
    return time.perf_counter() - t0, steps, records


def _compare(name: str, envs: dict, make_local, make_isolated, cases, rounds: int, crossings) -> dict:
    local, isolated = make_local(), make_isolated()
    _pass(envs, local, cases[:2])  # warm-up (numba cache, plan cache of the first cases)
    _pass(envs, isolated, cases[:2])
    t_local, t_iso, same = [], [], True
    steps = n_cross = 0
    for _ in range(rounds):
        tl, steps, rl = _pass(envs, local, cases)
        before = crossings(isolated)
        ti, si, ri = _pass(envs, isolated, cases)
        n_cross = crossings(isolated) - before
        same &= rl == ri and si == steps
        t_local.append(tl)
        t_iso.append(ti)
    ml, mi = statistics.median(t_local), statistics.median(t_iso)
    out = {"name": name, "episodes": len(cases), "steps": steps, "local_ms_per_episode": 1e3 * ml / len(cases),
           "isolated_ms_per_episode": 1e3 * mi / len(cases), "local_us_per_step": 1e6 * ml / steps,
           "isolated_us_per_step": 1e6 * mi / steps, "overhead_us_per_step": 1e6 * (mi - ml) / steps,
           "crossings": n_cross, "overhead_us_per_crossing": 1e6 * (mi - ml) / max(1, n_cross),
           "ratio": mi / ml, "identical": same}
    print(f"{name}: {len(cases)} episodes, {steps} env steps, {n_cross} requests to the worker per pass")
    print(f"  in-process {out['local_ms_per_episode']:.2f} ms/episode ({out['local_us_per_step']:.0f} us/step) | "
          f"isolated {out['isolated_ms_per_episode']:.2f} ms/episode ({out['isolated_us_per_step']:.0f} us/step) | "
          f"ratio {out['ratio']:.2f}x")
    print(f"  overhead {out['overhead_us_per_step']:.0f} us per env step = {out['overhead_us_per_crossing']:.0f} us per "
          f"request to the worker | records identical: {'yes' if same else 'NO'}")
    return out


class _Counter:
    """Counts the requests an isolated agent sends (wraps its worker's ``request``)."""

    def __init__(self, remote: RemoteObject):
        self.n = 0
        self.remote = remote
        worker = remote._box[0]
        original = worker.request

        def counted(*args, **kwargs):
            self.n += 1
            return original(*args, **kwargs)

        worker.request = counted


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few cases and rounds (smoke test)")
    ap.add_argument("--limit", type=int, default=None, help="cases per domain (default 40; quick 6)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; quick 2)")
    args = ap.parse_args(argv)
    limit = args.limit or (6 if args.quick else 40)
    rounds = args.rounds or (2 if args.quick else 5)

    import stable_baselines3
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from fwgym.agents.sb3 import SB3Agent, save_policy
    from fwgym.rl import make_rl_env

    print(f"== isolation benchmark == {platform.platform()} | {os.cpu_count()} CPUs | python "
          f"{platform.python_version()} | numpy {np.__version__} | torch {torch.__version__} | "
          f"stable-baselines3 {stable_baselines3.__version__}")
    cases = select_cases("test", limit=limit)
    envs = {d: FWBenchEnv(d, split="test") for d in ("electricity", "cycle_hire")}
    tmp = Path(tempfile.mkdtemp(prefix="fwgym-bench-isolation-"))
    ppo = save_policy(PPO("MlpPolicy", make_rl_env(split="dev", variant="macro"), seed=0, device="cpu"),
                      tmp / "ppo_macro", "macro")
    mppo = save_policy(MaskablePPO("MlpPolicy", make_rl_env(split="dev", variant="sequential", features="compact"),
                                   seed=0, device="cpu"), tmp / "maskable_sequential", "sequential", "compact")
    (tmp / "scripted.py").write_text(SCRIPTED)
    sys.path.insert(0, str(tmp))
    from scripted import Scripted  # noqa: E402

    results = []
    for path in (ppo, mppo):
        counters = {}

        def make_isolated(path=path):
            agent = SB3Agent(path, isolated=True)
            counters[id(agent)] = _Counter(agent._policy)
            return agent

        results.append(_compare(f"SB3Agent {path.stem}", envs, lambda path=path: SB3Agent(path), make_isolated, cases,
                                rounds, lambda a: counters[id(a)].n))
    counters = {}

    def make_scripted():
        agent = IsolatedAgent(f"{tmp / 'scripted.py'}:Scripted")
        counters[id(agent)] = _Counter(agent._remote)
        return agent

    results.append(_compare("module:factory agent (scripted)", envs, Scripted, make_scripted, cases, rounds,
                            lambda a: counters[id(a)].n))

    remote = RemoteObject(f"{tmp / 'scripted.py'}:Scripted")
    n = 200 if args.quick else 2000
    t0 = time.perf_counter()
    for _ in range(n):
        remote.call("ping")
    rt = (time.perf_counter() - t0) / n
    obs, _ = envs["electricity"].reset(options={"case_id": cases[0][1]})
    t0 = time.perf_counter()
    for _ in range(n):
        remote.call("look", obs)
    rt_obs = (time.perf_counter() - t0) / n
    print(f"round trip: no-op call {1e6 * rt:.0f} us; a call with one observation {1e6 * rt_obs:.0f} us")
    close_idle_workers()
    t0 = time.perf_counter()
    SB3Agent(ppo, isolated=True)
    cold_sb3 = time.perf_counter() - t0
    t0 = time.perf_counter()
    SB3Agent(ppo, isolated=True)  # the first one's worker is back in the pool
    warm_sb3 = time.perf_counter() - t0
    close_idle_workers()
    t0 = time.perf_counter()
    IsolatedAgent(f"{tmp / 'scripted.py'}:Scripted")
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    IsolatedAgent(f"{tmp / 'scripted.py'}:Scripted")
    warm = time.perf_counter() - t0
    print(f"worker start: SB3 policy cold {cold_sb3:.2f} s (interpreter, torch, SB3, zip), pooled {1e3 * warm_sb3:.1f} ms "
          f"| scripted agent cold {1e3 * cold:.0f} ms, pooled (fresh agent) {1e3 * warm:.1f} ms")
    close_idle_workers()
    bad = [r["name"] for r in results if not r["identical"]]
    print(f"TARGET records of isolated agents identical to in-process: {'MET' if not bad else 'NOT MET ' + str(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
