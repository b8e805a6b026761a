"""inspect-ai tasks fwgym/decision, fwgym/context, fwgym/forecast (fwgym.integrations.inspect): registered through
inspect's entry point, played with fwgym's chat harness on the one episode loop, scored with fwgym's S and
aggregated with fwgym's weights and cluster bootstrap; the offline model fwgym/scripted and the openai-api provider
against the scripted chat server give the S of env.step; inspect's errors stay inspect's; logs import back into
fwgym run directories that fwgym leaderboard ranks."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402

from fwgym.agents import run_episode  # noqa: E402
from fwgym.baselines import make_policy  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import load_results  # noqa: E402
from fwgym.evaluation.manifest import read_manifest  # noqa: E402
from fwgym.evaluation.runner import select_cases  # noqa: E402
from fwgym.integrations.inspect.logs import read_log  # noqa: E402
from fwgym.integrations.inspect.scorer import METRIC_NAMES, aggregate_records, sample_score  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, Step, plan_then_answer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
SPLIT = "dev"


def _registered() -> bool:
    """fwgym is installed (the entry point that registers fwgym/decision and fwgym/scripted exists)."""
    from importlib.metadata import entry_points

    return any(ep.value == "fwgym.integrations.inspect" for ep in entry_points(group="inspect_ai"))


pytestmark = pytest.mark.skipif(not _registered(), reason="fwgym is not installed (pip install -e .): no entry point")


def _weekday_S(case_ids, suite_kwargs=None):
    """S of the weekday_empirical plan through env.step (run_episode), per case."""
    out = {}
    for cid in case_ids:
        env = FWBenchEnv(cid.split("-")[0] == "elec" and "electricity" or "cycle_hire", split=SPLIT, case_ids=[cid],
                         **(suite_kwargs or {}))
        out[cid] = run_episode(env, make_policy("weekday_empirical"), options={"case_id": cid}).record["S"]
    return out


def _eval(tmp_path, task="fwgym/decision", model="fwgym/scripted", **kw):
    logs = inspect_eval(task, model=model, task_args={"split": SPLIT, **kw.pop("task_args", {})},
                        log_dir=str(tmp_path / "logs"), display="none", **kw)
    assert len(logs) == 1
    return logs[0]


def _served(srv):
    """inspect's openai-api provider pointed at ``srv``: a fresh model, never inspect's memoized one (a model
    cached by an earlier test would keep the address of that test's closed server and retry it forever), with
    bounded retries and timeout so a broken server fails the test instead of hanging it."""
    from inspect_ai.model import GenerateConfig, get_model

    return get_model("openai-api/fws/test-model", base_url=srv.url, api_key="x", memoize=False,
                     config=GenerateConfig(max_retries=1, timeout=60))


def _sample_S(log):
    return {s.id: sample_score(s).value for s in log.samples if s.scores}


def test_the_cli_resolves_the_task_and_the_model_through_the_entry_points(tmp_path):
    """`inspect eval fwgym/decision --model fwgym/scripted --limit 2` needs no path and no download."""
    proc = subprocess.run(["inspect", "eval", "fwgym/decision", "--model", "fwgym/scripted", "--limit", "2",
                           "-T", f"split={SPLIT}", "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                          env={**ENV, "PYTHONPATH": ""}, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (log_file,) = list((tmp_path / "logs").glob("*.eval"))
    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.eval.task == "fwgym/decision" and log.eval.model == "fwgym/scripted"
    got = _sample_S(log)
    assert len(got) == 2 and got == pytest.approx(_weekday_S(list(got)), abs=0)  # the S of env.step, exactly


def test_samples_are_cases_and_the_metrics_are_fwgyms_aggregate(tmp_path):
    log = _eval(tmp_path, task_args={"limit": 3, "domain": "electricity,cycle_hire"})
    ids = sorted(s.id for s in log.samples)  # the log keeps samples in the order they finished
    assert ids == sorted(c for _, c in select_cases(SPLIT, ["electricity", "cycle_hire"], None, 3)) and len(ids) == 6
    s0 = log.samples[0]
    assert s0.metadata["cohort"] and s0.metadata["series_id"] and s0.metadata["split"] == SPLIT
    meta = sample_score(s0).metadata
    assert {"R", "loss", "credits", "valid", "status", "record"} <= set(meta) and meta["valid"] is True
    assert meta["record"]["policy"] == "inspect:fwgym/scripted" and meta["record"]["calls"] == 1
    assert s0.output.usage.input_tokens > 0  # counted without a tokenizer download
    records = [sample_score(s).metadata["record"] for s in log.samples]
    metrics = {k.split("/")[-1]: v.value for k, v in log.results.scores[0].metrics.items()}
    want = aggregate_records(records)
    assert set(metrics) == set(METRIC_NAMES) and metrics == {k: pytest.approx(v, rel=1e-12) for k, v in want.items()}
    assert want["S_lo"] < want["S"] < want["S_hi"]  # 6 cases, several series: a real interval
    # the aggregate equals fwgym leaderboard on the same submissions (imported, re-scored)
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "fwgym", "import-inspect", log.location, "--out", str(out)], env=ENV,
                   cwd=str(ROOT), check=True, capture_output=True)
    board = subprocess.run([sys.executable, "-m", "fwgym", "leaderboard", str(out), "--format", "json"], env=ENV,
                           cwd=str(ROOT), check=True, capture_output=True, text=True).stdout
    (row,) = json.loads(board)["rows"]
    assert row["S"] == pytest.approx(metrics["S"], rel=1e-12) and row["policy"] == "inspect:fwgym/scripted"
    m = read_manifest(out)
    assert m["origin"]["kind"] == "inspect" and m["origin"]["model"] == "fwgym/scripted" and m["status"] == "complete"


def test_the_live_display_shows_each_metric_under_its_own_name(tmp_path, monkeypatch):
    """What inspect's progress line shows while the task runs (issue 28.4: "R labelled as S"): the metric it leads
    with is S, and every live metric's value is fwgym's aggregate of that name over the samples finished so far
    (some subset of the log's samples), S = R / 2 here (no credits spent), never R."""
    import itertools
    import math

    from fwgym.evaluation.leaderboard import leaderboard
    import inspect_ai._eval.task.run as task_run
    from inspect_ai._display.core.results import task_metric

    shown = []
    make = task_run.update_metrics_display_fn

    def recording(update_fn, **kw):
        """inspect's live-metrics hook with every update recorded as a display gets it (and as its progress line
        renders it), computed at every sample (inspect: at most every 0.9 s) whatever the display."""
        def update(metrics):
            shown.append(([(m.name, m.value) for m in metrics], task_metric(metrics)))
            update_fn(metrics)
        return make(update, **{**kw, "min_interval": 0.0, "display_metrics": True})

    monkeypatch.setattr(task_run, "update_metrics_display_fn", recording)
    logs = inspect_eval("fwgym/decision", model="fwgym/scripted", task_args={"split": SPLIT, "limit": 4,
                        "domain": "electricity,cycle_hire"}, log_dir=str(tmp_path / "logs"), display="none")
    records = [sample_score(s).metadata["record"] for s in logs[0].samples]
    live = [(dict(m), line) for m, line in shown if m and m[0][1] is not None and not math.isnan(m[0][1])]
    # at least one update with values (the first, before a sample finished, is n/a; how many more inspect sends
    # depends on its scheduling: under load a single one after all samples was seen)
    assert len(live) >= 1, shown
    subsets = [c for k in range(1, len(records) + 1) for c in itertools.combinations(records, k)]
    for values, line in live:
        assert list(values) == list(METRIC_NAMES) and line == f"S: {values['S']:.2f}"
        assert values["S"] == pytest.approx(values["R"] / 2, rel=1e-12) and values["credits"] == 0
        same_s = [c for c in subsets if leaderboard(list(c))[0]["S"] == pytest.approx(values["S"], rel=1e-12)]
        assert any(all(values[n] == pytest.approx(v, rel=1e-12) for n, v in aggregate_records(list(c)).items())
                   for c in same_s), values
    final = {k.split("/")[-1]: v.value for k, v in logs[0].results.scores[0].metrics.items()}
    assert final == {k: pytest.approx(v, rel=1e-12) for k, v in aggregate_records(records).items()}


def test_the_openai_api_provider_against_the_scripted_chat_server(tmp_path):
    """The provider that hung: the server's scripted model now only calls tools the request offers and stops
    after a call that returned no plan; through fwgym's tasks it plays the weekday_empirical plan."""
    with ScriptedChatServer(respond=plan_then_answer("weekday_empirical")) as srv:
        log = _eval(tmp_path, model=_served(srv), limit=2)
        posts = srv.posts()
    assert log.status == "success" and len(posts) == 4  # per case: classical_plan, then the answer
    assert posts[0]["body"]["tools"] and {t["function"]["name"] for t in posts[0]["body"]["tools"]} >= {"submit"}
    got = _sample_S(log)
    assert got == pytest.approx(_weekday_S(list(got)), abs=0)


def test_model_errors_stay_inspects_and_import_as_unscored(tmp_path):
    def respond(body):
        return Step({"error": {"message": "model is broken", "type": "invalid_request_error"}}, status=400)

    with ScriptedChatServer(respond=respond) as srv:
        log = _eval(tmp_path, model=_served(srv), limit=1, fail_on_error=False)
    (s,) = log.samples
    assert s.error is not None and not s.scores  # inspect's error, never a score
    imported = read_log(log.location)
    (rec,) = imported.records
    assert rec["status"] == "harness_error" and rec["S"] is None and rec["scored"] is False and imported.errored == 1
    proc = subprocess.run([sys.executable, "-m", "fwgym", "import-inspect", log.location, "--out", str(tmp_path / "r")],
                          env=ENV, cwd=str(ROOT), capture_output=True, text=True)
    assert proc.returncode == 1 and read_manifest(tmp_path / "r")["status"] == "incomplete"


def test_inspects_limits_end_the_episode_as_the_models_failure(tmp_path):
    log = _eval(tmp_path, limit=1, message_limit=3)  # the second turn would need a 4th message
    rec = sample_score(log.samples[0]).metadata["record"]
    assert rec["status"] == "abstained" and rec["valid"] is False and rec["reason"].startswith("context_exhausted")
    assert "message" in rec["reason"] and rec["S"] is not None  # scored invalid, as a full context window


def test_an_edited_log_is_refused_on_import(tmp_path):
    log = _eval(tmp_path, limit=1)
    sc = sample_score(log.samples[0])
    sc.metadata["record"]["S"] = 0.0  # a better score than the submission earns
    edited = tmp_path / "edited.eval"
    write_eval_log(log, str(edited))
    with pytest.raises(ValueError, match="stored S = 0.0 but the submission scores"):
        read_log(edited)
    log2 = _eval(tmp_path, limit=1)
    sample_score(log2.samples[0]).metadata["record"]["levels"] = [1.0] * 7 + [2.0]  # breaks the ramp
    write_eval_log(log2, str(tmp_path / "e2.eval"))
    with pytest.raises(ValueError, match="not a valid plan"):
        read_log(tmp_path / "e2.eval")


def test_a_file_that_is_not_an_inspect_log_is_refused_by_name(tmp_path, capsys):
    from fwgym.cli import main

    for name, data in (("notes.txt", b"hello"), ("other.json", b'{"a": 1}'), ("broken.eval", b"PK\x03\x04junk"),
                       ("bytes.json", b"\xff\xfe")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError, match=f"^{path} is not an inspect-ai log \\(expected the .eval or .json log"):
            read_log(path)
        capsys.readouterr()
        assert main(["import-inspect", str(path), "--out", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"fwgym: error: {path} is not an inspect-ai log") and "fwgym/decision" in err, err
    assert not (tmp_path / "run").exists()


def test_imported_rows_join_the_leaderboard_next_to_the_baselines(tmp_path):
    log = _eval(tmp_path, limit=2)
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "fwgym", "evaluate", "--policies", "weekday_empirical", "hour_of_day_empirical",
                    "--split", SPLIT, "--limit", "2", "--no-progress", "--out", str(base)], env=ENV, cwd=str(ROOT),
                   check=True, capture_output=True)
    out = tmp_path / "inspect-run"
    subprocess.run([sys.executable, "-m", "fwgym", "import-inspect", log.location, "--out", str(out),
                    "--policy-name", "scripted-via-inspect"], env=ENV, cwd=str(ROOT), check=True, capture_output=True)
    rs = load_results([base, out], common_cases=True)
    rows = {r["policy"] for r in rs.records}
    assert rows == {"weekday_empirical", "hour_of_day_empirical", "scripted-via-inspect"}
    by = {(r["policy"], r["case_id"]): r["S"] for r in rs.records}
    for cid in {c for _, c in by}:
        if ("scripted-via-inspect", cid) in by:
            assert by[("scripted-via-inspect", cid)] == by[("weekday_empirical", cid)]


def test_the_scripted_model_plays_the_forecast_task(tmp_path):
    log = _eval(tmp_path, task="fwgym/forecast", limit=1)
    got = _sample_S(log)
    kw = {"scenarios": True, "task": "forecast"}
    for cid, s in got.items():
        env = FWBenchEnv(cid.split("-")[0] == "elec" and "electricity" or "cycle_hire", split=SPLIT, case_ids=[cid], **kw)
        want = run_episode(env, make_policy("seasonal_empirical_quantiles"), options={"case_id": cid}).record["S"]
        assert s == want and sample_score(log.samples[0]).metadata["valid"] is True


def test_a_stored_record_that_contradicts_the_transcript_is_refused(tmp_path):
    """The trial's forgery: each sample's stored record replaced by perfect_demand's (true score, no tool calls) while
    the transcript still shows the model calling classical_plan; it imported and re-scored to S 0, before."""
    log = _eval(tmp_path, limit=1)
    s = log.samples[0]
    rec = sample_score(s).metadata["record"]
    env = FWBenchEnv("electricity" if rec["case_id"].startswith("elec") else "cycle_hire", split=SPLIT,
                     case_ids=[rec["case_id"]])
    from fwgym.baselines.oracles import oracle_grant

    oracle = make_policy("perfect_demand")
    perfect = run_episode(env, oracle, options={"case_id": rec["case_id"]}, hindsight=oracle_grant(oracle)).record
    rec.update({k: perfect[k] for k in ("levels", "loss", "floor", "R", "S", "credits", "calls", "tool_counts",
                                        "tool_calls", "budget_left")})
    write_eval_log(log, str(tmp_path / "forged.eval"))
    with pytest.raises(ValueError, match=r"stored record's tool calls \[\] are not the transcript's \['classical_plan'\]"):
        read_log(tmp_path / "forged.eval")
    read_log(_eval(tmp_path, limit=1).location)  # the untouched log imports
