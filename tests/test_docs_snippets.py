"""The code snippets of docs/domains.md and docs/suites.md run as written: each page's ``python`` blocks, in order,
in one fresh interpreter (the page's own namespace)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", ["domains.md", "suites.md"])
def test_the_pages_snippets_run(page):
    code = blocks(page)
    assert len(code) >= 2
    out = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
