"""An engine's flags, read from its own argparse output (the usage synopsis and `--help`): SGLang's
`launch_server`, vLLM's `vllm serve`.

Works on every version in the fixtures: wrapped usage lines, `{choices}`, `[--x | --no-x]` pairs,
nargs forms (`X [X ...]`, `[X]`, `[X ...]`) and aliases (`--model-path MODEL_PATH, --model MODEL_PATH`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cockpit.errors import CockpitError

# Types argparse would check; --help does not print them, so the ones that matter are known here.
INT_FLAGS = {
    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--tp-size", "--dp-size",
    "--pp-size", "--port", "--max-running-requests", "--context-length", "--chunked-prefill-size", "--page-size",
    "--cuda-graph-max-bs", "--max-total-tokens", "--max-prefill-tokens", "--random-seed", "--nnodes", "--node-rank",
    "--ep-size", "--stream-interval", "--base-gpu-id",
}
FLOAT_FLAGS = {"--mem-fraction-static", "--speculative-accept-threshold-single", "--speculative-accept-threshold-acc",
               "--schedule-conservativeness"}
_PATH_META = re.compile(r"(PATH|DIR|FILE|FOLDER)S?$")
_PATH_HELP = re.compile(r"\b(path|file|directory|folder|filename)\b", re.IGNORECASE)
_FRACTION = re.compile(r"(fraction|ratio|threshold)", re.IGNORECASE)
_INT_NAME = re.compile(r"-(size|port|id|ids|steps|topk|bs|len|length|layers?|seed|rank|nnodes|tokens|num|count|gb|mb)$|-num-|-max-")
_QUOTED = re.compile(r'["\']([A-Za-z0-9_.-]+)["\']')


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Flag:
    name: str  # the first long option string
    aliases: tuple[str, ...] = ()
    takes_value: bool = False
    nargs: str | None = None  # None: one value; "?", "+", "*"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    negation: str | None = None  # --no-x of a BooleanOptionalAction
    help: str = ""
    kind: str | None = None  # argparse's own type ("int", "float") where the engine's parser was read, not its --help


    @property
    def option_strings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases) + ((self.negation,) if self.negation else ())

    @property
    def value_type(self) -> str | None:
        if self.kind in ("int", "float"):
            return self.kind
        if self.kind is not None:
            return None  # the parser's own type says it is no number
        names = set(self.option_strings)
        if names & INT_FLAGS:
            return "int"
        if names & FLOAT_FLAGS:
            return "float"
        return None

    @property
    def value_kind(self) -> str:
        """What the flag's value is: switch (none), choice, int, float, fraction (0..1), path, or text."""
        if not self.takes_value:
            return "switch"
        if self.choices:
            return "choice"
        first_sentence = self.help.split(". ")[0]
        kind = self.value_type
        if kind == "float":
            return "fraction" if _FRACTION.search(self.name) else "float"
        if kind == "int":
            return "int"
        if _PATH_META.search(self.metavar or "") or _PATH_HELP.search(first_sentence):
            return "path"
        if self.kind is not None:
            return "text"  # the parser's own type is known: no guess from the name
        if _FRACTION.search(self.name):
            return "fraction"
        if _INT_NAME.search(self.name):
            return "int"
        return "text"

    def help_values(self) -> tuple[str, ...]:
        """Values a text flag's help quotes as its options (`* "auto" will ...`), when it names two or more."""
        found = tuple(dict.fromkeys(_QUOTED.findall(self.help)))
        return found if len(found) >= 2 and self.value_kind == "text" else ()

    def accepts(self, value: str | None) -> bool:
        """Could `value` (as the user wrote it, words joined by spaces) be this flag's value?  Used so
        that a suggestion never offers a flag for a value of the wrong kind (a number for a path)."""
        kind = self.value_kind
        if value is None:
            return True
        if kind == "switch":
            return False
        words = value.split(" ") if self.nargs in ("+", "*") else [value]
        if self.nargs in (None, "?") and len(value.split(" ")) > 1 and kind != "text":
            return False
        for word in words:
            number = _number(word)
            if kind == "choice" and word not in (self.choices or ()) and word.lower() not in {c.lower() for c in self.choices or ()}:
                return False
            if kind == "int" and (number is None or not re.fullmatch(r"-?\d+", word)):
                return False
            if kind == "float" and number is None:
                return False
            if kind == "fraction" and (number is None or not 0.0 <= number <= 1.0):
                return False
            if kind == "path" and (number is not None or word.startswith(("{", "["))):
                return False
            if kind == "text":
                quoted = self.help_values()
                if quoted and word not in quoted:
                    return False
        return True


