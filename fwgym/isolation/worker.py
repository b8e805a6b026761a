"""The worker half of fwgym's isolation (DESIGN §9, trust; docs/isolation.md): a standalone script that
hosts one object (an agent, an SB3 policy, a plug-in forecaster) in its own interpreter and answers the
evaluating process over a pipe (:mod:`fwgym.isolation.protocol`).

The evaluating half (:mod:`fwgym.isolation.process`) starts this file as ``python
/path/to/fwgym/isolation/worker.py`` (a clean interpreter: never a fork of the evaluator, which holds the case
data, and never ``python -m fwgym...``, which would run ``fwgym/__init__`` and load the envs and their data).
The file imports only the standard library and its two siblings ``protocol.py`` and ``sandbox.py``, loaded
by path (numpy arrives with the first observation; stable-baselines3 only for the built-in SB3 policy), so it
also runs where fwgym is not installed at all, e.g. in a container that holds only the agent's code, its
dependencies and a copy of this folder.

**Before any hosted code is imported** the worker

* keeps the protocol's pipes to itself: the hosted code's ``sys.stdin`` reads ``/dev/null`` and its
  ``sys.stdout`` writes to stderr, so a ``print`` cannot corrupt the protocol;
* removes this file's directory from ``sys.path`` and puts the evaluator's working directory first (as
  ``python -m``, uvicorn or gunicorn do for ``module:attr`` targets), and an agent file's directory before it;
* applies its sandbox when the spec asks for one (:mod:`fwgym.isolation.sandbox`: Landlock; from then on
  it cannot read fwgym's data, the run directory or the evaluator's ``/proc``, nor signal the evaluator);
* installs an import guard (:class:`ImportGuard`) that refuses the fwgym modules holding case data,
  targets, hindsight or the scorer (:data:`~fwgym.isolation.protocol.DENIED_MODULES`) and everything that
  imports them; and
* makes ``import fwgym`` a bare package (its ``__path__`` only): ``fwgym/__init__`` is never run, so no
  env is registered and no data file is read. Modules that need no case data stay importable
  (``fwgym.agents.base``, ``fwgym.core.contract``, ``fwgym.core.optimizer``, ``fwgym.forecasters.base``, ...).

Without the sandbox (a kernel without Landlock, ``--agent-sandbox off``) this is process separation only:
the hosted code can open any file its user may read and remove the guard.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import inspect
import json
import os
import pickle
import sys
import types
from typing import Any, BinaryIO

_HERE = os.path.dirname(os.path.abspath(__file__))


def _sibling(name: str):
    """``fwgym.isolation.<name>`` when this file is imported as part of fwgym, else the sibling file
    loaded by path under a private name (this file run as a script, fwgym maybe not importable)."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    key = f"_fwgym_isolation_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(_HERE, f"{name}.py"))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {name}.py beside {__file__}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


protocol = _sibling("protocol")
sandbox = _sibling("sandbox")
DENIED_MODULES = protocol.DENIED_MODULES
PROTOCOL_VERSION = protocol.PROTOCOL_VERSION

__all__ = ["ImportGuard", "install_guard", "load_target", "SB3Policy", "PluginForecaster", "BUILTINS", "call_reset", "describe", "serve",
           "main"]


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
            setattr(pkg, "__version__", fwgym_version)  # a module attribute (types.ModuleType declares none)
            sys.modules["fwgym"] = pkg
    return guard


