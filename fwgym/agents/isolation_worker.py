"""The worker half of fwgym's agent isolation (DESIGN §9, trust): a standalone script that hosts one agent
(or one SB3 policy) in its own interpreter and answers the evaluating process over a pipe.

The evaluating half is :mod:`fwgym.agents.isolation`, which starts this file as
``python /path/to/fwgym/agents/isolation_worker.py`` (a clean interpreter: never a fork of the evaluator,
which holds the case data, and never ``python -m fwgym...``, which would run ``fwgym/__init__`` and load
the envs and their data). The file imports only the standard library (numpy arrives with the first
observation; stable-baselines3 only for the built-in SB3 policy), so it can also run where fwgym is not
installed at all, e.g. in a container that holds only the agent's code and its dependencies
(SECURITY.md, "Code agents run isolated").

**Before any agent code is imported** the worker

* keeps the protocol's pipes to itself: the agent's ``sys.stdin`` reads ``/dev/null`` and its
  ``sys.stdout`` writes to stderr, so a ``print`` cannot corrupt the protocol;
* removes this file's directory from ``sys.path`` (it is ``fwgym/agents/``, whose ``openai.py`` would
  otherwise shadow the ``openai`` package) and puts the evaluator's working directory first (as
  ``python -m``, uvicorn or gunicorn do for ``module:attr`` targets);
* installs an import guard (:class:`ImportGuard`) that refuses the fwgym modules holding case data,
  targets, hindsight or the scorer (:data:`DENIED_MODULES`) and everything that imports them; and
* makes ``import fwgym`` a bare package (its ``__path__`` only): ``fwgym/__init__`` is never run, so no
  env is registered and no data file is read. Modules that need no case data stay importable
  (``fwgym.agents.base``, ``fwgym.core.contract``, ``fwgym.core.optimizer``, ``fwgym.forecasters.classical``, ...).

This is process separation, not a sandbox: code in the worker can still open files it has permission
to read (fwgym's packaged data files included) and remove the guard. For submissions you do not trust,
run the worker as a user, or in a container, that cannot read the data (SECURITY.md).

**Protocol** (one request, one reply, strictly alternating). A frame is a 4-byte big-endian length and
the payload. Requests from the evaluator are pickles of plain data (tuples, dicts, lists, strings,
numbers, numpy arrays; the worker trusts its evaluator). Replies are UTF-8 JSON, so the evaluator parses
them as plain data and never unpickles anything the agent made:

================================= ==========================================================================
request                           reply ``{"ok": value}`` or ``{"error": {"type", "message", "traceback"}}``
================================= ==========================================================================
``("init", spec)``                the hello (:func:`describe`) of the object ``spec`` names
``("new",)``                      a fresh object from the same factory; its hello
``("reset", info)``               ``None`` (``reset(info)``, ``reset()`` or nothing, as :func:`call_reset`)
``("call", method, args)``        ``getattr(obj, method)(*args)`` (``act``, ``end_episode``, ``predict``...)
``("close",)``                    ``None``; the worker then exits 0 (it also exits at end of input)
================================= ==========================================================================

``spec`` is ``{"target": "package.module:factory" | "/abs/path/file.py:factory" | "builtin:sb3_policy",
"kwargs": {...}, "cwd": DIR, "fwgym_version": STR, "guard": true}``; the target is called with the kwargs
and must return the object (an agent: anything with ``act``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import inspect
import json
import os
import pickle
import struct
import sys
import traceback
import types
from typing import Any, BinaryIO

#: version of the request/reply protocol (sent in every hello)
PROTOCOL_VERSION = 1
#: the frame header: payload length, 4 bytes big-endian
HEADER = struct.Struct(">I")
#: fwgym modules an isolated agent may not import (nor any module below them): the packaged data and its
#: loaders, cases (targets), the envs (hindsight), the tools' episode ledger, the scorer and sigma, the
#: evaluation and report layers, the baselines (the oracles read hindsight) and the CLI
DENIED_MODULES: tuple[str, ...] = (
    "fwgym.data", "fwgym.domains", "fwgym.config", "fwgym.core.cases", "fwgym.core.scorer", "fwgym.core.scoring", "fwgym.context",
    "fwgym.envs", "fwgym.tools", "fwgym.evaluation", "fwgym.baselines", "fwgym.wrappers", "fwgym.rl", "fwgym.report",
    "fwgym.plots", "fwgym.cli",
)
#: most characters of an error message / traceback in a reply
MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS = 2000, 8000


class FrameError(RuntimeError):
    """A frame that is larger than allowed, or input that ends inside a frame."""


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    """Write one frame (header + ``payload``) and flush.

    Raises:
        FrameError: ``payload`` longer than 4 GiB - 1. OSError (e.g. BrokenPipeError): the other end is gone.
    """
    if len(payload) > 0xFFFFFFFF:
        raise FrameError(f"a frame of {len(payload)} bytes is too large")
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got == 0:
                return None
            raise FrameError(f"input ended after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO, max_bytes: int | None = None) -> bytes | None:
    """Read one frame's payload; ``None`` at end of input before a frame starts.

    Raises:
        FrameError: the frame announces more than ``max_bytes`` bytes (nothing more is read), or the input
            ends inside the frame.
    """
    head = _read_exactly(stream, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if max_bytes is not None and n > max_bytes:
        raise FrameError(f"a reply of {n} bytes exceeds the limit of {max_bytes} bytes")
    if n == 0:
        return b""
    body = _read_exactly(stream, n)
    if body is None:
        raise FrameError(f"input ended before a frame of {n} bytes")
    return body


def _plain_default(obj: Any):
    """``json.dumps`` hook: numpy arrays and scalars become lists and numbers; anything else is refused."""
    tolist = getattr(obj, "tolist", None)
    if callable(tolist) and type(obj).__module__ == "numpy":
        return tolist()
    raise TypeError(f"a {type(obj).__module__}.{type(obj).__qualname__} is not plain data (JSON values, numpy "
                    "arrays and numbers only)")


def encode_reply(value: Any = None, error: BaseException | None = None) -> bytes:
    """The JSON payload of a reply: ``{"ok": value}``, or ``{"error": ...}`` describing ``error``.

    A ``value`` that is not plain data becomes an error reply (``TypeError``) instead.
    """
    if error is None:
        try:
            return json.dumps({"ok": value}, default=_plain_default, allow_nan=True).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            error = TypeError(f"the agent returned a value that cannot be sent to the evaluator: {exc}")
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return json.dumps({"error": {"type": f"{type(error).__module__}.{type(error).__qualname__}",
                                 "message": str(error)[:MAX_ERROR_CHARS],
                                 "traceback": tb[-MAX_TRACEBACK_CHARS:]}}).encode("utf-8")


def decode_reply(payload: bytes) -> dict:
    """Parse a reply as plain data (JSON only; nothing is unpickled or executed).

    Returns:
        ``{"ok": value}`` or ``{"error": {"type": str, "message": str, "traceback": str}}``.

    Raises:
        ValueError: not UTF-8 JSON, or not one of the two reply shapes.
    """
    reply = json.loads(payload.decode("utf-8"))
    if not isinstance(reply, dict) or len(reply) != 1 or not ({"ok", "error"} & set(reply)):
        raise ValueError("a reply must be a JSON object with exactly one key, 'ok' or 'error'")
    if "error" in reply:
        err = reply["error"]
        if not isinstance(err, dict) or not all(isinstance(err.get(k), str) for k in ("type", "message", "traceback")):
            raise ValueError("an error reply must hold the strings 'type', 'message' and 'traceback'")
    return reply


class ImportGuard(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder that refuses to import the modules in ``denied`` and everything below them.

    Args:
        denied: dotted module names (default :data:`DENIED_MODULES`).
    """

    def __init__(self, denied: tuple[str, ...] = DENIED_MODULES):
        self.denied = tuple(denied)

    def refuses(self, name: str) -> bool:
        """Whether importing ``name`` is refused."""
        return any(name == d or name.startswith(d + ".") for d in self.denied)

    def find_spec(self, fullname, path=None, target=None):
        if self.refuses(fullname):
            raise ModuleNotFoundError(
                f"{fullname} is not available to an isolated agent: fwgym's case data, targets, hindsight and "
                "scorer stay in the evaluating process; the agent sees only its observations and the public "
                "reset info (see SECURITY.md)", name=fullname)
        return None


