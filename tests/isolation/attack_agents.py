"""Hostile agents of issue 25 (a worker that can read the answer), loaded by path as ``attack_agents.py:NAME``.

Each never leaves the import guard: it reads files and ``/proc`` directly. Each writes what it managed to do
to ``report`` (one JSON line per attempt) and otherwise plays the no-information plan (``hour_of_day_empirical``
then submit), so a row that differs from that plan's row got something through.
"""
import importlib.util
import json
import os
import signal
from datetime import datetime, timezone

#: each domain's packaged Parquet file (fwgym.data.DATA_FILES; read by path, never imported)
PARQUET = {"electricity": "eia930_demand.parquet", "cycle_hire": "tfl_cycle_hire.parquet"}


def _decisions(obs):
    return json.loads(obs["last_result"])["result"]["plan"]["decisions"]


class _NoInformation:
    """classical_plan(hour_of_day_empirical) then submit, unless ``self.plan`` holds decisions to submit."""

    name = "no_information"

    def __init__(self, report=None):
        self.report, self.calls, self.plan, self.episodes = report, 0, None, 0

    def _write(self, line):
        if self.report:
            with open(self.report, "a") as f:
                f.write(json.dumps(line) + "\n")

    def reset(self, info):
        self.calls, self.plan = 0, None
        self.episodes += 1
        self.info = info

    def act(self, obs):
        self.calls += 1
        if self.plan is not None:
            return {"tool": "submit", "args": {"decisions": self.plan}}
        if self.calls == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": _decisions(obs)}}


def _hour(iso):
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(timezone.utc)


