"""Drafters from every trainer (issue 16): each layout recognised, its verdict per SGLang version
range for the right reason, and a vLLM speculators draft converted to SGLang's layout with every
tensor's bytes unchanged, crash-safe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from cockpit.drafter.inspect import inspect_draft
from drafter_files import load_all, needs_torch, to_torch, write_layout


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def codes(report, sglang_range):
    return [p.code for p in report.verdicts()[sglang_range]]


@pytest.mark.parametrize("layout, fragment, verdicts", [
    ("specforge", "SGLang layout, midlayer.*", {"<=0.4.8": [], "0.4.9-0.5.11": [], ">=0.5.12": []}),
    ("modelopt", "SGLang layout, midlayer.*", {"<=0.4.8": [], "0.4.9-0.5.11": [], ">=0.5.12": []}),
    ("vllm_export", "layers.0.* keys with an EAGLE-3 config.json",
     {"<=0.4.8": ["layers0_keys"], "0.4.9-0.5.11": ["layers0_keys"], ">=0.5.12": []}),
    ("speculators", "vLLM speculators format",
     {"<=0.4.8": ["speculators_config", "layers0_keys"], "0.4.9-0.5.11": ["speculators_config", "layers0_keys"],
      ">=0.5.12": ["speculators_config"]}),
    ("kimi_mla", "MLA draft for DeepSeek / Kimi-K2.5",
     {"<=0.4.8": ["architecture_unsupported"], "0.4.9-0.5.11": ["architecture_unsupported"], ">=0.5.12": []}),
])
def test_every_trainers_layout_and_its_verdict(tmp_path, layout, fragment, verdicts):
    report = inspect_draft(write_layout(tmp_path / layout, layout))
    assert fragment in report.layout
    assert {r: codes(report, r) for r in verdicts} == verdicts, [p.message for p in report.problems]


def test_a_speculators_draft_is_judged_for_the_right_reason(tmp_path):
    report = inspect_draft(write_layout(tmp_path / "spec", "speculators"))
    first = report.problems[0]
    assert first.code == "speculators_config" and "model_type" in first.message and "drafter convert" in first.fix
    assert "num_hidden_layers" not in {p.code for p in report.problems}  # 1, read from transformer_layer_config
    assert "wrong_architecture" not in {p.code for p in report.problems}  # not the KeyError of a normal model
    proc = cli("drafter", "inspect", str(tmp_path / "spec"))
    assert proc.returncode == 1 and proc.stdout.count("Unrecognized model") == 1  # said once, not once per version range


def test_convert_a_speculators_draft_bytes_unchanged(tmp_path):
    folder = write_layout(tmp_path / "spec", "speculators")
    before = load_all(folder)
    original = json.loads((folder / "config.json").read_text())
    refused = cli("drafter", "convert", str(folder))
    assert refused.returncode == 1 and "--yes" in refused.stderr and "layers.0." in refused.stderr
    done = cli("drafter", "convert", str(folder), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["renamed"] == 10
    after = load_all(folder)
    assert set(after) == {k.replace("layers.0.", "midlayer.") for k in before}
    for name, tensor in before.items():
        assert after[name.replace("layers.0.", "midlayer.")] == tensor  # every tensor's bytes unchanged
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 1 and config["vocab_size"] == 1000 and config["draft_vocab_size"] == 100
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert json.loads((folder / "config.speculators.json").read_text()) == original  # nothing lost
    assert inspect_draft(folder).ready()
    again = cli("drafter", "convert", str(folder), "--yes")
    assert again.returncode == 0 and inspect_draft(folder).ready()


@pytest.mark.parametrize("point", ["journal_written", "torn_header"])
def test_convert_killed_mid_way_finishes_when_run_again(tmp_path, point):
    folder = write_layout(tmp_path / "spec", "speculators")
    before = load_all(folder)
    killed = cli("drafter", "convert", str(folder), "--yes", env={"COCKPIT_FAULT_AT": point})
    assert killed.returncode == -signal.SIGKILL
    done = cli("drafter", "convert", str(folder), "--yes")
    assert done.returncode == 0, done.stderr
    after = load_all(folder)
    for name, tensor in before.items():
        assert after[name.replace("layers.0.", "midlayer.")] == tensor
    assert inspect_draft(folder).ready()


def test_the_eagle_repos_checkpoint_is_converted(tmp_path):
    """SafeAILab EAGLE's trainer saves a DeepSpeed 16-bit pytorch_model.bin with midlayer.* keys."""
    torch = needs_torch()
    from drafter_files import eagle3_config, eagle3_tensors

    src = tmp_path / "state_19"
    src.mkdir()
    torch.save({k: to_torch(torch, v) for k, v in eagle3_tensors("midlayer").items()}, src / "pytorch_model.bin")
    (src / "config.json").write_text(json.dumps(eagle3_config()))
    seen = cli("drafter", "inspect", str(src))
    assert seen.returncode == 2 and "holds PyTorch weights" in seen.stderr
    done = cli("drafter", "convert", str(src), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert inspect_draft(tmp_path / "out").ready()
