"""DEMO vLLM server (a STAND-IN): `python -m vllm.entrypoints.cli.main serve MODEL` (what `vllm serve`
runs) inside the demo and the tests runs this.  It replays vLLM 0.10.2 as its released wheel printed it: the recorded
`vllm serve --help`, argparse's errors for an unknown flag or a --speculative-config that is not JSON,
pydantic's block for a speculative method 0.10.2 does not know (tests/fixtures/vllm).  Then it logs
vLLM's start-up lines (with 0.10.2's ANSI-coloured `(APIServer pid=N)` prefix), and only then listens,
as vLLM's HTTP server starts only once its engine is up: /health 200, /v1/models, /metrics (vLLM's
`vllm:` series), a streaming /v1/chat/completions.  Every VLLM_LOG_STATS_INTERVAL seconds (10, as
vLLM) it logs the throughput line and the `SpecDecoding metrics:` line.  Speculative decoding follows
the same model as the SGLang stand-in (demo/specmodel.py): depth N is num_speculative_tokens N.  What a real vLLM 0.20.2
did on an H100 (tests/fixtures/gpu-engines/) it does too: /metrics serves every `vllm:` family of that recording (those
it does not simulate as recorded at rest); SIGINT/SIGTERM log the graceful stop's lines; SIGUSR2 plays its EngineCore
killed under traffic (EngineDeadError, 503 and 500s, uvicorn's shutdown, exit status 0)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from cockpit.demo.server import (WORDS, _int, event_stream, families, parse, register_gpus, reply, serve_connection, watch_parent,
                                 with_recorded)
from cockpit.demo.specmodel import SpecModel, draft_accuracies

HELP = resources.files("cockpit.vllm").joinpath("data", "help_0.10.2.txt")  # the real 0.10.2 --help
# every `vllm:` family of a real vLLM 0.20.2's /metrics at rest (tests/fixtures/gpu-engines/, before any request): the
# families this stand-in does not simulate are served as recorded, so a scrape sees what a real server's does
AT_REST = resources.files("cockpit.demo").joinpath("data", "vllm-0.20.2-metrics-at-rest.txt")
RECORDED_MODEL = 'model_name="tiny-llama-eagle3"'


@lru_cache(maxsize=1)
def _at_rest() -> dict[str, list[str]]:
    return families(AT_REST.read_text())


def with_recorded_families(live: str, model_name: str) -> str:
    """The stand-in's live series with the real server's words for them, then every other family of the recording."""
    return with_recorded(live, _at_rest(), RECORDED_MODEL, model_name)


VERSION = "0.10.2"


def _help_text() -> str:
    """The recorded --help it replays: 0.10.2's, or (VLLM_STANDIN_HELP, a test's) another recorded version's, gzipped or not."""
    other = os.environ.get("VLLM_STANDIN_HELP")
    if not other:
        return HELP.read_text()
    import gzip

    return gzip.decompress(Path(other).read_bytes()).decode() if other.endswith(".gz") else Path(other).read_text()
METHODS = ("ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp", "ernie_mtp", "qwen3_next_mtp")


def _process(name: str) -> str:
    """vLLM's prefix of a process's lines: coloured on a terminal only (a real 0.20.2 writing to a file prints none)."""
    return f"\x1b[1;36m({name})\x1b[0;0m " if sys.stdout.isatty() else f"({name}) "


def log(message: str, level: str = "INFO", where: str = "api_server.py:1896") -> None:
    print(f"{_process(f'APIServer pid={os.getpid()}')}{level} {time.strftime('%m-%d %H:%M:%S')} [{where}] {message}", flush=True)


def plain(message: str, name: str = "APIServer") -> None:
    """A line of its own without vLLM's stamp (uvicorn's access and shutdown lines, a traceback's), the process prefix kept."""
    print(f"{_process(f'{name} pid={os.getpid()}')}{message}", flush=True)


def engine_log(rank: int, message: str, where: str, level: str = "INFO") -> None:
    """A line of one data-parallel engine's process (vLLM prefixes each process's lines with its name and pid)."""
    print(f"{_process(f'EngineCore_DP{rank} pid={os.getpid()}')}{level} {time.strftime('%m-%d %H:%M:%S')} [{where}] {message}",
          flush=True)


