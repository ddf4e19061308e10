"""What the TUI's serving side keeps between messages, owned by one object each (not attributes of the
app set for a mixin): the server the server pane follows, and the sweeps already alerted."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cockpit.serving.paying import VerdictTurns


@dataclass
class ServerFollow:
    """The launch whose server the pane follows (step, host, pid, finished_at), and which of its flag
    kinds stand raised (alerted): a flag that clears sends one resolved notice, and coming back is news."""

    watching: tuple | None = None
    raised: set[str] = field(default_factory=set)
    turns: VerdictTurns = field(default_factory=VerdictTurns)  # whether speculation pays, as last held (two looks)
    running: int | None = None  # the requests it ran at its last look (the load a baseline on request is measured at)

    def follow(self, key: tuple) -> bool:
        """Start following `key`; False when it is already the one followed."""
        if key == self.watching:
            return False
        self.watching, self.raised, self.turns = key, set(), VerdictTurns()
        return True

    def is_followed(self, target: str) -> bool:
        return target == str(self.watching)

    def flag_changes(self, kinds: set[str]) -> tuple[set[str], set[str]]:
        """(kinds newly raised, kinds cleared) since the last poll."""
        raised, cleared = kinds - self.raised, self.raised - kinds
        self.raised = set(kinds)
        return raised, cleared


@dataclass
class SweepAlerts:
    """Sweeps that ended since this cockpit started, already alerted (step -> finished_at)."""

    started_at: float = field(default_factory=time.time)
    seen: dict[str, float] = field(default_factory=dict)
