"""Processes on a host, by PID: alive or not, stopped, started detached.  Commands are argument lists."""

from __future__ import annotations

import asyncio
import time

from cockpit.hosts.transport import Transport

# Start argv detached (outlives the cockpit and its SSH session), output appended to log after a
# marker line that starts a new run in it; prints the PID.  Every value travels as a positional
# parameter of sh, never inside the script text.
DETACH_SCRIPT = (
    'log="$1"; dir="$2"; marker="$3"; shift 3; '
    'if [ -n "$dir" ]; then cd "$dir" || exit 97; fi; '
    'if [ -n "$marker" ]; then printf "%s\\n" "$marker" >>"$log" || exit 98; fi; '
    'setsid nohup "$@" >>"$log" 2>&1 </dev/null & echo $!'
)


def detached_argv(argv: list[str], log: str, cwd: str | None = None, env: dict[str, str] | None = None,
                  marker: str = "") -> list[str]:
    command = list(argv)
    if env:
        command = ["env", *[f"{k}={v}" for k, v in env.items()], *command]
    return ["sh", "-c", DETACH_SCRIPT, "sh", log, cwd or "", marker, *command]


async def process_alive(transport: Transport, pid: int) -> bool:
    """Running, and not a zombie (kill -0 succeeds on a zombie that nobody reaped)."""
    result = await transport.run(["ps", "-o", "stat=", "-p", str(pid)], timeout=30)
    return result.exit_status == 0 and bool(result.stdout.strip()) and not result.stdout.strip().startswith("Z")


async def stop_process(transport: Transport, pid: int, grace_s: float = 10.0) -> bool:
    """SIGTERM, wait, SIGKILL; True when the process is gone."""
    await transport.run(["kill", "-TERM", str(pid)], timeout=30)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not await process_alive(transport, pid):
            return True
        await asyncio.sleep(0.2)
    await transport.run(["kill", "-KILL", str(pid)], timeout=30)
    await asyncio.sleep(0.2)
    return not await process_alive(transport, pid)


async def start_detached(transport: Transport, argv: list[str], log: str, cwd: str | None, env: dict[str, str] | None,
                         marker: str) -> tuple[int | None, str]:
    """(pid, "") once started, or (None, what went wrong)."""
    result = await transport.run(detached_argv(argv, log, cwd, env, marker), timeout=30)
    pid_text = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.exit_status != 0 or not pid_text.isdigit():
        return None, f"could not start: {result.output.strip()[:300]}"
    return int(pid_text), ""
