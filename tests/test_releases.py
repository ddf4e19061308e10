"""Release facts as ranges (issue 47): SGLang's flags recorded from every release line's wheel and checked against the
real --help of the releases recorded here; which recording judges a version (patch releases, post releases, release
candidates, one newer or older than every recording); each flag's span, and a flag or a choice of another release named
as such with what this release takes; values typed as the engines check them; the whole fixed line from the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.serving.helpschema import load_schema
from cockpit.serving.releases import version_key
from cockpit.sglang import versions as sglang_versions
from cockpit.vllm import versions as vllm_versions

FIXTURES = Path(__file__).parent / "fixtures"
SEED = ["python", "-m", "sglang.launch_server", "--model-path", "/models/target", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/ckpt/eagle3", "--num-speculative-tokens", "16"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("release", ["0.4.6.post5", "0.5.2", "0.5.17", "0.5.23"])
def test_sglangs_recorded_flags_are_what_its_real_help_lists(release):
    """The recording (its parser run from the wheel) against `launch_server --help` of the same release, recorded apart:
    the same flags, switches and choices; a list the release lets plugins extend is recorded open (never judged)."""
    real = load_schema(str(FIXTURES / "sglang" / f"help_{release}.txt"))
    recorded = sglang_versions.shipped_schema(release)
    assert recorded is not None and recorded.version == release
    listed = set(real.options) - {"-h", "--help"}
    assert listed <= set(recorded.options), sorted(listed - set(recorded.options))
    hidden = set(recorded.options) - listed  # argparse.SUPPRESS: taken, never listed
    assert len(hidden) <= 3, sorted(hidden)
    opened = {row[0][0] for row in sglang_versions.table()[release]["flags"] if row[5]}
    for flag in (f for f in real.flags if f.name not in ("-h", "--help")):
        mine = recorded.get(flag.name)
        assert mine is not None and mine.takes_value == flag.takes_value, flag.name
        if flag.choices and flag.name not in opened:
            assert set(mine.choices or ()) == set(flag.choices), flag.name
        if flag.name in opened:
            assert mine.choices is None


@pytest.mark.parametrize("engine, given, judged", [
    (vllm_versions.releases, "0.10.1.1", "0.10.2"), (vllm_versions.releases, "0.8.5.post1", "0.8.5.post1"),
    (vllm_versions.releases, "0.11.1", "0.11.2"), (vllm_versions.releases, "v0.19.0", "0.19.1"),
    (vllm_versions.releases, "0.20.0rc1", "0.20.2"), (vllm_versions.releases, "0.99.0", "0.34.0"),
    (sglang_versions.releases, "0.5.5", "0.5.5.post3"), (sglang_versions.releases, "0.5.5.post1", "0.5.5.post3"),
    (sglang_versions.releases, "0.4.6", "0.4.6.post5"), (sglang_versions.releases, "0.5.24", "0.5.23"),
    (sglang_versions.releases, "0.5.2+cu128", "0.5.2"),
])
def test_a_version_is_judged_by_its_lines_recording_and_says_so(engine, given, judged):
    releases = engine()
    assert releases.nearest(given) == judged
    note = releases.judged_by(given)
    if judged == given.lstrip("v").split("+")[0]:
        assert note is None
    else:
        assert note is not None and judged in note and given in note
        assert ("newer than every" in note) == releases.beyond(given)


def test_version_numbers_order_as_releases_do():
    ordered = ["0.8.4", "0.8.5", "0.8.5.post1", "0.9.0rc1", "0.9.2", "0.10.1", "0.10.1.1", "0.10.2", "0.34.0"]
    keys = [version_key(v) for v in ordered]
    assert all(k is not None for k in keys) and keys == sorted(keys)  # type: ignore[type-var]
    assert version_key("vllm") is None and version_key("") is None


@pytest.mark.parametrize("engine", [sglang_versions.releases, vllm_versions.releases], ids=["sglang", "vllm"])
def test_every_flag_of_another_release_is_named_with_its_span(engine):
    """Over every recorded release x every option any recorded release takes: the release's own options pass, every other
    one is named as arrived later or gone, and what it offers instead is an option of that very release."""
    releases = engine()
    everything = set(releases.spans())
    for release in releases.versions:
        own = set(releases.schema_of(release).options)  # type: ignore[misc]  (the recorded parser itself)
        for option in sorted(everything):
            said = releases.out_of_range(option, release)
            if option in own:
                assert said is None, (release, option)
                continue
            assert said is not None, (release, option)
            first, last = releases.spans()[option]
            later = releases.key(release) < releases.key(first)
            gone = releases.key(release) > releases.key(last)
            assert ("arrived after" in said.message or "arrived by" in said.message) == later, said.message
            assert ("gone by" in said.message or "last recorded" in said.message) == gone, said.message
            assert ("is missing from" in said.message) == (not later and not gone), said.message
            assert said.replacement is None or said.replacement[0] in own, (release, option, said.replacement)


def test_sc_on_a_release_before_it_is_named_and_fixed_to_the_long_flag():
    proc = cli("lint-flags", "--vllm", "0.11.1", "--json", "--", "vllm", "serve", "m", "-sc",
               '{"method":"eagle3","model":"/d","num_speculative_tokens":3}')
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["version"] == "0.11.1"
    [dated] = [d for d in data["diagnoses"] if d["kind"] == "flag_not_in_release"]
    assert dated["flag"] == "-sc" and "arrived after 0.18.1" in dated["message"] and "--speculative-config" in dated["message"]
    assert data["fixed_line"]["clean"] and data["fixed_line"]["line"][3] == "--speculative-config"


def test_the_seeds_sglang_line_is_checked_offline_with_its_fixed_line():
    """The crash this project began with, judged without a host or a --help (the recorded 0.5.2), and its fix printed."""
    proc = cli("lint-flags", "--sglang", "0.5.2", "--", *SEED)
    assert proc.returncode == 1 and proc.stderr == ""
    assert "--num-speculative-tokens 16 is not an SGLang flag" in proc.stdout
    assert "flags of SGLang 0.5.2 recorded from its wheel" in proc.stdout
    fixed = cli("lint-flags", "--engine-version", "0.5.2", "--fix", "--", *SEED)
    assert fixed.returncode == 0 and fixed.stderr == ""
    line = fixed.stdout.split()
    assert line[:9] == SEED[:9] and "--num-speculative-tokens" not in line
    assert line[line.index("--speculative-num-steps") + 1] == "16" and line[line.index("--speculative-eagle-topk") + 1] == "1"
    again = cli("lint-flags", "--sglang", "0.5.2", "--", *line)
    assert again.returncode == 0, again.stdout


def test_readme_shows_what_the_cli_says_of_the_seeds_line():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    out = cli("lint-flags", "--sglang", "0.5.2", "--", *SEED[:-2], "--num-speculative-tokens", "16").stdout
    for said in ("(flags checked against the flags of SGLang 0.5.2 recorded from its wheel)", "SGLang 0.5.2 would refuse this command line",
                 "the whole line fixed (clean; checked again by the same release):"):
        assert said in out and said in readme
    assert len(readme.splitlines()) <= 300  # depth lives in docs/


def test_a_patch_release_is_a_version_and_a_bad_one_a_usage_error():
    assert cli("lint-flags", "--vllm", "0.10.1.1", "--", "vllm", "serve", "m").returncode == 0
    bad = cli("lint-flags", "--engine-version", "ten", "--", "vllm", "serve", "m")
    assert bad.returncode == 2 and "not" in bad.stderr and "Traceback" not in bad.stderr


def test_a_choice_of_a_later_release_is_never_swapped_for_another_method():
    proc = cli("lint-flags", "--sglang", "0.4.2", "--json", "--", *SEED[:9], "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    data = json.loads(proc.stdout)
    [said] = [d for d in data["diagnoses"] if d["flag"] == "--speculative-algorithm"]
    assert said["kind"] == "choice_not_in_release" and "EAGLE3" in said["message"] and said["replacement"] is None
    assert "fixed_line" not in data or "EAGLE3" in data["fixed_line"]["line"]


@pytest.mark.parametrize("words, kind, fix", [
    (["--gpu-memory-utilization", "90"], "invalid_value", ["--gpu-memory-utilization", "0.9"]),
    (["--gpu-memory-utilization", "1.5"], "invalid_value", None),  # no percentage: nothing guessed
    (["--tensor-parallel-size="], "missing_value", None),
    (["--dtype", "fp8"], "invalid_choice", ["--quantization", "fp8"]),
])
def test_values_are_typed_as_the_engine_types_them(words, kind, fix):
    proc = cli("lint-flags", "--json", "--", "vllm", "serve", "m", *words)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1
    [said] = [d for d in data["diagnoses"] if d["severity"] == "error"]
    assert said["kind"] == kind and (said["replacement"] == fix), said


def test_the_drafts_parallelism_is_checked_against_the_targets():
    config = '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2}'
    bad = cli("lint-flags", "--fix", "--", "vllm", "serve", "m", "--tensor-parallel-size", "1", "--speculative-config", config)
    assert bad.returncode == 0 and '"draft_tensor_parallel_size": 1' in bad.stdout and '"num_speculative_tokens": 3' in bad.stdout
    good = cli("lint-flags", "--", "vllm", "serve", "m", "--tensor-parallel-size", "2", "--speculative-config", config)
    assert good.returncode == 0, good.stdout


@pytest.mark.parametrize("lines", [
    ["(APIServer pid=4242) INFO 12-07 08:00:03 [api_server.py:1839] vLLM API server version 0.27.0",
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig", "gpu_memory_utilization",
     "  Input should be less than or equal to 1 [type=less_than_equal, input_value=90.0, input_type=float]"],
    ["INFO 12-07 08:00:03 [api_server.py:1839] vLLM API server version 0.10.1.1",
     "ValueError: GPU memory utilization must be less than 1.0. Got 90.0."],
], ids=["pydantic", "0.10"])
@pytest.mark.parametrize("wrapper", ["plain", "journald", "docker"])
def test_each_releases_refusal_of_a_percentage_is_read_with_its_fraction(tmp_path, lines, wrapper):
    prefix = {"plain": "", "journald": "Dec 07 08:00:01 gpu1 vllm[4242]: ", "docker": "2026-12-07T08:00:01.000000000Z "}[wrapper]
    log = tmp_path / "vllm.log"
    log.write_text("".join(prefix + line + "\n" for line in lines))
    proc = cli("parse-log", "--json", str(log))
    data = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stdout
    [said] = [d for d in data["diagnoses"] if d["flag"] == "--gpu-memory-utilization"]
    assert said["replacement"] == ["--gpu-memory-utilization", "0.9"]


def test_a_lone_error_line_wrapped_at_80_columns_is_read_whole(tmp_path):
    line = "vllm serve: error: argument --dtype: invalid choice: 'fp8' (choose from auto, bfloat16, float, float16, float32, half)"
    log = tmp_path / "tmux.log"
    log.write_text("\n".join(line[i:i + 80] for i in range(0, len(line), 80)) + "\n")
    data = json.loads(cli("parse-log", "--json", str(log)).stdout)
    [said] = [d for d in data["diagnoses"] if d["severity"] == "error"]
    assert said["kind"] == "invalid_choice" and said["value"] == "fp8" and said["replacement"] == ["--quantization", "fp8"]


VLLM_LOGS = sorted((FIXTURES / "vllm").glob("*.log"))
WRAPPERS = {
    "docker": lambda line: "2026-12-07T08:00:01.123456789Z " + line,
    "kubectl": lambda line: "[pod/vllm-0/vllm] 2026-12-07T08:00:01.123456789Z " + line,
    "journald": lambda line: "Dec 07 08:00:01 gpu1 vllm[4242]: " + line,
    "colour": lambda line: line.replace("error", "\x1b[01;31m\x1b[Kerror\x1b[m\x1b[K").replace("ERROR", "\x1b[31mERROR\x1b[0m"),
}


def _tmux80(text: str) -> str:
    """What a tmux pane 80 columns wide shows of a log (capture-pane -p: colour gone, every longer line cut into 80-column
    pieces)."""
    out = []
    for line in (re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw) for raw in text.splitlines()):
        out += [line[i:i + 80] for i in range(0, len(line), 80)] or [""]
    return "\n".join(out) + "\n"


def _read(path: Path) -> set[tuple]:
    data = json.loads(cli("parse-log", "--json", str(path)).stdout)
    return {(d["kind"], d["flag"], d["value"], d["severity"]) for d in data["diagnoses"]}


@pytest.mark.slow
@pytest.mark.parametrize("log", VLLM_LOGS, ids=lambda p: p.stem)
def test_every_recorded_vllm_refusal_reads_the_same_through_every_wrapper(tmp_path, log):
    """Each release's recorded refusal x every wrapper a user reads it through: the same diagnoses as the plain log."""
    plain = _read(log)
    assert plain, f"{log.name}: the plain log names nothing"
    text = log.read_text()
    for name, wrap in {**WRAPPERS, "tmux80": None}.items():
        wrapped = tmp_path / f"{name}_{log.name}"
        wrapped.write_text(_tmux80(text) if wrap is None else "".join(wrap(line) + "\n" for line in text.splitlines()))
        assert _read(wrapped) == plain, f"{log.name} through {name}"


def test_a_flag_of_a_later_release_refused_in_a_log_is_never_suggested_again(tmp_path):
    """vLLM 0.19 refusing --spec-method (0.22 on): parse-log offered the very same flag; now the one config every
    release takes, and which releases take the flag."""
    log = tmp_path / "vllm.log"
    log.write_text("usage: vllm serve [model_tag] [options]\nvllm serve: error: unrecognized arguments: --spec-method eagle3 "
                   "--spec-tokens 3\n")
    data = json.loads(cli("parse-log", "--json", str(log)).stdout)
    said = {d["flag"]: d for d in data["diagnoses"]}
    assert set(said) == {"--spec-method", "--spec-tokens"}
    for diagnosis in said.values():
        assert diagnosis["replacement"][0] == "--speculative-config" and diagnosis["flag"] not in diagnosis["suggestions"][0]
        assert json.loads(diagnosis["replacement"][1]) == {"method": "eagle3", "num_speculative_tokens": 3}
        assert "recorded: 0.22.1 on" in diagnosis["message"]
