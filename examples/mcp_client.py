"""Play fwgym cases from an MCP client: one ``fwgym mcp serve`` per case (stdio), all into one run directory.

The "agent" here is a two-call script (``classical_plan`` with a method, then ``submit`` of that plan) so that
it runs offline; put your model's loop where ``play`` calls the tools (the prompt ``fwgym_episode`` is the
instruction to give it). Then rank the run next to the baselines::

    python examples/mcp_client.py --split dev --domain electricity --cases 5 --out runs/mcp
    fwgym evaluate --split dev --domain electricity --limit 5 --policies weekday_empirical hour_of_day_empirical --out runs/base
    fwgym leaderboard runs/base runs/mcp --common-cases

Needs the ``mcp`` extra (``pip install "fwgym[mcp]"``).
"""
from __future__ import annotations

import argparse
import os
import sys

import anyio


async def play(case_id: str, split: str, out: str, name: str, method: str) -> float | None:
    """One case through its own server; returns the episode's S (``None`` when not scored)."""
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(command=sys.executable,
                                   args=["-m", "fwgym", "mcp", "serve", "--split", split, "--case-id", case_id,
                                         "--out", out, "--policy-name", name],
                                   env=dict(os.environ))  # the SDK passes only a few variables unless told
    async with Client(server) as client:
        await client.get_prompt("fwgym_episode")  # the instruction a model would get
        plan = await client.call_tool("classical_plan", {"method": method})
        decisions = plan.structured_content["result"]["plan"]["decisions"]
        done = await client.call_tool("submit", {"decisions": decisions})
        return done.structured_content["episode"]["S"]


def main(argv: list[str] | None = None) -> int:
    from fwgym.evaluation.runner import select_cases

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--cases", type=int, default=5, help="cases per domain, evenly spaced (fwgym evaluate --limit)")
    ap.add_argument("--domain", default="electricity", help="electricity or cycle_hire")
    ap.add_argument("--out", default="runs/mcp", help="the run directory the servers add their episodes to")
    ap.add_argument("--policy-name", default="mcp-scripted", dest="policy_name")
    ap.add_argument("--method", default="weekday_empirical", help="the classical method the script plans with")
    args = ap.parse_args(argv)
    for _, case_id in select_cases(args.split, [args.domain], None, args.cases):
        s = anyio.run(play, case_id, args.split, args.out, args.policy_name, args.method)
        print(f"{case_id}: S {s:.4f}")
    print(f"run directory: {args.out}  (fwgym leaderboard {args.out} ... --common-cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
