"""vLLM as a second engine (issue 31): its command line linted per version (the speculative JSON, the
old separate flags, SGLang's flags in a vLLM line), translated both ways, its crash texts named with
their fix, its log lines read into the same live figures as SGLang's.

Real texts: `vllm serve --help` and the argparse crashes of the released vLLM 0.10.2 wheel
(tests/fixtures/vllm, README there says how they were made).  Start-up failures and the periodic log
lines are vLLM's own format strings as its source has them (vllm-facts §2, §4.1): no vLLM ran on a GPU
to print them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.intake import clean
from cockpit.serving.live import LiveFigures
from cockpit.serving.helpschema import load_schema
from cockpit.vllm import specconfig
from cockpit.serving.logread import diagnose_lines
from cockpit.vllm.diagnose import diagnose
from cockpit.vllm.lint import fixed_line, lint, shipped_schema
from cockpit.vllm.logs import parse_spec, parse_throughput
from cockpit.vllm.crosswalk import sglang_to_vllm, vllm_to_sglang
from cockpit.vllm.versions import era

FIXTURES = Path(__file__).parent / "fixtures" / "vllm"
STORY = ["vllm", "serve", "/models/Llama-3.3-70B-Instruct", "--tensor-parallel-size", "8",
         "--speculative-model", "/ckpt/eagle3", "--num-speculative-tokens", "16"]
JSON16 = '{"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_tokens": 16}'


def kinds(report_or_list) -> list[str]:
    diagnoses = getattr(report_or_list, "diagnoses", report_or_list)
    return [d.kind for d in diagnoses]


def cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, input=stdin, timeout=60)


# --- the command line, per version -----------------------------------------------------------------

def test_the_old_separate_flags_are_named_with_the_json_that_replaced_them_per_version():
    assert lint(STORY, "0.7.3").ok and lint(STORY, "0.8.0").ok  # the flags of their time
    old = lint(STORY, "0.8.2")
    assert old.ok and kinds(old) == ["deprecated_flags"] and JSON16 in old.diagnoses[0].message
    for version in ("0.8.3", "0.10.2", "0.34.0"):
        report = lint(STORY, version)
        [error] = report.errors
        assert error.kind == "unrecognized_argument" and error.replacement == ("--speculative-config", JSON16), version
        assert f"vLLM {version} has none of these" in error.message
    assert fixed_line(STORY, "0.10.2") == [*STORY[:5], "--speculative-config", JSON16]
    assert lint(fixed_line(STORY, "0.10.2"), "0.10.2").ok


def test_a_version_beyond_the_newest_read_is_judged_by_the_newest_rules_and_says_so():
    report = lint(STORY, "0.41.0")
    [beyond] = [d for d in report.diagnoses if d.kind == "version_beyond_read"]
    assert "0.34.0" in beyond.message and not report.ok and report.diagnoses[-1] is beyond  # what is wrong first, how judged after
    # each recorded version by its own facts; another by its minor's recording, or the one before it, said so
    assert era("0.41.0").name == "0.34.0" and era("0.9.1").name == "0.9.2" and era("0.10.2").name == "0.10.2"
    assert era("0.8.2").name == "0.8.2"  # before every recording: the eras read by hand
    [nearest] = [d for d in lint(STORY, "0.10.1").diagnoses if d.kind == "version_nearest"]
    assert "judged by 0.10.2's recorded facts" in nearest.message


@pytest.mark.parametrize("version,severity,words", [
    ("0.8.5", "error", "unexpected keyword argument 'num_speculative_token'"),
    ("0.10.2", "warning", "ignored without a word"),
    ("0.34.0", "error", "Unexpected keyword argument"),
])
def test_an_unknown_key_is_judged_as_the_version_reads_it(version, severity, words):
    found = specconfig.check('{"method": "eagle3", "model": "/d", "num_speculative_token": 3}', version)
    [unknown] = [d for d in found if d.kind == "unknown_key"]
    assert unknown.severity == severity and words in unknown.message and "did you mean 'num_speculative_tokens'" in unknown.message
    assert json.loads(unknown.replacement[1]) == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}


def test_method_depth_draft_and_json_are_checked():
    bad_method = specconfig.check('{"method": "eagle-3", "model": "/d", "num_speculative_tokens": 3}', "0.10.2")
    [method] = bad_method
    assert method.kind == "invalid_choice" and method.replacement and json.loads(method.replacement[1])["method"] == "eagle3"
    assert "Unknown speculative method 'eagle-3'" in specconfig.check('{"method": "eagle-3", "model": "/d", "num_speculative_tokens": 3}',
                                                                      "0.34.0")[0].message
    assert kinds(specconfig.check('{"method": "eagle3", "model": "/d", "num_speculative_tokens": 0}', "0.10.2")) == ["invalid_value"]
    assert kinds(specconfig.check('{"method": "eagle3", "model": "/d"}', "0.10.2")) == ["missing_value"]
    assert kinds(specconfig.check('{"method": "eagle3", "num_speculative_tokens": 2}', "0.10.2")) == ["missing_draft"]
    assert kinds(specconfig.check('{"method": "eagle3", "model": "/d", "num_speculative_tokens": 2}', "0.10.2", draft_exists=False)) == \
        ["draft_not_found"]
    tp = specconfig.check('{"method": "eagle3", "model": "/d", "num_speculative_tokens": 2, "tensor_parallel_size": 8}', "0.34.0")
    assert kinds(tp) == ["unknown_key"] and '"draft_tensor_parallel_size": 8' in tp[0].replacement[1]
    assert kinds(specconfig.check("{method: eagle3}", "0.10.2")) == ["invalid_json"]
    # 0.8.2 reads a Python literal: JSON's true fails there, and eagle3 did not exist yet
    literal = specconfig.check('{"method": "eagle", "model": "/d", "num_speculative_tokens": 2, "disable_logprobs": true}', "0.8.2")
    assert kinds(literal) == ["invalid_json"] and "True/False/None" in literal[0].message
    assert "came in 0.8.5" in specconfig.check('{"method": "eagle3", "model": "/d", "num_speculative_tokens": 2}', "0.8.3")[0].message
    assert kinds(specconfig.check('{"model": "/d", "num_speculative_tokens": 2}', "0.10.2")) == ["method_missing"]


def test_the_dotted_form_and_underscores_are_read_as_vllm_reads_them():
    dotted = ["vllm", "serve", "/m", "--speculative-config.method", "eagle3", "--speculative-config.model", "/d",
              "--speculative-config.num_speculative_tokens", "0"]
    assert kinds(lint(dotted, "0.10.2")) == ["invalid_value"]  # the dotted keys merged, then checked
    assert kinds(lint(dotted, "0.8.5"))[0] == "unrecognized_argument"
    underscored = ["vllm", "serve", "/m", "--speculative_config", JSON16]
    assert lint(underscored, "0.10.2").values["--speculative-config"] == JSON16


def test_flags_are_checked_against_the_recorded_help_of_vllm_0_10_2():
    schema = load_schema(FIXTURES / "help_0.10.2.txt")
    assert schema.prog == "vllm serve" and len(schema.flags) > 150
    assert schema.get("--speculative-config").takes_value and schema.get("--dtype").choices[:2] == ("auto", "bfloat16")
    assert schema.get("--enable-prefix-caching").negation == "--no-enable-prefix-caching"
    line = ["vllm", "serve", "/m", "--tensor_parallel_size", "8", "--dtype", "fp16", "--gpu-memory-utilisation", "0.9",
            "--enable-prefix-caching", "--speculative-config", JSON16]
    report = lint(line, "0.10.2", schema)
    by_kind = {d.kind: d for d in report.diagnoses}
    assert set(by_kind) == {"invalid_choice", "unrecognized_argument"}, report.diagnoses
    assert by_kind["invalid_choice"].replacement == ("--dtype", "float16")
    assert by_kind["unrecognized_argument"].replacement == ("--gpu-memory-utilization", "0.9")
    assert "not a vLLM flag" in by_kind["unrecognized_argument"].message
    # the recorded parser of each released minor (cockpit/vllm/data/versions.json); before every recording, none
    assert shipped_schema("0.10.2").get("--speculative-config") is not None and shipped_schema("0.10.2").version == "0.10.2"
    assert shipped_schema("0.10.1").version == "0.10.2"  # its own minor's recording, the nearest
    assert shipped_schema("0.8.2") is None  # older than every recording: the eras read by hand judge it, no flags
    assert shipped_schema("0.10.2").get("--tensor-parallel-size").value_type == "int"  # the parser's own type


def test_sglang_flags_in_a_vllm_line_get_the_vllm_line_that_means_the_same():
    line = ["vllm", "serve", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
            "--speculative-num-steps", "5"]
    [other] = lint(line).diagnoses
    assert other.kind == "other_engine_flags"
    assert """vllm serve /m --speculative-config '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 5}'""" in other.message


# --- translation ---------------------------------------------------------------------------------

def test_a_depth_chain_translates_both_ways():
    sglang = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/L", "--tp-size", "8", "--port", "30000",
              "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/ckpt/e", "--speculative-num-steps", "5",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6", "--mem-fraction-static", "0.8"]
    vllm, notes = sglang_to_vllm(sglang)
    assert vllm == ["vllm", "serve", "/models/L", "--tensor-parallel-size", "8", "--port", "30000", "--speculative-config",
                    '{"method": "eagle3", "model": "/ckpt/e", "num_speculative_tokens": 5}']
    assert len(notes) == 1 and "--mem-fraction-static 0.8" in notes[0] and "not the same number" in notes[0]
    back, notes = vllm_to_sglang(vllm)
    assert back == ["python", "-m", "sglang.launch_server", *sglang[3:-2]] and notes == []
    tree, notes = sglang_to_vllm(sglang[:-2] + ["--speculative-eagle-topk", "4"])
    assert any("topk 4 is a tree" in n for n in notes)
    old, _ = vllm_to_sglang(STORY)  # the old separate flags translate too
    assert old[old.index("--speculative-num-steps") + 1] == "16" and old[old.index("--speculative-num-draft-tokens") + 1] == "17"


# --- crash texts ---------------------------------------------------------------------------------

def for_log(lines: list[str]):
    """A log as every diagnosis reads it (the registry finds whose it is): (label, diagnoses, ready, milestones) when
    it is read as vLLM's, None when as another engine's."""
    report = diagnose_lines(lines)
    if report.engine != "vllm":
        return None
    return "vLLM", report.diagnoses, report.ready, report.milestones


@pytest.mark.parametrize("version", ["0.10.2", "0.34.0"])
@pytest.mark.parametrize("name,kind,value", [
    ("unrecognized", "unrecognized_argument", "/ckpt/eagle3"),
    ("bad_json", "invalid_json", "{method: eagle3}"),
    ("bad_choice", "invalid_choice", "fp16"),
    ("bad_method", "invalid_choice", "eagle-3"),
    ("zero_tokens", "invalid_value", None),
    ("no_tokens", "missing_depth", None),
    ("unknown_key", "unknown_key", "num_speculative_token"),
])
def test_the_recorded_crashes_are_named_with_their_fix(version, name, kind, value):
    """Each text as the released wheel printed it (tests/fixtures/vllm), through parse-log's reading."""
    lines = (FIXTURES / f"{name}_{version}.log").read_text().splitlines()
    engine, found, ready, _ = for_log(lines)
    assert engine == "vLLM" and not ready and found, name
    first = found[0]
    assert (first.kind, first.value) == (kind, value), [(d.kind, d.value, d.message) for d in found]
    assert "Traceback" not in first.message and lines[first.line - 1]  # the line it was read from
    if name == "unrecognized":
        # every flag argparse listed, each with its value and the one --speculative-config that replaces them all
        assert [(d.flag, d.value) for d in found] == [("--speculative-model", "/ckpt/eagle3"), ("--num-speculative-tokens", "16")]
        assert all(d.replacement == ("--speculative-config", JSON16) for d in found)
    if name == "unknown_key" and version == "0.10.2":
        # 0.10.2 ignores the key without a word and stops later on the missing depth: the cause comes first, with its fix
        assert [d.kind for d in found] == ["unknown_key", "missing_depth"] and "ignored without a word" in first.message
        assert json.loads(first.replacement[1])["num_speculative_tokens"] == 3


