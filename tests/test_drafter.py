"""Drafter checks and the key fix on real safetensors files made with safetensors."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.drafter.fixkeys import JOURNAL_SUFFIX
from cockpit.drafter.header import HeaderError, read_header
from cockpit.drafter.inspect import inspect_draft
from drafter_files import eagle3_config, eagle3_tensors, load_all, load_file, needs_torch, save_file, to_torch, write_draft


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("shards", [1, 3])
def test_inspect_verdicts_per_version(tmp_path, shards):
    good = write_draft(tmp_path / "good", "midlayer", shards)
    report = inspect_draft(good)
    assert report.ready() and len(report.tensors) == 15
    old = write_draft(tmp_path / "old", "layers0", shards)
    report = inspect_draft(old)
    assert not report.ready()
    verdicts = report.verdicts()
    assert [p.code for p in verdicts["<=0.4.8"]] == ["layers0_keys"]
    assert [p.code for p in verdicts["0.4.9-0.5.11"]] == ["layers0_keys"]
    assert verdicts[">=0.5.12"] == []
    assert report.ready("0.5.23") and not report.ready("0.5.2")
    proc = cli("drafter", "inspect", str(old), "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["verdicts"][">=0.5.12"]["ready"] is True
    assert cli("drafter", "inspect", str(old), "--sglang", "0.5.23").returncode == 0
    assert cli("drafter", "inspect", str(good)).returncode == 0


def test_inspect_config_and_shape_problems(tmp_path):
    bad = write_draft(tmp_path / "bad", config=eagle3_config(architectures=["Qwen3ForCausalLM"], num_hidden_layers=2,
                                                            draft_vocab_size=None, vocab_size=999, hidden_size=32))
    codes = {p.code for p in inspect_draft(bad).problems}
    assert {"wrong_architecture", "num_hidden_layers", "draft_vocab_size_missing", "t2d_vocab", "fc_shape"} <= codes
    layers = [p for p in inspect_draft(bad).problems if p.code == "num_hidden_layers"][0]
    assert layers.ranges == ("<=0.4.8", "0.4.9-0.5.11", "vLLM 0.8.5", "vLLM 0.9-0.10.1", "vLLM 0.10.2-0.33")  # vLLM 0.34.0 builds num_hidden_layers
    missing = tmp_path / "missing"
    missing.mkdir()
    tensors = eagle3_tensors()
    del tensors["d2t"]
    save_file(tensors, missing / "model.safetensors")
    (missing / "config.json").write_text(json.dumps(eagle3_config()))
    assert any(p.message.startswith("required key 'd2t' is missing (draft_vocab_size 100 is not the target's 1000")
               for p in inspect_draft(missing).problems)
    # the full vocabulary: SGLang's and vLLM's loaders need neither d2t nor t2d (issue 30)
    full = tmp_path / "full"
    full.mkdir()
    tensors = {k: v for k, v in eagle3_tensors().items() if k not in ("d2t", "t2d")}
    save_file(tensors, full / "model.safetensors")
    (full / "config.json").write_text(json.dumps(eagle3_config(draft_vocab_size=1000)))
    report = inspect_draft(full)
    assert not [p for p in report.problems if p.code == "missing_key"]
    assert any("no d2t/t2d: fine" in n for n in report.notes)


@pytest.mark.parametrize("shards", [1, 3])
def test_fix_keys_in_place_bit_identical_and_idempotent(tmp_path, shards):
    folder = write_draft(tmp_path / "d", "layers0", shards)
    before = load_all(folder)
    sizes = {f.name: f.stat().st_size for f in folder.glob("*.safetensors")}
    dry = cli("drafter", "fix-keys", str(folder), "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["renamed"] == 10
    assert load_all(folder).keys() == before.keys()  # the dry run changed nothing
    refused = cli("drafter", "fix-keys", str(folder))
    assert refused.returncode == 1 and "--yes" in refused.stderr
    done = cli("drafter", "fix-keys", str(folder), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["renamed"] == 10 and report["verified"] and all(f["in_place"] for f in report["files"])
    after = load_all(folder)
    assert set(after) == {k.replace("layers.0.", "midlayer.") for k in before}
    for name, tensor in before.items():
        assert after[name.replace("layers.0.", "midlayer.")] == tensor  # bit-identical
    assert {f.name: f.stat().st_size for f in folder.glob("*.safetensors")} == sizes
    assert inspect_draft(folder).ready()
    if shards > 1:
        weight_map = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
        assert all(not k.startswith("layers.0.") for k in weight_map) and "midlayer.mlp.up_proj.weight" in weight_map
    again = cli("drafter", "fix-keys", str(folder), "--yes")
    assert again.returncode == 0 and "nothing to change" in again.stdout
    assert not list(folder.glob("*" + JOURNAL_SUFFIX))


def test_header_that_grows_is_copied_atomically(tmp_path):
    folder = write_draft(tmp_path / "d", "midlayer")
    before = load_all(folder)
    proc = cli("drafter", "fix-keys", str(folder), "--rule", "midlayer.=draft_model.midlayer.", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"][0]["in_place"] is False
    after = load_all(folder)
    for name, tensor in before.items():
        new = "draft_model." + name if name.startswith("midlayer.") else name
        assert after[new] == tensor
    assert not list(folder.glob(".*cockpit-tmp"))


def corrupt(path: Path, kind: str) -> None:
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack("<Q", data[:8])
    if kind == "truncated":
        path.write_bytes(bytes(data[: 8 + length // 2]))
    elif kind == "length_beyond":
        path.write_bytes(struct.pack("<Q", len(data) * 4) + bytes(data[8:]))
    elif kind == "invalid_json":
        data[8] = ord("[")
        data[9] = ord("x")
        path.write_bytes(bytes(data))
    elif kind in ("overlap", "out_of_range"):
        header = json.loads(data[8: 8 + length])
        names = [n for n in header if n != "__metadata__"]
        if kind == "overlap":  # two tensors of the same size made to share their bytes
            header["layers.0.hidden_norm.weight"]["data_offsets"] = header["layers.0.input_layernorm.weight"]["data_offsets"]
        else:
            begin, end = header[names[0]]["data_offsets"]
            shift = len(data)
            header[names[0]]["data_offsets"] = [begin + shift, end + shift]
        text = json.dumps(header).encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data[8 + length:]))


@pytest.mark.parametrize("kind, fragment", [
    ("truncated", "runs past the end"),
    ("length_beyond", "runs past the end"),
    ("invalid_json", "not valid JSON"),
    ("overlap", "overlap"),
    ("out_of_range", "outside the data"),
])
def test_bad_files_clear_error_and_untouched(tmp_path, kind, fragment):
    folder = write_draft(tmp_path / "d", "layers0")
    file = folder / "model.safetensors"
    corrupt(file, kind)
    original = file.read_bytes()
    with pytest.raises(HeaderError, match=fragment):
        read_header(file)
    for command in (["drafter", "inspect", str(folder)], ["drafter", "fix-keys", str(folder), "--yes"]):
        proc = cli(*command)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert str(file) in proc.stderr and fragment in proc.stderr
    assert file.read_bytes() == original


def test_directory_without_weights(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = cli("drafter", "inspect", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "no .safetensors weights" in proc.stderr
    proc = cli("drafter", "fix-keys", str(tmp_path / "nowhere"), "--yes")
    assert proc.returncode == 2 and "no such file" in proc.stderr


@pytest.mark.parametrize("point", ["journal_written", "torn_header", "header_written"])
def test_killed_during_the_fix_is_old_or_new_or_repaired(tmp_path, point):
    folder = write_draft(tmp_path / "d", "layers0")
    before = load_all(folder)
    killed = cli("drafter", "fix-keys", str(folder), "--yes", env={"COCKPIT_FAULT_AT": point})
    assert killed.returncode == -9
    file = folder / "model.safetensors"
    journal = Path(str(file) + JOURNAL_SUFFIX)
    assert journal.exists()  # the journal was complete before the header was touched
    if point != "torn_header":
        loaded = load_all(folder)  # old or new: loadable either way
        assert {k.replace("layers.0.", "midlayer.") for k in loaded} == {k.replace("layers.0.", "midlayer.") for k in before}
    # the next run repairs and finishes
    done = cli("drafter", "fix-keys", str(folder), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert not journal.exists()
    after = load_all(folder)
    for name, tensor in before.items():
        assert after[name.replace("layers.0.", "midlayer.")] == tensor


def test_killed_during_a_growing_copy_leaves_the_original(tmp_path):
    folder = write_draft(tmp_path / "d", "midlayer")
    original = (folder / "model.safetensors").read_bytes()
    killed = cli("drafter", "fix-keys", str(folder), "--rule", "midlayer.=draft_model.midlayer.", "--yes",
                 env={"COCKPIT_FAULT_AT": "copy_chunk"})
    assert killed.returncode == -9
    assert (folder / "model.safetensors").read_bytes() == original
    assert cli("drafter", "fix-keys", str(folder), "--rule", "midlayer.=draft_model.midlayer.", "--yes").returncode == 0
    assert not list(folder.glob(".*cockpit-tmp"))


def test_fix_over_sftp_on_the_existing_connection(sshd, tmp_path):
    folder = write_draft(tmp_path / "remote-draft", "layers0", shards=2)
    before = load_all(folder)
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")))
    dry = cli("drafter", "fix-keys", str(folder), "--host", "gpu-server", "--dry-run", "--json", "--config", str(config))
    assert dry.returncode == 0 and json.loads(dry.stdout)["renamed"] == 10
    done = cli("drafter", "fix-keys", str(folder), "--host", "gpu-server", "--yes", "--config", str(config))
    assert done.returncode == 0, done.stderr
    after = load_all(folder)
    for name, tensor in before.items():
        assert after[name.replace("layers.0.", "midlayer.")] == tensor
    assert inspect_draft(folder).ready()
    again = cli("drafter", "fix-keys", str(folder), "--host", "gpu-server", "--yes", "--config", str(config))
    assert "nothing to change" in again.stdout


def test_convert_training_checkpoint(tmp_path):
    torch = needs_torch()
    src = tmp_path / "train"
    src.mkdir()
    tensors = {"draft_model." + k: to_torch(torch, v) for k, v in eagle3_tensors("layers0").items()}
    torch.save(tensors, src / "pytorch_model.bin")
    (src / "config.json").write_text(json.dumps(eagle3_config()))
    proc = cli("drafter", "convert", str(src), str(tmp_path / "out"), "--dtype", "fp16", "--json")
    assert proc.returncode == 0, proc.stderr
    out = load_file(tmp_path / "out" / "model.safetensors")
    assert "midlayer.mlp.up_proj.weight" in out and out["fc.weight"].dtype == "F16" and out["d2t"].dtype == "I64"
    assert inspect_draft(tmp_path / "out").ready()
    not_a_checkpoint = tmp_path / "junk"
    not_a_checkpoint.mkdir()
    (not_a_checkpoint / "x.pt").write_bytes(b"not a pickle")
    proc = cli("drafter", "convert", str(not_a_checkpoint), str(tmp_path / "out2"))
    assert proc.returncode == 2 and "not a loadable torch checkpoint" in proc.stderr


async def test_drafter_check_step_offers_the_fix_remote_and_local(sshd, tmp_path):
    from cockpit.config import parse_config
    from cockpit.runbook.engine import Runbook
    from cockpit.runbook.model import StepState
    from cockpit.context import parse_runbook
    from cockpit.runbook.store import StateStore
    from cockpit.telemetry.hub import TelemetryHub

    remote = write_draft(tmp_path / "on-server", "layers0", shards=2)
    local = write_draft(tmp_path / "here", "layers0")
    steps = f"""
