"""Every domain's data file is out of an isolated agent's reach, not only fwgym/data: the opt-in pedestrian domain's
packaged Parquet file (inside fwgym's package folder, which a worker may otherwise read whole) and a plug-in
domain's file outside fwgym, even in a folder the agent was allowed to read. The control: without the sandbox the
same probe reads both."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.domains import data_paths, domain_names, get_domain, register_domain, unregister_domain
from fwgym.domains.pedestrian.source import PACKAGED_FILE
from fwgym.isolation import sandbox
from fwgym.isolation.remote import PACKAGE_DIR, RemoteObject, package_data_paths, sandbox_protected

HERE = Path(__file__).resolve().parent
AGENTS = HERE / "attack_agents.py"
ROOT = HERE.parents[1]
PEDESTRIAN = os.path.realpath(PACKAGED_FILE)
needs_landlock = pytest.mark.skipif(sandbox.landlock_abi() < 1,
                                    reason=f"no Landlock here (ABI {sandbox.landlock_abi()}): {sandbox.status()['reason']}")


@pytest.fixture()
def toy(tmp_path):
    """A plug-in domain whose data file lies in a folder the agent is allowed to read."""
    from tests.domains.toy import make_toy_domain, write_toy_data

    folder = tmp_path / "agent_readable"
    folder.mkdir()
    path, digest = write_toy_data(folder)
    (folder / "notes.txt").write_text("readable\n")
    register_domain(make_toy_domain(path, digest))
    yield os.path.realpath(path)
    unregister_domain("toy")


def test_the_protected_paths_name_every_domains_data_file_without_registering_an_opt_in_one():
    code = ("from fwgym.domains import data_paths, domain_names; from fwgym.isolation.remote import "
            "sandbox_protected, package_data_paths; import json; "
            "print(json.dumps([data_paths(), sandbox_protected(), package_data_paths(), domain_names()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    import json

    files, protected, inside, names = json.loads(out.stdout)
    builtin = {os.path.realpath(f.location) for d in ("electricity", "cycle_hire") for f in get_domain(d).files()}
    assert set(files) == builtin | {PEDESTRIAN} and set(files) <= set(protected)
    assert inside == sorted(os.path.relpath(p, os.path.realpath(PACKAGE_DIR)) for p in files)
    assert "domains/pedestrian/akl_pedestrian_counts.parquet" in inside
    assert names == ["electricity", "cycle_hire"]  # listing the files registered no domain


def test_a_registered_plug_in_domains_file_is_protected(toy):
    assert toy in data_paths() and toy in sandbox_protected() and "toy" in domain_names()
    assert toy not in package_data_paths()  # outside the package: protected by its absolute path only


def _probe(mode: str, readable: Path, toy_file: str) -> dict:
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox=mode, read_paths=[readable])
    try:
        return {"pedestrian": remote.call("read", PEDESTRIAN), "toy": remote.call("read", toy_file),
                "beside_toy": remote.call("read", str(readable / "notes.txt")),
                "beside_pedestrian": remote.call("read", os.path.join(os.path.dirname(PEDESTRIAN), "source.py")),
                "imports": remote.call("imports"), "hello": remote.hello}
    finally:
        remote.close()


@needs_landlock
def test_an_isolated_agent_cannot_read_any_domains_data_file(toy):
    got = _probe("auto", Path(toy).parent, toy)
    assert got["hello"]["sandbox"]["applied"]
    for what in ("pedestrian", "toy"):
        assert not got[what]["ok"] and "PermissionError" in got[what]["error"], (what, got[what])
    # carved out one by one: the files beside them stay readable, fwgym's code still imports
    assert got["beside_toy"]["ok"] and got["beside_pedestrian"]["ok"], got
    assert got["imports"]["optimizer"]["ok"], got["imports"]


def test_without_the_sandbox_the_same_probe_reads_them(toy):
    got = _probe("off", Path(toy).parent, toy)
    assert got["hello"]["sandbox"] is None
    assert got["pedestrian"] == {"ok": True, "value": 16} and got["toy"] == {"ok": True, "value": 16}


def test_a_worker_protects_the_domain_files_in_the_fwgym_it_finds(tmp_path):
    """The package-relative paths are joined to every package folder the worker plans for (a worker may find
    another copy of fwgym than the evaluator's)."""
    other = tmp_path / "fwgym"
    (other / "domains" / "pedestrian").mkdir(parents=True)
    got = sandbox.default_protected([str(other)], ["domains/pedestrian/akl_pedestrian_counts.parquet"])
    assert got == [os.path.realpath(other / "data"), os.path.realpath(other / "config"),
                   os.path.realpath(other / "domains" / "pedestrian" / "akl_pedestrian_counts.parquet")]


def test_the_import_guard_denies_the_pedestrian_modules():
    """Hosted code may not import the domain (its data loader) nor its scenario families (fwgym.domains and
    fwgym.context are denied, with everything below them)."""
    from fwgym.isolation.protocol import DENIED_MODULES
    from fwgym.isolation.worker import ImportGuard

    guard = ImportGuard(DENIED_MODULES)
    for name in ("fwgym.domains.pedestrian", "fwgym.domains.pedestrian.source", "fwgym.context.pedestrian"):
        assert guard.refuses(name), name
