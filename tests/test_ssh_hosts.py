"""Hosts over a real OpenSSH sshd on 127.0.0.1, with the stand-in nvidia-smi behind it."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from conftest import FIXTURES
from helpers import eventually

EIGHT_WITH_STALE_PROCESS = {
    "gpus": 8,
    "set": {"5": {"memory.used": 30000, "utilization.gpu": 0}, "2": {"power.draw": "[N/A]"}},
    "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}],
}


def run_cli(*args) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_status_once_json_every_gpu(sshd, tmp_path):
    sshd.scenario(EIGHT_WITH_STALE_PROCESS)
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server", roles=["serving"])))
    code, out, err = run_cli("status", "--once", "--json", "--config", str(config))
    assert code == 0, err
    host = json.loads(out)["hosts"][0]
    assert host["name"] == "gpu-server" and host["state"] == "up" and host["error"] is None
    assert [g["index"] for g in host["gpus"]] == list(range(8))
    for key in ("index", "uuid", "name", "memory_used_mib", "memory_total_mib", "power_w", "power_limit_w", "utilization_pct", "temperature_c"):
        assert key in host["gpus"][0]
    assert host["gpus"][5]["memory_used_mib"] == 30000
    assert host["gpus"][0]["memory_used_mib"] == 0 and host["gpus"][0]["memory_total_mib"] == 143771
    assert host["gpus"][2]["power_w"] is None  # [N/A] is null, not 0
    recorded = {float(line.split(",")[7]) for line in (FIXTURES / "gpu/h200/smi_stream.csv").read_text().splitlines()}
    assert host["gpus"][0]["power_w"] in recorded  # replayed from the real H200 stream
    assert host["processes"] == [{"pid": 4242, "name": "python3", "used_memory_mib": 30000, "gpu_uuid": host["gpus"][5]["uuid"], "gpu_index": 5}]


async def test_reconnects_after_sshd_restart(sshd, tmp_path):
    sshd.scenario({"gpus": 2})
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=200, stale_after_s=1.0))
    hub = TelemetryHub(config)
    hub.start()
    try:
        await eventually(lambda: hub.latest["gpu-server"].state is HostState.UP, what="host up")
        sshd.stop()
        await eventually(lambda: hub.latest["gpu-server"].state in (HostState.STALE, HostState.UNREACHABLE), what="host down")
        down = hub.latest["gpu-server"]
        assert down.error
        sshd.start()
        before = hub.monitors["gpu-server"].samples
        await eventually(lambda: hub.latest["gpu-server"].state is HostState.UP and hub.monitors["gpu-server"].samples > before + 2,
                         timeout=15, what="reconnect by itself")
    finally:
        await hub.stop()


def test_changed_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    algo, blob = (tmp_path / "other_host_key.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{sshd.port} {algo} {blob}\n")
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server"), known_hosts=known))
    code, out, err = run_cli("status", "--once", "--json", "--config", str(config))
    assert code == 2
    host = json.loads(out)["hosts"][0]
    assert host["state"] == "host_key_changed"
    assert str(known) in host["error"] and "CHANGED" in host["error"]
    assert f"[127.0.0.1]:{sshd.port}" in host["error"]
    # The fingerprint the server offered is shown, and so is the one known_hosts holds.
    offered = subprocess.run(["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
    assert offered in host["error"]
    assert host["gpus"] == []
    # trust refuses to overwrite a changed key
    code, out, err = run_cli("trust", "gpu-server", "--yes", "--config", str(config))
    assert code != 0 and "different key" in err


def test_unknown_host_key_then_trust_on_first_use(sshd, tmp_path):
    sshd.scenario({"gpus": 1})
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server"), known_hosts=known))
    code, out, _ = run_cli("status", "--once", "--json", "--config", str(config))
    host = json.loads(out)["hosts"][0]
    assert code == 2 and host["state"] == "host_key_unknown"
    fingerprint = subprocess.run(["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
    assert fingerprint in host["error"] and "cockpit trust gpu-server" in host["error"]
    # without --yes and without a terminal, nothing is written
    code, out, err = run_cli("trust", "gpu-server", "--config", str(config))
    assert code == 1 and known.read_text() == "" and fingerprint in out
    code, out, err = run_cli("trust", "gpu-server", "--yes", "--config", str(config))
    assert code == 0, err
    assert fingerprint in out and known.read_text().startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    code, out, _ = run_cli("status", "--once", "--json", "--config", str(config))
    assert code == 0 and json.loads(out)["hosts"][0]["state"] == "up"


def test_wrong_key_is_auth_failed(sshd, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server", identity=sshd.other_key)))
    code, out, err = run_cli("status", "--once", "--json", "--config", str(config))
    host = json.loads(out)["hosts"][0]
    assert code == 2 and host["state"] == "auth_failed"
    assert "authentication failed for root" in host["error"]


@pytest.fixture
def silent_port():
    """A TCP port that accepts connections and never says a word (a hung host)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


