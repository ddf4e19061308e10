"""GPUs through a real Prometheus server (Debian's package) on 127.0.0.1, scraping the stand-in DCGM
exporter (tests/standin/dcgm_exporter.py: the recorded format, both host-label spellings).  The
cockpit shows the right values and their age, a host whose exporter stops (stale, then gone), a
Prometheus that is down (a clear state, then recovered), and refuses to pass a GPU gate on
Prometheus data alone."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from cockpit.config import PrometheusSettings, parse_config
from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.prometheus import PrometheusError, fetch, gpu_query, read
from harness.tools import need
from harness.prometheus import ExporterHarness, PrometheusHarness, free_ports

@pytest.fixture(autouse=True)
def _prometheus_installed():
    """A real Prometheus (Debian's package): installed where the machine allows, else a skip that
    says how; a failure in CI (harness/tools.py)."""
    need("prometheus")


USED0 = [61234, 61234, 61234, 61234, 0, 0, 0, 1024]
USED1 = [126518] * 8


@pytest.fixture
def fleet(tmp_path):
    ports = dict(zip(("node0", "node1"), free_ports(2)))
    exporter = ExporterHarness(tmp_path, {
        "node0": {"port": ports["node0"], "label": "Hostname", "used": USED0, "power": [693.5] * 4 + [81.25] * 4,
                  "util": [100] * 4 + [0] * 4, "temp": [61] * 4 + [39] * 4},
        "node1": {"port": ports["node1"], "label": "hostname", "used": USED1},  # the 2026 spelling
    })
    prometheus = PrometheusHarness(tmp_path / "prom", list(ports.values())).start()
    prometheus.wait_up(2)
    yield prometheus, exporter
    prometheus.stop()
    exporter.stop()


def config_text(prometheus, extra: str = "", **settings) -> str:
    options = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    return (f'[prometheus]\nurl = "{prometheus.url}"\ninterval_s = 1\n{options}\n'
            '[hosts.node0]\ntelemetry = "prometheus"\nroles = ["serving"]\n\n'
            '[hosts.node1]\ntelemetry = "prometheus"\n' + extra)


def status(config_file) -> tuple[int, dict]:
    result = subprocess.run([sys.executable, "-m", "cockpit", "status", "--once", "--json", "-c", str(config_file)],
                            capture_output=True, text=True, timeout=60)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def test_values_ages_and_both_label_spellings(tmp_path, fleet):
    prometheus, exporter = fleet
    config = tmp_path / "c.toml"
    config.write_text(config_text(prometheus))
    code, data = status(config)
    assert code == 0, data
    hosts = {h["name"]: h for h in data["hosts"]}
    assert {h["source"] for h in hosts.values()} == {"prometheus"} and {h["state"] for h in hosts.values()} == {"up"}
    gpus0 = hosts["node0"]["gpus"]
    assert [g["memory_used_mib"] for g in gpus0] == USED0
    assert {g["memory_total_mib"] for g in gpus0} == {143771}  # used + free + reserved
    assert [g["power_w"] for g in gpus0] == [693.5] * 4 + [81.25] * 4 and gpus0[0]["utilization_pct"] == 100
    assert gpus0[0]["temperature_c"] == 61 and gpus0[7]["uuid"] == "GPU-node0-0007" and gpus0[0]["name"] == "NVIDIA H200"
    assert [g["memory_used_mib"] for g in hosts["node1"]["gpus"]] == USED1  # the lower-case hostname label
    # the age is the age of the last scrape (1 s interval), never the time of the query
    assert 0 <= hosts["node0"]["age_s"] < 4 and hosts["node0"]["sampled_at"] < time.time()


def test_one_query_per_interval_for_every_gpu_of_every_host(tmp_path, fleet):
    prometheus, exporter = fleet
    hub = TelemetryHub(parse_config(config_text(prometheus)))

    async def go():
        snapshots = await hub.sample_once()
        assert [len(s.gpus) for s in snapshots] == [8, 8]
        assert hub.prometheus.queries == 1  # 16 GPUs, 2 hosts, 6 fields: one query
        await hub.stop()

    asyncio.run(go())


def test_an_exporter_that_stops_is_stale_then_gone(tmp_path, fleet):
    prometheus, exporter = fleet
    hub = TelemetryHub(parse_config(config_text(prometheus, gone_after_s=4)))
    exporter.set("node1", stopped=True)

    async def go():
        try:
            deadline = time.monotonic() + 20
            states = []
            while time.monotonic() < deadline:
                snapshots = {s.name: s for s in await hub.sample_once()}
                states.append(snapshots["node1"].state)
                if snapshots["node1"].state is HostState.UNREACHABLE:
                    break
                await asyncio.sleep(1.0)
            node1 = snapshots["node1"]
            assert HostState.STALE in states and node1.state is HostState.UNREACHABLE and "gone from Prometheus" in node1.error
            stale_first = states.index(HostState.STALE)
            assert all(s in (HostState.UP, HostState.STALE) for s in states[:stale_first + 1])
            assert snapshots["node0"].state is HostState.UP  # the other exporter is fine
        finally:
            await hub.stop()

    asyncio.run(go())


def test_a_prometheus_that_is_down_then_back(tmp_path, fleet):
    prometheus, exporter = fleet
    hub = TelemetryHub(parse_config(config_text(prometheus)))

    async def go():
        try:
            assert {s.state for s in await hub.sample_once()} == {HostState.UP}
            prometheus.stop()
            await asyncio.sleep(1.1)
            down = await hub.sample_once()
            assert {s.state for s in down} == {HostState.UNREACHABLE}
            assert all(f"Prometheus at {prometheus.url}" in s.error and "refused" in s.error.lower() for s in down)
            assert all(len(s.gpus) == 8 for s in down)  # the last values stay, with their age, under the error
            prometheus.start()
            prometheus.wait_up(2)
            await asyncio.sleep(1.1)
            assert {s.state for s in await hub.sample_once()} == {HostState.UP}
        finally:
            await hub.stop()

    asyncio.run(go())


def test_nan_duplicates_and_unlabelled_series_are_shown_as_what_they_are(tmp_path):
    ports = dict(zip(("node0", "node0-again", "stray"), free_ports(3)))
    exporter = ExporterHarness(tmp_path, {
        "node0": {"port": ports["node0"], "used": [100] * 8, "nan": ["DCGM_FI_DEV_POWER_USAGE"]},
        # a second exporter reporting the same GPUs of node0 (another job, another instance)
        "node0-again": {"port": ports["node0-again"], "label_value": "node0", "uuid_prefix": "GPU-node0", "used": [200] * 8},
        "stray": {"port": ports["stray"], "no_label": True, "used": [5] * 8},
    })
    prometheus = PrometheusHarness(tmp_path / "prom", list(ports.values())).start()
    try:
        prometheus.wait_up(3)
        settings = PrometheusSettings(url=prometheus.url)
        hosts = parse_config(config_text(prometheus)).hosts
        reading = read(fetch(settings, gpu_query(settings)), list(hosts), settings, time.time())
        gpus = reading.gpus["node0"]
        assert len(gpus) == 8  # one GPU per UUID, never sixteen
        assert all(g.memory_used_mib in (100, 200) for g in gpus)  # one exporter's value, never a sum or mean
        assert any("has 2 series" in note for note in reading.notes["node0"])
        nan_side = [g for g in gpus if g.memory_used_mib == 100]
        assert all(g.power_w is None and g.problems == ("DCGM_FI_DEV_POWER_USAGE: NaN",) for g in nan_side)
        assert reading.unlabelled > 0 and "node1" not in reading.gpus
    finally:
        prometheus.stop()
        exporter.stop()


@pytest.mark.parametrize("body, kind, expected", [
    (b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html", "answered an HTML page"),
    (b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "application/json", "bad_data: parse error"),
    (b"not json at all", "text/plain", "not JSON"),
    (b'{"status":"success","data":{"resultType":"vector"}}', "application/json", "without a result list"),
])
def test_what_is_not_prometheus_is_said(body, kind, expected):
    """A stand-in for a misbehaving Prometheus endpoint (a real one never answers these)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(400 if b"error" in body else 200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = PrometheusSettings(url=f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(PrometheusError) as refused:
            fetch(settings, "up")
        assert expected in str(refused.value)
    finally:
        server.shutdown()
        server.server_close()


def test_a_gpu_gate_never_passes_on_prometheus_alone(tmp_path, fleet, sshd):
    prometheus, exporter = fleet
    sshd.scenario({"gpus": 8})
    text = (sshd.config_toml(sshd.host_toml("node0", telemetry="prometheus")) + f'\n[prometheus]\nurl = "{prometheus.url}"\n\n'
            '[hosts.node1]\ntelemetry = "prometheus"\n\n[runbook]\nname = "p"\n\n'
            '[[runbook.steps]]\nname = "clean0"\nkind = "gpu_clean"\nhost = "node0"\n')
    (tmp_path / "c.toml").write_text(text)
    from cockpit.context import Context
    from cockpit.runbook.model import StepState

    ctx = Context.of(parse_config(text, str(tmp_path / "c.toml")))

    async def go():
        async def yes(_):
            return True

        try:
            # node0 has an address: its GPUs and processes are read over SSH for the gate (the stand-in nvidia-smi)
            first = await ctx.runbook.run_step("clean0", yes)
            assert first.state is StepState.PASSED and first.evidence["source"] == "nvidia-smi"
        finally:
            await ctx.close()

    asyncio.run(go())
    # node1 is Prometheus only: no process list, so no pass, and the reason said
    verify = subprocess.run([sys.executable, "-m", "cockpit", "verify", "node1", "-c", str(tmp_path / "c.toml")], capture_output=True,
                            text=True, timeout=60)
    assert verify.returncode == 2 and "processes could not be checked" in verify.stdout + verify.stderr
    # and a runbook step there is refused up front (it would need SSH)
    (tmp_path / "d.toml").write_text(text + '\n[[runbook.steps]]\nname = "clean1"\nkind = "gpu_clean"\nhost = "node1"\n')
    check = subprocess.run([sys.executable, "-m", "cockpit", "config", "check", str(tmp_path / "d.toml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 2 and "has no address" in check.stderr


def test_a_mixed_fleet_in_one_status(tmp_path, fleet, sshd):
    prometheus, exporter = fleet
    sshd.scenario({"gpus": 4})
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("ssh-host")) + "\n" + config_text(prometheus))
    code, data = status(config)
    assert code == 0
    assert {h["name"]: h["source"] for h in data["hosts"]} == {"ssh-host": "nvidia-smi", "node0": "prometheus", "node1": "prometheus"}


def test_serving_metrics_through_prometheus_whatever_the_engine(tmp_path):
    port, sglang, vllm = free_ports(3)
    exporter = ExporterHarness(tmp_path, {"node0": {"port": port, "used": [0] * 8}},
                               sglang={"port": sglang, "accept_length": 1.02, "running": 8, "throughput": 640.5},
                               vllm={"port": vllm, "running": 5, "queued": 2, "drafts": 1000, "accepted": 1850})
    prometheus = PrometheusHarness(tmp_path / "prom", [port, sglang, vllm]).start()
    try:
        prometheus.wait_up(3)
        config = tmp_path / "c.toml"
        config.write_text(config_text(prometheus))
        result = subprocess.run([sys.executable, "-m", "cockpit", "server", "--prometheus", f'instance="127.0.0.1:{sglang}"', "--json",
                                 "-c", str(config)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["throughput_tok_s"] == 640.5 and data["running"] == 8 and data["accept_length"]["window"] == 1.02
        assert "prometheus" in data["sources"]
        # vLLM's own series, read as vLLM's: its running and waiting requests, its acceptance from its counters
        result = subprocess.run([sys.executable, "-m", "cockpit", "server", "--prometheus", f'instance="127.0.0.1:{vllm}"', "--json",
                                 "-c", str(config)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["running"] == 5 and data["queued"] == 2 and data["accept_length"]["lifetime"] == 2.85, data
        assert "prometheus" in data["sources"]
        # the server pane's watcher reads the same series when [prometheus] server_selector names them
        from cockpit.config import HostConfig
        from cockpit.hosts.commandlog import CommandLog
        from cockpit.hosts.local import LocalTransport
        from cockpit.serving.server import ServerWatcher

        settings = PrometheusSettings(url=prometheus.url, server_selector=f'instance="127.0.0.1:{sglang}"')
        watcher = ServerWatcher(LocalTransport(HostConfig(name="here", local=True), CommandLog()), os.getpid(), sglang,
                                str(tmp_path / "no.log"), prometheus=(settings, settings.server_selector))
        status_ = asyncio.run(watcher.poll())
        assert "prometheus" in status_.figures["sources"] and status_.figures["accept_length"]["window"] == 1.02
    finally:
        prometheus.stop()
        exporter.stop()


def test_config_checks_for_prometheus(tmp_path):
    for text, message in [
        ('[hosts.a]\ntelemetry = "prometheus"\n', "needs a [prometheus] table"),
        ('[prometheus]\nurl = "ftp://x"\n[hosts.a]\ntelemetry = "prometheus"\n', "is not an http:// or https:// URL"),
        ('[prometheus]\nurl = "http://x:9090"\ntoken_env = "abc def"\n', "not an environment variable name"),
        ('[prometheus]\nurl = "http://x:9090"\nselector = "cluster=prod"\n', "not a list of label matchers"),
        ('[prometheus]\nurl = "http://x:9090"\nhost_label = "host-name"\n', "not a Prometheus label name"),
        ('[prometheus]\nurl = "http://x:9090"\n[hosts.a]\ntelemetry = "prometheus"\n[runbook]\nname = "r"\n[[runbook.steps]]\n'
         'name = "k"\nkind = "kill_stale"\nhost = "a"\npattern = "x"\n', "has no address: it is read through Prometheus only"),
    ]:
        path = tmp_path / "c.toml"
        path.write_text(text)
        result = subprocess.run([sys.executable, "-m", "cockpit", "config", "check", str(path)], capture_output=True, text=True,
                                timeout=60, env={**os.environ})
        assert result.returncode == 2 and message in result.stderr, (text, result.stderr)
