"""``fwgym verify RUN --replay`` (issue 25.5): every recorded episode re-executed through a fresh env.

* a genuine run (fwgym policies, an oracle and an agent) replays identically; the leaderboard's CSV then marks its
  rows ``replayed``;
* a hand-made record with the perfect plan, its scores re-computed and the manifest re-hashed (what "verified"
  used to accept: ``fwgym leaderboard`` still ranks it, re-scored and hash-checked) is caught by the replay, for a
  fwgym policy (its calls submit another plan; a policy's own calls are played again) and for an agent (its
  recorded calls end in another submission);
* what a replay cannot catch is said too: an agent's recorded calls that form a legal episode replay.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from fwgym.cli import main
from fwgym.evaluation.manifest import file_sha256, record_sha256

BASE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress", "--limit", "4"]

_AGENT = '''
import json


class Agent:
    name = "mine"

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "forecast", "args": {"model": "seasonal_empirical", "context_steps": 336}}
        if self.k == 2:
            fid = json.loads(obs["last_result"])["result"]["forecast_id"]
            return {"tool": "plan", "args": {"forecast_id": fid}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    (d / "agent.py").write_text(_AGENT)
    out = d / "run"
    assert main([*BASE, "--agent", f"{d / 'agent.py'}:Agent", "--in-process", "--policies", "weekday_empirical",
                 "perfect_demand", "backtest_selector_4", "--out", str(out)]) == 0
    return out


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _rehash(out: Path, recs: list[dict]) -> None:
    """Write ``recs`` and re-hash the manifest (a forger who rewrites both)."""
    (out / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))
    m = json.loads((out / "manifest.json").read_text())
    m["records"].update(sha256=file_sha256(out / "results.jsonl"), sha256_by_line=[record_sha256(r) for r in recs])
    (out / "manifest.json").write_text(json.dumps(m))


def _csv_marks(capsys, out) -> dict:
    capsys.readouterr()
    assert main(["leaderboard", str(out), "--format", "csv", "--n-boot", "50"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    return {r["policy"]: (r["S"], r["rescored"], r["hash_checked"], r["replayed"], r["isolation"], r["in_process"],
                          r["exposed"]) for r in rows}


def test_a_genuine_run_replays_and_is_marked(run, capsys):
    before = _csv_marks(capsys, run)
    assert {p: m[3] for p, m in before.items()} == dict.fromkeys(before, "false")
    assert before["mine"][4:6] == ("in-process", "true") and before["weekday_empirical"][4:6] == ("fwgym", "false")
    capsys.readouterr()
    assert main(["verify", str(run), "--replay", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for p in ("mine", "weekday_empirical", "perfect_demand", "backtest_selector_4"):
        assert f"  {p}: 4 of 4 episodes replayed identically" in out, out
    doc = json.loads((run / "replay.json").read_text())
    assert doc["records_sha256"] == file_sha256(run / "results.jsonl") and doc["problems"] == []
    after = _csv_marks(capsys, run)
    assert {p: m[3] for p, m in after.items()} == dict.fromkeys(after, "true")
    assert {p: m[1:3] for p, m in after.items()} == dict.fromkeys(after, ("true", "true"))


def test_a_hand_made_perfect_plan_is_caught_by_the_replay(run, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    for f in ("results.jsonl", "manifest.json"):
        (out / f).write_bytes((run / f).read_bytes())
    recs = _records(out)
    best = {r["case_id"]: r for r in recs if r["policy"] == "perfect_demand"}
    forged_lines = []
    for i, r in enumerate(recs):
        if r["policy"] in ("weekday_empirical", "mine") and r["case_id"] == recs[0]["case_id"]:
            recs[i] = {**r, **{k: best[r["case_id"]][k] for k in ("levels", "loss", "floor", "R")}}
            recs[i]["S"] = 0.5 * (recs[i]["R"] + r["credits"] / 113_726)  # the agent paid for its forecast
            forged_lines.append(i + 1)
    _rehash(out, recs)
    marks = _csv_marks(capsys, out)  # re-scored and hash-checked: the leaderboard ranks the forgery
    assert marks["weekday_empirical"][1:4] == ("true", "true", "false")
    capsys.readouterr()
    assert main(["verify", str(out), "--replay", "--no-progress"]) == 1
    text = capsys.readouterr().out
    for n in forged_lines:
        assert f"results.jsonl:{n}: record of policy" in text
    assert "the replayed episode ends otherwise than the record: levels" in text
    assert "  weekday_empirical: 3 of 4 episodes replayed identically" in text
    assert "  mine: 3 of 4 episodes replayed identically" in text
    assert _csv_marks(capsys, out)["mine"][3] == "false"


def test_typed_in_calls_are_caught_for_a_fwgym_policy_not_for_an_agent(run, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    for f in ("results.jsonl", "manifest.json"):
        (out / f).write_bytes((run / f).read_bytes())
    recs = _records(out)
    best = {r["case_id"]: r for r in recs if r["policy"] == "perfect_demand"}
    for i, r in enumerate(recs):  # a consistent episode: one submit of the perfect plan, every field to match
        if r["policy"] in ("weekday_empirical", "mine") and r["case_id"] == recs[0]["case_id"]:
            p = best[r["case_id"]]
            recs[i] = {**r, **{k: p[k] for k in ("levels", "loss", "floor", "R", "S", "credits", "calls", "budget_left",
                                                   "tool_counts", "tool_calls", "forecast_crps")}}
    _rehash(out, recs)
    capsys.readouterr()
    assert main(["verify", str(out), "--replay", "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "weekday_empirical (a fwgym policy, deterministic) plays other calls than the record's from call 1" in text
    assert "  mine: 4 of 4 episodes replayed identically" in text  # a legal episode: only a new run measures an agent


def test_a_record_without_tool_calls_does_not_replay(run, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    for f in ("results.jsonl", "manifest.json"):
        (out / f).write_bytes((run / f).read_bytes())
    recs = _records(out)
    recs[0] = {**recs[0], "tool_calls": []}
    _rehash(out, recs)
    capsys.readouterr()
    assert main(["verify", str(out), "--replay", "--no-progress", "--policies", recs[0]["policy"]]) == 1
    assert "results.jsonl:1: record of policy" in capsys.readouterr().out
