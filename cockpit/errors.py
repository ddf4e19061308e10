"""Errors meant for the user: each carries a message that names what is wrong and where."""

from __future__ import annotations


class CockpitError(Exception):
    """An error caused by the user's input or environment, shown without a traceback."""

    exit_code = 2


class ConfigError(CockpitError):
    """A config file is missing, unparsable or has a bad value.  The message names file, line and key."""

    def __init__(self, path: str, message: str, line: int | None = None, key: str | None = None):
        self.path = path
        self.line = line
        self.key = key
        self.detail = message
        where = path if line is None else f"{path}:{line}"
        what = f" key '{key}':" if key else ""
        super().__init__(f"{where}:{what} {message}")
