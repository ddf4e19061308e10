"""Pre-flight lint of an SGLang command line: what argparse would say, then SGLang's own rules for
EAGLE applied after parsing (sglang-facts §1), before anything is launched."""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.sglang.diagnose import Diagnosis, invalid_choice
from cockpit.sglang.schema import FlagSchema
from cockpit.sglang import versions
from cockpit.sglang.suggest import most_likely, numeric_guess, rank_values, suggest, type_words

DEPTH_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
TOPK_PAGE_BACKENDS = {"flashinfer", "fa3", "triton"}


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


def strip_launcher(argv: list[str]) -> list[str]:
    """The server's own arguments: drop `python -m sglang.launch_server` / `sglang serve` in front."""
    args = list(argv)
    for index, word in enumerate(args):
        if word in ("sglang.launch_server", "sglang.launch_server.py") and index > 0 and args[index - 1] == "-m":
            return args[index + 1:]
        if word.endswith("launch_server.py"):
            return args[index + 1:]
        if word == "serve" and index > 0 and args[index - 1].endswith("sglang"):
            return args[index + 1:]
    return args


def is_sglang_command(argv: list[str]) -> bool:
    return strip_launcher(argv) != list(argv)


def lint_args(args: list[str], schema: FlagSchema, engine: str = "SGLang", rules=None) -> LintReport:
    """What argparse would say of `args` given `schema`, then the engine's own rules after parsing
    (`rules(values, schema)`; default: SGLang's EAGLE rules).  vLLM's lint (vllm/lint.py) runs the
    same parse against vLLM's --help with its rules."""
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
            fixes = suggest(word, value, schema)
            hint = f"; did you mean {fixes[0].text}?" if fixes else ""
            note = f" ({fixes[0].note})" if fixes and fixes[0].note else ""
            shown = f" {value}" if value else ""
            out.append(Diagnosis("unrecognized_argument", f"{word}{shown} is not {'an' if engine[0] in 'AEIOSU' else 'a'} {engine} flag{hint}{note}", word, value,
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
    out.extend((rules or eagle_rules)(report.values, schema))
    return report


def _as_int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def eagle_rules(values: dict, schema: FlagSchema) -> list[Diagnosis]:
    """SGLang's post-parse rules for speculative decoding (what argparse lets through)."""
    out: list[Diagnosis] = []
    algorithm = values.get("--speculative-algorithm")
    if isinstance(algorithm, str) and algorithm:
        algo_flag = schema.get("--speculative-algorithm")
        known = tuple(versions.algorithms(schema.version))  # this version's own list (its source), not a fixed one
        if algo_flag is not None and not algo_flag.choices and algorithm.upper() not in known:
            meant = most_likely(algorithm, known)
            hint = f"; did you mean {meant}?" if meant else ""
            out.append(Diagnosis("invalid_choice", f"SGLang will stop with 'Unknown speculative algorithm name: {algorithm}'"
                                 f"{hint} (it takes {', '.join(known)})", "--speculative-algorithm", algorithm,
                                 tuple(rank_values(algorithm, known)), replacement=("--speculative-algorithm", meant) if meant else None))
    speculative = bool(algorithm)
    given = [f for f in DEPTH_FLAGS if f in values]
    if given and not speculative:
        out.append(Diagnosis("speculative_flags_unused", "depth flags without --speculative-algorithm are ignored",
                             given[0], None, ("--speculative-algorithm EAGLE3",), severity="warning"))
    if speculative and given and len(given) < 3:
        missing = [f for f in DEPTH_FLAGS if f not in values]
        why = ("a bare AssertionError" if given == ["--speculative-num-draft-tokens"]
               else "TypeError: '>' not supported between 'NoneType' and 'int'" if "--speculative-num-steps" in given else "a failure after parsing")
        out.append(Diagnosis("partial_depth_flags", f"give all three depth flags: {', '.join(missing)} missing; SGLang fails with {why}",
                             missing[0], None, tuple(f"{f} VALUE" for f in missing)))
    steps, topk, draft = (_as_int(values.get(f)) for f in DEPTH_FLAGS)
    if speculative and steps is not None and topk == 1 and draft is not None and draft != steps + 1:
        out.append(Diagnosis("draft_tokens_rewritten", f"with topk 1 SGLang silently sets --speculative-num-draft-tokens to "
                             f"steps + 1 = {steps + 1} (you gave {draft})", "--speculative-num-draft-tokens", str(draft),
                             (f"--speculative-num-draft-tokens {steps + 1}",),
                             replacement=("--speculative-num-draft-tokens", str(steps + 1)), severity="warning"))
    page = _as_int(values.get("--page-size"))
    backend = values.get("--attention-backend")
    if speculative and topk is not None and topk > 1 and page is not None and page > 1 and backend not in TOPK_PAGE_BACKENDS:
        out.append(Diagnosis("topk_page_size", f"topk {topk} with page size {page} is refused on attention backend "
                             f"{backend or '(default)'}: use --page-size 1 or --attention-backend flashinfer", "--page-size",
                             str(page), ("--page-size 1", "--attention-backend flashinfer")))
    pp = _as_int(values.get("--pp-size") or values.get("--pipeline-parallel-size"))
    if speculative and pp is not None and pp > 1 and not schema.get("--speculative-dflash-block-size"):
        out.append(Diagnosis("pp_with_speculative", "pipeline parallelism with speculative decoding is refused before SGLang 0.5.23",
                             "--pp-size", str(pp), ("--pp-size 1",)))
    if speculative and "--max-running-requests" not in values:
        out.append(Diagnosis("max_running_requests_default", "with speculative decoding SGLang caps --max-running-requests at 48 "
                             "when it is not given", "--max-running-requests", None, ("--max-running-requests N",), severity="info"))
    if speculative and algorithm and str(algorithm).upper().startswith("EAGLE") and "--speculative-draft-model-path" not in values:
        out.append(Diagnosis("missing_draft", "EAGLE needs --speculative-draft-model-path", "--speculative-draft-model-path", None,
                             ("--speculative-draft-model-path PATH",)))
    return out


def _without_flags(argv: list[str], flags: set[str]) -> list[str]:
    """argv less every `--flag value` / `--flag=value` of `flags` (each of these takes one value)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        head = word.split("=", 1)[0]
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
            return _without_flags(out[:index], sets) + replacement + _without_flags(out[end:], sets)
    return out
