"""Persisted runbook state (atomic writes) and the append-only audit log (JSON lines)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError
from cockpit.paths import atomic_write, state_dir
from cockpit.runbook.model import StepResult

FORMAT = 1
KEPT_KILLS = 256  # the cockpit's own kills remembered for the watchers (the newest)


def safe_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "runbook"


class StateStore:
    """One JSON file per runbook under the XDG state dir: {step name: result}.

    Written whole through write-then-rename, so a crash at any instant leaves the old or the new
    file, never a torn one.
    """

    def __init__(self, runbook_id: str, root: Path | None = None):
        self.runbook_id = safe_id(runbook_id)
        self.root = Path(root) if root else state_dir() / "runbooks"
        self.path = self.root / f"{self.runbook_id}.json"
        self.audit_path = self.root / f"{self.runbook_id}.audit.jsonl"
        self._kills: dict[str, Any] = {"offset": 0, "inode": None, "records": []}  # kills(): read so far

    def load(self) -> dict[str, StepResult]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise CockpitError(f"{self.path}: cannot read runbook state: {exc.strerror or exc}") from None
        try:
            data = json.loads(raw)
            steps = data["steps"]
            return {str(name): StepResult.from_json(result) for name, result in steps.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CockpitError(
                f"{self.path}: runbook state is not readable ({type(exc).__name__}: {exc}); "
                f"move it aside or run `cockpit plan reset` to start over"
            ) from None

    def load_overrides(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        overrides = data.get("overrides") if isinstance(data, dict) else None
        if not isinstance(overrides, dict):
            return {}
        return {str(k): [str(w) for w in v] for k, v in overrides.items() if isinstance(v, list)}

    def save(self, results: dict[str, StepResult], overrides: dict[str, list[str]] | None = None) -> None:
        payload = {"format": FORMAT, "runbook": self.runbook_id, "saved_at": time.time(),
                   "steps": {name: result.to_json() for name, result in results.items()},
                   "overrides": overrides or {}}
        atomic_write(self.path, json.dumps(payload, indent=1, sort_keys=True) + "\n", mode=0o600)

    @contextlib.contextmanager
    def locked(self):
        """Held while a cockpit reads, merges and rewrites the state (two may share a runbook)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{self.runbook_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def signature(self) -> tuple[int, int] | None:
        """What tells a rewrite of the state file by another cockpit process (mtime, size)."""
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def clear(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    # --- audit log ------------------------------------------------------------------------------

    def audit(self, event: str, **fields: Any) -> None:
        """Append one event.  One write() of one line with O_APPEND, then fsync: a crash can cut
        only the last line, which readers skip.  The engine writes it before the state change it
        records, so every change in the state file has its record."""
        record = {"time": time.time(), "event": event, "pid": os.getpid(), **fields}
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def kills(self, host: str) -> list[dict[str, Any]]:
        """The cockpit's own kills on `host` (the audit log's 'kill' records: a kill step, the process table's kill, a
        plan stop), the newest last: read incrementally from where the last call stopped, the last KEPT_KILLS kept."""
        cache = self._kills
        try:
            stat = self.audit_path.stat()
        except OSError:
            return []
        if stat.st_ino != cache["inode"] or stat.st_size < cache["offset"]:
            cache.update(offset=0, inode=stat.st_ino, records=[])
        if stat.st_size > cache["offset"]:
            try:
                with open(self.audit_path, "rb") as handle:
                    handle.seek(cache["offset"])
                    data = handle.read(stat.st_size - cache["offset"])
            except OSError:
                return []  # another user's audit log (the cockpit run as an ordinary user): its kills are not this user's
            complete = data.rpartition(b"\n")[0]
            cache["offset"] += len(complete) + (1 if complete else 0)
            for line in complete.splitlines():
                if b'"kill"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("event") == "kill":
                    cache["records"].append(record)
            del cache["records"][:-KEPT_KILLS]
        return [r for r in cache["records"] if r.get("host") == host]

    def audit_records(self) -> list[dict[str, Any]]:
        try:
            lines = self.audit_path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash
            if isinstance(record, dict):
                records.append(record)
        return records


# --- two cockpits on one runbook ----------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[bytes, int] | None:
    """(state letter, start time in clock ticks) from Linux's /proc; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        fields = data[data.rindex(b")") + 2:].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def runner_alive(pid: int | None, started: int | None = None) -> bool:
    """Is the cockpit process that ran a step still there?  A killed one that nobody reaped yet (a
    zombie) will never finish the step, and a pid reused by another process is not it."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc here: kill -0 is all we know
    state, start = stat
    return state != b"Z" and (started is None or start == started)


def merge(disk: dict, synced: dict, mine: dict) -> dict:
    """disk, with every key `mine` changed (set, replaced or removed) since `synced` applied."""
    merged = dict(disk)
    for key in set(synced) | set(mine):
        if mine.get(key) != synced.get(key):
            if key in mine:
                merged[key] = mine[key]
            else:
                merged.pop(key, None)
    return merged