def shut_down(signum: int, _frame) -> None:
    """SIGINT or SIGTERM: the words a real vLLM (0.20.2, recorded: tests/fixtures/gpu-engines/) logs on a graceful stop,
    then exit status 0."""
    print(f"{_process(f'EngineCore pid={os.getpid()}')}INFO {time.strftime('%m-%d %H:%M:%S')} [core.py:1238] Shutdown initiated "
          "(timeout=0)", flush=True)
    print(f"{_process(f'EngineCore pid={os.getpid()}')}INFO {time.strftime('%m-%d %H:%M:%S')} [core.py:1261] Shutdown complete",
          flush=True)
    for line in ("INFO:     Shutting down", "INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete.",
                 f"INFO:     Finished server process [{os.getpid()}]"):
        plain(line)
    os._exit(0)


def start_engines(first: int, count: int) -> None:
    """`count` data-parallel engines from rank `first`: each loads the model and builds its KV cache (0.10.2's lines)."""
    for rank in range(first, first + count):
        engine_log(rank, "Loading weights took 0.80 seconds", "default_loader.py:267")
    time.sleep(0.3)
    for rank in range(first, first + count):
        engine_log(rank, "GPU KV cache size: 1,048,576 tokens", "kv_cache_utils.py:864")
        engine_log(rank, "init engine (profile, create kv cache, warmup model) took 0.60 seconds", "core.py:214")


async def headless(values: dict, address: str, rpc_port: int, local: int, first: int) -> int:
    """A `--headless` node: its engines shake hands with the head at its --data-parallel-rpc-port (retrying, as ZMQ does,
    silently), then load; a head never heard from: vLLM's error after HANDSHAKE_TIMEOUT_MINS (5; the stand-in waits
    VLLM_STANDIN_HANDSHAKE_S).  Then it stays up serving through the head until it is stopped."""
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [serve.py:177] Launching {local} data parallel engine(s) in headless mode, "
          f"with head node address tcp://{address}:{rpc_port}.", flush=True)
    deadline = time.monotonic() + float(os.environ.get("VLLM_STANDIN_HANDSHAKE_S", "300"))
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(address, rpc_port), 2)
            break
        except (OSError, asyncio.TimeoutError):
            if time.monotonic() > deadline:
                for rank in range(first, first + local):
                    engine_log(rank, "EngineCore failed to start.", "core.py:726", "ERROR")
                print("RuntimeError: Did not receive response from front-end process within 5 minutes", flush=True)
                return 1
            await asyncio.sleep(0.3)
    start_engines(first, local)
    writer.write("".join(f"ready {rank}\n" for rank in range(first, first + local)).encode())
    await writer.drain()
    await reader.read()  # the head's link: kept until either end goes
    return 0


def ray_placement(world: int) -> bool:
    """`--distributed-executor-backend ray`: as vLLM, join the Ray cluster (RAY_ADDRESS) and place one GPU bundle per
    worker (a real placement group of the real Ray; PACK, as vLLM); vLLM's words when the cluster cannot hold them."""
    import logging

    import ray
    from ray.util.placement_group import placement_group

    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=logging.ERROR, log_to_driver=False)
    log("No current placement group found. Creating a new placement group.", where="ray_utils.py:358")
    if world > ray.cluster_resources().get("GPU", 0):
        log("The number of required GPUs exceeds the total number of available GPUs in the placement group.", "WARNING",
            where="ray_utils.py:364")
    specs = [{"GPU": 1.0} for _ in range(world)]
    group = placement_group(specs, strategy="PACK")
    wait = float(os.environ.get("VLLM_STANDIN_PG_WAIT_S", "1800"))
    try:
        ray.get(group.ready(), timeout=wait)
    except Exception:  # noqa: BLE001 - ray's GetTimeoutError: vLLM's own error after PG_WAIT_TIMEOUT
        print(f"ValueError: Cannot provide a placement group requiring {world} GPUs (placement_group_specs={specs}) within "
              f"{int(wait)} seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough resources.", flush=True)
        return False
    nodes = {bundle_node for bundle_node in ray.util.placement_group_table(group).get("bundles_to_node_id", {}).values()}
    log(f"Placement group ready: {world} GPU bundles on {len(nodes)} Ray nodes", where="ray_executor.py:200")
    return True


