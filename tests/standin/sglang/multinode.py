"""STAND-IN for SGLang's multi-node start-up (scale-facts §1.2-1.7), for tests: a real rendezvous over
TCP at `--dist-init-addr`, with torch's and SGLang's real texts.

- Rank 0 listens at the dist-init address and waits `--dist-timeout` seconds for the other nnodes - 1
  nodes to connect; if some never do: `torch.distributed.DistStoreError: Timed out after N seconds
  waiting for clients. J/M clients joined.` and exits 1.
- A rank >= 1 connects to rank 0, retrying with c10d's warning; if rank 0 never answers:
  `[c10d] The client socket has timed out after Nms while trying to connect to (host, port).` and
  exits 1.
- Joined: `Init torch distributed ends`, `Custom allreduce is disabled because this process group
  spans across nodes.`  With `--gated-launch-port P` (0.5.23), rank 0 serves `POST /gate/activate` on
  its host at P, every node logs `Gated launch waiting for activation. rank=<r>` and waits; rank 0
  broadcasts the activation over the rendezvous links.
- The rendezvous links stay open as the process group: when a peer's link drops (the peer died),
  the others log NCCL's watchdog timeout and keep running, as the real rank 0 does (it does not exit).
- Rank >= 1 logs `Dummy health check server started in background thread at host:port` (every
  "node" of a test shares this one machine, where rank 0 holds the port: the stub binds nothing).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time


def stamp(message: str, rank: int | None = None) -> None:
    prefix = time.strftime("[%Y-%m-%d %H:%M:%S") + (f" TP{rank * 8}" if rank is not None else "") + "] "
    print(prefix + message, flush=True)


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


async def _watch_links(links: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], rank: int, on_message) -> None:
    """Messages from the peers; a link that closes is a dead peer: NCCL's watchdog text, then keep running."""
    async def read(reader, peer):
        while True:
            line = await reader.readline()
            if not line:
                await asyncio.sleep(1.0)
                print(f"[rank{rank * 8}]:[E{time.strftime('%m%d %H:%M:%S')}.000000 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 "
                      f"Rank {rank * 8}] Timeout at NCCL work: 32, last enqueued NCCL work: 32, last completed NCCL work: 31.", flush=True)
                print(f"[rank{rank * 8}]:[E{time.strftime('%m%d %H:%M:%S')}.000000 ProcessGroupNCCL.cpp:630] [Rank {rank * 8}] Some NCCL "
                      "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
                      "might run on corrupted/incomplete data.", flush=True)
                return
            on_message(peer, line.decode().strip())

    await asyncio.gather(*(read(reader, peer) for peer, (reader, _) in enumerate(links)))


async def rendezvous(values: dict) -> tuple[int, list, asyncio.Event] | None:
    """Join the group; returns (rank, links, activated) or None after printing the failure (exit 1)."""
    nnodes = int(values.get("--nnodes", 1))
    rank = int(values.get("--node-rank", 0))
    addr = values.get("--dist-init-addr") or values.get("--nccl-init-addr")
    timeout = float(values.get("--dist-timeout") or 600)
    host, port = _split(addr)
    stamp("Init torch distributed begin.", rank)
    started = time.monotonic()
    links: list = []
    activated = asyncio.Event()
    if rank == 0:
        joined = asyncio.Event()

        async def accept(reader, writer):
            links.append((reader, writer))
            if len(links) == nnodes - 1:
                joined.set()

        server = await asyncio.start_server(accept, host, port, reuse_address=True)
        try:
            await asyncio.wait_for(joined.wait(), timeout)
        except asyncio.TimeoutError:
            print("Traceback (most recent call last):", flush=True)
            print('  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store',
                  flush=True)
            print(f"torch.distributed.DistStoreError: Timed out after {int(timeout) + 1} seconds waiting for clients. "
                  f"{(len(links) + 1) * 8}/{nnodes * 8} clients joined.", flush=True)
            return None
        server.close()
    else:
        if os.environ.get("SGLANG_STANDIN_NO_JOIN"):  # scenario: this node never gets to the rendezvous
            await asyncio.Event().wait()
        delay, attempt = 0.2, 0
        while True:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
                links.append((reader, writer))
                break
            except (OSError, asyncio.TimeoutError) as exc:
                if time.monotonic() - started > timeout:
                    print(f"[W{time.strftime('%m%d %H:%M:%S')}.000000 socket.cpp:752] [c10d] The client socket has timed out after "
                          f"{int(timeout * 1000)}ms while trying to connect to ({host}, {port}).", flush=True)
                    print("torch.distributed.DistNetworkError: The client socket has timed out after "
                          f"{int(timeout * 1000)}ms while trying to connect to ({host}, {port}).", flush=True)
                    return None
                print(f"[W{time.strftime('%m%d %H:%M:%S')}.000000 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to "
                      f"host {host}:{port} - retrying (try={attempt}, timeout={int(timeout * 1000)}ms, delay={int(delay * 1000)}ms): "
                      f"{exc}", flush=True)
                attempt += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
    stamp(f"Init torch distributed ends. elapsed={time.monotonic() - started:.2f} s, mem usage=0.09 GB", rank)
    stamp("Custom allreduce is disabled because this process group spans across nodes.", rank)

    def on_message(peer, text):
        if text == "activate" and not activated.is_set():
            activated.set()
            if rank == 0:
                return
    asyncio.ensure_future(_watch_links(links, rank, on_message))
    return rank, links, activated


async def gated(values: dict, rank: int, links: list, activated: asyncio.Event) -> None:
    """0.5.23's gated launch: wait before any GPU memory until POST /gate/activate reaches rank 0."""
    port = int(values["--gated-launch-port"])
    host, _ = _split(values.get("--dist-init-addr") or values.get("--nccl-init-addr"))
    started = time.monotonic()
    if rank == 0:
        async def handle(reader, writer):
            request = (await reader.readline()).decode("latin-1")
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            if request.startswith("POST /gate/activate"):
                activated.set()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")
            elif request.startswith("GET /health"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()

        await asyncio.start_server(handle, host, port, reuse_address=True)
        stamp(f"Gated launch control server started on {host}:{port}", rank)
    stamp(f"Gated launch waiting for activation. rank={rank * 8}", rank)
    while not activated.is_set():
        try:
            await asyncio.wait_for(activated.wait(), 10)
        except asyncio.TimeoutError:
            stamp(f"Gated launch still waiting for activation. rank={rank * 8} elapsed={int(time.monotonic() - started)} s", rank)
    if rank == 0:
        for _, writer in links:
            writer.write(b"activate\n")
            await writer.drain()
    stamp(f"Gated launch activated. elapsed={time.monotonic() - started:.2f} s", rank)


async def dummy_health(values: dict, rank: int) -> None:
    """A rank >= 1 node: its stub /health answers 200 whatever the model does (only rank 0's means
    anything).  The "nodes" of a test share one machine, where rank 0 holds the port: the stub's line
    is logged, the port is not bound."""
    bind = values.get("--host", "127.0.0.1")
    port = int(values.get("--port", 30000))
    stamp(f"Dummy health check server started in background thread at {bind}:{port}", rank)


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False
