"""DEMO SGLang server: `python -m sglang.launch_server` inside the demo runs this.  It replays the
recorded SGLang 0.5.23 `--help` and argparse's crash for a bad flag (the real usage text), or another recorded
release's parser rebuilt from its flags (SGLANG_STANDIN_VERSION: the demo's 0.5.2), prints
SGLang's start-up lines, then answers /health (503, then 200), /server_info and a streaming
/generate.  What a real SGLang 0.5.11 printed on an H100 (tests/fixtures/gpu-engines/sglang-0.5.11-h100) it prints
too: its start-up lines in their order, uvicorn's access line for each request, a Prefill line for each, the recorded
/metrics families; SIGINT logs uvicorn's stop, SIGTERM SGLang's drain, SIGUSR2 plays its scheduler killed (both end
its own process with SIGKILL, as SGLang ends its process tree).  Speculative decoding is modelled (demo/specmodel.py): acceptance grows with depth and
saturates, each draft step costs time, and a verify pass slows as the batch grows, so the best depth
depends on concurrency.  It logs SGLang's `Decode batch` lines, and registers its GPU memory with the
demo's nvidia-smi (every GPU of its tensor parallelism) while it runs."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import functools
import json
import os
import re
import signal
import sys
import time
from importlib import resources

from cockpit.demo.specmodel import SpecModel, draft_accuracies

HELP = resources.files("cockpit.sglang").joinpath("data", "help_0.5.23.txt")  # the real 0.5.23 --help
PROG = "sglang serve"
VERSION = "0.5.23"


def recorded_parser(version: str) -> argparse.ArgumentParser:
    """Another release's parser, rebuilt with argparse from the flags recorded from its wheel (cockpit/sglang/data/
    versions.json: options, type, choices, nargs, switch, open, required): its own flags, choices and usage, argparse's
    own words for a mistake.  `python -m sglang.launch_server` names itself `launch_server.py`."""
    recorded = json.loads(resources.files("cockpit.sglang").joinpath("data", "versions.json").read_text())  # data, not code
    parser = argparse.ArgumentParser(prog="launch_server.py")
    for options, kind, choices, nargs, switch, open_choices, required in recorded[version]["flags"]:
        if switch or nargs == 0:
            parser.add_argument(*options, action="store_true")
            continue
        kw: dict = {"type": {"int": int, "float": float}.get(kind or "", str)}
        if choices and not open_choices:
            kw["choices"] = choices
        if nargs not in (None, 0):
            kw["nargs"] = nargs
        parser.add_argument(*options, required=bool(required), **kw)
    return parser


@functools.lru_cache(maxsize=1)
def release() -> tuple[str, str, argparse.ArgumentParser | None]:
    """(the version it replays, its --help, its parser where rebuilt): 0.5.23's recorded --help, or (SGLANG_STANDIN_VERSION,
    the demo's serving host) another recorded release's parser.  Once per process: /server_info asks it at every poll."""
    version = os.environ.get("SGLANG_STANDIN_VERSION") or VERSION
    if version == VERSION:
        return version, HELP.read_text(), None
    parser = recorded_parser(version)
    return version, parser.format_help(), parser
WORDS = "the draft proposes and the target verifies several tokens in one forward pass".split()


# every `sglang:` family of a real SGLang 0.5.11's /metrics (tests/fixtures/gpu-engines/sglang-0.5.11-h100, B: a warm start at rest, and the two
# families it serves only once requests ran, as after its traffic): those this stand-in does not simulate are served as recorded
AT_REST = resources.files("cockpit.demo").joinpath("data", "sglang-0.5.11-metrics-at-rest.txt")
RECORDED_MODEL = 'model_name="tiny-llama-eagle3"'


def families(text: str) -> dict[str, list[str]]:
    """A Prometheus text exposition by family: its name -> its lines, from its `# HELP` on."""
    found: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            lines = found.setdefault(line.split()[2], [])
        if lines is not None:
            lines.append(line)
    return found


def with_recorded(live: str, recorded: dict[str, list[str]], recorded_model: str, model_name: str) -> str:
    """A stand-in's live series with the real server's words for them (its HELP), then every other family of the real
    recording, at rest, labelled with this server's model."""
    out = []
    served = families(live)
    for name, lines in served.items():
        real_help = next((line for line in recorded.get(name, []) if line.startswith("# HELP ")), None)
        out += [real_help or lines[0], *lines[1:]]
    label = 'model_name="' + model_name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    for name, lines in recorded.items():
        if name not in served:
            out += [line.replace(recorded_model, label) for line in lines]
    return "\n".join(out) + "\n"