async def test_host_that_never_answers_does_not_stop_the_others(sshd, silent_port, tmp_path):
    sshd.scenario({"gpus": 8})
    hosts = sshd.host_toml("good") + f'[hosts.hung]\naddress = "127.0.0.1"\nport = {silent_port}\nconnect_timeout = 1\nidentity_file = "{sshd.client_key}"\n'
    config = parse_config(sshd.config_toml(hosts, interval_ms=200))
    hub = TelemetryHub(config)
    hub.start()
    try:
        await eventually(lambda: hub.latest["hung"].state is HostState.UNREACHABLE, timeout=10, what="hung host unreachable")
        assert "within 1 s" in hub.latest["hung"].error
        count = hub.monitors["good"].samples
        await asyncio.sleep(1.0)
        assert hub.monitors["good"].samples >= count + 2  # still updating (5 per second expected)
        assert hub.latest["good"].state is HostState.UP and len(hub.latest["good"].gpus) == 8
    finally:
        await hub.stop()


def test_status_once_exit_code_with_one_dead_host(sshd, silent_port, tmp_path):
    sshd.scenario({"gpus": 1})
    hosts = sshd.host_toml("good") + f'[hosts.hung]\naddress = "127.0.0.1"\nport = {silent_port}\nconnect_timeout = 1\n'
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(hosts))
    code, out, _ = run_cli("status", "--once", "--json", "--config", str(config))  # a hung host: its connect timeout ends it
    assert code == 2
    states = {h["name"]: h["state"] for h in json.loads(out)["hosts"]}
    assert states == {"good": "up", "hung": "unreachable"}


async def test_driver_failure_then_recovery(sshd):
    sshd.scenario({"gpus": 2, "failure": "driver"})
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=200))
    hub = TelemetryHub(config)
    hub.start()
    try:
        await eventually(lambda: hub.latest["gpu-server"].state is HostState.DRIVER_ERROR, what="driver error")
        assert "couldn't communicate with the NVIDIA driver" in hub.latest["gpu-server"].error
        sshd.scenario({"gpus": 2})
        await eventually(lambda: hub.latest["gpu-server"].state is HostState.UP, timeout=10, what="recovered")
    finally:
        await hub.stop()


async def test_stream_that_dies_is_restarted(sshd):
    sshd.scenario({"gpus": 8, "stream_ticks": 3})
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=100))
    hub = TelemetryHub(config)
    finished = []
    hub.log.subscribe(lambda r: finished.append(r) if r.kind == "stream" and not r.running else None)
    hub.start()
    try:
        monitor = await eventually(lambda: hub.monitors.get("gpu-server"))
        await eventually(lambda: monitor.streams_started >= 3, timeout=15, what="stream restarted")
        assert len(hub.latest["gpu-server"].gpus) == 8
        assert len(finished) >= 2 and all(r.exit_status == 1 for r in finished)
    finally:
        await hub.stop()


async def test_garbage_and_lost_gpu_on_the_stream(sshd):
    sshd.scenario({"gpus": 8, "garbage_every": 1, "lost": [6]})
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=100))
    hub = TelemetryHub(config)
    hub.start()
    try:
        await eventually(lambda: hub.monitors.get("gpu-server") and hub.monitors["gpu-server"].samples > 5, what="samples")
        snap = hub.latest["gpu-server"]
        assert snap.state is HostState.UP
        assert [g.index for g in snap.gpus if not g.lost] == [0, 1, 2, 3, 4, 5, 7]
        assert any(g.lost and "GPU is lost" in g.problems[0] for g in snap.gpus)
    finally:
        await hub.stop()


def test_every_remote_command_is_logged_and_quoted(sshd, tmp_path):
    marker = tmp_path / "pwned"
    sshd.scenario({"gpus": 1})
    evil = f"nvidia-smi; touch {marker}; $(touch {marker})"
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server", nvidia_smi=evil)))
    code, out, err = run_cli("status", "--once", "--json", "--log-commands", "--config", str(config))
    assert not marker.exists()  # the whole value reached the host as one word
    host = json.loads(out)["hosts"][0]
    assert host["state"] == "driver_error" and "not found" in host["error"]
    assert "[gpu-server] $ 'nvidia-smi; touch" in err
    assert "[gpu-server] exit 127" in err