@dataclass
class FlagSchema:
    prog: str = ""
    version: str | None = None
    flags: list[Flag] = field(default_factory=list)
    _index: dict[str, Flag] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.reindex()

    def reindex(self) -> None:
        self._index = {}
        for flag in self.flags:
            for option in flag.option_strings:
                self._index[option] = flag

    def get(self, option: str) -> Flag | None:
        return self._index.get(option)

    @property
    def options(self) -> list[str]:
        return list(self._index)

    def resolve(self, option: str) -> tuple[Flag | None, list[str]]:
        """Like argparse with allow_abbrev: an exact name, else a unique prefix.  Returns
        (flag, []) on success, (None, candidates) when ambiguous, (None, []) when unknown."""
        exact = self._index.get(option)
        if exact is not None:
            return exact, []
        if not option.startswith("--"):
            return None, []
        matches = [o for o in self._index if o.startswith(option)]
        flags = {self._index[o].name for o in matches}
        if len(flags) == 1:
            return self._index[matches[0]], []
        if len(flags) > 1:
            return None, matches
        return None, []

    def to_json(self) -> dict:
        return {"prog": self.prog, "version": self.version, "flags": [asdict(f) for f in self.flags]}

    def enriched(self, reference: "FlagSchema") -> "FlagSchema":
        """This schema with the help texts a usage synopsis lacks taken from a reference `--help`
        (same flag name): what kind of value a flag takes is read from its help."""
        flags = []
        for flag in self.flags:
            ref = reference.get(flag.name)
            if not flag.help and ref is not None and ref.takes_value == flag.takes_value:
                flag = Flag(flag.name, flag.aliases or ref.aliases, flag.takes_value, flag.nargs, flag.metavar, flag.choices,
                            flag.required, flag.negation, ref.help, flag.kind or ref.kind)
            flags.append(flag)
        return FlagSchema(prog=self.prog, version=self.version, flags=flags)

    @classmethod
    def from_json(cls, data: dict) -> "FlagSchema":
        flags = []
        for raw in data["flags"]:
            raw = dict(raw)
            raw["aliases"] = tuple(raw.get("aliases") or ())
            raw["choices"] = tuple(raw["choices"]) if raw.get("choices") is not None else None
            flags.append(Flag(**raw))
        return cls(prog=data.get("prog", ""), version=data.get("version"), flags=flags)

    @classmethod
    def from_rows(cls, prog: str, version: str, rows) -> "FlagSchema":
        """A parser recorded from a release's wheel (each engine's data/versions.json): one row a flag,
        [options, type, choices, nargs, switch] and, where recorded, [open, required] (an open choice list: the release
        lets plugins extend it, so its values are not judged)."""
        flags = []
        for options, kind, choices, nargs, switch, *more in rows:
            opened, required = (list(more) + [False, False])[:2]
            longs = [o for o in options if o.startswith("--")] or options
            negation = next((o for o in longs[1:] if o.startswith("--no-") and o[5:] == longs[0][2:]), None)
            aliases = tuple(o for o in options if o != longs[0] and o != negation)
            flags.append(Flag(longs[0], aliases, not switch, nargs if nargs in ("?", "+", "*") else None, None,
                              tuple(choices) if choices and not opened else None, bool(required), negation, "",
                              kind or ("" if switch else None)))
        return cls(prog=prog, version=version, flags=flags)


# --- parsing ------------------------------------------------------------------------------------------

USAGE_RE = re.compile(r"^usage: (\S+(?: serve)?)\s", re.MULTILINE)


def _usage_block(text: str, start: int) -> str:
    """The usage synopsis starting at `start`: until a blank line or the `PROG: error:` line."""
    lines: list[str] = []
    for line in text[start:].splitlines():
        if lines and (not line.strip() or re.match(r"^\S.*: error: ", line)):
            break
        lines.append(line)
    return " ".join(part.strip() for part in lines)


def _groups(usage: str) -> list[tuple[str, bool]]:
    """Top-level items of a usage synopsis: (text, optional?)."""
    items: list[tuple[str, bool]] = []
    depth, buf = 0, ""
    for ch in usage:
        if ch == "[":
            if depth == 0:
                if buf.strip():
                    items.extend((tok, False) for tok in _split_required(buf))
                buf = ""
            else:
                buf += ch
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                items.append((buf.strip(), True))
                buf = ""
            else:
                buf += ch
        else:
            buf += ch
    if buf.strip():
        items.extend((tok, False) for tok in _split_required(buf))
    return items


def _split_required(text: str) -> list[str]:
    """Unbracketed text: `--model-path MODEL_PATH --x X` -> one item per option."""
    parts: list[str] = []
    current: list[str] = []
    for word in text.split():
        if word.startswith("-") and current:
            parts.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        parts.append(" ".join(current))
    return [p for p in parts if p.startswith("-")]


