"""A fix is safe to press: over every recorded release of both engines x every mistake below, the whole fixed line is
linted again by the same release and is clean, and it keeps what the user meant (the speculative method, the draft, the
depth).  A release that cannot take the user's method at all is told so, and no fix swaps the method for another.

The cases are generated from the lists (each engine's recorded releases x its mistakes); a sample runs in the fast loop,
all of them in the full suite."""

from __future__ import annotations

import json
import shlex

import pytest

from cockpit.serving import engines
from cockpit.serving.lint import fix_line
from cockpit.sglang import versions as sglang_versions
from cockpit.vllm import versions as vllm_versions
from cockpit.vllm.lint import merged_config

SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "/models/target", "--speculative-algorithm", "EAGLE3",
          "--speculative-draft-model-path", "/ckpt/eagle3"]
SGLANG_DEPTH = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]

# (name, the line with the mistake, the depth the user meant: SGLang steps)
SGLANG_MISTAKES = [
    ("vllm_depth_flag", SGLANG + ["--num-speculative-tokens", "16"], 16),  # the crash this project began with
    ("lowercase_algorithm", [w if w != "EAGLE3" else "eagle3" for w in SGLANG] + SGLANG_DEPTH, 3),
    ("dtype_fp8", SGLANG + SGLANG_DEPTH + ["--dtype", "fp8"], 3),
    ("switch_with_value", SGLANG + SGLANG_DEPTH + ["--trust-remote-code=true"], 3),
    ("abbreviated_flag", SGLANG + ["--speculative-num-st", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"], 3),
]

VLLM = ["vllm", "serve", "/models/target"]
CONFIG = {"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_tokens": 4}


def _sc(config: dict) -> list[str]:
    return ["--speculative-config", json.dumps(config)]


VLLM_MISTAKES = [
    ("separate_flags", VLLM + ["--speculative-model", "/ckpt/eagle3", "--num-speculative-tokens", "4"]),
    ("depth_beside_config", VLLM + _sc({"method": "eagle3", "model": "/ckpt/eagle3"}) + ["--num-speculative-tokens", "4"]),
    ("draft_beside_config", VLLM + ["--speculative-model", "/ckpt/eagle3"] + _sc({"method": "eagle3", "num_speculative_tokens": 4})),
    ("short_sc", VLLM + ["-sc", json.dumps(CONFIG)]),
    ("short_spec_flags", VLLM + ["--spec-method", "eagle3", "--spec-model", "/ckpt/eagle3", "--spec-tokens", "4"]),
    ("percent_utilization", VLLM + _sc(CONFIG) + ["--gpu-memory-utilization", "90"]),
    ("dtype_fp8", VLLM + _sc(CONFIG) + ["--dtype", "fp8"]),
    ("tp_key", VLLM + _sc({**CONFIG, "tensor_parallel_size": 1})),
    ("draft_tp_over_target", VLLM + _sc({**CONFIG, "draft_tensor_parallel_size": 2}) + ["--tensor-parallel-size", "1"]),
    ("key_typo", VLLM + _sc({"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_token": 4})),
]


def _sglang_meaning(words: list[str]) -> tuple:
    def value(flag: str) -> str | None:
        for index, word in enumerate(words):
            if word == flag and index + 1 < len(words):
                return words[index + 1]
            if word.startswith(flag + "="):
                return word.split("=", 1)[1]
        return None

    return (str(value("--speculative-algorithm")).upper(), value("--speculative-draft-model-path"))


def _cases(releases, mistakes):
    out = []
    for r_index, release in enumerate(releases):
        for m_index, mistake in enumerate(mistakes):
            sample = (r_index + m_index) % 9 == 0 or release == releases[-1]  # the fast loop: a diagonal, and the newest
            out.append(pytest.param(release, *mistake, id=f"{release}-{mistake[0]}", marks=() if sample else pytest.mark.slow))
    return out


EAGLE3_FROM = next(v for v in sglang_versions.releases().versions if "EAGLE3" in sglang_versions.algorithms(v))


@pytest.mark.parametrize("release, name, line, steps", _cases(sglang_versions.releases().versions, SGLANG_MISTAKES))
def test_every_sglang_fix_is_clean_and_keeps_the_users_draft(release, name, line, steps):
    engine = engines.engine("sglang")
    schema = sglang_versions.shipped_schema(release)
    fixed = fix_line(line, lambda words: engine.lint(words, release, schema), engine.apply_fix)
    meaning = _sglang_meaning(fixed.words)
    assert meaning == ("EAGLE3", "/ckpt/eagle3"), f"{release} {name}: the fix changed the user's method or draft: {fixed.words}"
    if sglang_versions.releases().key(release) < sglang_versions.releases().key(EAGLE3_FROM):
        # this release has no EAGLE3: said so, and nothing swaps it for EAGLE
        assert not fixed.clean and any(d.kind in ("choice_not_in_release", "flag_not_in_release") for d in fixed.report.errors)
        return
    assert fixed.clean, f"SGLang {release} {name}: the fixed line is refused: {shlex.join(fixed.words)}\n" + \
        "\n".join(d.message for d in fixed.report.errors)
    depth = engine.depth_of_argv(fixed.words)
    assert depth is not None and depth.steps == steps, f"{release} {name}: the depth the user meant was lost: {fixed.words}"


@pytest.mark.parametrize("release, name, line", _cases(vllm_versions.recorded(), VLLM_MISTAKES))
def test_every_vllm_fix_is_clean_and_keeps_method_draft_and_depth(release, name, line):
    engine = engines.engine("vllm")
    from cockpit.vllm.lint import shipped_schema

    schema = shipped_schema(release)
    fixed = fix_line(line, lambda words: engine.lint(words, release, schema), engine.apply_fix)
    assert fixed.clean, f"vLLM {release} {name}: the fixed line is refused: {shlex.join(fixed.words)}\n" + \
        "\n".join(d.message for d in fixed.report.errors)
    config = merged_config(fixed.words[3:])
    assert (config.get("method"), config.get("model"), config.get("num_speculative_tokens")) == ("eagle3", "/ckpt/eagle3", 4), \
        f"vLLM {release} {name}: the fix lost the user's speculative settings: {shlex.join(fixed.words)}"
    assert fixed.words[:3] == VLLM


def test_a_line_without_mistakes_is_left_as_it_is():
    """The property's other half: a clean line gets no fix at all (on the newest release of each engine)."""
    for engine, line, release in ((engines.engine("sglang"), SGLANG + SGLANG_DEPTH, None),
                                  (engines.engine("vllm"), VLLM + _sc(CONFIG), None)):
        fixed = fix_line(line, lambda words, e=engine: e.lint(words, release, None), engine.apply_fix)
        assert fixed.words == line and not fixed.applied and fixed.clean


class _Runbook:
    """The little of a runbook that applying a fix reads: a launch step that recorded its refused line."""

    def __init__(self, argv: list[str], params: dict):
        from cockpit.runbook.model import StepResult, StepSpec, StepState
        from cockpit.serving.steps import ServeLaunch

        self.spec_ = StepSpec("launch", "serve_launch", "gpu", {"model_path": "/models/target", **params})
        self.result_ = StepResult(StepState.FAILED, "refused before launch", evidence={"argv": argv})
        self.kind_ = ServeLaunch()
        self.override: list[str] | None = None
        self.spec = self

    def step(self, name):
        return self.spec_

    def launched(self, name):
        return None

    def result(self, name):
        return self.result_

    def kind(self, spec):
        return self.kind_

    def set_override(self, name, argv, why):
        self.override = list(argv)


@pytest.mark.parametrize("engine, argv, version, meant", [
    ("vllm", VLLM + ["--speculative-model", "/ckpt/eagle3", "--num-speculative-tokens", "4", "--gpu-memory-utilization", "90"],
     "0.10.2", "--gpu-memory-utilization 0.9"),
    ("sglang", SGLANG + ["--num-speculative-tokens", "16", "--dtype", "fp8"], "0.5.2", "--quantization fp8"),
])
def test_f_applies_the_whole_line_not_one_fix(engine, argv, version, meant):
    """`f` (and `plan fix`) take the diagnosis shown and then every other fix the same release asks for: the line that
    runs is clean, not the next crash."""
    from cockpit.diagnosis import Diagnosis
    from cockpit.serving.steps import apply_diagnosis_fix

    chosen = engines.engine(engine)
    runbook = _Runbook(argv, {"engine": engine, chosen.version_key: version})
    first = next(d for d in chosen.lint(argv, version, None).errors if d.replacement)
    fixed = apply_diagnosis_fix(runbook, "launch", Diagnosis.from_json(first.to_json()))
    assert fixed == runbook.override and meant in shlex.join(fixed)
    assert chosen.lint(fixed, version, None).ok, shlex.join(fixed)
