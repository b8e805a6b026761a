"""LLM evaluation throughput: episodes/s of ``fwgym evaluate --concurrency N`` against one local
OpenAI-compatible server that answers every request after a fixed delay (a model's generation time).

Run from the repository root::

    python benchmarks/bench_llm_concurrency.py            # N = 1, 8, 32; 200 ms per reply (~40 s)
    python benchmarks/bench_llm_concurrency.py --quick    # fewer episodes
    python benchmarks/bench_llm_concurrency.py --delay 0.5 --concurrency 1 16 64

N = 1 plays ``--episodes-1`` episodes (default 32), every other N ``max(--episodes, 4 N)`` (default
128): rates, so the slow sequential run need not be long; the records of the cases both played are
compared. The server (:class:`fwgym.testing.chat_server.ScriptedChatServer`, one thread per request)
runs in its own process, as a real server would (in the evaluating process it would compete for the
GIL), and plays a deterministic model (:func:`~fwgym.testing.chat_server.plan_then_answer`: a native ``classical_plan``
tool call, then the plan as a text answer), so every episode is 2 requests and its records do not
depend on N: the script checks that the records of every N equal those of N = 1. The agent is the
real :class:`fwgym.agents.openai.OpenAIChatAgent` (the ``openai`` client over HTTP on 127.0.0.1),
built per thread by :func:`fwgym.evaluation.evaluate` from an
:class:`~fwgym.agents.factory.LLMAgentFactory`, each thread with its own env, inside one process.

Target (issue 19.3): N = 32 at least 10x the episodes/s of N = 1 with a 200 ms reply delay.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fwgym.agents.factory import LLMAgentFactory  # noqa: E402
from fwgym.evaluation import evaluate, select_cases  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, plan_then_answer  # noqa: E402

TARGET_RATIO = 10.0
VOLATILE = ("episode_id", "wall_s", "request_latency_s")


def _serve(delay: float, queue) -> None:
    """The server process: serve until terminated, after sending the URL."""
    srv = ScriptedChatServer(respond=plan_then_answer("weekday_empirical"), delay=delay)
    queue.put(srv.url)
    srv.thread.join()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="episodes/s of --concurrency N against a fixed-delay local server")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--episodes", type=int, default=128, help="episodes per N > 1 (at least 4 N)")
    ap.add_argument("--episodes-1", type=int, default=32, dest="episodes_1", help="episodes at N = 1")
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the server waits before each reply")
    ap.add_argument("--quick", action="store_true", help="16 episodes at N = 1, 64 at other N")
    args = ap.parse_args(argv)
    n_one, n_many = (16, 64) if args.quick else (args.episodes_1, args.episodes)
    most = max([n_one, n_many] + [4 * n for n in args.concurrency if n > 1])
    ids = [c for _, c in select_cases("test", limit=(most + 1) // 2)][:most]
    print(f"== fwgym LLM concurrency benchmark == {platform.platform()} | python {platform.python_version()} | "
          f"{os.cpu_count()} CPUs | 2 requests per episode, server delay {args.delay * 1000:.0f} ms (own process)")
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    server = ctx.Process(target=_serve, args=(args.delay, queue), daemon=True)
    server.start()
    rows, seen = [], {}
    try:
        url = queue.get(timeout=60)
        factory = LLMAgentFactory(kind="openai", model="bench-model", base_url=url, timeout=60.0, max_retries=0)
        evaluate([factory], split="test", case_ids=ids[:2], progress=False)  # warm up: imports, envs, numba
        for n in args.concurrency:
            todo = ids[: n_one if n == 1 else max(n_many, 4 * n)]
            t = time.perf_counter()
            recs = evaluate([factory], split="test", case_ids=todo, progress=False, concurrency=n)
            wall = time.perf_counter() - t
            ok = all(r["valid"] for r in recs)
            for r in recs:
                text = json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True)
                ok &= seen.setdefault(r["case_id"], text) == text
            rows.append((n, wall, len(recs) / wall, ok))
            print(f"  N = {n:3d}: {len(recs):4d} episodes in {wall:6.2f} s = {len(recs) / wall:6.2f} episodes/s "
                  f"(records {'equal to the other runs' if ok else 'DIFFER'})", flush=True)
    finally:
        server.terminate()
        server.join(10)
    base = rows[0][2]
    for n, wall, eps, _ in rows[1:]:
        print(f"  N = {n}: {eps / base:.1f}x N = {rows[0][0]} "
              f"(ideal {min(n, len(ids)) * 1.0:.0f}x: the server's delay overlaps, the client's CPU does not)")
    if 32 in {r[0] for r in rows} and rows[0][0] == 1:
        ratio = next(r[2] for r in rows if r[0] == 32) / base
        print(f"target: --concurrency 32 >= {TARGET_RATIO:.0f}x --concurrency 1 episodes/s with a "
              f"{args.delay * 1000:.0f} ms reply delay: {ratio:.1f}x {'MET' if ratio >= TARGET_RATIO else 'NOT MET'}")
    if not all(r[3] for r in rows):
        print("records differ between concurrency levels", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