def test_ssh_config_alias_and_jump_host(sshd, tmp_path):
    """An ~/.ssh/config alias works as an address, and a configured host works as a jump host."""
    sshd.scenario({"gpus": 2})
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(
        f"Host standin-alias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n"
    )
    text = (
        f'[ssh]\nknown_hosts = "{sshd.known_hosts}"\nconfig = ["{ssh_config}"]\n\n'
        '[hosts.by-alias]\naddress = "standin-alias"\n\n'
        + sshd.host_toml("bastion")
        + sshd.host_toml("behind", jump_host="bastion")
    )
    config = tmp_path / "c.toml"
    config.write_text(text)
    code, out, err = run_cli("status", "--once", "--json", "--config", str(config))
    states = {h["name"]: (h["state"], len(h["gpus"])) for h in json.loads(out)["hosts"]}
    assert code == 0, (states, err)
    assert states == {"by-alias": ("up", 2), "bastion": ("up", 2), "behind": ("up", 2)}


async def test_jump_host_connection_is_the_route(sshd):
    from cockpit.hosts.pool import TransportPool

    sshd.scenario({"gpus": 1})
    config = parse_config(sshd.config_toml(sshd.host_toml("bastion") + sshd.host_toml("behind", jump_host="bastion")))
    pool = TransportPool(config)
    try:
        behind = pool.get("behind")
        result = await behind.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"])
        assert result.exit_status == 0 and result.stdout.strip() == "0"
        # only "behind" was asked for: the bastion's connection exists because it carried the tunnel
        assert pool.get("bastion").connected
        assert [r.host for r in pool.log.records()] == ["behind"]
    finally:
        await pool.close()


# A command's output in awkward writes: a line longer than MAX_LINE, CRLF, a UTF-8 character split
# across two writes, a last line without its newline.  Both transports give the same lines.
_AWKWARD_WRITER = r"""
import os, sys, time
out = sys.stdout.buffer
def put(data):
    out.write(data); out.flush(); time.sleep(0.05)
put(b"first\r\nsecond\n")
put(b"x" * 70000)
put(b"y" * 70000 + b"\nafter-long\n")
caf = "caf\u00e9 line\n".encode()
put(caf[:4]); put(caf[4:])
put(b"0, 1, 2\n1, 2, 3\n2, 3, 4\n")
put(b"no newline at the end")
"""


async def _stream_lines(transport) -> tuple[list[str], int]:
    import sys as _sys

    stream = await transport.stream([_sys.executable if transport.host.local else "python3", "-c", _AWKWARD_WRITER])
    lines, batches = [], 0
    async with stream:
        async for batch in stream.batches():
            lines += batch
            batches += 1
    return lines, batches


def _expected_awkward() -> list[str]:
    from cockpit.hosts.transport import MAX_LINE

    return ["first", "second", "x" * MAX_LINE, "after-long", "caf\u00e9 line", "0, 1, 2", "1, 2, 3", "2, 3, 4", "no newline at the end"]


async def test_stream_lines_from_awkward_writes_local():
    from cockpit.config import HostConfig
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport

    lines, batches = await _stream_lines(LocalTransport(HostConfig(name="here", local=True), CommandLog()))
    assert lines == _expected_awkward()
    assert batches < len(lines)  # the three lines written at once came as one batch


async def test_stream_lines_from_awkward_writes_over_ssh(sshd):
    from cockpit.hosts.pool import TransportPool

    pool = TransportPool(parse_config(sshd.config_toml(sshd.host_toml("h"))))
    try:
        lines, batches = await _stream_lines(pool.get("h"))
        assert lines == _expected_awkward()
        assert batches < len(lines)
    finally:
        await pool.close()


@pytest.mark.parametrize("ssh_config_text, cipher", [
    ("", "aes128-gcm@openssh.com"),  # no Ciphers line: AES-GCM first (one OpenSSL call per packet)
    ("Host *\n  Ciphers aes256-ctr\n", "aes256-ctr"),  # the user's own choice is followed
])
async def test_cipher_is_aes_gcm_unless_ssh_config_names_one(sshd, tmp_path, ssh_config_text, cipher):
    from cockpit.hosts.pool import TransportPool

    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(ssh_config_text)
    text = sshd.config_toml(sshd.host_toml("h")).replace("config = []", f'config = ["{ssh_config}"]')
    pool = TransportPool(parse_config(text))
    try:
        transport = pool.get("h")
        await transport.connect()
        assert transport.connection.get_extra_info("recv_cipher") == cipher
    finally:
        await pool.close()
