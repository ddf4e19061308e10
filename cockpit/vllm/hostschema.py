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


# What the host's own vLLM takes in --speculative-config, read through its own Python (no server started, no device
# touched): SpeculativeConfig's init fields, its method literal, and whether it refuses an unknown key.
SPEC_FACTS = r"""
import dataclasses, json, re, typing
import vllm
from vllm.config import SpeculativeConfig as S
if dataclasses.is_dataclass(S):
    fields = [f.name for f in dataclasses.fields(S) if f.init]
else:
    fields = sorted(getattr(S, "model_fields", {}))
try:
    hints = typing.get_type_hints(S)
except Exception:
    hints = {}
    for k in reversed(S.__mro__):
        hints.update(getattr(k, "__annotations__", {}))
method = hints.get("method")
names = sorted(set(re.findall(r"'([A-Za-z0-9_\-]+)'", str(method)))) or None
config = getattr(S, "__pydantic_config__", None) or getattr(S, "model_config", None)
pydantic = config is not None or hasattr(S, "__pydantic_fields__")
unknown = "forbidden" if "forbid" in str(config) else ("ignored" if pydantic else "typeerror")
print(json.dumps({"version": vllm.__version__, "spec_fields": fields, "methods": names, "unknown_keys": unknown}))
"""


async def host_spec_facts(transport, python: str = "python3", launcher: list[str] | None = None) -> dict:
    """The host's vLLM's speculative-config facts (SPEC_FACTS, run by its own interpreter); CockpitError naming why not."""
    prefix = list(launcher) if launcher else [python]
    done = await transport.run([*prefix, "-c", SPEC_FACTS], timeout=300)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    try:
        data = json.loads(last) if done.exit_status == 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("spec_fields"), list):
        said = (done.output.strip().splitlines() or ["no output"])[-1]
        raise CockpitError(f"{transport.name}: its vLLM's SpeculativeConfig could not be read by {shell_words(prefix)}: {said[:200]}")
    return data
