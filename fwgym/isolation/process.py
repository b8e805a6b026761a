"""Worker processes: a fresh interpreter that hosts code the evaluator should not run in its own
(DESIGN §9, trust; SECURITY.md, "Code agents run isolated"; docs/isolation.md).

* :class:`WorkerProcess` is one worker speaking the protocol of :mod:`fwgym.isolation.protocol` over its
  stdin and stdout, with a deadline on every request (``poll()`` on the pipes, POSIX).
* Workers are pooled per process (:func:`take_idle` / :func:`give_idle`): when the object a worker hosts
  is closed or garbage-collected, the worker goes back to an idle pool, and the next object of the same
  spec reuses it (:class:`fwgym.isolation.remote.RemoteObject`). A worker that hosted an episode of an
  agent without memory (``memory="none"``) never goes back. After a fork (``--workers`` processes) the
  child drops the pool it inherited.
* :func:`worker_argv` is the command that starts the worker script (``sys.executable`` on
  :data:`WORKER_SCRIPT`: not a fork, which would share this process's memory and its loaded case data), in
  a new session (Ctrl-C in the terminal reaches only the evaluator). A worker lives until it is closed,
  this process exits, its input closes or its parent is gone.
* :func:`worker_environ` is the scrubbed environment a worker starts with: only the variables of the
  allow-list :data:`WORKER_ENV` (``PATH``, ``HOME``, locale, ``TMPDIR``, ``PYTHONPATH``, ``VIRTUAL_ENV``,
  thread counts, the GPU selection and model-cache locations, ...); everything else (``OPENAI_API_KEY``,
  ``HF_TOKEN``, ``AWS_*``, any other key, token or password) is not in the worker's ``os.environ``. A
  variable the hosted code needs on purpose is named with ``worker_env=("NAME", ...)`` (``--agent-env``).

**Sandbox.** Where the kernel allows it (:mod:`fwgym.isolation.sandbox`: Landlock) a worker restricts
itself before any hosted code is imported; it then writes only in a private temporary directory made
here (its ``TMPDIR``, removed when the worker ends). Starting the first worker also makes this process
non-dumpable (:func:`fwgym.isolation.sandbox.protect_evaluator`).

**Failures.** An agent that raises, does not answer in time, exits or sends a reply that is not plain data
(or is larger than ``max_reply_bytes``) raises :class:`WorkerFailure` here (after a timeout or a bad reply
the worker and its process group are killed); the caller decides what that means (an agent's failure, a
forecast backend's error).
"""
from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, BinaryIO, Mapping, Sequence, cast

from fwgym.isolation.protocol import HEADER, FrameError, decode_reply, write_frame
from fwgym.isolation.sandbox import protect_evaluator

__all__ = ["WorkerFailure", "WorkerProcess", "worker_argv", "worker_environ", "env_names", "take_idle", "give_idle",
           "close_idle_workers", "WORKER_ENV", "WORKER_ENV_PREFIXES", "WORKER_SCRIPT", "WORKER_DIR",
           "DEFAULT_CALL_TIMEOUT", "DEFAULT_START_TIMEOUT", "DEFAULT_MAX_REPLY_BYTES"]

#: the folder of the worker script and the two modules it loads by path (protocol, sandbox): mount it whole
#: where a custom ``worker_command`` starts the worker (a container)
WORKER_DIR = str(Path(__file__).resolve().parent)
#: the worker script (started by path: a clean interpreter that never runs ``fwgym/__init__``)
WORKER_SCRIPT = str(Path(WORKER_DIR) / "worker.py")
#: seconds hosted code has to answer one request (``reset``, ``act``, ``end_episode``, ...)
DEFAULT_CALL_TIMEOUT = 60.0
#: seconds a worker has to start: a new interpreter, the hosted code's imports (e.g. torch) and its factory
DEFAULT_START_TIMEOUT = 300.0
#: largest reply accepted from a worker (bytes of JSON)
DEFAULT_MAX_REPLY_BYTES = 64 * 2**20
#: seconds a worker has to exit after ``("close",)`` before it is killed
_CLOSE_GRACE = 5.0


def _pipe(stream: IO[bytes] | None) -> BinaryIO:
    """A worker's stdin or stdout pipe (``Popen(stdin=PIPE, stdout=PIPE)`` always makes both).

    Raises:
        RuntimeError: the pipe is missing.
    """
    if stream is None:
        raise RuntimeError("the worker process has no stdin/stdout pipe")
    return cast(BinaryIO, stream)  # typeshed types Popen's pipes IO[bytes]; with bufsize=0 they are FileIO objects


class WorkerFailure(RuntimeError):
    """Hosted code failed (for an agent: the agent's failure, never an infrastructure error).

    Attributes:
        kind: ``"raised"`` (the hosted code raised; ``remote_type`` and ``remote_traceback`` say what),
            ``"timeout"`` (no answer within the deadline; the worker was killed), ``"exited"`` (the worker
            process ended), ``"bad_reply"`` (a reply that is not plain JSON data or too large; the worker
            was killed).
        remote_type: the dotted type name of the hosted code's exception (``kind == "raised"``), else ``None``.
        remote_message: its message, else ``""``.
        remote_traceback: its traceback as text, else ``""``.
    """

    def __init__(self, message: str, kind: str, remote_type: str | None = None, remote_traceback: str = "",
                 remote_message: str = ""):
        super().__init__(message)
        self.kind, self.remote_type, self.remote_traceback = kind, remote_type, remote_traceback
        self.remote_message = remote_message


