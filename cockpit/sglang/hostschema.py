"""A host's own SGLang flags: `python -m sglang.launch_server --help` run there, cached per host and version."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.format import shell_words
from cockpit.paths import atomic_write
from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpcache import cache_dir, cache_name
from cockpit.serving.helpschema import FlagSchema, load_schema, parse_argparse_text
from cockpit.serving.lint import LintReport
from cockpit.sglang import versions
from cockpit.sglang.lint import lint, strip_launcher
from cockpit.serving.logread import diagnose_lines, render_diagnoses

VERSION_ARGV = ["-c", "import sglang; print(sglang.__version__)"]


async def host_schema(transport, python: str = "python3", refresh: bool = False, launcher: list[str] | None = None) -> FlagSchema:
    """The host's own SGLang flags; `launcher`: run its interpreter that way instead (inside a container image)."""
    prefix = list(launcher) if launcher else [python]
    version = await transport.run([*prefix, *VERSION_ARGV], timeout=300 if launcher else 120)
    if version.exit_status != 0:
        last = (version.output.strip().splitlines() or ["no output"])[-1]
        raise CockpitError(f"{transport.name}: SGLang is not importable by {shell_words(prefix)}: {last[:200]}")
    number = version.stdout.strip().splitlines()[-1]
    path = cache_dir() / cache_name(transport.name, number, launcher)
    if path.exists() and not refresh:
        try:
            return FlagSchema.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):
            pass
    helped = await transport.run([*prefix, "-m", "sglang.launch_server", "--help"], timeout=300)
    if helped.exit_status != 0 or "usage:" not in helped.stdout:
        raise CockpitError(f"{transport.name}: `{shell_words([*prefix, '-m', 'sglang.launch_server', '--help'])}` failed: "
                           f"{helped.output.strip()[-300:]}")
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


@dataclass
class HostLint:
    """A command line checked against a host's own SGLang: the lint, and with `deep` also SGLang's own
    parser run there, its refusals merged into the lint as diagnoses."""

    report: LintReport
    schema: FlagSchema
    host: str | None = None
    deep_ok: bool | None = None
    deep_lines: list[str] | None = None
    source: str | None = None  # what the flags were checked against, in words
    release: str | None = None  # the version the user named

    @property
    def ok(self) -> bool:
        return self.report.ok

    def to_json(self) -> dict:
        return {**self.report.to_json(), "engine": "sglang", "version": self.release or self.schema.version,
                "deep": None if self.deep_lines is None else {"accepted": self.deep_ok, "output_tail": self.deep_lines[-20:]},
                "schema": {"prog": self.schema.prog, "version": self.schema.version, "flags": len(self.schema.flags),
                           "source": self.source}}

    def render(self) -> str:
        lines = [render_diagnoses(self.report.diagnoses)] if self.report.diagnoses else []
        if self.deep_lines is not None:
            lines.append(f"SGLang's own parser on {self.host}: {'accepted' if self.deep_ok else 'refused'}")
        if self.source:
            lines.append(f"(flags checked against {self.source})")
        who = f"SGLang {self.release or self.schema.version}" if (self.release or self.schema.version) else "SGLang"
        lines.append(f"OK: {who} would accept this command line" if self.ok else f"{who} would refuse this command line")
        return "\n".join(lines)


def merge_dry_run(report: LintReport, lines: list[str], host: str) -> None:
    """What SGLang's own parser refused that the lint did not already say, as diagnoses."""
    found = diagnose_lines(lines).diagnoses
    known = {(d.kind, d.flag) for d in report.diagnoses}
    extra = [d for d in found if (d.kind, d.flag) not in known]
    if not extra:
        tail = lines[-1] if lines else "no output"
        extra = [Diagnosis("dry_run_failed", f"SGLang's own parser refused the line on {host}: {tail[:300]}")]
    report.diagnoses.extend(extra)


async def lint_on_host(transport, words: list[str], python: str, deep: bool = False) -> HostLint:
    """Lint against the host's SGLang (its --help, cached per version); with deep, its parser too."""
    args = strip_launcher(words)
    try:
        schema = await host_schema(transport, python)
        outcome = HostLint(lint(args, schema), schema, transport.name, source=f"the flags of SGLang {schema.version} on {transport.name}")
        if deep:
            outcome.deep_ok, outcome.deep_lines = await dry_run(transport, args, python)
    except CockpitError:
        raise
    except Exception as exc:  # noqa: BLE001 - the host could not be asked: could not check
        raise CockpitError(f"{transport.name}: {exc}") from None
    if deep and not outcome.deep_ok:
        merge_dry_run(outcome.report, outcome.deep_lines or [], transport.name)
    return outcome


def lint_with_file(words: list[str], help_text: str, version: str | None = None) -> HostLint:
    schema = load_schema(help_text)
    return HostLint(lint(words, schema, version), schema, source=help_text, release=version)


def lint_shipped(words: list[str], version: str | None) -> HostLint:
    """Offline: the flags of the release that judges `version` (the newest recorded when none is given), as recorded from
    its wheel, and SGLang's rules for that release."""
    schema = versions.shipped_schema(version)
    if schema is None:
        oldest = versions.releases().versions[0]
        raise CockpitError(f"SGLang {version} is older than every release recorded here (the oldest is {oldest}): give "
                           "--host H or --help-text FILE")
    report = lint(words, schema, version)
    note = versions.releases().note(version)
    if note is not None:
        report.diagnoses.append(note)
    if version is None:
        source = f"the flags of the newest recorded SGLang, {schema.version} (no --engine-version given)"
    elif schema.version != version.strip().lstrip("v"):
        source = f"the flags of SGLang {schema.version} recorded from its wheel (judging {version})"
    else:
        source = f"the flags of SGLang {version} recorded from its wheel"
    return HostLint(report, schema, source=source, release=version)


async def lint_line(words: list[str], version: str | None = None, help_text: str | None = None, transport=None,
                    python: str = "python3", deep: bool = False) -> HostLint:
    """`lint-flags` for an SGLang line: against the host's own SGLang (--host; with deep, its own parser too, and it wins),
    a --help file, or offline, the recorded flags of the release named (the newest recorded when none is)."""
    if deep and transport is None:
        raise CockpitError("--deep runs SGLang's parser on a host: give --host H")
    if transport is not None:
        return await lint_on_host(transport, words, python, deep)
    if help_text:
        return lint_with_file(words, help_text, version)
    return lint_shipped(words, version)
