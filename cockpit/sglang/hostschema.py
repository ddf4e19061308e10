"""A host's own SGLang flags: `python -m sglang.launch_server --help` run there, cached per host and version."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cockpit.errors import CockpitError
from cockpit.paths import APP, atomic_write
from cockpit.sglang.schema import FlagSchema, parse_argparse_text

VERSION_ARGV = ["-c", "import sglang; print(sglang.__version__)"]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / APP / "sglang-schema"


async def host_schema(transport, python: str = "python3", refresh: bool = False) -> FlagSchema:
    version = await transport.run([python, *VERSION_ARGV], timeout=120)
    if version.exit_status != 0:
        last = (version.output.strip().splitlines() or ["no output"])[-1]
        raise CockpitError(f"{transport.name}: SGLang is not importable by {python}: {last[:200]}")
    number = version.stdout.strip().splitlines()[-1]
    path = cache_dir() / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', transport.name)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', number)}.json"
    if path.exists() and not refresh:
        try:
            return FlagSchema.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):
            pass
    helped = await transport.run([python, "-m", "sglang.launch_server", "--help"], timeout=300)
    if helped.exit_status != 0 or "usage:" not in helped.stdout:
        raise CockpitError(f"{transport.name}: `{python} -m sglang.launch_server --help` failed: {helped.output.strip()[-300:]}")
    schema = parse_argparse_text(helped.stdout)
    schema.version = number
    atomic_write(path, json.dumps(schema.to_json()))
    return schema


DRY_RUN = "import sys; from sglang.srt.server_args import prepare_server_args; prepare_server_args(sys.argv[1:]); print('cockpit: parsed')"


async def dry_run(transport, args: list[str], python: str = "python3", timeout: float = 180.0):
    """SGLang's own parser and post-parse checks on the host, without starting a server:
    returns (accepted?, output lines)."""
    result = await transport.run([python, "-c", DRY_RUN, *args], timeout=timeout)
    lines = result.output.splitlines()
    return result.exit_status == 0 and "cockpit: parsed" in result.stdout, lines
