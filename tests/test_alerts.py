"""Alerts that reach a person: through Apprise to a real local HTTP endpoint, a command (argv, no
shell), the terminal's bell and notification escape (seen by a real tmux), deduplicated, rate
limited and recorded."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from cockpit.alerts import Alert, Alerter, AlertSettings, terminal_sequence
from cockpit.runs.watch import RunEvent, run_alert

from harness.tmux import new_session, tmux


class Hook:
    """A local HTTP endpoint that records what is posted to it."""

    def __init__(self):
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def hook():
    server = Hook()
    yield server
    server.close()


def test_an_alert_reaches_a_local_http_endpoint_through_apprise(tmp_path, hook):
    settings = AlertSettings(urls=(f"json://127.0.0.1:{hook.port}/cockpit",))
    alerter = Alerter(settings, log_path=tmp_path / "alerts.jsonl")
    alert = run_alert(RunEvent("crashed", "eagle3-train", "training run eagle3-train crashed: CUDA out of memory"))
    delivery = asyncio.run(alerter.send(alert))
    assert delivery.sent and delivery.channels == {"urls": "ok"}
    [body] = hook.bodies
    assert body["title"] == "eagle3-train: training crashed" and "CUDA out of memory" in body["message"]
    assert body["type"] == "failure"  # a crash is an error
    [record] = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert record["sent"] and record["kind"] == "run_crashed" and record["channels"] == {"urls": "ok"}


def test_duplicates_and_floods_are_held_back_and_recorded(tmp_path, hook):
    now = [1000.0]
    alerter = Alerter(AlertSettings(urls=(f"json://127.0.0.1:{hook.port}/x",), min_interval_s=600, max_per_hour=3),
                      clock=lambda: now[0], log_path=tmp_path / "a.jsonl")

    def send(key: str) -> bool:
        return asyncio.run(alerter.send(Alert("checkpoint", key, "t", "x"))).sent

    assert send("a") and not send("a")  # the same alert twice: once
    now[0] += 601
    assert send("a")  # after min_interval_s: again
    assert send("b") and not send("c")  # three in the hour: the fourth waits
    now[0] += 3600
    assert send("c")
    assert len(hook.bodies) == 4
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["sent"] for r in records] == [True, False, True, True, False, True]
    assert records[1]["why"].startswith("duplicate") and records[4]["why"].startswith("rate limit")


def test_a_command_gets_the_alert_as_arguments_never_through_a_shell(tmp_path):
    out = tmp_path / "got.json"
    script = f"import json, sys; json.dump(sys.argv[1:], open({str(out)!r}, 'w'))"
    alerter = Alerter(AlertSettings(command=(sys.executable, "-c", script)), log_path=tmp_path / "a.jsonl")
    text = "step 5: {'loss': nan}; $(touch pwned) `id` | rm -rf /"
    delivery = asyncio.run(alerter.send(Alert("run_stalled", "k", "run: stalled", text)))
    assert delivery.channels == {"command": "ok"}
    assert json.loads(out.read_text()) == ["run: stalled", text] and not (tmp_path / "pwned").exists()
    missing = Alerter(AlertSettings(command=("/nonexistent/notify",)), log_path=tmp_path / "a.jsonl")
    delivery = asyncio.run(missing.send(Alert("x", "k", "t", "x")))
    assert not delivery.sent and "/nonexistent/notify" in delivery.channels["command"]
    silent = Alerter(AlertSettings(command=("false",)), log_path=tmp_path / "a.jsonl")  # fails, says nothing
    said = asyncio.run(silent.send(Alert("x", "k", "t", "x"))).channels["command"]
    assert said == "failed: false exited 1 (it wrote nothing to stderr)", said
    loud = Alerter(AlertSettings(command=(sys.executable, "-c", "import sys; sys.exit('no route')")), log_path=tmp_path / "a.jsonl")
    assert asyncio.run(loud.send(Alert("x", "k", "t", "x"))).channels["command"].endswith("exited 1: no route")


def test_the_terminal_sequence_and_its_tmux_wrapping():
    alert = Alert("sweep_done", "k", "sweep; done", "depth 5\x07 wins\x1b[31m")
    plain = terminal_sequence(alert, in_tmux=False)
    assert terminal_sequence(alert, in_tmux=False, bell=False).startswith("\x1b]777;")  # [alerts] bell = false: no bell
    assert plain.startswith("\a") and "\x1b]777;notify;sweep, done;depth 5 wins[31m\x07" in plain  # no control byte inside
    wrapped = terminal_sequence(alert, in_tmux=True)
    assert "\x1bPtmux;\x1b\x1b]777;notify;" in wrapped and wrapped.endswith("\x1b\\")


def test_alert_test_in_tmux_rings_the_bell_and_sends_the_notification(tmp_path, session):
    """`cockpit alert test` in a tmux window: tmux sees the bell (its window bell flag) and the
    notification escape passes through to the terminal."""
    captured = tmp_path / "raw"
    config = tmp_path / "c.toml"
    config.write_text("[hosts.here]\nlocal = true\n\n[alerts]\nbell = true\n")
    env = " ".join(f"{k}={v}" for k, v in {"XDG_STATE_HOME": tmp_path / "state", "XDG_CONFIG_HOME": tmp_path / "cfg"}.items())
    new_session(session, 100, 20, "sh")
    tmux("set-option", "-t", session, "-g", "allow-passthrough", "on")
    tmux("new-window", "-d", "-t", session, "sh")  # the alert rings in a window nobody looks at
    tmux("pipe-pane", "-o", "-t", f"{session}:1", f"cat > {captured}")
    tmux("send-keys", "-t", f"{session}:1", f"env {env} {sys.executable} -m cockpit alert test -c {config}; echo rc=$?", "Enter")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not re.search(rb"rc=\d", captured.read_bytes() if captured.exists() else b""):
        time.sleep(0.2)
    raw = captured.read_bytes()
    assert b"rc=0" in raw and b"terminal: ok" in raw
    assert b"\x07" in raw and b"\x1b]777;notify;cockpit test alert;" in raw
    flag = subprocess.run(["tmux", "display-message", "-p", "-t", f"{session}:1", "#{window_bell_flag}"], capture_output=True, text=True)
    assert flag.stdout.strip() == "1"


def test_alert_test_says_when_nothing_could_be_sent(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\n\n[alerts]\nbell = false\ndesktop = false\nurls = ["json://127.0.0.1:9/none"]\n')
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "s")}
    result = subprocess.run([sys.executable, "-m", "cockpit", "alert", "test", "-c", str(config), "--json"], capture_output=True,
                            text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and json.loads(result.stdout)["channels"]["urls"].startswith("failed")


def test_an_alert_resolves_once_when_its_condition_clears_and_the_log_says_raised_and_resolved(tmp_path, hook):
    from cockpit.serving.live import flag_alert, flag_resolved

    now = [1000.0]
    alerter = Alerter(AlertSettings(urls=(f"json://127.0.0.1:{hook.port}/x",), min_interval_s=600),
                      clock=lambda: now[0], log_path=tmp_path / "a.jsonl")
    send = lambda alert: asyncio.run(alerter.send(alert)).sent  # noqa: E731
    hung = flag_alert("launch", {"kind": "hung", "message": "no decode line for 40 s while 8 request(s) run"})
    assert not send(flag_resolved("launch", "hung"))  # nothing raised: nothing to resolve
    assert send(hung)
    now[0] += 20
    assert send(flag_resolved("launch", "hung")) and not send(flag_resolved("launch", "hung"))  # once
    now[0] += 20
    assert send(hung)  # the condition back, inside min_interval_s: news again
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [(r["phase"], r["sent"], r["at"]) for r in records] == [
        ("resolved", False, 1000.0), ("raised", True, 1000.0), ("resolved", True, 1020.0), ("resolved", False, 1020.0),
        ("raised", True, 1040.0)]
    assert len(hook.bodies) == 3 and "cleared" in json.dumps(hook.bodies[1])


def test_alert_test_without_a_terminal_says_so_and_exits_0_when_the_others_worked(tmp_path, hook):
    """Issue 50: from cron or a script (no controlling terminal), `alert test` said "terminal: failed", rc 1, though its
    URL was delivered."""
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[alerts]\nurls = ["json://127.0.0.1:{hook.port}/x"]\n')
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "s")}
    result = subprocess.run([sys.executable, "-m", "cockpit", "alert", "test", "-c", str(config), "--json"], capture_output=True,
                            text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    channels = json.loads(result.stdout)["channels"]
    assert result.returncode == 0 and channels["urls"] == "ok" and channels["terminal"].startswith("skipped: no terminal")
    assert result.stderr == ""