def worker_argv(command: str | Sequence[str] | None = None) -> list[str]:
    """The command line that starts a worker.

    Args:
        command: ``None`` (default: ``[sys.executable, WORKER_SCRIPT]``), or a command that starts
            :data:`WORKER_SCRIPT` (or a copy of it) elsewhere, as a list or a shell-like string, e.g.
            ``"sudo -u fwagent /usr/bin/python3 /opt/fwgym/isolation/worker.py"`` or
            ``"docker run --rm -i --network none -v /agents:/agents:ro -v WORKER_DIR:/w:ro agent-image python /w/worker.py"``.
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


def env_names(names: Sequence[str] | str | None) -> tuple[str, ...]:
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
    extra = env_names(extra)
    unset = [n for n in extra if n not in env]
    if unset:
        raise ValueError(f"worker_env names {unset}, which are not set in this environment; set them, or do not "
                         "ask to pass them to the agent's worker")
    allowed = set(WORKER_ENV) | set(extra)
    return {k: v for k, v in env.items() if k in allowed or k.startswith(WORKER_ENV_PREFIXES)}


def numba_cache_subpath(py_file: str) -> str:
    """The folder below ``NUMBA_CACHE_DIR`` where numba caches the functions of ``py_file`` (its
    ``UserWideCacheLocator`` layout: the source folder's name, ``_``, the sha1 of the folder's path)."""
    folder = os.path.dirname(os.path.abspath(py_file))
    return "_".join([os.path.basename(folder), hashlib.sha1(folder.encode()).hexdigest()])


def seed_numba_cache(cache_dir: str, package_dir: str = str(Path(__file__).resolve().parents[1])) -> str:
    """Copy the numba caches that fwgym's modules have next to their sources (``__pycache__/*.nbi``,
    ``*.nbc``, written by this process's numba) into ``cache_dir`` in numba's user-wide layout, and return
    ``cache_dir`` (a sandboxed worker's ``NUMBA_CACHE_DIR``).

    A sandboxed worker cannot write next to fwgym's sources, where numba looks first; with
    ``NUMBA_CACHE_DIR`` in its private temporary directory it loads these copies (the optimizer's DP
    kernels: ~0.7 MB, instead of ~10 s of compilation per worker) and compiles anything else there. Copies,
    not links: a worker cannot change the evaluator's cache through them.
    """
    os.makedirs(cache_dir, exist_ok=True)
    for pycache in Path(package_dir).rglob("__pycache__"):
        files = [f for f in pycache.iterdir() if f.suffix in (".nbi", ".nbc")]
        if not files:
            continue
        target = Path(cache_dir) / numba_cache_subpath(str(pycache.parent / "x.py"))
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            try:
                shutil.copyfile(f, target / f.name)
            except OSError:
                continue
    return cache_dir


def _ready(fd: int, event: int, timeout: float) -> bool:
    """Whether ``fd`` is ready for ``event`` (``select.POLLIN`` / ``POLLOUT``; hang-up and errors count as
    ready, so the next read sees the end) within ``timeout`` seconds."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(max(0, int(timeout * 1000) + 1)))


class WorkerProcess:
    """One worker process speaking the protocol of :mod:`fwgym.isolation.protocol`.

    Args:
        command: the argv (:func:`worker_argv`).
        spec: the ``init`` spec (target, kwargs, sandbox, ...; see :mod:`fwgym.isolation.protocol`).
        start_timeout: seconds for the worker to start and make the object.
        max_reply_bytes: largest reply accepted.
        env: the worker's environment (default :func:`worker_environ` of this process's).
        private_tmp: make a private temporary directory for the worker (its ``TMPDIR``, ``TMP`` and
            ``TEMP``, writable in its sandbox: ``spec["sandbox"]["write"]`` gains it), removed when the
            worker ends.
        role: what the worker hosts, in messages (``"agent"``, ``"plug-in forecaster"``).

    Attributes:
        hello: the object's hello (``name``, ``requires_hindsight``, ``has``, ``info``, ``pid``, ``sandbox``).
        used: whether the hosted object was given a ``reset`` or a ``call`` (an episode, a forecast) since the
            worker started: a worker of an agent without memory is never reused after that.
        tmpdir: its private temporary directory, or ``None``.

    Raises:
        WorkerFailure: the worker did not start, its ``init`` failed (kind ``"raised"``: e.g. the hosted
            module does not import, its factory raised, or its sandbox could not be applied), it timed out
            or exited.
        OSError: the command cannot be run.
    """

    def __init__(self, command: Sequence[str], spec: dict, *, start_timeout: float = DEFAULT_START_TIMEOUT,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, env: Mapping[str, str] | None = None,
                 private_tmp: bool = False, role: str = "agent"):
        self.command = list(command)
        self.max_reply_bytes = int(max_reply_bytes)
        self.role = str(role)
        self.used = False
        self.single_use = False  # set by the owner: a used worker is then closed instead of pooled
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._dead_reason: str | None = None
        env = worker_environ() if env is None else dict(env)
        self.tmpdir: str | None = None
        if private_tmp:
            self.tmpdir = tempfile.mkdtemp(prefix="fwgym-worker-")
            env.update(TMPDIR=self.tmpdir, TMP=self.tmpdir, TEMP=self.tmpdir,
                       NUMBA_CACHE_DIR=seed_numba_cache(os.path.join(self.tmpdir, "numba")))
            if spec.get("sandbox") is not None:
                box = dict(spec["sandbox"])
                box["write"] = [*box.get("write", ()), self.tmpdir]
                spec = {**spec, "sandbox": box}
        protect_evaluator()  # before any worker exists: its /proc/<pid>/environ and mem are not for workers
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                         close_fds=True, start_new_session=os.name == "posix", env=env)
        except BaseException:
            self._remove_tmp()
            raise
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
        stream = _pipe(self.proc.stdout)
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
        stdin = _pipe(self.proc.stdin)
        fd = stdin.fileno()
        if os.name != "posix":  # pragma: no cover - no select() on pipes: a plain blocking write
            write_frame(stdin, payload)
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
            WorkerFailure: the hosted code raised (kind ``"raised"``; the worker lives on); no reply within
                ``timeout`` seconds (``"timeout"``), a reply that is not plain data or too large
                (``"bad_reply"``): the worker is killed; the worker is gone (``"exited"``).
            RuntimeError: the worker belongs to another process (this one is a fork of its owner).
        """
        what = what or str(message[0] if message[0] != "call" else message[1])
        if message[0] in ("reset", "call"):
            self.used = True
        if os.getpid() != self._owner:
            raise RuntimeError("this worker belongs to the process that started it (this process is a fork)")
        with self._lock:
            if not self.alive:
                raise WorkerFailure(f"the {self.role}'s worker is gone ({self._death()})", "exited")
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            deadline = time.monotonic() + float(timeout)
            try:
                self._write(payload, deadline)
            except TimeoutError:
                self.kill(f"it did not read the {what} request within {timeout:g} s")
                raise WorkerFailure(f"the {self.role} did not answer {what} within {timeout:g} s", "timeout") from None
            except OSError:
                raise WorkerFailure(f"the {self.role}'s worker is gone ({self._ended()})", "exited") from None
            try:
                item = self._read_reply(deadline)
            except TimeoutError:
                self.kill(f"it did not answer {what} within {timeout:g} s")
                raise WorkerFailure(f"the {self.role} did not answer {what} within {timeout:g} s (worker killed)",
                                   "timeout") from None
            except (EOFError, OSError):
                raise WorkerFailure(f"the {self.role}'s worker exited during {what} ({self._ended()})", "exited") from None
            except FrameError as exc:
                self.kill(f"bad reply: {exc}")
                raise WorkerFailure(f"the {self.role}'s reply to {what} was refused: {exc} (worker killed)",
                                   "bad_reply") from None
            try:
                reply = decode_reply(item)
            except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                self.kill(f"bad reply: {exc}")
                raise WorkerFailure(f"the {self.role}'s reply to {what} is not plain JSON data: {exc} (worker killed)",
                                   "bad_reply") from None
        if "error" in reply:
            err = reply["error"]
            raise WorkerFailure(f"the {self.role} raised {err['type']} in {what}: {err['message']}", "raised",
                                remote_type=err["type"], remote_traceback=err["traceback"], remote_message=err["message"])
        return reply["ok"]

    def _ended(self) -> str:
        """How the worker ended (it closed its output); its pipes are closed."""
        how = self._death()
        self._close_pipes()
        self._remove_tmp()
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
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        """Remove the private temporary directory (in the process that made it)."""
        if self.tmpdir is not None and os.getpid() == self._owner:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def close(self) -> None:
        """Ask the worker to exit (``("close",)``); kill it if it does not within a few seconds."""
        if os.getpid() != self._owner:
            self.abandon()
            return
        if self.alive:
            try:
                self.request(("close",), _CLOSE_GRACE)
                self.proc.wait(timeout=_CLOSE_GRACE)
            except (WorkerFailure, subprocess.TimeoutExpired, RuntimeError):
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
        if worker.used and worker.single_use:  # it hosted an episode of an agent without memory: never reused
            worker.kill("done: its agent keeps no memory between episodes")
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


def take_idle(key: str) -> WorkerProcess | None:
    """An idle pooled worker of spec ``key`` that is alive, or ``None``."""
    return _POOL.take(key)


def give_idle(key: str, box: list) -> None:
    """Return the worker in ``box[0]`` (``box[0]`` becomes ``None``) to the idle pool under ``key``, unless it
    is dead, belongs to another process, or is single-use and was used (then it is killed)."""
    _POOL.give(key, box)


def close_idle_workers() -> None:
    """Close every idle pooled worker of this process now (they are also closed when the process exits)."""
    _POOL.close_all()
