"""Row marks of fwgym.evaluation.marks that read a run's sessions: code_versions (the MIXED CODE mark)."""
from __future__ import annotations

from fwgym.evaluation.header import trust_marks
from fwgym.evaluation.marks import format_marks, history_line, row_marks, session_code_versions

X, Y = {"code_sha256": "x" * 64}, {"code_sha256": "y" * 64}


def _rec(policy, case, episode_id):
    return {"policy": policy, "case_id": case, "episode_id": episode_id}


def test_code_versions_count_the_sessions_that_played_each_row():
    """fwgym evaluate's records name their session (``<session>:...``): a row played in session 1 only is one
    code version even when a later session ran other code."""
    manifest = {"sessions": [{"session": 1, "environment": X}, {"session": 2, "environment": Y},
                             {"session": 3, "environment": X}],
                "history": {"sessions": 3, "superseded": {}}}
    assert session_code_versions(manifest) == {1: 0, 2: 1, 3: 0}
    recs = [_rec("a", "c1", "1:a:c1"), _rec("a", "c2", "2:a:c2"), _rec("b", "c1", "1:b:c1"), _rec("b", "c2", "3:b:c2")]
    marks = row_marks(manifest, recs)
    assert {p: m["code_versions"] for p, m in marks.items()} == {"a": 2, "b": 1}
    (line,) = [x for x in format_marks(marks) if x.startswith("MIXED CODE")]
    assert line.startswith("MIXED CODE: 'a' 2 code versions: ")
    (mark,) = [m for m in trust_marks(marks) if m.code == "MIXED CODE"]
    assert mark.policies == frozenset({"a"}) and mark.short == "sessions ran 2 code versions"
    assert history_line(manifest) == "run history: 3 session(s) that ran 2 code versions of fwgym (MIXED CODE)"


def test_mcp_sessions_say_their_policies_and_unknown_code_is_not_counted():
    """MCP/inspect records carry no session number: the sessions that added the policy's episodes count (their
    ``policies``); a session without a fingerprint counts as no version; no manifest: 0 (not known)."""
    manifest = {"sessions": [{"session": 1, "environment": X, "policies": ["p"]},
                             {"session": 2, "environment": Y, "policies": ["q"]},
                             {"session": 3, "environment": {"git": None}, "policies": ["p"]}]}
    recs = [_rec("p", "c1", "mcp:p:c1"), _rec("q", "c1", "mcp:q:c1"), _rec("p", "c2", "mcp:p:c2")]
    assert {p: m["code_versions"] for p, m in row_marks(manifest, recs).items()} == {"p": 1, "q": 1}
    assert session_code_versions(manifest) == {1: 0, 2: 1, 3: None}
    assert {p: m["code_versions"] for p, m in row_marks(None, recs).items()} == {"p": 0, "q": 0}
    assert not [x for x in format_marks(row_marks(manifest, recs)) if x.startswith("MIXED CODE")]
