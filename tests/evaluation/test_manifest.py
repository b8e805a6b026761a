"""The code fingerprint of a run's sessions (fwgym.evaluation.manifest): package_sha256, git_info's diff hash,
code_changed (what ``fwgym evaluate --resume`` compares and the MIXED CODE mark counts)."""
from __future__ import annotations

import subprocess

from fwgym.evaluation.manifest import code_changed, environment, git_info, package_sha256


def test_the_package_fingerprint_follows_every_file_but_the_caches(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "t.html").write_text("<p>\n")
    base = package_sha256.__wrapped__(str(pkg))
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert package_sha256.__wrapped__(str(pkg)) == base  # bytecode and numba caches are not code
    (pkg / "sub" / "t.html").write_text("<p>!\n")
    edited = package_sha256.__wrapped__(str(pkg))
    assert edited != base and len(edited) == 64
    (pkg / "sub" / "t.html").rename(pkg / "t.html")  # a moved file is another package
    assert package_sha256.__wrapped__(str(pkg)) not in (base, edited)
    assert environment()["code_sha256"] == package_sha256()


def test_git_info_tells_two_dirty_checkouts_of_one_commit_apart(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "m.py").write_text("a = 1\n")
    git("add", "m.py")
    git("commit", "-q", "-m", "one")
    clean = git_info.__wrapped__(str(tmp_path))
    assert clean is not None and clean["dirty"] is False and clean["diff_sha256"] is None
    (tmp_path / "m.py").write_text("a = 2\n")
    one = git_info.__wrapped__(str(tmp_path))
    (tmp_path / "m.py").write_text("a = 3\n")
    two = git_info.__wrapped__(str(tmp_path))
    assert one["commit"] == two["commit"] == clean["commit"] and one["dirty"] and two["dirty"]
    assert len(one["diff_sha256"]) == 64 and one["diff_sha256"] != two["diff_sha256"]
    assert code_changed({"git": one}, {"git": two}) is True and code_changed({"git": one}, {"git": one}) is False


def test_code_changed_compares_the_package_first_then_git_and_says_when_it_cannot_tell():
    c = {"commit": "c" * 40, "dirty": False, "diff_sha256": None}
    assert code_changed({"code_sha256": "a", "git": c}, {"code_sha256": "a", "git": {**c, "commit": "d" * 40}}) is False
    assert code_changed({"code_sha256": "a", "git": c}, {"code_sha256": "b", "git": c}) is True
    # a manifest written before code_sha256: its git state (the trial's case: a clean, then a dirty session)
    assert code_changed({"git": {"commit": "c" * 40, "dirty": False}}, {"code_sha256": "a", "git": c}) is False
    assert code_changed({"git": {"commit": "c" * 40, "dirty": False}}, {"git": {**c, "dirty": True}}) is True
    assert code_changed({"git": {"commit": "c" * 40, "dirty": True}}, {"git": {"commit": "c" * 40, "dirty": True}}) is None
    assert code_changed({"git": None}, {"code_sha256": "a", "git": None}) is None
