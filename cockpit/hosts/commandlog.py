"""The command log: every command the cockpit runs on any host, with its exit status (as lazygit shows)."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from cockpit.events import Topic


@dataclass(frozen=True, slots=True)
class CommandRecord:
    id: int
    host: str
    command: str
    kind: str  # "run" or "stream"
    started_at: float
    finished_at: float | None = None
    exit_status: int | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "host": self.host,
            "command": self.command,
            "kind": self.kind,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "exit_status": self.exit_status,
            "error": self.error,
        }


Listener = Callable[[CommandRecord], None]


class CommandLog:
    """A bounded, in-memory log of commands; listeners are told of every start and finish.

    Periodic commands (the compute-apps poll) would flood it over days, so records whose command
    is already in the log replace their older twin instead of piling up.
    """

    def __init__(self, capacity: int = 500):
        self._records: deque[CommandRecord] = deque(maxlen=capacity)
        self._ids = itertools.count(1)
        self.events: Topic[CommandRecord] = Topic()  # every start and finish
        self.total = 0

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self.events.subscribe(listener)

    def _notify(self, record: CommandRecord) -> None:
        self.events.publish(record)

    def start(self, host: str, command: str, kind: str = "run") -> CommandRecord:
        record = CommandRecord(id=next(self._ids), host=host, command=command, kind=kind, started_at=time.time())
        self.total += 1
        for old in self._records:
            if old.host == host and old.command == command and not old.running:
                self._records.remove(old)
                break
        self._records.append(record)
        self._notify(record)
        return record

    def finish(self, record: CommandRecord, exit_status: int | None, error: str | None = None) -> CommandRecord:
        done = replace(record, finished_at=time.time(), exit_status=exit_status, error=error)
        for position, old in enumerate(self._records):
            if old.id == record.id:
                self._records[position] = done
                break
        self._notify(done)
        return done

    def records(self) -> list[CommandRecord]:
        return list(self._records)
