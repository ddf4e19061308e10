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
from cockpit.vllm.fixes import SHORT_SPEC, fixes_for_line
from cockpit.vllm.crosswalk import sglang_to_vllm

from cockpit.vllm.versions import (LEGACY_FLAGS, RANGES, SWITCHES, Era, beyond_read, era, era_of_host, judged_by, label, recorded,
                                   releases, shipped_schema)
from cockpit.vllm.versions import schema_of as _schema_of

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
    short_seen: list[str] = []  # --spec-method, --spec-model, --spec-tokens where the release lacks them
    sglang_seen: list[str] = []
    position = 0
    while position < len(args):
        word = args[position]
        position += 1
        head = word.split("=", 1)[0]
        if head in ("--speculative-config", "-sc"):
            value, position = _take(args, position, word)
            if head == "-sc" and not takes("-sc", schema, rules_of):
                dated = releases().out_of_range("-sc", version) or Diagnosis(
                    "flag_not_in_release", f"-sc is not a flag of {label(version, chosen)}: write --speculative-config", "-sc", None)
                out.append(Diagnosis(dated.kind, dated.message, "-sc", value, ("--speculative-config",),
                                     replacement=("--speculative-config", value or "")))
            configs.append((head, value or ""))
            report.values["--speculative-config"] = value or ""
            continue
        if head.startswith("--speculative-config."):
            value, position = _take(args, position, word)
            dotted[head.split(".", 1)[1]] = value or ""
            continue
        if head in SHORT_SPEC and not takes(head, schema, rules_of):
            _, position = _take(args, position, word)
            short_seen.append(head)
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
        config = merged_config(args)  # what the JSON already says kept, the separate flags' settings added
        fixed = specconfig.dumps(config)
        out.append(Diagnosis("unrecognized_argument", f"{', '.join(legacy_seen)}: {label(version, chosen)} has none of these "
                             f"(vLLM <= 0.8.2's separate flags); one flag says it all: --speculative-config '{fixed}'",
                             legacy_seen[0], None, (f"--speculative-config '{fixed}'",), replacement=("--speculative-config", fixed)))
    elif legacy_seen and chosen.json_config and legacy_ok:
        config, _ = specconfig.legacy_config(args)
        out.append(Diagnosis("deprecated_flags", f"{', '.join(legacy_seen)} still work in {label(version, chosen)} but are gone from 0.8.3: "
                             f"--speculative-config '{specconfig.dumps(config)}'", legacy_seen[0], None,
                             (f"--speculative-config '{specconfig.dumps(config)}'",), severity="warning"))
    if short_seen:
        one = specconfig.dumps(existing_config(args))
        when = releases().span_words(short_seen[0], version)
        out.append(Diagnosis("flag_not_in_release", f"{', '.join(short_seen)}: not in {label(version, chosen)}"
                             + (f" ({short_seen[0]} {when})" if when else "") + "; this "
                             f"release says the same in one flag: --speculative-config '{one}'", short_seen[0], None,
                             (f"--speculative-config '{one}'",), replacement=("--speculative-config", one)))
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
        if legacy_seen and not legacy_ok:
            value = specconfig.dumps(merged_config(args))  # judged as the one config the fix above writes
        out.extend(specconfig.check(value, rules_of, draft_exists, rules))
    if schema is not None and rest:
        parsed = lint_args(rest, schema, ENGINE, rules=lambda values, _schema: [], fixes_for=fixes_for_line(rest),  # vLLM's fixes
                           history=releases() if schema.version in recorded() else None, release=version, ranges=RANGES)
        out.extend(parsed.diagnoses)
        report.values.update(parsed.values)
    out.extend(draft_parallelism(args, report.values))
    if model is None and schema is not None:
        out.append(Diagnosis("missing_required", "no model: `vllm serve MODEL` (or --model MODEL)", "--model", None, ("vllm serve MODEL",)))
    report.diagnoses.sort(key=lambda d: d.severity == "info")  # what is wrong first; how it was judged after
    return report


def draft_parallelism(args: list[str], values: dict) -> list[Diagnosis]:
    """The draft's tensor-parallel size against the target's: vLLM takes 1 or the target's own, nothing else."""
    config = existing_config(args)
    draft = config.get("draft_tensor_parallel_size")
    raw = values.get("--tensor-parallel-size")
    try:
        target = int(raw) if isinstance(raw, str) and raw else 1
    except ValueError:
        return []
    if not isinstance(draft, int) or draft in (1, target):
        return []
    fixed = specconfig.dumps(_ordered({**config, "draft_tensor_parallel_size": target}))
    return [Diagnosis("invalid_value", f"--speculative-config: draft_tensor_parallel_size {draft} with a target of tensor-parallel "
                      f"size {target}: vLLM takes 1 or the target's own ({target}) and stops with `draft_tensor_parallel_size="
                      f"{draft} cannot be other value than 1 or target model tensor_parallel_size={target}`", "--speculative-config",
                      None, (f'"draft_tensor_parallel_size": {target}',), replacement=("--speculative-config", fixed))]


