"""Where the cockpit keeps what it writes (XDG base directories, or a config's [storage] dir) and atomic
file writes (shared by every package)."""

from __future__ import annotations

import glob
import os
import tempfile
import time
from pathlib import Path

APP = "cockpit"

# A config's [storage] dir: the runbook state, benchmark runs, alert log and caches of every command that
# reads that config live under it, whichever shell (TUI or CLI) and whatever XDG variables it runs with.
# Set once per process by the composition root (context.py); None: the XDG folders.
_STORAGE: list[Path | None] = [None]


def use_storage(root: Path | None) -> None:
    _STORAGE[0] = None if root is None else Path(root)


def storage_root() -> Path | None:
    return _STORAGE[0]


def _xdg(var: str, default: str, sub: str) -> Path:
    if _STORAGE[0] is not None:
        return _STORAGE[0] / sub
    value = os.environ.get(var)
    base = Path(value) if value and os.path.isabs(value) else Path.home() / default
    return base / APP


def config_dir() -> Path:
    value = os.environ.get("XDG_CONFIG_HOME")
    return (Path(value) if value and os.path.isabs(value) else Path.home() / ".config") / APP


def state_dir() -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state", "state")


def data_dir() -> Path:
    return _xdg("XDG_DATA_HOME", ".local/share", "data")


def cache_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache", "cache")


def default_config_path() -> Path:
    return config_dir() / "config.toml"


STALE_TEMP_S = 60.0


def _sweep_stale_temps(path: Path) -> None:
    """Remove temporary files of earlier writes to `path` that a killed process left behind (old
    enough that no live writer can still own them).  They were never the file; nothing is lost."""
    cutoff = time.time() - STALE_TEMP_S
    for temp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            if temp.stat().st_mtime < cutoff:
                temp.unlink()
        except OSError:
            pass


def atomic_write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    """Write *data* to *path* so that readers see the old file or the new one, never a torn one.

    The bytes go to a temporary file in the same directory, are fsynced, then renamed over the
    target; the directory is fsynced so the rename itself survives a crash.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sweep_stale_temps(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
