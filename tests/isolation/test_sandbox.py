"""The worker sandbox (fwgym.isolation.sandbox, issue 25 item 3): its rules carve protected paths out of what
it allows; a sandboxed worker cannot read fwgym's packaged data, the run directory or the evaluator's /proc,
nor signal the evaluator, and writes only in its private TMPDIR; without the sandbox the same probe does all
of that (the control); the evaluator is not dumpable; the worker script runs where fwgym is not importable."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.isolation import process, sandbox
from fwgym.isolation.remote import PACKAGE_DIR, RemoteObject, isolation_status

HERE = Path(__file__).resolve().parent
AGENTS = HERE / "attack_agents.py"
PARQUET = Path(PACKAGE_DIR) / "data" / "tfl_cycle_hire.parquet"
SANDBOXED = sandbox.status()["isolation"] == "sandbox"
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no full Landlock sandbox here: {sandbox.status()['reason']}")
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def test_rules_allow_code_and_the_installation_and_carve_out_protected_paths(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "mod.py").write_text("")
    (src / "notes.txt").write_text("keys")
    (src / "results" / "run").mkdir(parents=True)
    (src / "results" / "old").mkdir()
    (src / "weights").mkdir()
    (src / "weights" / "w.bin").write_bytes(b"0")
    planned = sandbox.plan(sys_path=[str(src)], protected=[str(src / "results" / "run")])
    rules = {r.path: r.rights for r in planned.rules}
    mine = {Path(p).relative_to(tmp_path).as_posix(): r for p, r in rules.items() if p.startswith(str(tmp_path))}
    # a folder on sys.path that is not the installation: its modules and packages, nothing else, and it is not
    # listable (the worker's import system is given the names of its code instead)
    assert mine == {"src/mod.py": sandbox.READ_FILE | sandbox.EXECUTE, "src/pkg": sandbox.READ}
    assert planned.listings == {str(src): ["mod.py", "pkg"]}
    # a folder allowed whole that holds a protected one: allowed entry by entry, the protected one left out
    rules = {r.path: r.rights for r in sandbox.plan(sys_path=[], read=[str(src)], write=[str(tmp_path / "w")],
                                                     protected=[str(src / "results" / "run")]).rules}
    mine = {Path(p).relative_to(tmp_path).as_posix(): r for p, r in rules.items() if p.startswith(str(tmp_path))}
    assert mine == {"src": sandbox.READ_DIR, "src/mod.py": sandbox.READ_FILE | sandbox.EXECUTE,
                    "src/notes.txt": sandbox.READ_FILE | sandbox.EXECUTE, "src/pkg": sandbox.READ,
                    "src/results": sandbox.READ_DIR, "src/results/old": sandbox.READ, "src/weights": sandbox.READ}
    # fwgym's packaged data and config are protected wherever the package is
    rules = {r.path: r.rights for r in sandbox.plan(sys_path=[], package_dirs=[PACKAGE_DIR]).rules}
    assert rules[PACKAGE_DIR] == sandbox.READ_DIR and rules[str(Path(PACKAGE_DIR) / "core")] == sandbox.READ
    assert not [p for p in rules if p.startswith(str(Path(PACKAGE_DIR) / "data")) or
                p.startswith(str(Path(PACKAGE_DIR) / "config"))]
    assert sandbox.READ_FILE & sandbox.READ and not sandbox.WRITE & sandbox.READ


def test_isolation_status_says_what_a_worker_gets():
    st = sandbox.status()
    assert st["isolation"] == ("sandbox" if st["landlock_abi"] >= sandbox.FULL_ABI else "process")
    assert isolation_status("off")["isolation"] == "process" and not isolation_status("off")["apply"]
    custom = isolation_status("auto", ["docker", "run", "img"])
    assert custom["isolation"] == "process" and "custom --agent-worker-command" in custom["reason"]
    with pytest.raises(ValueError, match="sandbox must be one of"):
        isolation_status("strict")
    if SANDBOXED:
        assert isolation_status("require")["apply"] and isolation_status("auto")["isolation"] == "sandbox"
    else:
        with pytest.raises(ValueError, match="cannot be sandboxed here"):
            isolation_status("require")


def _probe(tmp_path, mode):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "results.jsonl").write_text("{}\n")
    (tmp_path / "agent_dir").mkdir(exist_ok=True)
    sandbox.protect(run)  # as fwgym evaluate protects its run directory
    # even when the agent may read and write the folder that holds the run directory, the run stays out of reach
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox=mode, read_paths=[tmp_path / "agent_dir"],
                          write_paths=[tmp_path / "agent_dir"])
    try:
        out = {"parquet": remote.call("read", str(PARQUET)), "run": remote.call("read", str(run / "results.jsonl")),
               "run_listed": remote.call("listdir", str(run)),
               "forge": remote.call("write", str(run / "results.jsonl")),
               "elsewhere": remote.call("write", str(tmp_path / "elsewhere.txt")),
               "allowed": remote.call("write", str(tmp_path / "agent_dir" / "out.txt")),
               "parent": remote.call("parent"), "tmp": remote.call("tmp"), "imports": remote.call("imports"),
               "hello": remote.hello, "tmpdir": remote.tmpdir}
    finally:
        remote.close()
    return out


@needs_sandbox
def test_a_sandboxed_worker_cannot_read_the_answer_nor_touch_the_evaluator(tmp_path):
    got = _probe(tmp_path, "auto")
    assert got["hello"]["sandbox"]["applied"] and got["hello"]["sandbox"]["scoped"]
    assert got["hello"]["sandbox"]["landlock_abi"] >= sandbox.FULL_ABI
    for what in ("parquet", "run", "forge", "elsewhere"):
        assert not got[what]["ok"] and "PermissionError" in got[what]["error"], (what, got[what])
    parent = got["parent"]
    for what in ("environ", "cmdline", "mem"):  # refused even to root: Landlock's ptrace and file rules
        assert not parent[what]["ok"] and "PermissionError" in parent[what]["error"], (what, parent[what])
    assert not parent["signal"]["ok"] and "Operation not permitted" in parent["signal"]["error"]
    assert parent["self"]["ok"]  # its own /proc/self stays readable
    assert got["allowed"]["ok"] and got["tmp"]["write"]["ok"] and got["tmp"]["tmpdir"] == got["tmpdir"]
    assert got["imports"]["numpy"] == {"ok": True, "value": [0.0, 0.0, 0.0]}
    assert got["imports"]["optimizer"]["ok"], got["imports"]  # numba's cache is seeded into its TMPDIR
    assert not Path(got["tmpdir"]).exists()  # removed with the worker
    assert (tmp_path / "run" / "results.jsonl").read_text() == "{}\n"


def test_without_the_sandbox_the_same_probe_reads_the_data_and_signals_the_evaluator(tmp_path):
    """The control: process isolation only (``sandbox="off"``, or a kernel without Landlock)."""
    got = _probe(tmp_path, "off")
    assert got["hello"]["sandbox"] is None and got["tmpdir"] is None
    for what in ("parquet", "run", "forge", "elsewhere", "allowed"):
        assert got[what]["ok"], (what, got[what])
    parent = got["parent"]
    assert parent["cmdline"]["ok"] and parent["signal"]["ok"]
    # PR_SET_DUMPABLE 0 on the evaluator: its environ and memory are refused to its user, except to root
    assert parent["environ"]["ok"] == parent["mem"]["ok"] == ROOT, parent


def test_the_evaluator_makes_itself_non_dumpable_before_a_worker_starts(tmp_path):
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="off")
    remote.close()
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl is Linux's")
    libc = ctypes.CDLL(None)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE: 0


def test_numba_cache_layout_is_numbas_own():
    from numba.core.caching import _CacheLocator

    for path in ("/a/b/c.py", str(Path(PACKAGE_DIR) / "core" / "optimizer.py")):
        assert process.numba_cache_subpath(path) == _CacheLocator.get_suitable_cache_subpath(path)


@needs_sandbox
def test_the_worker_sandboxes_itself_where_fwgym_is_not_installed(tmp_path, monkeypatch):
    """A copy of the worker's folder, run by an interpreter without site-packages (no fwgym, no numpy), still
    applies its sandbox and hosts the agent."""
    copy = tmp_path / "worker"
    copy.mkdir()
    for name in ("worker.py", "protocol.py", "sandbox.py"):
        shutil.copy(Path(process.WORKER_DIR) / name, copy / name)
    (tmp_path / "echo.py").write_text("import importlib.util\n\nclass Echo:\n    def act(self, obs):\n"
                                      "        return {'fwgym': importlib.util.find_spec('fwgym') is not None, "
                                      "'obs': obs}\n")
    monkeypatch.chdir(tmp_path)  # the working directory goes first on the worker's sys.path: not fwgym's checkout
    remote = RemoteObject(f"{tmp_path / 'echo.py'}:Echo", sandbox="require",
                          worker_command=[sys.executable, "-I", "-S", str(copy / "worker.py")])
    try:
        assert remote.hello["sandbox"]["applied"] and remote.call("act", "hello") == {"fwgym": False, "obs": "hello"}
    finally:
        remote.close()


def test_the_worker_script_imports_only_the_standard_library(tmp_path):
    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('w', {process.WORKER_SCRIPT!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in ('fwgym', 'numpy', 'gymnasium'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(out.stdout) == []
