"""STAND-IN for sglang.srt.server_args: prepare_server_args replays argparse's real crash format
(usage synopsis of the recorded 0.5.23 --help, then `sglang serve: error: ...`, exit 2), and the
post-parse failure SGLang raises for a partial set of depth flags."""

from sglang.launch_server import HELP, crash, parse


def prepare_server_args(argv):
    text = HELP.read_text()
    values, unknown = parse(argv, text)
    if unknown:
        crash(text, "unrecognized arguments: " + " ".join(unknown))
    if "--model-path" not in values:
        crash(text, "the following arguments are required: --model-path/--model")
    depth = [f for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens") if f in values]
    if values.get("--speculative-algorithm") and depth == ["--speculative-num-steps"]:
        raise TypeError("'>' not supported between instances of 'NoneType' and 'int'")
    return values
