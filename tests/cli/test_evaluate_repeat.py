"""``fwgym evaluate --repeat K`` (K seeded repeats of an LLM agent, one session each, rows <agent>#k) and
``--label KEY=VALUE`` (recorded in the manifest, shown in leaderboards); ``fwgym compare RUN`` of a repeat run
reports the repeats' stability."""
import json

import pytest

from fwgym.cli import main
from fwgym.testing.chat_server import ScriptedChatServer, plan_then_answer

BASE = ["evaluate", "--split", "test", "--limit", "2", "--no-progress"]


def _out(capsys, argv, code=0):
    capsys.readouterr()
    assert main(argv) == code
    return capsys.readouterr()


def test_repeats_are_seeded_sessions_and_compare_reads_them(tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedChatServer(respond=plan_then_answer("weekday_empirical")) as srv:
        _out(capsys, BASE + ["--agent", "openai", "--base-url", srv.url, "--model", "test-model", "--timeout", "5",
                             "--max-retries", "0", "--llm-seed", "10", "--repeat", "3", "--label", "thinking=off",
                             "--label", "prompt=v3", "--policies", "hour_of_day_empirical", "weekday_empirical",
                             "--out", str(out)])
        seeds = [r["body"].get("seed") for r in srv.posts() if "tools" in r["body"]]
    m = json.loads((out / "manifest.json").read_text())
    names = ["openai:test-model#1", "openai:test-model#2", "openai:test-model#3"]
    assert m["settings"]["policies"] == names + ["hour_of_day_empirical", "weekday_empirical"]
    assert [m["settings"]["agents"][n]["seed"] for n in names] == [10, 11, 12] and sorted(set(seeds)) == [10, 11, 12]
    assert m["settings"]["labels"] == {"thinking": "off", "prompt": "v3"} and m["settings"]["repeat"] == 3
    assert [(s["session"], s.get("repeat"), s["episodes"]) for s in m["sessions"]] == [(1, 1, 12), (2, 2, 4), (3, 3, 4)]
    assert m["status"] == "complete" and m["counts"]["recorded"] == 20
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["episode_id"].split(":")[0] for r in recs if r["policy"] == names[1]} == {"2"}
    md = (out / "leaderboard.md").read_text()
    assert "labels: prompt=v3, thinking=off" in md.splitlines()[0]
    board = _out(capsys, ["leaderboard", str(out), "--n-boot", "50"]).out
    assert "labels: prompt=v3, thinking=off" in board.splitlines()[0] and "openai:test-model#3" in board
    doc = json.loads(_out(capsys, ["compare", str(out), "--n-boot", "50", "--format", "json"]).out)
    assert [v["label"] for v in doc["views"]] == ["repeat 1 vs repeat 2", "repeat 1 vs repeat 3"]
    st = doc["views"][0]["stability"]
    assert st["reference"] == "hour_of_day_empirical" and st["kendall_tau_b"] == pytest.approx(1.0)
    assert st["same_first"] and not any(r.get("sign_changed") for r in st["rows"])  # a scripted agent: the same plans
    assert doc["views"][0]["pairs"] == [["openai:test-model", "openai:test-model"]]  # the repeated agent only
    row = doc["views"][0]["rows"][0]
    assert (row["policy_a"], row["subset"], row["group"], row["dS"]) == ("openai:test-model", "common cases", "all", 0.0)
    text = _out(capsys, ["compare", str(out), "--n-boot", "50", "--format", "markdown"]).out
    assert "run-to-run stability on 4 common cases: Kendall tau-b of the rankings 1.000; first the same" in text
    assert "that change sign: none" in text
    # fwgym report RUN reads RUN/traces.jsonl by default: the agent's episode pages show its transcript
    site = tmp_path / "site"
    got = _out(capsys, ["report", str(out), "-o", str(site), "--episodes", "1", "--no-replay", "--n-boot", "50",
                        "--no-progress"])
    assert f"traces: {out / 'traces.jsonl'}" in got.out
    page = next((site / "episodes").glob("openai-test-model-2*/*.html")).read_text()
    assert 'class="transcript"' in page and "was not recorded" not in page


def test_label_and_repeat_refusals(tmp_path, capsys):
    with pytest.raises(SystemExit):  # a usage error
        main(BASE + ["--label", "no-equals-sign", "--out", str(tmp_path / "a")])
    assert "expected KEY=VALUE" in capsys.readouterr().err
    err = _out(capsys, BASE + ["--label", "k=1", "--label", "k=2", "--policies", "weekday_empirical", "--out",
                               str(tmp_path / "b")], 2).err
    assert "--label k is given twice" in err
    err = _out(capsys, BASE + ["--repeat", "2", "--policies", "weekday_empirical", "--out", str(tmp_path / "c")], 2).err
    assert "--repeat repeats an agent" in err
    run = tmp_path / "d"
    _out(capsys, BASE + ["--label", "thinking=on", "--policies", "weekday_empirical", "--out", str(run)])
    err = _out(capsys, ["evaluate", "--resume", str(run), "--label", "thinking=off"], 2).err
    assert "--label: the run has" in err  # a label is a setting of the run
