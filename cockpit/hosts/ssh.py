"""SSH through asyncssh: one persistent connection per host, many channels on it.

Host keys are always verified against known_hosts; ~/.ssh/config (aliases, User, Port,
IdentityFile, ProxyJump) and the SSH agent are honoured; keepalive and a connect timeout are on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:  # cryptography 51 deprecates DSA, and asyncssh's own modules name it at import time (and when a key is
    # read): five warning blocks on stderr for every command.  Ignored for that category raised from asyncssh's
    # modules only; anything else cryptography or asyncssh say is still shown.
    from cryptography.utils import CryptographyDeprecationWarning
except ImportError:  # pragma: no cover - cryptography is asyncssh's own dependency
    pass
else:
    warnings.filterwarnings("ignore", category=CryptographyDeprecationWarning, module=r"asyncssh(\.|$)")

import asyncssh  # noqa: E402

from cockpit.config import HostConfig, SshSettings
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.state import HostState
from cockpit.hosts.transport import (
    CHUNK,
    MAX_LINE,
    AuthFailed,
    CommandResult,
    FileStat,
    HostKeyRejected,
    LineStream,
    Transport,
    TransportError,
    Unreachable,
    quote_argv,
)


def _expand(path: str) -> str:
    return os.path.expanduser(os.path.expandvars(path))


def fingerprint(key: asyncssh.SSHKey) -> str:
    return f"{key.get_algorithm()} {key.get_fingerprint('sha256')}"


class _KnownHostsLookup:
    """asyncssh's known_hosts callback: remembers what it was asked and what matched, so a refusal
    can say whether the key is unknown or has changed."""

    def __init__(self, path: str):
        self.path = path
        self.asked: tuple[str, str, int | None] | None = None
        self.matched_keys: list[asyncssh.SSHKey] = []

    def load(self) -> asyncssh.SSHKnownHosts:
        try:
            return asyncssh.read_known_hosts(self.path)
        except FileNotFoundError:
            return asyncssh.import_known_hosts("")
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot read known_hosts file {self.path}: {exc}", HostState.HOST_KEY_UNKNOWN) from exc

    def __call__(self, host: str, addr: str, port: int | None):
        self.asked = (host, addr, port)
        result = self.load().match(host, addr, port)
        self.matched_keys = list(result[0])
        return result


PREFERRED_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]


def _default_ciphers() -> list[str]:
    from asyncssh.encryption import get_default_encryption_algs

    return [alg.decode() for alg in get_default_encryption_algs()]


def _config_sets_ciphers(paths: Sequence[str]) -> bool:
    """Whether an ssh config file names its ciphers (or includes others, which might)."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            word = line.strip().split(None, 1)[0].lower() if line.strip() else ""
            if word.split("=", 1)[0] in ("ciphers", "include"):
                return True
    return False


def known_hosts_entry_name(host: str, port: int | None) -> str:
    return host if not port or port == 22 else f"[{host}]:{port}"


class SshLineStream(LineStream):
    def __init__(self, log, record, proc: asyncssh.SSHClientProcess, release):
        super().__init__(log, record)
        self._proc = proc
        self._release = release
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(Exception):
            async for line in self._proc.stderr:
                self.stderr_tail.append(line.rstrip("\r\n")[:MAX_LINE])

    async def _read_chunk(self) -> str | None:
        try:
            data = await self._proc.stdout.read(CHUNK)
        except (asyncssh.Error, OSError, asyncio.IncompleteReadError, BrokenPipeError):
            return None
        return data or None

    async def _stop(self) -> None:
        try:
            if self._proc.exit_status is None and not self._proc.is_closing():
                with contextlib.suppress(Exception):
                    self._proc.terminate()  # a signal request; sshd >= 7.9 delivers it
            self._proc.close()
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(self._proc.wait_closed(), 3)
            self._stderr_task.cancel()
            self.exit_status = self._proc.exit_status
        finally:
            self._release()