def test_a_key_0_34_0_refuses_and_0_10_2_ignores():
    [tp] = for_log((FIXTURES / "tp_key_0.34.0.log").read_text().splitlines())[1]
    assert tp.kind == "unknown_key" and "draft_tensor_parallel_size" in tp.message
    # the lint says the same before launch, per version
    config = '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3, "tensor_parallel_size": 2}'
    assert [d.severity for d in specconfig.check(config, "0.34.0")] == ["error"]


def test_the_recorded_0_34_0_help_is_read_with_its_aliases():
    schema = shipped_schema("0.34.0")
    assert len(schema.flags) > 300 and "-sc" in schema.get("--speculative-config").option_strings
    assert schema.get("--spec-tokens").takes_value
    report = lint(["vllm", "serve", "/m", "-sc", JSON16, "--max-num-seq", "64"], "0.34.0", schema)
    assert [d.kind for d in report.diagnoses] == ["abbreviation"]  # vLLM takes a unique prefix; the lint says write it out


@pytest.mark.parametrize("line,kind", [
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
     "kv_cache_memory"),
    ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is "
     "larger than the available KV cache memory (9.52 GiB). Based on the available memory, the estimated maximum model length "
     "is 77952. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", "kv_cache_too_small"),
    ("ValueError: Free memory on device (21.3/139.8 GiB) on startup is less than desired GPU memory utilization (0.9, 125.8 GiB). "
     "Decrease GPU memory utilization or reduce GPU memory used by other processes.", "gpu_not_free"),
    ("ValueError: Eagle3 is only supported for ['llama', 'qwen'] models. Got self.target_model_config.hf_text_config.model_type="
     "'deepseek_v3'", "target_not_supported"),
    ("ValueError: num_speculative_tokens must be provided with speculative model unless the draft model config contains an "
     "n_predict parameter.", "missing_depth"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
     "1.19 GiB is free.", "oom"),
    ("Value error, Unknown speculative method 'eagle-3'. Built-in methods: ['ngram', 'eagle3']; registered custom methods: []",
     "invalid_choice"),
    ("OSError: [Errno 98] Address already in use", "port_in_use"),
])
def test_start_up_failures_are_named(line, kind):
    [found] = diagnose(["INFO 12-04 10:00:00 [api_server.py:1] vLLM API server version 0.10.2", line])
    assert found.kind == kind and found.line == 2


