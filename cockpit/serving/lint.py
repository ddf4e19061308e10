"""Pre-flight lint of an engine's command line: what argparse would say (its own `--help` read by
serving/helpschema.py), then the engine's own rules applied after parsing (SGLang's EAGLE rules, vLLM's
`--speculative-config` checks), before anything is launched."""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpschema import FlagSchema
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
class LineLint:
    """`lint-flags`' answer for one line, whatever engine judged it: the report, what else its JSON says, its text."""

    report: LintReport
    extra: dict = field(default_factory=dict)
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.report.ok

    def to_json(self) -> dict:
        return {**self.report.to_json(), **self.extra}

    def render(self) -> str:
        return self.text


def invalid_choice(flag: str, value: str, choices: tuple[str, ...], line: int | None = None) -> Diagnosis:
    """A value not among a flag's choices: the value the user most likely meant first, as the fix."""
    ranked = rank_values(value, choices)
    meant = most_likely(value, choices)
    hint = f"; did you mean '{meant}'?" if meant else ""
    return Diagnosis("invalid_choice", f"{flag} does not accept '{value}'{hint} (allowed: {', '.join(choices)})", flag, value,
                     tuple(ranked[:3]), line, (flag, meant) if meant else None)


def lint_args(args: list[str], schema: FlagSchema, engine: str = "SGLang", rules=None, fixes_for=None) -> LintReport:
    """What argparse would say of `args` given `schema`, then the engine's own rules after parsing
    (`rules(values, schema)`: SGLang's EAGLE rules, vLLM's).  Each engine's lint runs this parse
    against its own --help with its rules."""
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
                out.append(Diagnosis("invalid_value", f"{flag.name} is a switch and takes no value", flag.name, inline, (flag.name,)))
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
                out.append(invalid_choice(flag.name, value, flag.choices))
            elif flag.value_type in ("int", "float"):
                caster = int if flag.value_type == "int" else float
                try:
                    caster(value)
                except ValueError:
                    guess = numeric_guess(value)
                    out.append(Diagnosis("invalid_value", f"{flag.name} needs {type_words(flag.value_type)}, got '{value}'", flag.name, value,
                                         (guess,) if guess else (), replacement=(flag.name, guess) if guess else None))
    for flag in schema.flags:
        if flag.required and flag.name not in report.values:
            out.append(Diagnosis("missing_required", f"{'/'.join((flag.name, *flag.aliases))} is required", flag.name, None,
                                 (f"{flag.name} VALUE",)))
    if rules is not None:
        out.extend(rules(report.values, schema))
    return report


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
