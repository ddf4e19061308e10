"""Crash diagnosis that holds on every SGLang version from 0.4.6 to 0.5.23 (issue 16): each message
as each version's own source words it (cockpit/sglang/data/versions.json, read from the real wheels
by tests/fixtures/record/sglang_versions.py), values read from the error line itself, the root cause
first, and suggestions that type-check against every recorded `--help`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.sglang import versions
from cockpit.serving.logread import diagnose_file, diagnose_lines
from cockpit.sglang.diagnose import CONSEQUENCES
from cockpit.sglang.lint import lint as lint_args
from cockpit.serving.helpschema import load_schema
from cockpit.serving.suggest import suggest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sglang"
SERVER_ARGS = "[2026-12-03 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=8, mem_fraction_static=0.91, port=30123)"
CASES = [(v, kind, text) for v in versions.table() for kind, texts in versions.messages(v).items() for text in texts]


def instantiate(template: str) -> str:
    """A message as the server prints it: its placeholders filled the way the code fills them."""
    samples = {"name": "EAGLE-3", "bootstrap_port": "30123", "dist_init_port": "dist_init_port=30123", "e": "RuntimeError: boom",
               "traceback": "Traceback (most recent call last): ...", "last_traceback": "RuntimeError: boom"}

    def fill(match: re.Match) -> str:
        key = match.group(1).rstrip("=")
        return samples.get(key, f"{key}=1" if match.group(1).endswith("=") else "X")

    text = re.sub(r"\{([A-Za-z_][A-Za-z_0-9.]*=?)(?:[!:][^}]*)?\}", fill, template)
    return text.replace("%d", "30123").replace("%s", "X")


def test_every_version_of_the_range_is_recorded():
    recorded = list(versions.table())
    lines = {v.split(".post")[0] for v in recorded}  # the newest patch of each release line, 0.4.0 to the newest
    assert recorded[0].startswith("0.4.0") and recorded[-1] == "0.5.23"
    assert {f"0.4.{n}" for n in range(11)} | {f"0.5.{n}" for n in range(1, 24)} <= lines
    assert versions.algorithms("0.4.6.post5") == ["EAGLE", "EAGLE3", "NEXTN"]
    assert "DFLASH" in versions.algorithms("0.5.23") and "DFLASH" not in versions.algorithms("0.5.2")
    # a version is judged by its own line's recording (a patch or a post release), else the nearest before it
    assert versions.known("0.5.24") == "0.5.23" and versions.known("0.5.5") == "0.5.5.post3"
    assert versions.known("0.5.5.post1") == "0.5.5.post3" and versions.known("0.4.6") == "0.4.6.post5"
    assert all(versions.table()[v]["flags"] for v in recorded)


@pytest.mark.parametrize("version, kind, template", CASES, ids=[f"{v}-{k}-{i}" for i, (v, k, _) in enumerate(CASES)])
def test_every_diagnosis_on_every_recorded_version(version, kind, template):
    line = f"[2026-12-03 10:00:01] {instantiate(template)}"
    report = diagnose_lines([SERVER_ARGS, line])
    found = {d.kind: d for d in report.diagnoses}
    assert kind in found, (line, [d.kind for d in report.diagnoses])
    diagnosis = found[kind]
    if kind == "port_in_use":
        assert "port 30123 is taken" in diagnosis.message and diagnosis.value == "30123"
    if kind == "not_enough_memory":
        assert "--mem-fraction-static 0.91" in diagnosis.message
    if kind == "unknown_speculative_algorithm" and "{name}" in template:
        assert diagnosis.value == "EAGLE-3" and diagnosis.replacement == ("--speculative-algorithm", "EAGLE3")


def test_the_port_of_uvicorns_bind_error_is_named():
    line = ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use")
    [diagnosis] = diagnose_lines([line]).diagnoses
    assert diagnosis.kind == "port_in_use" and "port 30000 is taken" in diagnosis.message


def test_the_value_comes_from_the_error_line_not_the_quoted_source():
    """A real traceback of 0.5.23's SpeculativeAlgorithm.from_string: the source line it quotes holds `{name}`."""
    report = diagnose_file(FIXTURES / "unknown_algorithm_traceback_0.5.23.log")
    [diagnosis] = report.diagnoses
    assert diagnosis.value == "EAGLE-3" and diagnosis.line == 5
    assert ", ".join(versions.algorithms("0.5.23")) in diagnosis.message  # the version's own list, not an old one
    report = diagnose_file(FIXTURES / "prefix_draft_0.4.6.post5.log")
    assert [d.kind for d in report.diagnoses] == ["no_accelerator"] and report.diagnoses[0].line == 16  # the error, not `raise ...`


