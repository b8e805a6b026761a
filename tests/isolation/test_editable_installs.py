"""Plug-ins installed with ``pip install -e`` (setuptools' editable finder: a ``__editable___*_finder.py`` in
site-packages maps the package to a source folder that is not on ``sys.path``) import in a sandboxed worker: the
mapped source folders are readable, the project folder around them is not, and a copy of fwgym that an editable
finder maps is still protected (its ``data``). A file the sandbox refuses while the agent loads names what a worker
may read and ``--agent-read``.

The plug-in is installed for real, offline: ``pip install --no-deps --no-build-isolation --no-index --prefix VENV
-e SRC`` into a fresh ``venv --without-pip`` (the build backend is this interpreter's setuptools); the worker runs on
that venv's interpreter (``--agent-worker-command`` with ``--agent-sandbox require``)."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from fwgym.isolation import sandbox
from fwgym.isolation.process import WORKER_SCRIPT, WorkerFailure
from fwgym.isolation.remote import PACKAGE_DIR, RemoteObject

HERE = Path(__file__).resolve().parent
needs_sandbox = pytest.mark.skipif(sandbox.status()["isolation"] != "sandbox",
                                   reason=f"no full Landlock sandbox here: {sandbox.status()['reason']}")

PLUGIN = '''
import os

VALUE = 7


class Agent:
    name = "tinyplug"

    def act(self, obs):
        return {"tool": "catalog"}

    def where(self):
        from tinyplug import helpers

        return {"package": os.path.dirname(__file__), "helper": helpers.double(VALUE)}

    def read(self, path):
        try:
            return {"ok": True, "value": len(open(path, "rb").read(16))}
        except OSError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


class ReadsOutside:
    """Opens a file beside the project (not its package) when it is made."""

    def __init__(self, path):
        open(path).read()

    def act(self, obs):
        return {"tool": "catalog"}
'''


def _site_packages(venv: Path) -> Path:
    rel = Path(sysconfig.get_path("purelib", vars={"base": "", "platbase": ""}).lstrip(os.sep))
    return venv / rel


@pytest.fixture(scope="module")
def editable(tmp_path_factory):
    """A venv holding ``tinyplug`` installed editable (pip) and an editable-style finder mapping ``fwgym`` to a copy
    of fwgym's layout (written with setuptools' own finder template)."""
    pytest.importorskip("setuptools")
    from setuptools.command.editable_wheel import _finder_template

    root = tmp_path_factory.mktemp("editable")
    src = root / "project"
    (src / "tinyplug").mkdir(parents=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "tinyplug"\nversion = "0.1"\n'
                                        '[tool.setuptools]\npackages = ["tinyplug"]\n')
    (src / "tinyplug" / "__init__.py").write_text(PLUGIN)
    (src / "tinyplug" / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (src / "secrets.txt").write_text("api key\n")  # beside the package, in the project folder
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--prefix", str(venv), "-e", str(src)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"pip install -e failed here (offline, no build isolation): {out.stderr[-500:]}")
    site = _site_packages(venv)
    finders = sorted(p.name for p in site.glob("__editable___tinyplug*_finder.py"))
    assert finders, sorted(p.name for p in site.iterdir())  # setuptools' editable finder, as pip -e writes it
    copy = root / "fwcopy" / "fwgym"  # another fwgym, mapped by an editable finder (as /work/main's .venv does)
    (copy / "data").mkdir(parents=True)
    (copy / "core").mkdir()
    (copy / "__init__.py").write_text("")
    (copy / "core" / "__init__.py").write_text("")
    (copy / "data" / "eia930_demand.parquet").write_bytes(b"PAR1 the realised targets" * 4)
    name = "__editable___fakefw_0_1_finder"
    (site / f"{name}.py").write_text(_finder_template(name, {"fwgym": str(copy)}, {}))
    (site / "__editable__.fakefw-0.1.pth").write_text(f"import {name}; {name}.install()")
    python = venv / "bin" / "python"
    return {"python": str(python), "src": src, "package": src / "tinyplug", "copy": copy, "finders": finders}


def _remote(editable, target="tinyplug:Agent", mode="require", **kw):
    return RemoteObject(target, sandbox=mode, worker_command=[editable["python"], WORKER_SCRIPT], **kw)


def test_the_finders_mappings_are_what_the_sandbox_reads(editable):
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import sandbox; "
            "print(json.dumps(sandbox.editable_sources()))")
    out = subprocess.run([editable["python"], "-c", code, str(Path(sandbox.__file__).parent)], capture_output=True,
                         text=True, check=True, env={"PATH": os.environ.get("PATH", "")})
    import json

    mapped = json.loads(out.stdout)
    assert mapped["tinyplug"] == [str(editable["package"])] and mapped["fwgym"] == [str(editable["copy"])]
    planned = sandbox.plan(sys_path=[], editable=[str(editable["package"])])
    assert {r.path: r.rights for r in planned.rules}[os.path.realpath(editable["package"])] == sandbox.READ
    assert os.path.realpath(editable["src"]) not in {r.path for r in planned.rules}  # not the project around it
    assert sandbox.fwgym_copies([], {"fwgym": [str(editable["copy"])]}) == [os.path.realpath(editable["copy"])]


@needs_sandbox
def test_an_editable_plugin_imports_in_a_sandboxed_worker(editable):
    remote = _remote(editable)
    try:
        assert remote.hello["name"] == "tinyplug" and remote.hello["sandbox"]["applied"]
        assert remote.call("where") == {"package": str(editable["package"]), "helper": 14}  # a submodule imports too
        assert not remote.call("read", str(editable["src"] / "secrets.txt"))["ok"]  # the project folder: refused
        assert not remote.call("read", str(editable["src"] / "pyproject.toml"))["ok"]
        # the fwgym copy an editable finder maps: its code readable, its data never
        assert remote.call("read", str(editable["copy"] / "core" / "__init__.py"))["ok"]
        got = remote.call("read", str(editable["copy"] / "data" / "eia930_demand.parquet"))
        assert not got["ok"] and "PermissionError" in got["error"], got
        got = remote.call("read", os.path.join(PACKAGE_DIR, "data", "eia930_demand.parquet"))
        assert not got["ok"] and "PermissionError" in got["error"], got
    finally:
        remote.close()
    remote = _remote(editable, mode="off")
    try:  # the control: without the sandbox the same agent reads the project folder and the data
        assert remote.call("read", str(editable["src"] / "secrets.txt"))["ok"]
        assert remote.call("read", str(editable["copy"] / "data" / "eia930_demand.parquet"))["ok"]
    finally:
        remote.close()


@needs_sandbox
def test_a_file_refused_while_the_agent_loads_says_what_a_worker_may_read(editable):
    secret = str(editable["src"] / "secrets.txt")
    with pytest.raises(WorkerFailure) as err:
        _remote(editable, "tinyplug:ReadsOutside", kwargs={"path": secret})
    text = str(err.value)
    assert "PermissionError" in text and f"the sandbox refuses {secret!r}" in text, text
    assert "editable installs (pip install -e)" in text and "--agent-read PATH" in text, text
    remote = _remote(editable, "tinyplug:ReadsOutside", kwargs={"path": secret}, read_paths=[secret])
    try:  # named on purpose: allowed
        assert remote.hello["name"] == "ReadsOutside"
    finally:
        remote.close()


@needs_sandbox
def test_every_fwgym_the_default_worker_could_import_keeps_its_data_protected():
    """This interpreter's own layout (here fwgym is installed editable from /work/main and imported from a worktree
    through PYTHONPATH): every copy's data is refused, its code read."""
    copies = sorted({os.path.realpath(PACKAGE_DIR), *sandbox.fwgym_copies(sys.path, sandbox.editable_sources())})
    remote = RemoteObject(f"{HERE / 'attack_agents.py'}:Probe", sandbox="require")
    try:
        for copy in copies:
            data = os.path.join(copy, "data", "eia930_demand.parquet")
            if os.path.isfile(data):
                assert not remote.call("read", data)["ok"], data
            assert remote.call("read", os.path.join(copy, "core", "optimizer.py"))["ok"], copy
    finally:
        remote.close()