def test_a_log_that_came_up_is_not_a_crash_for_what_it_said_before(tmp_path):
    lines = ["(APIServer pid=7) INFO 12-04 10:00:00 [api_server.py:1] vLLM API server version 0.10.2",
             "(APIServer pid=7) WARNING 12-04 10:00:01 [x.py:1] Speculative Decoding is not supported by the V1 Engine. Falling back to V0.",
             "(APIServer pid=7) INFO 12-04 10:00:40 [launcher.py:1] Application startup complete."]
    engine, found, ready, milestones = for_log(lines)
    assert ready and found == [] and milestones == [("ready", 3)]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]) + "\n")
    out = cli("parse-log", str(log), "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 1 and [d["kind"] for d in data["diagnoses"]] == ["oom"] and data["diagnoses"][0]["line"] == 4
    assert "read as a vLLM log" in data["notes"]


# --- live figures --------------------------------------------------------------------------------

THROUGHPUT = ("\x1b[1;36m(APIServer pid=123)\x1b[0;0m INFO 12-04 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 120.5 "
              "tokens/s, Avg generation throughput: 1390.2 tokens/s, Running: 8 reqs, Waiting: 2 reqs, GPU KV cache usage: 9.3%, "
              "Prefix cache hit rate: 0.0%")
SPEC_0_10 = ("(APIServer pid=123) INFO 12-04 10:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.95, Accepted "
             "throughput: 900.12 tokens/s, Drafted throughput: 2400.00 tokens/s, Accepted: 9001 tokens, Drafted: 24000 tokens, "
             "Per-position acceptance rate: 0.780, 0.620, 0.550, Avg Draft acceptance rate: 37.5%")
SPEC_0_8_5 = ("INFO 05-01 10:00:00 [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: 61.5%, Mean acceptance length: 1.85, "
              "Accepted: 185 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.600, 0.450")


def test_vllm_lines_feed_the_same_live_figures_as_sglang():
    figures = LiveFigures(clock=lambda: 1000.0)
    figures.feed([clean(THROUGHPUT), clean(SPEC_0_10)])
    data = figures.to_json()
    assert (data["throughput_tok_s"], data["running"], data["queued"]) == (1390.2, 8, 2)
    assert abs(data["token_usage"] - 0.093) < 1e-9 and data["accept_length"]["window"] == 2.95
    spec = data["spec_decode"]
    assert spec["per_position"] == [0.78, 0.62, 0.55] and spec["draft_acceptance_rate"] == 0.375 and spec["drafted_tok_s"] == 2400.0
    assert data["activity"]["state"] == "serving"


def test_vllm_0_8_5_mean_length_is_given_with_the_bonus_token_as_sglang_counts_it():
    old = parse_spec(SPEC_0_8_5)
    assert old.as_printed == 1.85 and old.bonus_in_line is False and old.mean_acceptance_length == pytest.approx(2.85)
    new = parse_spec(clean(SPEC_0_10))
    assert new.bonus_in_line and new.mean_acceptance_length == 2.95
    assert abs(new.mean_acceptance_length - (1 + sum(new.per_position))) < 0.01  # vLLM's own identity (vllm-facts §4.1)
    assert parse_throughput("INFO 04-01 10:00:00 [metrics.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
                            "2.0 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 50.0%, CPU KV "
                            "cache usage: 0.0%.").waiting == 4  # V0's wording


def test_a_vllm_draft_that_is_not_used_is_flagged_with_vllms_causes():
    figures = LiveFigures(clock=lambda: 1000.0)
    dead = SPEC_0_10.replace("Mean acceptance length: 2.95", "Mean acceptance length: 1.00").replace(
        "0.780, 0.620, 0.550", "0.000, 0.000, 0.000")  # a line of vLLM's is consistent: its positions say the same
    for _ in range(3):
        figures.feed([clean(THROUGHPUT), clean(dead)])
    [flag] = figures.current_flags()
    assert flag.kind == "draft_not_used" and "method eagle for an EAGLE-3 draft" in flag.message and "SGLang" not in flag.message


# --- the command -----------------------------------------------------------------------------------

def test_lint_flags_takes_a_vllm_line_and_says_what_it_checked():
    out = cli("lint-flags", "--vllm", "0.10.2", "--json", "--", *STORY)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["engine"] == "vllm" and data["flags_checked"] and not data["ok"]
    out = cli("lint-flags", "--", *fixed_line(STORY))  # no version: the newest recorded vLLM's flags and rules, said so
    assert out.returncode == 0 and "flags checked against the flags of the newest recorded vLLM" in out.stdout, out.stdout
    assert "no version given: the --help lists" not in out.stdout  # the cockpit's own recording is not a --help to identify
    out = cli("lint-flags", "--vllm", "banana", "--", *STORY)
    assert out.returncode == 2 and "'banana' is not a vLLM version" in out.stderr and "Traceback" not in out.stderr


def test_an_sglang_line_with_vllms_flags_shows_the_sglang_line_that_means_the_same(fixtures):
    line = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "/d", "--num-speculative-tokens", "16"]
    out = cli("lint-flags", "--help-text", str(fixtures / "sglang" / "help_0.5.23.txt"), "--json", "--", *line)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["translation"]["flags"] == ["--num-speculative-tokens"]
    assert data["translation"]["line"][-6:] == ["--speculative-num-steps", "16", "--speculative-eagle-topk", "1",
                                                "--speculative-num-draft-tokens", "17"]
    assert data["translation"]["line"].count("--speculative-algorithm") == 1 and not data["translation"]["notes"]


