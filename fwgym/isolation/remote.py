"""An object made and hosted in a worker process (:class:`RemoteObject`), and the isolation a worker gets.

:class:`RemoteObject` hosts any object a factory makes (an agent of yours; the SB3 policy of
:class:`fwgym.agents.sb3.SB3Agent`; a plug-in forecaster of :mod:`fwgym.forecasters.hosted`) and calls its
methods with plain data. :func:`isolation_status` says what a worker started now gets: ``"sandbox"``
(Landlock applied in full, :mod:`fwgym.isolation.sandbox`) or ``"process"`` (a separate process only), and
why.

**Memory.** ``memory="worker"`` (the default) lets a worker play one episode after another (the object is
made afresh per task with ``fresh=True``, but the interpreter and the module-level state of the hosted code
live on). ``memory="none"`` gives every episode a fresh process: :meth:`RemoteObject.begin_episode` kills a
worker that hosted an episode and starts a new one, and such a worker never goes back to the pool; in a
sandbox it cannot keep files either (it writes only in its private temporary directory, removed with it).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import weakref
from pathlib import Path
from typing import Any, Mapping, Sequence

from fwgym.isolation import sandbox
from fwgym.isolation.process import (DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REPLY_BYTES, DEFAULT_START_TIMEOUT, WorkerFailure,
                                     WorkerProcess, give_idle, take_idle, worker_argv, worker_environ)
from fwgym.isolation.protocol import DENIED_MODULES, plain_data

__all__ = ["RemoteObject", "isolation_status", "SANDBOX_MODES", "MEMORY_MODES", "PACKAGE_DIR"]

#: ``sandbox=`` values: ``"auto"`` (Landlock where the kernel allows it, else a separate process and a note),
#: ``"require"`` (refuse to start a worker that would not be sandboxed), ``"off"`` (a separate process only)
SANDBOX_MODES: tuple[str, ...] = ("auto", "require", "off")
#: ``memory=`` values: ``"worker"`` (a worker plays episode after episode) or ``"none"`` (a process per episode)
MEMORY_MODES: tuple[str, ...] = ("worker", "none")
#: fwgym's package folder in this process (its ``data`` and ``config`` are protected from every worker)
PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def isolation_status(mode: str = "auto", worker_command: Sequence[str] | str | None = None) -> dict:
    """What a worker started now with sandbox ``mode`` gets.

    Returns:
        ``{"isolation": "sandbox" | "process", "apply": bool (whether the worker applies Landlock),
        "landlock_abi": int, "reason": why it is not sandboxed ("" when it is)}``. With a custom
        ``worker_command`` and mode ``"auto"`` fwgym applies no sandbox (the command's own isolation, a
        container or another user, is not something fwgym can verify: ``"process"``).

    Raises:
        ValueError: an unknown mode; ``"require"`` where the kernel cannot sandbox a worker.
    """
    if mode not in SANDBOX_MODES:
        raise ValueError(f"sandbox must be one of {list(SANDBOX_MODES)}, got {mode!r}")
    st = sandbox.status()
    if mode == "off":
        return {"isolation": "process", "apply": False, "landlock_abi": st["landlock_abi"],
                "reason": "the sandbox was turned off (--agent-sandbox off)"}
    if mode == "require":
        if st["isolation"] != "sandbox":
            raise ValueError(f"--agent-sandbox require: a worker cannot be sandboxed here: {st['reason']}")
        return {**st, "apply": True}
    if worker_command is not None:
        return {"isolation": "process", "apply": False, "landlock_abi": st["landlock_abi"],
                "reason": "a custom --agent-worker-command starts the worker: fwgym does not apply its sandbox "
                          "and cannot verify the command's (pass --agent-sandbox require to apply it as well)"}
    return {**st, "apply": st["landlock_abi"] >= 1}


def _fwgym_version() -> str | None:
    pkg = sys.modules.get("fwgym")
    return getattr(pkg, "__version__", None)


def _paths(paths: Sequence[str | os.PathLike] | None, what: str) -> list[str]:
    if paths is None:
        return []
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise ValueError(f"{what} must be a sequence of paths, got {paths!r}")
    return [os.path.realpath(os.fspath(p)) for p in paths]


class RemoteObject:
    """An object made and hosted in a worker process; its methods are called with plain data and answer
    plain data.

    Args:
        target: ``"package.module:factory"``, ``"file.py:factory"`` or ``"builtin:NAME"`` (see
            :func:`fwgym.isolation.worker.load_target`).
        kwargs: keyword arguments of the factory (plain data).
        fresh: a reused pooled worker makes a new object (``True``, for agents with state) or keeps its
            object (``False``, for stateless objects such as a loaded policy).
        call_timeout, start_timeout: deadlines in seconds.
        worker_command: see :func:`~fwgym.isolation.process.worker_argv`.
        max_reply_bytes: largest reply accepted.
        guard: install the worker's import guard (default ``True``; tests turn it off to show what it stops).
        worker_env: names of environment variables to pass to the worker on purpose, besides the
            allow-list :data:`~fwgym.isolation.process.WORKER_ENV`; their values are read now.
        sandbox: ``"auto"``, ``"require"`` or ``"off"`` (:data:`SANDBOX_MODES`, :func:`isolation_status`).
        read_paths, write_paths: further paths the sandboxed worker may read / write (besides what
            :mod:`fwgym.isolation.sandbox` allows); never the protected ones.
        memory: ``"worker"`` or ``"none"`` (:data:`MEMORY_MODES`, see the module doc).
        role: what is hosted, in messages (``"agent"``).
        sys_path: folders the worker appends to its ``sys.path`` (e.g. this process's, for a plug-in
            found here).

    Attributes:
        hello: the hosted object's hello (see :func:`fwgym.isolation.worker.describe`).
        isolation: :func:`isolation_status` of its workers.

    Raises:
        WorkerFailure: the worker cannot start, apply its sandbox or make the object. TypeError: kwargs are
            not plain data. ValueError: a ``worker_env`` name that is not set, or not a variable name; an
            unknown ``sandbox`` or ``memory``; ``sandbox="require"`` where it is not possible.
    """

    def __init__(self, target: str, kwargs: Mapping | None = None, *, fresh: bool = True,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 guard: bool = True, worker_env: Sequence[str] = (), sandbox: str = "auto",
                 read_paths: Sequence[str] = (), write_paths: Sequence[str] = (), memory: str = "worker",
                 role: str = "agent", sys_path: Sequence[str] | None = None):
        if float(call_timeout) <= 0 or float(start_timeout) <= 0:
            raise ValueError("call_timeout and start_timeout must be > 0 seconds")
        if memory not in MEMORY_MODES:
            raise ValueError(f"memory must be one of {list(MEMORY_MODES)}, got {memory!r}")
        self._env = worker_environ(extra=worker_env)
        self.target, self.fresh, self.memory, self.role = str(target), bool(fresh), memory, str(role)
        self.call_timeout, self.start_timeout = float(call_timeout), float(start_timeout)
        self.max_reply_bytes = int(max_reply_bytes)
        self._command = worker_argv(worker_command)
        self.isolation = isolation_status(sandbox, worker_command)
        box = None
        if self.isolation["apply"]:
            box = {"read": _paths(read_paths, "read_paths"), "write": _paths(write_paths, "write_paths"),
                   "protected": sandbox_protected(), "package_dirs": [PACKAGE_DIR],
                   "package_paths": package_data_paths(), "package_files": source_package_files(),
                   "full": self.isolation["isolation"] == "sandbox"}
        self._spec = {"target": self.target, "kwargs": plain_data(dict(kwargs or {})), "cwd": os.getcwd(),
                      "fwgym_version": _fwgym_version(), "guard": bool(guard), "denied": list(DENIED_MODULES),
                      "sandbox": box, **({"sys_path": [str(p) for p in sys_path]} if sys_path else {})}
        env_digest = hashlib.sha256(json.dumps(self._env, sort_keys=True).encode()).hexdigest()  # no value in the key
        self._key = json.dumps({"spec": self._spec, "command": self._command, "max": self.max_reply_bytes,
                                "env": env_digest, "memory": memory, "role": self.role}, sort_keys=True, default=repr)
        self._box: list = [None]
        self._finalizer = weakref.finalize(self, give_idle, self._key, self._box)
        self.hello: dict = self._connect()

    def _connect(self) -> dict:
        worker = take_idle(self._key)
        if worker is not None:
            try:
                hello = worker.request(("new",), self.start_timeout) if self.fresh else worker.hello
            except WorkerFailure:
                if worker.alive:  # its factory raised: the worker may go back to the pool
                    give_idle(self._key, [worker])
                raise
        else:
            worker = WorkerProcess(self._command, self._spec, start_timeout=self.start_timeout,
                                   max_reply_bytes=self.max_reply_bytes, env=self._env,
                                   private_tmp=self._spec["sandbox"] is not None, role=self.role)
            worker.single_use = self.memory == "none"
            hello = worker.hello
        if not isinstance(hello, dict) or not isinstance(hello.get("has"), dict) or "name" not in hello:
            worker.kill("bad hello")
            raise WorkerFailure(f"the worker's hello is malformed: {str(hello)[:200]}", "bad_reply")
        applied = hello.get("sandbox")
        if self._spec["sandbox"] is not None and not (isinstance(applied, dict) and applied.get("applied")):
            worker.kill("no sandbox")
            raise WorkerFailure(f"the {self.role}'s worker did not apply its sandbox (it says {str(applied)[:200]})",
                                "bad_reply")
        self._box[0] = worker
        return hello

    @property
    def alive(self) -> bool:
        """Whether the hosted object's worker is running."""
        return self._box[0] is not None and self._box[0].alive

    @property
    def pid(self) -> int | None:
        """The worker's process id (``None`` when there is none)."""
        return None if self._box[0] is None else self._box[0].pid

    @property
    def tmpdir(self) -> str | None:
        """The current worker's private temporary directory (``None`` outside a sandbox)."""
        return None if self._box[0] is None else self._box[0].tmpdir

    def ensure_alive(self) -> bool:
        """Start a new worker (and object) if the current one is gone.

        Returns:
            ``True`` when a new worker was started (``hello`` is then the new object's).
        """
        if self.alive:
            return False
        self._box[0] = None
        self.hello = self._connect()
        return True

    def begin_episode(self) -> bool:
        """Before an episode: with ``memory="none"`` a worker that hosted one already is killed and replaced
        (a fresh process); a dead worker is replaced in any case.

        Returns:
            ``True`` when a new worker was started (``hello`` is then the new object's).
        """
        worker = self._box[0]
        if self.memory == "none" and worker is not None and worker.used:
            self._box[0] = None
            worker.kill("done: its agent keeps no memory between episodes")
        return self.ensure_alive()

    def _worker(self) -> WorkerProcess:
        worker = self._box[0]
        if worker is None:
            raise WorkerFailure(f"the {self.role}'s worker is gone (closed)", "exited")
        return worker

    def call(self, method: str, *args, timeout: float | None = None) -> Any:
        """``obj.method(*args)`` in the worker (arguments checked by :func:`plain_data`), within ``timeout``
        seconds (default ``call_timeout``).

        Raises:
            WorkerFailure: see :meth:`WorkerProcess.request`. TypeError: arguments that are not plain data.
        """
        return self._worker().request(("call", method, plain_data(args)),
                                      self.call_timeout if timeout is None else float(timeout))

    def reset(self, info: Mapping) -> None:
        """``obj.reset(info)`` / ``obj.reset()`` / nothing, as :func:`fwgym.agents.base.reset_agent` decides."""
        self._worker().request(("reset", plain_data(info)), self.call_timeout)

    def release(self) -> None:
        """Give the worker back to this process's pool now (what garbage collection does otherwise); the
        object is unusable afterwards."""
        self._finalizer()

    def close(self) -> None:
        """Shut the worker down (it is not returned to the pool); the object is unusable afterwards."""
        self._finalizer.detach()
        worker, self._box[0] = self._box[0], None
        if worker is not None:
            worker.close()


