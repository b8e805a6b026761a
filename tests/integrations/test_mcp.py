"""fwgym mcp serve (fwgym.integrations.mcp) with the official SDK's own client: over stdio (a subprocess), streamable
HTTP (a subprocess) and in process. The same tool calls give the same tool results and the same record, byte for
byte, as env.step through run_episode; limits, the budget and malformed calls are the env's; --out writes a run
directory that joins fwgym leaderboard; a client that goes away leaves an unscored record."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from fwgym.agents import run_episode  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import load_results  # noqa: E402
from fwgym.evaluation.manifest import canonical_json, read_manifest  # noqa: E402
from fwgym.evaluation.records import stable_record  # noqa: E402
from fwgym.integrations.mcp import PROMPT_NAME, RESOURCES, EpisodeServer  # noqa: E402
from fwgym.integrations.runs import add_episodes  # noqa: E402
from fwgym.tools.actions import result_json  # noqa: E402
from fwgym.tools.registry import tool_parameters  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CASE = "elec-ISNE-2024-07-19-day_ahead"  # a test case (scale 17618.30 MW; seasonal_empirical 336/50: 1027 credits)
POLICY = "mcp-test"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}

#: calls of every kind: valid, malformed (wrong types, unknown tool, arguments not an object), priced, then submit
CALLS = [("catalog", {}), ("history", {"last": "ten"}), ("nope", {"x": 1}), ("quote", {"model": "seasonal_empirical"}),
         ("forecast", {"model": "seasonal_empirical", "horizon": 50}), ("plan", {"forecast_id": "f1"}),
         ("evaluate_plan", {"levels": [1.0] * 8, "method": "weekday_empirical"})]


class _Replay:
    """The reference: the same calls through run_episode (env.step), then submit the plan of the 6th call."""

    name = POLICY

    def __init__(self, calls):
        self.calls, self.k, self.results = list(calls), 0, []

    def act(self, obs):
        if self.k:
            self.results.append(json.loads(obs["last_result"]))
        self.k += 1
        if self.k <= len(self.calls):
            tool, args = self.calls[self.k - 1]
            return {"tool": tool, "args": args}
        plan = self.results[5]["result"]["plan"]
        return {"tool": "submit", "args": {"decisions": plan["decisions"]}}


@pytest.fixture(scope="module")
def reference():
    agent = _Replay(CALLS)
    res = run_episode(FWBenchEnv("electricity", split="test", case_ids=[CASE]), agent, options={"case_id": CASE},
                      episode_id=f"mcp:{POLICY}:{CASE}")
    return agent.results, res.record


async def _play(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["quote"].input_schema == tool_parameters("quote")  # the env's pool schemas
    results = []
    for tool, args in CALLS:
        r = await client.call_tool(tool, args)
        body = dict(r.structured_content)
        assert json.loads(r.content[0].text) == body and r.is_error == (not body["ok"])
        results.append(body)
    plan = results[5]["result"]["plan"]
    final = await client.call_tool("submit", {"decisions": plan["decisions"]})
    after = await client.call_tool("catalog", {})  # after the end: refused, nothing run
    prompt = await client.get_prompt(PROMPT_NAME)
    history = json.loads((await client.read_resource("fwgym://episode/history")).contents[0].text)
    return results, dict(final.structured_content), dict(after.structured_content), prompt, history


def _check(played, reference):
    results, final, after, prompt, history = played
    ref_results, ref_record = reference
    for got, want in zip(results, ref_results):
        ledger = {k: got.pop(k) for k in ("calls_left", "budget_left")}
        assert result_json(got) == result_json(want)  # byte for byte: the env's own result
        assert ledger["calls_left"] >= 0
    assert [r["ok"] for r in results] == [True, False, False, True, True, True, True]
    assert results[1]["error"]["code"] == "invalid_arguments" and results[2]["error"]["code"] == "unknown_tool"
    assert results[4]["result"]["credits"] == 1027 and results[4]["result"]["budget_remaining"] == 113726 - 1027
    record = final["episode"]
    # the same record, byte for byte, but for the measured time and memory of the episode
    assert canonical_json(stable_record(record)) == canonical_json(stable_record(ref_record))
    assert record["calls"] == 7 and record["credits"] == 1027 and record["status"] == "submitted"
    assert after["error"]["code"] == "episode_over" and after["episode"]["calls"] == 7
    text = prompt.messages[0].content.text
    assert "Tool-call limit: 12" in text and CASE.split("-")[1] in text
    assert len(history["values"]) == 336 and history["timestamps"][-1] == "2024-07-17T21:00:00Z"


def test_stdio_with_the_sdk_client(reference, tmp_path):
    params = StdioServerParameters(command=sys.executable, args=["-m", "fwgym", "mcp", "serve", "--case-id", CASE,
                                                                 "--policy-name", POLICY, "--out", str(tmp_path / "run")],
                                   env=ENV, cwd=str(ROOT))

    async def main():
        async with Client(params) as c:
            return await _play(c)

    _check(anyio.run(main), reference)
    rs = load_results([tmp_path / "run"])  # re-scored, hash-checked, comparable
    assert canonical_json(stable_record(rs.records[0])) == canonical_json(stable_record(reference[1]))
    m = read_manifest(tmp_path / "run")
    assert m["origin"]["kind"] == "mcp" and m["status"] == "complete" and m["settings"]["policies"] == [POLICY]
    trace = json.loads((tmp_path / "run" / "traces.jsonl").read_text())
    assert [s["action"]["tool"] for s in trace["steps"]] == [c[0] for c in CALLS] + ["submit"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_with_the_sdk_client(reference):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fwgym", "mcp", "serve", "--case-id", CASE, "--policy-name", POLICY,
                             "--http", f"127.0.0.1:{port}", "--linger", "3"], env=ENV, cwd=str(ROOT), stderr=subprocess.PIPE, text=True)
    try:
        deadline, ready = time.monotonic() + 600, False  # the server imports fwgym and builds the env first
        while time.monotonic() < deadline and not ready:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                ready = True
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.2)
        assert ready, "the HTTP server did not start"
        time.sleep(0.5)  # uvicorn accepts before its app's lifespan (the session manager) has started

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                return await _play(c)

        _check(anyio.run(main), reference)
        assert proc.wait(timeout=60) == 0  # the HTTP server stops --linger seconds after the episode
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _in_process(**env_kwargs):
    env = FWBenchEnv("electricity", split="test", case_ids=[CASE], **env_kwargs)
    ends = []
    server = EpisodeServer(env, CASE, policy=POLICY, on_end=lambda a, c: ends.append(a))
    return server, ends


def test_a_client_cannot_exceed_the_call_limit_or_the_budget():
    server, ends = _in_process(budget=1500)

    async def main():
        async with Client(server.server) as c:
            first = await c.call_tool("forecast", {"model": "seasonal_empirical", "horizon": 50})  # 1027 of 1500
            second = await c.call_tool("forecast", {"model": "seasonal_empirical", "horizon": 50})
            out = [first, second]
            for _ in range(11):
                out.append(await c.call_tool("catalog", {}))
            out.append(await c.call_tool("catalog", {}))
            return [dict(r.structured_content) for r in out]

    got = anyio.run(main)
    assert got[0]["ok"] and got[0]["budget_left"] == 473
    assert got[1]["error"]["code"] == "insufficient_budget" and got[1]["budget_left"] == 473  # refused free
    assert got[12]["error"]["code"] == "call_limit_exceeded" and got[12]["episode"]["calls"] == 13
    assert got[12]["episode"]["credits"] == 1027 and not got[12]["episode"]["valid"]
    assert got[13]["error"]["code"] == "episode_over"  # the 14th call: nothing run or counted
    assert len(ends) == 1 and ends[0].record["status"] == "call_limit_exceeded"


def test_resources_and_prompt_are_the_episodes():
    server, _ = _in_process()

    async def main():
        async with Client(server.server) as c:
            listed = [str(r.uri) for r in (await c.list_resources()).resources]
            facts = json.loads((await c.read_resource("fwgym://episode/facts")).contents[0].text)
            context = (await c.read_resource("fwgym://episode/context")).contents[0].text
            prompts = [p.name for p in (await c.list_prompts()).prompts]
            return listed, facts, context, prompts

    listed, facts, context, prompts = anyio.run(main)
    assert listed == list(RESOURCES) and prompts == [PROMPT_NAME]
    assert facts["case"]["case_id"] == CASE and [e["model"] for e in facts["pool"]][0] == "seasonal_empirical"
    assert context == server.observation["context"]
    server.close()


def test_a_client_that_goes_away_leaves_an_unscored_record_that_a_replay_replaces(tmp_path):
    out = tmp_path / "run"
    from fwgym.cli.mcp import _write  # the CLI's --out writer

    import argparse

    Args = argparse.Namespace(suite="decision", split="test", policy_name=POLICY, case_id=CASE, http=None, out=str(out),
                              argv=[])

    server, _ = _in_process()
    server.on_end = lambda answer, client: _write(Args, server, {}, client, answer.record, "electricity")

    async def main():
        async with Client(server.server) as c:
            await c.call_tool("catalog", {})

    anyio.run(main)
    answer = server.close()  # the client went away without an answer
    assert answer.record["status"] == "harness_error" and answer.record["S"] is None
    m = read_manifest(out)
    assert m["status"] == "incomplete" and m["counts"]["harness_error"] == 1
    with pytest.raises(ValueError, match=r"incomplete run .*serve each unscored case again with `fwgym mcp serve --case-id ID --out "):
        load_results([out])
    # the case is served again and played to the end: the harness_error record is replaced (kept as superseded)
    server2, _ = _in_process()
    server2.on_end = lambda answer, client: _write(Args, server2, {}, client, answer.record, "electricity")

    async def again():
        async with Client(server2.server) as c:
            plan = (await c.call_tool("classical_plan", {"method": "weekday_empirical"})).structured_content
            await c.call_tool("submit", {"decisions": plan["result"]["plan"]["decisions"]})

    anyio.run(again)
    rs = load_results([out])
    assert [r["status"] for r in rs.records] == ["submitted"] and (out / "superseded.jsonl").is_file()
    with pytest.raises(ValueError, match="already holds a scored episode"):
        add_episodes(out, rs.records, settings=read_manifest(out)["settings"], origin={"kind": "mcp"})


def test_a_retry_after_a_spending_attempt_is_marked_not_laundered(tmp_path, capsys):
    """The trial's laundering: a client buys a forecast (1,027 credits, 1 call), goes away (unscored), then submits
    for free in a second session. The row is scored with credits 0, but every table marks it RETRIED AFTER SPEND
    and the run history counts the superseded attempt and what it spent."""
    import argparse

    from fwgym.cli import main
    from fwgym.cli.mcp import _write

    out = tmp_path / "run"
    Args = argparse.Namespace(suite="decision", split="test", policy_name=POLICY, case_id=CASE, http=None, out=str(out),
                              argv=[])
    server, _ = _in_process()
    server.on_end = lambda answer, client: _write(Args, server, {}, client, answer.record, "electricity")

    async def buy():
        async with Client(server.server) as c:
            await c.call_tool("forecast", {"model": "seasonal_empirical", "horizon": 50})

    anyio.run(buy)
    assert server.close().record["credits"] == 1027
    server2, _ = _in_process()
    server2.on_end = lambda answer, client: _write(Args, server2, {}, client, answer.record, "electricity")

    async def free():
        async with Client(server2.server) as c:
            plan = (await c.call_tool("classical_plan", {"method": "weekday_empirical"})).structured_content
            await c.call_tool("submit", {"decisions": plan["result"]["plan"]["decisions"]})

    anyio.run(free)
    m = read_manifest(out)
    assert m["history"] == {"sessions": 2, "superseded": {"harness_error: client_disconnected": 1},
                            "retried_after_spend": {POLICY: {"attempts": 1, "calls": 1, "credits": 1027.0}}}
    superseded = [json.loads(x) for x in (out / "superseded.jsonl").read_text().splitlines()]
    assert [r["superseded_reason"] for r in superseded] == ["harness_error: client_disconnected"]
    rs = load_results([out])
    assert rs.records[0]["credits"] == 0 and rs.marks[POLICY]["retried_after_spend"] == 1
    assert any(n.startswith(f"RETRIED AFTER SPEND: {POLICY!r} 1 attempt(s)") for n in rs.notes)
    assert main(["leaderboard", str(out)]) == 0
    text = capsys.readouterr().out
    assert "RETRIED AFTER SPEND" in text.splitlines()[0] and "spent 1,027 credits before a retry" in text
    assert main(["leaderboard", str(out), "--format", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    header, row = rows[0].split(","), rows[1].split(",")
    assert row[header.index("retried_after_spend")] == "1"


def test_mcp_rows_join_the_leaderboard_next_to_the_baselines(tmp_path):
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "fwgym", "evaluate", "--policies", "weekday_empirical",
                    "hour_of_day_empirical", "--split", "test", "--domain", "electricity", "--limit", "3",
                    "--no-progress", "--out", str(base)], env=ENV, cwd=str(ROOT), check=True, capture_output=True)
    case = json.loads((base / "manifest.json").read_text())["settings"]["cases"][0]
    server = EpisodeServer(FWBenchEnv("electricity", split="test", case_ids=[case]), case, policy=POLICY)

    async def main():
        async with Client(server.server) as c:
            plan = (await c.call_tool("classical_plan", {"method": "weekday_empirical"})).structured_content
            done = await c.call_tool("submit", {"decisions": plan["result"]["plan"]["decisions"]})
            return done.structured_content["episode"]

    record = anyio.run(main)
    from fwgym.integrations.runs import episode_settings

    settings = episode_settings(suite="decision", split="test", domains=["electricity"], lead=None, cases=[case],
                                policies=[POLICY], agents={POLICY: {"kind": "mcp"}}, env_kwargs={}, max_calls=12)
    add_episodes(tmp_path / "mcp", [record], settings=settings, origin={"kind": "mcp"})
    with pytest.raises(ValueError, match="a run of fwgym evaluate"):
        add_episodes(base, [record], settings=settings, origin={"kind": "mcp"})  # never into an evaluate run
    out = subprocess.run([sys.executable, "-m", "fwgym", "leaderboard", str(base), str(tmp_path / "mcp"),
                          "--common-cases", "--format", "json"], env=ENV, cwd=str(ROOT), check=True,
                         capture_output=True, text=True).stdout
    rows = {r["policy"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"weekday_empirical", "hour_of_day_empirical", POLICY}
    assert rows[POLICY]["S"] == pytest.approx(rows["weekday_empirical"]["S"], abs=0)  # same plan, same score


def test_a_run_directory_of_other_settings_is_refused_before_the_case_is_served(tmp_path):
    """The new-user trial: `--out runs/mcp` that holds a test-split episode and a dev case to serve. The server used
    to play the case and then fail writing it (the episode lost, the client told 'Internal server error'); it
    refuses at start now, in one line, without serving."""
    from fwgym.cli import main
    from fwgym.integrations.runs import episode_settings

    env = FWBenchEnv("electricity", split="test", case_ids=[CASE])
    from fwgym.baselines import make_policy

    record = run_episode(env, make_policy("weekday_empirical"), options={"case_id": CASE},
                         episode_id=f"mcp:{POLICY}:{CASE}").record
    record = {**record, "policy": POLICY}
    settings = episode_settings(suite="decision", split="test", domains=["electricity"], lead=None, cases=[CASE],
                                policies=[POLICY], agents={POLICY: {"kind": "mcp"}}, env_kwargs={}, max_calls=12)
    out = tmp_path / "mcp"
    add_episodes(out, [record], settings=settings, origin={"kind": "mcp"})
    before = (out / "results.jsonl").read_bytes()
    dev_case = "elec-ISNE-2024-01-03-day_ahead"
    t0 = time.perf_counter()
    assert main(["mcp", "serve", "--split", "dev", "--case-id", dev_case, "--out", str(out),
                 "--policy-name", POLICY]) == 2  # a user error, before stdio is served (else this call would block)
    assert time.perf_counter() - t0 < 60 and (out / "results.jsonl").read_bytes() == before
    assert main(["mcp", "serve", "--split", "test", "--case-id", CASE, "--out", str(out),
                 "--policy-name", POLICY]) == 2  # the same pair again: never replaced, refused at start too


def test_the_trials_free_retry_over_stdio_is_marked_in_leaderboard_and_verify(tmp_path, capsys):
    """The new-user trial as it was run, with the SDK's stdio client and ``fwgym mcp serve`` processes: the first
    session makes 8 calls (one forecast: 1,027 credits) and disconnects without submitting (harness_error, never
    scored); the second submits the plan the client remembers, at once (0 calls, 0 credits). Before: ``fwgym
    leaderboard RUN`` showed a clean row (credits 0, no mark) and the run history no superseded record."""
    from fwgym.cli import main

    out = tmp_path / "run"
    params = StdioServerParameters(command=sys.executable, args=["-m", "fwgym", "mcp", "serve", "--split", "test",
                                                                 "--case-id", CASE, "--policy-name", POLICY,
                                                                 "--out", str(out)], env=ENV, cwd=str(ROOT))
    calls = [("catalog", {}), ("history", {"last": 48}), ("quote", {"model": "seasonal_empirical", "horizon": 50}),
             ("forecast", {"model": "seasonal_empirical", "horizon": 50}), ("plan", {"forecast_id": "f1"}),
             ("classical_plan", {"method": "weekday_empirical"}), ("history", {"last": 24}), ("catalog", {})]

    async def spend():
        async with Client(params) as c:
            got = [dict((await c.call_tool(tool, args)).structured_content) for tool, args in calls]
        return got

    bought = anyio.run(spend)
    assert [r["ok"] for r in bought] == [True] * 8 and bought[3]["result"]["credits"] == 1027
    deadline = time.monotonic() + 60  # the server writes the unscored record as it exits
    while not (out / "manifest.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_manifest(out)["counts"]["harness_error"] == 1
    remembered = bought[5]["result"]["plan"]["decisions"]

    async def free():
        async with Client(params) as c:
            return dict((await c.call_tool("submit", {"decisions": remembered})).structured_content)

    final = anyio.run(free)
    assert final["ok"] and final["episode"]["calls"] == 0 and final["episode"]["credits"] == 0
    while read_manifest(out)["status"] != "complete" and time.monotonic() < deadline:
        time.sleep(0.2)
    m = read_manifest(out)
    assert m["history"]["superseded"] == {"harness_error: client_disconnected": 1}
    assert m["history"]["retried_after_spend"] == {POLICY: {"attempts": 1, "calls": 8, "credits": 1027.0}}
    assert [s["policies"] for s in m["sessions"]] == [[POLICY], [POLICY]]
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("fwgym leaderboard (**RETRIED AFTER SPEND**, **PARTIAL**)")
    assert f"RETRIED AFTER SPEND: {POLICY!r} 1 attempt(s) made calls or spent credits" in head
    assert f"run history: 2 session(s); 1 superseded record(s) (harness_error: client_disconnected: 1); {POLICY!r}: " \
           "1 unscored attempt(s) made 8 call(s) and spent 1,027 credits before a retry" in head
    assert main(["verify", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"  RETRIED AFTER SPEND: {POLICY!r} 1 attempt(s)" in said and "spent 1,027 credits before a retry" in said
