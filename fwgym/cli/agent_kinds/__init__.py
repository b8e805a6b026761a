"""Agent kinds of ``fwgym evaluate --agent KIND [kind options]``: plug-ins.

A kind is a module that defines:

* ``KIND``: the name after ``--agent`` (e.g. ``"openai"``, ``"sb3"``);
* ``HELP``: one line of help;
* ``add_arguments(group)``: adds the kind's options to an ``argparse`` argument group (option names
  must be unique across kinds; keep heavy imports out of this function);
* ``build(args) -> factory``: a picklable zero-argument callable returning a fresh agent (e.g. a
  ``functools.partial`` of a class), so evaluation can create agents in worker processes. A factory
  whose agents run in a worker process (code from a file or named on the command line: SB3 zips,
  ``module:factory``; :mod:`fwgym.agents.isolation`) says so with ``isolated = True``;
* optionally ``accepts(value) -> bool``: the kind also answers to ``--agent`` values it recognises
  (the ``python`` kind takes ``--agent MODULE:FACTORY`` and ``--agent FILE.py:FACTORY``;
  :func:`resolve_kind`).

The kinds shipped with fwgym are listed in :data:`KIND_MODULES`; other packages add kinds through
the entry-point group :data:`ENTRY_POINT_GROUP` (``[project.entry-points."fwgym.agent_kinds"]
mykind = "mypackage.fwgym_kind"``, naming such a module). Modules that cannot be imported are
skipped, so a kind whose extra is not installed simply does not appear; a shipped kind wins over a
plug-in of the same name.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from types import ModuleType

from fwgym.warn import warn_user

KIND_MODULES: tuple[str, ...] = (
    "fwgym.cli.agent_kinds.openai",
    "fwgym.cli.agent_kinds.transformers",
    "fwgym.cli.agent_kinds.sb3",
    "fwgym.cli.agent_kinds.router",
    "fwgym.cli.agent_kinds.python",
)
#: entry-point group through which other packages add agent kinds
ENTRY_POINT_GROUP = "fwgym.agent_kinds"
#: what a kind module must define
INTERFACE = ("KIND", "HELP", "add_arguments", "build")


def agent_kinds() -> dict[str, ModuleType]:
    """``{kind: module}`` for every importable kind module (shipped ones first, then entry points)."""
    kinds: dict[str, ModuleType] = {}
    for name in KIND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        kinds[mod.KIND] = mod
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            mod = ep.load()
        except ImportError:
            continue
        missing = [a for a in INTERFACE if not hasattr(mod, a)]
        if missing:
            warn_user(f"agent kind plug-in {ep.name!r} ({ep.value}) skipped: it does not define {missing}")
            continue
        kinds.setdefault(mod.KIND, mod)
    return kinds


def resolve_kind(value: str, kinds: dict[str, ModuleType] | None = None) -> ModuleType:
    """The kind module for an ``--agent`` value: the kind of that name, else the first kind whose
    ``accepts(value)`` is true (e.g. ``mypkg.agents:make_agent`` for the ``python`` kind).

    Raises:
        ValueError: no kind matches (the message lists the kinds).
    """
    kinds = agent_kinds() if kinds is None else kinds
    if value in kinds:
        return kinds[value]
    for mod in kinds.values():
        accepts = getattr(mod, "accepts", None)
        if callable(accepts) and accepts(value):
            return mod
    raise ValueError(f"unknown agent kind {value!r}; expected one of {sorted(kinds)} or MODULE:FACTORY "
                     "(your own agent code, run isolated)")


__all__ = ["agent_kinds", "resolve_kind", "KIND_MODULES", "ENTRY_POINT_GROUP", "INTERFACE"]
