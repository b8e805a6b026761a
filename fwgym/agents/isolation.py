"""Agents that are code run in a separate process (DESIGN §9, trust; SECURITY.md, "Code agents run isolated").

An agent given as a file or a name on the command line (an SB3 zip, whose loading unpickles it; a
``module:factory`` of yours) is code the evaluator should not run in its own interpreter: there it could
read ``env.unwrapped.hindsight()`` from its caller's frame, import the case data, or patch the scorer.
This module is the evaluator's half of running such code elsewhere; the worker's half is the standalone
script :mod:`fwgym.agents.isolation_worker`.

* :class:`IsolatedAgent` is an ordinary agent for :func:`fwgym.agents.run_episode` (``reset(info)``,
  ``act``, ``end_episode``, ``episode_stats`` when the hosted agent has it) that forwards each call to the
  agent hosted in a worker process. The worker receives only plain data: the observations, the public
  reset ``info`` and, after the episode has ended, the record. The env, its case data, ``hindsight()``
  and the scorer stay here.
* :class:`IsolatedAgentFactory` is the picklable, JSON-serialisable factory the ``--agent module:factory``
  kind builds (``isolated = True``), so the runner can build one per worker process or thread.
* :class:`RemoteObject` hosts any object (e.g. the SB3 policy of :class:`fwgym.agents.sb3.SB3Agent`,
  whose features and tool calls are computed here) and calls its methods.

**Workers.** A worker is a fresh interpreter started with :func:`worker_argv` (``sys.executable`` on
the worker script; not a fork, which would share this process's memory and its loaded case data), in a
new session (Ctrl-C in the terminal reaches only the evaluator). It lives until it is closed, this
process exits, its input closes or its parent is gone. Workers are pooled per process: when an agent is
closed or garbage-collected its worker goes back to an idle pool, and the next agent of the same spec
reuses it after asking it for a *fresh* object (``("new",)``): a new agent per task, as in-process,
without a new interpreter and import per task. After a fork (``--workers`` processes) the child drops
the pool it inherited. Deadlines use ``poll()`` on the pipes (POSIX).

**Environment.** A worker starts with a scrubbed environment (:func:`worker_environ`): only the
variables of the allow-list :data:`WORKER_ENV` (what a Python process and its numeric libraries need:
``PATH``, ``HOME``, locale ``LANG``/``LC_*``, ``TMPDIR``, ``PYTHONPATH``, ``VIRTUAL_ENV``, thread counts
such as ``OMP_NUM_THREADS``, the GPU selection and model-cache locations, ...) are copied from this
process; everything else (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_*``, any other key, token or
password) is not in the worker's ``os.environ``. A variable the agent needs on purpose is named with
``worker_env=("NAME", ...)`` (``--agent-env NAME``). This is hygiene, not a wall: a worker run as the
same OS user can still read this process's ``/proc/<pid>/environ`` and ``cmdline`` (and, as root or
with ptrace rights, its memory); only ``worker_command`` isolation (another user, a container) keeps
secrets from code you do not trust (SECURITY.md).

**Replies are plain data.** The evaluator sends pickles of plain data (:func:`plain_data` checks them);
the worker replies in JSON, parsed with :func:`json.loads` only. An action therefore arrives as JSON
values (numpy arrays as lists, tuples as lists); the env parses them as it parses any action.

**Failures are the agent's.** Every request has a deadline (``call_timeout``, ``start_timeout``). An
agent that raises, does not answer in time, exits or sends a reply that is not plain data (or is larger
than ``max_reply_bytes``) raises :class:`AgentFailure` in the evaluator (after a timeout or a bad reply
the worker is killed), which :func:`~fwgym.agents.run_episode` treats as the agent's failure, as any
exception of an in-process agent. A dead worker is replaced at the next ``reset``: the next episode
starts with a fresh agent.

**Limits.** This is process separation: the worker's import guard refuses fwgym's data, case, env,
scorer, evaluation and baseline modules (:data:`DENIED_MODULES`), but code in the worker can read any
file its user may read, fwgym's packaged data files and the evaluator's ``/proc/<pid>/environ`` and
``cmdline`` included. For submissions you do not trust, start the worker as another user or in a
container without the data: ``worker_command`` (``--agent-worker-command``) replaces the command (see
SECURITY.md).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import pickle
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Mapping, Sequence

from fwgym.agents.isolation_worker import DENIED_MODULES, HEADER, FrameError, decode_reply, write_frame

__all__ = ["AgentFailure", "IsolatedAgent", "IsolatedAgentFactory", "RemoteObject", "WorkerProcess", "plain_data",
           "worker_argv", "worker_environ", "close_idle_workers", "WORKER_ENV", "WORKER_ENV_PREFIXES", "WORKER_SCRIPT",
           "DEFAULT_CALL_TIMEOUT",
           "DEFAULT_START_TIMEOUT", "DEFAULT_MAX_REPLY_BYTES", "DENIED_MODULES"]

#: the worker script (started by path: a clean interpreter that never runs ``fwgym/__init__``)
WORKER_SCRIPT = str(Path(__file__).with_name("isolation_worker.py"))
#: seconds an agent has to answer one request (``reset``, ``act``, ``end_episode``, ...)
DEFAULT_CALL_TIMEOUT = 60.0
#: seconds a worker has to start: a new interpreter, the agent's imports (e.g. torch) and its factory
DEFAULT_START_TIMEOUT = 300.0
#: largest reply accepted from a worker (bytes of JSON)
DEFAULT_MAX_REPLY_BYTES = 64 * 2**20
#: seconds a worker has to exit after ``("close",)`` before it is killed
_CLOSE_GRACE = 5.0
#: how many nested containers :func:`plain_data` follows
_MAX_DEPTH = 64


class AgentFailure(RuntimeError):
    """An isolated agent failed; the agent's failure, never an infrastructure error.

    Attributes:
        kind: ``"raised"`` (the agent's code raised; ``remote_type`` and ``remote_traceback`` say what),
            ``"timeout"`` (no answer within the deadline; the worker was killed), ``"exited"`` (the worker
            process ended), ``"bad_reply"`` (a reply that is not plain JSON data or too large; the worker
            was killed).
        remote_type: the dotted type name of the agent's exception (``kind == "raised"``), else ``None``.
        remote_traceback: its traceback as text, else ``""``.
    """

    def __init__(self, message: str, kind: str, remote_type: str | None = None, remote_traceback: str = ""):
        super().__init__(message)
        self.kind, self.remote_type, self.remote_traceback = kind, remote_type, remote_traceback


def worker_argv(command: str | Sequence[str] | None = None) -> list[str]:
    """The command line that starts a worker.

    Args:
        command: ``None`` (default: ``[sys.executable, WORKER_SCRIPT]``), or a command that starts
            :data:`WORKER_SCRIPT` (or a copy of it) elsewhere, as a list or a shell-like string, e.g.
            ``"sudo -u fwagent /usr/bin/python3 /opt/fwgym/isolation_worker.py"`` or
            ``"docker run --rm -i --network none -v /agents:/agents:ro agent-image python /worker.py"``.
            The protocol runs over the command's stdin and stdout.

    Raises:
        ValueError: an empty command.
    """
    if command is None:
        return [sys.executable, WORKER_SCRIPT]
    argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    if not argv:
        raise ValueError("the worker command is empty")
    return argv


#: the environment variables a worker gets from the evaluating process (when set there), by exact name: what
#: a Python interpreter, its packages (``PYTHONPATH``, ``VIRTUAL_ENV``, ``CONDA_PREFIX``, ``LD_LIBRARY_PATH``
#: for native libraries) and numeric libraries (thread counts, GPU selection, model-cache locations) need to
#: run the agent; no key, token, password or endpoint setting. Anything else is passed only on purpose:
#: ``worker_env`` (``--agent-env NAME``).
WORKER_ENV: tuple[str, ...] = (
    # the process: executables, user, home, temporary files, time zone
    "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TEMP", "TMP", "TZ", "LANG", "LANGUAGE",
    # the interpreter and where it finds the agent's packages
    "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
    "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONWARNINGS", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "LD_LIBRARY_PATH",
    # thread counts of the numeric libraries (torch, numpy's BLAS, numexpr)
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
    # accelerators and where models are cached (locations only: HF_TOKEN is not here)
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TORCH_HOME", "XDG_CACHE_HOME",
    "MPLBACKEND", "MPLCONFIGDIR",
    # Windows: what its interpreter needs to start
    "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
)
#: name prefixes also copied: the locale categories (``LC_ALL``, ``LC_CTYPE``, ...)
WORKER_ENV_PREFIXES: tuple[str, ...] = ("LC_",)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_names(names: Sequence[str] | str | None) -> tuple[str, ...]:
    """``names`` (variables passed to a worker on purpose) checked: a sequence of variable names.

    Raises:
        ValueError: a string instead of a sequence, or a name that is not an environment variable name.
    """
    if names is None:
        return ()
    if isinstance(names, (str, bytes)):
        raise ValueError(f"worker_env must be a sequence of variable names, e.g. ['MY_SETTING'], got {names!r}")
    out = []
    for n in names:
        if not isinstance(n, str) or not _ENV_NAME.fullmatch(n):
            raise ValueError(f"worker_env: {n!r} is not an environment variable name (letters, digits, _; "
                             "give the name, not NAME=VALUE: the value is read from this process's environment)")
        if n not in out:
            out.append(n)
    return tuple(out)


def worker_environ(environ: Mapping[str, str] | None = None, extra: Sequence[str] = ()) -> dict[str, str]:
    """The environment a worker starts with: from this process's environment (or ``environ``), only the
    variables named in :data:`WORKER_ENV` or starting with a prefix of :data:`WORKER_ENV_PREFIXES`, and the
    variables named in ``extra`` (passed on purpose, e.g. a setting of the agent, or a key it is meant to use).

    Args:
        environ: the environment to scrub (default ``os.environ``).
        extra: names of further variables to pass (each must be set in ``environ``).

    Returns:
        ``{name: value}``; nothing else: ``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_*`` and every other variable
        not named are left out.

    Raises:
        ValueError: a name in ``extra`` that is not a variable name, or not set.
    """
    env = os.environ if environ is None else environ
    extra = _env_names(extra)
    unset = [n for n in extra if n not in env]
    if unset:
        raise ValueError(f"worker_env names {unset}, which are not set in this environment; set them, or do not "
                         "ask to pass them to the agent's worker")
    allowed = set(WORKER_ENV) | set(extra)
    return {k: v for k, v in env.items() if k in allowed or k.startswith(WORKER_ENV_PREFIXES)}


def plain_data(obj: Any, _depth: int = 0) -> Any:
    """``obj`` checked to be plain data for a worker: dicts (any mapping), lists, tuples, strings, bytes,
    numbers, booleans, ``None``, numpy arrays of a non-object dtype and numpy scalars. Mappings become
    dicts; everything else is returned as is.

    Raises:
        TypeError: anything else (e.g. an env, a case, a function), or nesting deeper than 64 levels.
    """
    if obj is None or isinstance(obj, (str, bytes, bool, int, float)):
        return obj
    if _depth > _MAX_DEPTH:
        raise TypeError("data nested too deeply for an isolated agent")
    if isinstance(obj, Mapping):
        return {plain_data(k, _depth + 1): plain_data(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(plain_data(v, _depth + 1) for v in obj)
    if isinstance(obj, list):
        return [plain_data(v, _depth + 1) for v in obj]
    if type(obj).__module__ == "numpy":
        dtype = getattr(obj, "dtype", None)
        if dtype is not None and not dtype.hasobject:
            return obj
    raise TypeError(f"a {type(obj).__module__}.{type(obj).__qualname__} is not plain data; an isolated agent "
                    "receives only observations, the reset info and records")


def _ready(fd: int, event: int, timeout: float) -> bool:
    """Whether ``fd`` is ready for ``event`` (``select.POLLIN`` / ``POLLOUT``; hang-up and errors count as
    ready, so the next read sees the end) within ``timeout`` seconds."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(max(0, int(timeout * 1000) + 1)))


class WorkerProcess:
    """One worker process speaking the protocol of :mod:`fwgym.agents.isolation_worker`.

    Args:
        command: the argv (:func:`worker_argv`).
        spec: the ``init`` spec (target, kwargs, ...).
        start_timeout: seconds for the worker to start and make the object.
        max_reply_bytes: largest reply accepted.
        env: the worker's environment (default :func:`worker_environ` of this process's).

    Attributes:
        hello: the object's hello (``name``, ``requires_hindsight``, ``has``, ``info``, ``pid``).

    Raises:
        AgentFailure: the worker did not start, its ``init`` failed (kind ``"raised"``: e.g. the agent's
            module does not import, or its factory raised), it timed out or exited.
        OSError: the command cannot be run.
    """

    def __init__(self, command: Sequence[str], spec: dict, *, start_timeout: float = DEFAULT_START_TIMEOUT,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, env: Mapping[str, str] | None = None):
        self.command = list(command)
        self.max_reply_bytes = int(max_reply_bytes)
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._dead_reason: str | None = None
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                     close_fds=True, start_new_session=os.name == "posix",
                                     env=worker_environ() if env is None else dict(env))
        self.hello = self.request(("init", spec), start_timeout, what="start")

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    @property
    def alive(self) -> bool:
        """Whether the worker can take requests."""
        return self._dead_reason is None and self.proc.poll() is None

    def _read(self, n: int, deadline: float) -> bytes:
        """``n`` bytes of the worker's output before ``deadline`` (TimeoutError), or EOFError."""
        stream = self.proc.stdout
        if os.name != "posix":  # pragma: no cover - no select() on pipes: a plain blocking read
            data = stream.read(n)
            if len(data) < n:
                raise EOFError
            return data
        fd, buf = stream.fileno(), bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not _ready(fd, select.POLLIN, left):
                raise TimeoutError
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def _read_reply(self, deadline: float) -> bytes:
        """One reply frame (at most ``max_reply_bytes``; FrameError beyond, before reading it)."""
        (n,) = HEADER.unpack(self._read(HEADER.size, deadline))
        if n > self.max_reply_bytes:
            raise FrameError(f"a reply of {n} bytes exceeds the limit of {self.max_reply_bytes} bytes")
        return self._read(n, deadline) if n else b""

    def _write(self, payload: bytes, deadline: float) -> None:
        """Send one frame before ``deadline`` (a worker that stops reading cannot block the evaluator)."""
        data = memoryview(HEADER.pack(len(payload)) + payload)
        fd = self.proc.stdin.fileno()
        if os.name != "posix":  # pragma: no cover - no select() on pipes: a plain blocking write
            write_frame(self.proc.stdin, payload)
            return
        os.set_blocking(fd, False)
        while data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if _ready(fd, select.POLLOUT, left):
                try:
                    n = os.write(fd, data)
                except BlockingIOError:
                    continue
                data = data[n:]

    def request(self, message: tuple, timeout: float, what: str | None = None) -> Any:
        """Send one request and return the ``ok`` value of the reply.

        Raises:
            AgentFailure: the agent raised (kind ``"raised"``; the worker lives on); no reply within
                ``timeout`` seconds (``"timeout"``), a reply that is not plain data or too large
                (``"bad_reply"``): the worker is killed; the worker is gone (``"exited"``).
            RuntimeError: the worker belongs to another process (this one is a fork of its owner).
        """
        what = what or str(message[0] if message[0] != "call" else message[1])
        if os.getpid() != self._owner:
            raise RuntimeError("this worker belongs to the process that started it (this process is a fork)")
        with self._lock:
            if not self.alive:
                raise AgentFailure(f"the agent's worker is gone ({self._death()})", "exited")
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            deadline = time.monotonic() + float(timeout)
            try:
                self._write(payload, deadline)
            except TimeoutError:
                self.kill(f"it did not read the {what} request within {timeout:g} s")
                raise AgentFailure(f"the agent did not answer {what} within {timeout:g} s", "timeout") from None
            except OSError:
                raise AgentFailure(f"the agent's worker is gone ({self._ended()})", "exited") from None
            try:
                item = self._read_reply(deadline)
            except TimeoutError:
                self.kill(f"it did not answer {what} within {timeout:g} s")
                raise AgentFailure(f"the agent did not answer {what} within {timeout:g} s (worker killed)",
                                   "timeout") from None
            except (EOFError, OSError):
                raise AgentFailure(f"the agent's worker exited during {what} ({self._ended()})", "exited") from None
            except FrameError as exc:
                self.kill(f"bad reply: {exc}")
                raise AgentFailure(f"the agent's reply to {what} was refused: {exc} (worker killed)",
                                   "bad_reply") from None
            try:
                reply = decode_reply(item)
            except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                self.kill(f"bad reply: {exc}")
                raise AgentFailure(f"the agent's reply to {what} is not plain JSON data: {exc} (worker killed)",
                                   "bad_reply") from None
        if "error" in reply:
            err = reply["error"]
            raise AgentFailure(f"the agent raised {err['type']} in {what}: {err['message']}", "raised",
                               remote_type=err["type"], remote_traceback=err["traceback"])
        return reply["ok"]

    def _ended(self) -> str:
        """How the worker ended (it closed its output); its pipes are closed."""
        how = self._death()
        self._close_pipes()
        return how

    def _death(self) -> str:
        if self._dead_reason is not None:
            return f"killed: {self._dead_reason}"
        try:
            code = self.proc.wait(timeout=_CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            return "not answering"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def kill(self, reason: str = "killed") -> None:
        """Kill the worker (and its process group) now."""
        if self._dead_reason is None:
            self._dead_reason = reason
        if self.proc.poll() is None:
            try:
                if os.name == "posix":
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:  # pragma: no cover
                    self.proc.kill()
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=_CLOSE_GRACE)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait
                pass
        self._close_pipes()

    def close(self) -> None:
        """Ask the worker to exit (``("close",)``); kill it if it does not within a few seconds."""
        if os.getpid() != self._owner:
            self.abandon()
            return
        if self.alive:
            try:
                self.request(("close",), _CLOSE_GRACE)
                self.proc.wait(timeout=_CLOSE_GRACE)
            except (AgentFailure, subprocess.TimeoutExpired, RuntimeError):
                pass
        self.kill("closed")

    def abandon(self) -> None:
        """Forget the worker without signalling it (a forked child's copy): close this process's pipe ends."""
        self._dead_reason = self._dead_reason or "abandoned by a forked process"
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


