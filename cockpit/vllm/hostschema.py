"""A host's own vLLM: its version and its `vllm serve` flags, read there (`--help`, or `--help=all` where
the plain help is a summary, as from 0.11), cached per host and version as SGLang's are."""

from __future__ import annotations

import json
import re

from cockpit.errors import CockpitError
from cockpit.paths import atomic_write
from cockpit.sglang.hostschema import cache_dir
from cockpit.sglang.schema import FlagSchema, parse_argparse_text

VERSION_ARGV = ["-c", "import vllm; print(vllm.__version__)"]
SERVE = ["-m", "vllm.entrypoints.cli.main", "serve"]


async def host_vllm(transport, python: str = "python3", refresh: bool = False) -> tuple[str, FlagSchema]:
    """(the host's vLLM version, its flags); CockpitError when vLLM is not importable there."""
    version = await transport.run([python, *VERSION_ARGV], timeout=180)
    lines = version.stdout.strip().splitlines()
    if version.exit_status != 0 or not lines:
        last = (version.output.strip().splitlines() or ["no output"])[-1]
        raise CockpitError(f"{transport.name}: vLLM is not importable by {python}: {last[:200]}")
    number = lines[-1].strip()
    path = cache_dir().parent / "vllm-schema" / \
        f"{re.sub(r'[^A-Za-z0-9_.-]', '_', transport.name)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', number)}.json"
    if path.exists() and not refresh:
        try:
            return number, FlagSchema.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):
            pass
    text = ""
    for asked in ("--help", "--help=all"):  # 0.11 on: the plain help is a summary of groups
        helped = await transport.run([python, *SERVE, asked], timeout=300)
        if helped.exit_status == 0 and "usage:" in helped.stdout:
            text = helped.stdout
            if "--speculative-config" in text:
                break
    if "--speculative-config" not in text:
        raise CockpitError(f"{transport.name}: `{python} -m vllm.entrypoints.cli.main serve --help` gave no flags to check against"
                           + (f": {text.strip()[-200:]}" if text else ""))
    schema = parse_argparse_text(text)
    schema.version = number
    atomic_write(path, json.dumps(schema.to_json()))
    return number, schema
