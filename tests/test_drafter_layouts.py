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


@pytest.mark.parametrize("layout, verdicts", [
    ("specforge", {"vLLM <=0.8.4": ["no_eagle3"], "vLLM 0.8.5": [], "vLLM 0.9-0.10.1": ["architecture_name"], "vLLM 0.10.2-0.33": [],
                   "vLLM >=0.34.0": []}),
    ("vllm_export", {"vLLM <=0.8.4": ["no_eagle3"], "vLLM 0.8.5": [], "vLLM 0.9-0.10.1": ["architecture_name"],
                     "vLLM 0.10.2-0.33": [], "vLLM >=0.34.0": []}),
    ("speculators", {"vLLM <=0.8.4": ["speculators_config", "no_eagle3"], "vLLM 0.8.5": ["speculators_config"],
                     "vLLM 0.9-0.10.1": ["speculators_config"], "vLLM 0.10.2-0.33": [], "vLLM >=0.34.0": []}),
    ("kimi_mla", {"vLLM <=0.8.4": ["architecture_unsupported", "no_eagle3"], "vLLM 0.8.5": ["architecture_unsupported"],
                  "vLLM 0.9-0.10.1": ["architecture_unsupported"], "vLLM 0.10.2-0.33": ["architecture_unsupported"],
                  "vLLM >=0.34.0": []}),
])
def test_every_layout_is_judged_for_vllm_as_its_loaders_read_it(tmp_path, layout, verdicts):
    """Issue 31 (vllm-facts §3): vLLM loads midlayer.* and layers.0.* alike from 0.8.5 (no EAGLE-3
    before), reads the speculators format from 0.10.2, MLA drafts from 0.34.0; issue 47: 0.9 to 0.10.1 do not load the
    name LlamaForCausalLMEagle3 (their wheels' registry.py and configs/eagle.py)."""
    report = inspect_draft(write_layout(tmp_path / layout, layout))
    assert {r: [p.code for p in ps] for r, ps in report.verdicts(engine="vllm").items()} == verdicts, \
        [p.message for p in report.problems]


def test_drafter_inspect_for_vllm_exits_on_vllms_verdict(tmp_path):
    old = write_layout(tmp_path / "old", "vllm_export")  # layers.0.*: SGLang 0.5.2 skips them, vLLM loads them
    assert cli("drafter", "inspect", str(old), "--sglang", "0.5.2").returncode == 1
    proc = cli("drafter", "inspect", str(old), "--vllm", "0.10.2", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["engine"] == "vllm" and list(data["verdicts"]) == ["vLLM 0.10.2-0.33"]
    proc = cli("drafter", "inspect", str(old), "--engine", "both")
    assert proc.returncode == 1 and "SGLang <=0.4.8: 1 problem" in proc.stdout and "vLLM <=0.8.4: 1 problem" in proc.stdout
    assert "[vLLM <=0.8.4] vLLM before 0.8.5 has no EAGLE-3" in proc.stdout
    both = cli("drafter", "inspect", str(old), "--sglang", "0.5.2", "--vllm", "0.10.2")
    assert both.returncode == 2 and "not both" in both.stderr


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


def test_the_architecture_fix_loads_in_every_vllm_and_sglang(tmp_path):
    """The fix offered for vLLM 0.9-0.10.1 (both names, SGLang's first) is judged clean for every range of both engines."""
    from drafter_files import eagle3_config, write_draft

    fixed = write_draft(tmp_path / "fixed", config=eagle3_config(architectures=["LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"]))
    report = inspect_draft(fixed)
    assert not any(p.code in ("architecture_name", "wrong_architecture") for p in report.problems), [p.message for p in report.problems]
    old = write_draft(tmp_path / "old", config=eagle3_config(architectures=["LlamaForCausalLMEagle3"]))
    [problem] = [p for p in inspect_draft(old).problems if p.code == "architecture_name"]
    assert problem.ranges == ("vLLM 0.9-0.10.1",) and "Eagle3LlamaForCausalLM" in (problem.fix or "")
