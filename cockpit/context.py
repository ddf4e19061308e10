"""The composition root: a config checked whole, once, in the one place every command uses.

`config check` rejects exactly what `plan run`, `bench sweep` and the TUI would: the hosts and
settings (config.py), the runbook's steps with each kind's parameters (runbook/spec.py), and the
[bench] sweep (bench/sweep.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cockpit.bench.sweep import SweepSpec, parse_sweep
from cockpit.config import Config, load_config
from cockpit.runbook.spec import RunbookSpec, parse_runbook


@dataclass(frozen=True)
class CheckedConfig:
    config: Config
    runbook: RunbookSpec
    sweep: SweepSpec | None  # None: no [bench] table and no bench_sweep step


def check_config(config: Config) -> CheckedConfig:
    """Every part of a config checked; raises ConfigError naming file, line and key."""
    runbook = parse_runbook(config)
    wants_sweep = "bench" in config.raw or any(s.kind == "bench_sweep" for s in runbook.steps)
    sweep = parse_sweep(config, runbook) if wants_sweep else None
    return CheckedConfig(config, runbook, sweep)


def load_checked(path: str | Path | None) -> CheckedConfig:
    return check_config(load_config(path))
