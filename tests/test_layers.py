"""The shape of the code, kept true: data flows one way, from collectors to the shells.

Every import of the cockpit's modules is read (module level and inside functions, relative ones and importlib's;
`if TYPE_CHECKING:` blocks are types only and skipped): no package imports one above it, and there is no import cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "cockpit"

# Lowest first.  A module may import its own layer's modules and any below it.
LAYERS = [
    {"errors", "paths", "aio", "resources", "events", "format", "config", "crashtexts", "runtime", "intake", "diagnosis", "lifecycle",
     "__init__"},
    {"hosts", "alerts", "where"},
    {"telemetry"},
    {"runbook"},
    {"serving", "drafter"},  # the serving core, shared by every engine (serving/engine.py: the seam; engines.py: the registry)
    {"sglang", "vllm"},  # one package per engine: they never import each other, and nothing outside them imports them
    {"bench", "runs"},
    {"demo", "context", "init"},
    {"ui"},
    {"cli", "cli_args", "__main__", "entry"},
]


def layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(LAYERS):
        if part in names:
            return index
    raise AssertionError(f"{module}: not in any layer of tests/test_layers.py (add its package)")


def module_name(path: Path) -> str:
    parts = ("cockpit", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def imports_of(source: str, name: str, package: bool = False) -> set[str]:
    """The cockpit modules one module's source imports: `import cockpit.x`, `from cockpit.x import y`, relative imports
    (`from ..vllm import lint`, resolved against the module's own package) and importlib's (`importlib.import_module`,
    `__import__` with a literal name); an `if TYPE_CHECKING:` block is types only and skipped."""
    tree = ast.parse(source)
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for n in ast.walk(node)}
    here = name.split(".") if package else name.split(".")[:-1]  # the package a relative import starts from
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cockpit")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level - 1 <= len(here) else []
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.startswith("cockpit"):
                found.add(module)
                found |= {f"{module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            called = ast.unparse(node.func)
            if called in ("importlib.import_module", "import_module", "__import__") and node.args[0].value.startswith("cockpit"):
                found.add(node.args[0].value)
    return found


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        graph[module_name(path)] = imports_of(path.read_text(), module_name(path), path.name == "__init__.py")
    modules = set(graph)
    return {name: {m for m in found if m in modules and m != name} for name, found in graph.items()}


def test_relative_and_importlib_imports_are_read():
    """Planted: what the layers test must catch however the import is written."""
    assert "cockpit.vllm.lint" in imports_of("from ..vllm import lint\n", "cockpit.sglang.flags")
    assert "cockpit.vllm" in imports_of("from .. import vllm\n", "cockpit.sglang.flags")
    assert "cockpit.sglang.lint" in imports_of("from .lint import lint\n", "cockpit.sglang", package=True)
    assert "cockpit.ui.app" in imports_of("import importlib\nimportlib.import_module('cockpit.ui.app')\n", "cockpit.serving.x")
    assert "cockpit.ui" in imports_of("def f():\n    return __import__('cockpit.ui')\n", "cockpit.serving.x")
    assert imports_of("if TYPE_CHECKING:\n    from ..ui import app\n", "cockpit.serving.x") == set()
    planted = {"cockpit.sglang.flags": imports_of("from ..vllm import lint\n", "cockpit.sglang.flags")}
    assert any(_engine_of(a) != _engine_of(b) and _engine_of(b) for a, targets in planted.items() for b in targets)


def test_no_package_imports_one_above_it():
    wrong = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
             for a, targets in imports().items() for b in targets if layer_of(b) > layer_of(a)]
    assert wrong == []


def test_no_import_cycle():
    graph = imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else path + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_runbook_never_imports_the_packages_that_implement_kinds():
    for name, targets in imports().items():
        if name.startswith("cockpit.runbook"):
            assert not {t for t in targets if t.startswith(("cockpit.serving", "cockpit.sglang", "cockpit.vllm", "cockpit.drafter",
                                                            "cockpit.bench"))}, name


ENGINES = ("cockpit.sglang", "cockpit.vllm")


def _engine_of(module: str) -> str | None:
    return next((e for e in ENGINES if module == e or module.startswith(e + ".")), None)


def test_the_engine_packages_never_import_each_other():
    wrong = [f"{a} imports {b}" for a, targets in imports().items() for b in targets
             if _engine_of(a) and _engine_of(b) and _engine_of(a) != _engine_of(b)]
    assert wrong == []


def test_nothing_outside_an_engine_imports_it():
    """The core, the UI, the sweep, the drafter checks, the CLI and the demo ask the registry (serving/engines.py,
    which names the built-in engines' modules as entry points do) for an engine's label, capabilities and parts."""
    wrong = [f"{a} imports {b}" for a, targets in imports().items() for b in targets if _engine_of(b) and not _engine_of(a)]
    assert wrong == []


def test_the_registry_names_every_engine_package_and_each_implements_the_seam():
    from cockpit.serving import engines
    from cockpit.serving.engine import PROTOCOL_MEMBERS, Engine

    packages = sorted(p.name for p in ROOT.iterdir() if (p / "engine.py").exists() and "\nENGINE" in (p / "engine.py").read_text())
    assert sorted(engines.BUILTIN) == packages == ["sglang", "vllm"]
    for package in packages:  # annotated as the seam, so that mypy (tests/test_types.py) checks it statically
        assert "\nENGINE: Engine = " in (ROOT / package / "engine.py").read_text(), package
    for engine in engines.engines():
        assert isinstance(engine, Engine), engine
        missing = [name for name in PROTOCOL_MEMBERS if not hasattr(engine, name)]
        assert missing == [], (engine.name, missing)


def test_no_test_file_imports_another():
    """What several test files share lives in tests/harness/ (docs/testing.md): a test module imported by another
    would run its tests twice and tie two files' fixtures together."""
    tests = Path(__file__).resolve().parent
    own = {p.stem for p in tests.rglob("test_*.py")}
    wrong = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            wrong += [f"{path.relative_to(tests)} imports {n}" for n in names if n.split(".")[-1] in own]
    assert wrong == []
