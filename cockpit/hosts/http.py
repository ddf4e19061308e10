"""A small streaming HTTP/1.1 client over asyncio streams, for SSE responses.

Small on purpose: the benchmark client must cost less CPU per token than the server's own
benchmark, and it runs over any (reader, writer) pair, so it also works through an SSH channel
(transport.open_tcp) when the server listens on the GPU host's loopback only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

Opener = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class HttpError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


def normalize_endpoint(text: str) -> str:
    """An endpoint as the user wrote it, made a URL: `127.0.0.1:30000` is `http://127.0.0.1:30000`.
    Raises ValueError, naming what is wrong, for what cannot be one (https, no host, a bad port)."""
    text = text.strip()
    if not text:
        raise ValueError("the endpoint is empty: give one, e.g. http://127.0.0.1:30000")
    url = text if "://" in text else f"http://{text}"
    parts = urlsplit(url)
    if parts.scheme == "https":
        raise ValueError(f"{text}: https is not supported (SGLang serves plain HTTP); reach a remote server through "
                         "an SSH tunnel or the runbook's launch step")
    if parts.scheme != "http":
        raise ValueError(f"{text}: only http:// endpoints are supported")
    try:
        _ = parts.port  # urllib checks the port only when it is asked for
    except ValueError:
        raise ValueError(f"{text}: the port is not a number between 0 and 65535") from None
    if not parts.hostname:
        raise ValueError(f"{text}: no host in the endpoint, e.g. http://127.0.0.1:30000")
    return url.rstrip("/")


def split_url(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", ""):
        raise ValueError(f"only http:// endpoints are supported, not {url}")
    return parts.hostname or "127.0.0.1", parts.port or 80, (parts.path.rstrip("/") or "")


async def default_opener(host: str, port: int):
    return await asyncio.open_connection(host, port, limit=1 << 20)


class BadReply(ConnectionError):
    """What came back is not HTTP (another service on the port, a proxy's garbage, a cut reply)."""


async def _read_headers(reader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection before answering")
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise BadReply(f"not an HTTP reply: {status_line[:60]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _body_chunks(reader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    try:
        async for chunk in _raw_body_chunks(reader, headers):
            yield chunk
    except ValueError as exc:  # a chunk size or length that is not a number
        raise BadReply(f"malformed HTTP body: {exc}") from None
    except asyncio.IncompleteReadError:
        raise BadReply("the reply was cut off in the middle of a chunk") from None


async def _raw_body_chunks(reader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 65536))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


async def request(opener: Opener, method: str, url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, bytes]:
    host, port, path = split_url(url)
    reader, writer = await asyncio.wait_for(opener(host, port), timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        writer.write(head.encode() + b"\r\n" + payload)
        status, headers = await asyncio.wait_for(_read_headers(reader), timeout)
        data = b"".join([chunk async for chunk in _body_chunks(reader, headers)])
        return status, data
    finally:
        writer.close()


async def post_sse(opener: Opener, url: str, body: Any) -> AsyncIterator[tuple[float, bytes]]:
    """POST a JSON body and yield (arrival time, payload) for every `data:` event of the stream.
    The time is taken when the bytes that complete the event arrive."""
    loop = asyncio.get_running_loop()
    host, port, path = split_url(url)
    reader, writer = await opener(host, port)
    try:
        payload = json.dumps(body).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload
        )
        status, headers = await _read_headers(reader)
        if status != 200:
            data = b"".join([chunk async for chunk in _body_chunks(reader, headers)])
            raise HttpError(status, data.decode("utf-8", "replace"))
        buffer = b""
        async for chunk in _body_chunks(reader, headers):
            now = loop.time()
            buffer += chunk
            while True:
                cut = buffer.find(b"\n\n")
                if cut < 0:
                    break
                event, buffer = buffer[:cut], buffer[cut + 2:]
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        yield now, line[5:].strip()
        if buffer.strip().startswith(b"data:"):
            yield loop.time(), buffer.strip()[5:].strip()
    finally:
        writer.close()
