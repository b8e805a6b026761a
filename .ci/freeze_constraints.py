"""Print constraints.txt's pins: every package fwgym[all] needs (its requirements and theirs, markers
evaluated for this interpreter and platform) at the version installed in the running environment.

    python .ci/freeze_constraints.py > pins.txt    # from an environment where the test suite passed

torch's local build label is dropped (``torch==2.13.0`` matches ``2.13.0+cpu``), and setuptools is left to
the build backend. Required packages missing from the environment are listed at the end as a comment
(unpinned: pip chooses their version).
"""
from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

SKIP = {"fwgym", "setuptools", "pip", "wheel"}


def main() -> int:
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = list(project["dependencies"]) + [r for name, reqs in extras.items() if name != "all" for r in reqs]
    pins: dict[str, str] = {}
    missing = []
    stack = [(Requirement(r), "") for r in wanted]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    env = default_environment()
    while stack:
        req, extra = stack.pop()
        name = canonicalize_name(req.name)
        if name in SKIP or (req.marker is not None and not req.marker.evaluate({**env, "extra": extra})):
            continue
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(str(req))
            continue
        pins[name] = Version(dist.version).public
        for r in dist.requires or []:
            sub = Requirement(r)
            for ex in [""] + sorted(req.extras):  # a dependency of a requested extra of this package
                if sub.marker is None or sub.marker.evaluate({**env, "extra": ex}):
                    stack.append((sub, ex))
                    break
    for name in sorted(pins):
        print(f"{name}=={pins[name]}")
    if missing:
        print(f"# required but not installed where these pins were read (unpinned): {', '.join(sorted(missing))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
