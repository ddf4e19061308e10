"""Issue 51 item 2: a draft checked against its target before launch (`cockpit drafter inspect DRAFT --target MODEL`).
The space: every recorded draft config x every target (its own, and the others), and every mistake a draft can carry
against its target; the CLI's exit codes and messages over a real safetensors draft."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_files import HIDDEN, VOCAB, eagle3_config, write_draft

from cockpit.drafter.inspect import DraftReport, build_report
from cockpit.drafter.target import check_against, facts_of

DRAFTS = Path(__file__).resolve().parent / "fixtures" / "drafts"
TARGETS = json.loads((DRAFTS / "targets.json").read_text())
# each recorded draft config and the target it was made for
MADE_FOR = {"specforge-llama3-70B-eagle3.json": "Llama-3.3-70B-Instruct", "specforge-qwen3-vl-8b-eagle3.json": "Qwen3-VL-8B-Instruct"}


def _report(config: dict) -> DraftReport:
    return build_report("draft", [], json.dumps(config), "config.json")


@pytest.mark.parametrize("draft,target", list(itertools.product(MADE_FOR, TARGETS)))
def test_every_recorded_draft_against_every_target(draft, target):
    config = json.loads((DRAFTS / draft).read_text())
    facts = facts_of(TARGETS[target], target + "/config.json")
    check = check_against(_report(config), facts)
    same_sizes = (config["hidden_size"], config["vocab_size"]) == (facts.hidden_size, facts.vocab_size)
    assert (check.problems == []) is same_sizes, [p.message for p in check.problems]
    if target == MADE_FOR[draft]:
        assert check.problems == [] and any("fits the target" in n for n in check.notes)
    for problem in check.problems:
        assert problem.fix and problem.code.startswith("target_") and len(problem.ranges) > 3  # every engine and version


MISTAKES = {
    # name: (changes to the draft's config, changes to the target's, the problem's code or None)
    "fits": ({}, {}, None),
    "hidden": ({"hidden_size": HIDDEN * 2}, {}, "target_hidden"),
    "target_hidden_size": ({"target_hidden_size": HIDDEN * 3}, {}, "target_hidden"),
    "narrow draft, its target's size said": ({"hidden_size": HIDDEN // 2, "target_hidden_size": HIDDEN}, {}, None),
    "vocab": ({}, {"vocab_size": VOCAB * 2}, "target_vocab"),
    "aux layers": ({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 33]}}, {"num_hidden_layers": 32}, "target_layers"),
    "aux layers inside": ({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 29]}}, {"num_hidden_layers": 32}, None),
    "mla draft, llama target": ({"architectures": ["Eagle3DeepseekV2ForCausalLM"]}, {}, "target_mla"),
    "mla draft, deepseek target": ({"architectures": ["Eagle3DeepseekV2ForCausalLM"]}, {"model_type": "deepseek_v3"}, None),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "text_config"])
def test_every_mistake_against_a_target_plain_or_nested(mistake, nested):
    draft_changes, target_changes, code = MISTAKES[mistake]
    target = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN, "vocab_size": VOCAB,
              "num_hidden_layers": 32, "torch_dtype": "bfloat16", **target_changes}
    if nested:  # a VL model: its text model's sizes under text_config
        target = {"architectures": ["X"], "model_type": target.pop("model_type"), "text_config": target}
    check = check_against(_report(eagle3_config(**draft_changes)), facts_of(target, "t/config.json"))
    assert [p.code for p in check.problems] == ([code] if code else []), [p.message for p in check.problems]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", "drafter", "inspect", *argv], capture_output=True, text=True, timeout=60)


def test_the_cli_checks_a_real_draft_against_its_target(tmp_path):
    draft = write_draft(tmp_path / "draft")
    good = tmp_path / "target"
    good.mkdir()
    (good / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
                                                  "vocab_size": VOCAB, "num_hidden_layers": 32, "torch_dtype": "bfloat16"}))
    ok = _cli(str(draft), "--target", str(good), "--json")
    assert ok.returncode == 0 and ok.stderr == "", ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["target"]["hidden_size"] == HIDDEN
    wrong = tmp_path / "other.json"
    wrong.write_text(json.dumps({"model_type": "llama", "hidden_size": HIDDEN * 2, "vocab_size": VOCAB, "num_hidden_layers": 32}))
    bad = _cli(str(draft), "--target", str(wrong))
    assert bad.returncode == 1 and bad.stderr == "", bad.stderr
    assert f"hidden size {HIDDEN}" in bad.stdout and f"this target's is {HIDDEN * 2}" in bad.stdout and "fc.weight takes" in bad.stdout
    assert "fix: serve it with the target it was trained for" in bad.stdout
    for given, said in ((tmp_path / "nowhere", "no config.json there"), (tmp_path / "draft" / "model.safetensors", "not valid JSON")):
        done = _cli(str(draft), "--target", str(given))
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("fits", [True, False])
def test_the_checklist_step_fails_on_a_target_that_does_not_fit(tmp_path, fits):
    """drafter_check's `target`: the step that gates the launch fails, naming the mismatch, when the draft does not fit."""
    draft = write_draft(tmp_path / "draft")
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": HIDDEN if fits else HIDDEN * 2,
                                                    "vocab_size": VOCAB, "num_hidden_layers": 32}))
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\ndir = "{tmp_path}/state"\n'
                      f'[runbook]\nname = "t"\n[[runbook.steps]]\nname = "draft-ready"\nkind = "drafter_check"\nhost = "here"\n'
                      f'path = "{draft}"\ntarget = "{target}"\n')
    done = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), "plan", "run", "draft-ready", "--yes", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.stderr == "", done.stderr
    result = json.loads(done.stdout)
    text = json.dumps(result)
    ran = result["ran"][0]
    # what the check rests on, passed or failed: the target's config.json and what it says
    assert ran["evidence"]["target"]["config"] == str(target / "config.json")
    assert ran["evidence"]["target"]["hidden_size"] == (HIDDEN if fits else HIDDEN * 2)
    if fits:
        assert done.returncode == 0 and ran["state"] == "passed" and ran["evidence"]["target"]["mismatches"] == 0, text[:800]
        assert f"fits its target (hidden size {HIDDEN}, vocabulary {VOCAB}" in ran["message"], ran["message"]
    else:
        assert done.returncode != 0 and ran["state"] == "failed" and f"this target's is {HIDDEN * 2}" in text, text[:800]
        assert ran["evidence"]["target"]["mismatches"] >= 1
