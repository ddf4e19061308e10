"""Shared fixtures: the real loopback sshd, config files, the stand-in nvidia-smi on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness.sshd import STANDIN_DIR, SshdHarness
from harness.tools import need, summary_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_xdg(tmp_path_factory, monkeypatch):
    """Never read or write the user's real config, state or data."""
    from cockpit import paths

    base = tmp_path_factory.mktemp("xdg")
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(base / sub))
    paths.use_storage(None)  # a config's [storage] (the demo's) set by an earlier test's context is not this test's
    monkeypatch.setenv("COCKPIT_NO_NVML", "1")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def sshd(tmp_path):
    need("sshd")
    harness = SshdHarness(tmp_path / "sshd").start()
    yield harness
    harness.stop()


@pytest.fixture
def needs_sshd():
    """For tests that start their own sshds (the fault suite)."""
    need("sshd")


@pytest.fixture
def session(tmp_path):
    """A tmux session name for the test (killed after it)."""
    need("tmux")
    name = f"cockpit-test-{os.getpid()}-{time.monotonic_ns()}"
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


# Markers applied by the fixtures a test uses (`-m "not slow"`: the fast loop; `-m sshd` etc.)
FIXTURE_MARKERS = {"sshd": "sshd", "needs_sshd": "sshd", "nodes4": "sshd", "second_sshd": "sshd", "session": "tmux", "wheel_venv": "wheel",
                   "slurm_cluster": "slurm"}
SLOW_FIXTURES = {"sshd", "needs_sshd", "session", "wheel_venv", "nodes4", "second_sshd", "slurm_cluster"}
MODULE_MARKERS = {"test_prometheus": "prometheus", "test_wheel": "wheel"}
# Tiers by cost, not by module name: a test is slow when it took SLOW_S or more (its setup included: a session's
# sshd, a server started) in the last recorded full run (tests/durations.json, written by
# `python -m pytest --record-durations`), or when it needs what is slow to have (sshd, tmux, the wheel).  A test
# the file does not know yet is judged by those fixtures alone until the next recording.
DURATIONS = Path(__file__).resolve().parent / "durations.json"
SLOW_S = 0.5
_measured: dict[str, float] = {}


def pytest_addoption(parser):
    parser.addoption("--record-durations", action="store_true",
                     help="write every test's time (setup, call and teardown) to tests/durations.json: the fast loop's tiers")


def _durations() -> dict[str, float]:
    import json

    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def pytest_configure(config):
    # tests that share one machine-wide thing that cannot take two at once run on one worker (pytest-xdist's loadgroup)
    config.addinivalue_line("markers", "xdist_group(name): run on the same worker as the group's other tests")
    # a run that selects by marker (the fast loop, `-m 'not slow'`) leaves the deselected tests' snapshots unread: that
    # is no stale snapshot, so it warns instead of failing; a whole run still fails on one no test reads
    if getattr(config.option, "markexpr", "") and hasattr(config.option, "warn_unused_snapshots"):
        config.option.warn_unused_snapshots = True


def pytest_collection_modifyitems(config, items):
    durations = _durations()
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in names:
                item.add_marker(getattr(pytest.mark, marker))
        if module in MODULE_MARKERS:
            item.add_marker(getattr(pytest.mark, MODULE_MARKERS[module]))
        if "slurm_cluster" in names and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(func_only=True))  # the cluster's start (the fixture's) is not the test's time
        cost = durations.get(_recorded_id(item.nodeid))
        if (cost is not None and cost >= SLOW_S) or names & SLOW_FIXTURES or module in MODULE_MARKERS:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):
        # pytest-xdist runs each test apart (a group together) in the order collected: the longest first, so that no long
        # test starts last and keeps the run waiting on one worker (the same order on every worker: a stable sort).  A
        # group's tests keep their own order, together, at the group's whole time
        def group(item) -> str | None:
            mark = item.get_closest_marker("xdist_group")
            return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) if mark else None

        cost = {item.nodeid: durations.get(_recorded_id(item.nodeid), 0.0) for item in items}
        groups: dict[str, float] = {}
        for item in items:
            if (name := group(item)) is not None:
                groups[name] = groups.get(name, 0.0) + cost[item.nodeid]
        items.sort(key=lambda item: -(groups[name] if (name := group(item)) is not None else cost[item.nodeid]))


def _recorded_id(nodeid: str) -> str:
    """The test's id as tests/durations.json has it: without the `@group` pytest-xdist's loadgroup adds."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") and at > nodeid.rfind("::") else nodeid


_warming: list[subprocess.Popen] = []


def pytest_sessionstart(session):
    """A whole run as root (not a selection by marker, not an xdist worker): the machine's Slurm and Docker start in the
    background now (harness/managers.py warm()), beside the first tests rather than inside one's time limit."""
    config = session.config
    if hasattr(config, "workerinput") or getattr(config.option, "markexpr", "") or os.geteuid() != 0:
        return
    tests = Path(__file__).resolve().parent
    log = open(os.path.join(tempfile.gettempdir(), f"cockpit-tests-warm-{os.getpid()}.log"), "w")  # noqa: SIM115 - the child's
    warming = subprocess.Popen([sys.executable, "-m", "harness.managers"], cwd=tests, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(tests)})
    log.close()
    _warming.append(warming)
    # reaped as soon as it ends: a test that counts this process's children finds no <defunct> one of the run's own
    threading.Thread(target=warming.wait, name="reap the warm start", daemon=True).start()


def pytest_runtest_logreport(report):
    nodeid = _recorded_id(report.nodeid)
    _measured[nodeid] = _measured.get(nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    for warming in _warming:
        try:
            warming.wait(timeout=120)
        except subprocess.TimeoutExpired:
            warming.kill()
            warming.wait()
    if session.config.getoption("--record-durations", default=False) and _measured:
        import json

        merged = {**_durations(), **{k: round(v, 3) for k, v in _measured.items()}}
        DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")


@pytest.fixture
def slurm_cluster():
    """This machine's Slurm for the tests (harness/managers.py): started here when the run's warm start has not (a cold
    one, MariaDB included, takes tens of seconds on a bare machine; its tests time their own work only)."""
    from harness.managers import slurm

    return slurm()


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
    """Tests skipped for a missing system tool, counted; the fault suite's table (tests/faults), when any of it ran."""
    import json

    from harness.faultreport import REPORT, format_table

    missing = summary_lines()
    if missing:
        terminalreporter.write_sep("=", "missing system tools")
        for line in missing:
            terminalreporter.write_line(line)
    if not REPORT:
        return
    terminalreporter.write_sep("=", "fault suite")
    for line in format_table(REPORT).splitlines():
        terminalreporter.write_line(line)
    target = os.environ.get("COCKPIT_FAULT_REPORT")
    if target:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump([row.as_dict() for row in REPORT], handle, indent=2)
