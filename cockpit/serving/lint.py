"""Pre-flight lint of an engine's command line: what argparse would say (its own `--help` read by
serving/helpschema.py), then the engine's own rules applied after parsing (SGLang's EAGLE rules, vLLM's
`--speculative-config` checks), before anything is launched."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.releases import Releases
from cockpit.serving.suggest import article, most_likely, numeric_guess, rank_values, suggest, type_words


@dataclass
class LintReport:
    diagnoses: list[Diagnosis] = field(default_factory=list)
    values: dict[str, str | bool | list[str]] = field(default_factory=dict)  # canonical flag -> value as parsed

    @property
    def errors(self) -> list[Diagnosis]:
        return [d for d in self.diagnoses if d.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict:
        return {"ok": self.ok, "diagnoses": [d.to_json() for d in self.diagnoses], "parsed": self.values}


@dataclass
class FixedLine:
    """A whole corrected command line: every fix applied in turn, each one's line linted again by the same release."""

    words: list[str]
    applied: list[Diagnosis]
    report: LintReport  # the fixed line's own lint

    @property
    def clean(self) -> bool:
        return self.report.ok

    def to_json(self) -> dict:
        return {"line": self.words, "clean": self.clean, "applied": [d.kind + (f" {d.flag}" if d.flag else "") for d in self.applied],
                "left": [d.to_json() for d in self.report.errors]}


SAFE_WARNINGS = ("abbreviation",)  # warnings whose fix only writes what the engine already reads (a flag in full)


def fix_line(words: list[str], lint, apply, rounds: int = 8) -> FixedLine:
    """`words` with every error's fix applied, one at a time, the line linted again after each (`lint(words)`: the same
    release and flags as the first look; `apply(words, diagnosis)`: the engine's own way to apply a fix); a fix that
    changes nothing, or after which the same error stands, is not taken."""
    current, applied = list(words), []
    report = lint(current)
    tried: set[tuple[str, str | None, str | None]] = set()
    for _ in range(rounds):
        candidates = [d for d in report.errors + [d for d in report.diagnoses if d.kind in SAFE_WARNINGS]
                      if d.replacement is not None and (d.kind, d.flag, d.value) not in tried]
        if not candidates:
            break
        diagnosis = candidates[0]
        tried.add((diagnosis.kind, diagnosis.flag, diagnosis.value))
        fixed = apply(current, diagnosis)
        if fixed == current:
            continue
        again = lint(fixed)
        if any((d.kind, d.flag, d.value) == (diagnosis.kind, diagnosis.flag, diagnosis.value) for d in again.diagnoses):
            continue  # the same error again: the fix did not take
        current, report = fixed, again
        applied.append(diagnosis)
    return FixedLine(current, applied, report)


@dataclass
class LineLint:
    """`lint-flags`' answer for one line, whatever engine judged it: the report, what else its JSON says, its text."""

    report: LintReport
    extra: dict = field(default_factory=dict)
    text: str = ""
    schema: FlagSchema | None = None  # the flags it was judged by

    @property
    def ok(self) -> bool:
        return self.report.ok

    def to_json(self) -> dict:
        return {**self.report.to_json(), **self.extra}

    def render(self) -> str:
        return self.text


PREFERRED_HOMES = ("--quantization", "--kv-cache-dtype")  # where a dtype-like word usually belongs, in this order
QUANT_WORD = re.compile(r"^(fp8|fp4|int8|int4|w8a8|w4a16|awq|gptq|nvfp4|mxfp4|modelopt|bitsandbytes|gguf|marlin)", re.IGNORECASE)


def other_homes(flag: str, value: str, schema: FlagSchema | None) -> list[str]:
    """The other flags of the release whose choices hold `value` exactly (fp8 given to --dtype: --quantization,
    --kv-cache-dtype), the likelier first."""
    if schema is None:
        return []
    homes = [f.name for f in schema.flags if f.name != flag and f.choices and value in f.choices]
    if QUANT_WORD.match(value):  # a quantization word: where such words go, even where that flag's list is open
        preferred = [name for name in PREFERRED_HOMES if name != flag and (home := schema.get(name)) is not None
                     and (home.choices is None or value in home.choices)]
        if preferred:
            return preferred
    return sorted(homes, key=lambda name: (PREFERRED_HOMES.index(name) if name in PREFERRED_HOMES else len(PREFERRED_HOMES), name))


