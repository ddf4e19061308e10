"""Many hosts: the fleet view (one line per host), its filter, opening a host, and the status CLI's
one line per host; snapshots at 80x24 and 160x48 with 128 hosts x 8 GPUs."""

from __future__ import annotations

import time

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import ComputeProcess, GpuSample, HostSnapshot
from cockpit.telemetry.report import render_summary_text
from cockpit.ui.app import CockpitApp
from cockpit.ui.widgets.fleet import FleetTable
from cockpit.ui.widgets.host_pane import HostPane

FUTURE = 4102444800.0  # ages read the same whenever the test runs


def fleet_config(n: int) -> str:
    hosts = "".join(f'[hosts.node{i:03d}]\naddress = "10.0.{i // 250}.{i % 250 + 1}"\nroles = ["{"serving" if i % 2 else "training"}"]\n'
                    + ('telemetry = "prometheus"\n' if i % 4 == 3 else "") + "\n" for i in range(n))
    return '[prometheus]\nurl = "http://127.0.0.1:9"\n\n' + hosts


def fixed(config, now: float = FUTURE) -> TelemetryHub:
    hub = TelemetryHub(config)
    for i, host in enumerate(config.hosts):
        state = HostState.UNREACHABLE if i % 17 == 5 else HostState.STALE if i % 13 == 7 else HostState.UP
        gpus = tuple(GpuSample(index=g, uuid=f"GPU-{i}-{g}", name="NVIDIA H200", memory_used_mib=(i * 977 + g * 15013) % 143771,
                               memory_total_mib=143771, power_w=80.0 + (i + g) % 600, power_limit_w=700.0,
                               utilization_pct=(i * 7 + g * 13) % 101, temperature_c=35 + (i + g) % 40) for g in range(8))
        source = "prometheus" if host.telemetry == "prometheus" else "nvidia-smi"
        processes = () if source == "prometheus" else (ComputeProcess(1000 + i, "python3", 4000, f"GPU-{i}-0", 0),)
        hub.publish(HostSnapshot(host.name, state, error="connection refused" if state is HostState.UNREACHABLE else None,
                                 gpus=gpus if state is not HostState.UNREACHABLE else (), processes=processes,
                                 sampled_at=now - (40 if state is HostState.STALE else 1), source=source, roles=host.roles))
    return hub


async def test_filter_open_and_back(tmp_path):
    config = parse_config(fleet_config(40))
    app = CockpitApp(config, hub=fixed(config, time.time()))
    async with app.run_test(size=(160, 48)) as pilot:
        fleet = app.query_one(FleetTable)
        assert app.panes == {} and len(fleet.rows) == 40 and fleet.has_focus  # no pane built for 40 hosts
        await pilot.press("slash")
        search = app.query_one("#fleet-filter")
        assert search.has_focus, app.focused
        await pilot.press(*"role", "colon", *"serving", "enter")
        assert len(fleet.rows) == 20 and all("serving" in h.roles for h in fleet.rows) and fleet.has_focus
        assert "20 of 40 hosts" in str(fleet.border_title)
        await pilot.press("j", "j", "enter")
        pane = app.query_one(HostPane)
        assert pane.host.name == fleet.rows[2].name and pane.has_focus and not fleet.display
        assert pane.snapshot is app.hub.latest[pane.host.name]  # its own pane, with its latest sample
        await pilot.press("z")  # back to the fleet
        assert fleet.display and fleet.has_focus and not pane.display
        await pilot.press("slash", "escape")
        assert len(fleet.rows) == 40


def test_the_status_cli_summary_line_per_host():
    config = parse_config(fleet_config(128))
    hub = fixed(config, FUTURE)
    text = render_summary_text([hub.latest[h.name] for h in config.hosts], FUTURE)
    lines = text.splitlines()
    assert len(lines) == 129 and lines[0].startswith("128 hosts, 960 GPUs") and "8 down, 9 stale" in lines[0]
    prometheus_line = next(line for line in lines if line.startswith("node003"))
    assert "procs  ?" in prometheus_line  # Prometheus has no process list: unknown, never 0


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_fleet_snapshot(snap_compare, monkeypatch, size):
    import cockpit.ui.widgets.fleet as fleet_module

    monkeypatch.setattr(fleet_module.time, "time", lambda: FUTURE)
    config = parse_config(fleet_config(128))
    app = CockpitApp(config, hub=fixed(config))
    assert snap_compare(app, terminal_size=size)
