"""The code of an agent is part of its run: ``fwgym evaluate`` records the sha256 of the agent's file
(``FILE.py:FACTORY``, the module's source file of ``MODULE:FACTORY``, an SB3 zip) in the agent's
description in the manifest, and ``--resume`` refuses to finish a run whose agent file was edited
(its row would mix two versions of the agent)."""
import hashlib
import json
import sys

import pytest

from fwgym.cli import main

CYCLE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress"]

_AGENT = '''import json


class Agent:
    name = "my_agent"

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
'''


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _error_line(err):
    lines = [x for x in err.splitlines() if x.startswith("fwgym: error:")]
    assert len(lines) == 1 and err.endswith(lines[0] + "\n"), err
    return lines[0]


def _changed(out, path, old, new):
    return (f"fwgym: error: --resume {out}: the agent's file {path} changed since the run started (sha256 {old[:12]} "
            f"-> {new[:12]}); its episodes so far were played by the other version, so the row would mix two versions "
            "of the agent (restore the file, or start a new run)")


@pytest.mark.parametrize("isolation", [[], ["--in-process"]])
def test_resume_refuses_an_edited_agent_file(tmp_path, capsys, isolation):
    path = tmp_path / "agent.py"
    path.write_text(_AGENT)
    out, old = tmp_path / "run", _sha(path)
    assert main(CYCLE + ["--out", str(out), "--agent", f"{path}:Agent", *isolation]) == 0
    agent = json.loads((out / "manifest.json").read_text())["settings"]["agents"]["my_agent"]
    source = agent["source"] if not isolation else agent["keywords"]["source"]
    assert source == {"file": str(path), "sha256": old}
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0  # unchanged: accepted (nothing to play)
    path.write_text(_AGENT.replace("self.k += 1", "self.k += 1  # edited"))
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    assert _error_line(capsys.readouterr().err) == _changed(out, path, old, _sha(path))
    path.write_text(_AGENT)  # restored: the run's own code again
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0


def test_a_module_agent_is_pinned_by_its_source_file_without_importing_it(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "fwgym_pin_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agents.py").write_text(_AGENT)
    monkeypatch.chdir(tmp_path)  # MODULE imports from the working directory, as `python -m` does
    out, old = tmp_path / "run", _sha(pkg / "agents.py")
    assert main(CYCLE + ["--out", str(out), "--agent", "fwgym_pin_test_pkg.agents:Agent"]) == 0
    agent = json.loads((out / "manifest.json").read_text())["settings"]["agents"]["my_agent"]
    assert agent["source"] == {"file": str(pkg / "agents.py"), "sha256": old,  # and its package's __init__
                               "modules": {str(pkg / "__init__.py"): _sha(pkg / "__init__.py")}}
    assert "fwgym_pin_test_pkg" not in sys.modules  # isolated: imported by the worker only
    (pkg / "agents.py").write_text(_AGENT + "\n# edited\n")
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    assert _error_line(capsys.readouterr().err) == _changed(out, pkg / "agents.py", old, _sha(pkg / "agents.py"))


def test_agent_source_finds_files_without_running_package_code(tmp_path, monkeypatch):
    from fwgym.cli.agent_kinds.python import agent_source

    pkg = tmp_path / "fwgym_pin_test_boom"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "agents.py").write_text(_AGENT)
    monkeypatch.chdir(tmp_path)
    assert agent_source("fwgym_pin_test_boom:make") == {"file": str(pkg / "__init__.py"),
                                                       "sha256": _sha(pkg / "__init__.py")}  # a package: __init__
    assert agent_source("fwgym_pin_test_boom.agents:Agent") == {"file": str(pkg / "agents.py"),
                                                               "sha256": _sha(pkg / "agents.py")}
    assert "fwgym_pin_test_boom" not in sys.modules and str(tmp_path) not in sys.path
    assert agent_source("./agents_missing.py:make") is None and agent_source("fwgym_pin_test_nope.x:make") is None
    assert agent_source("sys:exit") is None  # built in: no source file
    assert agent_source(f"{pkg / 'agents.py'}:Agent")["sha256"] == hashlib.sha256(_AGENT.encode()).hexdigest()


def test_an_in_process_agent_is_not_built_from_an_edited_file(tmp_path):
    import functools

    from fwgym.cli.agent_kinds.python import agent_source, make_in_process

    path = tmp_path / "agent.py"
    path.write_text(_AGENT)
    factory = functools.partial(make_in_process, f"{path}:Agent", {}, None, source=agent_source(f"{path}:Agent"))
    assert factory().name == "my_agent"
    old = _sha(path)
    path.write_text(_AGENT + "# edited\n")
    with pytest.raises(ValueError, match=f"the agent's file {path} changed since the run started "
                                         rf"\(sha256 {old[:12]} -> {_sha(path)[:12]}\)"):
        factory()