@functools.lru_cache(maxsize=1)
def _at_rest() -> dict[str, list[str]]:
    return families(AT_REST.read_text())


def stamp(message: str) -> None:
    print(time.strftime("[%Y-%m-%d %H:%M:%S] ") + message, flush=True)


def parse(argv: list[str], text: str) -> tuple[dict, list[str]]:
    known = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", text))
    values: dict = {}
    unknown: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        name, _, inline = word.partition("=")
        matches = [k for k in known if k == name] or [k for k in known if k.startswith(name)]
        if not name.startswith("--") or len(matches) != 1:
            unknown.append(word)
            while index < len(argv) and not argv[index].startswith("-"):
                unknown.append(argv[index])
                index += 1
            continue
        value = inline or None
        if value is None and index < len(argv) and not argv[index].startswith("--"):
            value = argv[index]
            index += 1
        values[matches[0]] = True if value is None else value
    return values, unknown


async def read_request(reader) -> tuple[str, str, dict] | None:
    """One HTTP request of a stand-in server: (method, path, JSON body), None when the client went away."""
    request = await reader.readline()
    if not request:
        return None
    method, path, _ = request.decode("latin-1").split(" ", 2)
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return method, path, (json.loads(await reader.readexactly(length) or b"{}") if length else {})


async def serve_connection(reader, writer, route) -> None:
    """One connection of a stand-in server: its request read, `route(method, path, body, writer)`
    answering it, the connection closed whatever happens (a client that went away is no error)."""
    try:
        request = await read_request(reader)
        if request is None:
            return
        await route(*request, writer)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()


async def watch_parent() -> None:
    """A demo server ends with the demo (COCKPIT_DEMO_PARENT), even when the demo was killed with its terminal."""
    parent = int(os.environ.get("COCKPIT_DEMO_PARENT", "0") or 0)
    while parent:
        await asyncio.sleep(1)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass


def reply(writer, status: int, payload: bytes, content_type: str = "application/json") -> None:
    writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + payload)