def perfect_plan_from_parquet(case, contract):
    """The perfect plan of ``case`` (``info["episode"]["case"]``), from the realised target read out of
    fwgym's packaged Parquet file (located without importing fwgym)."""
    import numpy as np
    import pyarrow.parquet as pq

    from fwgym.core.optimizer import perfect_demand_plan  # allowed: no case data in it

    folder = importlib.util.find_spec("fwgym").submodule_search_locations[0]
    path = os.path.join(folder, "data", PARQUET[case["domain"]])
    table = pq.read_table(path, filters=[("series_id", "=", case["series_id"])], columns=["timestamp", "value"])
    start, end = _hour(case["target_start"]), _hour(case["target_end"])
    values = {t.astimezone(timezone.utc): v for t, v in zip(table.column("timestamp").to_pylist(),
                                                            table.column("value").to_pylist())}
    hours = [start.timestamp() + 3600 * k for k in range(int((end - start).total_seconds() // 3600))]  # end: exclusive
    actual = np.array([values[datetime.fromtimestamp(h, timezone.utc)] for h in hours], dtype=np.float64)
    best = perfect_demand_plan(actual, case["scale"], np.asarray(contract["shortage_weights"], dtype=np.float64))
    return best.plan.decisions()


class ParquetPeek(_NoInformation):
    """Opens the packaged Parquet file for the case in ``info["episode"]`` and submits the perfect plan."""

    name = "parquet_peek"

    def reset(self, info):
        super().reset(info)
        episode = info["episode"]
        try:
            self.plan = perfect_plan_from_parquet(episode["case"], episode["contract"])
            self._write({"case_id": info["case_id"], "read": True})
        except Exception as exc:  # noqa: BLE001 - the sandbox refuses the file
            self._write({"case_id": info["case_id"], "read": False, "error": f"{type(exc).__name__}: {exc}"})


def _try(fn):
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _read_mem(pid):
    """A few bytes of the evaluator's memory at the start of its first readable mapping."""
    with open(f"/proc/{pid}/maps") as f:
        first = next(line for line in f if " r" in line)
    start = int(first.split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(start)
        return len(f.read(64))


class ProcForge(_NoInformation):
    """Reads the evaluator's ``/proc/<ppid>/environ``, ``cmdline`` and ``mem``, then appends a forged record for
    another policy to the run's ``results.jsonl`` (its path given, as a determined submitter would find it)."""

    name = "proc_forge"

    def __init__(self, run_dir, report=None):
        super().__init__(report)
        self.run_dir = run_dir

    def reset(self, info):
        super().reset(info)
        ppid = os.getppid()
        found = {"case_id": info["case_id"],
                 "environ": _try(lambda: len(open(f"/proc/{ppid}/environ", "rb").read())),
                 "cmdline": _try(lambda: open(f"/proc/{ppid}/cmdline", "rb").read().decode(errors="replace")),
                 "mem": _try(lambda: _read_mem(ppid)),
                 "listdir": _try(lambda: sorted(os.listdir(self.run_dir)))}

        def forge():
            path = os.path.join(self.run_dir, "results.jsonl")
            with open(path) as f:
                last = json.loads(f.read().splitlines()[-1])
            last.update(policy="forged_reference", S=0.0)
            with open(path, "a") as f:
                f.write(json.dumps(last) + "\n")
            return True

        found["forge"] = _try(forge) if self.episodes > 1 else None
        self._write(found)


class ParentKiller(_NoInformation):
    """Kills the evaluator (SIGKILL to its parent) after an episode it did badly on, so that a wrapper
    resumes the run and the bad episode is played again."""

    name = "parent_killer"

    def end_episode(self, record):
        if record.get("S") is None or record["S"] > 0.0:
            outcome = _try(lambda: os.kill(os.getppid(), signal.SIGKILL))
            self._write({"case_id": record.get("case_id"), "kill": outcome})


class Remembers(_NoInformation):
    """Remembers, in this interpreter and in a file in ``TMPDIR``, how many episodes it has seen."""

    name = "remembers"
    SEEN = []

    def reset(self, info):
        super().reset(info)
        Remembers.SEEN.append(info["case_id"])
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "fwgym-remembers.txt")
        before = open(path).read().split() if os.path.exists(path) else []
        with open(path, "a") as f:
            f.write(info["case_id"] + "\n")
        self.memory = {"pid": os.getpid(), "in_process": len(Remembers.SEEN), "in_file": len(before) + 1}

    def remembered(self):
        return self.memory


class Probe:
    """What a worker may do: each method call tries one thing and answers ``{"ok": bool, ...}``."""

    name = "probe"

    def act(self, obs):
        return {"tool": "catalog"}

    def read(self, path):
        return _try(lambda: len(open(path, "rb").read(16)))

    def write(self, path):
        return _try(lambda: open(path, "w").write("x"))

    def read_via_links(self, path):
        """Open ``path`` through a symlink and a hard link made in the worker's TMPDIR (where it may write)."""
        import tempfile

        folder = tempfile.mkdtemp()
        soft, hard = os.path.join(folder, "soft"), os.path.join(folder, "hard")

        def linked(make, link):
            make(path, link)
            return len(open(link, "rb").read(16))

        return {"symlink": _try(lambda: linked(os.symlink, soft)), "hardlink": _try(lambda: linked(os.link, hard))}

    def listdir(self, path):
        return _try(lambda: sorted(os.listdir(path)))

    def parent(self):
        ppid = os.getppid()
        return {"environ": _try(lambda: len(open(f"/proc/{ppid}/environ", "rb").read())),
                "cmdline": _try(lambda: len(open(f"/proc/{ppid}/cmdline", "rb").read())),
                "mem": _try(lambda: _read_mem(ppid)),
                "signal": _try(lambda: os.kill(ppid, 0)),
                "self": _try(lambda: len(open("/proc/self/status").read()))}

    def tmp(self):
        import tempfile

        path = os.path.join(tempfile.gettempdir(), "fwgym-probe-scratch")
        return {"tmpdir": os.environ.get("TMPDIR"), "write": _try(lambda: open(path, "w").write("x"))}

    def imports(self):
        return {"numpy": _try(lambda: __import__("numpy").zeros(3).tolist()),
                "optimizer": _try(lambda: bool(__import__("fwgym.core.optimizer").core.optimizer.GRID.size)),
                "fwgym_found": importlib.util.find_spec("fwgym") is not None}