class _Pool:
    """Idle workers of this process, by spec (see the module doc)."""

    def __init__(self):
        self._idle: dict[str, list[WorkerProcess]] = {}
        self._lock = threading.RLock()  # a finalizer may run (GC) while it is held

    def take(self, key: str) -> WorkerProcess | None:
        with self._lock:
            stack = self._idle.get(key, [])
            while stack:
                worker = stack.pop()
                if worker.alive:
                    return worker
        return None

    def give(self, key: str, box: list) -> None:
        worker, box[0] = box[0], None
        if worker is None:
            return
        if not worker.alive or os.getpid() != worker._owner:
            return
        with self._lock:
            self._idle.setdefault(key, []).append(worker)

    def close_all(self) -> None:
        with self._lock:
            workers = [w for stack in self._idle.values() for w in stack]
            self._idle.clear()
        for worker in workers:
            worker.close()

    def after_fork(self) -> None:
        self._lock = threading.RLock()  # a finalizer may run (GC) while it is held
        for stack in self._idle.values():
            for worker in stack:
                worker.abandon()
        self._idle.clear()


_POOL = _Pool()
atexit.register(_POOL.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.after_fork)


def close_idle_workers() -> None:
    """Close every idle pooled worker of this process now (they are also closed when the process exits)."""
    _POOL.close_all()


