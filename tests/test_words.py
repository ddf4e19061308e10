"""Issue 50 item 7: the words users read, checked over every text the cockpit builds for them (the help of every scope,
every pane's description, the palette, `config check` of every sample config, the `:` jump list, every command's
--help): no internal step-kind names (a step is named by its own words), no doubled words, no 'copied: copied'."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.ui import actions

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "cockpit" / "sample_configs").glob("*.toml"))


def kind_names() -> set[str]:
    """Every step kind's internal name (and old alias) that a user never says: the snake_case ones."""
    import cockpit.bench.steps  # noqa: F401 - each package registers its kinds by defining them
    import cockpit.drafter.steps  # noqa: F401
    import cockpit.runbook.builtin  # noqa: F401
    import cockpit.runs.steps  # noqa: F401
    import cockpit.serving.steps  # noqa: F401
    from cockpit.runbook.kind import StepKind

    def walk(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    names = {k.name for k in walk(StepKind) if isinstance(getattr(k, "name", None), str)}
    names |= {a for k in walk(StepKind) for a in getattr(k, "aliases", ())}
    return {n for n in names if "_" in n}


def problems_in(where: str, text: str, kinds: set[str]) -> list[str]:
    found = []
    for kind in kinds:
        for m in re.finditer(rf"(?<![\w\"'=-]){re.escape(kind)}(?![\w\"'-])", text):
            line = text[max(0, text.rfind("\n", 0, m.start()) + 1): text.find("\n", m.end()) if "\n" in text[m.end():] else len(text)]
            if "kind" in line:  # the config's own syntax (`kind = "serve_launch"`), said as such
                continue
            found.append(f"{where}: the internal kind name {kind!r} in: {line.strip()[:160]}")
    for m in re.finditer(r"\b([A-Za-z]{2,}) \1\b", text):  # one space: columns (argparse, tables) are not prose
        if m.group(1).lower() not in ("that", "had", "is"):
            found.append(f"{where}: doubled word {m.group(0)!r}")
    if re.search(r"copied:\s*copied", text, re.I):
        found.append(f"{where}: 'copied: copied'")
    return found


@pytest.fixture(scope="module")
def kinds() -> set[str]:
    return kind_names()


def test_the_kind_names_are_known(kinds):
    assert {"wait_run", "serve_launch", "kill_stale", "gpu_clean", "drafter_check", "bench_sweep"} <= kinds


def test_help_palette_and_pane_words(kinds):
    texts = {f"help[{scope}]": "\n".join(f"{k} {w}" for k, w, _ in actions.help_rows(scope))
             for scope in ("app", "checklist", "procs", "logview", "bench", "runs")}
    texts.update({f"pane help[{name}]": text for name, text in actions.PANE_HELP.items()})
    texts["palette"] = "\n".join(f"{a.palette}: {a.palette_help}" for a in actions.palette(False))
    problems = [p for where, text in texts.items() for p in problems_in(where, text, kinds)]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_config_check_names_steps_by_their_words(sample, kinds):
    done = subprocess.run([sys.executable, "-m", "cockpit", "config", "check", str(sample)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert problems_in(f"config check {sample.name}", done.stdout, kinds) == []


async def test_the_jump_list_names_steps_by_their_words(kinds):
    from cockpit.config import load_config
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.jump import JumpProvider

    app = CockpitApp(load_config(str(SAMPLES[0])))
    async with app.run_test(size=(120, 40)):
        places = JumpProvider._places(type("Shown", (), {"app": app})())  # type: ignore[arg-type]
        assert places and any(p[0].startswith("step ") for p in places)
        assert problems_in(":", "\n".join(f"{a} · {b}" for a, b, _ in places), kinds) == []


def test_every_commands_help(kinds):
    """Every command's and subcommand's --help, as argparse prints it."""
    import argparse

    from cockpit.cli_args import build_parser

    def helps(parser: argparse.ArgumentParser, name: str):
        yield name, parser.format_help()
        for action in parser._actions:  # argparse keeps its subcommands there (no public accessor)
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    yield from helps(child, f"{name} {sub}")

    seen = list(helps(build_parser(), "cockpit"))
    assert len(seen) > 20
    problems = [p for where, text in seen for p in problems_in(where, text, kinds)]
    assert problems == [], "\n".join(problems)
