"""Run directories (fwgym.evaluation.rundir): new names, no silent replacement, appends that survive, torn last
lines, resume bookkeeping, one session at a time."""
import json

import pytest

from fwgym.errors import HarnessError
from fwgym.evaluation import evaluate
from fwgym.evaluation.manifest import MANIFEST_VERSION, read_manifest
from fwgym.evaluation.rundir import RunDir, TornTail, check_new_run_dir, default_run_dir, episode_id

CASES = 3


def test_default_run_dir_numbers_new_directories(tmp_path):
    root = tmp_path / "results"
    assert default_run_dir("test", "decision", root) == root / "test"
    (root / "test").mkdir(parents=True)
    assert default_run_dir("test", "decision", root) == root / "test"  # empty: reusable
    (root / "test" / "x").write_text("1")
    assert default_run_dir("test", "decision", root) == root / "test-2"
    (root / "test-2").mkdir()
    (root / "test-2" / "x").write_text("1")
    assert default_run_dir("test", "decision", root) == root / "test-3"
    assert default_run_dir("dev", "forecast", root) == root / "dev-forecast"


def test_a_directory_with_files_is_never_replaced_silently(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "results.jsonl").write_text("{}\n")
    (d / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"already holds files; results are never replaced silently: .*--resume .*"
                                         r"--overwrite"):
        check_new_run_dir(d)
    check_new_run_dir(d, overwrite=True)  # accepted, nothing removed yet
    assert (d / "results.jsonl").exists()
    run = RunDir.create(d, {"manifest_version": MANIFEST_VERSION}, overwrite=True)
    assert not (d / "results.jsonl").exists() and (d / "notes.txt").read_text() == "mine"  # only run files go
    run.close()
    with pytest.raises(ValueError, match="is a file"):
        check_new_run_dir(d / "notes.txt")


def _policies():
    return ["weekday_empirical", "perfect_demand"]


def test_records_are_appended_per_episode_and_a_torn_tail_is_cut_on_resume(tmp_path):
    run = RunDir.create(tmp_path / "run", {"manifest_version": MANIFEST_VERSION})
    full = evaluate(_policies(), split="test", domains=["cycle_hire"], limit=CASES, progress=False, run=run)
    lines = (run.records_path).read_text().splitlines()
    assert len(lines) == len(full) == 2 * CASES  # appended as they finished, before any finalize
    assert sorted(json.loads(x)["episode_id"] for x in lines) == sorted(r["episode_id"] for r in full)
    assert full[0]["episode_id"] == episode_id(1, "weekday_empirical", full[0]["case_id"])
    expected = [(r["policy"], r["case_id"]) for r in full]
    run.close()
    # the session is killed (no finalize: the manifest says running): one whole record gone, half of another written
    text = run.records_path.read_text().splitlines(keepends=True)
    run.records_path.write_text("".join(text[:3]) + text[3][:25])
    assert read_manifest(run.path)["status"] == "running"
    again = RunDir.resume(run.path)
    assert again.session == 2 and len(again.previous) == 3 and again.manifest["status"] == "running"
    assert again.torn == [TornTail(run.records_path, 25)] and "dropped a torn last line of 25 bytes" in str(again.torn[0])
    assert run.records_path.read_text() == "".join(text[:3])
    done = again.done_keys()
    assert done == {(json.loads(x)["policy"], json.loads(x)["case_id"]) for x in text[:3]}
    rest = evaluate(_policies(), split="test", domains=["cycle_hire"], limit=CASES, progress=False, run=again)
    counts = again.finalize(expected)
    assert counts == {"expected": 6, "recorded": 6, "missing": 0, "by_status": {"submitted": 6}, "harness_error": 0,
                      "agent_error": 0, "scored": 6}
    from fwgym.evaluation.records import stable_record

    strip = [{k: v for k, v in stable_record(r).items() if k != "episode_id"} for r in full]
    assert [{k: v for k, v in stable_record(r).items() if k != "episode_id"} for r in rest] == strip
    # 6 started in session 1, 3 recorded there, 3 more started and recorded in session 2: 3 lost in flight
    assert again.manifest["history"]["lost_in_flight"] == 3 and again.manifest["history"]["sessions"] == 2
    with pytest.raises(ValueError, match="being written by another fwgym evaluate session"):
        RunDir.resume(run.path)
    again.close()


class _Flaky:
    """hour-of-day plan and submit; raises HarnessError on the cases in FAIL."""

    FAIL: set = set()
    name = "flaky"

    def reset(self, info):
        self.case, self.k = info["case_id"], 0

    def act(self, obs):
        if self.case in _Flaky.FAIL:
            raise HarnessError("HTTP 503 after 3 retries", kind="http_5xx")
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}


def test_harness_errors_are_rerun_by_a_resume_and_superseded_records_kept(tmp_path):
    ids = [c for c in (r["case_id"] for r in evaluate(["weekday_empirical"], split="test", domains=["cycle_hire"],
                                                      limit=CASES, progress=False))]
    _Flaky.FAIL = {ids[1]}
    run = RunDir.create(tmp_path / "run", {"manifest_version": MANIFEST_VERSION})
    kw = dict(split="test", domains=["cycle_hire"], limit=CASES, progress=False, concurrency=2)
    recs = evaluate([_Flaky, "weekday_empirical"], run=run, **kw)
    expected = [(p, c) for p in ("flaky", "weekday_empirical") for c in ids]
    counts = run.finalize(expected)
    run.close()
    assert counts["harness_error"] == 1 and counts["scored"] == 5 and run.manifest["status"] == "incomplete"
    bad = [r for r in recs if r["status"] == "harness_error"]
    assert [(r["case_id"], r["harness_kind"], r["S"]) for r in bad] == [(ids[1], "http_5xx", None)]
    _Flaky.FAIL = set()
    again = RunDir.resume(run.path)
    assert len(again.done_keys()) == 5
    played = []
    evaluate([_Flaky, "weekday_empirical"], run=again, progress=played.append,
             **{k: v for k, v in kw.items() if k != "progress"})
    assert sum(played) == 1  # only the harness_error episode is played again
    counts = again.finalize(expected)
    again.close()
    assert counts["harness_error"] == 0 and again.manifest["status"] == "complete"
    final = [json.loads(x) for x in again.records_path.read_text().splitlines()]
    assert [(r["policy"], r["case_id"]) for r in final] == expected  # one per pair, in run order
    (old,) = [json.loads(x) for x in (run.path / "superseded.jsonl").read_text().splitlines()]
    assert old["status"] == "harness_error" and old["episode_id"] == episode_id(1, "flaky", ids[1])
    redo = next(r for r in final if r["policy"] == "flaky" and r["case_id"] == ids[1])
    assert redo["valid"] and redo["episode_id"] == episode_id(2, "flaky", ids[1])
    assert again.manifest["records"]["superseded"] == 1
