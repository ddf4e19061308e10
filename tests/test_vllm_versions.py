"""Every recorded vLLM release judged by its own recordings (tests/fixtures/vllm/versions/V: what each released wheel
printed for the same command lines, recorded by tests/fixtures/record/vllm_versions.py; cockpit/vllm/data/versions.json:
its facts).  For each version: each crash kind named with its fix, every flag argparse listed with its value, the
lint agreeing with the wheel (a line the wheel refused is refused, a line it took is taken), and its own facts used."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from cockpit.serving.logread import diagnose_lines
from cockpit.vllm.lint import lint, shipped_schema
from cockpit.vllm.versions import era, nearest, recorded, recorded_facts

FIXTURES = Path(__file__).parent / "fixtures" / "vllm" / "versions"
VERSIONS = sorted((p.name for p in FIXTURES.iterdir() if p.is_dir()), key=lambda v: [int(n) for n in re.findall(r"\d+", v)])
_spec = importlib.util.spec_from_file_location("vllm_cases", Path(__file__).parent / "fixtures" / "record" / "vllm_cases.py")
assert _spec is not None and _spec.loader is not None
vllm_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vllm_cases)
CASES = vllm_cases.cases("/models")
ARGPARSE_ERROR = re.compile(r"^(?:vllm(?: serve)?|\S*api_server\.py): error: ", re.MULTILINE)


def log(version: str, case: str) -> str | None:
    path = FIXTURES / version / f"{case}.log"
    return path.read_text(errors="replace") if path.exists() else None


def read(version: str, case: str):
    text = log(version, case)
    if text is None:
        pytest.skip(f"{case} was not recorded for {version}")
    report = diagnose_lines(text.splitlines())
    assert report.engine == "vllm", (version, case)
    return text, report.diagnoses


def test_every_recorded_version_has_its_facts_and_its_recordings():
    assert VERSIONS and set(VERSIONS) == set(recorded())
    for version in VERSIONS:
        facts = recorded_facts()[version]
        assert facts["flags"] and facts["json_config"], version  # its parser was read
        assert (FIXTURES / version / "help.txt.gz").exists(), version
        assert nearest(version) == version and era(version).name == version


@pytest.mark.parametrize("version", VERSIONS)
def test_every_unrecognized_flag_is_named_with_its_value_and_the_one_fix(version):
    for case, expected, config in (
            ("unrecognized", [("--speculative-model", "/ckpt/eagle3"), ("--num-speculative-tokens", "16")],
             {"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_tokens": 16}),
            ("unrecognized_sglang", [("--speculative-algorithm", "EAGLE3"), ("--speculative-draft-model-path", "/ckpt/eagle3"),
                                     ("--speculative-num-steps", "5"), ("--speculative-eagle-topk", "1"),
                                     ("--speculative-num-draft-tokens", "16")],
             {"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_tokens": 5})):
        text, found = read(version, case)
        listed = re.search(r"unrecognized arguments: (.*)", text)
        assert listed, (version, case)
        named = [(d.flag, d.value) for d in found if d.kind == "unrecognized_argument"]
        assert named == expected, (version, case, named)
        for diagnosis in found:
            assert diagnosis.replacement is not None and diagnosis.replacement[0] == "--speculative-config"
            assert json.loads(diagnosis.replacement[1]) == config


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_values_are_named_with_the_value_meant(version):
    _, found = read(version, "bad_dtype_bf16")
    assert (found[0].kind, found[0].flag, found[0].value) == ("invalid_choice", "--dtype", "bf16")
    assert found[0].suggestions[0] == "bfloat16" and found[0].replacement == ("--dtype", "bfloat16")
    _, found = read(version, "bad_int")
    assert (found[0].kind, found[0].flag, found[0].value, found[0].replacement) == (
        "invalid_value", "--tensor-parallel-size", "eight", ("--tensor-parallel-size", "8"))
    _, found = read(version, "bad_choice")
    assert found[0].kind == "invalid_choice" and found[0].replacement == ("--dtype", "float16")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_python_literal_config_is_named_with_the_json_that_means_the_same(version):
    text, found = read(version, "quoted_json")
    if not ARGPARSE_ERROR.search(text):
        pytest.skip(f"{version} takes a Python literal")
    assert found[0].kind == "invalid_json" and found[0].value == "{'method': 'eagle3', 'num_speculative_tokens': 3}"
    assert json.loads(found[0].replacement[1]) == {"method": "eagle3", "num_speculative_tokens": 3}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wrong_method_or_key_is_named_with_the_one_meant(version):
    text, found = read(version, "method_eagle4")
    if "eagle4" in text and ("literal_error" in text or "Unknown speculative method" in text or "Input should be" in text):
        [wrong] = [d for d in found if d.kind == "invalid_choice"]
        assert wrong.value == "eagle4" and wrong.suggestions[0] == '"method": "eagle3"', (version, wrong)
    text, found = read(version, "key_num_spec")
    keyed = [d for d in found if d.kind == "unknown_key"]
    if "num_spec_tokens" in text or "num_speculative_tokens" in text:
        assert keyed and keyed[0].value == "num_spec_tokens", (version, [(d.kind, d.value) for d in found])
        assert "num_speculative_tokens" in keyed[0].suggestions[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_no_gpu_start_is_vllms_own_and_named(version):
    text, found = read(version, "no_device")
    assert "Failed to infer device type" in text
    assert found[0].kind == "no_device" and "GPU" in found[0].message


@pytest.mark.parametrize("version", VERSIONS)
def test_an_abbreviated_flag_is_named_as_the_version_took_it(version):
    text, found = read(version, "ambiguous")
    if "ambiguous option" in text:
        assert found[0].kind == "ambiguous_option" and found[0].flag == "--speculative-disable" and len(found[0].suggestions) >= 2
    else:
        assert any((d.flag, d.value) == ("--speculative-disable", "4") for d in found), (version, found)


REFUSED_BY_EVERY_VERSION = ("unrecognized_sglang", "bad_json", "bad_choice", "bad_int", "bad_dtype_bf16", "zero_tokens")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_lint_refuses_what_the_wheel_refused_against_its_own_flags(version):
    """Each recorded line the wheel refused (its own output says so) is refused by the lint given the version, with
    the flags of that version's own parser (types and choices included)."""
    schema = shipped_schema(version)
    assert schema is not None and schema.version == version
    for case, argv in CASES.items():
        text = log(version, case)
        if text is None or case in ("tp_key", "dotted", "no_device"):
            continue
        refused = bool(ARGPARSE_ERROR.search(text)) or "ValidationError" in text or "validation error" in text or \
            "TypeError: SpeculativeConfig" in text or case in REFUSED_BY_EVERY_VERSION
        report = lint(["vllm", "serve", *argv], version, schema)
        if refused:
            assert not report.ok, (version, case, argv)
    good = ["vllm", "serve", "/m", "--tensor-parallel-size", "8", "--dtype", "bfloat16", "--speculative-config",
            '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}']
    if era(version).methods is None or "eagle3" in era(version).methods:
        assert lint(good, version, schema).ok, (version, [d.message for d in lint(good, version, schema).diagnoses])
    # `vllm serve`'s own subparser's options are the version's too (to 0.9 it added --config, and from 0.9 --headless,
    # before make_arg_parser: recorded as the entry point builds it, so a line with them is not called unknown)
    assert schema.get("--config") is not None, version
    assert lint(["vllm", "serve", "/m", "--config", "serve.yaml"], version, schema).ok, version
    if version != "0.8.5.post1":
        assert schema.get("--headless") is not None and schema.get("--data-parallel-start-rank") is not None, version


