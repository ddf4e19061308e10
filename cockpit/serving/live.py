"""A serving server, live (runs-facts b.1-b.7), whatever its engine: throughput, running and queued
requests, token usage and acceptance length from its log lines (each engine reads its own lines into
`LiveLine`s: SGLang's `Decode batch` / `Prefill batch` of every wording from 0.4.6 to 0.5.23, vLLM's
throughput and SpecDecoding lines), from `/metrics` when the engine exports it (prometheus_client's own
text parser; each engine's series in the core's names) and from `/server_info` where the engine has it
(lifetime acceptance).

Flags: `draft_not_used` (accept len <= 1.05 for 3+ decode windows in a row while requests run: the
draft's weights are not used), `hung` (no decode line for 3x the usual interval while requests
run: before SGLang's own 300 s watchdog; or its health check failing), `oom` and `crashed` (the
crash texts of the facts file).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from functools import lru_cache
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from cockpit.hosts.http import request
from cockpit.hosts.procs import LAUNCH_MARKER
from cockpit.format import plural
from cockpit.serving.engine import LiveLine

DRAFT_NOT_USED_AT = 1.05
DRAFT_NOT_USED_WINDOWS = 3
HUNG_FACTOR = 3.0
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 120.0  # vLLM logs its figures every 10 s by default (VLLM_LOG_STATS_INTERVAL); SGLang every 40 decode steps

ACCESS_LINE = re.compile(r'INFO: +[\d.:\[\]a-f]+ - "(?:GET|POST) /\S* HTTP/[\d.]+" \d{3}')
_RETRACT = re.compile(r"KV cache pool is full\. Retract requests|Decode out of memory happened\. #retracted_reqs")


def samples_of_text(text: str) -> list[tuple[str, dict, float]] | None:
    """Every sample of a Prometheus text exposition as (name, labels, value); None when it is not one (an error
    page): nothing in it is trusted."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return [(s.name, dict(s.labels), float(s.value)) for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, IndexError, KeyError, TypeError):
        return None


def metrics_series(engine, text: str) -> dict[str, float] | None:
    """One engine's series in a /metrics text (None: none of its series, or not Prometheus text)."""
    samples = samples_of_text(text)
    return engine.series_of_samples(samples) if samples else None


def _readers():
    from cockpit.serving.engines import engines

    return [(e.name, e.live_line) for e in engines()]


def live_line(line: str) -> tuple[str, LiveLine] | None:
    """(the engine, what the line says) for a line some engine reads as live figures; None for any other."""
    for name, reader in _readers():
        found = reader(line)
        if found is not None:
            return name, found
    return None


def routine_line(line: str) -> bool:
    """A line a serving server prints while all is well, that can change no diagnosis of its log: a decode
    window or acceptance line whose draft is used (accept len above 1.05, or none), a prefill line, an HTTP
    access line.  (Decode lines at 1.00 are not: every decode line at 1.00 is a diagnosis.)"""
    read = live_line(line)
    if read is not None:
        event = read[1]
        if event.kind in ("decode", "acceptance"):
            return event.accept_len is None or event.accept_len > DRAFT_NOT_USED_AT
        return event.kind == "prefill"
    return ACCESS_LINE.search(line) is not None


@dataclass
class Window:
    """One decode line: the figures of its window of decode iterations."""

    at: float  # when the cockpit read it (wall clock)
    ts: float  # the log's timestamp
    throughput: float | None
    running: int | None
    queued: int | None
    token_usage: float | None
    accept_len: float | None

    def to_json(self) -> dict:
        return {"ts": self.ts, "throughput_tok_s": self.throughput, "running": self.running, "queued": self.queued,
                "token_usage": self.token_usage, "accept_length": self.accept_len}


@dataclass(frozen=True)
class ServerFlag:
    kind: str
    line: str
    message: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "line": self.line, "message": self.message}


