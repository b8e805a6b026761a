"""Re-hashed forgeries of an LLM run's records (fwgym.evaluation.trace_check): someone edits results.jsonl and
recomputes the manifest's sha256s.

* a forged score alone is refused by the re-scorer (the score of the recorded submission is recomputed);
* a forged submission with its true score and consistently typed-in calls re-scores and replays (a legal episode),
  but contradicts the trace of its episode in traces.jsonl (the model's submit): refused by ``fwgym verify``,
  ``fwgym verify --replay`` and ``fwgym leaderboard``; so is a record whose trace line was deleted, and an edited
  trace score;
* the clean run passes and says what was cross-checked; its records are those of a run without the check;
* what it cannot see is said too: records, traces and manifest forged together pass.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fwgym.cli import main
from fwgym.evaluation.manifest import file_sha256, record_sha256
from fwgym.evaluation.results import load_source
from fwgym.evaluation.trace_check import check_traces, traced_policies
from fwgym.testing.chat_server import ScriptedChatServer, plan_then_answer

LLM = "openai:test-model"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("traced") / "run"
    with ScriptedChatServer(respond=plan_then_answer("weekday_empirical")) as srv:
        assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress", "--limit", "2",
                     "--agent", "openai", "--base-url", srv.url, "--model", "test-model", "--timeout", "5",
                     "--max-retries", "0", "--policies", "perfect_demand", "--out", str(out)]) == 0
    return out


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    (out / "replay.json").unlink(missing_ok=True)
    return out


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _rehash(out: Path, recs: list[dict]) -> None:
    """Write ``recs`` and re-hash the manifest (a forger who rewrites both)."""
    (out / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))
    m = json.loads((out / "manifest.json").read_text())
    m["records"].update(sha256=file_sha256(out / "results.jsonl"), sha256_by_line=[record_sha256(r) for r in recs])
    (out / "manifest.json").write_text(json.dumps(m))


def _forge_perfect(out: Path) -> int:
    """The LLM's first record turned into a consistent episode of the perfect plan (a submit of it, its true score,
    counts and result hashes: what re-scores and replays); returns its line."""
    recs = _records(out)
    best = {r["case_id"]: r for r in recs if r["policy"] == "perfect_demand"}
    i = next(i for i, r in enumerate(recs) if r["policy"] == LLM)
    p = best[recs[i]["case_id"]]
    assert p["S"] < recs[i]["S"]
    recs[i] = {**recs[i], **{k: p[k] for k in ("levels", "loss", "floor", "R", "S", "credits", "calls", "budget_left",
                                                 "tool_counts", "tool_calls", "forecast_crps")}}
    _rehash(out, recs)
    return i + 1


def _verify(capsys, out: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["verify", str(out), "--no-progress", *extra])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_the_clean_run_is_cross_checked_and_passes(run, capsys):
    assert traced_policies(json.loads((run / "manifest.json").read_text())) == ([LLM], [])
    src = load_source(run)
    assert src.traces.checked == {LLM: 2} and src.traces.truncated == {} and src.traces.elsewhere == []
    code, out, _ = _verify(capsys, run)
    assert code == 0 and f"  {LLM}: 2 records cross-checked against the traces of their episodes" in out
    # the records a run writes do not change: each is the one its trace holds
    traces = {t["episode_id"]: t for t in map(json.loads, (run / "traces.jsonl").read_text().splitlines())}
    for r in _records(run):
        if r["policy"] == LLM:
            assert traces[r["episode_id"]]["record"] == r


def test_a_forged_score_rehashed_is_refused(run, tmp_path, capsys):
    out = _copy(run, tmp_path)
    recs = _records(out)
    i = next(i for i, r in enumerate(recs) if r["policy"] == LLM)
    recs[i] = {**recs[i], "S": 0.0, "R": 0.0}
    _rehash(out, recs)
    for extra in ((), ("--replay",)):
        code, _, err = _verify(capsys, out, *extra)
        assert code == 2 and f"results.jsonl:{i + 1}: record of policy {LLM!r}" in err, err
        assert "re-scored" in err  # the re-scorer recomputes the score of the recorded submission
    assert main(["leaderboard", str(out)]) == 2


def test_a_forged_submission_with_its_true_score_contradicts_its_trace(run, tmp_path, capsys):
    out = _copy(run, tmp_path)
    line = _forge_perfect(out)
    rec = _records(out)[line - 1]
    # what re-scoring and a replay see: a consistent record, a legal episode
    from fwgym.evaluation.replay import replay_records
    from fwgym.evaluation.verify import verify_record

    src = load_source(run)
    verify_record(rec, src.settings)
    assert replay_records([rec], [line], src.settings, "results.jsonl", src.manifest).ok
    with pytest.raises(ValueError) as err:
        load_source(out)
    text = str(err.value)
    assert f"results.jsonl:{line}: record of policy {LLM!r} on case {rec['case_id']!r} contradicts the trace of its " \
           f"episode ({out / 'traces.jsonl'}:" in text, text
    assert "in the trace's score" in text and "the manifest re-hashed" in text
    for extra in ((), ("--replay",)):
        code, _, err_text = _verify(capsys, out, *extra)
        assert code == 2 and "contradicts the trace of its episode" in err_text, err_text
    assert not (out / "replay.json").exists()  # nothing replayed, nothing marked
    assert main(["leaderboard", str(out)]) == 2
    assert "contradicts the trace of its episode" in capsys.readouterr().err


def test_the_submit_is_compared_even_when_score_and_record_in_the_trace_were_edited(run, tmp_path):
    """A forger who rewrote the trace's score, record and final plan but not the steps (the model's submit)."""
    out = _copy(run, tmp_path)
    line = _forge_perfect(out)
    rec = _records(out)[line - 1]
    lines = (out / "traces.jsonl").read_text().splitlines()
    traces = [json.loads(x) for x in lines]
    k = next(k for k, t in enumerate(traces) if t["episode_id"] == rec["episode_id"])
    traces[k] = {**traces[k], "record": rec, "score": {f: rec.get(f) for f in traces[k]["score"]},
                 "final_plan": {**traces[k]["final_plan"], "levels": rec["levels"]}}
    (out / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    with pytest.raises(ValueError, match="the recorded submit .* is not the trace's submit"):
        load_source(out)
    # the whole forgery: the steps' submit too. Records, traces and manifest forged together are not detectable
    steps = traces[k]["steps"]
    submit = next(c["action"] for c in rec["tool_calls"] if c["action"]["tool"] == "submit")
    traces[k]["steps"] = [s for s in steps if s["action"].get("tool") != "submit"] + [{**steps[-1], "action": submit}]
    (out / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    assert load_source(out).traces.checked == {LLM: 2}


def test_a_deleted_trace_line_is_refused(run, tmp_path, capsys):
    out = _copy(run, tmp_path)
    line = _forge_perfect(out)
    rec = _records(out)[line - 1]
    kept = [x for x in (out / "traces.jsonl").read_text().splitlines() if json.loads(x)["episode_id"] != rec["episode_id"]]
    (out / "traces.jsonl").write_text("".join(x + "\n" for x in kept))
    code, _, err = _verify(capsys, out)
    assert code == 2 and f"its episode {rec['episode_id']!r} has no trace" in err, err
    (out / "traces.jsonl").unlink()  # every trace gone: the manifest still says the LLM policy writes them
    code, _, err = _verify(capsys, out)
    assert code == 2 and "has no trace" in err, err


def test_policies_that_write_no_traces_are_not_required_to(run, tmp_path):
    out = _copy(run, tmp_path)
    recs = _records(out)
    report = check_traces(out / "results.jsonl", {"settings": {"agents": {"perfect_demand": "perfect_demand"}}},
                          [r for r in recs if r["policy"] == "perfect_demand"],
                          [n for n, r in enumerate(recs, 1) if r["policy"] == "perfect_demand"])
    assert report.checked == {}
    manifest = json.loads((out / "manifest.json").read_text())
    assert traced_policies({**manifest, "args": {**manifest["args"], "trace_out": "elsewhere.jsonl"}}) == ([], [LLM])


def test_a_killed_sessions_record_may_lack_its_trace_and_is_counted(run, tmp_path, capsys):
    """The record is written before end_episode writes the trace: a kill between them leaves a record without one."""
    out = _copy(run, tmp_path)
    rec = next(r for r in _records(out) if r["policy"] == LLM)
    kept = [x for x in (out / "traces.jsonl").read_text().splitlines() if json.loads(x)["episode_id"] != rec["episode_id"]]
    (out / "traces.jsonl").write_text("".join(x + "\n" for x in kept))
    with pytest.raises(ValueError, match="has no trace"):
        load_source(out)  # session 1 ended: a missing trace is a deleted one
    m = json.loads((out / "manifest.json").read_text())
    m["sessions"][0]["status"] = "running"  # killed, then resumed by a later session
    (out / "manifest.json").write_text(json.dumps(m))
    src = load_source(out)
    assert src.traces.untraced == {LLM: 1} and src.traces.checked == {LLM: 1}
    code, text, _ = _verify(capsys, out)
    assert code == 0 and f"  {LLM}: 1 records of killed sessions have no trace" in text
    # the leaderboard says it too (the trial: only fwgym verify did)
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert f"NOT CROSS-CHECKED against traces: {LLM!r} 1 record(s) of killed sessions without a trace" in head


def test_a_forged_record_pointing_at_a_failed_attempts_empty_trace_is_refused(run, tmp_path):
    """The trial's forgery: the record of the perfect plan takes the episode id of an earlier attempt that failed
    before any reply (its trace has no score, record or steps), so there was nothing to contradict."""
    out = _copy(run, tmp_path)
    line = _forge_perfect(out)
    recs = _records(out)
    failed = {"episode_id": "1:failed-attempt", "policy": LLM, "case_id": recs[line - 1]["case_id"],
              "messages": [], "steps": []}
    with open(out / "traces.jsonl", "a") as fh:
        fh.write(json.dumps(failed) + "\n")
    recs[line - 1]["episode_id"] = failed["episode_id"]
    _rehash(out, recs)
    with pytest.raises(ValueError, match="holds no outcome .*cannot vouch for a scored record"):
        load_source(out)
