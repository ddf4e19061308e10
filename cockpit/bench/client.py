"""Streaming benchmark client for SGLang's native /generate and its OpenAI-compatible route.

Per request it records the start, every chunk's arrival with the server's cumulative
completion_tokens, the first chunk that carries a generated token (TTFT), the end, the finish
reason, in-stream errors, and the speculative fields.  Derived figures follow the method the
serving benchmarks agree on (field-notes): ITL spreads each gap over the chunk's token delta.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from cockpit.hosts.http import HttpError, Opener, default_opener, post_sse, split_url


@dataclass
class RequestRecord:
    index: int
    start: float = 0.0
    first_token: float | None = None
    end: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)  # cumulative completion tokens at each chunk
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.end is not None and self.finish_reason is not None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.start

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.start

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2e is None or self.completion_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.completion_tokens - 1)

    def itls(self) -> list[float]:
        """Inter-token latencies: each chunk's gap spread evenly over the tokens it brought."""
        out: list[float] = []
        for i in range(1, len(self.chunk_times)):
            delta = self.chunk_tokens[i] - self.chunk_tokens[i - 1]
            if delta <= 0:
                continue
            gap = self.chunk_times[i] - self.chunk_times[i - 1]
            out.extend([gap / delta] * delta)
        return out

    def chunk_latencies(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def accept_length(self) -> float | None:
        if self.spec_verify_ct:
            return self.completion_tokens / self.spec_verify_ct
        return None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ttft=self.ttft, e2e=self.e2e, tpot=self.tpot, accept_length=self.accept_length, ok=self.ok)
        return data


def _finish(reason: Any) -> str | None:
    if reason is None:
        return None
    if isinstance(reason, dict):
        return str(reason.get("type") or reason)
    return str(reason)


APIS = ("sglang", "openai")  # the HTTP APIs a benchmark speaks: SGLang's /generate, the OpenAI chat API