def invalid_choice(flag: str, value: str, choices: tuple[str, ...], line: int | None = None,
                   schema: FlagSchema | None = None) -> Diagnosis:
    """A value not among a flag's choices: the value the user most likely meant first, as the fix; a value that is a
    choice of another flag of the release (fp8 as a --dtype) names that flag, and moving it there is the fix."""
    homes = other_homes(flag, value, schema)
    if homes:
        return Diagnosis("invalid_choice", f"{flag} does not accept '{value}' (allowed: {', '.join(choices)}); '{value}' is a "
                         f"value of {' or '.join(homes)}: did you mean {homes[0]} {value}?", flag, value,
                         tuple(f"{h} {value}" for h in homes), line, (homes[0], value))
    ranked = rank_values(value, choices)
    meant = most_likely(value, choices)
    hint = f"; did you mean '{meant}'?" if meant else ""
    return Diagnosis("invalid_choice", f"{flag} does not accept '{value}'{hint} (allowed: {', '.join(choices)})", flag, value,
                     tuple(ranked[:3]), line, (flag, meant) if meant else None)


def lint_args(args: list[str], schema: FlagSchema, engine: str = "SGLang", rules=None, fixes_for=None,
              history: Releases | None = None, release: str | None = None,
              ranges: dict[str, tuple[float, float, bool]] | None = None) -> LintReport:
    """What argparse would say of `args` given `schema`, then the engine's own rules after parsing
    (`rules(values, schema)`: SGLang's EAGLE rules, vLLM's).  Each engine's lint runs this parse
    against its own --help with its rules.  With `history` (the engine's recorded releases), a flag this release lacks
    but another takes is named as too new or too old for `release`, with what this one takes instead.  `ranges`: the
    bounds the engine checks after parsing, flag -> (low, high, low excluded)."""
    report = LintReport()
    out = report.diagnoses
    position = 0
    while position < len(args):
        word = args[position]
        position += 1
        if not word.startswith("-") or word == "-":
            out.append(Diagnosis("unrecognized_argument", f"{engine} takes no positional argument '{word}'", None, word))
            continue
        inline = None
        if "=" in word and word.startswith("--"):
            word, inline = word.split("=", 1)
        flag, candidates = schema.resolve(word)
        if flag is None and candidates:
            while inline is None and position < len(args) and not args[position].startswith("-"):
                position += 1  # its value: not a positional argument
            out.append(Diagnosis("ambiguous_option", f"{word} is a prefix of several flags: write one in full", word, inline,
                                 tuple(candidates)))
            continue
        if flag is None:
            values = []
            while position < len(args) and not (args[position].startswith("-") and not args[position][1:2].isdigit()):
                values.append(args[position])
                position += 1
            value = inline if inline is not None else (" ".join(values) if values else None)
            dated = history.out_of_range(word, release or schema.version) if history is not None else None
            if dated is not None:
                swap = dated.replacement[0] if dated.replacement else None
                out.append(Diagnosis(dated.kind, dated.message, word, value, dated.suggestions, None,
                                     ((swap, *values) if inline is None else (f"{swap}={inline}",)) if swap else None))
                continue
            fixes = (fixes_for or suggest)(word, value, schema)  # the engine's own ranking (SGLang's by default)
            hint = f"; did you mean {fixes[0].text}?" if fixes else ""
            note = f" ({fixes[0].note})" if fixes and fixes[0].note else ""
            shown = f" {value}" if value else ""
            out.append(Diagnosis("unrecognized_argument", f"{word}{shown} is not {article(engine)} flag{hint}{note}", word, value,
                                 tuple(f.text for f in fixes), None, fixes[0].replacement if fixes else None))
            continue
        if word not in flag.option_strings:
            out.append(Diagnosis("abbreviation", f"{word} is accepted as an abbreviation of {flag.name}; write it in full "
                                 f"(abbreviations can turn ambiguous in a later {engine})", word, None, (flag.name,),
                                 replacement=(flag.name,), severity="warning"))
        if not flag.takes_value:
            if inline is not None:
                out.append(Diagnosis("invalid_value", f"{flag.name} is a switch and takes no value", flag.name, inline, (flag.name,),
                                     replacement=(flag.name,)))
            report.values[flag.name] = word != flag.negation
            continue
        values = [inline] if inline is not None else []
        if inline is None:
            while position < len(args) and not (args[position].startswith("--") or (args[position].startswith("-") and not args[position][1:2].isdigit() and args[position] != "-")):
                values.append(args[position])
                position += 1
                if flag.nargs in (None, "?"):
                    break
        if not values and flag.nargs not in ("?", "*"):
            out.append(Diagnosis("missing_value", f"{flag.name} expected one argument", flag.name, None, (f"{flag.name} VALUE",)))
            continue
        report.values[flag.name] = values if flag.nargs in ("+", "*") else (values[0] if values else "")
        for value in values:
            if flag.choices and value not in flag.choices:
                when = history.choice_words(flag.name, value, release or schema.version) if history is not None else None
                if when:  # a value of another release: never swapped for a different one (the user's meaning is kept)
                    judged = release or schema.version
                    out.append(Diagnosis("choice_not_in_release", f"{flag.name} {value}: not in {engine} {judged}: '{value}' {when}; "
                                         f"{judged} takes {', '.join(flag.choices)}: upgrade {engine} for it", flag.name, value))
                    continue
                out.append(invalid_choice(flag.name, value, flag.choices, schema=schema))
            elif value == "" and flag.nargs not in ("?", "*"):
                out.append(Diagnosis("missing_value", f"{flag.name}= is empty: it needs a value", flag.name, "",
                                     (f"{flag.name} VALUE",)))
            elif flag.value_type in ("int", "float"):
                caster = int if flag.value_type == "int" else float
                try:
                    caster(value)
                except ValueError:
                    guess = numeric_guess(value)
                    out.append(Diagnosis("invalid_value", f"{flag.name} needs {type_words(flag.value_type)}, got '{value}'", flag.name, value,
                                         (guess,) if guess else (), replacement=(flag.name, guess) if guess else None))
                    continue
                if ranges and flag.name in ranges:
                    out.extend(out_of_range(flag.name, caster(value), ranges[flag.name]))
    for flag in schema.flags:
        if flag.required and flag.name not in report.values:
            out.append(Diagnosis("missing_required", f"{'/'.join((flag.name, *flag.aliases))} is required", flag.name, None,
                                 (f"{flag.name} VALUE",)))
    if rules is not None:
        out.extend(rules(report.values, schema))
    return report


