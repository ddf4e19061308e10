"""GPUs read from Prometheus, for fleets that export them with NVIDIA's DCGM exporter (scale-facts §3).

One instant query per interval answers for every GPU of every host watched this way: the DCGM
series (memory used/free/reserved in MiB, power in W, utilisation in %, temperature in °C) and,
in the same query, the timestamp of each GPU's memory sample (`timestamp()`), so a GPU's age is
the age of its last scrape, never the time of the query.  Series map to cockpit hosts by their
host label (`Hostname`, or `hostname` since the exporter renamed it; or the configured label) and
to GPUs by `UUID` (index from `gpu`).

What a monitor must not do is show a wrong number: a NaN is shown as unknown, two series for one
GPU (two exporters, two jobs) as one GPU with the newest sample and a note, a series without a
host label is left out (counted), an answer that is not Prometheus's API (an HTML login page, an
error JSON) is an error with what it was.  Processes are not in DCGM's series: a GPU gate never
passes on Prometheus alone (runbook/builtin.py asks the host over SSH).
"""

from __future__ import annotations

import asyncio
import re
import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from cockpit.config import HostConfig, PrometheusSettings
from cockpit.hosts.state import HostState
from cockpit.telemetry.model import GpuSample, HostSnapshot

FIELDS = {  # DCGM metric -> the short name the query labels it with
    "DCGM_FI_DEV_FB_USED": "used",
    "DCGM_FI_DEV_FB_FREE": "free",
    "DCGM_FI_DEV_FB_RESERVED": "reserved",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit",
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
}
TS_LABEL = "cockpit_field"  # which field a series of the query is (its value's meaning), or "ts"
HOST_LABELS = ("Hostname", "hostname")


class PrometheusError(Exception):
    """Prometheus could not answer (down, refused, an HTML page, an error JSON): the message says which."""


def gpu_query(settings: PrometheusSettings) -> str:
    """The one query: every DCGM field this cockpit shows, one series per GPU and field with only the
    labels it needs (`f` names the field; the per-GPU `ts` series holds the timestamp of its memory
    sample, with the GPU's UUID and model), so 128 hosts x 8 GPUs is a third of the bytes of the raw
    series.  `instance` stays: two exporters for one GPU are two series, never merged."""
    selector = settings.selector or ""
    hosts = ", ".join(dict.fromkeys(((settings.host_label,) if settings.host_label else HOST_LABELS)))
    keep = f"{hosts}, gpu, instance"
    parts = [f'label_replace(max by ({keep}) ({metric}{{{selector}}}), "{TS_LABEL}", "{short}", "", "")'
             for metric, short in FIELDS.items()]
    parts.append(f'label_replace(max by ({keep}, UUID, modelName) (timestamp(DCGM_FI_DEV_FB_USED{{{selector}}})), '
                 f'"{TS_LABEL}", "ts", "", "")')
    return " or ".join(parts)


def fetch(settings: PrometheusSettings, query: str) -> list[dict]:
    """GET /api/v1/query (blocking: call it in a thread).  Returns data.result; raises PrometheusError."""
    url = f"{settings.url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if settings.token_env:
        token = os.environ.get(settings.token_env)
        if not token:
            raise PrometheusError(f"${settings.token_env} is not set: [prometheus] token_env names it for the bearer token")
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout_s) as reply:
            body, kind = reply.read(32 * 1024 * 1024), reply.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        body, kind = exc.read(64 * 1024), exc.headers.get("Content-Type", "") if exc.headers else ""
        return _decode(settings, body, kind, exc.code)
    except urllib.error.URLError as exc:
        raise PrometheusError(f"Prometheus at {settings.url}: {getattr(exc.reason, 'strerror', None) or exc.reason}") from None
    except (TimeoutError, OSError) as exc:
        raise PrometheusError(f"Prometheus at {settings.url}: {exc.__class__.__name__} after {settings.timeout_s:g} s") from None
    return _decode(settings, body, kind, 200)


