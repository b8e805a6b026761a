"""Memory across cases (issue 25, finding 1): an OpenAI-compatible server that remembers every history it is shown and
answers HTTP 500 on a case's first sighting (so ``--resume`` plays it again after the cases whose prompts hold its
target were played) submits the perfect plan wherever it has seen the target.

* On the sealed split it gains nothing: every case's S equals the same logic without memory (the
  weekday_empirical plan), and no record is marked exposed.
* On the test split the replays it answers from memory are marked ``exposed`` (every one of them), flagged in the
  leaderboard, and the set of exposed records is exactly the cases whose target lay in a prompt of session 1.
* Within one session the schedule makes memory useless: a case starts only after every case whose target its
  prompt holds has ended, so a server that answers at once (no 500) never finds a target in memory.
"""
from __future__ import annotations

import json
import re
import threading
from datetime import datetime

import numpy as np
import pytest

from fwgym.cli import main
from fwgym.context.text import prompt_windows
from fwgym.core.cases import build_cases
from fwgym.core.contract import shortage_weights
from fwgym.core.optimizer import optimal_plan
from fwgym.testing.chat_server import ScriptedChatServer, Step, completion, plan_then_answer

AGENT = "openai:test-model"
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _hour(ts: str) -> int:
    dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return int(dt.timestamp()) // 3600


class MemoryModel:
    """A scripted model with memory across requests (what a hostile submitter's server could do)."""

    def __init__(self, fail_first: bool = True):
        self.seen: dict[tuple[str, int], float] = {}
        self.sightings: dict[tuple[str, int, str], int] = {}
        self.from_memory: set[tuple[str, int, str]] = set()
        self.fail_first = fail_first
        self.fallback = plan_then_answer("weekday_empirical")
        self.lock = threading.Lock()

    def _remember(self, sid: str, text: str) -> None:
        for day, cells in re.findall(r"^(\d{4}-\d{2}-\d{2}) \| (.*)$", text, flags=re.M):
            h0 = _hour(f"{day}T00:00:00Z")
            for i, c in enumerate(cells.split()):
                if c != ".":
                    self.seen[(sid, h0 + i)] = float(c)

    def __call__(self, body):
        msgs = body.get("messages", [])
        first = next((m["content"] for m in msgs if m.get("role") == "user"), "")
        if not re.search(r"TfL station (\w+)", first):  # the preflight request
            return completion("ok")
        sid = re.search(r"TfL station (\w+)", first).group(1)
        m = re.search(r"Target window \(([^)]*)\): (\S+) to", first)
        lead, start = m.group(1).replace("-", "_"), _hour(m.group(2))
        scale = float(re.search(r"scale = ([0-9.e+-]+)", first).group(1))
        weekday = WEEKDAYS.index(re.search(r"The target date \S+ is a (\w+)", first).group(1))
        key = (sid, start, lead)
        with self.lock:
            self._remember(sid, first)
            if not any(m.get("role") == "assistant" for m in msgs):  # the episode's first request
                self.sightings[key] = self.sightings.get(key, 0) + 1
                if self.fail_first and self.sightings[key] == 1:
                    return Step(status=500)
                target = [self.seen.get((sid, start + h)) for h in range(24)]
                if all(v is not None for v in target):
                    self.from_memory.add(key)
                    plan = optimal_plan(np.array(target, dtype=float)[:, None], scale, shortage_weights(weekday)).plan
                    return completion("Final answer:\n```json\n" + json.dumps({"decisions": plan.decisions()}) + "\n```")
        return self.fallback(body)


def _run(url, out, split, *extra):
    return main(["evaluate", "--split", split, "--domain", "cycle_hire", "--agent", "openai", "--base-url", url,
                 "--model", "test-model", "--timeout", "10", "--max-retries", "0", "--policies", "weekday_empirical",
                 "--concurrency", "4", "--no-progress", "--out", str(out), *extra])


def _records(out):
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _by_policy(out):
    recs = _records(out)
    return ({r["case_id"]: r for r in recs if r["policy"] == AGENT},
            {r["case_id"]: r for r in recs if r["policy"] == "weekday_empirical"})


@pytest.mark.parametrize("split", ["sealed", "test"])
def test_a_server_with_memory_gains_nothing_on_sealed_and_its_replays_are_exposed_on_test(tmp_path, capsys, split):
    model = MemoryModel()
    out = tmp_path / split
    with ScriptedChatServer(respond=model) as srv:
        assert _run(srv.url, out, split) == 1  # every agent episode: HTTP 500, harness_error
        agent, _ = _by_policy(out)
        assert {r["status"] for r in agent.values()} == {"harness_error"}
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    agent, base = _by_policy(out)
    assert len(agent) == len(build_cases("cycle_hire", split))
    cases = {c.case_id: c for c in build_cases("cycle_hire", split)}
    # which targets the prompts of session 1 held (every case's prompt was sent there)
    held = {cid for cid, c in cases.items()
            if any(a < c.target_start + 24 and c.target_start < b for o in cases.values() if o is not c
                   for a, b in prompt_windows(o))}
    exposed = {cid for cid, r in agent.items() if r["exposed"]}
    if split == "sealed":
        assert not model.from_memory and not exposed
        for cid, r in agent.items():  # the same S as the same logic without memory, case by case
            assert r["S"] == base[cid]["S"] and r["levels"] == base[cid]["levels"], cid
        assert main(["leaderboard", str(out), "--format", "csv"]) == 0
    else:
        answered = {cid for cid, c in cases.items() if (c.series_id, c.target_start, c.lead) in model.from_memory}
        assert answered and answered <= exposed == held  # every replay that used memory is marked
        assert len(exposed) == 117
        gains = [base[cid]["S"] - agent[cid]["S"] for cid in answered]
        assert min(gains) >= 0 and sum(gains) > 0 and max(agent[cid]["S"] for cid in answered) < 1e-12
        capsys.readouterr()
        assert main(["leaderboard", str(out)]) == 0
        text = capsys.readouterr().out
        assert "EXPOSED" in text and "117" in text
        assert main(["leaderboard", str(out), "--format", "csv"]) == 0
        rows = capsys.readouterr().out.splitlines()
        head = rows[0].split(",")
        col = head.index("exposed")
        marks = {r.split(",")[0]: r.split(",")[col] for r in rows[1:]}
        assert marks[AGENT] == "117" and marks["weekday_empirical"] == "0"


def test_within_one_session_memory_finds_no_target(tmp_path):
    """No 500s: every case is played once, in as_of order, each only after the cases whose targets its prompt holds
    (with --concurrency 8): the server never finds a target in memory, on the test split either."""
    model = MemoryModel(fail_first=False)
    out = tmp_path / "test"
    with ScriptedChatServer(respond=model) as srv:
        assert _run(srv.url, out, "test", "--concurrency", "8") == 0
    assert not model.from_memory
    agent, base = _by_policy(out)
    assert all(agent[c]["S"] == base[c]["S"] and not agent[c]["exposed"] for c in agent)
    assert len(agent) == 157
