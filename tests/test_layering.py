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


@pytest.mark.parametrize("module", ["fwgym.wrappers", "fwgym.envs", "fwgym.tools"])
def test_envs_and_wrappers_load_no_agent_code(module):
    loaded = _loaded(module)
    assert not [m for m in loaded if m.startswith(("fwgym.agents", "fwgym.cli", "fwgym.evaluation"))], loaded


def test_the_episode_loop_loads_no_chat_layer():
    loaded = _loaded("fwgym.agents")
    assert "fwgym.agents.base" in loaded
    assert not [m for m in loaded if m.startswith("fwgym.agents.chat")], loaded  # no LLM reply parser
