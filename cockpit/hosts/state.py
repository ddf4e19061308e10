"""What the cockpit knows about a host's connection, in words the UI and the JSON output share."""

from __future__ import annotations

from enum import Enum


class HostState(str, Enum):
    CONNECTING = "connecting"
    UP = "up"
    STALE = "stale"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    DRIVER_ERROR = "driver_error"

    def __str__(self) -> str:  # so f-strings and JSON show the plain word
        return self.value

    @property
    def reached(self) -> bool:
        """True when the host answered (even if its GPU driver did not)."""
        return self in (HostState.UP, HostState.STALE, HostState.DRIVER_ERROR)

    @property
    def needs_user(self) -> bool:
        """States that retrying cannot fix: the user must act (keys, host keys)."""
        return self in (HostState.AUTH_FAILED, HostState.HOST_KEY_UNKNOWN, HostState.HOST_KEY_CHANGED)
