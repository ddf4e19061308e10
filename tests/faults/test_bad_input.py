"""Bad input, property-based: every file and reply the cockpit reads, whatever its bytes, ends in a
clear CockpitError (exit 2 at the CLI) or a result, never another exception.  The parsers already
fuzzed elsewhere (nvidia-smi CSV, config text, safetensors headers, SSE bodies, argparse help and
usage, SGLang logs, lint) are in tests/test_fuzz_parsers.py and tests/test_sglang.py; this file adds
the rest: state and audit files, journals, stored runs, prompts, themes, rename rules, indexes,
`ps` output, server replies of any shape, and the runbook and sweep tables of the config."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.errors import CockpitError, ConfigError
from harness.faultreport import FaultRow, report

# one worker runs them all, in their order: the last one reports what the others counted (in this process)
pytestmark = pytest.mark.xdist_group("bad-input")
SETTINGS = settings(max_examples=int(__import__("os").environ.get("COCKPIT_FUZZ_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
# Shapes a hand-edited or half-copied file really has: JSON of the wrong shape, text, raw bytes.
FILE_BYTES = st.one_of(
    JSONISH.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=300).map(str.encode),
    st.binary(max_size=300),
)
COUNTS: dict[str, int] = {}


def counted(name: str):
    COUNTS[name] = COUNTS.get(name, 0) + 1


SCRATCH = tempfile.TemporaryDirectory(prefix="cockpit-fuzz-")  # removed when the test run ends


def scratch(data: bytes, name: str) -> Path:
    folder = Path(tempfile.mkdtemp(dir=SCRATCH.name))
    path = folder / name
    path.write_bytes(data)
    return path


@SETTINGS
@given(FILE_BYTES, FILE_BYTES)
def test_runbook_state_and_audit_files(state, audit):
    from cockpit.runbook.store import StateStore

    counted("runbook state and audit files")
    root = scratch(b"", "x").parent
    store = StateStore("fuzz", root=root)
    store.path.write_bytes(state)
    store.audit_path.write_bytes(audit)
    try:
        store.load()
    except CockpitError as exc:
        assert str(store.path) in str(exc)
    assert isinstance(store.load_overrides(), dict)
    assert all(isinstance(r, dict) for r in store.audit_records())


@SETTINGS
@given(st.dictionaries(st.text(max_size=8), JSONISH, max_size=4))
def test_runbook_state_with_odd_step_records(steps):
    from cockpit.runbook.store import StateStore

    counted("runbook state and audit files")
    store = StateStore("fuzz", root=scratch(b"", "x").parent)
    store.path.write_text(json.dumps({"format": 1, "steps": steps}))
    try:
        store.load()
    except CockpitError as exc:
        assert str(store.path) in str(exc)


@SETTINGS
@given(st.one_of(FILE_BYTES, st.dictionaries(st.sampled_from(["label", "concurrency", "speculative", "output_throughput_tok_s",
                                                              "requests", "accept_length", "ttft_ms", "tpot_ms", "x"]),
                                            JSONISH, max_size=5).map(lambda d: json.dumps({"type": "summary", **d}).encode())))
def test_stored_benchmark_runs(data):
    from cockpit.bench.store import compare, load_run

    counted("stored benchmark runs")
    path = scratch(data, "run.jsonl")
    try:
        summary = load_run(path)
        assert summary["type"] == "summary"
        compare([summary, summary])  # `bench report` side by side
    except CockpitError as exc:
        assert str(path) in str(exc)


@SETTINGS
@given(FILE_BYTES)
def test_prompt_files(data):
    from cockpit.bench.workload import load_prompts

    counted("prompt files")
    path = scratch(data, "prompts.jsonl")
    try:
        load_prompts(path)
    except CockpitError as exc:
        assert str(path) in str(exc)


@SETTINGS
@given(st.one_of(st.binary(max_size=200),
                 st.dictionaries(st.sampled_from(["name", "base", "primary", "dark", "accent", "background", "x"]),
                                 st.one_of(st.text(max_size=10), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2)),
                                 max_size=4)))
def test_theme_files(content):
    from cockpit.ui.themes import load_theme_file

    counted("theme files")
    if isinstance(content, dict):
        content = "".join(f"{k} = {json.dumps(v)}\n" for k, v in content.items()).encode()
    path = scratch(content, "theme.toml")
    try:
        load_theme_file(path)
    except ConfigError as exc:
        assert str(path) in str(exc)


@SETTINGS
@given(st.lists(st.text(max_size=20), max_size=4))
def test_rename_rules(rules):
    from cockpit.drafter.fixkeys import parse_rules

    counted("fix-keys rules")
    try:
        for old, new in parse_rules(rules):
            assert old and isinstance(new, str)
    except CockpitError as exc:
        assert "rule" in str(exc)


@SETTINGS
@given(FILE_BYTES)
def test_fix_keys_journals(journal):
    """A journal of any content beside a real checkpoint: repaired, or refused by name."""
    from cockpit.drafter.fixkeys import JOURNAL_SUFFIX, fix_keys, header_after_recovery, LocalOps
    from drafter_files import T, save_file

    counted("fix-keys journals")
    path = scratch(b"", "model.safetensors")
    save_file({"layers.0.w": T.of("F32", (4,), bytes(16))}, str(path))
    Path(str(path) + JOURNAL_SUFFIX).write_bytes(journal)
    for action in (lambda: header_after_recovery(LocalOps(), str(path)), lambda: fix_keys(path), lambda: fix_keys(path, dry_run=True)):
        try:
            action()
        except CockpitError as exc:
            assert str(path) in str(exc)


@SETTINGS
@given(FILE_BYTES)
def test_safetensors_indexes(index):
    from cockpit.drafter.fixkeys import fix_keys
    from cockpit.drafter.inspect import inspect_draft

    counted("safetensors indexes")
    folder = scratch(index, "model.safetensors.index.json").parent
    for action in (lambda: inspect_draft(folder), lambda: fix_keys(folder, dry_run=True)):
        try:
            action()
        except CockpitError as exc:
            assert str(folder) in str(exc)


@SETTINGS
@given(FILE_BYTES)
def test_draft_config_json(config):
    from cockpit.drafter.inspect import inspect_draft, render_report
    from drafter_files import T, save_file

    counted("draft config.json")
    folder = scratch(config, "config.json").parent
    save_file({"midlayer.w": T.of("F32", (4,), bytes(16))}, str(folder / "model.safetensors"))
    report_ = inspect_draft(folder)
    render_report(report_)
    json.dumps(report_.to_json() if hasattr(report_, "to_json") else {}, default=str)


@SETTINGS
@given(st.text(max_size=500))
def test_ps_output(text):
    from cockpit.hosts.procs import parse_ps

    counted("ps output")
    for row in parse_ps(text):
        assert row.pid >= 0 and row.ppid >= 0


@SETTINGS
@given(st.lists(st.binary(max_size=60), max_size=6))
def test_any_http_reply(parts):
    """Whatever a server (or something else on its port) answers, a benchmark request and a
    /server_info probe end as a failure or a result."""
    from cockpit.bench.client import RequestRecord, run_request
    from cockpit.bench.sweep import server_info

    counted("HTTP replies")
    raw = b"".join(parts)

    async def go():
        async def handle(reader, writer):
            await reader.read(65536)
            writer.write(raw)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        class Direct:  # a transport's open_tcp, as the sweep's probes use it
            async def open_tcp(self, host, port_):
                return await asyncio.open_connection(host, port_)

        async with server:
            record = await run_request(lambda h, p: asyncio.open_connection(h, p), f"http://127.0.0.1:{port}", "sglang",
                                       [{"role": "user", "content": "x"}], 4, 0.0, RequestRecord(0))
            assert record.ok or record.error
            info = await server_info(Direct(), port)
            assert isinstance(info, dict)

    asyncio.run(go())


@SETTINGS
@given(st.dictionaries(st.sampled_from(["name", "kind", "host", "argv", "pattern", "max_used_mib", "port", "depths",
                                        "requests", "flags", "path", "timeout_s", "settle_s", "log", "model_path"]),
                       JSONISH, max_size=5))
def test_runbook_steps_of_any_shape(step):
    """[[runbook.steps]] tables with any keys and values: a ConfigError naming the file, or a runbook."""
    from cockpit.config import parse_config
    from cockpit.context import parse_runbook

    counted("runbook and sweep tables")
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in step.items() if v is not None and not _has_nan(v))
    text = '[hosts.gpu]\nlocal = true\n\n[runbook]\nname = "f"\n\n[[runbook.steps]]\n' + lines
    try:
        parse_runbook(parse_config(text, "fuzz.toml"))
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml")


@SETTINGS
@given(st.dictionaries(st.sampled_from(["launch_step", "depths", "requests", "concurrency", "max_tokens", "repeats", "api", "x"]),
                       JSONISH, max_size=4))
def test_sweep_tables_of_any_shape(sweep):
    from cockpit.bench.sweep import parse_sweep
    from cockpit.config import parse_config
    from cockpit.context import parse_runbook

    counted("runbook and sweep tables")
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in sweep.items() if v is not None and not _has_nan(v))
    text = ('[hosts.gpu]\nlocal = true\n\n[runbook]\nname = "f"\n\n[[runbook.steps]]\nname = "launch"\nkind = "launch"\n'
            'host = "gpu"\nargv = ["true"]\n\n[bench]\n' + lines)
    try:
        config = parse_config(text, "fuzz.toml")
        parse_sweep(config, parse_runbook(config))
    except CockpitError as exc:
        assert str(exc).startswith("fuzz.toml")


def _has_nan(value) -> bool:
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


@SETTINGS
@given(st.one_of(JSONISH.map(json.dumps), st.text(max_size=40)))
def test_speculative_config_values(value):
    """vLLM's --speculative-config takes JSON: any value gets a suggestion or none, never a crash."""
    from cockpit.sglang.lint import lint as lint_args
    from cockpit.serving.helpschema import load_schema

    counted("flag values (lint)")
    schema = load_schema(Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "help_0.5.23.txt")
    lint_args(["--model-path", "m", "--speculative-config", value], schema)
    lint_args(["--model-path", "m", "--num-speculative-tokens", value], schema)


def test_zz_bad_input_row():
    """The table row for this file (runs last in it)."""
    total = sum(COUNTS.values())
    report(FaultRow(f"bad input (hypothesis, {len(COUNTS)} kinds of input)", total, "n/a", 0, [],
                    note="examples; every one ended in a named error or a result (failures fail the test above)"))
    assert total > 0
