"""What an episode cost the machine: wall and CPU seconds, peak resident memory and PSS of the episode's
process(es), measured by :func:`fwgym.agents.run_episode` around every episode (the FWBench paper's
per-case resource profile, Table 3; ``fwgym profile RUN``).

The processes are the evaluating one (the env, the tools, in-process agents and forecasters) and, for an
agent with a ``pid`` attribute other than this process's (an isolated agent's worker,
:class:`fwgym.agents.isolation.IsolatedAgent`), that process too; the record holds their sums.

* wall: ``time.perf_counter`` from the start of the episode to its record.
* CPU: ``time.process_time`` of this process (every thread's user + system time) and, for a worker,
  ``utime + stime`` of ``/proc/<pid>/stat`` (clock ticks), differences over the episode.
* peak RSS (Linux): ``VmHWM`` of ``/proc/<pid>/status`` after resetting it at the episode's start
  (writing ``5`` to ``/proc/<pid>/clear_refs``, Linux >= 4.0; ``proc(5)``), so the record holds the
  episode's own peak; where the reset is refused, and off Linux (``getrusage`` ``ru_maxrss``), the
  process's peak so far. The reset also lowers what ``getrusage(RUSAGE_SELF).ru_maxrss`` reports
  afterwards: the process's peak since the start of its last episode.
* PSS (Linux): ``Pss`` of ``/proc/<pid>/smaps_rollup`` at the end of the episode, read only for episodes
  of at least :data:`PSS_MIN_WALL_S` seconds (reading it walks every mapping: ~10-20 ms in a process
  with torch loaded, more than a whole baseline episode); ``None`` otherwise and where the OS has no
  such file.

With several episodes in flight in one process (``fwgym evaluate --concurrency N``) its CPU time and
peak are shared by them: each record then holds the process's figures over its own episode's time.
Nothing here raises: a figure that cannot be read is ``None``.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["RESOURCE_KEYS", "PSS_MIN_WALL_S", "EpisodeMeter"]

#: the record fields of :meth:`EpisodeMeter.stop` (fwgym.evaluation.records.ResourceFields)
RESOURCE_KEYS: tuple[str, ...] = ("episode_wall_s", "cpu_s", "peak_rss_mib", "pss_mib")
#: PSS is read only for episodes at least this long (seconds of wall time); see the module docstring
PSS_MIN_WALL_S = 0.5
_LINUX = sys.platform.startswith("linux")
_FDS: dict[tuple[int, str], int] = {}  # (pid of the opener, file) -> fd of /proc/<this pid>/<file>
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


def _self_fd(name: str, flags: int) -> int | None:
    """A kept-open fd of ``/proc/<this process>/<name>`` (re-opened after a fork)."""
    key = (os.getpid(), name)
    fd = _FDS.get(key)
    if fd is None:
        try:
            fd = os.open(f"/proc/{os.getpid()}/{name}", flags)
        except OSError:
            return None
        _FDS[key] = fd
    return fd


def _read(pid: int, name: str) -> bytes | None:
    try:
        if pid == os.getpid():
            fd = _self_fd(name, os.O_RDONLY)
            return None if fd is None else os.pread(fd, 1 << 16, 0)
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _kib(text: bytes | None, field: bytes) -> int | None:
    if text is None:
        return None
    i = text.find(field)
    if i < 0:
        return None
    try:
        return int(text[i + len(field): text.index(b"kB", i)])
    except ValueError:
        return None


def _reset_peak(pid: int) -> bool:
    if not _LINUX:
        return False
    try:
        if pid == os.getpid():
            fd = _self_fd("clear_refs", os.O_WRONLY)
            if fd is None:
                return False
            os.write(fd, b"5")
        else:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
        return True
    except OSError:
        return False


def _peak_kib(pid: int) -> int | None:
    if _LINUX:
        return _kib(_read(pid, "status"), b"VmHWM:")
    if pid != os.getpid():
        return None
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak / 1024) if sys.platform == "darwin" else int(peak)  # bytes on macOS, KiB elsewhere


def _worker_cpu_s(pid: int) -> float | None:
    text = _read(pid, "stat")
    if text is None:
        return None
    try:
        fields = text[text.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15 of proc(5))
    except (ValueError, IndexError):
        return None


def _worker_pid(agent: Any) -> int | None:
    pid = getattr(agent, "pid", None)
    try:
        pid = int(pid) if pid is not None else None
    except (TypeError, ValueError):
        return None
    return pid if pid and pid != os.getpid() else None


class EpisodeMeter:
    """Measures one episode (see the module docstring): made at its start, :meth:`stop` at its end."""

    def __init__(self, agent: Any = None):
        self.agent = agent
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.pid = _worker_pid(agent)
        self.w0 = _worker_cpu_s(self.pid) if self.pid else None
        _reset_peak(os.getpid())
        if self.pid:
            _reset_peak(self.pid)

    def stop(self) -> dict[str, float | None]:
        """``{"episode_wall_s", "cpu_s", "peak_rss_mib", "pss_mib"}`` of the episode (rounded: seconds to
        the microsecond, MiB to 0.01; ``None`` where unknown)."""
        wall = time.perf_counter() - self.t0
        cpu: float | None = time.process_time() - self.c0
        me = os.getpid()
        peak = _peak_kib(me)
        pid = _worker_pid(self.agent)
        if pid:
            w1 = _worker_cpu_s(pid)
            start = self.w0 if pid == self.pid else 0.0  # a worker started during the episode: all its time
            cpu = None if cpu is None or w1 is None or start is None else cpu + max(w1 - start, 0.0)
            wp = _peak_kib(pid)
            peak = None if peak is None or wp is None else peak + wp
        pss = None
        if _LINUX and wall >= PSS_MIN_WALL_S:
            pss = _kib(_read(me, "smaps_rollup"), b"\nPss:")
            if pss is not None and pid:
                wp = _kib(_read(pid, "smaps_rollup"), b"\nPss:")
                pss = None if wp is None else pss + wp
        return {"episode_wall_s": round(wall, 6), "cpu_s": None if cpu is None else round(cpu, 6),
                "peak_rss_mib": None if peak is None else round(peak / 1024, 2),
                "pss_mib": None if pss is None else round(pss / 1024, 2)}
