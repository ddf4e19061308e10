"""The real TUI in a real terminal: tmux runs `cockpit`, send-keys types, capture-pane reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from harness.tmux import joined, new_session, screen, tmux, wait_screen, walk_demo  # noqa: F401


def start(session: str, config, env: dict[str, str]) -> int:
    # pytest sets COLUMNS and LINES; a program in tmux must size itself from its real terminal
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES"] + [f"{k}={v}" for k, v in env.items()]
                       + [sys.executable, "-m", "cockpit", "--config", str(config)])
    new_session(session, 100, 30, command)
    return int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())


def test_tui_in_tmux_shows_every_gpu_help_and_quits(sshd, tmp_path, session):
    sshd.scenario({"gpus": 8, "set": {"5": {"memory.used": 30000}}})
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=500))
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "tmux-256color"}
    pid = start(session, config, env)
    shown = wait_screen(session, "GPU 7")
    assert "gpu-server" in shown and "30000/143771" in shown
    tmux("send-keys", "-t", session, "?")
    wait_screen(session, "app.toggle_log")  # the help table, with binding ids
    tmux("send-keys", "-t", session, "Escape")
    time.sleep(0.5)
    tmux("send-keys", "-t", session, "q")
    deadline = time.monotonic() + 15
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_exits_when_the_terminal_goes_away(sshd, tmp_path, session):
    """An SSH drop takes the terminal away: the cockpit must exit, not spin."""
    sshd.scenario({"gpus": 2})
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=500))
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "tmux-256color"}
    start(session, config, env)
    wait_screen(session, "GPU 1")
    cockpits = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and "cockpit" in p.info["cmdline"]
                and str(config) in p.info["cmdline"]]
    assert cockpits
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)  # the terminal is gone (SIGHUP)
    gone, alive = psutil.wait_procs(cockpits, timeout=15)
    assert not alive, [p.cpu_percent(0.5) for p in alive]


# 80x24 here; 160x48, the other end of the sizes, is the installed wheel's walk (tests/test_wheel.py), the same keys and
# screens through its console script
@pytest.mark.parametrize("size", [(80, 24)], ids=["80x24"])
def test_demo_in_tmux_walks_the_story_to_the_charts(tmp_path, session, size):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "TERM": "tmux-256color"}
    walk_demo(session, [sys.executable, "-m", "cockpit"], env, tmp_path / "demo", size=size)


def test_tui_killed_mid_step_shows_it_interrupted_and_resumes(tmp_path, session):
    """SIGKILL of the TUI while a step runs: the restarted TUI shows the step interrupted, and runs it again."""
    from harness.faultreport import FaultRow, report

    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n\n[runbook]\nname = "tui"\n\n'
                      '[[runbook.steps]]\nname = "slow"\nkind = "command"\nhost = "here"\nargv = ["sleep", "3"]\n')
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "tmux-256color"}
    pid = start(session, config, env)
    wait_screen(session, "1. slow")
    tmux("send-keys", "-t", session, "n")
    wait_screen(session, "running")
    os.kill(pid, 9)
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    restarted = time.monotonic()
    start(session, config, env)
    shown = wait_screen(session, "interrupted")
    recovery = time.monotonic() - restarted
    assert "failed" in shown
    tmux("send-keys", "-t", session, "n")
    wait_screen(session, "passed")
    report(FaultRow("SIGKILL of the TUI during a step", 1, "restarted TUI answers", 0, [recovery],
                    note="recovery: restart until the step shows as interrupted; then it runs again and passes"))


def test_the_tui_draws_on_the_terminal_when_stderr_goes_to_a_file(tmp_path, session):
    """Issue 36 item 9: `cockpit demo 2>err.log` gave a blank screen (Textual draws on stderr, which went to the
    file).  The screen is drawn on the terminal; the file gets no screen."""
    err = tmp_path / "err.log"
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES", "TERM=tmux-256color", f"XDG_STATE_HOME={tmp_path / 'state'}",
                        sys.executable, "-m", "cockpit", "demo", "--dir", str(tmp_path / "demo"), f"2>{err}"])
    new_session(session, 160, 48, f"sh -c '{command}'")
    shown = wait_screen(session, "0/8 passed", timeout=60)
    assert "cockpit DEMO" in shown
    tmux("send-keys", "-t", session, "q")
    time.sleep(2)
    said = err.read_text(errors="replace") if err.exists() else ""
    assert "\x1b[" not in said and "GPU 7" not in said, said[:500]


def test_the_mouse_is_the_cockpits_or_the_terminals_as_asked(tmp_path, session):
    """Issue 50 item 9: tmux's own mouse_any_flag (whether the program in the pane asked for mouse reports): on at start,
    off after `m` (the terminal selects text), on again after `m`; `--no-mouse` starts without it."""
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "tmux-256color"}

    def flag() -> str:
        return tmux("display-message", "-p", "-t", session, "#{mouse_any_flag}").strip()

    def becomes(value: str) -> None:
        deadline = time.monotonic() + 10
        while flag() != value and time.monotonic() < deadline:
            time.sleep(0.2)
        assert flag() == value, (value, screen(session))

    start(session, config, env)
    wait_screen(session, "here")
    becomes("1")
    tmux("send-keys", "-t", session, "m")
    becomes("0")
    wait_screen(session, "mouse off")
    tmux("send-keys", "-t", session, "m")
    becomes("1")
    tmux("send-keys", "-t", session, "q")
    tmux("kill-session", "-t", session)
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES"] + [f"{k}={v}" for k, v in env.items()]
                       + [sys.executable, "-m", "cockpit", "--no-mouse", "--config", str(config)])
    new_session(session, 100, 30, command)
    wait_screen(session, "here")
    time.sleep(0.5)
    assert flag() == "0"