def sandbox_protected() -> list[str]:
    """The paths every sandboxed worker started now is kept from: :func:`fwgym.isolation.sandbox.protect`'s
    (the run directory, the forecast store), fwgym's packaged data and config in this process, and every
    file that holds a domain's values (:func:`fwgym.domains.data_paths`: the registered domains' and the opt-in
    ones', their source packages' files included)."""
    from fwgym.domains import data_paths

    return sorted(set(sandbox.protected_paths()) | set(sandbox.default_protected([PACKAGE_DIR])) | set(data_paths()))


def package_data_paths() -> list[str]:
    """The domains' data files inside fwgym's package folder, relative to it (the worker protects them in the
    fwgym it finds too, :func:`fwgym.isolation.sandbox.default_protected`)."""
    from fwgym.domains import data_paths

    root = os.path.realpath(PACKAGE_DIR)
    return sorted(os.path.relpath(p, root) for p in data_paths() if p.startswith(root + os.sep))


def source_package_files() -> list[list[str]]:
    """``[[distribution, path], ...]`` of the domains' source files (:func:`fwgym.domains.source_files`): the worker
    protects them where it finds them installed too (:func:`fwgym.isolation.sandbox.installed_files`)."""
    from fwgym.domains import source_files

    return [[f.distribution, f.path] for f in source_files()]