def _fwgym_version() -> str | None:
    pkg = sys.modules.get("fwgym")
    return getattr(pkg, "__version__", None)


class RemoteObject:
    """An object made and hosted in a worker process; its methods are called with plain data and answer
    plain data.

    Args:
        target: ``"package.module:factory"``, ``"file.py:factory"`` or ``"builtin:sb3_policy"`` (see
            :func:`fwgym.agents.isolation_worker.load_target`).
        kwargs: keyword arguments of the factory (plain data).
        fresh: a reused pooled worker makes a new object (``True``, for agents with state) or keeps its
            object (``False``, for stateless objects such as a loaded policy).
        call_timeout, start_timeout: deadlines in seconds.
        worker_command: see :func:`worker_argv`.
        max_reply_bytes: largest reply accepted.
        guard: install the worker's import guard (default ``True``; tests turn it off to show what it stops).
        worker_env: names of environment variables to pass to the worker on purpose, besides the
            allow-list :data:`WORKER_ENV` (:func:`worker_environ`); their values are read now.

    Attributes:
        hello: the hosted object's hello (see :func:`fwgym.agents.isolation_worker.describe`).

    Raises:
        AgentFailure: the worker cannot start or make the object. TypeError: kwargs are not plain data.
        ValueError: a ``worker_env`` name that is not set, or not a variable name.
    """

    def __init__(self, target: str, kwargs: Mapping | None = None, *, fresh: bool = True,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 guard: bool = True, worker_env: Sequence[str] = ()):
        if float(call_timeout) <= 0 or float(start_timeout) <= 0:
            raise ValueError("call_timeout and start_timeout must be > 0 seconds")
        self._env = worker_environ(extra=worker_env)
        self.target, self.fresh = str(target), bool(fresh)
        self.call_timeout, self.start_timeout = float(call_timeout), float(start_timeout)
        self.max_reply_bytes = int(max_reply_bytes)
        self._command = worker_argv(worker_command)
        self._spec = {"target": self.target, "kwargs": plain_data(dict(kwargs or {})), "cwd": os.getcwd(),
                      "fwgym_version": _fwgym_version(), "guard": bool(guard), "denied": list(DENIED_MODULES)}
        env_digest = hashlib.sha256(json.dumps(self._env, sort_keys=True).encode()).hexdigest()  # no value in the key
        self._key = json.dumps({"spec": self._spec, "command": self._command, "max": self.max_reply_bytes,
                                "env": env_digest}, sort_keys=True, default=repr)
        self._box: list = [None]
        self._finalizer = weakref.finalize(self, _POOL.give, self._key, self._box)
        self.hello: dict = self._connect()

    def _connect(self) -> dict:
        worker = _POOL.take(self._key)
        if worker is not None:
            try:
                hello = worker.request(("new",), self.start_timeout) if self.fresh else worker.hello
            except AgentFailure:
                if worker.alive:  # its factory raised: the worker may go back to the pool
                    _POOL.give(self._key, [worker])
                raise
        else:
            worker = WorkerProcess(self._command, self._spec, start_timeout=self.start_timeout,
                                   max_reply_bytes=self.max_reply_bytes, env=self._env)
            hello = worker.hello
        if not isinstance(hello, dict) or not isinstance(hello.get("has"), dict) or "name" not in hello:
            worker.kill("bad hello")
            raise AgentFailure(f"the worker's hello is malformed: {str(hello)[:200]}", "bad_reply")
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

    def _worker(self) -> WorkerProcess:
        worker = self._box[0]
        if worker is None:
            raise AgentFailure("the agent's worker is gone (closed)", "exited")
        return worker

    def call(self, method: str, *args) -> Any:
        """``obj.method(*args)`` in the worker (arguments checked by :func:`plain_data`).

        Raises:
            AgentFailure: see :meth:`WorkerProcess.request`. TypeError: arguments that are not plain data.
        """
        return self._worker().request(("call", method, plain_data(args)), self.call_timeout)

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


