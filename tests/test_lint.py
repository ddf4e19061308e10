"""ruff check, with the rule set chosen in pyproject.toml ([tool.ruff.lint]), over the package and the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: pip install -e '.[test]' installs it")
    out = subprocess.run([ruff, "check", "--no-cache", "cockpit", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_test_file_imports_another():
    """Shared helpers live in tests/helpers.py and tests/harness/: a test file is never a library."""
    import ast

    tests = {p.stem for p in (ROOT / "tests").rglob("test_*.py")}
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not set(n.split(".")[0] for n in names) & tests, f"{path.relative_to(ROOT)} imports a test file: {names}"
