"""Plug-in forecasters run in a worker process (issue 25 item 4; docs/isolation.md, docs/store.md).

A plug-in forecaster (an entry point of the ``fwgym.forecasters`` group, or :func:`register_forecaster` with
a factory importable by reference) is code from outside fwgym that the evaluating process should not run:
there a forecast could walk ``sys._current_frames()`` to the env and read the target, and its module-level
code could patch anything. :class:`HostedForecaster` is the plug-in's stand-in here: a
:class:`~fwgym.forecasters.base.QuantileForecaster` whose every call goes to a worker
(:class:`fwgym.isolation.remote.RemoteObject` hosting :class:`fwgym.isolation.worker.PluginForecaster`:
sandboxed where the kernel allows it, import-guarded, a scrubbed environment). The worker receives only
``(context, horizon)``, as plain data; it answers quantiles as JSON (bit for bit), checked here as any
forecaster's output (:meth:`~fwgym.forecasters.base.QuantileForecaster._checked_quantiles`).

* **A hard deadline.** Every forecast has one, whatever the plug-in declares (``bounded`` is ignored): the
  env's ``forecast_timeout``, or :data:`DEFAULT_DEADLINE` seconds when the env sets none. A forecast past
  it is a ``backend_error`` (the charge stands); the worker and its process group are killed, nothing
  lingers (this process exits as soon as it is done), and the next forecast starts a fresh worker.
* **Its code is pinned.** :meth:`HostedForecaster.fingerprint` is made here, from the plug-in's files as
  found without running them (:mod:`fwgym.isolation.sources`: every module of the entry point's package,
  or of the factory's module and the forecaster's classes) and, for an entry point, its distribution's name
  and version; the worker's own answer gives only the settings and packages. An edited plug-in is
  another forecaster: a forecast store built with the old one is refused, and a run started with it
  is not resumed (``plugin_code`` is a compared setting of the run, :func:`plugin_code`).
* **Its health is recorded.** ``calls``, ``failures`` and the last error are counted
  (:meth:`HostedForecaster.health`, in the run manifest's ``models``), and ``fwgym evaluate`` probes each
  plug-in once before the first episode (:func:`probe`): a plug-in whose forecasts all fail is a warning on
  stderr and in the manifest, like a TSFM without weights.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from typing import Any, Mapping

import numpy as np

from fwgym.forecasters.base import Availability, ForecastBackendError, ModelUnavailable, QuantileForecaster
from fwgym.isolation.process import WorkerFailure
from fwgym.isolation.remote import RemoteObject
from fwgym.isolation.sources import files_sha256, module_origin, package_files

__all__ = ["DEFAULT_DEADLINE", "HostedForecaster", "factory_reference", "plugin_code", "probe"]

#: seconds a hosted plug-in forecast may take when the env sets no ``forecast_timeout``
DEFAULT_DEADLINE = 300.0
#: seconds a plug-in's worker has to start (interpreter, the plug-in's imports, its factory)
START_TIMEOUT = 300.0
_ROLE = "plug-in forecaster"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # fwgym/


def factory_reference(factory: Any) -> dict | None:
    """How a worker can make ``factory`` itself: ``{"factory": "module:qualname", "args": [...], "kwargs":
    {...}}`` for a module-level function or class (or a :func:`functools.partial` of one with plain-data
    arguments) of an importable module, else ``None`` (a lambda, a local function, ``__main__``'s code)."""
    import functools

    args, kwargs = (), {}
    if isinstance(factory, functools.partial):
        args, kwargs, factory = tuple(factory.args), dict(factory.keywords), factory.func
        try:
            json.dumps([args, kwargs])
        except TypeError:
            return None
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is not factory or module_origin(module) is None:
        return None
    return {"factory": f"{module}:{qualname}", "args": list(args), "kwargs": kwargs}


def _hub_cache() -> list[str]:
    """The Hugging Face hub cache, readable by a sandboxed plug-in (weights; not the token next to it)."""
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    return [hub] if os.path.isdir(hub) else []


class HostedForecaster(QuantileForecaster):
    """A plug-in forecaster whose code runs in a worker process (see the module doc).

    Args:
        name: the model name.
        reference: what the worker makes: ``{"entry_point": "module:attr"}`` or :func:`factory_reference`'s.
        distribution: ``{"name", "version"}`` of an entry point's distribution (``None`` otherwise).
        sandbox: the worker's sandbox mode (``"auto"``, ``"require"``, ``"off"``).
        deadline: seconds per forecast when the caller gives none (default :data:`DEFAULT_DEADLINE`).

    Attributes:
        hosted: ``True`` (the tools give every forecast the env's deadline, :mod:`fwgym.tools.purchase`).
        spec: the entry point's spec as plain data (``name``, ``tariff``, ``min_context``, ``description``,
            ``availability``), ``None`` for a registered factory.
        calls, failures, last_error: forecasts asked of the worker in this process and how many failed.

    Raises:
        fwgym.isolation.process.WorkerFailure: the worker cannot start or make the plug-in (its error named).
    """

    hosted = True
    bounded = True  # the tools run it on their thread: its own deadline (the worker's) applies, not a thread's
    store_audit = 0.0

    def __init__(self, name: str, reference: Mapping, *, distribution: Mapping | None = None, sandbox: str = "auto",
                 deadline: float = DEFAULT_DEADLINE):
        self.name = str(name)
        self._reference = {"name": self.name, **dict(reference)}
        self._distribution = dict(distribution) if distribution else None
        self._sandbox, self.deadline = sandbox, float(deadline)
        self._lock = threading.Lock()
        self._remote: RemoteObject | None = None
        self._pid = os.getpid()
        self.calls = self.failures = 0
        self.last_error: str | None = None
        self.probe_error: str | None = None  # set by fwgym evaluate's probe (fwgym.forecasters.hosted.probe)
        info = self._connect().hello.get("info") or {}
        self.spec = info.get("spec")
        self.min_context = int(info.get("min_context") or 2)
        self.revision = info.get("revision")
        self._classes = [str(c) for c in info.get("classes") or ()]
        self._remote_fingerprint = info.get("fingerprint") or {}
        #: the dotted class of the forecaster the worker made (what ran, for the run manifest)
        self.plugin_class = str(self._remote_fingerprint.get("class") or "")

    # -- the worker --------------------------------------------------------------------------------
    def _connect(self) -> RemoteObject:
        if self._remote is None or self._pid != os.getpid():  # none yet, or this process is a fork
            self._pid = os.getpid()
            self._remote = RemoteObject("builtin:plugin_forecaster", self._reference, fresh=False,
                                        call_timeout=self.deadline, start_timeout=START_TIMEOUT, sandbox=self._sandbox,
                                        read_paths=_hub_cache(), role=_ROLE, sys_path=list(sys.path))
        return self._remote

    def _call(self, method: str, *args, timeout: float | None = None) -> Any:
        with self._lock:
            remote = self._connect()
            remote.ensure_alive()  # a worker killed at a deadline is replaced
        return remote.call(method, *args, timeout=timeout)

    def __getstate__(self) -> dict:  # pickled (process pools, Ray): the worker stays with its process
        return {k: v for k, v in self.__dict__.items() if k not in ("_remote", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._remote, self._lock = None, threading.Lock()

    def close(self) -> None:
        """Shut the worker down (a later call starts a new one)."""
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    # -- the forecaster ------------------------------------------------------------------------------
    def availability(self) -> Availability:
        try:
            got = self._call("availability", timeout=self.deadline)
        except WorkerFailure as exc:
            return Availability(False, f"{self.name}: the plug-in's availability failed: {exc}", "plugin")
        return Availability(bool(got["available"]), str(got["reason"]), str(got["source"]))

    def load(self) -> None:
        try:
            self._call("load", timeout=START_TIMEOUT)
        except WorkerFailure as exc:
            raise ModelUnavailable(f"{self.name}: the plug-in could not load: {exc}") from None

    def predict_quantiles(self, context: np.ndarray, horizon: int, timeout: float | None = None) -> np.ndarray:
        """The plug-in's quantiles, computed in its worker within ``timeout`` seconds (default
        :attr:`deadline`); checked here (shape (horizon, 9), finite, sorted).

        Raises:
            ValueError: bad context or horizon (checked here, before the worker is asked).
            ForecastBackendError: the plug-in raised, answered junk, or did not answer in time (its worker
                was then killed).
        """
        ctx = self._checked_context(context)
        horizon = self._checked_horizon(horizon)
        deadline = self.deadline if timeout is None else float(timeout)
        self.calls += 1
        try:
            q = np.asarray(self._call("predict", ctx, horizon, timeout=deadline), dtype=np.float64)
            return self._checked_quantiles(q, horizon)
        except (WorkerFailure, ForecastBackendError, ValueError, TypeError) as exc:
            self.failures += 1
            kind = getattr(exc, "kind", None)
            self.last_error = (f"no forecast within {deadline:g} s (its worker was killed)" if kind == "timeout"
                               else str(exc)[:500])
            raise ForecastBackendError(f"{self.name}: {self.last_error}") from None

    def _predict(self, context: np.ndarray, horizon: int) -> np.ndarray:  # pragma: no cover - predict_quantiles
        return self.predict_quantiles(context, horizon)

    def fingerprint(self) -> dict:
        """The worker's fingerprint (settings, packages) with ``code`` made here: the sha256 of the plug-in's
        files (:func:`plugin_files`) and, for an entry point, ``distribution`` (name and version)."""
        out = {k: v for k, v in self._remote_fingerprint.items() if k != "code"}
        out.update(model=self.name, code=files_sha256(self.plugin_files()))
        if self._distribution is not None:
            out["distribution"] = dict(self._distribution)
        return out

    def plugin_files(self) -> dict[str, str]:
        """``{module: file}`` of the plug-in's code, found without running it: the entry point's (or the
        factory's) top-level package and that of every class of the forecaster it made (of fwgym's own
        modules, only those modules)."""
        first = (self._reference.get("entry_point") or self._reference["factory"]).partition(":")[0]
        files: dict[str, str] = {}
        for m in [first, *self._classes]:
            origin = module_origin(m)
            if origin is not None and os.path.realpath(origin).startswith(_PACKAGE_DIR + os.sep):
                files[m] = origin  # one of fwgym's modules (e.g. a built-in class registered under a new name)
                continue
            files.update(package_files(m))
        return dict(sorted(files.items()))

    def health(self) -> dict:
        """``{"isolation": "sandbox" | "process", "calls", "failures", "last_error", "probe_error"}`` in this
        process."""
        iso = self._remote.isolation["isolation"] if self._remote is not None else None
        return {"isolation": iso, "calls": self.calls, "failures": self.failures, "last_error": self.last_error,
                "probe_error": self.probe_error}

    def __repr__(self) -> str:
        return f"HostedForecaster({self.name!r}, {self._reference!r})"


def plugin_code(forecaster: QuantileForecaster) -> str:
    """One sha256 for a plug-in's code: of the canonical JSON of its fingerprint's ``code`` (and
    ``distribution``); what a run's ``plugin_code`` setting holds per plug-in."""
    fp = forecaster.fingerprint()
    doc = {"code": fp.get("code"), "distribution": fp.get("distribution")}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def probe(forecaster: QuantileForecaster, horizon: int = 24) -> str | None:
    """One forecast of ``forecaster`` on a plain synthetic context (two weeks of a daily cycle, or its
    ``min_context`` if longer): ``None`` when it answers, else why not (one line)."""
    n = max(336, int(getattr(forecaster, "min_context", 2) or 2))
    t = np.arange(n, dtype=np.float64)
    context = 100.0 + 20.0 * np.sin(2 * np.pi * t / 24.0)
    try:
        if not forecaster.availability().available:
            return None  # unavailable models are reported as such (refused free of charge)
        forecaster.load()
        forecaster.predict_quantiles(context, horizon)
    except Exception as exc:  # noqa: BLE001 - reported
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return None
