"""How long a run is, from what the run itself states: its trainer's command line (`--num-epochs 2`,
`--total-steps N`, `--max-steps N`) and the config file that command line names (`specforge train
-c run.yaml`: `training.num_epochs`, `total_steps`, `max_steps`), read on the run's host.  Only
plain `key: number` lines are read from the YAML (no YAML library is needed for two integers);
anything else in it is left alone."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

_EPOCH_FLAGS = ("--num-epochs", "--num_epochs", "--epochs")
_TOTAL_FLAGS = ("--total-steps", "--total_steps", "--max-steps", "--max_steps", "--num-train-steps")
_CONFIG_FLAGS = ("-c", "--config", "--config-file", "--config_file")
_YAML_NUMBER = re.compile(r"^\s*(?P<key>num_epochs|epochs|total_steps|max_steps|num_train_steps)\s*:\s*(?P<value>\d+)\s*(?:#.*)?$")


@dataclass(frozen=True)
class Totals:
    num_epochs: int | None = None
    total_steps: int | None = None
    config: str | None = None  # the config file the command line names (absolute, on the host)
    source: str = ""  # where they were read

    def to_json(self) -> dict:
        return {"num_epochs": self.num_epochs, "total_steps": self.total_steps, "source": self.source or None}


def _flag_value(words: list[str], names: tuple[str, ...]) -> str | None:
    """The flag's last value (the trainer's own flags come after an interpreter's `python -c ...`)."""
    for index in range(len(words) - 1, -1, -1):
        word = words[index]
        for name in names:
            if word == name and index + 1 < len(words):
                return words[index + 1]
            if word.startswith(name + "="):
                return word[len(name) + 1:]
    return None


def from_command(args: str, cwd: str | None) -> Totals:
    """The totals a trainer's command line states, and the config file it names."""
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    epochs, total = _flag_value(words, _EPOCH_FLAGS), _flag_value(words, _TOTAL_FLAGS)
    config = _flag_value(words, _CONFIG_FLAGS)
    if config and not config.startswith("/") and cwd:
        config = posixpath.normpath(posixpath.join(cwd, config))
    return Totals(int(epochs) if epochs and epochs.isdigit() else None, int(total) if total and total.isdigit() else None,
                  config if config and config.startswith("/") else None, "the trainer's command line")


def from_yaml(text: str) -> Totals:
    found: dict[str, int] = {}
    for line in text.splitlines():
        m = _YAML_NUMBER.match(line)
        if m and m.group("key") not in found:
            found[m.group("key")] = int(m.group("value"))
    total = found.get("total_steps") or found.get("max_steps") or found.get("num_train_steps")
    return Totals(found.get("num_epochs") or found.get("epochs"), total or None)


def merged(first: Totals, second: Totals, source: str) -> Totals:
    return Totals(first.num_epochs or second.num_epochs, first.total_steps or second.total_steps, first.config,
                  source if (second.num_epochs or second.total_steps) else first.source)
