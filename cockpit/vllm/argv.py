"""A vLLM command line's parts: the launcher, the model, and flag names as vLLM's parser reads them."""

from __future__ import annotations


def strip_launcher(argv: list[str]) -> tuple[list[str], str | None, bool]:
    """(the server's own arguments, the model given as `vllm serve MODEL`, whether argv named vLLM)."""
    args = list(argv)
    for index, word in enumerate(args):
        if word == "serve" and index > 0 and args[index - 1].rsplit("/", 1)[-1] in ("vllm", "vllm.entrypoints.cli.main"):
            rest = args[index + 1:]
            if rest and not rest[0].startswith("-"):
                return rest[1:], rest[0], True
            return rest, None, True
        if word == "vllm.entrypoints.openai.api_server" and index > 0 and args[index - 1] == "-m":
            return args[index + 1:], None, True
    return args, None, False


def is_vllm_command(argv: list[str]) -> bool:
    return strip_launcher(argv)[2]


def normalise(args: list[str]) -> list[str]:
    """Flag names as vLLM's FlexibleArgumentParser reads them: '_' turned into '-' (values kept)."""
    out = []
    for word in args:
        if word.startswith("--"):
            head, sep, value = word.partition("=")
            flag, dot, key = head.partition(".")  # --speculative-config.num_speculative_tokens: the JSON key is kept
            word = flag.replace("_", "-") + dot + key + sep + value
        out.append(word)
    return out
