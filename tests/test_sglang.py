"""SGLang flag schema, crash diagnosis and pre-flight lint, on real SGLang outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.errors import CockpitError
from cockpit.serving.logread import diagnose_file, diagnose_lines, read_log_tail
from cockpit.serving.lint import apply_fix
from cockpit.sglang.lint import lint as lint_args, strip_launcher
from cockpit.serving.helpschema import load_schema, parse_argparse_text

SEED = ("--model-path /models/Kimi-K2.5 --tp 8 --trust-remote-code --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path /ckpt/eagle3 --num-speculative-tokens 16").split()


@pytest.fixture(scope="module", params=["help_0.5.23.txt", "help_0.5.2.txt"])
def schema(request):
    from conftest import FIXTURES

    return load_schema(FIXTURES / "sglang" / request.param)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("log, kind, flag, value, top", [
    ("unrecognized_0.5.23.log", "unrecognized_argument", "--num-speculative-tokens", "16",
     "--speculative-num-steps 16 --speculative-eagle-topk 1 --speculative-num-draft-tokens 17"),
    ("unrecognized_0.5.2.log", "unrecognized_argument", "--num-speculative-tokens", "16",
     "--speculative-num-steps 16 --speculative-eagle-topk 1 --speculative-num-draft-tokens 17"),
    ("bad_choice_0.5.2.log", "invalid_choice", "--speculative-algorithm", "EAGLE-3", "EAGLE3"),
    ("missing_required_0.5.23.log", "missing_required", "--model-path", None, "--model-path VALUE"),
    ("bad_int_0.4.10.post2.log", "invalid_value", "--speculative-num-steps", "five", "5"),
    ("valid_0.5.2.log", "no_accelerator", None, None, None),
])
def test_every_fixture_log(fixtures, log, kind, flag, value, top):
    report = diagnose_file(fixtures / "sglang" / log)
    assert not report.ready
    assert len(report.diagnoses) == 1, report.diagnoses
    d = report.diagnoses[0]
    assert (d.kind, d.flag, d.value) == (kind, flag, value)
    if top is not None:
        assert d.suggestions[0] == top
    assert d.line is not None and d.line >= 1


def test_parse_log_cli_json_shape(fixtures):
    proc = cli("parse-log", str(fixtures / "sglang" / "unrecognized_0.5.23.log"), "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["ready"] is False
    d = data["diagnoses"][0]
    assert set(d) >= {"kind", "flag", "value", "suggestions", "message", "line"}
    assert d["replacement"] == ["--speculative-num-steps", "16", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "17"]


def test_the_story_crash_has_one_fix_in_parse_log_lint_flags_and_the_json(fixtures):
    """Issue 27 item 8: the message's 'did you mean', the text's fix line, lint-flags and the JSON's
    replacement (what `f` applies in the TUI) are the same words; no second, contradicting 'try:'."""
    fix = "--speculative-num-steps 16 --speculative-eagle-topk 1 --speculative-num-draft-tokens 17"
    text = cli("parse-log", str(fixtures / "sglang" / "unrecognized_0.5.2.log")).stdout
    lint = cli("lint-flags", "--help-text", str(fixtures / "sglang" / "help_0.5.2.txt"), "--", "--model-path", "/m",
               "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--num-speculative-tokens", "16").stdout
    for out in (text, lint):
        assert f"did you mean {fix}?" in out and f"    fix: {fix}" in out
        assert "try: --speculative-num-draft-tokens 16" not in out and out.count("fix:") == 1
    data = json.loads(cli("parse-log", str(fixtures / "sglang" / "unrecognized_0.5.2.log"), "--json").stdout)
    assert " ".join(data["diagnoses"][0]["replacement"]) == fix


def test_schema_from_help(schema):
    assert len(schema.flags) > 180
    model = schema.get("--model")
    assert model is not None and model.name == "--model-path" and model.required and model.takes_value
    assert schema.get("--trust-remote-code").takes_value is False
    steps = schema.get("--speculative-num-steps")
    assert steps.takes_value and steps.value_type == "int"
    flag, candidates = schema.resolve("--speculative-num")
    assert flag is None and set(candidates) >= {"--speculative-num-steps", "--speculative-num-draft-tokens"}
    assert schema.resolve("--tp")[0] is not None  # an abbreviation argparse accepts
    assert schema.get("--numa-node").nargs == "+"


def test_schema_versions_differ(fixtures):
    old = load_schema(fixtures / "sglang" / "help_0.5.2.txt")
    new = load_schema(fixtures / "sglang" / "help_0.5.23.txt")
    assert old.prog == "launch_server.py" and new.prog == "sglang serve"
    assert old.get("--speculative-algorithm").choices == ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
    assert new.get("--speculative-algorithm").choices is None  # 0.5.23 checks after parsing
    negated = [f for f in new.flags if f.negation]
    assert negated and all(f.negation == "--no-" + f.name[2:] for f in negated)


def test_lint_the_seed_crash_before_launch(schema):
    report = lint_args(SEED, schema)
    assert not report.ok
    errors = report.errors
    assert [d.kind for d in errors] == ["unrecognized_argument"]
    assert errors[0].suggestions[0].startswith("--speculative-num-steps 16 --speculative-eagle-topk 1")
    assert any(d.kind == "abbreviation" and d.severity == "warning" for d in report.diagnoses)  # --tp is accepted
    fixed = apply_fix(SEED, errors[0])
    assert "--num-speculative-tokens" not in fixed and fixed[-6:] == list(errors[0].replacement)
    assert lint_args(fixed, schema).ok


@pytest.mark.parametrize("extra, kind, top", [
    (["--speculative-depth", "5"], "unrecognized_argument", "--speculative-num-steps 5"),
    (["--gpu-memory-utilization", "0.9"], "unrecognized_argument", "--mem-fraction-static 0.9"),
    (["--reasoning_parser", "qwen3"], "unrecognized_argument", "--reasoning-parser qwen3"),
    (["--speculative-num", "3"], "ambiguous_option", "--speculative-num-steps"),
    (["--speculative-num-steps", "five"], "invalid_value", "5"),
    (["--speculative-num-steps"], "missing_value", "--speculative-num-steps VALUE"),
])
def test_lint_names_the_flag_and_the_fix(fixtures, extra, kind, top):
    schema = load_schema(fixtures / "sglang" / "help_0.5.23.txt")
    args = ["--model-path", "/m"] + extra
    report = lint_args(args, schema)
    assert not report.ok
    first = report.errors[0]
    assert first.kind == kind and first.suggestions[0] == top


def test_eagle_post_parse_rules(fixtures):
    schema = load_schema(fixtures / "sglang" / "help_0.5.23.txt")
    base = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"]
    partial = lint_args(base + ["--speculative-num-draft-tokens", "16"], schema)
    assert [d.kind for d in partial.errors] == ["partial_depth_flags"]
    rewritten = lint_args(base + ["--speculative-num-steps", "15", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "10"], schema)
    assert rewritten.ok
    warning = [d for d in rewritten.diagnoses if d.kind == "draft_tokens_rewritten"][0]
    assert "steps + 1 = 16" in warning.message
    paged = lint_args(base + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8",
                              "--page-size", "16"], schema)
    assert [d.kind for d in paged.errors] == ["topk_page_size"]
    unknown = lint_args(["--model-path", "/m", "--speculative-algorithm", "EAGLE-3", "--speculative-draft-model-path", "/d"], schema)
    assert unknown.errors[0].kind == "invalid_choice" and unknown.errors[0].suggestions[0] == "EAGLE3"
    assert strip_launcher(["python3", "-m", "sglang.launch_server", "--tp", "8"]) == ["--tp", "8"]


def test_lint_flags_cli_exit_codes(fixtures):
    help_text = str(fixtures / "sglang" / "help_0.5.23.txt")
    bad = cli("lint-flags", "--help-text", help_text, "--", "python3", "-m", "sglang.launch_server", *SEED)
    assert bad.returncode == 1 and "--num-speculative-tokens" in bad.stdout
    good_args = [a for a in SEED if a not in ("--num-speculative-tokens", "16")] + [
        "--speculative-num-steps", "15", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16"]
    good = cli("lint-flags", "--help-text", help_text, "--json", "--", *good_args)
    assert good.returncode == 0, good.stdout
    assert json.loads(good.stdout)["ok"] is True
    offline = cli("lint-flags", "--", *SEED)  # no host, no --help: the newest recorded release's flags, offline
    assert offline.returncode == 1 and "--num-speculative-tokens" in offline.stdout and "recorded from its wheel" not in offline.stderr
    assert cli("lint-flags", "--engine-version", "0.3.0", "--", *SEED).returncode == 2  # older than every recording
    assert cli("lint-flags", "--help-text", "/nonexistent", "--", *SEED).returncode == 2


SIGNATURE_LINES = [
    ("gpus_not_clean", "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=10.2"),
    ("not_enough_memory", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    ("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    ("port_in_use", "OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"),
    ("draft_wrong_architecture", "KeyError: 'midlayer.self_attn.qkv_proj.weight'"),
    ("draft_layers_keys", "KeyError: 'model.layers.0.mlp.gate_up_proj.weight'"),
    ("draft_too_many_layers", "ValueError: EAGLE3 currently only supports 1 layer"),
    ("trust_remote_code", "ValueError: The repository for /models/x requires you to execute the configuration file in that repo"),
    ("unknown_speculative_algorithm", "ValueError: Unknown speculative algorithm name: EAGLE-3"),
    ("nccl_error", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"),
]


@pytest.mark.parametrize("kind, line", SIGNATURE_LINES)
def test_crash_signatures(kind, line):
    lines = ["[2026-12-02 10:00:00] server_args=ServerArgs(model_path='/m')", "Traceback (most recent call last):",
             '  File "x.py", line 1, in <module>', line]
    report = diagnose_lines(lines)
    assert [d.kind for d in report.diagnoses] == [kind] and report.diagnoses[0].line == 4


def test_sigquit_wrapper_points_at_the_cause():
    lines = ["[2026-12-02 10:00:00] server_args=ServerArgs(model_path='/m')", "Traceback (most recent call last):",
             '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 2, in run',
             "AttributeError: 'NoneType' object has no attribute 'shape'",
             "[2026-12-02 10:00:01] Received sigquit from a child process. It usually means the child failed."]
    report = diagnose_lines(lines)
    assert report.diagnoses[0].kind == "child_failed"
    assert "AttributeError: 'NoneType' object has no attribute 'shape'" in report.diagnoses[0].message
    assert report.diagnoses[0].line == 4


def test_last_run_only_and_ready(fixtures):
    crash = (fixtures / "sglang" / "unrecognized_0.5.23.log").read_text().splitlines()
    second = ["# cockpit: launch 2026-12-02T10:00:00 gpu-server", "[2026-12-02 10:00:01] server_args=ServerArgs(model_path='/m')",
              "[2026-12-02 10:00:05] Load weight begin. avail mem=139.1 GB", "[2026-12-02 10:01:05] Load weight end.",
              "[2026-12-02 10:01:10] KV Cache is allocated. #tokens: 1000000",
              "[2026-12-02 10:02:00] The server is fired up and ready to roll!"]
    report = diagnose_lines(crash + second)
    assert report.ready and report.diagnoses == []
    assert [m for m, _ in report.milestones] == ["load weights", "weights loaded", "KV cache", "ready"]
    assert report.run_start_line == len(crash) + 1


def test_accept_len_one_means_draft_not_loaded():
    decode = "[2026-12-02 10:03:{:02d}] Decode batch, #running-req: 1, #token: 900, token usage: 0.01, accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 150.2, #queue-req: 0"
    lines = ["server_args=ServerArgs()", "The server is fired up and ready to roll!"] + [decode.format(i) for i in range(5)]
    report = diagnose_lines(lines)
    assert report.ready and [d.kind for d in report.diagnoses] == ["draft_weights_not_loaded"]
    healthy = lines[:2] + [decode.format(i).replace("accept len: 1.00", "accept len: 2.95") for i in range(5)]
    assert diagnose_lines(healthy).diagnoses == []


def test_bad_input_is_reported_plainly(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01" * 1000)
    with pytest.raises(CockpitError, match="binary"):
        diagnose_file(binary)
    huge = tmp_path / "huge.log"
    huge.write_text("x" * (5 * 1024 * 1024) + "\nusage: launch_server.py [-h]\nlaunch_server.py: error: unrecognized arguments: --bogus\n")
    report = diagnose_file(huge)
    assert [d.flag for d in report.diagnoses] == ["--bogus"]
    empty = tmp_path / "empty.log"
    empty.write_text("")
    report = diagnose_file(empty)
    assert report.diagnoses == [] and "empty" in report.notes[0]
    calm = tmp_path / "calm.log"
    calm.write_text("[2026-12-02 10:00:00] Load weight begin. avail mem=139.1 GB\n")
    report = diagnose_file(calm)
    assert report.diagnoses == [] and not report.ready and "no crash" in report.notes[0]


def test_tail_of_a_huge_log_reads_only_its_end(tmp_path, fixtures):
    """A 3 GB (sparse) log: only the last bytes are read, so it costs what a small one costs."""
    path = tmp_path / "big.log"
    noise = b"".join(b"[2026-12-02 10:00:00 TP0] Decode batch, #running-req: 1, accept len: 2.95, line %d\n" % i for i in range(120_000))
    with open(path, "wb") as handle:
        handle.truncate(3 * 1024**3)  # a hole: 3 GB that cost no disk
        handle.seek(0, 2)
        handle.write(b"\n" + noise + (fixtures / "sglang" / "unrecognized_0.5.23.log").read_bytes())
    started = time.monotonic()
    lines, _, truncated = read_log_tail(path)
    assert truncated and lines[-1].endswith("--num-speculative-tokens 16")
    report = diagnose_file(path)
    assert report.diagnoses[0].flag == "--num-speculative-tokens" and report.truncated
    assert time.monotonic() - started < 30  # a guard against reading 3 GB, not a performance target


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=30))
def test_fuzz_diagnose_never_raises(lines):
    diagnose_lines(lines)
    diagnose_lines(["usage: launch_server.py [-h]", *lines, "launch_server.py: error: " + (lines[0] if lines else "")])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000))
def test_fuzz_schema_parser_only_raises_cockpit_errors(text):
    try:
        parse_argparse_text(text)
    except CockpitError:
        pass
    try:
        parse_argparse_text("usage: sglang serve " + text)
    except CockpitError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.one_of(
    st.lists(st.sampled_from(["--model-path", "/m", "--tp", "8", "--speculative-num", "-", "--x=1", "five", "--speculative-eagle-topk",
                              "1", "--page-size", "--num-speculative-tokens", "=", "--", "-1", "--trust-remote-code=1"]), max_size=20),
    st.lists(st.text(max_size=20), max_size=20)))
def test_fuzz_lint_never_raises(words):
    from conftest import FIXTURES

    schema = load_schema(FIXTURES / "sglang" / "help_0.5.23.txt")
    lint_args(words, schema)


@pytest.mark.parametrize("log, expected", [
    ("ambiguous_0.5.6.log", [("ambiguous_option", "--speculative-draft", "--speculative-draft-model-path")]),
    ("underscore_0.5.6.log", [("unrecognized_argument", "--reasoning_parser", "--reasoning-parser qwen3")]),
    ("short_tp_0.5.6.log", [("unrecognized_argument", "-tp", "--tp-size 8")]),
    ("short_tp_0.5.23.log", [("unrecognized_argument", "-tp", "--tp-size 8")]),
    ("speculative_config_0.5.23.log", [("unrecognized_argument", "--speculative-config",
      "--speculative-algorithm EAGLE3 --speculative-draft-model-path /ckpt/eagle3 --speculative-num-steps 5 "
      "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6")]),
    ("vllm_style_0.5.6.log", [
        ("unrecognized_argument", "--gpu-memory-utilization", "--mem-fraction-static 0.9"),
        ("unrecognized_argument", "--max-model-len", "--context-length 8192"),
        ("unrecognized_argument", "--max-num-seqs", "--max-running-requests 64"),
        ("unrecognized_argument", "--enforce-eager", "--disable-cuda-graph"),
        ("unrecognized_argument", "--speculative-model", "--speculative-draft-model-path /ckpt/eagle3"),
        ("unrecognized_argument", "--num-speculative-tokens",
         "--speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6"),
    ]),
])
def test_recorded_vllm_style_and_version_crashes(fixtures, log, expected):
    report = diagnose_file(fixtures / "sglang" / log)
    assert [(d.kind, d.flag, d.suggestions[0]) for d in report.diagnoses] == expected


def test_lint_with_0_5_6_help_matches_its_real_verdicts(fixtures):
    """The lint's verdict on a line equals what the real 0.5.6 argparse said about it."""
    schema = load_schema(fixtures / "sglang" / "help_0.5.6.txt")
    ambiguous = lint_args(["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft", "/ckpt/eagle3"], schema)
    assert ambiguous.errors[0].kind == "ambiguous_option"  # argparse stops there; the lint goes on (no draft path given)
    real = diagnose_file(fixtures / "sglang" / "ambiguous_0.5.6.log").diagnoses[0]
    assert set(ambiguous.errors[0].suggestions) == set(real.suggestions)
    short = lint_args(["--model-path", "/m", "-tp", "8"], schema)
    assert [(d.kind, d.flag, d.value) for d in short.errors] == [("unrecognized_argument", "-tp", "8")]