def test_vllm_metrics_give_acceptance_from_its_own_counters():
    """/metrics of vLLM (vllm-facts §4.2): counters with _total, summed over engines; acceptance length
    = 1 + Δaccepted / Δdrafts between two reads, throughput from the generation counter."""
    def page(accepted: float, drafts: float, generated: float) -> str:
        rows = []
        for engine in ("0", "1"):  # two DP engines: their counters add up
            labels = f'engine="{engine}",model_name="llama"'
            rows += [f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted / 2}",
                     f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts / 2}",
                     f"vllm:generation_tokens_total{{{labels}}} {generated / 2}",
                     f"vllm:num_requests_running{{{labels}}} 4", f"vllm:num_requests_waiting{{{labels}}} 1",
                     f"vllm:kv_cache_usage_perc{{{labels}}} 0.05"]
        return "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n" + "\n".join(rows) + "\n"

    clock = [1000.0]
    figures = LiveFigures(clock=lambda: clock[0])
    figures.feed_metrics(page(1000, 500, 4000))
    clock[0] += 10
    figures.feed_metrics(page(1000 + 1900, 500 + 1000, 4000 + 29000))
    data = figures.to_json()
    assert data["accept_length"]["counters"] == pytest.approx(2.9) and data["throughput_tok_s"] == pytest.approx(2900.0)
    assert (data["running"], data["queued"], data["token_usage"]) == (8, 2, pytest.approx(0.05))  # requests add up; usage is a mean and "metrics" in data["sources"]


