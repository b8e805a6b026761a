"""The environment of an isolated agent's worker (fwgym.agents.isolation.worker_environ, WORKER_ENV): an explicit
allow-list of what a Python process needs; API keys, tokens, passwords and every other variable stay in the
evaluating process unless named on purpose (``worker_env=`` / ``--agent-env NAME``)."""
import json
import os
import re

import pytest

from fwgym.agents.isolation import (WORKER_ENV, WORKER_ENV_PREFIXES, IsolatedAgent, IsolatedAgentFactory, RemoteObject,
                                    worker_environ)
from fwgym.cli import main

SECRETS = {"OPENAI_API_KEY": "sk-live", "HF_TOKEN": "hf_live", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s",
           "ANTHROPIC_API_KEY": "k", "GITHUB_TOKEN": "ghp", "PGPASSWORD": "pw", "DATABASE_URL": "postgres://u:pw@h/db",
           "OPENAI_BASE_URL": "https://internal", "MY_AGENT_SETTING": "plain"}
NEEDED = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "LC_CTYPE": "C.UTF-8",
          "TMPDIR": "/tmp/u", "PYTHONPATH": "/src", "VIRTUAL_ENV": "/venv", "OMP_NUM_THREADS": "2",
          "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/hf"}

AGENT = '''import os


class EnvProbe:
    name = "env_probe"

    def __init__(self, report=None):
        self.report = report

    def act(self, obs):
        if self.report:
            with open(self.report, "w") as f:
                f.write(__import__("json").dumps(dict(os.environ)))
        return {"tool": "abstain", "args": {"reason": "probed"}}

    def environ(self):
        import numpy  # the agent's dependencies still import

        return {"env": dict(os.environ), "numpy": numpy.__version__}


def make(report=None):
    return EnvProbe(report)
'''


def test_the_allow_list_is_what_a_python_process_needs_and_nothing_secret():
    assert {"PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS"} <= set(WORKER_ENV)
    assert WORKER_ENV_PREFIXES == ("LC_",) and len(set(WORKER_ENV)) == len(WORKER_ENV)
    looks_secret = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|OPENAI|AWS|URL", re.IGNORECASE)
    assert not [n for n in WORKER_ENV if looks_secret.search(n)]


def test_worker_environ_keeps_only_the_allow_list():
    environ = {**SECRETS, **NEEDED}
    assert worker_environ(environ) == NEEDED
    assert worker_environ(environ, extra=["MY_AGENT_SETTING", "OPENAI_API_KEY"]) == {
        **NEEDED, "MY_AGENT_SETTING": "plain", "OPENAI_API_KEY": "sk-live"}  # named on purpose
    with pytest.raises(ValueError, match=r"not set in this environment"):
        worker_environ(environ, extra=["NOT_SET_HERE"])
    for bad in ("MY_AGENT_SETTING", ["A=B"], ["1X"], [""], [3]):
        with pytest.raises(ValueError, match="worker_env"):
            worker_environ(environ, extra=bad)


@pytest.fixture
def agent_dir(tmp_path, monkeypatch):
    """``./my_agent.py:make`` in the working directory, and an evaluator environment holding secrets."""
    (tmp_path / "my_agent.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path


def test_a_worker_sees_no_secret_of_the_evaluator(agent_dir):
    remote = RemoteObject("./my_agent.py:make")
    try:
        got = remote.call("environ")
    finally:
        remote.close()
    env = got["env"]
    assert not set(SECRETS) & set(env), sorted(set(SECRETS) & set(env))
    # fwgym sets the sandbox's private temporary directory (TMPDIR, TMP, TEMP) and numba's cache in it
    assert set(env) <= set(WORKER_ENV) | {k for k in env if k.startswith("LC_")} | {"NUMBA_CACHE_DIR"}, sorted(env)
    assert env["PATH"] == os.environ["PATH"] and env["OMP_NUM_THREADS"] == "1"
    assert env.get("PYTHONPATH") == os.environ.get("PYTHONPATH") and got["numpy"]  # imports still work


def test_variables_named_on_purpose_reach_the_worker(agent_dir):
    plain = RemoteObject("./my_agent.py:make")
    assert "MY_AGENT_SETTING" not in plain.call("environ")["env"]
    pid = plain.pid
    plain.release()  # back to the pool
    named = RemoteObject("./my_agent.py:make", worker_env=["MY_AGENT_SETTING"])
    env = named.call("environ")["env"]
    assert env["MY_AGENT_SETTING"] == "plain" and "OPENAI_API_KEY" not in env
    assert named.pid != pid  # a pooled worker is never reused with another environment
    named.close()
    again = RemoteObject("./my_agent.py:make")
    assert again.pid == pid  # ... but is with the same one
    again.close()
    with pytest.raises(ValueError, match="not set"):
        IsolatedAgent("./my_agent.py:make", worker_env=["NOT_SET_HERE"])
    factory = IsolatedAgentFactory("./my_agent.py:make", worker_env=["MY_AGENT_SETTING"])
    assert factory["worker_env"] == ["MY_AGENT_SETTING"] and "plain" not in json.dumps(factory)  # names, never values
    assert "worker_env" not in IsolatedAgentFactory("./my_agent.py:make")  # unchanged description without it


def test_cli_agent_env(agent_dir, capsys):
    common = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress"]
    (agent_dir / "reports").mkdir()
    report = agent_dir / "reports" / "env.json"
    kwargs = json.dumps({"report": str(report)})
    common += ["--agent-write", str(agent_dir / "reports")]  # the probe writes its report there
    assert main([*common, "--agent", "./my_agent.py:make", "--agent-kwargs", kwargs, "--out", str(agent_dir / "a")]) == 0
    env = json.loads(report.read_text())
    assert not set(SECRETS) & set(env)
    assert main([*common, "--agent", "./my_agent.py:make", "--agent-kwargs", kwargs, "--agent-env", "MY_AGENT_SETTING",
                 "--agent-env", "HF_TOKEN", "--out", str(agent_dir / "b")]) == 0
    env = json.loads(report.read_text())
    assert env["MY_AGENT_SETTING"] == "plain" and env["HF_TOKEN"] == "hf_live" and "OPENAI_API_KEY" not in env
    manifest = (agent_dir / "b" / "manifest.json").read_text()
    assert "MY_AGENT_SETTING" in manifest and "hf_live" not in manifest  # the names are recorded, not the values
    capsys.readouterr()
    assert main([*common, "--agent", "./my_agent.py:make", "--agent-env", "NOT_SET_HERE", "--out",
                 str(agent_dir / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fwgym: error: --agent-env:") and "NOT_SET_HERE" in err[0], err
    assert not (agent_dir / "c").exists()