def event_stream(writer):
    """Start a chunked server-sent-events answer; returns send(data) for each event."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")

    def send(data: str) -> None:
        raw = f"data: {data}\n\n".encode()
        writer.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")

    return send


MEMORY_PER_GPU_MIB = 126518  # mem-fraction-static 0.88 of an H200's 143771 MiB


def _int(value, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class DemoServer:
    def __init__(self, args: dict):
        self.args = args
        self.ready = False
        steps = _int(args.get("--speculative-num-steps")) if args.get("--speculative-algorithm") else 0
        topk = _int(args.get("--speculative-eagle-topk"), 1)
        draft = _int(args.get("--speculative-num-draft-tokens"), steps + 1)
        if topk == 1 and steps:
            draft = steps + 1  # as SGLang does for a chain
        self.model = SpecModel(steps, topk, draft, seed=steps * 1000 + topk,
                               accuracies=draft_accuracies(args.get("--speculative-draft-model-path")))
        self.active = 0
        self.gpus_busy = lambda _flag: None  # the GPUs' replay follows the requests (register_gpus)
        self.steps = self.tokens = self.window_tokens = self.window_steps = 0
        self.window_started = time.monotonic()
        self.total_tokens = self.total_verifies = 0  # since start: /server_info's lifetime acceptance, /metrics counters
        self.last_accept = 0.0
        self.last_throughput = 0.0
        self._control: dict = {}
        self._control_read = 0.0

    def control(self) -> dict:
        """A stand-in's faults, from the file named by COCKPIT_DEMO_CONTROL (re-read every 0.2 s):
        {"draft": false} the draft stops being used (acceptance 1.00), {"hang": true} decoding stops
        while requests wait (as a stuck scheduler does)."""
        path = os.environ.get("COCKPIT_DEMO_CONTROL")
        now = time.monotonic()
        if path and now - self._control_read > 0.2:
            self._control_read = now
            try:
                with open(path) as handle:
                    self._control = json.load(handle)
            except (OSError, ValueError):
                self._control = {}
        return self._control

    async def handle(self, reader, writer) -> None:
        await serve_connection(reader, writer, self.route)

    def access(self, method: str, path: str, status: int, writer) -> None:
        """uvicorn's access line, as a real SGLang logs every request (0.5.11, recorded)."""
        peer = writer.get_extra_info("peername") or ("127.0.0.1", 0)
        words = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}.get(status, "")
        stamp(f'INFO:     {peer[0]}:{peer[1]} - "{method} {path} HTTP/1.1" {status} {words}')

    async def route(self, method: str, path: str, body: dict, writer) -> None:
        if path in ("/health", "/health_generate"):
            reply(writer, 200 if self.ready else 503, b"")
            self.access(method, path, 200 if self.ready else 503, writer)
        elif path in ("/server_info", "/get_server_info"):
            while self.control().get("hang"):
                await asyncio.sleep(0.2)  # it asks the scheduler, which is stuck: no answer
            info = {k.lstrip("-").replace("-", "_"): v for k, v in self.args.items()}
            info["version"] = release()[0]  # as SGLang's get_server_info: its __version__ beside its args
            if self.model.speculative:
                state = {"last_gen_throughput": self.last_throughput}
                if self.total_verifies:  # as SGLang's scheduler: no figure before its first speculative step
                    state["avg_spec_accept_length"] = self.total_tokens / self.total_verifies
                info["internal_states"] = [state]
            reply(writer, 200, json.dumps(info).encode())
            self.access(method, path, 200, writer)
        elif path == "/metrics" and "--enable-metrics" in self.args:
            reply(writer, 200, self.metrics(), "text/plain; version=0.0.4")
            self.access(method, path, 200, writer)
        elif path == "/generate" and method == "POST":
            self.access(method, path, 200, writer)
            await self.generate(body, writer)
        else:
            reply(writer, 404, b"")
            self.access(method, path, 404, writer)

    def metrics(self) -> bytes:
        """SGLang's /metrics series (runs-facts b.4), written by prometheus_client as SGLang does."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

        registry = CollectorRegistry()
        labels = {"model_name": str(self.args.get("--model-path", "")), "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
        for name, value in (("num_running_reqs", self.active), ("num_queue_reqs", 0), ("token_usage", min(0.99, self.active * 0.004)),
                            ("gen_throughput", self.last_throughput), ("spec_accept_length", self.last_accept)):
            Gauge(f"sglang:{name}", name, list(labels), registry=registry).labels(**labels).set(value)
        for name, value in (("generation_tokens", self.total_tokens), ("spec_verify_calls", self.total_verifies)):
            Counter(f"sglang:{name}", name, list(labels), registry=registry).labels(**labels).inc(value)
        live = "\n".join(line for name, lines in families(generate_latest(registry).decode()).items()
                         if not name.endswith("_created") for line in lines)  # SGLang serves no _created series
        return with_recorded(live, _at_rest(), RECORDED_MODEL,
                             str(self.args.get("--model-path", ""))).encode()

    def _decode_step(self, tokens: int) -> None:
        """SGLang logs a `Decode batch` line every 40 decode steps (0.5.x wording)."""
        self.steps += 1
        self.window_steps += 1
        self.window_tokens += tokens
        self.total_tokens += tokens
        self.total_verifies += 1
        if self.steps % 40 == 0:
            elapsed = max(1e-6, time.monotonic() - self.window_started)
            accept = self.window_tokens / self.window_steps
            self.last_accept, self.last_throughput = accept, self.window_tokens / elapsed
            spec = f"accept len: {accept:.2f}, accept rate: {min(1.0, (accept - 1) / max(1, self.model.steps)):.2f}, " \
                if self.model.speculative else ""
            stamp(f"Decode batch, #running-req: {self.active}, #token: {self.active * 600}, token usage: "
                  f"{min(0.99, self.active * 0.004):.2f}, {spec}cuda graph: True, gen throughput (token/s): "
                  f"{self.window_tokens / elapsed:.2f}, #queue-req: 0")
            self.window_tokens = self.window_steps = 0
            self.window_started = time.monotonic()

    async def generate(self, body: dict, writer) -> None:
        max_tokens = int((body.get("sampling_params") or {}).get("max_new_tokens", 32))
        speculative = self.model.speculative
        send = event_stream(writer)

        start = time.perf_counter()
        self.active += 1
        if self.active == 1:
            self.gpus_busy(True)
        try:
            await self._stream(max_tokens, speculative, start, writer, send)
        finally:
            self.active -= 1
            if not self.active:
                self.gpus_busy(False)

    async def _stream(self, max_tokens: int, speculative: bool, start: float, writer, send) -> None:
        await asyncio.sleep(0.04)  # prefill
        stamp(f"Prefill batch, #new-seq: 1, #new-token: 24, #cached-token: 0, token usage: {min(0.99, self.active * 0.004):.2f}, "
              f"#running-req: {self.active - 1}, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput "
              f"(token/s): {24 / 0.04:.2f}")
        produced = steps = 0
        text = ""
        while produced < max_tokens:
            await asyncio.sleep(self.model.step_seconds(self.active))
            while self.control().get("hang"):
                await asyncio.sleep(0.2)  # stuck: no decode step, no line, requests still open
            drafted = self.model.tokens_per_step() if self.control().get("draft", True) else 1
            step = min(drafted, max_tokens - produced)
            self._decode_step(step)
            produced += step
            steps += 1
            text += " ".join(WORDS[(produced + i) % len(WORDS)] for i in range(step)) + " "
            meta = {"prompt_tokens": 24, "completion_tokens": produced, "e2e_latency": time.perf_counter() - start,
                    "finish_reason": {"type": "length", "length": max_tokens} if produced >= max_tokens else None}
            if speculative:
                meta["spec_verify_ct"] = steps
                meta["spec_accept_length"] = produced / steps
            send(json.dumps({"text": text, "meta_info": meta, "index": 0}))
            await writer.drain()
        send("[DONE]")
        writer.write(b"0\r\n\r\n")


def register_gpus(tp: int, name: str = "sglang::scheduler"):
    """Tell the demo's nvidia-smi this process holds memory on GPUs 0..tp-1 (gone with the process).  Returns
    busy(flag): the GPUs replay the recorded busy H200 while requests run, its idle one otherwise (an idle
    server drew 694 W at 100 % in the demo)."""
    live = os.environ.get("COCKPIT_DEMO_LIVE_DIR")
    if not live:
        return lambda _flag: None
    os.makedirs(live, exist_ok=True)
    path = os.path.join(live, f"{os.getpid()}.json")

    def busy(flag: bool) -> None:
        with open(path + ".tmp", "w") as handle:
            json.dump({"pid": os.getpid(), "gpus": list(range(tp)), "used_memory": MEMORY_PER_GPU_MIB, "name": name,
                       "busy": flag}, handle)
        os.replace(path + ".tmp", path)

    busy(False)

    def forget(*_args) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os._exit(0)

    signal.signal(signal.SIGTERM, forget)
    atexit.register(_unlink_if_there, path)
    return busy


def _unlink_if_there(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _version, text, parser = release()
    if "-h" in argv or "--help" in argv:
        print(text, end="")
        return 0
    if parser is not None:
        parser.parse_args(argv)  # the release's own parser: its usage and error, exit 2, as the real one
    values, unknown = parse(argv, text)
    usage = text.split("\n\n", 1)[0]
    if unknown:
        sys.stderr.write(f"{usage}\n{PROG}: error: unrecognized arguments: {' '.join(unknown)}\n")
        return 2
    if "--model-path" not in values:
        sys.stderr.write(f"{usage}\n{PROG}: error: the following arguments are required: --model-path/--model\n")
        return 2
    port = int(values.get("--port", 30000))
    stamp(f"server_args=ServerArgs(model_path={values['--model-path']!r}, port={port}) [cockpit DEMO]")
    tp = max(1, _int(values.get("--tp-size"), 1))
    stamp("Load weight begin. avail mem=139.10 GB")
    time.sleep(0.8)
    gpus_busy = register_gpus(tp)
    stamp(f"Load weight end. elapsed=0.80 s, type=LlamaForCausalLM, avail mem=121.60 GB, mem usage={140 / tp:.2f} GB.")
    # the start-up's lines as a real 0.5.11 printed them, in its order (tests/fixtures/gpu-engines/sglang-0.5.11-h100)
    stamp("KV Cache is allocated. #tokens: 1048576, K size: 50.00 GB, V size: 50.00 GB")
    stamp("Memory pool end. avail mem=21.60 GB")
    stamp("Capture cuda graph begin. This can take up to several minutes. avail mem=21.60 GB")
    time.sleep(0.6)
    stamp("Capture cuda graph end. Time elapsed: 0.60 s. mem usage=1.20 GB. avail mem=20.40 GB.")
    server = DemoServer(values)
    server.gpus_busy = gpus_busy
    if server.model.speculative:  # the draft's own: its weights, its KV cache, its graphs (0.5.11's order)
        stamp("Load weight begin. avail mem=20.40 GB")
        stamp("Load weight end. elapsed=0.02 s, type=LlamaForCausalLMEagle3, avail mem=19.40 GB, mem usage=1.00 GB.")
        stamp("KV Cache is allocated. #tokens: 1048576, K size: 0.50 GB, V size: 0.50 GB")
        stamp("Memory pool end. avail mem=18.40 GB")
        stamp("Capture draft cuda graph begin. This can take up to several minutes. avail mem=18.40 GB")
        stamp("Capture draft cuda graph end. Time elapsed: 0.30 s. mem usage=0.06 GB. avail mem=18.34 GB.")
        stamp("Capture draft extend cuda graph begin. This can take up to several minutes. avail mem=18.34 GB")
        stamp("Capture draft extend cuda graph end. Time elapsed: 0.10 s. mem usage=0.04 GB. avail mem=18.30 GB.")
    stamp(f"max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests="
          f"{_int(values.get('--max-running-requests'), 48)}, context_len={_int(values.get('--context-length'), 131072)}, "
          "available_gpu_mem=20.34 GB")
    stamp(f"INFO:     Started server process [{os.getpid()}]")
    stamp("INFO:     Waiting for application startup.")
    signal.signal(signal.SIGINT, shut_down)
    signal.signal(signal.SIGTERM, terminated)

    async def run() -> None:
        asyncio.ensure_future(watch_parent())
        listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=256)
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, scheduler_killed)
        stamp("INFO:     Application startup complete.")
        stamp(f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
        await asyncio.sleep(0.5)
        server.ready = True
        stamp("The server is fired up and ready to roll!")
        async with listener:
            await listener.serve_forever()

    asyncio.run(run())
    return 0


def shut_down(_signum: int, _frame) -> None:
    """SIGINT (a Ctrl-C; the cockpit's plan stop): uvicorn's words as a real 0.5.11 logged them, exit status 0."""
    for line in ("INFO:     Shutting down", "INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete.",
                 f"INFO:     Finished server process [{os.getpid()}]"):
        stamp(line)
    os._exit(0)


def terminated(_signum: int, _frame) -> None:
    """SIGTERM (the cockpit's stop, a `kill`): a real 0.5.11's handler logs that it drains, its tokenizer manager says
    how many requests remain and then ends its whole process tree, its own process included (its source:
    tokenizer_manager.py; to a whole process group the recording shows its detokenizer ending with -15 first)."""
    stamp("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
    stamp("Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].")
    os.kill(os.getpid(), signal.SIGKILL)  # kill_process_tree(os.getpid(), include_parent=True)


def scheduler_killed() -> None:
    """SIGUSR2 plays its scheduler killed with SIGKILL (a real 0.5.11's A-serve.log): the watchdog's line, the SIGQUIT
    handler's, and the server gone (no shutdown lines: SGLang kills its own process tree)."""
    stamp(f"Subprocess scheduler_0 (pid={os.getpid() + 1}) crashed with exit code -9. Triggering SIGQUIT for cleanup...")
    stamp("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    os.kill(os.getpid(), signal.SIGKILL)  # kill_process_tree(os.getpid()): the server's own process too


if __name__ == "__main__":
    sys.exit(main())
