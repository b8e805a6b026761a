"""Resume and finalize accept only what the runner produced (issue 25.2): the laundering attacks of the finding.

* an edited record (weekday_empirical -> the perfect plan, re-scored consistently) is refused by ``--resume``
  with its file:line (before: accepted, S 0.3149 -> 0.0000 with 0 episodes played);
* a record re-labelled ``harness_error`` (to have a bad episode played again) is refused (before: a random agent's
  S 0.6068 -> 0.2360 by cherry-picking);
* a line appended after the run ended is refused by ``--resume``;
* a forged record another process appends while the run is going (the agent that found the run directory) is
  refused by ``finalize``, not kept, and named in the manifest and the leaderboard header (before: kept, the
  reference's S 0.3149 -> 1.4446 in ``fwgym leaderboard``);
* an agent that kills the evaluator from ``end_episode`` when it dislikes its score finds its record on disk:
  the resume does not play the episode again (before: the record was lost and the retry kept);
* the manifest's history (sessions, superseded records by reason) is in the leaderboard header.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.cli import main
from fwgym.evaluation import evaluate
from fwgym.testing.chat_server import ScriptedChatServer, Step, plan_then_answer

ROOT = Path(__file__).resolve().parents[2]
BASE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress"]
LIMIT = "6"


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in _lines(out)]


def _write(out: Path, recs) -> None:
    (out / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))


def _incomplete(out: Path) -> None:
    """Make the finished run resumable as an unfinished one would be (a session that ended incomplete)."""
    m = json.loads((out / "manifest.json").read_text())
    m["status"] = m["sessions"][-1]["status"] = "incomplete"
    (out / "manifest.json").write_text(json.dumps(m))


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    assert main([*BASE, "--limit", LIMIT, "--policies", "weekday_empirical", "perfect_demand", "--out", str(out)]) == 0
    return out


def _perfect_edit(recs):
    """weekday_empirical's records with the perfect plan's levels and scores (what the re-scorer accepts)."""
    best = {r["case_id"]: r for r in recs if r["policy"] == "perfect_demand"}
    out = []
    for r in recs:
        if r["policy"] == "weekday_empirical":
            p = best[r["case_id"]]
            r = {**r, **{k: p[k] for k in ("levels", "loss", "floor", "R", "S")}}
        out.append(r)
    return out


def test_an_edited_record_is_refused_by_resume_with_its_line(run_dir, capsys):
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    edited = _perfect_edit(_records(run_dir))
    _write(run_dir, edited)
    _incomplete(run_dir)
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(run_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run_dir / 'results.jsonl'}:1: record of policy 'weekday_empirical'" in err[0], err
    assert "differs from the one the run wrote" in err[0] and "refused" in err[0]
    assert (run_dir / "results.jsonl").read_text() == "".join(json.dumps(r, sort_keys=True) + "\n" for r in edited)
    assert before.keys() <= {p.name for p in run_dir.iterdir()} | {".lock"}


def test_a_record_relabelled_harness_error_is_refused(run_dir, capsys):
    recs = _records(run_dir)
    i = next(i for i, r in enumerate(recs) if r["policy"] == "weekday_empirical")
    recs[i] = {**recs[i], "status": "harness_error", "scored": False, "harness_kind": "http_5xx", "loss": None,
               "floor": None, "R": None, "S": None, "valid": False, "levels": None}
    _write(run_dir, recs)
    _incomplete(run_dir)
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(run_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"results.jsonl:{i + 1}: record of policy 'weekday_empirical'" in err and "re-labelled" in err


def test_a_line_appended_after_the_run_ended_is_refused(run_dir, capsys):
    recs = _records(run_dir)
    extra = {**_perfect_edit(recs)[0], "episode_id": "2:weekday_empirical:" + recs[0]["case_id"]}
    with open(run_dir / "results.jsonl", "a") as fh:
        fh.write(json.dumps(extra, sort_keys=True) + "\n")
    _incomplete(run_dir)
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(run_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"results.jsonl:{len(recs) + 1}: record of policy 'weekday_empirical'" in err
    assert "was not written by the run" in err


def test_a_killed_sessions_tail_is_kept_but_a_second_record_of_a_pair_is_not(tmp_path, capsys):
    from fwgym.evaluation import RunDir
    from fwgym.evaluation.manifest import MANIFEST_VERSION

    run = RunDir.create(tmp_path / "run", {"manifest_version": MANIFEST_VERSION, "settings": {"policies": [
        "weekday_empirical"]}})
    evaluate(["weekday_empirical"], split="test", domains=["cycle_hire"], limit=3, progress=False, run=run)
    run.close()  # killed: no finalize
    good = RunDir.resume(run.path)
    assert len(good.previous) == 3 and good.session == 2
    good.close()
    first = _records(run.path)[0]
    with open(run.path / "results.jsonl", "a") as fh:  # a better record of a pair the killed session had scored
        fh.write(json.dumps({**first, "S": 0.0}, sort_keys=True) + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:4: a second record of policy 'weekday_empirical'"):
        RunDir.resume(run.path)


_FORGER = '''
import json


class Agent:
    """Plays hour_of_day_empirical; at each end_episode it appends a forged record of the reference policy (its
    worst plan, re-scoring consistently) for the case played before, which the reference has played by then: on a
    runner that keeps the file's last line per pair, the forgery replaces the reference's record."""

    name = "forger"

    def __init__(self, forged=None, results=None):
        self.results, self.prev, self.case = results, None, None
        self.forged = {json.loads(x)["case_id"]: x for x in open(forged).read().splitlines() if x.strip()}

    def reset(self, info=None):
        self.k, self.prev, self.case = 0, self.case, (info or {}).get("case_id")

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}

    def end_episode(self, record):
        if self.prev in self.forged:
            with open(self.results, "a") as dst:
                dst.write(self.forged[self.prev] + "\\n")
'''


def test_a_line_appended_during_the_run_is_refused_by_finalize_not_kept(tmp_path, capsys):
    cases = [r["case_id"] for r in evaluate(["weekday_empirical"], split="test", domains=["cycle_hire"],
                                            limit=int(LIMIT), progress=False)]
    worst = {r["case_id"]: r for r in evaluate(["weekly_repeat"], split="test", domains=["cycle_hire"],
                                                limit=int(LIMIT), progress=False)}
    out = tmp_path / "run"
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps({**worst[c], "policy": "weekday_empirical",
                                          "episode_id": f"1:weekday_empirical:{c}"}, sort_keys=True) + "\n"
                              for c in cases))
    agent = tmp_path / "forger.py"
    agent.write_text(_FORGER)
    kwargs = json.dumps({"forged": str(forged), "results": str(out / "results.jsonl")})
    assert main([*BASE, "--limit", LIMIT, "--agent", f"{agent}:Agent", "--in-process", "--agent-kwargs", kwargs,
                 "--policies", "weekday_empirical", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    n = len(cases) - 1  # one forged line per end_episode after the first
    assert f"warning: {n} line(s) of {out / 'results.jsonl'} were not written by this run" in err
    recs = _records(out)
    straight = {r["case_id"]: r["S"] for r in evaluate(["weekday_empirical"], split="test", domains=["cycle_hire"],
                                                       limit=int(LIMIT), progress=False)}
    assert {r["case_id"]: r["S"] for r in recs if r["policy"] == "weekday_empirical"} == straight  # genuine kept
    m = json.loads((out / "manifest.json").read_text())
    assert m["history"]["refused_lines"] == n and len(m["refused_lines"]) == n
    assert {x["policy"] for x in m["refused_lines"]} == {"weekday_empirical"}
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    assert f"REFUSED {n} line(s) appended to results.jsonl by another process" in capsys.readouterr().out


_KILLER = '''
import json
import os
import signal


class Agent:
    """Submits the hour_of_day plan, or, while the marker file has fewer than 2 lines, the lowest plan (a bad
    episode); from its end_episode it then kills the evaluating process (twice in all: the marker counts)."""

    name = "killer"

    def __init__(self, marker=None):
        self.marker = marker

    def _kills(self):
        return len(open(self.marker).read().splitlines()) if os.path.exists(self.marker) else 0

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        plan = json.loads(obs["last_result"])["result"]["plan"]["decisions"]
        if self._kills() < 2:
            low = min(d["value"] for d in plan)
            plan = [{"decision_id": d["decision_id"], "value": low} for d in plan]
        return {"tool": "submit", "args": {"decisions": plan}}

    def end_episode(self, record):
        if self._kills() < 2:
            with open(self.marker, "a") as fh:
                fh.write("kill\\n")
            os.kill(os.getpid(), signal.SIGKILL)
'''


def test_an_agent_that_kills_the_evaluator_from_end_episode_finds_its_record_kept(tmp_path):
    agent, marker, out = tmp_path / "killer.py", tmp_path / "marker", tmp_path / "run"
    agent.write_text(_KILLER)
    args = [*BASE, "--limit", "3", "--agent", f"{agent}:Agent", "--in-process", "--agent-kwargs",
            json.dumps({"marker": str(marker)}), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    code = "import sys; from fwgym.cli import main; sys.exit(main(sys.argv[1:]))"
    for argv in (args, ["evaluate", "--resume", str(out), "--no-progress"]):  # killed, resumed and killed again
        proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=str(ROOT), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    bad = _records(out)  # written before end_episode, one per killed session
    assert [r["episode_id"][:2] for r in bad] == ["1:", "2:"] and all(r["policy"] == "killer" for r in bad)
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0  # the tail of two killed sessions is kept
    final = {r["case_id"]: r for r in _records(out)}
    for r in bad:
        assert final[r["case_id"]]["S"] == r["S"] and final[r["case_id"]]["episode_id"] == r["episode_id"]
    assert len(final) == 3


def test_the_runs_history_is_in_the_leaderboard_header(tmp_path, capsys):
    out = tmp_path / "run"
    answers, n = plan_then_answer("weekday_empirical"), {"k": 0}

    def respond(body):  # the first episode's first request fails: one harness_error (the preflight's probes pass)
        if "tools" in body and body.get("max_tokens") != 1:
            n["k"] += 1
            if n["k"] == 1:
                return Step(status=500)
        return answers(body)

    with ScriptedChatServer(respond=respond) as srv:
        args = [*BASE, "--limit", "3", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                "--max-retries", "0", "--timeout", "5", "--out", str(out)]
        assert main(args) == 1
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    # the replayed episode was the first played (earliest as_of): the later cases' prompts held its target
    exposed = sum(r["exposed"] for r in _records(out))
    assert m["history"] == {"sessions": 2, "superseded": {"harness_error: http_5xx": 1}, "retried_after_spend": {},
                            "lost_in_flight": 0, "refused_lines": 0, "exposed": exposed} and exposed == 1
    (old,) = [json.loads(x) for x in (out / "superseded.jsonl").read_text().splitlines()]
    assert old["superseded_reason"] == "harness_error: http_5xx"
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "run history: 2 session(s); 1 superseded record(s) (harness_error: http_5xx: 1)" in head


def test_a_server_fault_after_a_tool_call_marks_the_retried_row(tmp_path, capsys):
    """A server that fails after the model's first tool call: the unscored attempt made 1 call; its retry is scored
    and the row is marked RETRIED AFTER SPEND (a self-hosted server could answer 500 to get free retries)."""
    out = tmp_path / "run"
    answers, n = plan_then_answer("weekday_empirical"), {"k": 0}

    def respond(body):  # the first episode's second request (after its classical_plan call) fails
        if "tools" in body and body.get("max_tokens") != 1:
            n["k"] += 1
            if n["k"] == 2:
                return Step(status=500)
        return answers(body)

    with ScriptedChatServer(respond=respond) as srv:
        args = [*BASE, "--limit", "2", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                "--max-retries", "0", "--timeout", "5", "--out", str(out)]
        assert main(args) == 1
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    (policy,) = m["settings"]["policies"]
    assert m["history"]["retried_after_spend"] == {policy: {"attempts": 1, "calls": 1, "credits": 0.0}}
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "RETRIED AFTER SPEND" in head.split(":")[0]  # in the title's marks
    assert f"RETRIED AFTER SPEND: {policy!r} 1 attempt(s)" in head