class IsolatedAgent:
    """An agent whose code runs in a worker process; to :func:`fwgym.agents.run_episode` it is an agent
    like any other (see the module doc for what crosses the process boundary).

    Args:
        target: the agent's factory, ``"package.module:factory"`` or ``"path/to/file.py:factory"`` (a
            function or class returning an object with ``act(observation)``).
        kwargs: keyword arguments of the factory (plain data, e.g. JSON values).
        name: policy name of the records (default: the hosted agent's ``name``, else its class name).
        call_timeout: seconds per call (default :data:`DEFAULT_CALL_TIMEOUT`).
        start_timeout: seconds to start a worker and make the agent (default :data:`DEFAULT_START_TIMEOUT`).
        worker_command: how to start the worker (:func:`worker_argv`; e.g. as another user or in a container).
        max_reply_bytes: largest reply accepted (default 64 MiB).
        worker_env: names of environment variables the agent needs, passed to its worker on purpose (its
            environment is otherwise the allow-list :data:`WORKER_ENV`: no API keys or tokens).

    Attributes:
        isolated: ``True`` (:func:`fwgym.agents.run_episode` never passes hindsight to it).
        requires_hindsight: ``False``; a hosted agent that declares ``requires_hindsight`` is refused.
        target, name, pid (the current worker's process id).

    Methods ``reset(info)``, ``act(observation)``, ``end_episode(record)`` and, only when the hosted agent
    has one, ``episode_stats()`` forward to the hosted agent and raise :class:`AgentFailure` when it fails.

    Raises:
        ValueError: the hosted object has no ``act``, or it requires hindsight; a ``worker_env`` name
            that is not set.
        AgentFailure: the worker cannot start or the factory fails (``kind``: see :class:`AgentFailure`).
    """

    isolated = True
    requires_hindsight = False

    def __init__(self, target: str, kwargs: Mapping | None = None, *, name: str | None = None,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 guard: bool = True, worker_env: Sequence[str] = ()):
        self.target = str(target)
        self._remote = RemoteObject(target, kwargs, fresh=True, call_timeout=call_timeout,
                                    start_timeout=start_timeout, worker_command=worker_command,
                                    max_reply_bytes=max_reply_bytes, guard=guard, worker_env=worker_env)
        self._check(self._remote.hello)
        self.name = str(name) if name else self._remote.hello["name"]

    def _check(self, hello: dict) -> None:
        if not hello["has"].get("act"):
            self._remote.close()
            raise ValueError(f"{self.target} made a {hello['name']} without an act(observation) method: not an agent")
        if hello.get("requires_hindsight"):
            self._remote.close()
            raise ValueError(f"{self.target} made an agent that declares requires_hindsight: an agent given as code "
                             "runs isolated and never receives hindsight (only fwgym's registered oracles do, "
                             "through run_episode's explicit hindsight grant; see SECURITY.md)")

    @property
    def pid(self) -> int | None:
        """Process id of the current worker."""
        return self._remote.pid

    def reset(self, info: Mapping) -> None:
        """Start an episode: restart the worker (a fresh agent) if the last one died, then forward ``reset``."""
        if self._remote.ensure_alive():
            self._check(self._remote.hello)
        self._remote.reset(info)

    def act(self, observation: Mapping) -> Any:
        """The hosted agent's action for ``observation`` (JSON values: a dict or a string)."""
        return self._remote.call("act", observation)

    def end_episode(self, record: Mapping) -> None:
        """Forward the finished episode's record (nothing when the hosted agent has no ``end_episode``, or
        its worker died during the episode)."""
        if self._remote.alive and self._remote.hello["has"].get("end_episode"):
            self._remote.call("end_episode", dict(record))

    @property
    def episode_stats(self):
        """The hosted agent's ``episode_stats`` (``None`` when its worker died during the episode); an
        ``AttributeError`` (so ``getattr(agent, "episode_stats", None)`` is ``None``) when it has none."""
        if not self._remote.hello["has"].get("episode_stats"):
            raise AttributeError(f"{self.name} has no episode_stats")
        return self._episode_stats

    def _episode_stats(self) -> Any:
        if not self._remote.alive:
            return None
        return self._remote.call("episode_stats")

    def close(self) -> None:
        """Done with this agent: its worker goes back to this process's pool (as when the agent is collected),
        where the next agent of the same spec reuses it with a fresh agent object; idle workers end with the
        process (or :func:`close_idle_workers`)."""
        self._remote.release()

    def terminate(self) -> None:
        """Shut this agent's worker down now."""
        self._remote.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IsolatedAgent({self.target!r}, name={self.name!r}, pid={self.pid})"


class IsolatedAgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of :class:`IsolatedAgent` (what
    ``fwgym evaluate --agent module:factory`` builds): a ``dict`` of :class:`IsolatedAgent`'s arguments
    (``worker_env`` holds variable names only, never values: the dict goes into the run manifest).

    ``source`` (``{"file": absolute path, "sha256": hex}``, set by ``fwgym evaluate --agent``: the agent's
    file, or for ``module:factory`` the module's source file) identifies the agent's code in that
    description, so ``--resume`` refuses a run whose agent file changed; it is not passed to
    :class:`IsolatedAgent`, and each call checks that the file still has that sha256 (a worker started
    after an edit mid-run would run other code), raising ``ValueError`` naming the file otherwise. Absent
    when not given.

    Attributes:
        isolated: ``True`` (agents of this factory run in worker processes).

    Example::

        factory = IsolatedAgentFactory("mypkg.agents:make_agent", {"depth": 2}, call_timeout=10)
        records = fwgym.evaluation.evaluate([factory], split="test", limit=5)
    """

    isolated = True

    def __init__(self, target: str, kwargs: Mapping | None = None, *, name: str | None = None,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 worker_env: Sequence[str] = (), source: Mapping | None = None):
        super().__init__(target=str(target), kwargs=dict(kwargs or {}), name=name, call_timeout=float(call_timeout),
                         start_timeout=float(start_timeout),
                         worker_command=None if worker_command is None else worker_argv(worker_command),
                         max_reply_bytes=int(max_reply_bytes))
        names = _env_names(worker_env)
        if names:  # only when given: the description of a factory without it is what it was before the option
            self["worker_env"] = list(names)
        if source is not None:  # only when given, as worker_env
            self["source"] = dict(source)

    def __call__(self) -> IsolatedAgent:
        source = self.get("source")
        if source is not None:
            try:
                with open(source["file"], "rb") as f:
                    now = hashlib.sha256(f.read()).hexdigest()
            except OSError as exc:
                raise ValueError(f"the agent's file {source['file']} cannot be read any more: {exc}") from None
            if now != source["sha256"]:
                raise ValueError(f"the agent's file {source['file']} changed since the run started (sha256 "
                                 f"{source['sha256'][:12]} -> {now[:12]}): restore it, or start a new run")
        return IsolatedAgent(**{k: v for k, v in self.items() if k != "source"})
