"""Plug-in forecasters run in a worker process (fwgym.forecasters.hosted, issue 25 item 4): a plug-in that walks
``sys._current_frames()`` to the episode finds it in the evaluating process (S 0, the control) and not in its
worker; every plug-in forecast has a hard deadline whatever it declares, and the process exits after it (as it
does after a built-in forecaster's timed-out thread); an edited plug-in is another forecaster (its code is in
the fingerprint and the run's settings: a store is refused, a resume too); a plug-in that fails on every call
is a warning on stderr and in the manifest."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fwgym.agents import run_episode
from fwgym.baselines import make_policy
from fwgym.cli import main
from fwgym.core.cases import get_case
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters import register_forecaster, unregister_forecaster
from fwgym.forecasters.hosted import HostedForecaster, plugin_code
from fwgym.forecasters.registry import describe_pool, get_forecaster
from fwgym.forecasters.store import ForecastRequest, ForecastStore, StoreMismatch, build_store
from plugin_toys import AlwaysFails, FrameWalker, WeeklyRepeatQuantiles

ROOT = Path(__file__).resolve().parents[2]
TOYS = Path(__file__).resolve().parent
CASE = "cycle-101-2015-10-05-day_ahead"
ROWS = {96: [900, 900, 950, 1000, 1100, 1200], 336: [1000, 1001, 1050, 1100, 1200, 1300]}
CYCLE = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress"]


@pytest.fixture
def registered():
    names = []

    def register(name, factory, **kw):
        register_forecaster(name, factory, ROWS, **kw)
        names.append(name)
        return get_forecaster(name)

    yield register
    for n in names:
        unregister_forecaster(n)


def _score(models, policy):
    env = FWBenchEnv("cycle_hire", split="test", models=("seasonal_empirical", *models))
    rec = run_episode(env, make_policy(policy), options={"case_id": CASE}).record
    assert rec["valid"], rec
    return rec["S"]


def test_a_plugin_that_walks_the_frames_to_the_episode_finds_nothing_in_its_worker(registered):
    hosted = registered("frame_walker", FrameWalker)
    assert isinstance(hosted, HostedForecaster) and hosted.health()["isolation"] in ("sandbox", "process")
    registered("weekly_toy", WeeklyRepeatQuantiles)
    registered("frame_walker_here", FrameWalker, isolated=False)  # the control: in the evaluating process
    assert not isinstance(get_forecaster("frame_walker_here"), HostedForecaster)
    honest = _score(["weekly_toy"], "weekly_toy")
    assert _score(["frame_walker"], "frame_walker") == honest > 0  # only (context, horizon) reached it
    assert _score(["frame_walker_here"], "frame_walker_here") < 0.05 * honest  # the future, read from the episode
    pool = describe_pool(("seasonal_empirical", "frame_walker", "frame_walker_here"))
    assert pool["plugin_hosting"] == {"frame_walker": "worker", "frame_walker_here": "in-process"}


def test_a_plugin_whose_factory_a_worker_cannot_make_runs_here_and_says_so():
    with pytest.warns(RuntimeWarning, match="runs in this process"):
        register_forecaster("lambda_toy", lambda: WeeklyRepeatQuantiles(), ROWS)
    try:
        assert not isinstance(get_forecaster("lambda_toy"), HostedForecaster)
        with pytest.raises(ValueError, match="isolated=True needs a factory"):
            register_forecaster("lambda_toy2", lambda: WeeklyRepeatQuantiles(), ROWS, isolated=True)
    finally:
        unregister_forecaster("lambda_toy")


_HANG = """
import json, sys, time
sys.path.insert(0, {toys!r})
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.forecasters import register_forecaster, set_forecaster
import plugin_toys
{setup}
env = FWBenchEnv("cycle_hire", split="test", models={models!r}, forecast_timeout={deadline})
env.reset(options={{"case_id": {case!r}}})
t0 = time.monotonic()
_, _, _, _, info = env.step({{"tool": "forecast", "args": {{"model": {model!r}}}}})
print(json.dumps({{"error": info["tool_result"]["error"], "seconds": time.monotonic() - t0}}), flush=True)
"""


@pytest.mark.parametrize("how", ["hosted plug-in declaring bounded", "built-in forecaster on a thread"])
def test_a_hanging_forecast_ends_at_its_deadline_and_the_process_exits(how):
    """Issue 25: a hanging plug-in forecast gave backend_error after 300 s but its process never exited (the
    executor thread was joined at exit); one declaring ``bounded = True`` had no deadline at all."""
    if how.startswith("hosted"):
        setup = ("register_forecaster('hangs', plugin_toys.Hangs, {336: [1000] * 6})\n"
                 "from fwgym.forecasters import get_forecaster\nget_forecaster('hangs')")  # its worker starts here
        models, model = ("seasonal_empirical", "hangs"), "hangs"
    else:
        setup = ("class Slow(plugin_toys.Hangs):\n    bounded = False\n"
                 "set_forecaster('ets', Slow())")
        models, model = ("seasonal_empirical", "ets"), "ets"
    deadline = 2.0
    code = _HANG.format(toys=str(TOYS), setup=setup, models=models, deadline=deadline, case=CASE, model=model)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    watchdog = threading.Timer(240, proc.kill)  # a forecast without a deadline fails the test, it does not hang it
    watchdog.start()
    try:
        line = proc.stdout.readline()  # the tool's answer
        assert line, "no answer: the forecast had no deadline"
        answered = time.monotonic()
        got = json.loads(line)
        assert got["error"]["code"] == "backend_error" and f"within {deadline:g} s" in got["error"]["message"]
        assert deadline <= got["seconds"] < deadline + 5
        proc.wait(timeout=deadline + 5)  # and the interpreter exits: nothing waits for the hung forecast
        assert time.monotonic() - answered < deadline + 5
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail("the process did not exit after the forecast's deadline")


_EDITED = '''
import numpy as np
from fwgym.forecasters.base import QuantileForecaster


class EditedPlugin(QuantileForecaster):
    min_context = 170

    def _predict(self, context, horizon):
        return np.tile(np.quantile(context[-168:], np.linspace(0.1, 0.9, 9)), (horizon, 1)) * SCALE


SCALE = 1.0
'''


def test_an_edited_plugin_is_another_forecaster_for_the_store_and_for_resume(tmp_path, monkeypatch, capsys, registered):
    (tmp_path / "fwgym_edited_plugin.py").write_text(_EDITED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fwgym_edited_plugin

    f = registered("edited_plugin", fwgym_edited_plugin.EditedPlugin)
    assert isinstance(f, HostedForecaster) and "fwgym_edited_plugin" in f.fingerprint()["code"]
    case = get_case(CASE)
    build_store(tmp_path / "s", f, [ForecastRequest(CASE, case.series_id, case.last_visible, case.history, 50)])
    out = tmp_path / "run"
    assert main(CYCLE + ["--out", str(out), "--models", "edited_plugin", "--policies", "edited_plugin"]) == 0
    code = json.loads((out / "manifest.json").read_text())["settings"]["plugin_code"]
    assert code == {"edited_plugin": plugin_code(f)}
    (tmp_path / "fwgym_edited_plugin.py").write_text(_EDITED.replace("SCALE = 1.0", "SCALE = 2.0"))
    assert plugin_code(f) != code["edited_plugin"]  # pinned from its files, whatever its worker still runs
    with pytest.raises(StoreMismatch, match=r"code\.fwgym_edited_plugin"):  # the store's 1 row is stale now
        ForecastStore(tmp_path / "s").check(f)
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the run's settings differ" in err and "plugin_code" in err
    sys.modules.pop("fwgym_edited_plugin", None)


def test_a_plugin_that_fails_on_every_call_is_a_warning_and_in_the_manifest(tmp_path, capsys, registered):
    registered("always_fails", AlwaysFails)
    out = tmp_path / "run"
    main(CYCLE + ["--out", str(out), "--models", "always_fails", "--policies", "always_fails"])
    err = capsys.readouterr().err
    assert "warning: plug-in forecaster always_fails failed its probe forecast" in err
    assert "this plug-in's backend is down" in err
    health = json.loads((out / "manifest.json").read_text())["models"]["always_fails"]["health"]
    assert health["failures"] == health["calls"] >= 2 and "backend is down" in health["probe_error"]
