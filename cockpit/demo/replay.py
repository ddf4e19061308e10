"""DEMO nvidia-smi: replays the H200 recording (data/) for the demo's hosts; GPUs held by a demo
process show its memory only while that process is alive.  A server the demo launches registers
itself in the scenario's `live_dir` (a JSON file per process: pid, gpus, used_memory), so the panes
show its memory on every GPU it uses, and it goes away when it stops.
Usage: python -m cockpit.demo.replay SCENARIO ARGS..."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ALIASES = {"clocks.sm": "clocks.current.sm", "clocks.mem": "clocks.current.memory"}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().split(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _recorded() -> tuple[dict[str, tuple[str, str]], list[list[str]], list[list[str]]]:
    header, row = (DATA / "smi_idle_query.csv").read_text().splitlines()[:2]
    fields = {}
    for name, value in zip(header.split(","), row.split(",")):
        base, _, unit = name.strip().partition(" [")
        fields[base] = (value.strip(), unit.rstrip("]"))
    idle = [[v.strip() for v in line.split(",")] for line in (DATA / "smi_stream.csv").read_text().splitlines() if line]
    busy = [[v.strip() for v in line.split(",")] for line in (DATA / "smi_busy_stream.csv").read_text().splitlines() if line]
    return fields, idle, busy


def holders(scenario: dict) -> dict[int, list[dict]]:
    """GPU index -> the live demo processes on it (the scenario's, and those registered in live_dir)."""
    entries = [dict(p, gpus=[p["gpu"]]) for p in scenario.get("processes", [])]
    live = scenario.get("live_dir")
    if live and os.path.isdir(live):
        for name in sorted(os.listdir(live)):
            try:
                entries.append(json.loads(Path(live, name).read_text()))
            except (OSError, ValueError):
                continue  # being written, or gone
    by_gpu: dict[int, list[dict]] = {}
    for entry in entries:
        if isinstance(entry.get("pid"), int) and _alive(entry["pid"]):
            for gpu in entry.get("gpus", []):
                by_gpu.setdefault(gpu, []).append(entry)
    return by_gpu


def main(argv: list[str]) -> int:
    scenario = json.loads(Path(argv[0]).read_text())
    args = argv[1:]
    query = apps = None
    loop_ms = None
    for index, arg in enumerate(args):
        if arg.startswith("--query-gpu="):
            query = arg.split("=", 1)[1].split(",")
        elif arg.startswith("--query-compute-apps="):
            apps = arg.split("=", 1)[1].split(",")
        elif arg in ("-lms", "--loop-ms") and index + 1 < len(args):
            loop_ms = int(args[index + 1])
    fields, idle, busy = _recorded()
    tick = 0
    while True:
        held_by = holders(scenario)
        lines = []
        if query:
            for gpu in range(scenario["gpus"]):
                held = held_by.get(gpu, [])
                stream = busy if any(p.get("busy") for p in held) else idle
                row = stream[(tick + gpu) % len(stream)]
                values = {k: v for k, (v, _u) in fields.items()}
                values.update({"index": str(gpu), "uuid": values["uuid"][:-2] + f"{gpu:02x}",
                               "pci.bus_id": f"00000000:{0x18 + 0x10 * gpu:02X}:00.0", "power.draw": row[7],
                               "utilization.gpu": row[9], "clocks.current.sm": row[12], "temperature.gpu": row[11]})
                values["memory.used"] = str(sum(p["used_memory"] for p in held))
                lines.append(", ".join(values.get(ALIASES.get(f, f), "[N/A]") for f in query))
        elif apps:
            for gpu, held in sorted(held_by.items()):
                uuid = fields["uuid"][0][:-2] + f"{gpu:02x}"
                for process in held:
                    values = {"pid": str(process["pid"]), "process_name": process.get("name", "python3"),
                              "used_memory": str(process["used_memory"]), "gpu_uuid": uuid}
                    lines.append(", ".join(values.get(f, "[N/A]") for f in apps))
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
        tick += 1
        if loop_ms is None:
            return 0
        time.sleep(loop_ms / 1000.0)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(0)
