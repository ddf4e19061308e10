"""A real Prometheus server (Debian's `prometheus` package) on 127.0.0.1 for tests: scrape interval 1 s,
its TSDB in a temporary folder, the stand-in DCGM exporter (tests/standin/dcgm_exporter.py) as targets."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness.sshd import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
STANDIN = Path(__file__).resolve().parent.parent / "standin" / "dcgm_exporter.py"


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (each held until all are chosen, so none comes twice)."""
    import socket

    held = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            held.append(sock)
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def prometheus_available() -> bool:
    return Path(PROMETHEUS).exists()


class PrometheusHarness:
    def __init__(self, root: Path, targets: list[int], port: int | None = None, scrape_s: float = 1.0):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.targets = targets
        self.scrape_s = scrape_s
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "PrometheusHarness":
        config = self.root / "prometheus.yml"
        targets = ", ".join(f'"127.0.0.1:{p}"' for p in self.targets)
        config.write_text(f"global: {{scrape_interval: {self.scrape_s:g}s, scrape_timeout: {self.scrape_s:g}s}}\n"
                          f"scrape_configs:\n  - job_name: dcgm\n    static_configs: [{{targets: [{targets}], labels: {{cluster: test}}}}]\n")
        with open(self.root / "prometheus.log", "ab") as log:  # Prometheus holds its own copy
            self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.root / 'tsdb'}",
                                          f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus did not start: {(self.root / 'prometheus.log').read_text()[-2000:]}")

    def wait_up(self, count: int, timeout: float = 30.0) -> None:
        """Until `count` targets are scraped and up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets?state=active", timeout=2) as reply:
                targets = json.load(reply)["data"]["activeTargets"]
            if sum(1 for t in targets if t["health"] == "up") >= count:
                return
            time.sleep(0.3)
        down = [(t["scrapeUrl"], t["lastError"]) for t in targets if t["health"] != "up"]
        raise RuntimeError(f"{len(down)} of {len(targets)} targets not up, e.g. {down[:3]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class ExporterHarness:
    """The stand-in DCGM exporter: one process, a port per host, driven by a scenario file."""

    def __init__(self, root: Path, hosts: dict[str, dict], sglang: dict | None = None, vllm: dict | None = None):
        self.path = Path(root) / "exporter.json"
        self.data = {"hosts": hosts, **({"sglang": sglang} if sglang else {}), **({"vllm": vllm} if vllm else {})}
        self.write()
        self.proc = subprocess.Popen([sys.executable, str(STANDIN), str(self.path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.proc.stdout.readline()  # "ready": every port open

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    def set(self, host: str, **changes) -> None:
        self.data["hosts"][host].update(changes)
        self.write()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