def dist_timeout() -> float:
    return float(os.environ.get("VLLM_STANDIN_DIST_TIMEOUT_S", "600"))


async def model_worker(addr: str, port: int, workers: int, first: int) -> int:
    """A `--headless` node holding a share of one model (`--nnodes`, 0.11 on): its workers join torch.distributed at
    the head's --master-addr:--master-port (c10d's texts when it cannot), then load their share and stay up."""
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [serve.py:120] Launching vLLM (v{VERSION}) headless multiproc executor, with "
          f"head node address {addr}:{port} for torch.distributed process group.", flush=True)
    deadline = time.monotonic() + dist_timeout()
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(addr, port), 2)
            break
        except (OSError, asyncio.TimeoutError):
            if time.monotonic() > deadline:
                ms = int(dist_timeout() * 1000)
                print(f"torch.distributed.DistNetworkError: The client socket has timed out after {ms}ms while trying to connect to "
                      f"({addr}, {port}).", flush=True)
                return 1
            await asyncio.sleep(0.3)
    for worker in range(first, first + workers):
        print(f"\x1b[1;36m(Worker_TP{worker} pid={os.getpid()})\x1b[0;0m INFO {time.strftime('%m-%d %H:%M:%S')} "
              "[default_loader.py:267] Loading weights took 0.80 seconds", flush=True)
    await reader.read()
    return 0


async def model_head(addr: str, port: int, nodes: int) -> bool:
    """Node 0 of one model over `nodes` nodes: torch.distributed's store waits for the other nodes (DistStoreError after
    the timeout)."""
    joined = asyncio.Event()
    links: list = []

    async def accept(reader, writer) -> None:
        links.append(writer)
        if len(links) >= nodes - 1:
            joined.set()

    if not os.environ.get("VLLM_STANDIN_FIREWALLED"):  # scenario: the other nodes cannot reach this port
        _LISTENERS.append(await asyncio.start_server(accept, addr, port))
    try:
        await asyncio.wait_for(joined.wait(), dist_timeout())
    except asyncio.TimeoutError:
        print(f"torch.distributed.DistStoreError: Timed out after {int(dist_timeout()) + 1} seconds waiting for clients. "
              f"{len(links) + 1}/{nodes} clients joined.", flush=True)
        return False
    return True


async def head_handshake(address: str, rpc_port: int, remote: int) -> None:
    """The head waits for every remote engine's handshake before its API server starts; forever, as vLLM (its waiting
    is logged at DEBUG only)."""
    ready = 0
    done = asyncio.Event()
    links = []

    async def accept(reader, writer) -> None:
        nonlocal ready
        links.append(writer)
        while line := await reader.readline():
            if line.startswith(b"ready"):
                ready += 1
                if ready >= remote:
                    done.set()

    if os.environ.get("VLLM_STANDIN_FIREWALLED"):  # scenario: the head's port cannot be reached from the other nodes
        await asyncio.Event().wait()
    _LISTENERS.append(await asyncio.start_server(accept, address, rpc_port))
    await done.wait()


_LISTENERS: list = []  # the handshake port stays open while the head runs


def refuse(usage: str, prog: str, message: str) -> int:
    sys.stderr.write(f"{usage}\n{prog}: error: {message}\n")
    return 2


@dataclass
class _Window:
    """What the stand-in counts between two stats lines (vLLM's loggers print the interval's figures)."""

    positions: int
    generated: int = 0
    prompt: int = 0
    drafts: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.per_position = [0] * self.positions


# what a real vLLM 0.20.2's API server logged when its EngineCore was killed under traffic (tests/fixtures/gpu-engines/,
# A-serve.log): the output handler's traceback, then 500s to every request, then uvicorn's own shutdown, exit status 0
ENGINE_DEAD = ("AsyncLLM output_handler failed.", "Traceback (most recent call last):",
               '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/async_llm.py", line 660, in output_handler',
               "    outputs = await engine_core.get_output_async()", "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
               '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core_client.py", line 998, in get_output_async',
               "    raise self._format_exception(outputs) from None",
               "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")