[[runbook.steps]]
name = "draft-on-server"
kind = "drafter_check"
host = "gpu-server"
path = "{remote}"
sglang = "0.5.2"

[[runbook.steps]]
name = "draft-here"
kind = "drafter_check"
host = "me"
path = "{local}"
"""
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server") + "[hosts.me]\nlocal = true\n") + steps)
    hub = TelemetryHub(config)
    runbook = Runbook(parse_runbook(config), hub, StateStore("d", tmp_path / "state"))
    asked = []

    async def no(text):
        asked.append(text)
        return False

    async def yes(text):
        asked.append(text)
        return True

    try:
        declined = await runbook.run_step("draft-on-server", no)
        assert declined.state is StepState.FAILED and "not confirmed" in declined.message
        assert "rename 10 keys layers.0.* to midlayer.*" in asked[0]
        assert not inspect_draft(remote).ready()  # nothing changed
        done = await runbook.run_step("draft-on-server", yes)
        assert done.state is StepState.PASSED and done.evidence["fixed"] == 10, done.message
        assert inspect_draft(remote).ready()
        local_done = await runbook.run_step("draft-here", yes)
        assert local_done.state is StepState.PASSED and inspect_draft(local).ready()
        assert any(r["event"] == "fix_keys" for r in runbook.store.audit_records())
    finally:
        await hub.stop()


def test_a_drafts_size_reads_the_same_in_the_checklist_and_the_cli(tmp_path):
    """Issue 36 item 9: the demo's draft was `0 MiB` in the TUI and `0.1 MiB` in the CLI: one formatter for both."""
    from cockpit.drafter.inspect import inspect_draft, render_report
    from cockpit.format import size

    folder = write_draft(tmp_path / "d", "midlayer")
    report = inspect_draft(folder)
    said = size(report.total_bytes)
    assert said != "0 MiB" and said in render_report(report, None, False, "sglang")
    assert [size(n) for n in (812, 98304, 110_000_000, 3.5 * 2**30)] == ["812 B", "96.0 KiB", "104.9 MiB", "3.50 GiB"]
