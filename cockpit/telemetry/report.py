"""Snapshots as text for `cockpit status`, and its exit code."""

from __future__ import annotations

from dataclasses import dataclass

from collections.abc import Sequence

from cockpit.format import plural, value
from cockpit.hosts.state import HostState
from cockpit.telemetry.model import HostSnapshot

EXIT_OK, EXIT_PROBLEM, EXIT_UNREACHABLE = 0, 1, 2


def render_status_text(snapshots: Sequence[HostSnapshot], now: float) -> str:
    lines: list[str] = []
    for snap in snapshots:
        last = snap.age(now)
        age_text = f", last sample {last:.1f} s ago" if last is not None else ""
        header = f"{snap.name}: {snap.state.value}{age_text}"
        if snap.error:
            header += f" - {snap.error}"
        lines.append(header)
        for gpu in snap.gpus:
            if gpu.lost:
                lines.append(f"  GPU {gpu.index:>2}  LOST  {gpu.bus_id or ''}  {'; '.join(gpu.problems)}")
                continue
            mem = f"{value(gpu.memory_used_mib)}/{value(gpu.memory_total_mib)} MiB"
            power = f"{value(gpu.power_w, ' W', 0, 0)}/{value(gpu.power_limit_w, ' W', 0, 0)}"
            lines.append(
                f"  GPU {gpu.index:>2}  {(gpu.name or '?')[:22]:<22} {mem:>22}  {power:>13}  "
                f"util {value(gpu.utilization_pct, '%', 4)}  {value(gpu.temperature_c, ' C', 5)}"
                + (f"  ! {'; '.join(gpu.problems)}" if gpu.problems else "")
            )
        if snap.processes:
            for proc in snap.processes:
                where = f"GPU {proc.gpu_index}" if proc.gpu_index is not None else (proc.gpu_uuid or "GPU ?")
                lines.append(f"  pid {proc.pid:>7}  {(proc.name or '?')[:30]:<30} {value(proc.used_memory_mib, ' MiB', 10)}  {where}")
        elif snap.source == "prometheus":
            lines.append("  processes: unknown (DCGM exports none; `cockpit verify HOST` asks the host over SSH)")
        elif snap.state.reached and snap.gpus:
            lines.append("  no compute processes")
    if snapshots and all(s.state is HostState.DRIVER_ERROR and "this machine has no NVIDIA GPU" in (s.error or "") for s in snapshots):
        lines.append("this machine has no NVIDIA GPU: name your GPU hosts in a config (`cockpit init`), "
                     "or see the whole flow here with `cockpit demo`")
    return "\n".join(lines)


@dataclass(frozen=True)
class HostSummary:
    """A host in one line (a fleet of many): its GPUs' totals, for the status CLI and the TUI's fleet view."""

    name: str
    state: str
    age_s: float | None
    gpus: int
    used_mib: int
    total_mib: int
    power_w: float
    power_limit_w: float
    util_pct: float | None
    temp_max_c: int | None
    processes: int | None  # None: not known (Prometheus)
    busy_gpus: int  # GPUs with memory in use
    problems: int
    roles: tuple[str, ...] = ()
    source: str | None = None
    error: str | None = None

    @property
    def used_fraction(self) -> float | None:
        return self.used_mib / self.total_mib if self.total_mib else None

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "state", "age_s", "gpus", "used_mib", "total_mib", "power_w", "power_limit_w",
                                              "util_pct", "temp_max_c", "processes", "busy_gpus", "problems", "source", "error")} | {
            "roles": list(self.roles)}


def summarize(snap: HostSnapshot, now: float) -> HostSummary:
    gpus = [g for g in snap.gpus if not g.lost]
    utils = [g.utilization_pct for g in gpus if g.utilization_pct is not None]
    temps = [g.temperature_c for g in gpus if g.temperature_c is not None]
    age = snap.age(now)
    return HostSummary(
        name=snap.name, state=snap.state.value, age_s=None if age is None else round(age, 1), gpus=len(snap.gpus),
        used_mib=sum(g.memory_used_mib or 0 for g in gpus), total_mib=sum(g.memory_total_mib or 0 for g in gpus),
        power_w=sum(g.power_w or 0.0 for g in gpus), power_limit_w=sum(g.power_limit_w or 0.0 for g in gpus),
        util_pct=sum(utils) / len(utils) if utils else None, temp_max_c=max(temps) if temps else None,
        processes=None if snap.source == "prometheus" else len(snap.processes),
        busy_gpus=sum(1 for g in gpus if (g.memory_used_mib or 0) > 256),
        problems=sum(len(g.problems) for g in snap.gpus) + sum(1 for g in snap.gpus if g.lost),
        roles=snap.roles, source=snap.source, error=snap.error)


def summary_line(s: HostSummary) -> str:
    age = f"{s.age_s:>5.1f}s" if s.age_s is not None else "    -"
    mem = f"{s.used_mib / 1024:>7.0f}/{s.total_mib / 1024:<5.0f}GiB" if s.total_mib else f"{'-':>13}"
    power = f"{s.power_w / 1000:>5.1f}/{s.power_limit_w / 1000:<4.1f}kW" if s.power_limit_w else f"{s.power_w / 1000:>5.1f} kW   "
    util = f"{s.util_pct:>3.0f}%" if s.util_pct is not None else "   -"
    temp = f"{s.temp_max_c:>3}C" if s.temp_max_c is not None else "   -"
    procs = "?" if s.processes is None else str(s.processes)
    line = (f"{s.name:<20} {s.state:<16} {age}  {s.gpus:>2} GPU ({s.busy_gpus} busy)  {mem}  {power}  util {util}  max {temp}  "
            f"procs {procs:>2}")
    if s.problems:
        line += f"  ! {plural(s.problems, 'problem')}"
    if s.error and s.state != "up":
        line += f"  - {s.error[:80]}"
    return line


def render_summary_text(snapshots: Sequence[HostSnapshot], now: float) -> str:
    """One line per host and a fleet line: what `status` prints for many hosts (or --summary)."""
    rows = [summarize(s, now) for s in snapshots]
    down = sum(1 for r in rows if r.state not in ("up", "stale"))
    stale = sum(1 for r in rows if r.state == "stale")
    used, total = sum(r.used_mib for r in rows), sum(r.total_mib for r in rows)
    head = (f"{len(rows)} hosts, {sum(r.gpus for r in rows)} GPUs ({sum(r.busy_gpus for r in rows)} busy), {down} down, {stale} stale"
            + (f", memory {100 * used / total:.0f}% used" if total else "")
            + f", power {sum(r.power_w for r in rows) / 1000:.1f} kW")
    return "\n".join([head] + [summary_line(r) for r in rows])


def status_exit_code(snapshots: Sequence[HostSnapshot]) -> int:
    if any(not s.state.reached for s in snapshots):
        return EXIT_UNREACHABLE
    if any(s.state is HostState.DRIVER_ERROR for s in snapshots):
        return EXIT_PROBLEM
    return EXIT_OK