def test_lint_flags_reads_the_hosts_own_vllm(tmp_path):
    """`--host H`: the version and the flags of the vLLM installed there (here the STAND-IN replaying
    0.10.2's recorded --help), cached per host and version."""
    from cockpit.demo.world import serving_python

    python = serving_python(tmp_path / "world", sys.executable)
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.gpu-server]\nlocal = true\npython = "{python}"\n')
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    line = ["vllm", "serve", "/m", "--dtype", "fp16", "--speculative-config", JSON16]
    out = subprocess.run([sys.executable, "-m", "cockpit", "lint-flags", "-c", str(config), "--engine", "vllm", "--host", "gpu-server",
                          "--json", "--", *line], capture_output=True, text=True, timeout=120, env=env)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["version"] == "0.10.2" and data["flags_checked"], out.stderr
    assert [d["kind"] for d in data["diagnoses"]] == ["invalid_choice"] and data["diagnoses"][0]["replacement"] == ["--dtype", "float16"]
    assert list((tmp_path / "cache").rglob("gpu-server-0.10.2.json"))  # cached for the next time


def test_a_vllm_server_is_hung_only_by_its_own_sources_and_never_by_sglangs_words():
    """vLLM has no /server_info: its absence is not a stuck scheduler (the cockpit stops asking once a
    vLLM line or series is seen); hung needs /metrics showing requests running and no counter moving."""
    clock = [1000.0]
    figures = LiveFigures(clock=lambda: clock[0])
    figures.feed([clean("(APIServer pid=1) INFO 12-05 07:20:48 [api_server.py:1896] vLLM API server version 0.10.2"),
                  clean(THROUGHPUT)])
    assert figures.engine == "vllm" and figures.activity()[0] == "serving"

    def page(generated: float) -> str:
        return ("# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}\n'
                'vllm:num_requests_running{engine="0",model_name="m"} 8\n')

    clock[0] += 60
    figures.feed_metrics(page(5000), clock[0])
    clock[0] += 60
    figures.feed_metrics(page(9000), clock[0])  # counters move: work is being done
    assert figures.activity()[0] == "serving"
    clock[0] += 60
    figures.feed_metrics(page(9000), clock[0])
    clock[0] += 60
    figures.feed_metrics(page(9000), clock[0])  # nothing moves while 8 run
    state, why = figures.activity()
    assert state == "hung" and "SGLang" not in why and "/server_info" not in why, why


