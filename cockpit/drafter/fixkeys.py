"""Rename tensor keys in safetensors files, crash-safe, touching only the header when it fits.

In place (the new header fits in the old one's space; same-length renames always do):
  1. the original 8 + N header bytes go to a journal sidecar, written whole, fsynced and renamed
     into place (so a journal is either complete or absent);
  2. the new header, padded with spaces to exactly N bytes, is written over the old one; fsync;
  3. the header is read back and checked (every tensor's offsets unchanged); the journal goes.
An interruption leaves the old file, or the new one, or a torn header with a journal beside it:
the next run restores the old header from the journal (or keeps the new one if it is complete).

When the header grows, the file is streamed to a temporary file in the same directory and renamed
over the original (atomic), memory bounded by the chunk size.
Remote files go through SFTP on the existing connection: the same journal steps, header bytes only.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.drafter.files import INDEX_NAME, JOURNAL_SUFFIX, weight_files
from cockpit.drafter.header import Header, encode_header, header_from, parse_header_bytes
from cockpit.errors import CockpitError
from cockpit.paths import atomic_write
from cockpit.format import plural

JOURNAL_MAGIC = b"COCKPIT-SAFETENSORS-JOURNAL 1\n"
DEFAULT_RULES = (("layers.0.", "midlayer."),)
COPY_CHUNK = 16 * 1024 * 1024


def _fault(point: str) -> None:
    """Fault injection for the crash tests: COCKPIT_FAULT_AT=point kills this process there."""
    if os.environ.get("COCKPIT_FAULT_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def parse_rules(texts: list[str] | None) -> tuple[tuple[str, str], ...]:
    if not texts:
        return DEFAULT_RULES
    rules = []
    for text in texts:
        if "=" not in text:
            raise CockpitError(f"--rule '{text}': write it as OLD=NEW (e.g. layers.0.=midlayer.; NEW may be empty)")
        old, new = text.split("=", 1)
        if not old:
            raise CockpitError(f"--rule '{text}': OLD must not be empty")
        rules.append((old, new))
    return tuple(rules)


def rename(name: str, rules: tuple[tuple[str, str], ...]) -> str:
    """Apply the prefix rules in order (so "draft_model." stripped, then "layers.0." renamed)."""
    for old, new in rules:
        if name.startswith(old):
            name = new + name[len(old):]
    return name


@dataclass
class FilePlan:
    path: str
    renames: list[tuple[str, str]]
    in_place: bool
    old_header_len: int
    new_header_len: int


@dataclass
class FixReport:
    path: str
    dry_run: bool
    files: list[FilePlan] = field(default_factory=list)
    index_renames: int = 0
    recovered: list[str] = field(default_factory=list)
    verified: bool = False

    @property
    def changed(self) -> int:
        return sum(len(f.renames) for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "dry_run": self.dry_run, "renamed": self.changed, "index_renames": self.index_renames,
            "recovered": self.recovered, "verified": self.verified,
            "files": [{"file": f.path, "renames": [[a, b] for a, b in f.renames], "in_place": f.in_place,
                       "old_header_len": f.old_header_len, "new_header_len": f.new_header_len} for f in self.files if f.renames],
        }


# --- file operations: local, or SFTP ------------------------------------------------------------------


class LocalOps:
    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def read(self, path: str, offset: int, size: int) -> bytes:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read(size)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data[: len(data) // 2], offset)
            _fault("torn_header")
            os.pwrite(fd, data[len(data) // 2:], offset + len(data) // 2)
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_file_atomic(self, path: str, data: bytes) -> None:
        atomic_write(Path(path), data, mode=0o600)

    def unlink(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_header_via(ops, path: str) -> Header:
    return header_from(lambda offset, count: ops.read(path, offset, count), ops.size(path), path)


# --- journal ----------------------------------------------------------------------------------------


def _read_journal(ops, path: str) -> tuple[bytes, bool] | None:
    """The journal of an interrupted fix of `path`: (the old prefix and header, whether the new
    header had been written whole), or None when there is no journal."""
    journal = path + JOURNAL_SUFFIX
    if not ops.exists(journal):
        return None
    blob = ops.read(journal, 0, 200 * 1024 * 1024)
    try:
        if not blob.startswith(JOURNAL_MAGIC):
            raise ValueError("no journal header")
        meta_end = blob.index(b"\n", len(JOURNAL_MAGIC))
        meta = json.loads(blob[len(JOURNAL_MAGIC):meta_end])
        length, new_sha = int(meta["header_len"]), str(meta["new_header_sha256"])
    except (ValueError, KeyError, TypeError):
        raise CockpitError(f"{journal}: not a cockpit journal; move it aside by hand") from None
    old = blob[meta_end + 1:]
    completed = hashlib.sha256(ops.read(path, 8, length)).hexdigest() == new_sha
    return old, completed


def header_after_recovery(ops, path: str) -> Header:
    """The header `path` will have once an interrupted fix is finished or undone: what a dry run
    must plan from (the header on disk may be half written)."""
    journal = _read_journal(ops, path)
    if journal is None or journal[1]:
        return read_header_via(ops, path)
    old = journal[0]
    return parse_header_bytes(old[:8], old[8:], ops.size(path), path)


def recover(ops, path: str) -> str | None:
    """Finish or undo an interrupted in-place fix of `path`.  Returns what was done, or None."""
    journal_data = _read_journal(ops, path)
    if journal_data is None:
        return None
    journal = path + JOURNAL_SUFFIX
    old, completed = journal_data
    if completed:
        ops.unlink(journal)
        return f"{path}: an interrupted fix had completed; kept the new header"
    ops.write_at(path, 0, old)
    read_header_via(ops, path)  # the restored header parses
    ops.unlink(journal)
    return f"{path}: an interrupted fix was undone from its journal; the original header is back"


def _journal_bytes(header: Header, old_bytes: bytes, new_bytes: bytes) -> bytes:
    meta = {"header_len": header.header_len, "file_size": header.file_size,
            "new_header_sha256": hashlib.sha256(new_bytes).hexdigest()}
    return JOURNAL_MAGIC + json.dumps(meta).encode() + b"\n" + old_bytes


# --- the fix ------------------------------------------------------------------------------------------


def plan_file(header: Header, rules) -> tuple[FilePlan, dict[str, Any], bytes | None]:
    renames = []
    new_raw: dict[str, Any] = {}
    for name, entry in header.raw.items():
        new_name = name if name == "__metadata__" else rename(name, rules)
        if new_name != name:
            renames.append((name, new_name))
        if new_name in new_raw:
            raise CockpitError(f"{header.path}: renaming '{name}' to '{new_name}' collides with a key already there")
        new_raw[new_name] = entry
    if not renames:
        return FilePlan(header.path, [], True, header.header_len, header.header_len), new_raw, None
    compact = encode_header(new_raw)
    in_place = len(compact.rstrip(b" ")) <= header.header_len
    new_bytes = encode_header(new_raw, header.header_len) if in_place else compact
    return FilePlan(header.path, renames, in_place, header.header_len, len(new_bytes)), new_raw, new_bytes


def _verify(ops, path: str, before: Header, plan: FilePlan) -> None:
    after = read_header_via(ops, path)
    mapping = dict(plan.renames)
    for name, info in before.tensors.items():
        moved = after.tensors.get(mapping.get(name, name))
        if moved is None or (moved.dtype, moved.shape, moved.nbytes) != (info.dtype, info.shape, info.nbytes):
            raise CockpitError(f"{path}: verification failed for '{name}' after the rewrite")
        if plan.in_place and (moved.begin, moved.end) != (info.begin, info.end):
            raise CockpitError(f"{path}: verification failed: '{name}' moved")
    if plan.in_place and after.file_size != before.file_size:
        raise CockpitError(f"{path}: verification failed: the file size changed")


def fix_in_place(ops, header: Header, plan: FilePlan, new_bytes: bytes) -> None:
    path = header.path
    old_bytes = ops.read(path, 0, 8 + header.header_len)
    ops.write_file_atomic(path + JOURNAL_SUFFIX, _journal_bytes(header, old_bytes, new_bytes))
    _fault("journal_written")
    ops.write_at(path, 8, new_bytes)
    _fault("header_written")
    _verify(ops, path, header, plan)
    ops.unlink(path + JOURNAL_SUFFIX)


def fix_by_copy(header: Header, plan: FilePlan, new_bytes: bytes) -> None:
    """The header grows: stream a new file beside the old one and rename it over (local only)."""
    path = Path(header.path)
    tmp = path.with_name(f".{path.name}.cockpit-tmp")
    source_hash = hashlib.sha256()
    try:
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            dst.write(struct.pack("<Q", len(new_bytes)))
            dst.write(new_bytes)
            src.seek(header.data_start)
            while True:
                chunk = src.read(COPY_CHUNK)
                if not chunk:
                    break
                source_hash.update(chunk)
                dst.write(chunk)
                _fault("copy_chunk")
            dst.flush()
            os.fsync(dst.fileno())
        copied = hashlib.sha256()
        with open(tmp, "rb") as check:
            check.seek(8 + len(new_bytes))
            for chunk in iter(lambda: check.read(COPY_CHUNK), b""):
                copied.update(chunk)
        if copied.digest() != source_hash.digest():
            raise CockpitError(f"{path}: the copied tensor bytes differ from the original; nothing was replaced")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    _verify(LocalOps(), str(path), header, plan)


def fix_keys(path: str | Path, rules=DEFAULT_RULES, dry_run: bool = False, ops=None) -> FixReport:
    """Rename keys in every shard of a draft (file or directory) and in its index."""

    ops = ops or LocalOps()
    path = Path(path)
    report = FixReport(str(path), dry_run)
    files = weight_files(path)
    for file in files:
        stale_tmp = file.with_name(f".{file.name}.cockpit-tmp")
        if stale_tmp.exists() and not dry_run:
            stale_tmp.unlink()
        if not dry_run:
            done = recover(ops, str(file))
            if done:
                report.recovered.append(done)
        elif ops.exists(str(file) + JOURNAL_SUFFIX):
            report.recovered.append(f"{file}: has a journal of an interrupted fix (a real run repairs it first)")
    plans = []
    for file in files:
        header = header_after_recovery(ops, str(file)) if dry_run else read_header_via(ops, str(file))
        plan, _raw, new_bytes = plan_file(header, rules)
        report.files.append(plan)
        plans.append((header, plan, new_bytes))
    index_path = (path if path.is_dir() else path.parent) / INDEX_NAME
    index_data = None
    if index_path.exists():
        index_data = json.loads(index_path.read_text())
        weight_map = index_data.get("weight_map", {})
        renamed = {rename(k, rules): v for k, v in weight_map.items()}
        report.index_renames = sum(1 for k in weight_map if rename(k, rules) != k)
        index_data["weight_map"] = renamed
    if dry_run:
        return report
    for header, plan, new_bytes in plans:
        if not plan.renames or new_bytes is None:  # a plan with renames always has its new header
            continue
        if plan.in_place:
            fix_in_place(ops, header, plan, new_bytes)
        else:
            fix_by_copy(header, plan, new_bytes)
    if index_data is not None and report.index_renames:
        atomic_write(index_path, json.dumps(index_data, indent=2) + "\n")
    report.verified = True
    return report


def describe(report: FixReport) -> str:
    """What a fix renames, file by file (the first five keys of each), for a confirmation or a dry run."""
    lines = []
    for plan in report.files:
        if not plan.renames:
            continue
        how = "header rewritten in place" if plan.in_place else "header grows: file copied and renamed"
        lines.append(f"{plan.path}: {plural(len(plan.renames), 'key')}, {how}")
        for old, new in plan.renames[:5]:
            lines.append(f"    {old} -> {new}")
        if len(plan.renames) > 5:
            lines.append(f"    ... and {len(plan.renames) - 5} more")
    if report.index_renames:
        lines.append(f"index: {report.index_renames} entr(ies) renamed")
    return "\n".join(lines)


def summary(report: FixReport, where: str = "") -> str:
    """What a finished fix did, for the user."""
    lines = [f"repaired: {note}" for note in report.recovered]
    lines.append(f"renamed {plural(report.changed, 'key')} in {plural(sum(1 for f in report.files if f.renames), 'file')}{where}"
                 + (f", {report.index_renames} in the index" if report.index_renames else "") + "; verified")
    return "\n".join(lines)