def _flag_from_item(item: str, optional: bool) -> Flag | None:
    if " | " in item:
        options = [p.strip() for p in item.split("|")]
        if len(options) == 2 and options[1].startswith("--no-"):
            return Flag(name=options[0], negation=options[1], required=not optional)
        return None  # another mutually exclusive group: read its options from --help
    words = item.split(" ", 1)
    name = words[0]
    if not name.startswith("-"):
        return None
    rest = words[1].strip() if len(words) > 1 else ""
    if not rest:
        return Flag(name=name, required=not optional)
    choices = None
    metavar = rest
    nargs = None
    if rest.startswith("[") and rest.endswith("...]"):
        nargs, metavar = "*", rest.strip("[]").split(" ")[0]
    elif rest.startswith("[") and rest.endswith("]"):
        nargs, metavar = "?", rest.strip("[]")
    elif rest.endswith("...]"):
        nargs, metavar = "+", rest.split(" ")[0]
    if metavar.startswith("{") and metavar.endswith("}"):
        choices = tuple(c for c in metavar[1:-1].split(",") if c)
    return Flag(name=name, takes_value=True, nargs=nargs, metavar=metavar, choices=choices, required=not optional)


_OPTION_LINE = re.compile(r"^  (-{1,2}[A-Za-z0-9][^ ].*?)(?: {2,}(.*))?$")


def _help_options(text: str) -> dict[str, tuple[list[str], str, str]]:
    """From the `options:` section: the first option string -> (all option strings, help text, the
    option's first item as written, e.g. `--dtype {auto,half}` or `--port PORT`)."""
    found: dict[str, tuple[list[str], str, str]] = {}
    current: str | None = None
    in_options = False
    for line in text.splitlines():
        if re.match(r"^(options|optional arguments):\s*$", line) or (line and not line.startswith(" ") and line.rstrip().endswith(":")):
            in_options = True
            current = None
            continue
        if not in_options:
            continue
        match = _OPTION_LINE.match(line)
        if match:
            parts = [part.strip() for part in match.group(1).split(", ") if part.strip().startswith("-")]
            strings = [part.split(" ")[0] for part in parts]
            if strings:
                current = strings[0]
                found[current] = (strings, (match.group(2) or "").strip(), parts[0])
            continue
        if current and line.startswith("      ") and line.strip():
            strings, help_text, item = found[current]
            found[current] = (strings, (help_text + " " + line.strip()).strip(), item)
    return found


def parse_argparse_text(text: str) -> FlagSchema:
    """A schema from a `--help` output or from the usage block of a crash log."""
    text = text.replace("\r\n", "\n")
    matches = list(USAGE_RE.finditer(text))
    if not matches:
        raise CockpitError("no argparse usage text found (expected a line starting with 'usage:')")
    usage_match = matches[-1]
    prog = usage_match.group(1)
    usage = _usage_block(text, usage_match.start())[len("usage: ") + len(prog):]
    flags: dict[str, Flag] = {}
    for item, optional in _groups(usage):
        flag = _flag_from_item(item, optional)
        if flag is not None and flag.name not in flags:
            flags[flag.name] = flag
    extra = _help_options(text)
    merged: list[Flag] = []
    for name, flag in flags.items():
        strings, help_text, _ = extra.get(name, ([name], "", name))
        aliases = tuple(s for s in strings[1:] if s != flag.negation)
        merged.append(Flag(flag.name, aliases, flag.takes_value, flag.nargs, flag.metavar, flag.choices, flag.required,
                           flag.negation, help_text))
    known = {f.name for f in merged}
    for name, (strings, help_text, item) in extra.items():
        if name not in known and name.startswith("--"):
            # only in the help (vLLM's usage line is `vllm serve [model_tag] [options]`): read from its option line
            shape = _flag_from_item(item, True) or Flag(name)
            negation = next((s for s in strings[1:] if s == "--no-" + name[2:]), None)
            merged.append(Flag(name, tuple(s for s in strings[1:] if s != negation), shape.takes_value, shape.nargs, shape.metavar,
                               shape.choices, False, negation, help_text))
    # "the following arguments are required: --model-path/--model" names aliases too
    for required in re.findall(r"the following arguments are required: (.+)", text):
        for group in required.split(", "):
            names = group.strip().split("/")
            for position, flag in enumerate(merged):
                if flag.name == names[0]:
                    merged[position] = Flag(flag.name, tuple(dict.fromkeys(flag.aliases + tuple(names[1:]))), flag.takes_value,
                                            flag.nargs, flag.metavar, flag.choices, True, flag.negation, flag.help)
    return FlagSchema(prog=prog, flags=merged)


def load_schema(path: str | Path) -> FlagSchema:
    """A schema from a file: JSON written by the cockpit, or argparse help/usage text."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CockpitError(f"{path}: {exc.strerror or exc}") from None
    if b"\x00" in raw[:8192]:
        raise CockpitError(f"{path}: binary file, not an engine's --help text")
    text = raw.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        try:
            return FlagSchema.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise CockpitError(f"{path}: not a cockpit schema file ({exc})") from None
    try:
        return parse_argparse_text(text)
    except CockpitError as exc:
        raise CockpitError(f"{path}: {exc}") from None