OOM = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2512, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 139.81 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 138.68 GiB memory in use.
[2026-12-03 10:00:05 TP3] Scheduler hit an exception: Traceback (most recent call last):
[2026-12-03 10:00:05] Received sigquit from a child process. It usually means the child failed."""


@pytest.mark.parametrize("cause, kind", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 139.81 GiB of which "
     "1.12 GiB is free.", "cuda_oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "not_enough_memory"),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl_error"),
])
def test_the_root_cause_comes_first(cause, kind):
    lines = [SERVER_ARGS, "[2026-12-03 10:00:05 TP3] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2512, in run_scheduler_process',
             "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)", cause,
             "[2026-12-03 10:00:05] Received sigquit from a child process. It usually means the child failed."]
    kinds = [d.kind for d in diagnose_lines(lines).diagnoses]
    assert kinds[0] == kind and "scheduler_died" in kinds[1:], kinds
    assert all(k in CONSEQUENCES for k in kinds[1:])


def test_oom_names_the_gpu_the_amounts_and_the_fraction():
    [first, *_] = diagnose_lines([SERVER_ARGS, *OOM.splitlines()]).diagnoses
    assert first.kind == "cuda_oom"
    assert "on GPU 3" in first.message and "tried to allocate 2.00 GiB; 1.12 GiB free of 139.81 GiB" in first.message
    assert "--mem-fraction-static 0.91" in first.message


HELPS = sorted(FIXTURES.glob("help_*.txt"))


@pytest.mark.parametrize("help_file", HELPS, ids=[h.stem for h in HELPS])
def test_suggestions_type_check_on_every_recorded_version(help_file):
    schema = load_schema(help_file)
    wrong = [("--num-speculative-tokens", "16"), ("--gpu-memory-utilization", "0.9"), ("--max-model-len", "8192"),
             ("--speculative-model", "/ckpt/eagle3"), ("--max-num-seqs", "64"), ("--spec-depth", "5"), ("--gpu-id", "0.9"),
             ("--model", "32768"), ("--draft", "/ckpt/e"), ("--mem-fraction", "most")]
    for flag, value in wrong:
        for fix in suggest(flag, value, schema):
            first = fix.text.split(" ")[0]
            target = schema.get(first)
            if target is not None and fix.replacement and len(fix.replacement) == 2:
                assert target.accepts(value), (help_file.name, flag, value, fix.text, target.value_kind)
    texts = [f.text for f in suggest("--gpu-memory-utilization", "0.9", schema)]
    assert not any(t.startswith(("--base-gpu-id", "--model-path", "--hicache-host-memory-fraction")) for t in texts), texts


@pytest.mark.parametrize("help_file", HELPS, ids=[h.stem for h in HELPS])
def test_the_schema_and_the_lint_work_with_every_recorded_version(help_file):
    schema = load_schema(help_file)
    assert len(schema.flags) > 100 and schema.get("--speculative-num-steps") is not None
    report = lint_args(["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
                        "--num-speculative-tokens", "16"], schema)
    [bad] = report.errors
    assert bad.flag == "--num-speculative-tokens" and "--speculative-num-steps 16" in bad.message
    good = lint_args(["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
                      "--speculative-num-steps", "5", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6"], schema)
    assert good.ok, [d.message for d in good.errors]
