"""The process table (issue 40): a host's compute processes as nvitop shows them, sortable, and killed only through the
kill steps' plan and confirmation.  The host is this machine with the STAND-IN nvidia-smi (tests/standin: it replays
recorded H200 output with the compute processes a scenario names), the processes are real ones started here, and
`ps` is the real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from cockpit.hosts.proctable import ProcessTable, ProcRow, duration, parse_ps_table, sort_rows


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120, **kw)


PS = """\
   4242 alice                              3601  8123456 100000 python -m sglang.launch_server --model-path /m --tp 2
   4243 bob                                  12   204800     65 python train.py --lr 1e-4
      1 root                                  0     1024 999999 /sbin/init
"""


def test_cpu_is_measured_between_polls_and_a_process_ps_cannot_see_is_kept_and_said_so():
    table = ProcessTable(clock=lambda: 0.0)
    compute = [(4242, 0, 30000), (4242, 1, 30000), (4243, 2, 1024), (777, 3, 512)]
    first = {r.pid: r for r in table.update(compute, PS, now=100.0)}
    assert first[4242].gpus == (0, 1) and first[4242].gpu_mib == 60000 and first[4242].cpu_percent is None  # one poll: no CPU yet
    assert first[4242].user == "alice" and first[4242].rss_kib == 8123456 and first[4242].run_s == 100000
    assert not first[777].seen and first[777].user is None and "another PID namespace" in first[777].to_json()["why"]
    later = PS.replace("3601  8123456", "3611  8123456")  # 10 CPU seconds in 5 s of wall time: 200 % (two cores)
    second = {r.pid: r for r in table.update(compute, later, now=105.0)}
    assert second[4242].cpu_percent == 200.0 and second[4243].cpu_percent == 0.0
    table.update([(4243, 2, 1024)], later, now=110.0)
    assert set(table._last) == {4243}  # a process gone is forgotten: bounded
    assert 1 not in first  # not a compute process: not in the table


def test_this_machines_processes_read_from_proc_say_what_ps_says(tmp_path):
    """On the cockpit's own machine the table reads /proc (no ps spawned each poll): for a real busy process the same
    user, command line, resident memory and run time as the real ps, and CPU time finer than ps's whole seconds; the ps
    the table runs on another host lists only the pids asked for (-p without -e, which would add every process)."""
    from cockpit.hosts.proctable import PS_TABLE_ARGV, read_proc

    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass",
                             "cockpit_read_proc_test"])
    try:
        time.sleep(1.5)
        ours = read_proc([busy.pid, 999_999_999])
        ps = parse_ps_table(subprocess.run([*PS_TABLE_ARGV, "-p", f"{busy.pid},1"], capture_output=True, text=True).stdout)
        after = read_proc([busy.pid])[busy.pid]
        assert set(ps) == {busy.pid, 1} and set(ours) == {busy.pid}  # a pid that is not there is left out, as by ps
        mine, theirs = ours[busy.pid], ps[busy.pid]
        assert (mine.user, mine.args) == (theirs.user, theirs.args) and "cockpit_read_proc_test" in mine.args
        assert abs(mine.rss_kib - theirs.rss_kib) < 1024
        # ps's whole seconds fall between our two reads around it (whatever the machine's load: an order, no threshold);
        # a second either way for ps's own rounding of the start time
        assert int(mine.run_s) - 1 <= theirs.run_s <= after.run_s + 1
        assert int(mine.cpu_s) <= theirs.cpu_s <= after.cpu_s and mine.cpu_s <= after.cpu_s  # in clock ticks: finer
    finally:
        busy.kill()
        busy.wait()


def test_rows_sort_by_any_column_with_unknowns_last():
    rows = [ProcRow(1, (0,), 100, "a", 5.0, 10, 60, "x"), ProcRow(2, (1,), 300, "b", None, 20, 30, "y"),
            ProcRow(3, (2,), None, None, None, None, None, None, seen=False)]
    assert [r.pid for r in sort_rows(rows, "gpu_mib")] == [2, 1, 3]
    assert [r.pid for r in sort_rows(rows, "gpu_mib", descending=False)] == [1, 2, 3]
    assert [r.pid for r in sort_rows(rows, "cpu")] == [1, 2, 3]
    assert [r.pid for r in sort_rows(rows, "time", descending=False)] == [2, 1, 3]
    with pytest.raises(ValueError, match="sort by one of"):
        sort_rows(rows, "colour")
    assert (duration(59), duration(723), duration(10931), duration(2 * 86400 + 4 * 3600)) == ("59s", "12:03", "3:02:11", "2d 04h")
    assert parse_ps_table("garbage\n12 x y z\n") == {}


@pytest.fixture
def holder(standin_path):
    """A real process the stand-in nvidia-smi lists on GPUs 1 and 3."""
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 60; : cockpit_procs_test"])
    (standin_path / "default.json").write_text(json.dumps({"gpus": 4, "processes": [
        {"pid": proc.pid, "name": "python3", "used_memory": 4000, "gpu": 1},
        {"pid": proc.pid, "name": "python3", "used_memory": 2000, "gpu": 3}]}))
    time.sleep(0.2)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_cockpit_procs_shows_the_hosts_compute_processes_and_kills_only_through_the_plan(tmp_path, holder, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\ntelemetry = "smi"\n')
    env = {**os.environ}
    out = cli("procs", "--json", "--interval", "0.3", "--config", str(config), env=env)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    [row] = json.loads(out.stdout)["processes"]
    assert row["pid"] == holder.pid and row["gpus"] == [1, 3] and row["gpu_mib"] == 6000 and row["gpu_mibs"] == [4000, 2000]
    assert "cockpit_procs_test" in row["command"] and row["rss_kib"] > 0 and row["cpu_percent"] is not None
    text = cli("procs", "--sort", "pid", "--asc", "--config", str(config), env=env)
    assert text.returncode == 0 and "PID^" in text.stdout and "2000-4000MiB each" in text.stdout and "1,3" in text.stdout
    assert "6000MiB" not in text.stdout  # memory as a GPU holds it, never summed over GPUs (issue 50 item 7)
    # no terminal, no --yes: the plan is shown, nothing is killed
    refused = cli("procs", "--kill", str(holder.pid), "--config", str(config), env=env)
    assert refused.returncode == 1 and f"{holder.pid}" in refused.stderr and "SIGTERM" in refused.stderr
    assert holder.poll() is None
    killed = cli("procs", "--kill", str(holder.pid), "--yes", "--json", "--config", str(config), env=env)
    assert killed.returncode == 0, killed.stdout + killed.stderr
    data = json.loads(killed.stdout)
    assert data["state"] == "passed" and "6000" in data["plan"] and "1:4000 3:2000" in data["plan"]
    holder.wait(timeout=15)
    audit = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.jsonl"))
    assert f'"pids": [{holder.pid}]' in audit and '"confirmed"' in audit


def test_another_users_process_is_left_alone_unless_the_host_allows_it(tmp_path, standin_path, monkeypatch):
    import pwd

    if os.geteuid() != 0:
        pytest.skip("starting another user's process needs root (CI runs as root)")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    theirs = subprocess.Popen(["/bin/sh", "-c", "sleep 60; : cockpit_procs_other"], user=pwd.getpwnam("nobody").pw_name, cwd="/")
    (standin_path / "default.json").write_text(json.dumps({"gpus": 2, "processes": [
        {"pid": theirs.pid, "name": "python3", "used_memory": 1000, "gpu": 0}]}))
    try:
        time.sleep(0.2)
        config = tmp_path / "c.toml"
        config.write_text('[hosts.here]\nlocal = true\ntelemetry = "smi"\n')
        left = cli("procs", "--kill", str(theirs.pid), "--yes", "--config", str(config))
        assert left.returncode == 0 and "no matching process on here; 1 of other users left alone" in left.stdout, left.stdout
        assert theirs.poll() is None
        config.write_text('[hosts.here]\nlocal = true\ntelemetry = "smi"\nkill_any_user = true\n')
        done = cli("procs", "--kill", str(theirs.pid), "--yes", "--config", str(config))
        assert done.returncode == 0 and "<- another user" in done.stdout, done.stdout + done.stderr
        theirs.wait(timeout=15)
    finally:
        if theirs.poll() is None:
            theirs.kill()
            theirs.wait()


async def test_the_process_pane_sorts_selects_copies_and_kills_through_the_plan(tmp_path, holder, monkeypatch):
    """p on a host: its compute processes (the stand-in nvidia-smi's, a real process), o/O sort, y copies the command
    line (OSC 52), K shows the kill plan and kills on y; nothing is killed on n."""
    from cockpit.config import parse_config
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.screens.confirm import ConfirmScreen
    from cockpit.ui.widgets.proc_pane import ProcessPane
    from helpers import eventually

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = parse_config('[hosts.here]\nlocal = true\ntelemetry = "smi"\n[telemetry]\nprocesses_interval_s = 2\n')
    app = CockpitApp(config)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.hub.latest.get("here") is not None and app.hub.latest["here"].processes, 15)
        app.panes["here"].focus()
        await pilot.press("p")
        pane = app.query_one(ProcessPane)
        await eventually(lambda: any(r.pid == holder.pid for r in pane.rows), 15)
        assert pane.display and pane.host == "here"
        text = str(pane.content)
        assert f"{holder.pid}" in text and "2000-4000MiB each" in text and "cockpit_procs_test" in text and "GPU-MEMv" in text
        pane.focus()
        await pilot.press("o")
        assert pane.sort == "cpu" and "%CPUv" in str(pane.content)
        await pilot.press("O")
        assert not pane.descending and "%CPU^" in str(pane.content)
        await pilot.press("y")
        assert copied and "cockpit_procs_test" in copied[0]
        # Y: the copied text whole, in a text area to select (a terminal that ignores OSC 52); esc back
        from cockpit.ui.screens.copied import CopiedScreen
        from textual.widgets import TextArea

        await pilot.press("Y")
        assert isinstance(app.screen, CopiedScreen) and app.screen.query_one(TextArea).text == copied[0]
        assert app.screen.query_one(TextArea).selected_text == copied[0]  # selected already
        await pilot.press("escape")
        assert not isinstance(app.screen, CopiedScreen)
        # /: only the rows a pattern matches (case-smart), said in the title; an empty pattern shows every row again
        pane.focus()
        await pilot.press("slash", *"COCKPIT_PROCS", "enter")
        assert pane.ordered() == [] and "no process matches /COCKPIT_PROCS" in str(pane.content)
        await pilot.press("slash", "ctrl+u", *"cockpit_procs", "enter")
        assert [r.pid for r in pane.ordered()] == [holder.pid] and "/cockpit_procs (1 of" in pane.border_title
        await pilot.press("slash", "ctrl+u", "enter")
        assert pane.filter_text == "" and "/" not in pane.border_title.split("·")[-1]
        # issue 50 item 6: a filter that hides every row says so (y and K name the filter, not ps) and Esc clears it
        await pilot.press("slash", *"zzz", "enter")
        assert "no process matches /zzz (Esc: every process)" in str(pane.content)
        await pilot.press("y")
        assert any("the filter /zzz hides every process" in n.message for n in app._notifications)
        await pilot.press("escape")
        assert pane.filter_text == "" and [r.pid for r in pane.ordered()] == [holder.pid] and pane.display
        await pilot.press("K")
        try:
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), 15)
        except AssertionError:
            raise AssertionError([n.message for n in app._notifications]) from None
        assert f"{holder.pid}" in app.screen.plan and "1:4000 3:2000" in app.screen.plan
        await pilot.press("n")
        await pilot.pause(0.5)
        assert holder.poll() is None  # refused: untouched
        pane.focus()
        await pilot.press("K")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), 15)
        await pilot.press("y")
        await eventually(lambda: holder.poll() is not None, 20)


def test_gpu_memory_is_shown_per_gpu_never_summed_over_them():
    """Every spread of one process over 1-8 GPUs (alike, unlike, one unknown): the figure shown is one a GPU holds."""
    import itertools
    import re

    from cockpit.hosts.proctable import ProcessTable, cells

    for count, unlike, unknown in itertools.product(range(1, 9), (False, True), (False, True)):
        mibs = [126518 - (i * 1000 if unlike else 0) for i in range(count)]
        if unknown and count > 1:
            mibs[-1] = None
        [row] = ProcessTable().update([(4242, i, m) for i, m in enumerate(mibs)], "")
        shown = cells(row)["gpu_mib"]
        figures = [int(f) for f in re.findall(r"\d+", shown)]
        known = [m for m in mibs if m is not None]
        assert figures and max(figures) == max(known) and min(figures) >= min(known), (mibs, shown)
        assert ("each" in shown) == (count > 1), (mibs, shown)


async def test_the_process_pane_says_nothing_of_a_host_before_its_first_look():
    """Before the first look at a host's processes the pane says it is reading them, never "no compute process"
    (that is said only of a look that found none); following another host starts over."""
    from textual.app import App

    from cockpit.ui.widgets.proc_pane import ProcessesPolled, ProcessPane

    class Bare(App):  # no hub: the pane's own poll finds nothing to ask, so only the messages below are its looks
        def compose(self):
            yield ProcessPane()

    app = Bare()
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(ProcessPane)
        for host in ("gpu-server", "trainer"):
            pane.follow(host)
            await pilot.pause()
            assert f"reading the processes of {host}" in str(pane.content) and "no compute process" not in str(pane.content)
            pane.post_message(ProcessesPolled(host, [], None))
            await pilot.pause()
            assert "no compute process on its GPUs" in str(pane.content)
