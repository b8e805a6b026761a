"""Cost of the worker sandbox (fwgym.isolation.sandbox: Landlock) next to plain process isolation, in one run.

Run from the repository root::

    python benchmarks/bench_sandbox.py            # ~2-4 min on 2 busy cores
    python benchmarks/bench_sandbox.py --quick    # smoke test

What is measured (rounds of the four configurations interleaved, so load from other processes affects them
alike; medians over rounds), for a scripted ``module:factory`` agent (``classical_plan`` then ``submit``)
through ``run_episode`` on the same test cases:

1. ``memory="worker"`` (one worker plays every episode): process isolation (``sandbox="off"``) vs the sandbox;
   the difference is what the sandbox costs per request once the worker runs (Landlock checks happen at
   ``open``, not per read);
2. ``memory="none"`` (a fresh worker for every episode, the sealed split's default): process vs sandbox; the
   difference is the sandbox's per-worker cost (planning its rules, seeding numba's cache into its private
   TMPDIR, ``landlock_restrict_self``) plus the cost of a fresh interpreter per episode over (1);
3. an SB3 PPO macro policy with ``memory="none"`` (a fresh worker, torch and the zip per episode), process vs
   sandbox, on a few episodes;
4. cold start of one worker (interpreter and the agent's imports), process vs sandbox.

Records of every configuration must equal the in-process agent's.
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

from fwgym.agents.base import run_episode  # noqa: E402
from fwgym.agents.isolation import IsolatedAgent, close_idle_workers  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import select_cases  # noqa: E402
from fwgym.isolation import sandbox  # noqa: E402

SCRIPTED = '''
import json


class Scripted:
    name = "scripted"

    def reset(self, info):
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            return {"tool": "classical_plan", "args": {"method": "weekday_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
'''


def _pass(envs, agent, cases):
    t0, records = time.perf_counter(), []
    for domain, cid in cases:
        records.append(run_episode(envs[domain], agent, options={"case_id": cid}).record)
    return time.perf_counter() - t0, [{k: v for k, v in r.items() if k not in ("wall_s", "episode_id")}
                                      for r in records]


def _compare(title, envs, makers, cases, rounds, reference):
    agents = {k: make() for k, make in makers.items()}
    for a in agents.values():
        _pass(envs, a, cases[:1])  # warm-up
    times = {k: [] for k in makers}
    same = True
    for _ in range(rounds):
        for k, a in agents.items():
            t, recs = _pass(envs, a, cases)
            times[k].append(t)
            same &= reference is None or recs == reference
    med = {k: 1e3 * statistics.median(v) / len(cases) for k, v in times.items()}
    print(f"{title}: {len(cases)} episodes x {rounds} rounds; ms per episode: "
          + " | ".join(f"{k} {v:.1f}" for k, v in med.items()) + f" | records identical: {'yes' if same else 'NO'}")
    for a in agents.values():
        getattr(a, "terminate", lambda: None)()
    return med, same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--limit", type=int, default=None, help="cases per domain (default 10; quick 2)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; quick 1)")
    args = ap.parse_args(argv)
    limit, rounds = args.limit or (2 if args.quick else 10), args.rounds or (1 if args.quick else 3)
    st = sandbox.status()
    print(f"== sandbox benchmark == {platform.platform()} | {os.cpu_count()} CPUs | load {os.getloadavg()[0]:.1f} | "
          f"python {platform.python_version()} | Landlock ABI {st['landlock_abi']} -> {st['isolation']}")
    if st["isolation"] != "sandbox":
        print(f"no full sandbox here ({st['reason']}): nothing to compare")
        return 0
    cases = select_cases("test", limit=limit)
    envs = {d: FWBenchEnv(d, split="test") for d in ("electricity", "cycle_hire")}
    tmp = Path(tempfile.mkdtemp(prefix="fwgym-bench-sandbox-"))
    (tmp / "scripted.py").write_text(SCRIPTED)
    sys.path.insert(0, str(tmp))
    from scripted import Scripted  # noqa: E402

    _, reference = _pass(envs, Scripted(), cases)
    target = f"{tmp / 'scripted.py'}:Scripted"
    ok = True
    for memory in ("worker", "none"):
        makers = {f"process/{memory}": lambda m=memory: IsolatedAgent(target, sandbox="off", memory=m),
                  f"sandbox/{memory}": lambda m=memory: IsolatedAgent(target, sandbox="require", memory=m)}
        _, same = _compare(f"scripted agent, memory={memory}", envs, makers, cases, rounds, reference)
        ok &= same
    try:
        from stable_baselines3 import PPO

        from fwgym.agents.sb3 import SB3Agent, save_policy
        from fwgym.rl import make_rl_env

        ppo = save_policy(PPO("MlpPolicy", make_rl_env(split="dev", variant="macro"), seed=0, device="cpu"),
                          tmp / "ppo_macro", "macro")
        few = cases[:2] if args.quick else cases[: max(2, limit // 3)] + cases[limit: limit + max(2, limit // 3)]
        _, sb3_ref = _pass(envs, SB3Agent(ppo), few)
        makers = {"process/none": lambda: SB3Agent(ppo, isolated=True, sandbox="off", memory="none"),
                  "sandbox/none": lambda: SB3Agent(ppo, isolated=True, sandbox="require", memory="none")}
        _, same = _compare("SB3 PPO policy, memory=none", envs, makers, few, 1, sb3_ref)
        ok &= same
    except ImportError:
        print("stable-baselines3 not installed: SB3 skipped")
    starts = {}
    for mode in ("off", "require") * max(1, rounds):
        close_idle_workers()
        t0 = time.perf_counter()
        IsolatedAgent(target, sandbox=mode).terminate()
        starts.setdefault(mode, []).append(time.perf_counter() - t0)
    print("cold start of a worker (scripted agent): " + " | ".join(
        f"{'process' if m == 'off' else 'sandbox'} {1e3 * statistics.median(v):.0f} ms" for m, v in starts.items()))
    print(f"TARGET records identical in every configuration: {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
