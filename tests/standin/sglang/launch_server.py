"""STAND-IN for `python -m sglang.launch_server` (see __init__.py).  Scenario through the
environment variable SGLANG_STANDIN (JSON): {"load_s": 0.3, "warmup_s": 0.5, "crash": null | "gpus_not_clean"}."""

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

HELP = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "help_0.5.23.txt"
PROG = "sglang serve"


def stamp(message):
    print(time.strftime("[%Y-%m-%d %H:%M:%S] ") + message, flush=True)


def usage_block(text):
    lines = []
    for line in text.splitlines():
        if not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def known_options(text):
    return set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", text))


def parse(argv, text):
    known = known_options(text)
    values, unknown, index = {}, [], 0
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
        values[matches[0]] = value if value is not None else True
    return values, unknown


def crash(text, message):
    sys.stderr.write(usage_block(text) + "\n" + f"{PROG}: error: {message}\n")
    sys.stderr.flush()
    sys.exit(2)


def main(argv):
    text = HELP.read_text()
    if "-h" in argv or "--help" in argv:
        print(text, end="")
        return 0
    scenario = json.loads(os.environ.get("SGLANG_STANDIN", "{}") or "{}")
    values, unknown = parse(argv, text)
    if unknown:
        crash(text, "unrecognized arguments: " + " ".join(unknown))
    if "--model-path" not in values:
        crash(text, "the following arguments are required: --model-path/--model")
    port = int(values.get("--port", 30000))
    stamp(f"server_args=ServerArgs(model_path={values['--model-path']!r}, port={port})")
    if int(values.get("--nnodes", 1)) > 1:
        return asyncio.run(multi_node(values, scenario, port))
    stamp("Load weight begin. avail mem=139.10 GB")
    time.sleep(float(scenario.get("load_s", 0.3)))
    if scenario.get("crash") == "gpus_not_clean":
        print("Traceback (most recent call last):", flush=True)
        print('  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 431, in init_torch_distributed', flush=True)
        print("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=110.2", flush=True)
        stamp("Received sigquit from a child process. It usually means the child failed.")
        return 1
    stamp("Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=60.12 GB, mem usage=78.98 GB.")
    stamp("KV Cache is allocated. #tokens: 1048576, KV size: 40.00 GB")
    stamp("Capture cuda graph begin. This can take up to several minutes. avail mem=19.80 GB")
    stamp("Capture cuda graph end. Time elapsed: 0.20 s. mem usage=1.20 GB. avail mem=18.60 GB.")
    from sglang.serving import serve

    async def warm(serving):
        stamp(f"Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
        await asyncio.sleep(float(scenario.get("warmup_s", 0.5)))
        serving.ready = True
        stamp("The server is fired up and ready to roll!")

    asyncio.run(serve(port, scenario, values, warm))
    return 0


async def multi_node(values, scenario, port):
    """One node of a group (multinode.py): rendezvous, the gated launch, then rank 0 serves and the
    others answer /health from a stub."""
    from sglang import multinode

    joined = await multinode.rendezvous(values)
    if joined is None:
        return 1
    rank, links, activated = joined
    if "--gated-launch-port" in values:
        await multinode.gated(values, rank, links, activated)
    stamp("Load weight begin. avail mem=139.10 GB")
    await asyncio.sleep(float(scenario.get("load_s", 0.3)))
    stamp("Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=60.12 GB, mem usage=78.98 GB.")
    if rank == 0:
        from sglang.serving import Serving

        serving = Serving(scenario, values)
        server = await asyncio.start_server(serving.handle, "127.0.0.1", port, backlog=1024)
        stamp(f"Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
        await asyncio.sleep(float(scenario.get("warmup_s", 0.3)))
        serving.ready = True
        stamp("The server is fired up and ready to roll!")
        async with server:
            await server.serve_forever()
    else:
        await multinode.dummy_health(values, rank)
        await asyncio.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
