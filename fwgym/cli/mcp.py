"""``fwgym mcp serve``: one fwgym episode as a Model Context Protocol server (:mod:`fwgym.integrations.mcp`).

Examples::

    fwgym mcp serve --split test --case-id elec-ISNE-2024-07-19-day_ahead            # stdio (an MCP client starts it)
    fwgym mcp serve --split dev --case-id ID --http 127.0.0.1:8765 --out runs/mcp --policy-name my-agent

With ``--out RUN`` the finished episode is added to the run directory RUN (one server per case, the same RUN for
all of them); ``fwgym leaderboard RUN BASELINE_RUN --common-cases`` ranks it. Needs the ``mcp`` extra
(``pip install "fwgym[mcp]"``).
"""
from __future__ import annotations

import argparse
import sys

from fwgym.cli.args import add_output_argument, positive_float

NAME = "mcp"
HELP = "serve one episode to an MCP client (stdio or streamable HTTP): `fwgym mcp serve --case-id ID`"
#: the default policy name of MCP-played rows
DEFAULT_POLICY = "mcp-client"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym mcp serve``."""
    from fwgym.core.cases import SPLITS, TEST_SPLIT
    from fwgym.evaluation import SUITES
    from fwgym.forecasters.registry import POOLS

    sub = p.add_subparsers(dest="mcp_command", required=True, metavar="COMMAND")
    s = sub.add_parser("serve", help="serve one episode (stdio by default)", description=__doc__.split("\n\n")[0])
    s.add_argument("--case-id", required=True, dest="case_id", help="the case to play (fwgym cases; ids of the split)")
    s.add_argument("--split", default=TEST_SPLIT, choices=SPLITS, help=f"the case's split (default {TEST_SPLIT})")
    s.add_argument("--suite", choices=tuple(SUITES), default="decision",
                   help="decision (default), context (scenario notes) or forecast (submit quantiles, RCRPS)")
    s.add_argument("--pool", choices=tuple(POOLS), default="protocol", help="the priced forecast pool (default protocol)")
    s.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="add these priced models (plug-ins or built-in) to the pool")
    s.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (the server stops --linger "
                        "seconds after the episode ends)")
    s.add_argument("--linger", type=positive_float, default=10.0,
                   help="--http: seconds the server stays up after the episode ends (default 10: the client may still "
                        "read the result, the prompt or the resources)")
    add_output_argument(s, metavar="DIR", default=None,
                             help="add the finished episode to this run directory (created when missing; one per policy "
                             "and case), so it joins fwgym leaderboard")
    s.add_argument("--policy-name", default=DEFAULT_POLICY, dest="policy_name",
                   help=f"the row name of the episode in results (default {DEFAULT_POLICY})")
    s.add_argument("--timeout", type=positive_float, default=600.0,
                   help="seconds one tool call may take (a forecaster may run; default 600)")


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http must be HOST:PORT, e.g. 127.0.0.1:8765, got {value!r}")
    return host.strip("[]"), int(port)


def run(args) -> int:
    """Serve the episode; exit 0 when it ended with a scored record (or no --out), 1 when it did not end."""
    import anyio

    from fwgym.baselines.registry import check_policy_name
    from fwgym.cli.evaluate import check_packaged_files, pool_models
    from fwgym.core.cases import parse_case_id
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.evaluation import SUITES
    from fwgym.integrations.mcp import EpisodeServer
    from fwgym.integrations.runs import check_addable

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ValueError("fwgym mcp needs the mcp package: pip install \"fwgym[mcp]\"") from None
    check_policy_name(args.policy_name, flag="--policy-name")
    address = _host_port(args.http) if args.http else None
    domain = parse_case_id(args.case_id)[0]
    models = pool_models(args.pool, args.models or ())
    check_packaged_files([domain], models)
    env_kwargs = dict(SUITES[args.suite])
    if models != pool_models("protocol"):
        env_kwargs["models"] = list(models)
    if args.out:  # refused now, before a client plays the case, not when its record is written
        check_addable(args.out, [(args.policy_name, args.case_id)], settings=_settings(args, env_kwargs, None, domain),
                      origin_kind="mcp")
    env = FWBenchEnv(domain=domain, split=args.split, case_ids=[args.case_id], **env_kwargs)
    state: dict = {}

    def on_end(answer, client) -> None:
        record = answer.record
        state["record"] = record
        print(f"fwgym mcp: episode over: {record['status']}" + (f", S {record['S']:.4f}" if record.get("S") is not None
                                                                else " (not scored)"), file=sys.stderr)
        if args.out:
            _write(args, server, env_kwargs, client, record, domain)
            print(f"fwgym mcp: recorded in {args.out}", file=sys.stderr)
        if address is not None and getattr(server, "_uvicorn", None) is not None:  # the client may still read
            import threading

            timer = threading.Timer(args.linger, setattr, (server._uvicorn, "should_exit", True))
            timer.daemon = True
            timer.start()

    server = EpisodeServer(env, args.case_id, policy=args.policy_name, on_end=on_end, timeout=args.timeout)
    print(f"fwgym mcp: case {args.case_id} ({args.split}, {args.suite} suite), "
          + (f"streamable HTTP at http://{address[0]}:{address[1]}/mcp" if address else "stdio"), file=sys.stderr)
    try:
        if address is None:
            anyio.run(server.run_stdio)
        else:
            anyio.run(server.run_http, *address)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    record = state.get("record")
    return 0 if record is not None and record.get("scored", True) else 1


def _write(args, server, env_kwargs: dict, client: dict, record: dict, domain: str) -> None:
    """Add the episode to ``--out`` (:func:`fwgym.integrations.runs.add_episodes`)."""
    from fwgym.integrations.runs import add_episodes
    from fwgym.traces import Trace, trace_score
    from fwgym.version import __version__

    agent = {"kind": "mcp", "client": client or None}
    settings = _settings(args, env_kwargs, client, domain)
    trace: Trace = {"trace_version": 2, "policy": args.policy_name, "case_id": args.case_id,
                    "episode_id": record.get("episode_id"), "backend": "mcp", "settings": agent, "messages": [],
                    "steps": [{"action": s["action"], "env_result": s["result"]} for s in server.bridge.steps],
                    "score": trace_score(record)}
    add_episodes(args.out, [record], settings=settings, origin={"kind": "mcp", "fwgym_version": __version__},
                 session={"command": ["fwgym", *(getattr(args, "argv", None) or [])], "client": client or None,
                          "transport": "http" if args.http else "stdio"}, traces=[trace])


def _settings(args, env_kwargs: dict, client: dict | None, domain: str) -> dict:
    """The manifest settings of the served episode (:func:`fwgym.integrations.runs.episode_settings`)."""
    from fwgym.integrations.runs import episode_settings
    from fwgym.tools import MAX_CALLS

    agent = {"kind": "mcp", "client": client or None}
    return episode_settings(suite=args.suite, split=args.split, domains=[domain], lead=None, cases=[args.case_id],
                            policies=[args.policy_name], agents={args.policy_name: agent}, env_kwargs=env_kwargs,
                            max_calls=MAX_CALLS)


__all__ = ["NAME", "HELP", "DEFAULT_POLICY", "add_arguments", "run"]
