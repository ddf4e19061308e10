"""A host's own vLLM: its version and its `vllm serve` flags, read there (`--help`, or `--help=all` where
the plain help is a summary, as from 0.11), cached per host and version as SGLang's are."""

from __future__ import annotations

import json

from cockpit.errors import CockpitError
from cockpit.paths import atomic_write
from cockpit.format import shell_words
from cockpit.serving.helpcache import cache_dir, cache_name
from cockpit.serving.helpschema import FlagSchema, parse_argparse_text

VERSION_ARGV = ["-c", "import vllm; print(vllm.__version__)"]
SERVE = ["-m", "vllm.entrypoints.cli.main", "serve"]


async def host_vllm(transport, python: str = "python3", refresh: bool = False, launcher: list[str] | None = None) -> tuple[str, FlagSchema]:
    """(the host's vLLM version, its flags); CockpitError when vLLM is not importable there.  `launcher`: run its
    interpreter that way instead (inside a container image)."""
    prefix = list(launcher) if launcher else [python]
    version = await transport.run([*prefix, *VERSION_ARGV], timeout=300 if launcher else 180)
    lines = version.stdout.strip().splitlines()
    if version.exit_status != 0 or not lines:
        last = (version.output.strip().splitlines() or ["no output"])[-1]
        raise CockpitError(f"{transport.name}: vLLM is not importable by {shell_words(prefix)}: {last[:200]}")
    number = lines[-1].strip()
    path = cache_dir("vllm") / cache_name(transport.name, number, launcher)
    if path.exists() and not refresh:
        try:
            return number, FlagSchema.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):
            pass
    text = ""
    for asked in ("--help", "--help=all"):  # 0.11 on: the plain help is a summary of groups
        helped = await transport.run([*prefix, *SERVE, asked], timeout=300)
        if helped.exit_status == 0 and "usage:" in helped.stdout:
            text = helped.stdout
            if "--speculative-config" in text:
                break
    if "--speculative-config" not in text:
        raise CockpitError(f"{transport.name}: `{shell_words([*prefix, *SERVE, '--help'])}` gave no flags to check against"
                           + (f": {text.strip()[-200:]}" if text else ""))
    schema = parse_argparse_text(text)
    schema.version = number
    atomic_write(path, json.dumps(schema.to_json()))
    return number, schema
