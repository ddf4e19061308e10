"""STAND-IN for NVIDIA's DCGM exporter (no GPU exporter runs here): serves `/metrics` in the recorded
format of tests/fixtures/dcgm (label order gpu, UUID, pci_bus_id, device, modelName, host label,
DCGM_FI_DRIVER_VERSION; HELP/TYPE headers; MiB, W, %, °C), one port per "host".

    python dcgm_exporter.py SCENARIO.json

Scenario (re-read on every scrape, so a test changes it live):
{"hosts": {"node0": {"port": 19400, "label": "Hostname", "gpus": 8, "used": [61234, ...], "power": [...],
                     "util": [...], "temp": [...], "stopped": false, "nan": ["DCGM_FI_DEV_POWER_USAGE"],
                     "no_label": false, "uuid_prefix": "GPU-node0"}},
 "sglang": {"port": 19500, "accept_length": 2.4, ...}}   (optional: SGLang's own series, as its /metrics has them)
A stopped host closes its port (the exporter is gone); `no_label` drops the host label (a misconfigured
exporter); `nan` makes those fields NaN.
"""

from __future__ import annotations

import asyncio
import json
import sys

TOTAL_MIB = 143771
RESERVED_MIB = 491
FIELDS = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util", 0),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp", 39),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power", 81.0),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "free", None),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "used", 0),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", "reserved", RESERVED_MIB),
]


def render(name: str, host: dict) -> str:
    gpus = int(host.get("gpus", 8))
    label = host.get("label", "Hostname")
    prefix = host.get("uuid_prefix", f"GPU-{name}")
    lines = []
    for metric, kind, help_text, key, default in FIELDS:
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} {kind}")
        for i in range(gpus):
            used = (host.get("used") or [0] * gpus)[i]
            if key == "free":
                value = TOTAL_MIB - RESERVED_MIB - used
            elif key == "reserved":
                value = RESERVED_MIB
            else:
                values = host.get(key)
                value = values[i] if values else default
            if metric in (host.get("nan") or []):
                text = "NaN"
            elif isinstance(value, float):
                text = f"{value:.6f}"
            else:
                text = str(int(value))
            host_label = "" if host.get("no_label") else f',{label}="{host.get("label_value", name)}"'
            lines.append(f'{metric}{{gpu="{i}",UUID="{prefix}-{i:04d}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",device="nvidia{i}",'
                         f'modelName="NVIDIA H200"{host_label},DCGM_FI_DRIVER_VERSION="580.159.04"}} {text}')
    return "\n".join(lines) + "\n"


def render_sglang(s: dict) -> str:
    labels = 'model_name="moonshotai/Kimi-K2.5",engine_type="unified",tp_rank="0",pp_rank="0"'
    rows = [("num_running_reqs", "gauge", s.get("running", 8)), ("num_queue_reqs", "gauge", s.get("queued", 0)),
            ("token_usage", "gauge", s.get("token_usage", 0.12)), ("gen_throughput", "gauge", s.get("throughput", 812.4)),
            ("spec_accept_length", "gauge", s.get("accept_length", 2.4)),
            ("generation_tokens_total", "counter", s.get("generation_tokens", 1000)), ("spec_verify_calls_total", "counter", s.get("verify_calls", 400))]
    lines = []
    for name, kind, value in rows:
        family = name[: -len("_total")] if name.endswith("_total") else name
        lines += [f"# HELP sglang:{family} {family}", f"# TYPE sglang:{family} {kind}", f"sglang:{name}{{{labels}}} {float(value)}"]
    return "\n".join(lines) + "\n"


def render_vllm(s: dict) -> str:
    """vLLM 0.10.2's series (vllm-facts §4.2), with its labels, as its /metrics writes them."""
    labels = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    rows = [("num_requests_running", "gauge", s.get("running", 8)), ("num_requests_waiting", "gauge", s.get("queued", 0)),
            ("kv_cache_usage_perc", "gauge", s.get("kv_usage", 0.12)), ("generation_tokens_total", "counter", s.get("generation_tokens", 5000)),
            ("spec_decode_num_drafts_total", "counter", s.get("drafts", 1000)),
            ("spec_decode_num_accepted_tokens_total", "counter", s.get("accepted", 1850))]
    lines = []
    for name, kind, value in rows:
        family = name[: -len("_total")] if name.endswith("_total") else name
        lines += [f"# HELP vllm:{family} {family}", f"# TYPE vllm:{family} {kind}", f"vllm:{name}{{{labels}}} {float(value)}"]
    return "\n".join(lines) + "\n"


class Exporter:
    def __init__(self, scenario_path: str):
        self.path = scenario_path
        self.servers: dict[str, asyncio.base_events.Server] = {}

    def scenario(self) -> dict:
        with open(self.path) as handle:
            return json.load(handle)

    def handler(self, name: str):
        async def handle(reader, writer):
            try:
                await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                scenario = self.scenario()
                body = (render_sglang(scenario["sglang"]) if name == "sglang" else render_vllm(scenario["vllm"]) if name == "vllm"
                        else render(name, scenario["hosts"][name])).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                             + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
                await writer.drain()
            except (ConnectionError, KeyError, OSError, ValueError):
                pass
            finally:
                writer.close()
        return handle

    async def sync(self) -> None:
        """Open the port of every host that runs, close the port of every host that stopped."""
        while True:
            try:
                scenario = self.scenario()
            except (OSError, ValueError):
                await asyncio.sleep(0.2)
                continue
            wanted = {name: h["port"] for name, h in scenario.get("hosts", {}).items() if not h.get("stopped")}
            for engine in ("sglang", "vllm"):
                if scenario.get(engine):
                    wanted[engine] = scenario[engine]["port"]
            for name in list(self.servers):
                if name not in wanted:
                    self.servers.pop(name).close()
            for name, port in wanted.items():
                if name not in self.servers:
                    try:
                        self.servers[name] = await asyncio.start_server(self.handler(name), "127.0.0.1", port, reuse_address=True)
                    except OSError as exc:  # the port is taken (by chance): said, and tried again next round
                        print(f"{name}: port {port}: {exc}", file=sys.stderr, flush=True)
            print("ready", flush=True)
            await asyncio.sleep(0.2)


if __name__ == "__main__":
    asyncio.run(Exporter(sys.argv[1]).sync())
