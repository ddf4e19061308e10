"""The cockpit's own server watch following a real engine on the GPU machine (issue 48), one look a second.

    python tests/gpu/watch_real_server.py --log /tmp/rec/A-serve.log --url http://127.0.0.1:8000 --pid PID \
        --out $OUT/A-watch.jsonl --until-file /tmp/rec/A.done [--stopped-by-cockpit-file F]

Runs with what the GPU machine has (rich, prometheus-client): the core's read_server over a LocalTransport, the same
look `cockpit server` and the TUI's pane take.  Each look is one JSON line: the wall time, the state the cockpit would
show, its flags, its figures (tokens/s, acceptance, running requests) and their sources, what /metrics itself said of
the same counters at that moment, and what the log's own timestamps say.  tests/gpu/test_real_engine.py reads the
lines back here (committed under tests/fixtures/gpu-engines/) and on the GPU machine."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cockpit.config import HostConfig  # noqa: E402
from cockpit.hosts.commandlog import CommandLog  # noqa: E402
from cockpit.hosts.local import LocalTransport  # noqa: E402
from cockpit.serving.target import ServerTarget, read_server  # noqa: E402


WANTED = {
    "vllm": ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total",
             "vllm:spec_decode_num_draft_tokens_total", "vllm:generation_tokens_total", "vllm:num_requests_running"),
    "sglang": None,  # every sglang: sample but histogram buckets (no recording yet says which ones the figures rest on)
}


def scrape(url: str, engine: str = "vllm") -> dict[str, float]:
    """The engine's own counters, read straight from /metrics (what the cockpit's figures must equal), summed over their
    labels."""
    try:
        text = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=2).read().decode()
    except OSError:
        return {}
    wanted = WANTED[engine]
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if line.startswith("#") or not name:
            continue
        if (name in wanted) if wanted is not None else (name.startswith(engine + ":") and not name.endswith("_bucket")):
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=sorted(WANTED), default="vllm")
    parser.add_argument("--log", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--until-file", required=True, help="stop once this file exists and the server is gone")
    parser.add_argument("--stopped-file", default=None, help="a JSON stop record the cockpit would have written (plan stop)")
    parser.add_argument("--seconds", type=float, default=400)
    args = parser.parse_args()
    transport = LocalTransport(HostConfig(name="gpu", address="127.0.0.1", local=True), CommandLog())

    def stopped():
        if args.stopped_file and os.path.exists(args.stopped_file):
            return json.loads(Path(args.stopped_file).read_text())
        return None

    target = ServerTarget(None, "gpu", args.log, args.url, args.pid, engine=args.engine, stopped=stopped)
    start = time.time()
    with open(args.out, "a") as out:
        while time.time() - start < args.seconds:
            began = time.time()
            try:
                live, data = await read_server(target, lambda _host: transport)
                activity = data.get("activity") or {}
                look = {"t": round(began, 3), "state": activity.get("state"), "why": activity.get("why"),
                        "flags": [f.get("kind") for f in data.get("flags") or []],
                        "figures": {k: data.get(k) for k in ("throughput_tok_s", "accept_length", "running", "queued", "sources",
                                                             "figures_age_s", "figures_are_last", "ended", "alive", "spec_decode")},
                        "lines_read": len(live.lines), "metrics": scrape(args.url, args.engine),
                        "diagnoses": [d.get("kind") for d in data.get("diagnoses") or []]}
            except Exception as exc:  # noqa: BLE001 - a look that failed is itself the record
                look = {"t": round(began, 3), "error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(look, default=str) + "\n")
            out.flush()
            if os.path.exists(args.until_file) and not _alive(args.pid):
                break
            await asyncio.sleep(max(0.0, 1.0 - (time.time() - began)))
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
