"""Where hosted code lives, found without running it, and what it is (its files' sha256): what pins an
agent's or a plug-in forecaster's code in a run (fwgym.cli.agent_kinds.python, fwgym.forecasters.hosted)."""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["module_origin", "package_files", "files_sha256"]


def module_origin(module_name: str) -> str | None:
    """The source file of module ``module_name`` as a worker would import it (working directory first on
    ``sys.path``), found without importing it or its packages (so no code of it runs here): the top-level name by
    :func:`importlib.util.find_spec` (which imports nothing for a top-level name, and asks every finder,
    editable installs included), each submodule by :class:`importlib.machinery.PathFinder` in its parent's
    ``submodule_search_locations`` (so no package ``__init__`` runs here). ``None`` when the module is not
    found or has no source file (built-in, frozen, namespace package)."""
    parts = module_name.split(".")
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        spec = None
        for i in range(len(parts)):
            name = ".".join(parts[: i + 1])
            loaded = sys.modules.get(name)
            if loaded is not None:
                spec = getattr(loaded, "__spec__", None)
            elif i == 0:
                spec = importlib.util.find_spec(name)
            else:
                search = spec.submodule_search_locations if spec is not None else None
                spec = importlib.machinery.PathFinder.find_spec(name, list(search)) if search else None
            if spec is None:
                return None
    except (ImportError, ValueError):
        return None
    finally:
        if added and os.getcwd() in sys.path:
            sys.path.remove(os.getcwd())
    if spec is None:  # (the loop returns first: ``parts`` is never empty)
        return None
    origin = spec.origin if spec.has_location else None
    return os.path.abspath(origin) if origin and os.path.isfile(origin) else None


def package_files(module_name: str) -> dict[str, str]:
    """``{dotted module name: source file}`` of the top-level package (or module) ``module_name`` belongs to,
    found without importing it: every ``.py`` file of the package's folder, or the one module file; ``{}``
    when it is not found."""
    top = module_name.split(".")[0]
    origin = module_origin(top)
    if origin is None:
        return {}
    if os.path.basename(origin) != "__init__.py":
        return {top: origin}
    root = os.path.dirname(origin)
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), os.path.dirname(root))[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = os.path.join(folder, f)
    return out


def files_sha256(files: dict[str, str]) -> dict[str, str]:
    """``{name: sha256 of the file's bytes}`` for ``{name: path}`` (names sorted)."""
    out = {}
    for name in sorted(files):
        with open(files[name], "rb") as fh:
            out[name] = hashlib.sha256(fh.read()).hexdigest()
    return out
