"""Every message the cockpit's workers and subscriptions post to the app: small dataclasses (as
toolong's messages.py).  Workers and core subscribers never touch widgets; they post one of these,
and the app's handlers change the widgets.  (Host samples, several a second, are not messages: the
hub's subscriber queues them in a dict that the paint timer draws; see CockpitApp._queue_snapshot.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from cockpit.hosts.commandlog import CommandRecord


@dataclass
class RunbookChanged(Message):
    pass


@dataclass
class GateInvalidated(Message):
    step: str
    reasons: list[str] = field(default_factory=list)


@dataclass
class StepRefused(Message):
    step: str
    reasons: list[str] = field(default_factory=list)


@dataclass
class ServerPolled(Message):
    target: str
    status: Any  # sglang.server.ServerStatus


@dataclass
class SweepProgress(Message):
    state: dict[str, Any]


@dataclass
class CommandLogged(Message):
    record: CommandRecord


@dataclass
class RunsPolled(Message):
    statuses: list[Any]  # runs.watch.RunStatus
    events: list[Any]  # runs.watch.RunEvent since the last poll


@dataclass
class CopyRequested(Message):
    """A pane asks the app to copy text (OSC 52): a command line, a log line, a fix, a step's evidence."""

    text: str
    what: str


@dataclass
class MeasureRequested(Message):
    """The runs pane asks the app to measure a training run's checkpoints by serving them (bench/checkpoints.py)."""

    run: str


@dataclass
class KillRequested(Message):
    """The process table asks the app to kill one process (through kill_stale's plan and confirmation)."""

    host: str
    pid: int
