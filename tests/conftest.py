"""Shared fixtures: the real loopback sshd, config files, the stand-in nvidia-smi on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.sshd import STANDIN_DIR, SshdHarness, sshd_available

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_xdg(tmp_path_factory, monkeypatch):
    """Never read or write the user's real config, state or data."""
    base = tmp_path_factory.mktemp("xdg")
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data")):
        monkeypatch.setenv(var, str(base / sub))
    monkeypatch.setenv("COCKPIT_NO_NVML", "1")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def sshd(tmp_path):
    if not sshd_available():
        pytest.fail("OpenSSH sshd is not installed: .ci/run installs openssh-server")
    harness = SshdHarness(tmp_path / "sshd").start()
    yield harness
    harness.stop()


@pytest.fixture
def standin_path(monkeypatch, tmp_path):
    """The stand-in nvidia-smi first on PATH for local-host tests; returns its scenario dir."""
    scen = tmp_path / "local-scenarios"
    scen.mkdir()
    monkeypatch.setenv("PATH", f"{STANDIN_DIR}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_DIR", str(scen))
    return scen


def write_config(tmp_path: Path, text: str, name: str = "cockpit.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fault suite's table (tests/faults), when any of it ran."""
    import json

    from harness.faultreport import REPORT, format_table

    if not REPORT:
        return
    terminalreporter.write_sep("=", "fault suite")
    for line in format_table(REPORT).splitlines():
        terminalreporter.write_line(line)
    target = os.environ.get("COCKPIT_FAULT_REPORT")
    if target:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump([row.as_dict() for row in REPORT], handle, indent=2)
