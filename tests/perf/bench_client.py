"""The benchmark client must not be the bottleneck: CPU per token and the timing error it adds, at
256 concurrent streams against the stand-in server, side by side with SGLang's own client.

Run on demand:
    python tests/perf/bench_client.py [--streams 256] [--requests 512] [--tokens 64] \
        [--sglang-dir DIR --sglang-path PATHS]

--sglang-dir: an unzipped `sglang` wheel (`pip download --no-deps sglang==0.5.6`, then unzip);
--sglang-path: extra PYTHONPATH entries holding the light packages its benchmark imports
(aiohttp, numpy, transformers, tokenizers, ...; see tests/fixtures/README.md for how they were
gathered). A local word-level tokenizer is written for it, so nothing is downloaded.  Without
them, only the cockpit's client is measured.

Both clients run in their own process (CPU counted for that process only), against the same
stand-in server process (tests/standin/sglang/), which stamps each chunk with the monotonic time it
left; the cockpit's client reports arrival - sent (the error it adds) directly; SGLang's client is
judged by how far its reported mean TTFT and ITL lie from the scripted ones.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from harness.standin_sglang import start_standin_sglang  # noqa: E402

OURS = r"""
import asyncio, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from cockpit.bench.client import RequestRecord, run_request
from cockpit.hosts.http import default_opener

endpoint, streams, requests, tokens = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lags = []
records = []

async def main():
    next_index = 0
    async def worker():
        nonlocal next_index
        while next_index < requests:
            index = next_index
            next_index += 1
            record = RequestRecord(index)
            await run_request(default_opener, endpoint, "sglang", [{"role": "user", "content": "hi"}], tokens, 0.0, record,
                              on_event=lambda arrived, event: lags.append(arrived - event.get("standin_sent", arrived)))
            records.append(record)
    await asyncio.gather(*(worker() for _ in range(streams)))

before = resource.getrusage(resource.RUSAGE_SELF)
start = time.monotonic()
asyncio.run(main())
wall = time.monotonic() - start
after = resource.getrusage(resource.RUSAGE_SELF)
ok = [r for r in records if r.ok]
lags.sort()
itl = [x for r in ok for x in r.itls()]
print(json.dumps({
    "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), "wall_s": wall,
    "tokens": sum(r.completion_tokens for r in ok), "failed": len(records) - len(ok),
    "lag_p50_ms": lags[len(lags) // 2] * 1000, "lag_p99_ms": lags[int(len(lags) * 0.99)] * 1000, "lag_max_ms": lags[-1] * 1000,
    "ttft_mean_ms": sum(r.ttft for r in ok) / len(ok) * 1000, "itl_mean_ms": sum(itl) / len(itl) * 1000,
}))
"""


def start_server(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen, str]:
    proc, endpoint = start_standin_sglang({"ttft_ms": ttft_ms, "itl_ms": itl_ms, "chunk_tokens": [1]})
    time.sleep(0.3)
    return proc, endpoint


def write_tokenizer(folder: Path, pythonpath: str) -> bool:
    code = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0}
for word in "the draft model proposes tokens and target verifies them in one pass".split() + [f"w{i}" for i in range(2000)]:
    vocab.setdefault(word, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[UNK]").save_pretrained(sys.argv[1])
"""
    out = subprocess.run([sys.executable, "-c", code, str(folder)], env={**os.environ, "PYTHONPATH": pythonpath},
                         capture_output=True, text=True)
    return out.returncode == 0


def run_sglang(endpoint: str, args, tokenizer: Path) -> dict | None:
    pythonpath = os.pathsep.join([args.sglang_dir, *(args.sglang_path or "").split(os.pathsep)])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", endpoint,
                          "--dataset-name", "random-ids", "--random-input-len", "16", "--random-output-len", str(args.tokens),
                          "--random-range-ratio", "1.0", "--num-prompts", str(args.requests), "--max-concurrency", str(args.streams),
                          "--tokenizer", str(tokenizer), "--disable-tqdm", "--warmup-requests", "0"],
                         env={**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                         cwd=args.sglang_dir)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        print(out.stdout[-1500:], out.stderr[-1500:])
        return None

    def metric(name: str) -> float | None:
        for line in out.stdout.splitlines():
            if line.startswith(name):
                return float(line.split(":")[1].split()[0])
        return None

    return {"cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), "wall_s": wall,
            "tokens": metric("Total generated tokens") or 0, "ttft_mean_ms": metric("Mean TTFT (ms)"),
            "itl_mean_ms": metric("Mean ITL (ms)")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=25.0)
    parser.add_argument("--sglang-dir")
    parser.add_argument("--sglang-path")
    args = parser.parse_args()
    print(f"{args.streams} concurrent streams, {args.requests} requests x {args.tokens} tokens; scripted TTFT {args.ttft_ms} ms, "
          f"ITL {args.itl_ms} ms, one token per chunk (the most events per token)")
    rows = []
    server, endpoint = start_server(args.ttft_ms, args.itl_ms)
    try:
        out = subprocess.run([sys.executable, "-c", OURS, str(ROOT), endpoint, str(args.streams), str(args.requests), str(args.tokens)],
                             capture_output=True, text=True, check=True)
        ours = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(("cockpit", ours))
        if args.sglang_dir:
            with tempfile.TemporaryDirectory() as folder:
                if write_tokenizer(Path(folder), os.pathsep.join([args.sglang_dir, args.sglang_path or ""])):
                    theirs = run_sglang(endpoint, args, Path(folder))
                    if theirs:
                        rows.append(("sglang.bench_serving 0.5.x", theirs))
                else:
                    print("could not write a local tokenizer for SGLang's client (tokenizers/transformers missing)")
    finally:
        server.kill()
        server.wait()
    print(f"\n{'client':<28} {'CPU s':>7} {'tokens':>7} {'CPU us/token':>13} {'TTFT err ms':>12} {'ITL err ms':>11} {'lag p50/p99 ms':>15}")
    base = None
    for name, r in rows:
        per = r["cpu_s"] / max(1, r["tokens"]) * 1e6
        base = base or per
        ttft_err = r["ttft_mean_ms"] - args.ttft_ms if r.get("ttft_mean_ms") is not None else float("nan")
        itl_err = r["itl_mean_ms"] - args.itl_ms if r.get("itl_mean_ms") is not None else float("nan")
        lag = f"{r['lag_p50_ms']:.2f}/{r['lag_p99_ms']:.2f}" if "lag_p99_ms" in r else "-"
        print(f"{name:<28} {r['cpu_s']:>7.2f} {r['tokens']:>7.0f} {per:>13.1f} {ttft_err:>12.3f} {itl_err:>11.3f} {lag:>15}")
    if len(rows) == 2:
        ours_per = rows[0][1]["cpu_s"] / max(1, rows[0][1]["tokens"])
        theirs_per = rows[1][1]["cpu_s"] / max(1, rows[1][1]["tokens"])
        print(f"\nCPU per token, sglang / cockpit: {theirs_per / ours_per:.2f}x")
    print("Target: no more CPU per token than SGLang's client; timing error under 1 ms.")
    print("TTFT err includes connect and request time on both sides; chunk lag is arrival minus the server's send stamp.")


if __name__ == "__main__":
    main()
