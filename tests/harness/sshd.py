"""A real OpenSSH sshd on loopback for tests: own host key, client key, known_hosts, ephemeral port.

Sessions get the STAND-IN nvidia-smi (tests/standin/) first on PATH; its scenario files live in
`scenario_dir` and are chosen per server address, so hosts 127.0.0.2, 127.0.0.3, ... behind the
same sshd can show different GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDIN_DIR = HERE.parent / "standin"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
MAX_LISTEN = 16  # OpenSSH accepts at most 16 ListenAddress sockets per sshd


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip() if path.suffix else Path(str(path) + ".pub").read_text().strip()


class SshdHarness:
    def __init__(self, root: Path, addresses: list[str] | None = None, port: int | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.addresses = addresses or ["127.0.0.1"]
        self.port = port or free_port()
        self.scenario_dir = self.root / "scenarios"
        self.scenario_dir.mkdir(exist_ok=True)
        self.home = self.root / "home"
        self.home.mkdir(exist_ok=True)
        self.host_key = self.root / "ssh_host_ed25519_key"
        self.client_key = self.root / "id_client"
        self.other_key = self.root / "id_other"
        self.known_hosts = self.root / "known_hosts"
        self.procs: list[subprocess.Popen] = []
        self.configs: list[Path] = []
        self._make_keys()

    def _make_keys(self) -> None:
        host_pub = keygen(self.host_key, "standin-host")
        client_pub = keygen(self.client_key, "cockpit-test")
        keygen(self.other_key, "not-authorized")
        (self.root / "authorized_keys").write_text(client_pub + "\n")
        algo, blob = host_pub.split()[:2]
        self.host_public = f"{algo} {blob}"
        self.known_hosts.write_text("".join(f"[{a}]:{self.port} {algo} {blob}\n" for a in self.addresses))
        os.chmod(self.client_key, 0o600)
        os.chmod(self.other_key, 0o600)

    def _config(self, group: int, addresses: list[str]) -> Path:
        path = self.root / f"sshd_config.{group}"
        lines = [
            f"Port {self.port}",
            *[f"ListenAddress {a}" for a in addresses],
            f"HostKey {self.host_key}",
            f"PidFile {self.root}/sshd.{group}.pid",
            f"AuthorizedKeysFile {self.root}/authorized_keys",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin yes",
            "StrictModes no",
            "UsePAM no",
            "UseDNS no",
            "MaxSessions 10",
            "MaxStartups 200:30:400",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",
            # Sessions get their own empty HOME: the test machine's shell rc files (pyenv init and
            # the like) must not run, slow down or hang the commands under test.
            f"SetEnv PATH={STANDIN_DIR}:/usr/local/bin:/usr/bin:/bin NVIDIA_SMI_STANDIN_DIR={self.scenario_dir} HOME={self.home} PYTHONPATH={STANDIN_DIR}",
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 10.0) -> "SshdHarness":
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation directory
        groups = [self.addresses[i:i + MAX_LISTEN] for i in range(0, len(self.addresses), MAX_LISTEN)]
        self.configs = [self._config(n, g) for n, g in enumerate(groups)]
        with open(self.root / "sshd.log", "ab") as log:  # each sshd holds its own copy: this one is closed at once
            for config in self.configs:
                self.procs.append(subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log, start_new_session=True))
        deadline = time.monotonic() + timeout
        for address in [g[0] for g in groups]:
            while True:
                try:
                    with socket.create_connection((address, self.port), timeout=0.5) as sock:
                        if sock.recv(4).startswith(b"SSH-"):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()[-2000:]}")
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stop sshd and every session it started (as a host going down would)."""
        import psutil

        for proc in self.procs:
            try:
                family = psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                family = []
            for member in [psutil.Process(proc.pid), *family] if proc.poll() is None else family:
                try:
                    member.kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait()
        self.procs = []

    def freeze(self) -> None:
        import psutil

        for proc in self.procs:
            for member in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
                member.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        import psutil

        for proc in self.procs:
            for member in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
                member.send_signal(signal.SIGCONT)

    def scenario(self, data: dict, address: str | None = None) -> None:
        """Write a stand-in nvidia-smi scenario for one address (or the default), atomically."""
        name = f"{address}.json" if address else "default.json"
        tmp = self.scenario_dir / f".{name}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.scenario_dir / name)

    def host_toml(self, name: str, address: str = "127.0.0.1", identity: Path | None = None, **extra) -> str:
        lines = [
            f"[hosts.{name}]",
            f'address = "{address}"',
            'user = "root"',
            f"port = {self.port}",
            f'identity_file = "{identity or self.client_key}"',
        ]
        for key, value in extra.items():
            lines.append(f"{key} = {json.dumps(value)}")
        return "\n".join(lines) + "\n"

    def config_toml(self, hosts: str, interval_ms: int = 200, known_hosts: Path | None = None, **telemetry) -> str:
        tel = "".join(f"{k} = {json.dumps(v)}\n" for k, v in telemetry.items())
        return (
            f'[ssh]\nknown_hosts = "{known_hosts or self.known_hosts}"\nconfig = []\nstagger_ms = 0\n'
            f"backoff_initial_s = 0.2\nbackoff_max_s = 1.0\n\n"
            f"[telemetry]\ninterval_ms = {interval_ms}\nprocesses_interval_s = 0.5\n{tel}\n" + hosts
        )