def test_the_server_pane_shows_vllms_acceptance_per_position():
    from cockpit.ui.widgets.server_log import live_text

    figures = LiveFigures(clock=lambda: 1000.0)
    figures.feed([clean(THROUGHPUT), clean(SPEC_0_10)])
    shown = live_text(figures.to_json()).plain
    assert "accept 2.95" in shown and "by position .78 .62 .55" in shown


def test_every_method_0_34_0_names_is_accepted_and_a_stranger_is_not_called_an_error():
    """0.34.0's own list of methods (as it printed it) passes; a name close to one is a typo (error);
    a name close to none may be a plugin's (warning)."""
    listed = (FIXTURES / "bad_method_0.34.0.log").read_text().split("Built-in methods: [", 1)[1].split("]", 1)[0]
    for method in [m.strip(" '") for m in listed.split(",")]:
        config = json.dumps({"method": method, "model": "/d", "num_speculative_tokens": 2})
        assert not [d for d in specconfig.check(config, "0.34.0") if d.kind == "invalid_choice"], method
    [typo] = specconfig.check('{"method": "eagel3", "model": "/d", "num_speculative_tokens": 2}', "0.34.0")
    assert typo.severity == "error" and "did you mean 'eagle3'" in typo.message
    [plugin] = specconfig.check('{"method": "acme_lookahead", "model": "/d", "num_speculative_tokens": 2}', "0.34.0")
    assert plugin.severity == "warning" and "plugin" in plugin.message


