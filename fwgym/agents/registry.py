"""Agent kinds usable on the command line: ``fwgym evaluate --agent KIND [kind options]``.

Each kind lives in its own module (listed in :data:`KIND_MODULES`) that defines:

* ``KIND``: the name after ``--agent`` (e.g. ``"openai"``, ``"sb3"``);
* ``HELP``: one line of help;
* ``add_arguments(group)``: adds the kind's options to an ``argparse`` argument group (option names
  must be unique across kinds; keep heavy imports out of this function);
* ``build(args) -> factory``: a picklable zero-argument callable returning a fresh agent (e.g. a
  ``functools.partial`` of a class), so evaluation can create agents in worker processes.

Modules that cannot be imported are skipped, so a kind whose extra is not installed simply does
not appear.
"""
from __future__ import annotations

import importlib
from types import ModuleType

KIND_MODULES: tuple[str, ...] = (
    "fwgym.agents.llm_cli",
    "fwgym.agents.transformers_cli",
    "fwgym.wrappers.sb3_cli",
)


def agent_kinds() -> dict[str, ModuleType]:
    """``{kind: module}`` for every importable kind module."""
    kinds = {}
    for name in KIND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        kinds[mod.KIND] = mod
    return kinds