class StandInVllm:
    def __init__(self, model: str, config: dict | None):
        self.dead = False  # its EngineCore is gone (SIGUSR2 to the stand-in, as a kill of a real one's EngineCore)
        self.model_name = model
        steps = _int((config or {}).get("num_speculative_tokens")) if config else 0
        draft = (config or {}).get("model")
        self.model = SpecModel(steps, 1, steps + 1 if steps else 0, seed=steps * 1000 + 7,
                               accuracies=draft_accuracies(draft if isinstance(draft, str) else None))
        self.active = 0
        self.gpus_busy = lambda _flag: None  # the GPUs' replay follows the requests (demo/server.py register_gpus)
        self.prompt_tokens = self.generated = self.drafts = self.draft_tokens = self.accepted = 0
        self.per_position = [0] * steps
        self.window = _Window(steps)

    async def handle(self, reader, writer) -> None:
        await serve_connection(reader, writer, self.route)

    async def engine_dies(self) -> None:
        """Its EngineCore is gone: the output handler's traceback, 503 from /health and 500 to every request (those in
        flight too) for a moment, then uvicorn's own shutdown and exit status 0, as the real one did."""
        self.dead = True
        for line in ENGINE_DEAD:
            log(line, "ERROR", "async_llm.py:704")
        await asyncio.sleep(1.5)
        for line in ("INFO:     Shutting down", "INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete.",
                     f"INFO:     Finished server process [{os.getpid()}]"):
            plain(line)
        os._exit(0)

    async def route(self, method: str, path: str, body: dict, writer) -> None:
        peer = writer.get_extra_info("peername") or ("127.0.0.1", 0)
        if self.dead and path in ("/health", "/ping"):
            reply(writer, 503, b"")
            plain(f'INFO:     {peer[0]}:{peer[1]} - "GET {path} HTTP/1.1" 503 Service Unavailable')
        elif self.dead and method == "POST":
            reply(writer, 500, json.dumps({"error": "EngineCore encountered an issue."}).encode())
            plain(f'INFO:     {peer[0]}:{peer[1]} - "POST {path} HTTP/1.1" 500 Internal Server Error')
        elif path in ("/health", "/ping"):
            reply(writer, 200, b"")
        elif path == "/v1/models":
            reply(writer, 200, json.dumps({"object": "list", "data": [{"id": self.model_name, "object": "model"}]}).encode())
        elif path == "/version":
            reply(writer, 200, json.dumps({"version": VERSION}).encode())
        elif path == "/metrics":
            reply(writer, 200, self.metrics(), "text/plain; version=0.0.4")
        elif path == "/v1/chat/completions" and method == "POST":
            await self.chat(body, writer)
        else:
            reply(writer, 404, b"")

    def metrics(self) -> bytes:
        """vLLM's series (vllm-facts §4.2), written by prometheus_client as vLLM does: counters with _total."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

        registry = CollectorRegistry()
        labels = {"engine": "0", "model_name": self.model_name}
        Gauge("vllm:num_requests_running", "running", list(labels), registry=registry).labels(**labels).set(self.active)
        Gauge("vllm:num_requests_waiting", "waiting", list(labels), registry=registry).labels(**labels).set(0)
        Gauge("vllm:kv_cache_usage_perc", "kv", list(labels), registry=registry).labels(**labels).set(min(0.99, self.active * 0.004))
        series = [("generation_tokens", self.generated), ("prompt_tokens", self.prompt_tokens)]
        if self.model.speculative:
            series += [("spec_decode_num_drafts", self.drafts), ("spec_decode_num_draft_tokens", self.draft_tokens),
                       ("spec_decode_num_accepted_tokens", self.accepted)]
        for name, value in series:
            Counter(f"vllm:{name}", name, list(labels), registry=registry).labels(**labels).inc(value)
        if self.model.speculative:
            counter = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "per position", [*labels, "position"], registry=registry)
            for position, value in enumerate(self.per_position):
                counter.labels(**labels, position=str(position)).inc(value)
        return with_recorded_families(generate_latest(registry).decode(), self.model_name).encode()

    def _step(self, tokens: int) -> None:
        self.generated += tokens
        self.window.generated += tokens
        if self.model.speculative:
            accepted = tokens - 1  # the bonus token is not an accepted draft token
            self.drafts += 1
            self.draft_tokens += self.model.steps
            self.accepted += accepted
            self.window.drafts += 1
            self.window.accepted += accepted
            for position in range(accepted):
                self.per_position[position] += 1
                self.window.per_position[position] += 1

    async def stats(self, interval: float) -> None:
        """vLLM 0.10.2's lines, every interval, while there is traffic (idle: at DEBUG, not shown)."""
        busy = False
        while True:
            await asyncio.sleep(interval)
            w = self.window
            if not w.generated and not self.active:
                if not busy:
                    continue  # idle: nothing logged (at DEBUG only)
                busy = False  # the window after the last request: one more line, all zeros, then silence (as recorded)
            else:
                busy = True
            log(f"Engine 000: Avg prompt throughput: {w.prompt / interval:.1f} tokens/s, Avg generation throughput: "
                f"{w.generated / interval:.1f} tokens/s, Running: {self.active} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                f"{min(99.0, self.active * 0.4):.1f}%, Prefix cache hit rate: 0.0%", where="loggers.py:123")
            if self.model.speculative and w.drafts:
                drafts = w.drafts
                rates = ", ".join(f"{count / drafts:.3f}" for count in w.per_position)
                log(f"SpecDecoding metrics: Mean acceptance length: {1 + w.accepted / drafts:.2f}, Accepted throughput: "
                    f"{w.accepted / interval:.2f} tokens/s, Drafted throughput: {drafts * self.model.steps / interval:.2f} tokens/s, "
                    f"Accepted: {w.accepted} tokens, Drafted: {drafts * self.model.steps} tokens, Per-position acceptance rate: "
                    f"{rates}, Avg Draft acceptance rate: {100.0 * w.accepted / (drafts * self.model.steps):.1f}%",
                    where="metrics.py:96")
            self.window = _Window(len(self.per_position))

    async def chat(self, body: dict, writer) -> None:
        max_tokens = int(body.get("max_tokens") or 16)
        send = event_stream(writer)

        self.active += 1
        if self.active == 1:
            self.gpus_busy(True)
        self.prompt_tokens += 24
        self.window.prompt += 24
        produced = 0
        try:
            send(json.dumps({"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": self.model_name,
                             "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}))
            await asyncio.sleep(0.04)  # prefill
            while produced < max_tokens:
                await asyncio.sleep(self.model.step_seconds(self.active))
                if self.dead:
                    break
                step = min(self.model.tokens_per_step(), max_tokens - produced)
                self._step(step)
                produced += step
                text = " ".join(WORDS[(produced + i) % len(WORDS)] for i in range(step)) + " "
                finish = "length" if produced >= max_tokens else None
                send(json.dumps({"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": self.model_name,
                                 "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
                                 "usage": {"prompt_tokens": 24, "completion_tokens": produced, "total_tokens": 24 + produced}}))
                await writer.drain()
            send("[DONE]")
            writer.write(b"0\r\n\r\n")
        finally:
            self.active -= 1
            if not self.active:
                self.gpus_busy(False)
            peer = writer.get_extra_info("peername") or ("127.0.0.1", 0)
            said = "500 Internal Server Error" if self.dead else "200 OK"
            plain(f'INFO:     {peer[0]}:{peer[1]} - "POST /v1/chat/completions HTTP/1.1" {said}')  # uvicorn's access line


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    global VERSION
    VERSION = os.environ.get("VLLM_STANDIN_VERSION", VERSION)
    text = _help_text()
    if "-h" in argv or "--help" in argv:
        print(text, end="")
        return 0
    usage = "usage: vllm serve [model_tag] [options]"
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    model = argv.pop(0) if argv and not argv[0].startswith("-") else ""
    argv = [w.split("=", 1)[0].replace("_", "-") + ("=" + w.split("=", 1)[1] if "=" in w else "") if w.startswith("--") else w
            for w in argv]  # FlexibleArgumentParser: '_' in a flag's name is '-'
    values, unknown = parse(argv, text)
    if unknown:  # reported by the top-level `vllm` parser, as 0.10.2 does (tests/fixtures/vllm/unrecognized_0.10.2.log)
        return refuse("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", "vllm",
                      f"unrecognized arguments: {' '.join(unknown)}")
    config = None
    if values.get("--speculative-config"):
        raw = values["--speculative-config"]
        try:
            config = json.loads(raw)
        except ValueError:
            return refuse(usage, "vllm serve", f"argument --speculative-config: Value {raw} cannot be converted to <function loads at "
                          "0x7f6b8469b6a0>.")
    port = _int(values.get("--port"), 8000)
    log(f"vLLM API server version {VERSION}")
    log(f"non-default args: {{'model': {model!r}, 'port': {port}" + (f", 'speculative_config': {config!r}" if config else "") + "}",
        where="utils.py:328")
    if config is not None:
        method = config.get("method")
        if method is not None and method not in METHODS:
            listed = ", ".join(f"'{m}'" for m in METHODS[:-1]) + f" or '{METHODS[-1]}'"
            for line in ("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig", "method",
                         f"  Input should be {listed} [type=literal_error, input_value={method!r}, input_type=str]",
                         "    For further information visit https://errors.pydantic.dev/2.14/v/literal_error"):
                plain(line)
            return 1
    tp = max(1, _int(values.get("--tensor-parallel-size"), 1))
    dp = max(1, _int(values.get("--data-parallel-size"), 1))
    local = max(1, _int(values.get("--data-parallel-size-local"), dp))
    address, rpc_port = str(values.get("--data-parallel-address") or "127.0.0.1"), _int(values.get("--data-parallel-rpc-port"), 29550)
    nnodes = max(1, _int(values.get("--nnodes"), 1))
    master = (str(values.get("--master-addr") or "127.0.0.1"), _int(values.get("--master-port"), 29501))
    share = max(1, tp * max(1, _int(values.get("--pipeline-parallel-size"), 1)) // nnodes)
    if values.get("--distributed-executor-backend") == "ray":
        if not ray_placement(tp * max(1, _int(values.get("--pipeline-parallel-size"), 1))):
            return 1
    if nnodes > 1 and values.get("--headless"):  # one model over several nodes: this node's share of its workers
        register_gpus(share, "VLLM::Worker")
        return asyncio.run(model_worker(*master, share, share * _int(values.get("--node-rank"), 0)))
    if values.get("--headless"):  # a node of a data-parallel group that serves nothing itself (vllm/group.py)
        register_gpus(local * tp, "VLLM::EngineCore")
        return asyncio.run(headless(values, address, rpc_port, local, _int(values.get("--data-parallel-start-rank"), 0)))
    log("Resolved architecture: LlamaForCausalLM", where="__init__.py:742")
    handshake = None
    if dp > local:  # the head of a data-parallel group over several nodes: its engines' handshake port first
        log(f"Started DP Coordinator process (PID: {os.getpid() + 1})", where="utils.py:1279")
    if config:
        log("Loading drafter model...", where="gpu_model_runner.py:2180")
    time.sleep(0.8)
    gpus_busy = register_gpus(tp * local, "VLLM::EngineCore")
    if dp > 1:
        start_engines(0, local)
        handshake = (address, rpc_port, dp - local) if dp > local else None
    else:
        log("Loading weights took 0.80 seconds", where="default_loader.py:267")
        log("GPU KV cache size: 1,048,576 tokens", where="kv_cache_utils.py:864")
        log("init engine (profile, create kv cache, warmup model) took 0.60 seconds", where="core.py:214")
    server = StandInVllm(model, config)
    server.gpus_busy = gpus_busy
    interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))

    import signal

    signal.signal(signal.SIGINT, shut_down)
    signal.signal(signal.SIGTERM, shut_down)

    async def run() -> None:
        asyncio.ensure_future(watch_parent())  # ends with the demo, as the SGLang stand-in does
        if nnodes > 1 and not await model_head(*master, nnodes):
            raise SystemExit(1)
        if handshake is not None:
            try:
                await head_handshake(*handshake)
            except OSError as exc:
                print(f"OSError: [Errno {exc.errno}] {exc.strerror}", flush=True)
                raise SystemExit(1) from None
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, lambda: asyncio.ensure_future(server.engine_dies()))
        listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=256)
        log(f"Starting vLLM API server 0 on http://127.0.0.1:{port}", where="launcher.py:29")
        plain("INFO:     Application startup complete.")
        asyncio.ensure_future(server.stats(interval))
        async with listener:
            await listener.serve_forever()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
