"""Import layering probes (DESIGN §10): a package loads only what lies below it, in a fresh interpreter."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _loaded(module: str) -> list[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('fwgym'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}).stdout
    return json.loads(out)


@pytest.mark.parametrize("module", ["fwgym.wrappers", "fwgym.rl", "fwgym.envs", "fwgym.tools"])
def test_envs_and_wrappers_load_no_agent_code(module):
    loaded = _loaded(module)
    assert not [m for m in loaded if m.startswith(("fwgym.agents", "fwgym.cli", "fwgym.evaluation"))], loaded


def test_the_episode_loop_loads_no_chat_layer():
    loaded = _loaded("fwgym.agents")
    assert "fwgym.agents.base" in loaded
    assert not [m for m in loaded if m.startswith("fwgym.agents.chat")], loaded  # no LLM reply parser


# -- the static import graph: every ``import`` of every module, function-level (lazy) ones included -----

def _module_names() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "fwgym").rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def _import_graph() -> dict[str, set[str]]:
    """``{module: {fwgym modules it imports}}`` (``from pkg import sub`` counts as importing ``pkg.sub``)."""
    import ast

    mods = _module_names()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                targets = subs or [node.module]
            else:
                assert not isinstance(node, ast.ImportFrom) or node.level == 0, f"{p}: relative import"
                continue
            graph[m].update(r for t in targets if t.startswith("fwgym") and (r := resolve(t)) and r != m)
    return graph


def test_no_import_circles_between_modules():
    graph = _import_graph()
    state: dict[str, int] = {}
    circles = []

    def visit(m, path):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                circles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


#: what each layer must never import (DESIGN §10: data/contract/optimizer/scoring know no env, agent or
#: CLI; forecasters know no env; envs know no agent; nothing imports the package face ``fwgym``, which
#: registers the envs)
_ABOVE = ("fwgym.envs", "fwgym.wrappers", "fwgym.rl", "fwgym.tools", "fwgym.agents", "fwgym.baselines", "fwgym.evaluation",
          "fwgym.cli", "fwgym.report", "fwgym.plots")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    **{low: _ABOVE for low in ("fwgym.validation", "fwgym.jsonl", "fwgym.errors", "fwgym.version", "fwgym.ray_session",
                               "fwgym.forecasters")},
    # the rooms in order: data (files, digests) < domains (the Domain specs) < core (series, cases, formulas) <
    # context (text, scenarios) < suites (the Suite specs) < envs ...; no room imports one above it
    "fwgym.data": _ABOVE + ("fwgym.domains", "fwgym.core", "fwgym.context", "fwgym.suites"),
    "fwgym.domains": _ABOVE + ("fwgym.core", "fwgym.context", "fwgym.suites"),
    "fwgym.core": _ABOVE + ("fwgym.context", "fwgym.suites"),
    "fwgym.context": _ABOVE + ("fwgym.suites",),
    "fwgym.suites": _ABOVE + ("fwgym.context",),
    "fwgym.tools": ("fwgym.envs", "fwgym.wrappers", "fwgym.rl", "fwgym.agents", "fwgym.baselines", "fwgym.evaluation", "fwgym.cli",
                    "fwgym.report", "fwgym.plots"),
    "fwgym.envs": ("fwgym.wrappers", "fwgym.rl", "fwgym.agents", "fwgym.baselines", "fwgym.evaluation", "fwgym.cli", "fwgym.report", "fwgym.plots"),
    "fwgym.wrappers": ("fwgym.rl", "fwgym.agents", "fwgym.baselines", "fwgym.evaluation", "fwgym.cli", "fwgym.report",
                       "fwgym.plots"),
    # the RL room (features, macro menus, the native vector env) sits above the env and the generic wrappers
    "fwgym.rl": ("fwgym.agents", "fwgym.baselines", "fwgym.evaluation", "fwgym.cli", "fwgym.report", "fwgym.plots"),
    "fwgym.agents": ("fwgym.evaluation", "fwgym.cli", "fwgym.report", "fwgym.plots"),
    "fwgym.baselines": ("fwgym.evaluation", "fwgym.cli", "fwgym.report", "fwgym.plots"),
    "fwgym.evaluation": ("fwgym.cli", "fwgym.report", "fwgym.plots"),
    "fwgym.plots": ("fwgym.cli", "fwgym.report"),
    "fwgym.report": ("fwgym.cli",),
}


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def test_no_upward_imports():
    upward = sorted((m, n) for m, deps in _import_graph().items() for n in deps
                    for low, banned in FORBIDDEN.items() if _in(m, low) and any(_in(n, b) for b in banned))
    assert upward == []


def test_no_module_imports_the_package_face():
    faces = sorted(m for m, deps in _import_graph().items() if "fwgym" in deps and m not in ("fwgym.__main__",))
    assert faces == []