async def run_request(opener: Opener, endpoint: str, api: str, messages: list[dict], max_tokens: int, temperature: float,
                      record: RequestRecord, extra: dict | None = None, on_event=None) -> RequestRecord:
    loop = asyncio.get_running_loop()
    if api == "sglang":
        text = "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages) + "\nassistant:"
        url = endpoint.rstrip("/") + "/generate"
        body: dict[str, Any] = {"text": text, "stream": True,
                                "sampling_params": {"max_new_tokens": max_tokens, "temperature": temperature, "ignore_eos": True}}
    else:
        url = endpoint.rstrip("/") + "/v1/chat/completions"
        body = {"model": "default", "messages": messages, "max_tokens": max_tokens, "temperature": temperature, "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True}, "ignore_eos": True}
    if extra:
        body.update(extra)
    record.start = loop.time()
    openai_tokens = 0
    try:
        async for arrived, data in post_sse(opener, url, body):
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if not isinstance(event, dict):
                record.error = f"the server sent an event that is not a JSON object: {data[:80]!r}"
                break
            if on_event is not None:
                on_event(arrived, event)
            if "error" in event and event["error"]:
                error = event["error"]
                record.error = str(error.get("message") if isinstance(error, dict) else error)
                break
            if api == "sglang":
                meta = event.get("meta_info") or {}
                tokens = int(meta.get("completion_tokens") or 0)
                record.prompt_tokens = meta.get("prompt_tokens", record.prompt_tokens)
                if meta.get("spec_verify_ct") is not None:
                    record.spec_verify_ct = int(meta["spec_verify_ct"])
                if meta.get("spec_accept_length") is not None:
                    record.spec_accept_length = float(meta["spec_accept_length"])
                finish = _finish(meta.get("finish_reason"))
            else:
                usage = event.get("usage") or {}
                choices = event.get("choices") or []
                delta = choices[0].get("delta", {}) if choices else {}
                has_token = bool(delta.get("content") or delta.get("reasoning_content"))
                if usage.get("completion_tokens") is not None:
                    tokens = int(usage["completion_tokens"])
                    record.prompt_tokens = usage.get("prompt_tokens", record.prompt_tokens)
                    details = (usage.get("sglext") or {}).get("spec_tokens_details") or {}
                    if details.get("spec_verify_ct") is not None:
                        record.spec_verify_ct = int(details["spec_verify_ct"])
                else:
                    tokens = openai_tokens + (1 if has_token else 0)
                if not has_token and choices:
                    tokens = openai_tokens  # a role-only chunk carries no token
                if not choices:  # the usage-only closing chunk
                    record.completion_tokens = max(record.completion_tokens, tokens)
                    continue
                openai_tokens = tokens
                finish = _finish(choices[0].get("finish_reason"))
            if tokens > record.completion_tokens:
                if record.first_token is None:
                    record.first_token = arrived
                record.chunk_times.append(arrived)
                record.chunk_tokens.append(tokens)
                record.completion_tokens = tokens
            if finish:
                record.finish_reason = finish
        record.end = loop.time()
        if record.error is None and record.finish_reason is None:
            record.error = "the stream ended without a finish reason (aborted?)"
    except HttpError as exc:
        record.error = str(exc)
        record.end = loop.time()
    except (OSError, asyncio.IncompleteReadError, ValueError, ConnectionError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
        record.end = loop.time()
    except (TypeError, AttributeError, KeyError, IndexError) as exc:
        record.error = f"malformed event from the server ({type(exc).__name__}: {exc})"
        record.end = loop.time()
    return record


@dataclass
class Workload:
    prompts: list[list[dict]]  # chat messages per prompt
    requests: int = 64
    concurrency: int = 8
    max_tokens: int = 256
    temperature: float = 0.0
    warmup: int | None = None  # default: one request per concurrent stream


async def run_closed_loop(endpoint: str, api: str, workload: Workload, opener: Opener = default_opener,
                          progress=None) -> tuple[list[RequestRecord], float, float]:
    """`concurrency` streams, each sending its next request when the last one ends (closed loop).
    Warm-up requests run first, at the same concurrency, and are kept out of the figures.
    Returns (records, start of the measured window, end of it)."""
    loop = asyncio.get_running_loop()
    warmup = workload.concurrency if workload.warmup is None else workload.warmup
    total = warmup + workload.requests
    records: list[RequestRecord] = []
    next_index = 0
    window: list[float] = []

    async def worker() -> None:
        nonlocal next_index
        while next_index < total:
            index = next_index
            next_index += 1
            messages = workload.prompts[index % len(workload.prompts)]
            record = RequestRecord(index=index, warmup=index < warmup)
            if index == warmup:
                window.append(loop.time())
            await run_request(opener, endpoint, api, messages, workload.max_tokens, workload.temperature, record)
            records.append(record)
            if progress is not None:
                progress(len(records), total)

    await asyncio.gather(*(worker() for _ in range(workload.concurrency)))
    measured = [r for r in records if not r.warmup]
    start = window[0] if window else min((r.start for r in measured), default=loop.time())
    end = max((r.end or r.start for r in measured), default=start)
    return sorted(records, key=lambda r: r.index), start, end


async def probe_endpoint(endpoint: str, opener: Opener = default_opener, timeout: float = 5.0) -> None:
    """One request before a benchmark: does an HTTP server answer there?  Raises CockpitError with
    what the user can do (nothing listens, not HTTP, no answer) so no run is measured or stored."""
    from cockpit.hosts.http import BadReply, request
    from cockpit.errors import CockpitError

    host, port, path = split_url(endpoint)
    where = f"{host}:{port}"
    try:
        await request(opener, "GET", f"http://{where}{path}/health", timeout=timeout)
    except ConnectionRefusedError:
        raise CockpitError(f"nothing listens on {where} (connection refused): is the server up? "
                           "`cockpit plan show` and the server log say") from None
    except asyncio.TimeoutError:
        raise CockpitError(f"{where} did not answer within {timeout:g} s: a firewall, or a server that hangs") from None
    except BadReply as exc:
        raise CockpitError(f"{where} is not an HTTP server ({exc})") from None
    except OSError as exc:
        raise CockpitError(f"cannot reach {where}: {exc.strerror or exc}") from None

