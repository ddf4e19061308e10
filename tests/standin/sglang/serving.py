"""STAND-IN for a serving SGLang (see __init__.py): an asyncio HTTP server that streams in SGLang's
real wire formats with scripted timings.

/generate (native): `data: {"text": CUMULATIVE, "meta_info": {...}, "index": 0}` events, then
`data: [DONE]`; meta_info carries prompt_tokens, completion_tokens (cumulative), finish_reason,
e2e_latency and, with speculation, spec_verify_ct and spec_accept_length.
/v1/chat/completions: OpenAI chunks (a role-only first chunk, content deltas), `usage` on every
chunk when stream_options.continuous_usage_stats, a usage-only chunk at the end when include_usage.

Scenario (JSON, from SGLANG_STANDIN or the request): ttft_ms, itl_ms (per chunk), chunk_tokens (a
list cycled: tokens per chunk; under speculation each chunk is one verify step), error_after
(chunks before an in-stream error), abort_after (chunks before the connection is cut), model (true:
acceptance and step time from the demo's model of speculative decoding, cockpit/demo/specmodel.py,
so acceptance grows with depth and the best depth depends on concurrency).
"""

from __future__ import annotations

import asyncio
import json
import time

WORDS = ("the", "draft", "model", "proposes", "tokens", "and", "the", "target", "verifies", "them", "in", "one", "pass")


def _tokens_per_chunk(scenario: dict, args: dict) -> list[int]:
    pattern = scenario.get("chunk_tokens")
    if pattern:
        return [int(n) for n in pattern]
    draft = args.get("--speculative-num-draft-tokens")
    if draft:  # a plausible acceptance: longer chains accept more, with diminishing returns
        depth = int(draft)
        return [max(1, min(depth, n)) for n in (3, 2, 4, 3, 1, 5, 3, 2)]
    return [1]


def _model(args: dict):
    from cockpit.demo.specmodel import SpecModel

    steps = int(args.get("--speculative-num-steps") or 0) if args.get("--speculative-algorithm") else 0
    topk = int(args.get("--speculative-eagle-topk") or 1)
    draft = int(args.get("--speculative-num-draft-tokens") or steps + 1)
    return SpecModel(steps, topk, steps + 1 if topk == 1 and steps else draft, seed=steps * 100 + topk)


class Serving:
    def __init__(self, scenario: dict, args: dict):
        self.scenario = scenario
        self.args = args
        self.ready = False
        self.requests = 0
        self.active = 0
        self.model = _model(args) if scenario.get("model") else None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            if not request_line:
                return
            method, path, _ = request_line.decode("latin-1").split(" ", 2)
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            await self.route(method, path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def _reply(self, writer, status: int, payload: bytes = b"", kind: str = "application/json") -> None:
        reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable", 400: "Bad Request"}.get(status, "OK")
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(payload)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + payload)

    async def route(self, method: str, path: str, body: bytes, writer) -> None:
        if path in ("/health", "/health_generate"):
            self._reply(writer, 200 if self.ready else 503)
        elif path in ("/server_info", "/get_server_info"):
            info = {k.lstrip("-").replace("-", "_"): v for k, v in self.args.items()}
            info["internal_states"] = [{"avg_spec_accept_length": 2.95}]
            self._reply(writer, 200, json.dumps(info).encode())
        elif path == "/v1/models":
            self._reply(writer, 200, json.dumps({"object": "list", "data": [{"id": self.args.get("--model-path", "standin"),
                                                                               "object": "model"}]}).encode())
        elif path == "/flush_cache":
            self._reply(writer, 200, b"ok", "text/plain")
        elif path == "/generate" and method == "POST":
            await self.stream(json.loads(body or b"{}"), writer, openai=False)
        elif path == "/v1/chat/completions" and method == "POST":
            await self.stream(json.loads(body or b"{}"), writer, openai=True)
        else:
            self._reply(writer, 404)
        await writer.drain()

    async def stream(self, request: dict, writer, openai: bool) -> None:
        self.requests += 1
        self.active += 1
        try:
            await self._stream(request, writer, openai)
        finally:
            self.active -= 1

    async def _stream(self, request: dict, writer, openai: bool) -> None:
        scenario = {**self.scenario, **(request.get("standin") or {})}
        if openai:
            max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
            options = request.get("stream_options") or {}
        else:
            max_tokens = int((request.get("sampling_params") or {}).get("max_new_tokens", 16))
            options = {}
        speculative = bool(self.args.get("--speculative-algorithm"))
        pattern = _tokens_per_chunk(scenario, self.args) if speculative else [int(n) for n in scenario.get("chunk_tokens", [1])]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")

        def send(event: dict | str) -> None:
            if isinstance(event, dict):
                event["standin_sent"] = time.monotonic()  # when this chunk left (the truth the client is held to)
            data = ("data: " + (event if isinstance(event, str) else json.dumps(event)) + "\n\n").encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        start = time.perf_counter()
        prompt_tokens = 12
        if openai:
            send({"id": "standin", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
            await writer.drain()
        await asyncio.sleep(float(scenario.get("ttft_ms", 20)) / 1000.0)
        produced = verify = 0
        text = ""
        chunk = 0
        while produced < max_tokens:
            if scenario.get("abort_after") is not None and chunk >= int(scenario["abort_after"]):
                writer.transport.abort()
                return
            if scenario.get("error_after") is not None and chunk >= int(scenario["error_after"]):
                send({"error": {"message": "standin: scheduler aborted the request", "code": 500}})
                send("[DONE]")
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return
            if self.model is not None:
                await asyncio.sleep(self.model.step_seconds(self.active))
                step = min(self.model.tokens_per_step(), max_tokens - produced)
            else:
                step = min(pattern[chunk % len(pattern)], max_tokens - produced)
            produced += step
            verify += 1
            piece = " ".join(WORDS[(produced - step + i) % len(WORDS)] for i in range(step)) + " "
            text += piece
            finished = produced >= max_tokens
            if openai:
                event = {"id": "standin", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": "length" if finished else None}]}
                if options.get("continuous_usage_stats"):
                    event["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": produced, "total_tokens": prompt_tokens + produced}
                send(event)
            else:
                meta = {"id": "standin", "prompt_tokens": prompt_tokens, "completion_tokens": produced, "cached_tokens": 0,
                        "finish_reason": {"type": "length", "length": max_tokens} if finished else None,
                        "e2e_latency": time.perf_counter() - start}
                if speculative:
                    meta["spec_verify_ct"] = verify
                    meta["spec_accept_length"] = produced / verify
                send({"text": text, "meta_info": meta, "index": 0})
            await writer.drain()
            chunk += 1
            if not finished and self.model is None:
                await asyncio.sleep(float(scenario.get("itl_ms", 10)) / 1000.0)
        if openai and options.get("include_usage"):
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": produced, "total_tokens": prompt_tokens + produced}
            if speculative:
                usage["sglext"] = {"spec_tokens_details": {"spec_verify_ct": verify}}
            send({"id": "standin", "object": "chat.completion.chunk", "choices": [], "usage": usage})
        send("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def serve(port: int, scenario: dict, args: dict, on_listening=None) -> None:
    serving = Serving(scenario, args)
    server = await asyncio.start_server(serving.handle, "127.0.0.1", port, backlog=1024)
    if on_listening is not None:
        await on_listening(serving)
    async with server:
        await server.serve_forever()