def _decode(settings: PrometheusSettings, body: bytes, kind: str, status: int) -> list[dict]:
    text = body.decode("utf-8", errors="replace")
    if "html" in kind or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        raise PrometheusError(f"{settings.url} answered an HTML page (HTTP {status}), not Prometheus's API: a proxy or login page?")
    try:
        data = json.loads(text)
    except ValueError:
        raise PrometheusError(f"{settings.url} answered HTTP {status} with something that is not JSON: {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise PrometheusError(f"{settings.url} answered JSON that is not Prometheus's API: {text[:80]!r}")
    if data.get("status") != "success":
        raise PrometheusError(f"Prometheus refused the query (HTTP {status}): {data.get('errorType', '?')}: {data.get('error', text[:120])}")
    result = (data.get("data") or {}).get("result") if isinstance(data.get("data"), dict) else None
    if not isinstance(result, list):
        raise PrometheusError(f"Prometheus answered without a result list: {text[:120]!r}")
    return result


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass
class _Gpu:
    index: int
    uuid: str | None
    name: str | None
    values: dict = field(default_factory=dict)
    nan: list = field(default_factory=list)  # fields Prometheus holds as NaN
    sampled_at: float | None = None
    instance: str | None = None


@dataclass
class Reading:
    """One query's answer, by cockpit host: its GPUs, the newest sample time, and what was odd."""

    gpus: dict[str, list[GpuSample]] = field(default_factory=dict)
    sampled_at: dict[str, float | None] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    unlabelled: int = 0  # series without a host label: left out
    queried_at: float = 0.0


def read(result: list[dict], hosts: list[HostConfig], settings: PrometheusSettings, now: float) -> Reading:
    """Turn the query's series into GPU samples per cockpit host."""
    wanted = {(h.prometheus_host or h.name): h.name for h in hosts}
    labels = (settings.host_label,) if settings.host_label else HOST_LABELS
    reading = Reading(queried_at=now)
    found: dict[str, dict[int, list[_Gpu]]] = {}
    fields = set(FIELDS.values())
    by_name = FIELDS
    for series in result:
        try:
            metric = series["metric"]
            raw = series["value"][1]
        except (KeyError, IndexError, TypeError):
            continue  # not a vector sample: nothing to read from it
        if not isinstance(metric, dict):
            continue
        label = None
        for name in labels:
            label = metric.get(name)
            if label:
                break
        if not label:
            reading.unlabelled += 1
            continue
        host = wanted.get(label)
        if host is None:
            continue
        try:
            index = int(metric.get("gpu", ""))
        except ValueError:
            reading.unlabelled += 1
            continue
        slots = found.setdefault(host, {}).setdefault(index, [])
        instance = metric.get("instance")
        for gpu in slots:
            if gpu.instance == instance:
                break
        else:
            gpu = _Gpu(index, None, None, instance=instance)
            slots.append(gpu)
        field_name = metric.get(TS_LABEL) or by_name.get(metric.get("__name__", ""))
        if field_name == "ts":
            gpu.sampled_at = _number(raw)
            gpu.uuid = metric.get("UUID") or gpu.uuid
            gpu.name = metric.get("modelName") or gpu.name
            continue
        if field_name not in fields:
            continue
        number = _number(raw)
        if number is None:
            gpu.nan.append(next(m for m, f in FIELDS.items() if f == field_name))
        gpu.values[field_name] = number
    for host, by_gpu in found.items():
        samples, times, notes = [], [], []
        for index, slots in sorted(by_gpu.items()):
            gpu = max(slots, key=lambda g: (g.sampled_at or 0.0, g.instance or ""))
            if len(slots) > 1:
                notes.append(f"GPU {index} ({gpu.uuid or '?'}) has {len(slots)} series (instances "
                             f"{', '.join(sorted(str(g.instance) for g in slots))}): showing the newest")
            samples.append(_sample(gpu))
            if gpu.sampled_at is not None:
                times.append(gpu.sampled_at)
        reading.gpus[host] = samples
        reading.sampled_at[host] = min(times) if times else None  # the host is as old as its oldest GPU sample
        reading.notes[host] = notes
    return reading


def _sample(gpu: _Gpu) -> GpuSample:
    v = gpu.values
    used, free, reserved = v.get("used"), v.get("free"), v.get("reserved")
    total = None
    if used is not None and free is not None:
        total = used + free + (reserved or 0.0)  # DCGM has no FB_TOTAL by default: used + free + reserved
    problems = tuple(f"{name}: NaN" for name in gpu.nan)
    return GpuSample(
        index=gpu.index, uuid=gpu.uuid, name=gpu.name,
        memory_used_mib=None if used is None else int(round(used)),
        memory_total_mib=None if total is None else int(round(total)),
        power_w=v.get("power"), power_limit_w=v.get("power_limit"),
        utilization_pct=None if v.get("util") is None else int(round(v["util"])),
        temperature_c=None if v.get("temp") is None else int(round(v["temp"])),
        problems=problems,
    )


class PrometheusFleet:
    """Every host watched through Prometheus, read with one query per interval; each host's monitor
    asks it (a query in flight, or one younger than half an interval, is shared)."""

    def __init__(self, settings: PrometheusSettings, hosts: list[HostConfig], clock=time.time, fetcher=fetch):
        self.settings = settings
        self.hosts = hosts
        self.clock = clock
        self.fetcher = fetcher
        self.query = gpu_query(settings)
        self.reading: Reading | None = None
        self.error: str | None = None
        self.queries = 0
        self._inflight: asyncio.Future | None = None
        self._last = 0.0

    async def refresh(self, max_age: float | None = None) -> tuple[Reading | None, str | None]:
        max_age = self.settings.interval_s / 2 if max_age is None else max_age
        if self._inflight is not None:
            return await asyncio.shield(self._inflight)
        if self.clock() - self._last < max_age and (self.reading is not None or self.error is not None):
            return self.reading, self.error
        self._inflight = asyncio.ensure_future(self._query())
        try:
            return await asyncio.shield(self._inflight)
        finally:
            self._inflight = None

    async def _query(self) -> tuple[Reading | None, str | None]:
        self.queries += 1
        try:
            result = await asyncio.to_thread(self.fetcher, self.settings, self.query)
            self.reading, self.error = read(result, self.hosts, self.settings, self.clock()), None
        except PrometheusError as exc:
            self.error = str(exc)
        self._last = self.clock()
        return self.reading, self.error


def host_snapshot(host: HostConfig, reading: Reading | None, error: str | None, previous: HostSnapshot | None,
                  settings: PrometheusSettings, now: float) -> HostSnapshot:
    """One host as the last query saw it.  Prometheus down: unreachable, with why.  The host's series
    missing (its exporter stopped): its last sample, stale and ageing, then gone.  Samples older than
    stale_after_s: stale, never shown as current."""
    def snapshot(state: HostState, error: str | None, gpus: tuple[GpuSample, ...] = (),
                 sampled_at: float | None = None) -> HostSnapshot:
        return HostSnapshot(name=host.name, state=state, error=error, roles=host.roles, source="prometheus", gpus=gpus,
                            sampled_at=sampled_at)

    last_gpus = previous.gpus if previous is not None else ()
    last_time = previous.sampled_at if previous is not None else None
    if error is not None:
        return snapshot(HostState.UNREACHABLE, error, last_gpus, last_time)
    gpus = reading.gpus.get(host.name) if reading is not None else None
    if reading is None or not gpus:
        if last_time is not None and now - last_time < settings.gone_after_s:
            return snapshot(HostState.STALE, f"no series in Prometheus for {now - last_time:.0f} s (its exporter stopped, or its "
                            "target is down)", last_gpus, last_time)
        label = host.prometheus_host or host.name
        return snapshot(HostState.UNREACHABLE, f"gone from Prometheus: no DCGM series with host label '{label}'")
    sampled = reading.sampled_at.get(host.name) or reading.queried_at
    notes = reading.notes.get(host.name) or []
    age = now - sampled
    if age > settings.stale_after_s:
        return snapshot(HostState.STALE, f"the newest sample is {age:.0f} s old (stale_after_s {settings.stale_after_s:g})",
                        tuple(gpus), sampled)
    return snapshot(HostState.UP, "; ".join(notes) or None, tuple(gpus), sampled)


class PrometheusMonitor:
    """A host's collector when its GPUs come from Prometheus: the same face as the SSH and NVML
    monitors (run, sample_once, snapshot, retry_now), backed by the shared fleet query."""

    def __init__(self, host: HostConfig, fleet: PrometheusFleet, publish, clock=time.time):
        self.host = host
        self.fleet = fleet
        self._publish = publish
        self._clock = clock
        self.current: HostSnapshot | None = None
        self.samples = 0  # snapshots with GPU data (as the other monitors count them)
        self.retry_at: float | None = None
        self.stop_requested = False
        self._wake = asyncio.Event()

    def snapshot(self) -> HostSnapshot:
        return self.current or HostSnapshot(name=self.host.name, state=HostState.CONNECTING, roles=self.host.roles, source="prometheus")

    def retry_now(self) -> None:
        self._wake.set()

    async def sample_once(self, timeout: float | None = None) -> HostSnapshot:
        reading, error = await self.fleet.refresh()
        self.current = host_snapshot(self.host, reading, error, self.current, self.fleet.settings, self._clock())
        if self.current.state is HostState.UP:
            self.samples += 1
        return self.current

    async def run(self) -> None:
        while not self.stop_requested:
            snapshot = await self.sample_once()
            self._publish(snapshot)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.fleet.settings.interval_s)
            except asyncio.TimeoutError:
                pass


async def serving_samples(settings: PrometheusSettings, selector: str, prefixes: tuple[str, ...]) -> list[tuple[str, dict, float]]:
    """A serving engine's own series as Prometheus scraped them (those whose name begins with one of `prefixes`,
    e.g. `sglang:` or `vllm:`, matching `selector`): (name, labels, value) each, for the serving pane; the engine
    whose series they are reads them (serving/live.py)."""
    names = "|".join(p for p in prefixes if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*:", p))
    query = f'{{__name__=~"(?:{names}).*"{"," + selector if selector else ""}}}'
    result = await asyncio.to_thread(fetch, settings, query)
    samples: list[tuple[str, dict, float]] = []
    for series in result:
        metric = dict(series.get("metric") or {})
        name = str(metric.pop("__name__", ""))
        number = _number((series.get("value") or [None, None])[1])
        if name and number is not None:
            samples.append((name, metric, number))
    return samples