def _spec_line(source: str, bonus: bool) -> str:
    """A SpecDecoding line as that version's own format string prints it (its source line, recorded from its wheel):
    100 drafts of 3 tokens, 80/60/45 accepted at the positions; the mean printed with or without the bonus token as
    its own formula says."""
    fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', source.split(": ", 1)[1].split('",', 1)[0] + '"'))
    values = {"Draft acceptance rate: ": 61.7, "Mean acceptance length: ": 2.85 if bonus else 1.85, "Accepted throughput: ": 18.5,
              "Drafted throughput: ": 30.0, "Accepted: ": 185, "Drafted: ": 300, "Per-position acceptance rate: ": "0.800, 0.600, 0.450",
              "Avg Draft acceptance rate: ": 61.7}
    out, position = "", 0
    for m in re.finditer(r"%(?:\.\d)?[dfs]|%%", fmt):
        out += fmt[position:m.start()]
        position = m.end()
        if m.group(0) == "%%":
            out += "%"
            continue
        label = max((k for k in values if out.endswith(k)), key=len)
        value = values[label]
        out += (m.group(0) % value) if not isinstance(value, str) else value
    return "INFO 12-06 10:00:00 [metrics.py:100] " + out + fmt[position:]


@pytest.mark.parametrize("version", VERSIONS)
def test_live_figures_equal_the_numbers_in_each_versions_own_lines(version):
    """The bar for class 5: each version's SpecDecoding line, built from its own format string and formula, read to the
    same figures (the mean with the bonus token, as SGLang counts it: 2.85 whichever way the version printed it)."""
    from cockpit.vllm.logs import parse_spec

    facts = recorded_facts()[version]
    sources = [s for s in facts["spec_line_sources"] if "v1/spec_decode/metrics.py" in s and "SpecDecoding metrics" in s]
    assert sources, version
    line = _spec_line(sources[0], bool(facts["bonus_in_mean_length"]))
    spec = parse_spec(line)
    assert spec is not None, line
    assert spec.mean_acceptance_length == pytest.approx(2.85), (version, line)
    assert (spec.accepted, spec.drafted, spec.per_position) == (185, 300, (0.8, 0.6, 0.45)), line
    assert spec.draft_acceptance_rate == pytest.approx(0.617), line
    assert spec.bonus_in_line == bool(facts["bonus_in_mean_length"]), line
