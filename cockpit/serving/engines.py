"""The registry of serving engines: every engine the cockpit can launch, lint, diagnose and watch.

The built-in engines are named here by module (imported when first asked, as entry points are); a package outside
the cockpit adds one through the `cockpit.engines` entry point group (`name = "package.module:ENGINE"`).  Nothing
outside an engine's own package imports it: the core, the UI, the sweep, the drafter checks and the CLI ask here.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from cockpit.errors import CockpitError
from cockpit.serving.engine import PROTOCOL_MEMBERS, Engine

BUILTIN = {"sglang": "cockpit.sglang.engine", "vllm": "cockpit.vllm.engine"}
DEFAULT = "sglang"  # the engine a launch step, a log or a line is taken for when nothing says otherwise
ENTRY_POINTS = "cockpit.engines"


_PROBLEMS: dict[str, str] = {}  # an engine package that could not be loaded -> why


@lru_cache(maxsize=1)
def _all() -> dict[str, Engine]:
    found: dict[str, Engine] = {}
    for name, module in BUILTIN.items():
        found[name] = importlib.import_module(module).ENGINE
    from importlib.metadata import entry_points

    try:
        points = list(entry_points(group=ENTRY_POINTS))
    except Exception as exc:  # broken installed metadata: the built-in engines still serve  # noqa: BLE001
        _PROBLEMS["(entry points)"] = f"the installed packages' entry points could not be read: {type(exc).__name__}: {exc}"
        points = []
    for point in points:
        if point.name in found:
            _PROBLEMS[point.name] = f"{point.value} is not loaded: '{point.name}' is already an engine ({found[point.name].label})"
            continue
        try:
            loaded = point.load()
        except Exception as exc:  # a broken third-party engine must not take the built-in ones down  # noqa: BLE001
            _PROBLEMS[point.name] = f"{point.value} could not be loaded: {type(exc).__name__}: {exc}"
            continue
        missing = [member for member in PROTOCOL_MEMBERS if not hasattr(loaded, member)]
        if missing:
            _PROBLEMS[point.name] = f"{point.value} is not an engine: it has no {', '.join(missing)}"
            continue
        found[point.name] = loaded
    return found


def load_problems() -> dict[str, str]:
    """Engines offered through the `cockpit.engines` entry points that could not be taken, and why (said by
    `cockpit config check`, and by the error for a config that names one)."""
    _all()
    return dict(_PROBLEMS)


def names() -> tuple[str, ...]:
    """Every engine's config word, the default first (the choices of --engine and of a launch step's engine)."""
    return tuple(_all())


def engines() -> tuple[Engine, ...]:
    return tuple(_all().values())


def engine(name: str | None = None) -> Engine:
    """The engine of that name (None: the default); CockpitError naming the choices for another."""
    found = _all().get(name or DEFAULT)
    if found is None:
        why = _PROBLEMS.get(name or DEFAULT)
        raise CockpitError(f"engine must be one of {', '.join(repr(n) for n in names())}, got {name!r}"
                           + (f" (an installed engine of that name was refused: {why})" if why else ""))
    return found


def prefixes() -> tuple[str, ...]:
    """Every engine's Prometheus series prefix (sglang:, vllm:)."""
    return tuple(e.capabilities.metrics_prefix for e in engines())


def known(name: str | None) -> bool:
    return (name or DEFAULT) in _all()


def engine_or_default(name: str | None) -> Engine:
    """The engine of that name, or the default one for None or a name no engine has (a figure read before any line
    said whose it is)."""
    return engine(name if known(name) else None)


def judged_by(given: dict[str, object]) -> tuple[str | None, str]:
    """(the version, the engine) whose draft loader judges a draft or a run's checkpoints, from settings keyed by engine
    (`sglang = "0.5.2"`, `vllm = "0.10.2"`, --sglang/--vllm): the first engine given a version, else the default engine
    with none (every range of it)."""
    for name in names():
        value = given.get(name)
        if value:
            return str(value), name
    return None, DEFAULT


def label(name: str | None) -> str:
    return engine(name).label if known(name) else str(name)


WINDOW = 400  # a log's first and last lines say whose it is (a tail may hold only its crash)


def engine_of_log(lines: list[str]) -> Engine:
    """Whose log it is: the engine whose own words are in its first or last lines; where several engines' words
    are, or none, the default engine's (its reading says what it cannot read)."""
    window = lines[:WINDOW] + lines[-WINDOW:] if len(lines) > 2 * WINDOW else lines
    claims = [e for e in engines() if any(map(e.owns_line, window))]
    if len(claims) == 1:
        return claims[0]
    return engine(DEFAULT)


def engine_of_command(argv: list[str]) -> Engine | None:
    """The engine a command line runs (`python -m sglang.launch_server ...`, `vllm serve ...`); None: it names none."""
    for candidate in engines():
        if candidate.is_command(argv):
            return candidate
    return None
