"""fix-keys on a host's files over SFTP on the existing SSH connection: header bytes only.

The fix logic of fixkeys.py runs unchanged in a worker thread; its file operations become SFTP
requests on the event loop (journal, header write, fsync, atomic rename all remote)."""

from __future__ import annotations

import asyncio
import json
import posixpath

from cockpit.drafter.fixkeys import (
    JOURNAL_SUFFIX,
    FixReport,
    fix_keys,
    fix_in_place,
    plan_file,
    read_header_via,
    recover,
    rename,
)
from cockpit.drafter.files import INDEX_NAME
from cockpit.errors import CockpitError


class SftpOps:
    """The file operations fixkeys.py needs, as blocking calls made from a worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sftp):
        self.loop = loop
        self.sftp = sftp

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def size(self, path: str) -> int:
        return self._call(self.sftp.stat(path)).size

    def exists(self, path: str) -> bool:
        return self._call(self.sftp.exists(path))

    def read(self, path: str, offset: int, size: int) -> bytes:
        async def go():
            async with self.sftp.open(path, "rb") as handle:
                await handle.seek(offset)
                return await handle.read(size)

        return self._call(go())

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        async def go():
            async with self.sftp.open(path, "r+b") as handle:
                await handle.seek(offset)
                await handle.write(data)
                await handle.fsync()

        self._call(go())

    def write_file_atomic(self, path: str, data: bytes) -> None:
        tmp = posixpath.join(posixpath.dirname(path), "." + posixpath.basename(path) + ".tmp")

        async def go():
            async with self.sftp.open(tmp, "wb") as handle:
                await handle.write(data)
                await handle.fsync()
            await self.sftp.posix_rename(tmp, path)

        self._call(go())

    def unlink(self, path: str) -> None:
        async def go():
            if await self.sftp.exists(path):
                await self.sftp.remove(path)

        self._call(go())


async def _remote_files(sftp, transport, path: str) -> tuple[list[str], str]:
    if await sftp.isdir(path):
        names = sorted(n for n in await sftp.listdir(path) if n.endswith(".safetensors"))
        files, folder = [posixpath.join(path, n) for n in names], path
    elif await sftp.exists(path):
        files, folder = [path], posixpath.dirname(path)
    else:
        raise CockpitError(f"{transport.name}:{path}: no such file or directory")
    if not files:
        raise CockpitError(f"{transport.name}:{path}: no .safetensors weights there")
    return files, folder


async def inspect_remote(transport, path: str):
    """inspect_draft for a path on a host: headers and config.json read over SFTP."""
    from cockpit.drafter.inspect import build_report

    sftp = await transport._sftp_client()
    ops = SftpOps(asyncio.get_running_loop(), sftp)
    files, folder = await _remote_files(sftp, transport, path)
    config = posixpath.join(folder, "config.json")

    def work():
        headers = [read_header_via(ops, f) for f in files]
        text = ops.read(config, 0, 16 * 1024 * 1024).decode("utf-8", "replace") if ops.exists(config) else None
        return build_report(f"{transport.name}:{path}", headers, text, config)

    return await asyncio.to_thread(work)


async def _fix_remote(transport, path: str, rules, dry_run: bool) -> FixReport:
    sftp = await transport._sftp_client()
    loop = asyncio.get_running_loop()
    ops = SftpOps(loop, sftp)
    report = FixReport(f"{transport.name}:{path}", dry_run)
    files, folder = await _remote_files(sftp, transport, path)

    def work() -> None:
        for file in files:
            if not dry_run:
                done = recover(ops, file)
                if done:
                    report.recovered.append(done)
            elif ops.exists(file + JOURNAL_SUFFIX):
                report.recovered.append(f"{file}: has a journal of an interrupted fix")
        plans = []
        for file in files:
            header = read_header_via(ops, file)
            plan, _raw, new_bytes = plan_file(header, rules)
            if plan.renames and not plan.in_place:
                raise CockpitError(f"{file}: the new header does not fit in the old one's space; a remote fix rewrites "
                                   "header bytes only: run fix-keys on the host itself")
            report.files.append(plan)
            plans.append((header, plan, new_bytes))
        index = posixpath.join(folder, INDEX_NAME)
        index_data = None
        if ops.exists(index):
            index_data = json.loads(ops.read(index, 0, 64 * 1024 * 1024))
            weight_map = index_data.get("weight_map", {})
            report.index_renames = sum(1 for k in weight_map if rename(k, rules) != k)
            index_data["weight_map"] = {rename(k, rules): v for k, v in weight_map.items()}
        if dry_run:
            return
        for header, plan, new_bytes in plans:
            if plan.renames and new_bytes is not None:  # a plan with renames always has its new header
                fix_in_place(ops, header, plan, new_bytes)
        if index_data is not None and report.index_renames:
            ops.write_file_atomic(index, (json.dumps(index_data, indent=2) + "\n").encode())
        report.verified = True

    await asyncio.to_thread(work)
    return report


def fix_on_host(config, host_name: str, path: str, rules, dry_run: bool) -> FixReport:
    """fix-keys (or its dry run) on a host's path, over its own SSH connection."""
    from cockpit.hosts.pool import TransportPool
    from cockpit.hosts.ssh import SshTransport

    host = config.host(host_name)
    if host.local:
        raise CockpitError(f"host '{host_name}' is this machine: run fix-keys without --host")

    async def run() -> FixReport:
        pool = TransportPool(config)
        try:
            transport = pool.get(host)
            assert isinstance(transport, SshTransport)
            return await _fix_remote(transport, path, rules, dry_run)
        finally:
            await pool.close()

    return asyncio.run(run())


def fixer(path: str, rules, config=None, host: str | None = None):
    """fix(dry_run) -> FixReport for a draft here, or on a host of the config over SFTP."""
    if host:
        return lambda dry_run: fix_on_host(config, host, path, rules, dry_run)
    return lambda dry_run: fix_keys(path, rules, dry_run=dry_run)

