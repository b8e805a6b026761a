"""Rooms that fit in a head (issue 26): no module of the package over 600 lines, at most 10 modules at the package
root, and ruff's mccabe complexity limit of 15 configured (ruff enforces it on every function)."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fwgym"
MAX_LINES = 600
MAX_ROOT_MODULES = 10


def test_no_module_over_600_lines():
    big = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}, f"split these modules (lines): {big}"


def test_at_most_10_modules_at_the_package_root():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_the_complexity_limit_is_15_and_checked():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert lint["mccabe"]["max-complexity"] == 15
    assert "C90" in lint["select"] or "C901" in lint["select"]


def test_test_modules_outside_packages_have_unique_basenames():
    """pytest's rootdir import mode imports a test file outside a package (no ``__init__.py``) by its basename:
    two such files of one name stop the whole run at collection ("import file mismatch")."""
    tests = ROOT / "tests"
    seen: dict[str, list[str]] = {}
    for p in tests.rglob("test_*.py"):
        if not (p.parent / "__init__.py").exists():
            seen.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}
