"""No input makes a parser raise anything but its own clear error (property-based)."""

from __future__ import annotations

import asyncio
import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.config import parse_config
from cockpit.drafter.header import HeaderError, parse_header_bytes
from cockpit.errors import ConfigError
from cockpit.telemetry.smi import GpuStreamAssembler, classify_failure, parse_apps, parse_gpu_line, parse_gpu_table

FIELDS = ["0", "GPU-1", "NVIDIA H200", "00000000:18:00.0", "0", "143771", "120.5", "700.00", "0", "0", "39", "345", "3201", "P0"]
ODD = ["[N/A]", "[Not Supported]", "[Unknown Error]", "ERR!", "", "-1", "1e9", "nan", "12abc", "[GPU is lost]", "\x00", "∞"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.text(max_size=12)), min_size=14, max_size=14))
def test_gpu_lines_with_odd_values(values):
    parse_gpu_line(", ".join(values))
    parse_gpu_line(", ".join(FIELDS[:1] + values[1:]))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_nvidia_smi_outputs(text):
    parse_gpu_table(text)
    parse_apps(text)
    classify_failure(text, None)
    assembler = GpuStreamAssembler()
    for line in text.splitlines():
        assembler.feed(line)
    assembler.flush()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600))
def test_config_files_only_raise_config_errors(text):
    try:
        parse_config(text, "fuzz.toml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.one_of(st.integers(), st.text(max_size=10), st.booleans(),
                                                       st.lists(st.integers(), max_size=3)), max_size=6))
def test_host_tables_with_any_values(table):
    try:
        text = "[hosts.h]\n" + "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in table.items())
        parse_config(text, "fuzz.toml")
    except ConfigError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=10**6))
def test_safetensors_headers(raw, size):
    prefix = struct.pack("<Q", len(raw))
    try:
        parse_header_bytes(prefix, raw, 8 + len(raw) + size)
    except HeaderError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.dictionaries(st.sampled_from(["dtype", "shape", "data_offsets"]),
                                                            st.one_of(st.text(max_size=5), st.lists(st.integers(-5, 50), max_size=3),
                                                                      st.integers(-5, 50))), max_size=4))
def test_safetensors_header_structures(header):
    raw = json.dumps(header).encode()
    try:
        parse_header_bytes(struct.pack("<Q", len(raw)), raw, 8 + len(raw) + 100)
    except HeaderError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=80), st.sampled_from([
    b'{"choices": 5}', b'{"choices": [{"delta": 3}]}', b'{"meta_info": []}', b'{"meta_info": {"completion_tokens": "x"}}',
    b'{"usage": {"completion_tokens": null}, "choices": []}', b'{"error": null}', b'[DONE]', b'{"text": 1}'])), max_size=12))
def test_sse_streams_never_crash_the_client(chunks):
    """Arbitrary bytes from a server: the request ends as a failure or a result, never an exception."""
    from cockpit.bench.client import RequestRecord, run_request

    async def go():
        async def handle(reader, writer):
            await reader.read(65536)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for chunk in chunks:
                writer.write(b"data: " + chunk + b"\n\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            for api in ("sglang", "openai"):
                record = await run_request(lambda h, p: asyncio.open_connection(h, p), f"http://127.0.0.1:{port}", api,
                                           [{"role": "user", "content": "x"}], 8, 0.0, RequestRecord(0))
                assert record.ok or record.error

    asyncio.run(go())


TRAINING_BITS = ["Training Epoch 0:  10%|█  | 40/400 [00:04<00:36, 10.00it/s, loss=", "nan", "inf", "step 5: {'acc_0': ", "}",
                 "Train Epoch [1/2], position 0,  Acc: ", "Eval - Step 3 [4/2], position 1,  Acc: ", "Traceback (most recent call last):",
                 "ValueError: x", "[rank0]: ", "\r", "\n", "\x1b[A", "0.5", "Saved model configuration to ", "exitcode  : -9"]
SERVING_BITS = ["[2026-10-01 10:00:00 TP0] Decode batch, ", "#running-req: ", "accept len: ", "gen throughput (token/s): ", "1.00",
                "nan", ", ", "Prefill batch. ", "[2026-13-45 99:99:99 DP0] Decode batch. ", "\n", "KV cache pool is full. Retract requests."]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(TRAINING_BITS), st.text(max_size=20)), max_size=40))
def test_training_logs(parts):
    from cockpit.runs.parse import TrainingLog

    log = TrainingLog(clock=lambda: 0.0)
    text = "".join(parts)
    log.feed(text.replace("\r", "\n").split("\n"))
    log.peek(text[-200:])
    log.state()
    log.current_flags()
    log.positions()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_event_files(data):
    from cockpit.runs.tfevents import EventReader, encode_record

    reader = EventReader()
    reader.feed(data)
    reader.feed(encode_record(data[:100]))  # a well-framed record holding junk: skipped or read, never raised


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SERVING_BITS), st.text(max_size=20)), max_size=40))
def test_serving_logs(parts):
    from cockpit.serving.live import LiveFigures

    figures = LiveFigures(clock=lambda: 0.0)
    figures.feed("".join(parts).split("\n"))
    figures.feed_metrics("".join(parts))
    figures.feed_server_info({"internal_states": [{"avg_spec_accept_length": "".join(parts)}]})
    figures.to_json()
