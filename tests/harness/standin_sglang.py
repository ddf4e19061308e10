"""Start the STAND-IN SGLang server (tests/standin/sglang/) as its own process, the way a real one
runs: it serves SGLang's wire formats with the timings a scenario scripts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from harness.sshd import STANDIN_DIR, free_port


def start_standin_sglang(scenario: dict, *flags: str) -> tuple[subprocess.Popen, str]:
    """(the process, its http:// endpoint) once it accepts connections."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(STANDIN_DIR), "SGLANG_STANDIN": json.dumps({"load_s": 0, "warmup_s": 0, **scenario})}
    proc = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--port", str(port), *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"