def _quoted(words: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(w) for w in words]


def apply_fix(argv: list[str], diagnosis) -> list[str]:
    """argv with a diagnosis's fix applied: vLLM <= 0.8.2's separate flags, all of them at once, as the one
    --speculative-config that replaces them; any other fix as SGLang's lint applies it (flag and value replaced)."""
    from cockpit.serving.lint import apply_fix as replace_flag

    if diagnosis.flag in LEGACY_FLAGS and diagnosis.replacement and diagnosis.replacement[0] == "--speculative-config":
        return fixed_line(argv)
    if diagnosis.replacement and len(diagnosis.replacement) == 2 and diagnosis.replacement[0] == "--speculative-config":
        return with_config(argv, diagnosis.replacement[1])  # the one config, wherever and however it was written
    return replace_flag(argv, diagnosis)


def takes(option: str, schema: FlagSchema | None, version: str | None) -> bool:
    """Whether the release (its --help where there is one, else its recording) takes `option`."""
    if schema is not None:
        return schema.get(option) is not None
    recorded_schema = shipped_schema(version)
    return recorded_schema is not None and recorded_schema.get(option) is not None


def _config_words(args: list[str]) -> tuple[list[str], list[str]]:
    """(every --speculative-config / -sc / --speculative-config.KEY / --spec-* value of args, as KEY=VALUE for a single
    key, args without them)."""
    values, rest, position = [], [], 0
    while position < len(args):
        word = args[position]
        position += 1
        head = word.split("=", 1)[0]
        if head in SHORT_SPEC:
            value, position = _take(args, position, word)
            values.append(f"{SHORT_SPEC[head]}={value or ''}")
            continue
        if head in ("--speculative-config", "-sc") or head.startswith("--speculative-config."):
            value, position = _take(args, position, word)
            values.append(word if head.startswith("--speculative-config.") and value is None else
                          (f"{head.split('.', 1)[1]}={value}" if head.startswith("--speculative-config.") else value or ""))
            continue
        rest.append(word)
    return values, rest


def _as_config(text: str) -> dict:
    import ast
    import json

    for reader in (json.loads, ast.literal_eval):
        try:
            value = reader(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            return value
    return {}


ORDER = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")


def _ordered(config: dict) -> dict:
    return {**{k: config[k] for k in ORDER if k in config}, **{k: v for k, v in config.items() if k not in ORDER}}


def existing_config(args: list[str]) -> dict:
    """The speculative config a line already holds: its last --speculative-config (or -sc) JSON, its dotted keys over it."""
    import json

    values, _ = _config_words(normalise(args))
    config: dict = {}
    for value in values:
        key, sep, dotted = value.partition("=")
        if sep and not value.lstrip().startswith(("{", "'", '"')) and key.isidentifier():
            try:
                config[key] = json.loads(dotted)
            except ValueError:
                config[key] = dotted
        else:
            config = {**config, **_as_config(value)}
    return _ordered(config)


def merged_config(args: list[str]) -> dict:
    """One config holding everything the line says: the JSON's own settings kept, the separate flags' added."""
    legacy, _ = specconfig.legacy_config(normalise(args))
    return _ordered({**legacy, **existing_config(args)})


def with_config(argv: list[str], text: str) -> list[str]:
    """argv with every speculative config it had replaced by one `--speculative-config TEXT`, after the other flags."""
    head: list[str] = []
    args, _model, named = strip_launcher(argv)
    if named:
        head = argv[: len(argv) - len(args)]
    _, rest = _config_words(args)
    return head + rest + ["--speculative-config", text]


def fixed_line(argv: list[str], version: str | None = None) -> list[str]:
    """argv with the old separate flags and any config it had replaced by one --speculative-config holding all of them
    (the lint's fix)."""
    head: list[str] = []
    args, model, named = strip_launcher(argv)
    if named:
        head = argv[: len(argv) - len(args)]
    legacy, rest = specconfig.legacy_config(normalise(args))
    if not legacy or era(version).legacy_flags and not era(version).json_config:
        return list(argv)
    _, rest = _config_words(rest)
    return head + rest + ["--speculative-config", specconfig.dumps(merged_config(args))]


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
                    render(report, version, schema, source), schema)
