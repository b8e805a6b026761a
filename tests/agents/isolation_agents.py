"""Agents of the isolation tests, loaded by file path as ``isolation_agents.py:NAME`` (in a worker, or
in-process for the controls). Standard library only at import time, as a submitted agent might be."""
import gc
import importlib
import inspect
import json
import os
import sys
import time
import warnings

#: fwgym modules the snoop tries to import (the guard refuses each in a worker)
PRIVATE_MODULES = ("fwgym.envs", "fwgym.envs.fwbench", "fwgym.core.cases", "fwgym.data", "fwgym.core.scoring",
                   "fwgym.evaluation", "fwgym.baselines.oracles", "fwgym.tools", "fwgym.rl.features")
#: fwgym modules that hold no case data (importable in a worker)
PUBLIC_MODULES = ("fwgym.agents.base", "fwgym.core.contract", "fwgym.core.optimizer", "fwgym.errors", "fwgym.forecasters.classical")


def _plan_decisions(obs):
    return json.loads(obs["last_result"])["result"]["plan"]["decisions"]


class PlanAgent:
    """classical_plan(method) then submit; keeps what it was told (reset infos, records)."""

    def __init__(self, method="hour_of_day_empirical", name="plan_agent"):
        self.method, self.name = method, name
        self.calls, self.infos, self.records = 0, [], []

    def reset(self, info):
        self.calls = 0
        self.infos.append(info["case_id"])

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            print("the agent prints to stdout; the protocol must survive it")
            return {"tool": "classical_plan", "args": {"method": self.method}}
        return {"tool": "submit", "args": {"decisions": _plan_decisions(obs)}}

    def end_episode(self, record):
        self.records.append(record["case_id"])

    def episode_stats(self):
        return {"model_turns": self.calls, "seen": list(self.infos), "ended": list(self.records)}


class PlainReset(PlanAgent):
    def reset(self):  # the old protocol: reset() without the info
        self.calls = 0
        self.infos.append("called")


class Raiser(PlanAgent):
    """Raises on its first act of every episode whose index is in ``fail_on`` (0-based)."""

    def __init__(self, fail_on=(0,)):
        super().__init__(name="raiser")
        self.fail_on, self.episode = set(fail_on), -1

    def reset(self, info):
        super().reset(info)
        self.episode += 1

    def act(self, obs):
        if self.episode in self.fail_on:
            return 1 / 0
        return super().act(obs)


class _Once(PlanAgent):
    """Misbehaves in the first act of the first episode of the first agent made for ``once`` (a file it
    creates, so the fresh agent of a restarted worker behaves)."""

    def __init__(self, once, name):
        super().__init__(name=name)
        self.once = once

    def _first_time(self):
        if os.path.exists(self.once):
            return False
        open(self.once, "w").close()
        return True


class Hanger(_Once):
    def __init__(self, once):
        super().__init__(once, "hanger")

    def act(self, obs):
        if self._first_time():
            time.sleep(3600)
        return super().act(obs)


class Exiter(_Once):
    def __init__(self, once, code=3):
        super().__init__(once, "exiter")
        self.code = code

    def act(self, obs):
        if self._first_time():
            os._exit(self.code)
        return super().act(obs)


class NotPlain(PlanAgent):
    def act(self, obs):
        return object()


class Huge(PlanAgent):
    def __init__(self, chars=100_000):
        super().__init__(name="huge")
        self.chars = chars

    def act(self, obs):
        return {"tool": "abstain", "args": {"reason": "x" * self.chars}}


class Oracle(PlanAgent):
    requires_hindsight = True

    def set_hindsight(self, hindsight):
        self.hindsight = hindsight


class NoAct:
    pass


def failing_factory():
    raise ValueError("this factory fails")


class ImportProbe:
    """Writes to ``report`` (JSON) which modules import, what ``fwgym`` is, its process id and stdin; abstains."""

    name = "import_probe"

    def __init__(self, report):
        self.report = report

    def act(self, obs):
        out = {"pid": os.getpid(), "imports": {}}
        for name in PRIVATE_MODULES + PUBLIC_MODULES:
            try:
                importlib.import_module(name)
                out["imports"][name] = "imported"
            except ImportError as exc:
                out["imports"][name] = type(exc).__name__
        import fwgym

        out["fwgym_has_env"] = hasattr(fwgym, "FWBenchEnv")
        out["fwgym_version"] = getattr(fwgym, "__version__", None)
        out["loaded"] = sorted(m for m in sys.modules if m.startswith("fwgym"))
        out["stdin"] = sys.stdin.read()
        out["secrets"] = sorted(k for k in os.environ if k.startswith("FWGYM_TEST_"))
        with open(self.report, "w") as f:
            json.dump(out, f)
        return {"tool": "abstain", "args": {"reason": "probed"}}


class Snoop:
    """A hostile agent: walks the stack and the garbage collector for the env, ``hindsight()`` or the target,
    tries fwgym's private modules, writes what it found to ``report`` (one JSON line per episode) and submits
    the perfect plan if it got hindsight, else the hour-of-day plan (the no-information plan)."""

    name = "snoop"

    def __init__(self, report):
        self.report, self.calls, self.case_id = report, 0, None

    def reset(self, info):
        self.calls, self.case_id = 0, info["case_id"]

    def _search(self):
        found = {"case_id": self.case_id, "pid": os.getpid(), "frames": 0, "hindsight": False, "envs": 0,
                 "vectors24": [], "imports": {}}
        hindsight = None

        def look(obj):
            nonlocal hindsight
            try:
                inner = getattr(obj, "unwrapped", obj)
                h = getattr(inner, "hindsight", None)
                kind = type(obj).__name__
            except Exception:  # noqa: BLE001 - anything may raise on a stranger's attribute
                return
            if kind in ("FWBenchEnv", "Case", "Episode"):
                found["envs"] += 1
            if hindsight is None and callable(h) and inspect.ismethod(h):
                hindsight = h
            if type(obj).__module__ == "numpy" and getattr(obj, "size", 0) == 24 and obj.dtype.kind == "f":
                found["vectors24"].append([float(x) for x in obj.reshape(-1)])
            elif isinstance(obj, list) and len(obj) == 24 and all(isinstance(x, float) for x in obj):
                found["vectors24"].append(list(obj))

        warnings.simplefilter("ignore")
        for frame_info in inspect.stack():
            found["frames"] += 1
            for value in list(frame_info.frame.f_locals.values()):
                look(value)
        for obj in gc.get_objects():
            look(obj)
        for name in PRIVATE_MODULES:
            try:
                importlib.import_module(name)
                found["imports"][name] = "imported"
            except ImportError as exc:
                found["imports"][name] = type(exc).__name__
        plan = None
        if hindsight is not None:
            try:
                plan = hindsight()["perfect_plan"].decisions()
                found["hindsight"] = True
            except Exception as exc:  # noqa: BLE001
                found["hindsight_error"] = repr(exc)
        return found, plan

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            with warnings.catch_warnings():
                found, self._plan = self._search()
            with open(self.report, "a") as f:
                f.write(json.dumps(found) + "\n")
            if self._plan is not None:
                return {"tool": "submit", "args": {"decisions": self._plan}}
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": _plan_decisions(obs)}}
