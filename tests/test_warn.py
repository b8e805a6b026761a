"""fwgym.warn: a warning names the user's line, whatever path into fwgym reached it."""
import inspect
import warnings

import gymnasium as gym
import pytest

import fwgym  # noqa: F401 - registers the ids
from fwgym import warn as warn_module
from fwgym.rl import HeldOutSplitWarning
from fwgym.rl import env as env_module
from fwgym.warn import LIBRARY_MODULES, user_stacklevel, warn_user


def _said_at(make) -> list[tuple[str, str, int]]:
    """(category, file, line) of every warning ``make()`` says, and the line of ``make``'s call in this file."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        make().close()
    return [(w.category.__name__, w.filename, w.lineno) for w in said]


def _line_of(fn) -> int:
    """The line of the ``lambda`` that makes the env (its first line)."""
    return inspect.getsourcelines(fn)[1]


@pytest.mark.parametrize("path", ["make_rl_env", "gym.make", "gym.make_vec", "gym.make_vec sync", "sb3 make_vec_env"])
def test_a_held_out_split_is_said_at_the_users_line(path, monkeypatch):
    """Gymnasium's make / make_vec and fwgym's vector env sit between the user and the warning at different depths: each
    warning names the line of this test that made the env (a fixed stacklevel named registration.py or vector.py)."""
    from fwgym.rl import make_rl_env

    monkeypatch.setattr(env_module, "_WARNED_SPLITS", set())
    makers = {
        "make_rl_env": lambda: make_rl_env(split="test", outcome_table=False),
        "gym.make": lambda: gym.make("FWBench-RL-Macro-v0", split="test", outcome_table=False),
        "gym.make_vec": lambda: gym.make_vec("FWBench-RL-Macro-v0", num_envs=2, split="test", outcome_table=False),
        "gym.make_vec sync": lambda: gym.make_vec("FWBench-RL-Macro-v0", num_envs=2, split="test", outcome_table=False,
                                                  vectorization_mode="sync"),
        "sb3 make_vec_env": lambda: pytest.importorskip("stable_baselines3.common.env_util").make_vec_env(
            "FWBench-RL-Macro-v0", n_envs=2, env_kwargs={"split": "test", "outcome_table": False}),
    }
    said = [s for s in _said_at(makers[path]) if s[0] == HeldOutSplitWarning.__name__]
    assert said == [(HeldOutSplitWarning.__name__, __file__, _line_of(makers[path]))]


def _library_function():
    warn_user("from the library", RuntimeWarning)


def test_library_frames_are_skipped_and_user_frames_are_not():
    """A function whose module is one of LIBRARY_MODULES is skipped: the warning names its caller here; a function
    of this (user) module that warns names itself."""
    ns = {"__name__": "fwgym.a_library_module", "warn_user": warn_user}
    exec(compile("def lib():\n    warn_user('from the library', RuntimeWarning)\n", "<fwgym library>", "exec"), ns)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ns["lib"]()
        line = inspect.currentframe().f_lineno - 1
        _library_function()  # this module is not a library's: the warning names the line in _library_function
    assert [(w.filename, w.lineno) for w in said] == [(__file__, line), (__file__, _line_of(_library_function) + 1)]
    assert {str(w.message) for w in said} == {"from the library"}
    assert "fwgym" in LIBRARY_MODULES and "gymnasium" in LIBRARY_MODULES


def test_only_library_frames_name_the_warning_functions_caller(monkeypatch):
    monkeypatch.setattr(warn_module, "_is_library", lambda module: True)
    assert user_stacklevel() == 2
    monkeypatch.setattr(warn_module, "_is_library", lambda module: module.startswith("fwgym"))
    assert user_stacklevel() == 1  # called from this test module: its own line


def _library(code: str, name: str = "fwgym.a_library_module") -> dict:
    ns = {"__name__": name, "warn_user": warn_user}
    exec(compile(code, "<fwgym library>", "exec"), ns)
    return ns


def test_a_thread_or_pool_on_library_code_names_the_library_line():
    """A thread started on library code has no user's frame: the warning names fwgym's line that warns, not
    threading.py or concurrent/futures/thread.py (Python's own frames are not the user's)."""
    import concurrent.futures
    import threading

    ns = _library("def lib():\n    warn_user('in a thread', RuntimeWarning)\n")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        t = threading.Thread(target=ns["lib"])
        t.start()
        t.join()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(ns["lib"]).result()
    assert [(w.filename, w.lineno) for w in said] == [("<fwgym library>", 2)] * 2


def test_a_warning_at_a_lazy_import_names_the_users_line(tmp_path, monkeypatch):
    """importlib's frames between the library and the user are not counted by warnings.warn: nor here."""
    import importlib

    (tmp_path / "lazy_lib_probe.py").write_text("from fwgym.warn import warn_user\nwarn_user('at import', RuntimeWarning)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warn_module, "LIBRARY_MODULES", (*LIBRARY_MODULES, "lazy_lib_probe"))
    ns = _library("import importlib\ndef lib():\n    importlib.import_module('lazy_lib_probe')\n")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ns["lib"]()
        line = inspect.currentframe().f_lineno - 1
    importlib.invalidate_caches()
    assert [(w.filename, w.lineno) for w in said] == [(__file__, line)]


def test_a_module_named_like_a_library_is_the_users():
    assert warn_module._is_library("fwgym.rl.env") and not warn_module._is_library("fwgym_experiments")
    assert not warn_module._is_library("gymnasium_robotics") and warn_module._is_library("stable_baselines3.ppo")


def test_the_fwgym_command_names_fwgyms_line(tmp_path):
    """``python -m fwgym`` (runpy, fwgym/__main__.py) has no user's line: fwgym's line that warns, not
    ``sys.exit(main())``."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(
        "import fwgym.cli\nns = {'__name__': 'fwgym.cli.fake'}\n"
        "exec(compile('from fwgym.warn import warn_user\\ndef main(argv=None):\\n    warn_user(\\'said\\', "
        "RuntimeWarning)\\n    return 0\\n', '/fwgym/cli/fake.py', 'exec'), ns)\nfwgym.cli.main = ns['main']\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "fwgym"], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("/fwgym/cli/fake.py:3: RuntimeWarning: said"), run.stderr
