"""Snapshots as text for `cockpit status`, and its exit code."""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.format import value
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
        elif snap.state.reached and snap.gpus:
            lines.append("  no compute processes")
    return "\n".join(lines)


def status_exit_code(snapshots: Sequence[HostSnapshot]) -> int:
    if any(not s.state.reached for s in snapshots):
        return EXIT_UNREACHABLE
    if any(s.state is HostState.DRIVER_ERROR for s in snapshots):
        return EXIT_PROBLEM
    return EXIT_OK