def test_the_keys_of_each_read_wheel_are_known():
    """A key the version has is never called unknown: 0.34.0 forbids the rest, so a missing one here
    would refuse a good line (the lists are SpeculativeConfig's init fields in each wheel)."""
    for version, key in (("0.34.0", "rejection_sample_method"), ("0.34.0", "speculator_options"), ("0.34.0", "xpress_topc"),
                         ("0.10.2", "speculative_token_tree"), ("0.10.2", "disable_by_batch_size")):
        config = json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 2, key: 1})
        assert not [d for d in specconfig.check(config, version) if d.kind == "unknown_key"], (version, key)
    assert [d.kind for d in specconfig.check(json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 2,
                                                          "disable_by_batch_size": 4}), "0.34.0")] == ["unknown_key"]


def test_an_sglang_log_that_names_vllm_modules_is_read_as_sglangs(fixtures):
    """SGLang 0.4 imported vLLM's kernels: its tracebacks name `vllm` modules.  That is no vLLM log."""
    crash = (fixtures / "sglang" / "unrecognized_0.5.23.log").read_text().splitlines()
    traceback = ['  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/linear.py", line 12, in <module>',
                 "    from vllm.distributed import get_tensor_model_parallel_rank"]
    assert for_log(traceback + crash) is None
    assert for_log(["[2025-01-01 10:00:00] server_args=ServerArgs(model_path='/m')", *traceback,
                    "ImportError: cannot import name 'x' from 'vllm'"]) is None
    assert for_log((FIXTURES / "unrecognized_0.10.2.log").read_text().splitlines()) is not None  # vLLM's own words


# --- issue 39: the figures exact in every version's lines; an idle server keeps its last acceptance; OOM named --------------

RATE_FIRST_WITH_BONUS = ("INFO 12-01 10:00:00 [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: 61.7%, Mean acceptance "
                         "length: 2.85, Accepted: 185 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.600, 0.450")


def test_a_mean_length_that_counts_the_bonus_token_is_never_given_one_more():
    """Whatever the field order, the line's own per-position rates say whether its mean counts the bonus token: 2.85
    is 2.85 (not 3.85), and a collapse to 1.01 is 1.01, flagged under load (not 2.01, unflagged)."""
    assert parse_spec(RATE_FIRST_WITH_BONUS).mean_acceptance_length == 2.85
    assert parse_spec(RATE_FIRST_WITH_BONUS).bonus_in_line is True
    collapsed = RATE_FIRST_WITH_BONUS.replace("length: 2.85", "length: 1.01").replace("0.800, 0.600, 0.450", "0.006, 0.003, 0.001")
    assert parse_spec(collapsed).mean_acceptance_length == 1.01
    figures = LiveFigures(clock=lambda: 1000.0)
    for _ in range(3):
        figures.feed([clean(THROUGHPUT), collapsed])
    assert [f.kind for f in figures.current_flags()] == ["draft_not_used"]
    # and a line that prints the mean without the bonus (0.8.5's formula, its wheel's source) still gets it added
    assert parse_spec(SPEC_0_8_5).mean_acceptance_length == pytest.approx(2.85)


IDLE = ("(APIServer pid=123) INFO 12-04 10:00:10 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%")


def test_an_idle_vllm_keeps_its_last_acceptance_said_as_the_last():
    """vLLM logs no SpecDecoding line while nothing is drafted: the last acceptance read stays, with its age, never as
    the current window's (the pane and `cockpit server` say the same)."""
    from cockpit.serving.live import render_live

    now = [1000.0]
    figures = LiveFigures(clock=lambda: now[0])
    figures.feed([clean(THROUGHPUT), clean(SPEC_0_10)])
    for _ in range(3):
        now[0] += 10
        figures.feed([clean(IDLE)])
    accept = figures.to_json()["accept_length"]
    assert accept["window"] is None and accept["last"] == 2.95 and accept["last_age_s"] == 30.0
    assert "none drafted in it; the last 2.95, 30 s ago" in render_live(figures.to_json())
    figures.feed([clean(THROUGHPUT), clean(SPEC_0_10.replace("length: 2.95", "length: 3.10"))])
    assert figures.to_json()["accept_length"]["window"] == 3.10 and "last" not in figures.to_json()["accept_length"]