def out_of_range(flag: str, value: float, bounds: tuple[float, float, bool]) -> list[Diagnosis]:
    """A number outside what the engine takes: a percentage written for a fraction (90 for 0.9) offered as the fraction."""
    low, high, open_low = bounds
    if (low < value if open_low else low <= value) and value <= high:
        return []
    shown = f"({low:g}, {high:g}]" if open_low else f"[{low:g}, {high:g}]"
    percent = 1 < value <= 100 and (value >= 10 or value == int(value))  # 90 or 95.5 meant as a percentage; 1.5 not
    guess = value / 100 if high <= 1 and percent else None
    text = f"{flag} must be within {shown}, got {value:g}" + (f": {value:g} % is {guess:g}" if guess is not None else "")
    return [Diagnosis("invalid_value", text, flag, f"{value:g}" if value != int(value) else str(int(value)),
                      (f"{flag} {guess:g}",) if guess is not None else (), replacement=(flag, f"{guess:g}") if guess is not None else None)]


def _as_int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def without_flags(argv: list[str], flags, switches=()) -> list[str]:
    """argv less every `--flag value` / `--flag=value` of `flags` (each takes one value) and every switch of
    `switches` (no value)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        head = word.split("=", 1)[0]
        if head in switches:
            continue
        if head in flags:
            skip = "=" not in word
            continue
        out.append(word)
    return out


def apply_fix(argv: list[str], diagnosis: Diagnosis) -> list[str]:
    """argv with the diagnosed flag (and its value) replaced by the diagnosis's replacement; a flag the
    replacement sets that argv already had elsewhere (the depth flags a launch step writes) is replaced,
    never given twice."""
    if not diagnosis.replacement or not diagnosis.flag:
        return list(argv)
    out = list(argv)
    replacement = list(diagnosis.replacement)
    sets = {w for w in replacement[::2] if w.startswith("--")} if len(replacement) % 2 == 0 else set()
    sets.discard(diagnosis.flag)
    for index, word in enumerate(out):
        head = word.split("=", 1)[0]
        if head == diagnosis.flag:
            end = index + 1
            if "=" not in word and diagnosis.value is not None:
                taken = len(diagnosis.value.split(" "))
                end = index + 1 + taken
            return without_flags(out[:index], sets) + replacement + without_flags(out[end:], sets)
    return out