def install_guard(denied: tuple[str, ...] = DENIED_MODULES, fwgym_version: str | None = None) -> ImportGuard:
    """Install :class:`ImportGuard` first on ``sys.meta_path``, drop already imported denied modules, and make
    ``fwgym`` a bare package (``__path__`` only, its ``__init__`` never runs) if it is installed here.

    Returns:
        the guard.
    """
    guard = ImportGuard(denied)
    sys.meta_path.insert(0, guard)
    for name in [m for m in sys.modules if guard.refuses(m)]:
        del sys.modules[name]
    if "fwgym" not in sys.modules:
        spec = importlib.util.find_spec("fwgym")  # locates the package without running its __init__
        if spec is not None and spec.submodule_search_locations:
            pkg = types.ModuleType("fwgym", "fwgym inside an isolated agent worker: the package without its envs, "
                                            "case data or scorer (fwgym/__init__ is not run)")
            pkg.__path__ = list(spec.submodule_search_locations)
            pkg.__spec__ = spec
            pkg.__package__ = "fwgym"
            pkg.__version__ = fwgym_version
            sys.modules["fwgym"] = pkg
    return guard


def load_target(target: str):
    """The callable a target names: ``"package.module:attr"`` (``attr`` may be dotted) or
    ``"path/to/file.py:attr"`` (the file is loaded as a module named after it, its directory put first on
    ``sys.path`` as for a script).

    Raises:
        ValueError: a malformed target, or ``attr`` is missing or not callable.
        FileNotFoundError: no such file. ImportError: the module cannot be imported (or is refused).
    """
    module_name, sep, attr = str(target).rpartition(":")
    if not sep or not module_name or not attr or not all(p.isidentifier() for p in attr.split(".")):
        raise ValueError(f"an agent target is MODULE:FACTORY or FILE.py:FACTORY, got {target!r}")
    if module_name.endswith(".py") or os.sep in module_name or (os.altsep and os.altsep in module_name):
        path = os.path.abspath(module_name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no agent file {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        if not name.isidentifier():
            name = "fwgym_agent_file"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(path))
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name} has no attribute {attr!r} (target {target!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{target!r} is not callable (a factory returning an agent, or an agent class)")
    return obj


def _load_sb3(path: str, algo: str):
    if algo == "MaskablePPO":
        try:
            from sb3_contrib import MaskablePPO
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ValueError("algo 'MaskablePPO' needs sb3-contrib: pip install 'fwgym[rl]'") from exc
        return MaskablePPO.load(path, device="cpu")
    if algo != "PPO":
        raise ValueError(f"fwgym SB3 agents run PPO and MaskablePPO policies only, got {algo!r}")
    try:
        from stable_baselines3 import PPO
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ValueError("SB3 agents need stable-baselines3: pip install 'fwgym[rl]'") from exc
    return PPO.load(path, device="cpu")


class SB3Policy:
    """A stable-baselines3 PPO / MaskablePPO zip as a function from feature vectors to menu indices.

    Loading runs SB3's ``load``, which **unpickles** parts of the zip (arbitrary code for a crafted
    file): :class:`fwgym.agents.sb3.SB3Agent` loads it here in-process only when asked to
    (``isolated=False``), and otherwise in an isolated worker (the built-in target ``builtin:sb3_policy``).

    Args:
        path: the model zip. algo: ``"PPO"`` or ``"MaskablePPO"``.
        deterministic: the most likely entry (default) instead of a sample.

    Raises:
        ValueError: another algorithm, or stable-baselines3 / sb3-contrib missing.
    """

    def __init__(self, path: str, algo: str, deterministic: bool = True):
        self.algo, self.deterministic = algo, bool(deterministic)
        self.model = _load_sb3(str(path), algo)

    def describe(self) -> dict:
        """``{"algo", "observation_shape": [int, ...], "n_actions": int | None}`` of the loaded model."""
        shape = getattr(self.model.observation_space, "shape", None) or ()
        n = getattr(self.model.action_space, "n", None)
        return {"algo": self.algo, "observation_shape": [int(s) for s in shape], "n_actions": None if n is None else int(n)}

    def predict(self, features, action_masks=None) -> int:
        """The menu index for one feature vector ((n_features,) float32), with the action mask ((n_actions,)
        bool) for MaskablePPO."""
        if self.algo == "MaskablePPO":
            action, _ = self.model.predict(features, deterministic=self.deterministic, action_masks=action_masks)
        else:
            action, _ = self.model.predict(features, deterministic=self.deterministic)
        import numpy as np

        return int(np.asarray(action).reshape(-1)[0])


#: targets built into the worker (``"builtin:NAME"``)
BUILTINS = {"sb3_policy": SB3Policy}


def _takes_argument(fn) -> bool:
    """Whether ``fn`` takes a positional parameter (the rule of :func:`fwgym.agents.base.reset_agent`)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def call_reset(obj: Any, info: dict) -> None:
    """``obj.reset(info)``, or ``obj.reset()`` when its ``reset`` takes no positional parameter, or nothing
    (the dispatch of :func:`fwgym.agents.base.reset_agent`, which the worker cannot import when fwgym is
    not installed where it runs)."""
    reset = getattr(obj, "reset", None)
    if not callable(reset):
        return
    if _takes_argument(reset):
        reset(info)
    else:
        reset()


def describe(obj: Any) -> dict:
    """The hello of a hosted object: ``{"protocol", "pid", "name", "requires_hindsight", "has": {method: bool},
    "info"}`` (``info``: the object's ``describe()`` if it has one, else ``None``)."""
    has = {m: callable(getattr(obj, m, None)) for m in ("act", "reset", "end_episode", "episode_stats", "predict")}
    info = obj.describe() if callable(getattr(obj, "describe", None)) else None
    return {"protocol": PROTOCOL_VERSION, "pid": os.getpid(), "name": str(getattr(obj, "name", type(obj).__name__)),
            "requires_hindsight": bool(getattr(obj, "requires_hindsight", False)), "has": has, "info": info}


class _Host:
    """The worker's state: the factory and the object it made."""

    def __init__(self):
        self.factory = None
        self.kwargs: dict = {}
        self.obj = None

    def init(self, spec: dict) -> dict:
        if spec.get("guard", True):
            install_guard(tuple(spec.get("denied") or DENIED_MODULES), spec.get("fwgym_version"))
        cwd = spec.get("cwd")
        if cwd and cwd not in sys.path:
            sys.path.insert(0, cwd)
        target = str(spec["target"])
        if target.startswith("builtin:"):
            name = target[len("builtin:"):]
            if name not in BUILTINS:
                raise ValueError(f"unknown built-in target {target!r}; known: {sorted(BUILTINS)}")
            self.factory = BUILTINS[name]
        else:
            self.factory = load_target(target)
        self.kwargs = dict(spec.get("kwargs") or {})
        return self.new()

    def new(self) -> dict:
        if self.factory is None:
            raise RuntimeError("the worker was not initialised")
        self.obj = None
        self.obj = self.factory(**self.kwargs)
        return describe(self.obj)

    def handle(self, request: tuple):
        op = request[0]
        if op == "init":
            return self.init(request[1])
        if op == "new":
            return self.new()
        if self.obj is None:
            raise RuntimeError(f"{op!r} before the object was made")
        if op == "reset":
            return call_reset(self.obj, request[1])
        if op == "call":
            method, args = request[1], tuple(request[2])
            if not isinstance(method, str) or method.startswith("_"):
                raise ValueError(f"cannot call {method!r}")
            return getattr(self.obj, method)(*args)
        raise ValueError(f"unknown request {op!r}")


def serve(inp: BinaryIO, out: BinaryIO) -> int:
    """Answer requests from ``inp`` on ``out`` until ``("close",)`` or end of input.

    An exception of the hosted code becomes an error reply and the worker goes on (``SystemExit`` ends
    it, with its code); a failed ``init`` ends it with status 1 after the reply.

    Returns:
        the exit status.
    """
    host = _Host()
    while True:
        frame = read_frame(inp)
        if frame is None:
            return 0
        request = pickle.loads(frame)
        if request[0] == "close":
            write_frame(out, encode_reply(None))
            return 0
        try:
            value = host.handle(request)
        except Exception as exc:  # the hosted code's failure: reported, never fatal (except in init)
            write_frame(out, encode_reply(error=exc))
            if request[0] == "init":
                return 1
            continue
        write_frame(out, encode_reply(value))


def main() -> int:
    """Entry point of ``python isolation_worker.py``: protocol on the original stdin/stdout (see module doc)."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # the agent's prints go to stderr
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    _exit_with_parent()
    return serve(proto_in, proto_out)


def _exit_with_parent(period: float = 1.0) -> None:
    """End this worker when the process that started it is gone, even while the agent's code is busy (its
    input closes too, but a hung agent never reads it)."""
    import threading
    import time

    parent = os.getppid()

    def watch():
        while True:
            time.sleep(period)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="fwgym-parent-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
