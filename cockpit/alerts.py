"""Alerts that reach a person who is not looking at the cockpit: a training run that finishes,
crashes or stalls, a new checkpoint, a server that crashes, hangs or loses its draft, a sweep that
ends.

Where they go, configured in `[alerts]`:
- the terminal: a bell and a desktop-notification escape (OSC 777 and OSC 9), wrapped for tmux's
  passthrough when inside tmux (tmux itself turns the bell into its window bell flag / alert);
- a command, as an argument list (never a shell): the alert's title and text are appended;
- notification URLs (Slack, email, ntfy, Discord, webhooks: `json://host/path`) through Apprise, a
  maintained library of ~100 services, installed with the optional extra `notify` (`pip install '.[notify]'`).

Every alert is deduplicated (the same key within `min_interval_s` is sent once), rate-limited
(`max_per_hour` in all), and recorded, sent or suppressed, in `$XDG_STATE_HOME/cockpit/alerts.jsonl`.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from dataclasses import dataclass, field

from cockpit.config import Config, Checker
from cockpit.paths import state_dir

ALERT_KEYS = {"bell", "desktop", "command", "urls", "min_interval_s", "max_per_hour"}
KINDS = ("run_finished", "run_crashed", "run_oom", "run_stalled", "run_died", "run_cancelled", "run_ended", "checkpoint",
         "server_crashed", "server_hung", "draft_not_used",
         "server_oom", "speculation", "sweep_done", "test")


@dataclass(frozen=True)
class AlertSettings:
    bell: bool = True
    desktop: bool = True  # the OSC 777/9 notification escape with the bell
    command: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    min_interval_s: float = 600.0
    max_per_hour: int = 30


@dataclass(frozen=True)
class Alert:
    kind: str
    key: str  # what makes two alerts "the same" (kind + run/step name)
    title: str
    text: str
    level: str = "warning"  # info, warning, error
    resolves: bool = False  # the condition of the alert with this key cleared: one "resolved" notice


@dataclass
class Delivery:
    alert: Alert
    sent: bool
    why: str = ""  # why not sent (duplicate, rate limit) or what failed
    channels: dict = field(default_factory=dict)  # channel -> "ok" or the error

    def to_json(self) -> dict:
        return {"kind": self.alert.kind, "key": self.alert.key, "phase": "resolved" if self.alert.resolves else "raised",
                "title": self.alert.title, "text": self.alert.text, "sent": self.sent, "why": self.why, "channels": self.channels}


def parse_alerts(config: Config) -> AlertSettings:
    raw = config.raw.get("alerts", {})
    check = Checker(str(config.path or "<config>"), config.text)
    if not isinstance(raw, dict):
        raise check.fail((), "alerts", "must be a table: [alerts]")
    table = ("alerts",)
    check.unknown_keys(table, raw, ALERT_KEYS)
    command = check.get(table, raw, "command", list, [])
    if command and not all(isinstance(a, str) and a for a in command):
        raise check.fail(table, "command", "must be a list of non-empty strings (the program, then its arguments; no shell)")
    urls = check.get(table, raw, "urls", list, [])
    for url in urls:
        if not isinstance(url, str) or "://" not in url:
            raise check.fail(table, "urls", f"{url!r} is not a notification URL (e.g. ntfy://topic, json://host/path, "
                             "slack://token); see Apprise's list of services")
    return AlertSettings(
        bell=check.get(table, raw, "bell", bool, True),
        desktop=check.get(table, raw, "desktop", bool, True),
        command=tuple(command),
        urls=tuple(urls),
        min_interval_s=check.get(table, raw, "min_interval_s", float, 600.0, minimum=0.0),
        max_per_hour=check.get(table, raw, "max_per_hour", int, 30, minimum=1),
    )


def terminal_sequence(alert: Alert, desktop: bool = True, in_tmux: bool | None = None, bell: bool = True) -> str:
    """The bytes for the terminal: BEL, and a desktop notification (OSC 777, which urxvt, foot,
    WezTerm, Ghostty and VTE terminals show; OSC 9 for iTerm2, Windows Terminal, kitty), each
    wrapped in tmux's DCS passthrough inside tmux (needs `set -g allow-passthrough on`; the bell
    reaches tmux either way)."""
    in_tmux = bool(os.environ.get("TMUX")) if in_tmux is None else in_tmux
    title = _safe(alert.title)
    body = _safe(alert.text)
    out = "\a" if bell else ""
    if desktop:
        for osc in (f"\x1b]777;notify;{title};{body}\x07", f"\x1b]9;{title}: {body}\x07"):
            out += ("\x1bPtmux;" + osc.replace("\x1b", "\x1b\x1b") + "\x1b\\") if in_tmux else osc
    return out


def _safe(text: str) -> str:
    """No control bytes and no ';' in an OSC field (it ends or splits the sequence)."""
    return "".join(ch for ch in text if ch >= " " and ch != "\x7f").replace(";", ",")[:400]


class Alerter:
    def __init__(self, settings: AlertSettings, terminal=None, clock=time.time, log_path=None, notifier=None):
        """`terminal(text)` writes to the user's terminal (the TUI's driver, or /dev/tty); None: no
        terminal channel.  `notifier` sends to URLs (default: Apprise, when installed)."""
        self.settings = settings
        self.terminal = terminal
        self.clock = clock
        self.log_path = log_path or (state_dir() / "alerts.jsonl")
        self._last: dict[str, float] = {}
        self._sent: deque = deque()
        self.notifier = notifier
        self._open: set[str] = set()  # keys raised (sent) and not resolved since

    def _suppressed(self, alert: Alert, now: float) -> str:
        if alert.resolves:
            return "" if alert.key in self._open else "nothing to resolve: it was never raised (or already resolved)"
        last = self._last.get(alert.key)
        if last is not None and now - last < self.settings.min_interval_s:
            return f"duplicate: sent {now - last:.0f} s ago (min_interval_s {self.settings.min_interval_s:g})"
        while self._sent and now - self._sent[0] > 3600:
            self._sent.popleft()
        if len(self._sent) >= self.settings.max_per_hour:
            return f"rate limit: {self.settings.max_per_hour} alerts in the last hour"
        return ""

    async def send(self, alert: Alert, force: bool = False) -> Delivery:
        now = self.clock()
        why = "" if force else self._suppressed(alert, now)
        delivery = Delivery(alert, sent=not why, why=why)
        if why:
            self._record(delivery, now)
            return delivery
        if alert.resolves:
            self._open.discard(alert.key)
            self._last.pop(alert.key, None)  # the condition coming back is news again
        else:
            self._open.add(alert.key)
            self._last[alert.key] = now
            self._sent.append(now)
        if self.terminal is not None and (self.settings.bell or self.settings.desktop) and not alert.resolves:
            try:
                self.terminal(terminal_sequence(alert, self.settings.desktop, bell=self.settings.bell))
                delivery.channels["terminal"] = "ok"
            except OSError as exc:
                delivery.channels["terminal"] = f"failed: {exc}"
        if self.settings.command:
            delivery.channels["command"] = await self._command(alert)
        if self.settings.urls:
            delivery.channels["urls"] = await self._urls(alert)
        failed = [c for c, r in delivery.channels.items() if r != "ok"]
        if failed and len(failed) == len(delivery.channels):
            delivery.sent, delivery.why = False, "; ".join(f"{c}: {delivery.channels[c]}" for c in failed)
        self._record(delivery, now)
        return delivery

    async def _command(self, alert: Alert) -> str:
        argv = [*self.settings.command, alert.title, alert.text]
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            return f"failed: {argv[0]}: {exc.strerror or exc}"
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 15)
        except asyncio.TimeoutError:
            proc.kill()
            return f"failed: {argv[0]} did not finish in 15 s"
        if proc.returncode != 0:
            said = err.decode(errors="replace").strip()[:200]
            return f"failed: {argv[0]} exited {proc.returncode}" + (f": {said}" if said else " (it wrote nothing to stderr)")
        return "ok"

    async def _urls(self, alert: Alert) -> str:
        if self.notifier is not None:
            return await self.notifier(self.settings.urls, alert)
        try:
            import apprise
        except ImportError:
            return "failed: notification URLs need Apprise: pip install apprise (the notify extra: pip install '.[notify]' in the cockpit's folder)"

        def send() -> str:
            sender = apprise.Apprise()
            bad = [url for url in self.settings.urls if not sender.add(url)]
            if bad:
                return f"failed: Apprise does not understand {bad[0]!r}"
            level = {"error": apprise.NotifyType.FAILURE, "info": apprise.NotifyType.INFO}.get(alert.level, apprise.NotifyType.WARNING)
            ok = sender.notify(title=alert.title, body=alert.text, notify_type=level)
            return "ok" if ok else "failed: Apprise could not deliver to every URL (see its log)"

        return await asyncio.to_thread(send)

    def _record(self, delivery: Delivery, now: float) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"at": now, **delivery.to_json()}) + "\n")
        except OSError:
            pass  # the audit file is best effort: an alert is never lost for it


def tty_writer():
    """The user's terminal for the CLI (its controlling tty, else stdout when that is one)."""
    def write(text: str) -> None:
        try:
            with open("/dev/tty", "w") as tty:
                tty.write(text)
                tty.flush()
                return
        except OSError:
            pass
        import sys

        if sys.stdout.isatty():
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            raise OSError("no terminal")

    return write
