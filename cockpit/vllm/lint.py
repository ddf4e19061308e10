"""Pre-flight lint of a vLLM command line (`vllm serve MODEL ...` or `python -m
vllm.entrypoints.openai.api_server --model MODEL ...`), before anything is launched.

What the version's parser would say (with its --help read into a schema, the same parse as SGLang's
lint: serving/lint.py), then what vLLM checks after parsing: the `--speculative-config` JSON (keys,
method, depth, draft; vllm/specconfig.py), the old separate flags of vLLM <= 0.8.2 (named, with the
JSON that replaces them), and SGLang flags written into a vLLM line (with the vLLM line that means
the same).  vllm-facts §1-2."""

from __future__ import annotations

from cockpit.diagnosis import Diagnosis
from cockpit.serving.lint import LintReport, lint_args
from cockpit.serving.helpschema import FlagSchema
from cockpit.vllm import specconfig
from cockpit.vllm.argv import normalise, strip_launcher
from cockpit.vllm.fixes import fixes_for_line
from cockpit.vllm.crosswalk import sglang_to_vllm
from functools import lru_cache

from cockpit.serving.helpschema import Flag
from cockpit.vllm.versions import (LEGACY_FLAGS, SWITCHES, Era, beyond_read, era, era_of_host, facts, judged_by, label, nearest,
                                   recorded)

ENGINE = "vLLM"
SGLANG_ONLY = ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
               "--speculative-num-draft-tokens", "--model-path", "--tp-size", "--mem-fraction-static", "--context-length")


def _take(args: list[str], position: int, word: str) -> tuple[str | None, int]:
    """The value of the flag at args[position - 1] (inline or the next word) and the next position."""
    if "=" in word:
        return word.split("=", 1)[1], position
    if position < len(args) and not (args[position].startswith("-") and not args[position][1:2].isdigit()):
        return args[position], position + 1
    return None, position


