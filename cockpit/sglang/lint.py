"""SGLang's lint: its launcher, and its own rules for EAGLE applied after parsing (sglang-facts §1); the parse itself
is the core's (serving/lint.py lint_args against SGLang's own --help)."""

from __future__ import annotations

from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport, _as_int, lint_args
from cockpit.serving.suggest import most_likely, rank_values
from cockpit.sglang import versions

DEPTH_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
TOPK_PAGE_BACKENDS = {"flashinfer", "fa3", "triton"}


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
            plugin = versions.algorithm_plugins(schema.version) and not meant  # not a near miss: maybe a plugin's own
            out.append(Diagnosis("invalid_choice", (f"'{algorithm}' is not a builtin speculative algorithm of SGLang "
                                 f"{schema.version} ({', '.join(known)}): a plugin must register it, else SGLang stops with "
                                 f"'Unknown speculative algorithm name: {algorithm}'") if plugin else
                                 f"SGLang will stop with 'Unknown speculative algorithm name: {algorithm}'"
                                 f"{hint} (it takes {', '.join(known)})", "--speculative-algorithm", algorithm,
                                 tuple(rank_values(algorithm, known)), replacement=("--speculative-algorithm", meant) if meant else None,
                                 severity="warning" if plugin else "error"))
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


def lint(argv: list[str], schema: FlagSchema, release: str | None = None) -> LintReport:
    """An SGLang command line (its launcher dropped) against its flags and rules; a flag of another release named as too
    new or too old for `release` (else the schema's own version)."""
    return lint_args(strip_launcher(argv), schema, "SGLang", eagle_rules, history=versions.releases(), release=release)
