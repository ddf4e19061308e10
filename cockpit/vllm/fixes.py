"""What the user meant by a flag vLLM does not know, ranked as SGLang's are (serving/suggest.py): vLLM <= 0.8.2's
separate speculative flags (all of the line's at once, as the one --speculative-config that replaces them),
SGLang's flags (the vLLM words that mean the same: the crosswalk), a flag written with '_', then the closest of
the version's own flags that could take the value given."""

from __future__ import annotations

from cockpit.format import shell_words
from cockpit.serving.argparse_errors import Suggest, split_unknown
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.suggest import Suggestion, with_similar
from cockpit.vllm import specconfig
from cockpit.vllm.crosswalk import NOT_SAME, SAME, SPEC, sglang_to_vllm
from cockpit.vllm.versions import LEGACY_FLAGS

# the short speculative flags of later releases (0.22 on) and the config key each sets
SHORT_SPEC = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}


def legacy_flag(flag: str) -> bool:
    return (flag.replace("_", "-") if flag.startswith("--") else flag) in LEGACY_FLAGS


def fixes_for_line(words: list[str]) -> Suggest:
    """The ranking for the unknown flags of one line (`words`: what argparse listed, or the whole line): the old
    separate flags and SGLang's speculative flags are fixed together, as one --speculative-config."""
    legacy_config, _ = specconfig.legacy_config(words)
    legacy_fix = specconfig.dumps(legacy_config) if legacy_config else None
    sglang_words = [w for flag, value in split_unknown(words) if flag in SPEC for w in ([flag] if value is None else [flag, value])]
    sglang_fix = None
    if sglang_words:
        line, _ = sglang_to_vllm(["--model-path", "MODEL", *sglang_words])
        if "--speculative-config" in line:
            sglang_fix = line[line.index("--speculative-config") + 1]

    short = {SHORT_SPEC[flag]: (int(value) if value and value.isdigit() else value) for flag, value in split_unknown(words)
             if flag in SHORT_SPEC and value is not None}
    short_fix = specconfig.dumps(short) if short else None

    def fixes(flag: str, value: str | None, schema: FlagSchema | None) -> list[Suggestion]:
        if flag in SHORT_SPEC and short_fix:
            return [Suggestion(shell_words(["--speculative-config", short_fix]), ("--speculative-config", short_fix),
                               "--spec-method, --spec-model and --spec-tokens are recorded from vLLM 0.22.1 on; every release from 0.8.3 takes "
                               "--speculative-config")]
        if legacy_flag(flag) and legacy_fix:
            return [Suggestion(shell_words(["--speculative-config", legacy_fix]), ("--speculative-config", legacy_fix),
                               "vLLM <= 0.8.2's separate flag; 0.8.3 and later take one --speculative-config for all of them")]
        if flag in SPEC and sglang_fix:
            return [Suggestion(shell_words(["--speculative-config", sglang_fix]), ("--speculative-config", sglang_fix),
                               "SGLang's flag; vLLM takes one --speculative-config for all of them")]
        out: list[Suggestion] = []
        if SAME.get(flag) and SAME[flag] != flag:
            renamed = (str(SAME[flag]),) + ((value,) if value is not None else ())
            out.append(Suggestion(shell_words(renamed), renamed, "SGLang's name"))
        elif flag in NOT_SAME:
            out.append(Suggestion(NOT_SAME[flag].split(" ", 1)[0], None, "SGLang's flag: " + NOT_SAME[flag]))
        return with_similar(out, flag, value, schema, "vLLM's flags are written with '-'")

    return fixes