def lint(argv: list[str], version: str | None = None, schema: FlagSchema | None = None,
         draft_exists: bool | None = None, rules: Era | None = None) -> LintReport:
    """Every problem of a vLLM command line for `version` (None: the newest read rules), against
    `schema` (the host's `vllm serve --help`) when there is one."""
    args, model, _ = strip_launcher(argv)
    args = normalise(args)
    report = LintReport()
    out = report.diagnoses
    rules_of = version
    if version is None and schema is not None and schema.version is None:
        # no version given, a --help of the user's is: the version whose recorded flags it lists, or the rules it shows
        found, alike = identify(schema)
        if found is not None:
            rules_of = found
            out.append(Diagnosis("version_from_help", f"no version given: the --help lists the flags of the recorded vLLM {found} "
                                 f"({alike:.0%} alike): judged by its rules", None, found, severity="info"))
        else:
            out.append(Diagnosis("version_unknown", "no version given, and the --help matches no recorded vLLM "
                                 f"(at best {alike:.0%} alike): its flags are checked; the speculative config by the newest "
                                 "recorded rules, and the old separate flags by whether this --help lists them", None, None,
                                 severity="info"))
    chosen = rules or era(rules_of)
    if version and beyond_read(version):
        newest = recorded()[-1]
        out.append(Diagnosis("version_beyond_read", f"vLLM {version} is newer than the newest recorded here ({newest}): judged by "
                             f"{newest}'s rules; its own --help (--host, --help-text) settles the flags", None, version, severity="info"))
    elif version and (how := judged_by(version)):
        out.append(Diagnosis("version_nearest", how, None, version, severity="info"))
    rest: list[str] = []
    configs: list[tuple[str, str]] = []  # (flag as written, value)
    dotted: dict[str, str] = {}
    legacy_seen: list[str] = []
    sglang_seen: list[str] = []
    position = 0
    while position < len(args):
        word = args[position]
        position += 1
        head = word.split("=", 1)[0]
        if head in ("--speculative-config", "-sc"):
            value, position = _take(args, position, word)
            configs.append((head, value or ""))
            report.values["--speculative-config"] = value or ""
            continue
        if head.startswith("--speculative-config."):
            value, position = _take(args, position, word)
            dotted[head.split(".", 1)[1]] = value or ""
            continue
        if head in LEGACY_FLAGS:
            legacy_seen.append(head)
            if head not in SWITCHES:
                _, position = _take(args, position, word)
            continue
        if head in SGLANG_ONLY:
            sglang_seen.append(head)
            _, position = _take(args, position, word)
            continue
        if head == "--model" and model is None:
            model, position = _take(args, position, word)
            report.values["--model"] = model or ""
            continue
        rest.append(word)
    if model:
        report.values["model"] = model
    legacy_ok = chosen.legacy_flags if schema is None else schema.get("--speculative-model") is not None  # its --help is the truth
    if legacy_seen and not legacy_ok:
        config, _ = specconfig.legacy_config(args)
        fixed = specconfig.dumps(config)
        out.append(Diagnosis("unrecognized_argument", f"{', '.join(legacy_seen)}: {label(version, chosen)} has none of these "
                             f"(vLLM <= 0.8.2's separate flags); one flag says it all: --speculative-config '{fixed}'",
                             legacy_seen[0], None, (f"--speculative-config '{fixed}'",), replacement=("--speculative-config", fixed)))
    elif legacy_seen and chosen.json_config and legacy_ok:
        config, _ = specconfig.legacy_config(args)
        out.append(Diagnosis("deprecated_flags", f"{', '.join(legacy_seen)} still work in {label(version, chosen)} but are gone from 0.8.3: "
                             f"--speculative-config '{specconfig.dumps(config)}'", legacy_seen[0], None,
                             (f"--speculative-config '{specconfig.dumps(config)}'",), severity="warning"))
    if sglang_seen:
        line, notes = sglang_to_vllm(["--model-path", model or "MODEL", *args])
        out.append(Diagnosis("other_engine_flags", f"{', '.join(sglang_seen)} are SGLang's flags, not vLLM's; the vLLM line "
                             f"that means the same: {' '.join(_quoted(line))}" + (f" ({'; '.join(notes)})" if notes else ""),
                             sglang_seen[0], None, (" ".join(_quoted(line)),)))
    if dotted:
        if not chosen.dotted:
            out.append(Diagnosis("unrecognized_argument", f"--speculative-config.KEY needs vLLM 0.10.2 or later (this is {chosen.name}): "
                                 "write the JSON", "--speculative-config." + next(iter(dotted)), None))
        else:
            import json

            def value_of(text: str):
                try:
                    return json.loads(text)
                except ValueError:
                    return text

            merged = {k: value_of(v) for k, v in dotted.items()}
            configs.append(("--speculative-config.*", specconfig.dumps(merged)))
    if len(configs) > 1 and not dotted:
        out.append(Diagnosis("duplicate_flag", "--speculative-config is given more than once: the last one wins", "--speculative-config",
                             None, severity="warning"))
    for _, value in configs[-1:]:
        out.extend(specconfig.check(value, rules_of, draft_exists, rules))
    if schema is not None and rest:
        parsed = lint_args(rest, schema, ENGINE, rules=lambda values, _schema: [], fixes_for=fixes_for_line(rest))  # vLLM's fixes
        out.extend(parsed.diagnoses)
        report.values.update(parsed.values)
    if model is None and schema is not None:
        out.append(Diagnosis("missing_required", "no model: `vllm serve MODEL` (or --model MODEL)", "--model", None, ("vllm serve MODEL",)))
    report.diagnoses.sort(key=lambda d: d.severity == "info")  # what is wrong first; how it was judged after
    return report


def _quoted(words: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(w) for w in words]


def apply_fix(argv: list[str], diagnosis) -> list[str]:
    """argv with a diagnosis's fix applied: vLLM <= 0.8.2's separate flags, all of them at once, as the one
    --speculative-config that replaces them; any other fix as SGLang's lint applies it (flag and value replaced)."""
    from cockpit.serving.lint import apply_fix as replace_flag

    if diagnosis.flag in LEGACY_FLAGS and diagnosis.replacement and diagnosis.replacement[0] == "--speculative-config":
        return fixed_line(argv)
    return replace_flag(argv, diagnosis)


def fixed_line(argv: list[str], version: str | None = None) -> list[str]:
    """argv with the old separate flags replaced by --speculative-config (the lint's fix)."""
    head: list[str] = []
    args, model, named = strip_launcher(argv)
    if named:
        head = argv[: len(argv) - len(args)]
    config, rest = specconfig.legacy_config(normalise(args))
    if not config or era(version).legacy_flags and not era(version).json_config:
        return list(argv)
    return head + rest + ["--speculative-config", specconfig.dumps(config)]