@dataclass
class LiveFigures:
    """What the server is doing, from every source the cockpit has (log lines, /metrics, /server_info)."""

    clock: Any = time.time
    history: deque = field(default_factory=lambda: deque(maxlen=240))
    flags: list = field(default_factory=list)
    metrics: dict = field(default_factory=dict)  # from /metrics (the stats rank's series)
    lifetime_accept: float | None = None  # /server_info avg_spec_accept_length
    retractions: int = 0
    last_decode_at: float | None = None
    last_prefill: LiveLine | None = None
    sources: set = field(default_factory=set)
    _low_run: int = 0
    _counters: tuple | None = None  # (generation_tokens_total, spec_verify_calls_total) last read
    counter_accept: float | None = None  # exact window acceptance from counters (0.5.14+)
    # other sources than the decode lines, for "hung" (no progress by every source while work waits)
    metrics_at: float | None = None  # when /metrics (or Prometheus) was last read
    progress_at: float | None = None  # when a counter of work done was last seen moving
    _progress_counters: tuple | None = None
    info_ok_at: float | None = None  # when /server_info (which goes through the scheduler) last answered
    info_failed_at: float | None = None  # when it last did not
    relaunches: int = 0  # server starts seen in the log: the figures before the last one are dropped
    spec_decode: dict | None = None  # an engine's own figures of its last acceptance line (vLLM's per position, drafted/accepted)
    engine: str | None = None  # whose lines or series were read (serving/engines.py); None: none yet
    _series: tuple | None = None  # (the engine's series, when) as /metrics was last read
    start_seen: bool = False  # the server's start was read in its log: its silence since then means something
    ended: dict | None = None  # its end, as the evidence read now says it ({state, why, at}): stopped by you, crashed, oom, died
    shutdown: dict | None = None  # its own words of a graceful shutdown ({at, line}), read in its log
    ready_seen: bool = False  # its log says it is up (vLLM's "Application startup complete.")

    def reset(self) -> None:
        """A new server (a relaunch in the same log, a new pid): the old one's figures are not its."""
        fresh = LiveFigures(clock=self.clock)
        fresh.relaunches = self.relaunches + 1
        self.__dict__.update(fresh.__dict__)

    # --- log lines -----------------------------------------------------------------------------

    def feed(self, lines, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        readers = _readers()
        for line in lines:
            if line.startswith(LAUNCH_MARKER):  # the cockpit launches a server: whoever's, the figures before are another's
                self._event(None, LiveLine("start"), line, now)
                continue
            for engine, reader in readers:
                event = reader(line)
                if event is not None:
                    self._event(engine, event, line, now)
                    break
            else:
                if _RETRACT.search(line):
                    self.retractions += 1
                    continue
                for kind, pattern, text in _crash_lines(self.engine):
                    if pattern.search(line):
                        if kind == "crashed" and self.shutdown is not None:
                            break  # after its own graceful stop's words, an engine that goes is the stop's teardown (as logread)
                        self._flag(kind, line, text)
                        break

    def _event(self, engine: str | None, event: LiveLine, line: str, now: float) -> None:
        if event.kind == "start":
            if self.sources or self.history or self.flags:
                self.reset()
            self.engine = engine or self.engine
            self.start_seen = True
            return
        if event.kind == "ready":
            self.ready_seen = True
            return
        if event.kind == "stop":
            if self.shutdown is None:
                at = now if event.ts is None else min(now, event.ts)
                self.shutdown = {"at": at, "line": (event.detail or {}).get("line", line.strip()[:300])}
            return
        self.sources.add("log")
        self.engine = engine
        if event.kind == "prefill":
            self.last_prefill = event
        elif event.kind == "decode":
            # the time the line carries where it carries one (an idle server's last figures are as old as that line,
            # not as the look that read them); never later than now
            said = now if event.ts is None else min(now, event.ts)
            window = Window(now, said, event.throughput, event.running, event.queued, event.token_usage, event.accept_len)
            self.history.append(window)
            self.last_decode_at = said
            self._acceptance(window, line)
        elif event.kind == "acceptance":
            # logged right after its window's line: that window's acceptance
            self.spec_decode = event.detail
            last = self.latest()
            if last is not None and now - last.at <= 2.0 and last.accept_len is None:
                last.accept_len = event.accept_len
                self._acceptance(last, line)

    def _acceptance(self, window: Window, line: str) -> None:
        """The draft-not-used flag: acceptance at 1 for several windows in a row under load."""
        if window.accept_len is not None and window.running:
            if window.accept_len <= DRAFT_NOT_USED_AT:
                self._low_run += 1
                if self._low_run >= DRAFT_NOT_USED_WINDOWS:
                    causes = _engine_of(self.engine).draft_not_used_causes
                    self._flag("draft_not_used", line, f"accept len {window.accept_len:.2f} for {self._low_run} windows in a row "
                               f"under load: the draft is not used ({causes})", replace=True)
            else:
                self._low_run = 0
                self.flags = [f for f in self.flags if f.kind != "draft_not_used"]

    def _flag(self, kind: str, line: str, message: str, replace: bool = False) -> None:
        for index, flag in enumerate(self.flags):
            if flag.kind == kind:
                if replace:
                    self.flags[index] = ServerFlag(kind, line.strip()[:500], message)
                return
        self.flags.append(ServerFlag(kind, line.strip()[:500], message))

    # --- /metrics and /server_info ------------------------------------------------------------

    def feed_metrics(self, text: str, now: float | None = None) -> None:
        """The Prometheus text of an engine's /metrics (prometheus_client's parser: the format's own rules)."""
        samples = samples_of_text(text)
        if samples:
            self.feed_samples(samples, now, "metrics")

    def feed_samples(self, samples: list[tuple[str, dict, float]], now: float | None = None, source: str = "prometheus") -> None:
        """An engine's series, from its /metrics or as a Prometheus scraped them: the engine whose series they are
        reads them into the core's names (its stats rank, its counters summed, its acceptance from its counters)."""
        from cockpit.serving.engines import engines

        now = self.clock() if now is None else now
        for engine in engines():
            series = engine.series_of_samples(samples)
            if series:
                before = self._series if self._series is not None and self._series[2] == engine.name else None
                self._series = (series, now, engine.name)
                values = engine.figures_of_series(series, before[:2] if before else None, now)
                if values.get("spec_accept_length") is not None and before is not None and engine.capabilities.acceptance_source == "metrics":
                    self.counter_accept = values["spec_accept_length"]
                if values.get("lifetime_accept_length") is not None and not engine.capabilities.server_info:
                    self.lifetime_accept = values["lifetime_accept_length"]  # from its counters since it started
                self.engine = engine.name
                self.feed_values(values, now, source)
                return

    def feed_values(self, values: dict[str, float], now: float | None = None, source: str = "prometheus") -> None:
        """Series in the core's names (SGLang's, without `sglang:`), from an engine's /metrics or from a Prometheus
        that scrapes it."""
        now = self.clock() if now is None else now
        if not values:
            return
        self.sources.add(source)
        self.metrics = values
        self.metrics_at = now
        work = tuple(values.get(k) for k in ("generation_tokens_total", "realtime_tokens_total", "num_requests_total",
                                             "prompt_tokens_total"))
        if self._progress_counters is not None and any(
                a is not None and b is not None and b > a for a, b in zip(self._progress_counters, work)):
            self.progress_at = now
        self._progress_counters = work
        counters = (values.get("generation_tokens_total"), values.get("spec_verify_calls_total"))
        if None not in counters:
            if self._counters is not None:
                tokens, verifies = counters[0] - self._counters[0], counters[1] - self._counters[1]
                if verifies > 0 and tokens >= 0:
                    self.counter_accept = tokens / verifies
            self._counters = counters
        if "log" not in self.sources:
            # no log lines: the gauges are the window (they refresh at each decode log, and every 30 s idle)
            window = Window(now, now, values.get("gen_throughput"), _int(values.get("num_running_reqs")),
                            _int(values.get("num_queue_reqs")), values.get("token_usage"), values.get("spec_accept_length"))
            if not self.history or (self.history[-1].throughput, self.history[-1].running, self.history[-1].accept_len) != (
                    window.throughput, window.running, window.accept_len):
                self.history.append(window)
                self.last_decode_at = now
                if window.accept_len is not None and window.running:
                    self._low_run = self._low_run + 1 if window.accept_len <= DRAFT_NOT_USED_AT else 0
                    if self._low_run >= DRAFT_NOT_USED_WINDOWS:
                        self._flag("draft_not_used", f"{_engine_of(self.engine).capabilities.metrics_prefix}spec_accept_length {window.accept_len}",
                                   "acceptance length at or below 1.05 under load: the draft is not used", replace=True)

    def server_info_answered(self, ok: bool, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        if ok:
            self.info_ok_at = now
            self.sources.add("server_info")
        else:
            self.info_failed_at = now

    def feed_server_info(self, info: dict) -> None:
        """/server_info's lifetime acceptance.  SGLang counts the bonus token, so a real figure is at least 1;
        before its first speculative step some versions say 0 (a division guarded to 0) and others leave the
        key out: either way there is no figure yet."""
        states = info.get("internal_states") if isinstance(info, dict) else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            value = states[0].get("avg_spec_accept_length")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.lifetime_accept = float(value) if value >= 1.0 else None

    # --- what it adds up to --------------------------------------------------------------------

    def interval(self) -> float:
        """The usual time between decode lines while requests run (the log's own timestamps)."""
        recent = [w.ts for w in self.history if w.running][-11:]
        # consecutive lines (one alone: no gap yet); a gap longer than a logging cadence ever is (a pause between two
        # bursts of work) is no cadence
        gaps = sorted(b - a for a, b in zip(recent, recent[1:]) if 0 <= b - a <= MAX_INTERVAL_S)
        if not gaps:
            return 10.0
        return max(MIN_INTERVAL_S, gaps[len(gaps) // 2])

    def activity(self, now: float | None = None) -> tuple[str, str]:
        """('serving' | 'idle' | 'hung' | 'quiet' | 'unknown', why).  Hung only when no source shows
        progress while work waits: the decode lines stopped with requests running, and since they
        stopped /metrics still shows them running with no counter of work moving, and /server_info
        (through the scheduler) does not answer.  An idle server prints nothing, so silence alone is
        'quiet': the log cannot tell idle from hung, and says so."""
        now = self.clock() if now is None else now
        if self.ended is not None:  # a server that has ended does nothing now: its activity is its end, said as past
            return self.ended["state"], self.ended["why"]
        if self.shutdown is not None:  # its own shutdown words: it is going, whatever its last window said
            from cockpit.format import clock

            broke = [f for f in self.flags if f.kind in ("crashed", "oom")]
            said = f"its log at {clock(self.shutdown['at'])}: '{self.shutdown['line'][-80:]}'"
            # not an end yet: that takes its process gone (two looks); the crash, if any, is its flag
            if broke:
                return "finishing", f"{broke[0].message}; it is shutting down ({said})"
            return "finishing", f"it is shutting down cleanly ({said}); stopped once its process is gone"
        last = self.history[-1] if self.history else None
        if last is None or self.last_decode_at is None:
            if self.last_prefill is not None:
                return "serving", "a prefill batch ran; no decode line yet"
            info_ok = self.info_ok_at is not None and (self.info_failed_at is None or self.info_ok_at > self.info_failed_at)
            if self.start_seen and info_ok:
                # SGLang logs every prefill and decode batch: none since it started is no request, and its
                # scheduler answers (/server_info goes through it)
                return "idle", "no request since it started (no prefill or decode line in its log) and /server_info answers"
            if self.ready_seen:  # vLLM logs its figures only while it works: up, and nothing logged since, is no request
                return "idle", "up (its log: startup complete), no request logged since"
            if self.start_seen:
                return "starting", "launched, not up yet (its log has no startup-complete line)"
            return "unknown", "no decode line or metrics yet"
        if not last.running:
            return "idle", "the last window had no request running"
        silent = now - self.last_decode_at
        limit = HUNG_FACTOR * self.interval()
        if silent <= limit:
            return "serving", f"{plural(last.running, 'request')} running"
        since = self.last_decode_at
        gauges_fresh = self.metrics_at is not None and self.metrics_at > since
        if gauges_fresh and not _int(self.metrics.get("num_running_reqs")) and not _int(self.metrics.get("num_queue_reqs")):
            return "idle", f"no decode line for {silent:.0f} s and /metrics shows no request running or queued"
        if self.progress_at is not None and self.progress_at > since and now - self.progress_at <= limit:
            return "serving", "the decode lines stopped but /metrics counters of work done still move"
        info_latest_ok = self.info_ok_at is not None and (self.info_failed_at is None or self.info_ok_at > self.info_failed_at)
        if info_latest_ok and self.info_ok_at is not None and self.info_ok_at > since + limit:
            return "idle", f"no decode line for {silent:.0f} s, but /server_info answers (its scheduler is not stuck)"
        info_fails = not info_latest_ok and self.info_failed_at is not None and self.info_failed_at > since + limit
        if gauges_fresh or info_fails:
            seen = []
            if gauges_fresh:
                seen.append(f"/metrics still shows {_int(self.metrics.get('num_running_reqs')) or last.running} running "
                            "and no counter moves")
            if info_fails:
                seen.append("/server_info does not answer")
            return "hung", (f"no decode line for {silent:.0f} s while {plural(last.running, 'request')} run (usually every "
                            f"{self.interval():.0f} s); " + ", ".join(seen)
                            + _watchdog(self.engine))
        return "quiet", (f"no decode line for {silent:.0f} s after {plural(last.running, 'request')} ran: idle or hung cannot be told "
                         "from the log alone (give --url, or --enable-metrics, to ask the server)")

    def current_flags(self, now: float | None = None) -> list[ServerFlag]:
        now = self.clock() if now is None else now
        flags = list(self.flags)
        if not any(f.kind == "crashed" for f in flags):
            state, why = self.activity(now)
            if state == "hung":
                flags.append(ServerFlag("hung", "", why))
        return flags

    def latest(self) -> Window | None:
        return self.history[-1] if self.history else None

    def _last_accept(self, now: float, window_accept: float | None) -> dict:
        """While the newest window has no acceptance (an idle server drafts nothing: vLLM logs no SpecDecoding line),
        the last one read and how old it is: kept, said as the last, never shown as the current window's."""
        if window_accept is not None:
            return {}
        last = next((w for w in reversed(self.history) if w.accept_len is not None), None)
        if last is None:
            return {}
        return {"last": last.accept_len, "last_age_s": round(max(0.0, now - last.at), 1)}

    def to_json(self, now: float | None = None, history: int = 30) -> dict:
        now = self.clock() if now is None else now
        last = self.latest()
        window_accept = last.accept_len if last is not None else self.metrics.get("spec_accept_length")
        activity = dict(zip(("state", "why"), self.activity(now)))
        logged = last
        if last is not None and self.metrics_at is not None and self.last_decode_at is not None and self.metrics_at > self.last_decode_at:
            last = None  # the gauges were read after the last decode line: they are the newer figures
        # not serving now (idle, quiet, ended): the figures are the last ones read, with their own age, never current
        past = activity["state"] != "serving" and (last is not None or self.metrics_at is not None)
        if self.ended is not None and self.ended.get("at") is not None:
            activity["at"] = self.ended["at"]
        return {
            # an engine whose /metrics has no throughput gauge (vLLM): its log's last window says it
            "throughput_tok_s": last.throughput if last else self.metrics.get("gen_throughput", logged.throughput if logged else None),
            "running": last.running if last else _int(self.metrics.get("num_running_reqs")),
            "queued": last.queued if last else _int(self.metrics.get("num_queue_reqs")),
            "token_usage": last.token_usage if last else self.metrics.get("token_usage"),
            "figures_age_s": None if self.last_decode_at is None and self.metrics_at is None else round(
                now - max(t for t in (self.last_decode_at, self.metrics_at) if t is not None), 1),
            "accept_length": {"window": window_accept, "lifetime": self.lifetime_accept, "counters": self.counter_accept,
                              **self._last_accept(now, window_accept)},
            "history": [w.to_json() for w in list(self.history)[-history:]],
            "flags": [f.to_json() for f in self.current_flags(now)],
            "retractions": self.retractions,
            "sources": sorted(self.sources),
            "activity": activity,
            "figures_are_last": past,
            "ended": self.ended,
            "relaunches_seen": self.relaunches,
            "spec_decode": self.spec_decode,
        }


def _engine_of(name: str | None):
    """The engine whose lines or series were read; the default one before any was."""
    from cockpit.serving.engines import engine_or_default

    return engine_or_default(name)


def _watchdog(name: str | None) -> str:
    watch = _engine_of(name)
    seconds = watch.capabilities.watchdog_s
    return f"; {watch.label}'s watchdog kills it at {seconds:.0f} s" if seconds else ""


@lru_cache(maxsize=8)
def _crash_lines(name: str | None) -> tuple[tuple[str, re.Pattern, str], ...]:
    """Every engine's crash lines, the engine of this log's first (its words and its fix win)."""
    from cockpit.serving.engines import engines

    first = _engine_of(name)
    return first.crash_lines + tuple(c for e in engines() if e is not first for c in e.crash_lines)


def _int(value) -> int | None:
    return None if value is None else int(value)


# --- HTTP from the host's side ----------------------------------------------------------------


def opener_for(transport):
    """Connections made from the host's side (a direct-tcpip channel on its SSH connection)."""
    async def opener(host: str, port: int):
        return await transport.open_tcp(host, port)

    return opener


async def get(opener, url: str, timeout: float = 5.0) -> tuple[int, bytes] | None:
    """GET with a short timeout (/server_info hangs when the scheduler does); None when unreachable."""
    try:
        return await asyncio.wait_for(request(opener, "GET", url, timeout=timeout), timeout + 1)
    except (OSError, asyncio.TimeoutError, ValueError, ConnectionError):
        return None
    except Exception:  # noqa: BLE001 - asyncssh channel errors: unreachable, said so by None
        return None


async def server_info(transport, port: int, host: str = "127.0.0.1", opener=None) -> dict[str, Any]:
    """/server_info, or /get_server_info on versions before it (404): {} when neither answers."""
    opener = opener or opener_for(transport)
    for path in ("/server_info", "/get_server_info"):
        reply = await get(opener, f"http://{host}:{port}{path}")
        if reply is None:
            continue
        status, body = reply
        if status == 200:
            try:
                data = json.loads(body)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


class LiveServer:
    """Polls one server: its log (followed by offset on its host), /metrics and /server_info (from
    the host's side, or straight from here for a URL).  Either source may be missing."""

    def __init__(self, transport=None, log: str | None = None, base_url: str | None = None, opener=None, clock=time.time,
                 backlog_bytes: int = 256 * 1024):
        from cockpit.hosts.follow import LogFollower

        self.transport = transport
        self.base_url = base_url
        self.opener = opener or (opener_for(transport) if transport is not None else None)
        self.follower = LogFollower(transport, log, tail_bytes=backlog_bytes) if log and transport is not None else None
        self.figures = LiveFigures(clock=clock)
        self.lines: deque = deque(maxlen=4000)  # the log's last lines, for the crash diagnosis
        self.log_missing = False
        self.unreachable: str | None = None
        self.metrics_off = False  # /metrics answered 404: --enable-metrics is off, not asked again

    async def read_log(self, catch_up: bool = True) -> int:
        """The log's new lines read into the figures (all of them with catch_up); how many came."""
        from cockpit.hosts.transport import TransportError

        now = self.figures.clock()
        came = 0
        if self.follower is not None:
            try:
                while True:
                    update = await self.follower.poll()
                    self.log_missing = update.event == "missing"
                    if update.event in ("truncated", "rotated"):
                        self.figures = LiveFigures(clock=self.figures.clock)  # a new server's log
                    self.figures.feed(update.lines, now)
                    self.lines.extend(update.lines)
                    came += len(update.lines)
                    if update.event == "appeared" and update.mtime and self.figures.last_decode_at is not None:
                        self.figures.last_decode_at = min(self.figures.last_decode_at, update.mtime)
                    if not catch_up or update.size is None or self.follower.offset is None or self.follower.offset >= update.size:
                        break
            except (TransportError, OSError) as exc:
                self.unreachable = str(exc)
        return came

    async def poll(self, catch_up: bool = False) -> LiveFigures:
        now = self.figures.clock()
        self.unreachable = None
        await self.read_log(catch_up)
        if self.base_url and self.opener is not None:
            text = None
            if not self.metrics_off:
                reply = await get(self.opener, f"{self.base_url}/metrics")
                if reply is not None and reply[0] == 404:
                    self.metrics_off = True
                elif reply is not None and reply[0] == 200:
                    text = reply[1].decode("utf-8", errors="replace")
                    self.figures.feed_metrics(text, now)
            if not _engine_of(self.figures.engine).capabilities.server_info:
                # an engine without /server_info (vLLM): its silence there says nothing about a stuck scheduler
                if text is None and self.follower is None:
                    self.unreachable = f"{self.base_url}: no answer from /metrics"
                return self.figures
            host, port = _host_port(self.base_url)
            info = await server_info(None, port, host, opener=self.opener)
            self.figures.server_info_answered(bool(info), now)
            if info:
                self.figures.feed_server_info(info)
            elif text is None and self.follower is None:
                self.unreachable = f"{self.base_url}: no answer from /metrics or /server_info"
        return self.figures


def _host_port(url: str) -> tuple[str, int]:
    from cockpit.hosts.http import split_url

    host, port, _ = split_url(url)
    return host, port


def render_live(data: dict) -> str:
    """`cockpit server`'s text: the figures of to_json(), flags last."""
    def fmt(value, spec="{:.2f}"):
        return "-" if value is None else spec.format(value)

    accept = data["accept_length"]
    ended = data.get("ended")
    head = []
    if ended:
        head.append(f"{ended['state'].upper()}: {ended['why']}")
    last = ""
    if data.get("figures_are_last"):
        age = data.get("figures_age_s")
        last = "its last figures" + (f" ({age:.0f} s old)" if age is not None else "") + ": "
    lines = head + [f"{last}throughput {fmt(data['throughput_tok_s'], '{:.0f}')} tok/s, running {fmt(data['running'], '{}')}, "
             f"queued {fmt(data['queued'], '{}')}, token usage {fmt(data['token_usage'])}",
             f"acceptance length: window {fmt(accept['window'])}"
             + (f" (none drafted in it; the last {fmt(accept['last'])}, {accept['last_age_s']:.0f} s ago)"
                if accept.get("last") is not None else "")
             + f", lifetime {fmt(accept['lifetime'])}"
             + (f", from counters {fmt(accept['counters'])}" if accept.get("counters") is not None else "")
             + " (the bonus token counted)"]
    history = data.get("history") or []
    if history:
        lines.append("recent windows (accept len): " + " ".join(fmt(w["accept_length"]) for w in history[-12:]))
    if data.get("retractions"):
        lines.append(f"KV cache full: {plural(data['retractions'], 'retraction')} (requests re-queued; not a crash)")
    lines += [f"! {f['kind']}: {f['message']}" + (f"  <- {f['line'][:160]}" if f["line"] else "") for f in data["flags"]]
    activity = data.get("activity") or {}
    if activity.get("state") in ("idle", "quiet") and not any(f["kind"] == "hung" for f in data["flags"]):
        lines.append(f"{activity['state']}: {activity['why']}")
    if not data.get("sources"):
        lines.append("(no decode line or metrics yet: is the server serving requests?)")
    return "\n".join(lines)


def flag_alert(step: str, flag: dict):
    """The alert a serving flag sends ([alerts]), deduplicated per step and kind."""
    from cockpit.alerts import Alert

    kind = {"draft_not_used": "draft_not_used", "hung": "server_hung", "oom": "server_oom", "crashed": "server_crashed"}.get(
        flag["kind"], flag["kind"])
    title = {"draft_not_used": "the draft is not used", "hung": "the server hangs", "oom": "the server ran out of memory",
             "crashed": "the server crashed"}.get(flag["kind"], flag["kind"])
    return Alert(kind, f"{kind}:{step}", f"{step}: {title}", flag["message"], "error")


def flag_resolved(step: str, kind: str):
    """The one notice that a serving flag cleared (the alert with the same key resolves)."""
    alert = flag_alert(step, {"kind": kind, "message": ""})
    from cockpit.alerts import Alert

    return Alert(alert.kind, alert.key, alert.title.replace(": ", ": resolved: ", 1) if ": " in alert.title else alert.title,
                 f"{kind} cleared: the figures no longer show it", "info", resolves=True)
