"""argparse's own failure messages (`PROG: error: MESSAGE`), every engine's: one diagnosis per bad flag, each
with the value it was given and its fix.  The engine brings its label and how it ranks fixes for a flag it
does not know (its renames, its old flags, the other engine's flags, then the closest of its own)."""

from __future__ import annotations

import re
from typing import Callable

from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.releases import Releases
from cockpit.serving.lint import invalid_choice
from cockpit.serving.suggest import Suggestion, article, numeric_guess, suggest, type_words

ARG_PREFIX = re.compile(r"^argument (?P<flag>[^:]+): (?P<rest>.*)$")
Suggest = Callable[[str, "str | None", "FlagSchema | None"], "list[Suggestion]"]


def _primary(flag_text: str) -> str:
    return flag_text.split("/")[0].strip()


def split_unknown(words: list[str]) -> list[tuple[str, str | None]]:
    """`--a 1 --b --c x y` -> [(--a, 1), (--b, None), (--c, 'x y')]; a lone word is its own item."""
    items: list[list[str]] = []
    for word in words:
        is_flag = word.startswith("-") and not re.match(r"^-\d", word)
        if is_flag or not items:
            items.append([word])
        else:
            items[-1].append(word)
    out = []
    for item in items:
        head, rest = item[0], item[1:]
        if "=" in head and head.startswith("-"):
            head, inline = head.split("=", 1)
            rest = [inline, *rest]
        out.append((head, " ".join(rest) if rest else None))
    return out


def diagnose_argparse(message: str, schema: FlagSchema | None, line: int | None, engine: str = "SGLang",
                      fixes_for: Suggest = suggest, history: Releases | None = None) -> list[Diagnosis]:
    """One diagnosis per flag the message names, each with its value and its fix (`fixes_for` ranks an unknown flag's);
    a flag the schema judged by has, refused all the same, is named with the releases that take it (`history`)."""
    if message.startswith("unrecognized arguments: "):
        diagnoses = []
        for flag, value in split_unknown(message[len("unrecognized arguments: "):].split()):
            if not flag.startswith("-"):
                diagnoses.append(Diagnosis("unrecognized_argument", f"{engine} takes no positional argument '{flag}'", None, flag, (), line))
                continue
            fixes = [f for f in fixes_for(flag, value, schema) if f.text.split(" ")[0] != flag]  # never itself again
            shown = f" {value}" if value else ""
            hint = f"; did you mean {fixes[0].text}?" if fixes else ""
            note = f" ({fixes[0].note})" if fixes and fixes[0].note else ""
            known = schema is not None and schema.get(flag) is not None and history is not None and flag in history.spans()
            if known:  # the release that refused it is not the one judged by: say which releases take it
                first, last = history.spans()[flag]  # type: ignore[union-attr]
                takes = f"{first} to {last}" if last != history.versions[-1] else f"{first} on"  # type: ignore[union-attr]
                text = f"{flag}{shown}: this {engine} refused it, so it is older or newer than the releases that take it " \
                       f"(recorded: {takes}){hint}{note}"
            else:
                text = f"{flag}{shown} is not {article(engine)} flag{hint}{note}"
            diagnoses.append(Diagnosis("unrecognized_argument", text, flag, value, tuple(f.text for f in fixes), line,
                                       fixes[0].replacement if fixes else None))
        return diagnoses
    ambiguous = re.match(r"^ambiguous option: (?P<opt>\S+?)(?:=(?P<val>\S*))? could match (?P<cands>.*)$", message)
    if ambiguous:
        candidates = tuple(c.strip() for c in ambiguous.group("cands").split(","))
        return [Diagnosis("ambiguous_option", f"{ambiguous.group('opt')} is a prefix of several flags: write one in full",
                          ambiguous.group("opt"), ambiguous.group("val"), candidates, line)]
    required = re.match(r"^the following arguments are required: (?P<flags>.*)$", message)
    if required:
        out = []
        for group in required.group("flags").split(", "):
            flag = _primary(group)
            out.append(Diagnosis("missing_required", f"{group} is required", flag, None, (f"{flag} VALUE",), line))
        return out
    argument = ARG_PREFIX.match(message)
    if argument:
        flag = _primary(argument.group("flag"))
        rest = argument.group("rest")
        choice = re.match(r"^invalid choice: (?P<q>['\"])(?P<val>.*)(?P=q) \(choose from (?P<choices>.*)\)$", rest)
        if choice:
            choices = tuple(c.strip().strip("'\"") for c in choice.group("choices").split(","))
            return [invalid_choice(flag, choice.group("val"), choices, line, schema)]
        bad_type = re.match(r"^invalid (?P<type>\w+) value: (?P<q>['\"])(?P<val>.*)(?P=q)$", rest)
        if bad_type:
            guess = numeric_guess(bad_type.group("val"))
            if guess is not None and bad_type.group("type") == "int" and "." in guess:
                guess = None
            return [Diagnosis("invalid_value", f"{flag} needs {type_words(bad_type.group('type'))}, got '{bad_type.group('val')}'",
                              flag, bad_type.group("val"), (guess,) if guess else (), line, (flag, guess) if guess else None)]
        if rest.startswith("expected"):
            return [Diagnosis("missing_value", f"{flag} {rest}", flag, None, (f"{flag} VALUE",), line)]
        if rest.startswith("not allowed with argument"):
            other = _primary(rest[len("not allowed with argument "):])
            return [Diagnosis("conflicting_arguments", f"{flag} cannot be combined with {other}", flag, None, (other,), line)]
        if rest.startswith("ignored explicit argument"):
            value = rest.split("'")[1] if "'" in rest else None
            return [Diagnosis("invalid_value", f"{flag} is a switch and takes no value", flag, value, (flag,), line, (flag,))]
        return [Diagnosis("argparse_error", f"{flag}: {rest}", flag, None, (), line)]
    return [Diagnosis("argparse_error", message, None, None, (), line)]



