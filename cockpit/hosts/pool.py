"""One transport per configured host, jump hosts wired to the connections of the hosts they name."""

from __future__ import annotations

from cockpit.config import Config, HostConfig
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.local import LocalTransport
from cockpit.hosts.ssh import SshTransport
from cockpit.hosts.transport import Transport


class TransportPool:
    def __init__(self, config: Config, log: CommandLog | None = None):
        self.config = config
        self.log = log or CommandLog()
        self._transports: dict[str, Transport] = {}

    def get(self, host: HostConfig | str) -> Transport:
        if isinstance(host, str):
            host = self.config.host(host)
        existing = self._transports.get(host.name)
        if existing is not None:
            return existing
        if host.local:
            transport: Transport = LocalTransport(host, self.log)
        else:
            jump = None
            names = {h.name for h in self.config.hosts}
            if host.jump_host and host.jump_host in names:
                jump_transport = self.get(host.jump_host)
                assert isinstance(jump_transport, SshTransport)
                jump = jump_transport
            transport = SshTransport(host, self.config.ssh, self.log, jump=jump)
        self._transports[host.name] = transport
        return transport

    async def close(self) -> None:
        # Close hosts reached through a jump host before the jump host itself.
        ordered = sorted(self._transports.values(), key=lambda t: isinstance(t, SshTransport) and t.jump is None)
        for transport in ordered:
            await transport.close()
        self._transports.clear()