class SshTransport(Transport):
    """One asyncssh connection to a host, reopened on demand; channels capped per connection."""

    def __init__(self, host: HostConfig, settings: SshSettings, log: CommandLog, jump: "SshTransport | None" = None):
        super().__init__(host, log)
        self.settings = settings
        self.jump = jump
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_conn: asyncssh.SSHClientConnection | None = None
        self._sftp_lock = asyncio.Lock()  # one SFTP session per connection, however many callers come at once
        self._channels = asyncio.Semaphore(host.max_channels)
        self._lock = asyncio.Lock()
        self.known_hosts_path = _expand(host.known_hosts or settings.known_hosts)

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def connection(self) -> asyncssh.SSHClientConnection:
        if self._conn is None:
            raise Unreachable(f"{self.name}: not connected")
        return self._conn

    def user_files(self) -> list[str]:
        files = [self.known_hosts_path]
        if self.host.identity_file:
            files.append(_expand(self.host.identity_file))
        return files + (self.jump.user_files() if self.jump is not None else [])

    def connect_options(self) -> dict[str, Any]:
        host = self.host
        opts: dict[str, Any] = {
            "config": [p for p in (_expand(c) for c in self.settings.config_files) if Path(p).is_file()],
            "connect_timeout": host.connect_timeout,
            "login_timeout": host.connect_timeout,
            "keepalive_interval": host.keepalive_interval,
            "keepalive_count_max": 3,
        }
        if not _config_sets_ciphers(opts["config"]):
            # AES-GCM first: one call into OpenSSL per packet, where asyncssh's chacha20-poly1305
            # does its MAC in Python (a twentieth of the TUI's CPU at 8 hosts streaming).  A Ciphers
            # line in ~/.ssh/config is followed instead.
            opts["encryption_algs"] = PREFERRED_CIPHERS + [a for a in _default_ciphers() if a not in PREFERRED_CIPHERS]
        if host.user:
            opts["username"] = host.user
        if host.port:
            opts["port"] = host.port
        if host.identity_file:
            opts["client_keys"] = [_expand(host.identity_file)]
        if host.jump_host and self.jump is None:
            opts["tunnel"] = host.jump_host  # a [user@]host[:port] string, asyncssh opens it
        return opts

    async def connect(self) -> None:
        async with self._lock:
            if self.connected:
                return
            if self._conn is not None:
                self._conn = None
            lookup = _KnownHostsLookup(self.known_hosts_path)
            opts = self.connect_options()
            if self.jump is not None:
                await self.jump.connect()
                opts["tunnel"] = self.jump.connection
            address = self.host.address or self.name
            try:
                self._conn = await asyncssh.connect(address, known_hosts=lookup, **opts)
            except asyncssh.HostKeyNotVerifiable as exc:
                raise await self._host_key_error(lookup, exc) from None
            except asyncssh.PermissionDenied as exc:
                user = self.host.user or "(user from ~/.ssh/config or the local user)"
                raise AuthFailed(f"authentication failed for {user} on {address}: {exc.reason or exc}; check identity_file, the agent, and authorized_keys on the host") from None
            except TransportError:
                raise
            except asyncio.TimeoutError:
                raise Unreachable(f"no answer from {address} within {self.host.connect_timeout:g} s") from None
            except asyncssh.DisconnectError as exc:
                raise Unreachable(f"{address} closed the connection: {exc.reason or exc}") from None
            except (OSError, asyncssh.Error, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise Unreachable(f"cannot connect to {address}: {reason or type(exc).__name__}") from None

    async def _host_key_error(self, lookup: _KnownHostsLookup, exc: Exception) -> HostKeyRejected:
        host, addr, port = lookup.asked or (self.host.address or self.name, "", self.host.port)
        entry = known_hosts_entry_name(host, port)
        offered = await self.fetch_host_key_fingerprint()
        offered_text = f" The server offered {offered}." if offered else ""
        if lookup.matched_keys:
            known = ", ".join(fingerprint(k) for k in lookup.matched_keys)
            return HostKeyRejected(
                f"HOST KEY CHANGED for {entry}: known_hosts ({lookup.path}) has {known}.{offered_text} "
                f"Refusing to connect. If the host was reinstalled, remove the old key "
                f"(ssh-keygen -R '{entry}' -f {lookup.path}) and run `cockpit trust {self.name}`.",
                HostState.HOST_KEY_CHANGED, offered, lookup.path,
            )
        return HostKeyRejected(
            f"host key for {entry} is not in {lookup.path}.{offered_text} "
            f"Check the fingerprint with the host's owner, then run `cockpit trust {self.name}`.",
            HostState.HOST_KEY_UNKNOWN, offered, lookup.path,
        )

    def resolved_target(self) -> tuple[str, int]:
        """The host name and port after ~/.ssh/config (Hostname, Port) is applied."""
        opts = self.connect_options()
        address = self.host.address or self.name
        kwargs: dict[str, Any] = {"config": opts["config"], "host": address}
        if "port" in opts:
            kwargs["port"] = opts["port"]
        try:
            options = asyncssh.SSHClientConnectionOptions(**kwargs)
            return str(options.host), int(options.port)
        except (OSError, asyncssh.Error, ValueError):
            return address, self.host.port or 22

    async def fetch_host_key(self) -> tuple[asyncssh.SSHKey | None, str, int]:
        """The key the server presents (no authentication, no trust): for showing and for trust-on-first-use."""
        opts = self.connect_options()
        tunnel = opts.pop("tunnel", ())
        if self.jump is not None:
            await self.jump.connect()
            tunnel = self.jump.connection
        address = self.host.address or self.name
        kwargs: dict[str, Any] = {"config": opts["config"]}
        if "port" in opts:
            kwargs["port"] = opts["port"]
        if tunnel:
            kwargs["tunnel"] = tunnel
        try:
            key = await asyncio.wait_for(asyncssh.get_server_host_key(address, **kwargs), opts["connect_timeout"])
        except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError):
            key = None
        host, port = self.resolved_target()
        return key, host, port

    async def fetch_host_key_fingerprint(self) -> str | None:
        key, _, _ = await self.fetch_host_key()
        return fingerprint(key) if key else None

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult:
        command = quote_argv(argv)
        record = self.log.start(self.name, command)
        start = time.monotonic()
        try:
            await self.connect()
            async with self._channels:
                completed = await asyncio.wait_for(
                    self.connection.run(command, input=input, check=False, encoding="utf-8", errors="replace",
                                        stdin=asyncssh.DEVNULL if input is None else asyncssh.PIPE),
                    timeout,
                )
        except asyncio.TimeoutError:
            self.log.finish(record, None, f"timed out after {timeout} s")
            return CommandResult(tuple(argv), None, "", "", time.monotonic() - start, timed_out=True)
        except TransportError as exc:
            self.log.finish(record, None, str(exc))
            raise
        except (asyncssh.Error, OSError) as exc:
            self.log.finish(record, None, str(exc))
            await self._drop()
            raise Unreachable(f"{self.name}: connection lost: {exc}") from None
        except asyncio.CancelledError:
            self.log.finish(record, None, "cancelled")
            raise
        status = completed.exit_status
        if status is None and not completed.exit_signal:
            # No exit status and no signal: the channel closed under us, the connection is gone.
            self.log.finish(record, None, "connection lost")
            await self._drop()
            raise Unreachable(f"{self.name}: connection lost while running {argv[0]}")
        self.log.finish(record, status, f"killed by {completed.exit_signal[0]}" if completed.exit_signal else None)
        return CommandResult(tuple(argv), status, str(completed.stdout or ""), str(completed.stderr or ""), time.monotonic() - start)

    async def stream(self, argv: Sequence[str]) -> LineStream:
        command = quote_argv(argv)
        record = self.log.start(self.name, command, kind="stream")
        try:
            await self.connect()
            await self._channels.acquire()
        except TransportError as exc:
            self.log.finish(record, None, str(exc))
            raise
        try:
            proc = await self.connection.create_process(command, encoding="utf-8", errors="replace", stdin=asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as exc:
            self._channels.release()
            self.log.finish(record, None, str(exc))
            await self._drop()
            raise Unreachable(f"{self.name}: cannot open a channel: {exc}") from None
        except BaseException:
            self._channels.release()
            self.log.finish(record, None, "cancelled")
            raise
        return SshLineStream(self.log, record, proc, self._channels.release)

    async def open_tcp(self, host: str, port: int):
        await self.connect()
        try:
            return await self.connection.open_connection(host, port)
        except asyncssh.ChannelOpenError as exc:
            raise ConnectionRefusedError(f"{self.name}: {host}:{port}: {exc.reason}") from None

    async def _sftp_client(self) -> asyncssh.SFTPClient:
        """The connection's one SFTP session, started once: callers that come together wait for the first one's (each
        starting its own opened a channel apiece, past sshd's MaxSessions: 'open failed' with 16 runs read at once)."""
        await self.connect()
        if self._sftp is not None and self._sftp_conn is self.connection:
            return self._sftp  # started already: no lock on the way of every read
        async with self._sftp_lock:
            conn = self.connection
            if self._sftp is None or self._sftp_conn is not conn:
                try:
                    self._sftp = await conn.start_sftp_client()
                except (asyncssh.Error, OSError) as exc:
                    raise Unreachable(f"{self.name}: cannot start SFTP: {exc}") from None
                self._sftp_conn = conn
            return self._sftp

    async def stat(self, path: str) -> FileStat | None:
        sftp = await self._sftp_client()
        try:
            attrs = await sftp.stat(path)
        except asyncssh.SFTPNoSuchFile:
            return None
        except asyncssh.SFTPError as exc:
            raise Unreachable(f"{self.name}: cannot stat {path}: {exc.reason}") from None
        return _file_stat(posixpath.basename(path), attrs)

    async def list_dir(self, path: str) -> list[FileStat] | None:
        sftp = await self._sftp_client()
        try:
            entries = await sftp.readdir(path)
        except asyncssh.SFTPNoSuchFile:
            return None
        except asyncssh.SFTPError as exc:
            raise Unreachable(f"{self.name}: cannot list {path}: {exc.reason}") from None
        found = []
        for entry in entries:
            if entry.filename in (".", ".."):
                continue
            attrs = entry.attrs
            name = entry.filename if isinstance(entry.filename, str) else entry.filename.decode("utf-8", "replace")
            if attrs.type == asyncssh.FILEXFER_TYPE_SYMLINK:  # readdir gives the link itself: follow it
                try:
                    attrs = await sftp.stat(posixpath.join(path, name))
                except asyncssh.SFTPError:
                    continue  # dangling
            found.append(_file_stat(name, attrs))
        return found

    async def read_range(self, path: str, offset: int, size: int) -> bytes:
        sftp = await self._sftp_client()
        try:
            async with sftp.open(path, "rb") as handle:
                await handle.seek(offset)
                return await handle.read(size)
        except asyncssh.SFTPError as exc:
            raise Unreachable(f"{self.name}: cannot read {path}: {exc.reason}") from None

    async def _drop(self) -> None:
        self._sftp = None
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()

    async def close(self) -> None:
        self._sftp = None
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 3)


