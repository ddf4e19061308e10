"""Every import the program and the tests make is declared, in the right place (fresh-machine truth).

CI's interpreter may hold packages nobody declared; this reads the imports themselves (AST) and
checks each against pyproject.toml, so an undeclared one fails here even where it is installed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import names of distributions that may be absent here (an extra not installed): the dist's name
NOT_INSTALLED = {"torch": "torch", "numpy": "numpy", "apprise": "apprise", "ray": "ray"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def declared(*extras: str) -> set[str]:
    names = {_name(r) for r in PROJECT["dependencies"]}
    for extra in extras:
        names |= {_name(r) for r in PROJECT["optional-dependencies"][extra]}
    return names


def imports(folder: Path) -> list[tuple[str, Path, int, bool]]:
    """(top-level module, file, line, at module level?) for every absolute import under folder."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(node) for node in tree.body}
        guarded = set()
        for node in ast.walk(tree):  # `if TYPE_CHECKING:` and try/except ImportError blocks
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers):
                guarded |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.append((name.split(".")[0], path, node.lineno, id(node) in top_level and id(node) not in guarded))
    return found


def local_names(folder: Path) -> set[str]:
    names = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
    return names | {"cockpit"}


def distributions(module: str) -> set[str]:
    dists = packages_distributions().get(module)
    if dists:
        return {d.lower().replace("_", "-") for d in dists}
    return {NOT_INSTALLED[module]} if module in NOT_INSTALLED else set()


def check(folder: Path, allowed: set[str], extra_only: set[str]) -> list[str]:
    problems = []
    stdlib = set(sys.stdlib_module_names)
    local = local_names(folder)
    for module, path, line, module_level in imports(folder):
        if module in stdlib or module in local or module == "__future__":
            continue
        dists = distributions(module)
        where = f"{path.relative_to(ROOT)}:{line}"
        if not dists:
            problems.append(f"{where}: imports '{module}', which no installed distribution provides and pyproject does not name")
        elif not dists & allowed:
            problems.append(f"{where}: imports '{module}' (from {', '.join(sorted(dists))}), not declared for this code")
        elif dists <= extra_only and module_level:
            problems.append(f"{where}: imports '{module}' at module level, but it is only in an optional extra: import it "
                            "where it is used and say what to install when it is missing")
    return problems


def test_the_program_imports_only_its_declared_dependencies():
    allowed = declared("torch", "notify", "ray")
    extra_only = declared("torch", "notify", "ray") - declared()
    assert check(ROOT / "cockpit", allowed, extra_only) == []


def test_the_tests_import_only_declared_test_dependencies():
    allowed = declared("test", "torch", "notify", "ray")
    extra_only = declared("torch", "notify", "ray") - declared("test")
    assert check(ROOT / "tests", allowed, extra_only) == []


def test_the_test_extra_does_not_pull_torch():
    """The README's test command stays light on a machine without a GPU (torch is its own extra)."""
    assert "torch" not in declared("test")