def _file_target(module_name: str) -> bool:
    return module_name.endswith(".py") or os.sep in module_name or bool(os.altsep and os.altsep in module_name)


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
    if _file_target(module_name):
        path = os.path.abspath(module_name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no agent file {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        if not name.isidentifier():
            name = "fwgym_agent_file"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        if os.path.dirname(path) not in sys.path:
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


def _attribute(target: str):
    """The object ``"module:attr"`` names (``attr`` may be dotted), imported under the guard."""
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class PluginForecaster:
    """A plug-in forecaster hosted in the worker (:mod:`fwgym.forecasters.hosted`): made from an entry point's
    value (``"module:attr"``: a ``ForecasterSpec`` or a zero-argument callable returning one) or a factory
    (``"module:qualname"``, called with ``args`` / ``kwargs``); the evaluator sends it only ``(context,
    horizon)`` and receives quantiles.

    Raises:
        TypeError: the entry point is not a spec, or the factory makes no forecaster.
    """

    def __init__(self, name: str, entry_point: str | None = None, factory: str | None = None, args=(),
                 kwargs=None):
        self.spec = None
        if entry_point is not None:
            obj = _attribute(entry_point)
            spec = obj if hasattr(obj, "factory") and hasattr(obj, "tariff") else obj() if callable(obj) else obj
            if not (hasattr(spec, "factory") and hasattr(spec, "tariff") and hasattr(spec, "name")):
                raise TypeError(f"it gave {type(spec).__name__}, expected fwgym.forecasters.ForecasterSpec or a "
                                "zero-argument callable returning one")
            self.spec = spec
            make = spec.factory
        else:
            target = _attribute(str(factory))
            make = (lambda: target(*args, **dict(kwargs or {})))  # noqa: E731 - args are plain data
        self.forecaster = make()
        if not callable(getattr(self.forecaster, "predict_quantiles", None)):
            raise TypeError(f"{name}: its factory returned {type(self.forecaster).__name__}, expected a "
                            "fwgym.forecasters.QuantileForecaster")
        self.forecaster.name = name
        if self.spec is not None and getattr(self.spec, "min_context", None) is not None:
            self.forecaster.min_context = self.spec.min_context

    def describe(self) -> dict:
        """What the evaluator needs to know without running the plug-in there (plain data)."""
        f = self.forecaster
        spec = None
        if self.spec is not None:
            spec = {"name": self.spec.name, "description": str(getattr(self.spec, "description", "") or ""),
                    "min_context": self.spec.min_context,
                    "tariff": {str(k): [int(x) for x in v] for k, v in dict(self.spec.tariff).items()},
                    "availability": self.spec.availability is not None}
        fp = f.fingerprint() if callable(getattr(f, "fingerprint", None)) else {}
        return {"spec": spec, "min_context": int(getattr(f, "min_context", 2)),
                "revision": getattr(f, "revision", None), "classes": [c.__module__ for c in type(f).__mro__
                                                                       if c.__module__ != "builtins"],
                "fingerprint": json.loads(json.dumps(fp, default=str))}

    def availability(self) -> dict:
        """``{"available", "reason", "source"}`` (the spec's availability callable when it has one)."""
        got = self.spec.availability() if self.spec is not None and self.spec.availability is not None else \
            self.forecaster.availability()
        if isinstance(got, bool) or type(got).__name__ == "bool_":
            return {"available": bool(got), "reason": "" if got else "the plug-in reports itself unavailable",
                    "source": "plugin"}
        return {"available": bool(got.available), "reason": str(got.reason), "source": str(got.source)}

    def load(self) -> None:
        self.forecaster.load()

    def predict(self, context, horizon: int):
        return self.forecaster.predict_quantiles(context, int(horizon))

    def predict_batch(self, contexts, horizon: int):
        return self.forecaster.predict_quantiles_batch(list(contexts), int(horizon))


#: targets built into the worker (``"builtin:NAME"``)
BUILTINS = {"sb3_policy": SB3Policy, "plugin_forecaster": PluginForecaster}


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


def apply_sandbox(box: dict) -> dict:
    """Apply the sandbox a spec asks for (:func:`fwgym.isolation.sandbox.plan` on this interpreter's
    ``sys.path``, its editable installs' sources, fwgym's package folders here (every copy it could import) and in
    the evaluator, and the protected paths: the evaluator's, and the domains' package-relative files and source
    packages' files located again here; then :func:`~fwgym.isolation.sandbox.apply`).

    Returns:
        ``{"applied": True, "landlock_abi", "rules", "scoped"}``.

    Raises:
        fwgym.isolation.sandbox.SandboxUnavailable: Landlock cannot be applied, or (``box["full"]``) the
            kernel's ABI cannot scope signals (the evaluator expected a full sandbox).
    """
    abi = sandbox.landlock_abi()
    if box.get("full") and abi < sandbox.FULL_ABI:
        raise sandbox.SandboxUnavailable(f"the evaluator expects a full sandbox, this worker's kernel has Landlock "
                                         f"ABI {abi} (< {sandbox.FULL_ABI})")
    found = importlib.util.find_spec("fwgym") if "fwgym" not in sys.modules else sys.modules["fwgym"].__spec__
    here = list(found.submodule_search_locations or ()) if found is not None else []
    editable = sandbox.editable_sources()
    package_dirs = sorted(set(here) | set(box.get("package_dirs") or ()) | set(sandbox.fwgym_copies(sys.path, editable)))
    protected = [*(box.get("protected") or ()), *sandbox.default_protected(package_dirs, box.get("package_paths") or ()),
                 *(p for dist, path in box.get("package_files") or () for p in sandbox.installed_files(dist, path))]
    planned = sandbox.plan(sys_path=list(sys.path), package_dirs=package_dirs, read=box.get("read") or (),
                           write=box.get("write") or (), protected=protected,
                           editable=[p for paths in editable.values() for p in paths])
    applied = sandbox.apply(planned.rules, abi)
    sandbox.listed_finders(planned.listings)  # the code-only folders on sys.path are not listable any more
    return {"applied": True, **applied}


def loaded_files() -> list[str]:
    """The source files of the modules loaded now outside the Python installation (absolute paths, symlinks
    resolved; the evaluator picks the agent's own among them to pin their sha256)."""
    installed = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        path = os.path.realpath(path)
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts or any(path.startswith(r + os.sep) for r in installed):
            continue
        out.add(path)
    return sorted(out)


def describe(obj: Any) -> dict:
    """The hello of a hosted object: ``{"protocol", "pid", "name", "requires_hindsight", "has": {method: bool},
    "info"}`` (``info``: the object's ``describe()`` if it has one, else ``None``)."""
    has = {m: callable(getattr(obj, m, None)) for m in ("act", "reset", "end_episode", "episode_stats", "predict")}
    info = obj.describe() if callable(getattr(obj, "describe", None)) else None
    return {"protocol": PROTOCOL_VERSION, "pid": os.getpid(), "name": str(getattr(obj, "name", type(obj).__name__)),
            "requires_hindsight": bool(getattr(obj, "requires_hindsight", False)), "has": has, "info": info}


def _refused(exc: PermissionError) -> PermissionError:
    """``exc`` (the sandbox refused a file while the hosted code was loaded or made) with what a sandboxed worker may
    read and how to allow more."""
    return PermissionError(exc.errno, f"{exc.strerror}: the sandbox refuses {exc.filename!r}. A sandboxed worker reads "
                           "the system, the Python installation, fwgym's code, the code on sys.path, the sources of "
                           "editable installs (pip install -e) and the paths named with --agent-read PATH (read_paths=), "
                           "never fwgym's data, the domains' data files or the run directory (docs/isolation.md)",
                           exc.filename)


class _Host:
    """The worker's state: the factory, the object it made and the sandbox it applied."""

    def __init__(self):
        self.factory = None
        self.kwargs: dict = {}
        self.obj = None
        self.sandbox: dict | None = None

    def init(self, spec: dict) -> dict:
        """Prepare ``sys.path``, apply the sandbox, install the guard, load the target, make the object."""
        cwd = spec.get("cwd")
        if cwd and cwd not in sys.path:
            sys.path.insert(0, cwd)
        for p in spec.get("sys_path") or ():
            if p and p not in sys.path:
                sys.path.append(p)
        target = str(spec["target"])
        module_name = target.rpartition(":")[0]
        if not target.startswith("builtin:") and _file_target(module_name):
            folder = os.path.dirname(os.path.abspath(module_name))
            if folder not in sys.path:
                sys.path.insert(0, folder)  # as load_target does; here before the sandbox's rules are made
        if spec.get("sandbox") is not None:
            self.sandbox = apply_sandbox(spec["sandbox"])
        if spec.get("guard", True):
            install_guard(tuple(spec.get("denied") or DENIED_MODULES), spec.get("fwgym_version"))
        if target.startswith("builtin:"):
            name = target[len("builtin:"):]
            if name not in BUILTINS:
                raise ValueError(f"unknown built-in target {target!r}; known: {sorted(BUILTINS)}")
            self.factory = BUILTINS[name]
        else:
            try:
                self.factory = load_target(target)
            except PermissionError as exc:
                raise _refused(exc) if self.sandbox is not None else exc from None
        self.kwargs = dict(spec.get("kwargs") or {})
        try:
            return self.new()
        except PermissionError as exc:
            raise _refused(exc) if self.sandbox is not None else exc from None

    def new(self) -> dict:
        if self.factory is None:
            raise RuntimeError("the worker was not initialised")
        self.obj = None
        self.obj = self.factory(**self.kwargs)
        return {**describe(self.obj), "sandbox": self.sandbox, "modules": loaded_files()}

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
        frame = protocol.read_frame(inp)
        if frame is None:
            return 0
        request = pickle.loads(frame)
        if request[0] == "close":
            protocol.write_frame(out, protocol.encode_reply(None))
            return 0
        try:
            value = host.handle(request)
        except Exception as exc:  # the hosted code's failure: reported, never fatal (except in init)
            protocol.write_frame(out, protocol.encode_reply(error=exc))
            if request[0] == "init":
                return 1
            continue
        protocol.write_frame(out, protocol.encode_reply(value))


def main() -> int:
    """Entry point of ``python worker.py``: protocol on the original stdin/stdout (see module doc)."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # the agent's prints go to stderr
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != _HERE]
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