def shipped_schema(version: str | None) -> FlagSchema | None:
    """The flags of `version`'s parser as recorded from its wheel (each flag's own type and choices), or of the nearest
    recorded version (versions.judged_by says which); None for a version older than every recording."""
    chosen = nearest(version) if version else (recorded()[-1] if recorded() else None)
    return _schema_of(chosen) if chosen else None


@lru_cache(maxsize=None)  # one per recorded version (identify reads them all)
def _schema_of(recorded_version: str) -> FlagSchema:
    flags = []
    for options, kind, choices, nargs, switch in (facts(recorded_version) or {}).get("flags", []):
        longs = [o for o in options if o.startswith("--")] or options
        negation = next((o for o in longs[1:] if o.startswith("--no-") and o[5:] == longs[0][2:]), None)
        aliases = tuple(o for o in options if o != longs[0] and o != negation)
        flags.append(Flag(longs[0], aliases, not switch, nargs if nargs in ("?", "+", "*") else None, None,
                          tuple(choices) if choices else None, False, negation, "", kind))
    return FlagSchema(prog="vllm serve", version=recorded_version, flags=flags)


def identify(schema: FlagSchema) -> tuple[str | None, float]:
    """The recorded version whose parser has the flags a --help lists (no version given): (version, how alike, 0..1);
    (None, best) when none is alike enough to say."""
    mine = set(schema.options)
    best, score = None, 0.0
    for version in recorded():
        theirs = set(_schema_of(version).options)
        alike = len(mine & theirs) / max(1, len(mine | theirs))
        if alike >= score:
            best, score = version, alike
    return (best, score) if score >= 0.9 else (None, score)


def render(report: LintReport, version: str | None, schema: FlagSchema | None, help_source: str | None) -> str:
    from cockpit.serving.logread import render_diagnoses

    lines = [render_diagnoses(report.diagnoses)] if report.diagnoses else []
    newest = recorded()[-1] if recorded() else "?"
    who = f"vLLM {version}" if version else f"vLLM (no --vllm VERSION: the newest recorded rules, {newest})"
    if schema is None:
        lines.append(f"(the flags themselves were not checked: no --help of {who}; give --help-text FILE with its "
                     "`vllm serve --help` (0.10.x) or `--help=all` (newer); the speculative config was)")
    elif help_source:
        lines.append(f"(flags checked against {help_source})")
    lines.append(f"OK: {who} would accept this command line" if report.ok else f"{who} would refuse this command line")
    return "\n".join(lines)


async def lint_line(words: list[str], version: str | None = None, help_text: str | None = None, transport=None,
                    python: str = "python3", deep: bool = False):
    """`lint-flags` for a vLLM line: against the host's own vLLM (--host), a --help file, or the --help recorded from
    the wheel of the version given; the version's rules either way."""
    from cockpit.errors import CockpitError
    from cockpit.serving.helpschema import load_schema
    from cockpit.serving.lint import LineLint

    if deep and transport is None:
        raise CockpitError("--deep reads the host's own vLLM (its flags and its SpeculativeConfig): give --host HOST")
    schema, source, rules = None, None, None
    if transport is not None:
        from cockpit.vllm.hostschema import host_spec_facts, host_vllm

        found, schema = await host_vllm(transport, python)
        version, source = version or found, f"the flags of vLLM {found} on {transport.name}"
        if deep:  # its SpeculativeConfig too, through its own Python: the keys, methods and unknown-key rule of that install
            rules = era_of_host(await host_spec_facts(transport, python), found)
            source += " and its SpeculativeConfig, read there"
    elif help_text:
        schema, source = load_schema(help_text), help_text
    elif (schema := shipped_schema(version)) is not None:
        if version is None:
            source = f"the flags of the newest recorded vLLM, {schema.version} (no --vllm VERSION given)"
        elif judged_by(version):
            source = f"the flags of vLLM {schema.version} recorded from its wheel (the nearest recorded to {version})"
        else:
            source = f"the flags of vLLM {version} recorded from its wheel"
    report = lint(words, version, schema, rules=rules)
    return LineLint(report, {"engine": "vllm", "version": version, "flags_checked": schema is not None},
                    render(report, version, schema, source))