def _file_stat(name: str, attrs) -> FileStat:
    return FileStat(name, attrs.size or 0, float(attrs.mtime or 0), attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY)


async def trust_host_key(transport: SshTransport) -> tuple[str, str, str]:
    """Fetch the key the server offers and append it to known_hosts (the caller has confirmed).

    Returns (entry name, fingerprint, known_hosts path).  Refuses when known_hosts already holds a
    different key for the host: a changed key is never overwritten silently.
    """
    from cockpit.paths import atomic_write

    key, host, port = await transport.fetch_host_key()
    if key is None:
        raise Unreachable(f"could not fetch the host key of {transport.name} ({host})")
    entry = known_hosts_entry_name(host, port)
    path = Path(transport.known_hosts_path)
    lookup = _KnownHostsLookup(str(path))
    matched = lookup.load().match(host, "", port)[0]
    if matched:
        if any(k.public_data == key.public_data for k in matched):
            return entry, fingerprint(key), str(path)
        raise HostKeyRejected(
            f"known_hosts ({path}) already holds a different key for {entry}; remove it first "
            f"(ssh-keygen -R '{entry}' -f {path}) if the change is expected",
            HostState.HOST_KEY_CHANGED, fingerprint(key), str(path),
        )
    line = f"{entry} {key.export_public_key('openssh').decode().strip()}\n"
    old = path.read_text() if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, old + line, mode=0o644)
    return entry, fingerprint(key), str(path)
