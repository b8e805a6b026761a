"""Agent kinds of ``fwgym evaluate --agent KIND [kind options]``: plug-ins.

A kind is a module that defines:

* ``KIND``: the name after ``--agent`` (e.g. ``"openai"``, ``"sb3"``);
* ``HELP``: one line of help;
* ``add_arguments(group)``: adds the kind's options to an ``argparse`` argument group (option names
  must be unique across kinds; keep heavy imports out of this function);
* ``build(args) -> factory``: a picklable zero-argument callable returning a fresh agent (e.g. a
  ``functools.partial`` of a class), so evaluation can create agents in worker processes.

The kinds shipped with fwgym are listed in :data:`KIND_MODULES`; other packages add kinds through
the entry-point group :data:`ENTRY_POINT_GROUP` (``[project.entry-points."fwgym.agent_kinds"]
mykind = "mypackage.fwgym_kind"``, naming such a module). Modules that cannot be imported are
skipped, so a kind whose extra is not installed simply does not appear; a shipped kind wins over a
plug-in of the same name.
"""
from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points
from types import ModuleType

KIND_MODULES: tuple[str, ...] = (
    "fwgym.cli.agent_kinds.openai",
    "fwgym.cli.agent_kinds.transformers",
    "fwgym.cli.agent_kinds.sb3",
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
            warnings.warn(f"agent kind plug-in {ep.name!r} ({ep.value}) skipped: it does not define {missing}",
                          stacklevel=2)
            continue
        kinds.setdefault(mod.KIND, mod)
    return kinds


__all__ = ["agent_kinds", "KIND_MODULES", "ENTRY_POINT_GROUP", "INTERFACE"]
