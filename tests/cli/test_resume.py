"""``fwgym evaluate --resume`` finishes a run only with the fwgym code it started with (fwgym.cli.resume).

The trial: a run incomplete after a server fault, fwgym's own code edited, ``--resume``: before, the resume played on
with the edited code and nothing but ``sessions[1].environment.git.dirty`` in the manifest said so (two dirty
sessions on one commit were not even told apart). Now it is refused, and with ``--allow-code-change`` the rows
whose records two code versions played are marked ``MIXED CODE`` in every table and in ``fwgym verify``.
"""
from __future__ import annotations

import json

from fwgym.cli import main
from fwgym.testing.chat_server import ScriptedChatServer, Step, plan_then_answer

BASE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--no-progress"]
AGENT = "openai:test-model"


def _one_fault_then_plans():
    """The scripted model, its first tool request answered with HTTP 500 (one harness_error episode)."""
    answers, n = plan_then_answer("weekday_empirical"), {"k": 0}

    def respond(body):
        if "tools" in body and body.get("max_tokens") != 1:
            n["k"] += 1
            if n["k"] == 1:
                return Step(status=500)
        return answers(body)

    return respond


def _files(out):
    return {p.name: p.read_bytes() for p in out.iterdir() if p.name != ".lock"}


def test_resume_refuses_changed_fwgym_code_unless_allowed_then_marks_the_mixed_rows(tmp_path, capsys, monkeypatch):
    import fwgym.evaluation.manifest as manifest

    out = tmp_path / "run"
    with ScriptedChatServer(respond=_one_fault_then_plans()) as srv:
        args = [*BASE, "--limit", "2", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                "--max-retries", "0", "--timeout", "5", "--policies", "weekday_empirical", "--out", str(out)]
        assert main(args) == 1
        first = json.loads((out / "manifest.json").read_text())["sessions"][0]["environment"]
        assert first["code_sha256"] == manifest.package_sha256() and len(first["code_sha256"]) == 64
        # fwgym's own code is edited (its package fingerprint changes): the resume is refused, the run unchanged
        monkeypatch.setattr(manifest, "package_sha256", lambda root=None: "e" * 64)
        before = _files(out)
        capsys.readouterr()
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"--resume {out}: fwgym's own code changed since the run started (code {first['code_sha256'][:12]}" in err
        assert "-> code eeeeeeeeeeee" in err and "--allow-code-change" in err
        assert _files(out) == before
        # allowed: the run is finished, and the agent's row (one record from each session) is marked
        assert main(["evaluate", "--resume", str(out), "--no-progress", "--allow-code-change"]) == 0
        assert "--allow-code-change: the rows this session plays are marked MIXED CODE" in capsys.readouterr().err
    m = json.loads((out / "manifest.json").read_text())
    assert [s["environment"]["code_sha256"] for s in m["sessions"]] == [first["code_sha256"], "e" * 64]
    assert "allow_code_change" not in m["args"]  # a choice of one session, not a setting of the run
    assert main(["leaderboard", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "**MIXED CODE**" in head.split(":")[0]  # in the title's marks (beside EXPOSED: the replay's target was sent)
    assert f"MIXED CODE: {AGENT!r} 2 code versions: the sessions that played these rows' records" in head
    assert "'weekday_empirical' 2 code versions" not in head  # all its records are the first session's
    assert "run history: 2 session(s) that ran 2 code versions of fwgym (MIXED CODE)" in head
    assert main(["leaderboard", str(out), "--format", "csv"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()]
    col = rows[0].index("code_versions")
    assert {r[0]: r[col] for r in rows[1:]} == {AGENT: "2", "weekday_empirical": "1"}
    assert main(["verify", str(out)]) == 0
    assert f"  MIXED CODE: {AGENT!r} 2 code versions" in capsys.readouterr().out


def test_the_same_code_resumes_without_a_mark_and_allow_code_change_needs_resume(tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedChatServer(respond=_one_fault_then_plans()) as srv:
        args = [*BASE, "--limit", "2", "--agent", "openai", "--base-url", srv.url, "--model", "test-model",
                "--max-retries", "0", "--timeout", "5", "--out", str(out)]
        assert main(args) == 1
        assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "code changed" not in err and "MIXED CODE" not in err
    assert main(["leaderboard", str(out), "--format", "csv"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()]
    assert rows[1][rows[0].index("code_versions")] == "1"
    assert main([*BASE, "--policies", "weekday_empirical", "--limit", "1", "--allow-code-change",
                 "--out", str(tmp_path / "new")]) == 2
    assert "--allow-code-change applies to --resume DIR" in capsys.readouterr().err