def _rendered(source_line: str) -> str:
    """A recorded source line's message (its string literals joined, each {placeholder} a number), as vLLM prints it."""
    import re as _re

    body = source_line.split(": ", 1)[1]
    text = "".join(m.group(1) for m in _re.finditer(r'f?"((?:[^"\\]|\\.)*)"', body))
    return _re.sub(r"\{[^}]*\}", "4096", text)


def test_the_kv_cache_start_failure_is_an_oom_with_vllms_fix_in_every_recorded_versions_words():
    """Each recorded wheel's own KV-cache failure texts (its source, cockpit/vllm/data/versions.json): named with the
    --gpu-memory-utilization / --max-model-len fix, and the live watch calls it an OOM, not only a crash."""
    from cockpit.vllm.versions import recorded_facts

    seen = 0
    for version, facts in recorded_facts().items():
        for source in facts["kv_cache_sources"]:
            message = _rendered(source)
            if "max seq len (" not in message and "KV cache is needed" not in message:
                continue  # its "No available memory for the cache blocks": another test
            line = "ValueError: " + message
            found = diagnose([line])
            assert found and found[0].kind == "kv_cache_too_small", (version, line)
            assert "--max-model-len" in found[0].message and "--gpu-memory-utilization" in found[0].message
            figures = LiveFigures(clock=lambda: 0.0)
            figures.feed([line])
            assert [f.kind for f in figures.current_flags()] == ["oom"], (version, line)
            assert "--gpu-memory-utilization" in figures.current_flags()[0].message
            seen += 1
    assert seen >= len(recorded_facts())  # every version has one


def test_deep_lint_reads_the_hosts_own_speculative_config_through_its_python(tmp_path, monkeypatch):
    """`lint-flags --host H --deep` for vLLM: the host's own SpeculativeConfig (its keys, its methods, whether it refuses
    an unknown key) read by its own interpreter, no server started.  The host's vLLM here is a STAND-IN package (a real
    Python runs the real script against it): version 0.10.9, a stdlib dataclass whose method literal has `eagle3` and a
    made-up `eagle9`, and a key no recorded version has; its `vllm serve --help` is 0.10.2's recorded one."""
    import asyncio

    from cockpit.config import HostConfig
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport
    from cockpit.vllm.lint import lint_line

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    package = tmp_path / "site" / "vllm"
    (package / "entrypoints" / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.10.9"\n')
    (package / "config.py").write_text(
        "import dataclasses\nfrom typing import Literal, Optional\n\n@dataclasses.dataclass\nclass SpeculativeConfig:\n"
        "    method: Optional[Literal['ngram', 'eagle', 'eagle3', 'eagle9']] = None\n    model: Optional[str] = None\n"
        "    num_speculative_tokens: Optional[int] = None\n    host_only_key: int = 0\n")
    (package / "entrypoints" / "__init__.py").write_text("")
    (package / "entrypoints" / "cli" / "__init__.py").write_text("")
    (package / "entrypoints" / "cli" / "main.py").write_text(
        f"import sys\nprint(open({str(FIXTURES / 'help_0.10.2.txt')!r}).read())\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    transport = LocalTransport(HostConfig(name="here", local=True), CommandLog())
    line = ["vllm", "serve", "/m", "--speculative-config",
            '{"method": "eagle9", "model": "/d", "num_speculative_tokens": 3, "host_only_key": 1}']
    deep = asyncio.run(lint_line(line, transport=transport, python=sys.executable, deep=True))
    assert deep.report.ok, deep.text  # its own method and its own key: fine on that host
    assert "its SpeculativeConfig, read there" in deep.text
    typo = [*line[:-1], '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3, "host_only_kye": 1}']
    refused = asyncio.run(lint_line(typo, transport=transport, python=sys.executable, deep=True))
    [problem] = [d for d in refused.report.diagnoses if d.kind == "unknown_key"]
    assert "host_only_key" in problem.suggestions[0] and problem.severity == "error"  # a stdlib dataclass: a TypeError
    shallow = asyncio.run(lint_line(line, transport=transport, python=sys.executable))  # the recorded rules: eagle9 unknown
    assert {d.value for d in shallow.report.diagnoses} >= {"eagle9", "host_only_key"}