def test_an_isolated_factory_does_not_start_a_worker_on_an_edited_file(tmp_path):
    """A worker started mid-run (the first one, or a replacement after a crash) must run the code the
    run started with: the factory checks the file's sha256 before it builds an agent."""
    from fwgym.agents.isolation import IsolatedAgentFactory
    from fwgym.cli.agent_kinds.python import agent_source

    path = tmp_path / "agent.py"
    path.write_text(_AGENT)
    factory = IsolatedAgentFactory(f"{path}:Agent", source=agent_source(f"{path}:Agent"))
    agent = factory()
    agent.close()
    old = _sha(path)
    path.write_text(_AGENT + "# edited\n")
    with pytest.raises(ValueError, match=f"the agent's file {path} changed since the run started "
                                         rf"\(sha256 {old[:12]} -> {_sha(path)[:12]}\)"):
        factory()
    path.unlink()
    with pytest.raises(ValueError, match="cannot be read any more"):
        factory()


_HELPED = '''import json

from {helper} import first_call


class Agent:
    name = "my_agent"

    def reset(self, info=None):
        self.k = 0

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return first_call()
        return {{"tool": "submit", "args": {{"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}}}
'''
_HELPER = '''def first_call():
    return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
'''


@pytest.mark.parametrize("isolation", [[], ["--in-process"]])
def test_resume_refuses_an_edit_to_a_module_the_agent_imports_from_its_own_folder(tmp_path, capsys, isolation):
    """Issue 25: the pin covered the agent's file only; an edit to ``helper.py`` beside it (which decides its
    first call) was resumed into the same row."""
    folder = tmp_path / "agent_src"
    folder.mkdir()
    path, helper = folder / "agent.py", folder / "fwgym_pin_helper.py"
    path.write_text(_HELPED.format(helper="fwgym_pin_helper"))
    helper.write_text(_HELPER)
    out, old = tmp_path / "run", _sha(helper)
    assert main(CYCLE + ["--out", str(out), "--agent", f"{path}:Agent", *isolation]) == 0, capsys.readouterr().err
    agent = json.loads((out / "manifest.json").read_text())["settings"]["agents"]["my_agent"]
    source = agent["source"] if not isolation else agent["keywords"]["source"]
    assert source == {"file": str(path), "sha256": _sha(path), "modules": {str(helper): old}}
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0  # unchanged: accepted
    helper.write_text(_HELPER.replace("hour_of_day_empirical", "weekday_empirical"))
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    assert _error_line(capsys.readouterr().err) == _changed(out, helper, old, _sha(helper))
    helper.write_text(_HELPER)
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 0


def test_a_package_agent_pins_the_modules_of_its_package_it_imports(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "fwgym_pin_pkg2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text(_HELPER)
    (pkg / "agents.py").write_text(_HELPED.format(helper="fwgym_pin_pkg2.util"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    assert main(CYCLE + ["--out", str(out), "--agent", "fwgym_pin_pkg2.agents:Agent"]) == 0, capsys.readouterr().err
    source = json.loads((out / "manifest.json").read_text())["settings"]["agents"]["my_agent"]["source"]
    assert source["file"] == str(pkg / "agents.py")
    assert source["modules"] == {str(pkg / "__init__.py"): _sha(pkg / "__init__.py"), str(pkg / "util.py"): _sha(pkg / "util.py")}
    old = _sha(pkg / "util.py")
    (pkg / "util.py").write_text(_HELPER + "# edited\n")
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    assert _error_line(capsys.readouterr().err) == _changed(out, pkg / "util.py", old, _sha(pkg / "util.py"))


def test_no_agent_is_built_mid_run_from_an_edited_module(tmp_path):
    from fwgym.agents.isolation import IsolatedAgentFactory
    from fwgym.cli.agent_kinds.python import agent_source, own_modules

    path, helper = tmp_path / "agent.py", tmp_path / "fwgym_pin_helper3.py"
    path.write_text(_HELPED.format(helper="fwgym_pin_helper3"))
    helper.write_text(_HELPER)
    target = f"{path}:Agent"
    agent = IsolatedAgentFactory(target)()
    modules = own_modules(target, agent.hello["modules"])
    agent.close()
    assert modules == {str(helper): _sha(helper)}  # what the worker loaded from the agent's folder
    factory = IsolatedAgentFactory(target, source={**agent_source(target), "modules": modules})
    factory().close()
    old = _sha(helper)
    helper.write_text(_HELPER + "# edited\n")
    with pytest.raises(ValueError, match=f"the agent's file {helper} changed since the run started "
                                         rf"\(sha256 {old[:12]} -> {_sha(helper)[:12]}\)"):
        factory()
