"""The conformance suite: one set of tests run over every engine the registry has (as Harlequin runs one suite over
every adapter).  An engine passes when its own command line passes its own lint and a bad flag is refused, a
recorded crash of it is read as its log and named with a fix, its depth round-trips through its command line, and
its STAND-IN server (the demo's: it replays the engine's recorded `--help`, start-up and serving formats) started
with the command line the engine builds comes up as the core waits for it, its start-up milestones in the order
the server pane shows them, and serves a benchmark whose figures the core reads from its log and /metrics.

Adding an engine: its package, its recorded texts (SAMPLES below), and this suite passing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.serving import engines
from cockpit.serving.depth import DepthConfig
from cockpit.serving.helpschema import load_schema
from cockpit.serving.logread import diagnose_lines
from cockpit.serving.request import LaunchRequest
from harness.sshd import free_port

FIXTURES = Path(__file__).parent / "fixtures"
PACKAGE = Path(__file__).parent.parent / "cockpit"

# each engine's recorded texts (tests/fixtures/*/README.md says how each was recorded from a released wheel)
SAMPLES = {
    "sglang": {"help": PACKAGE / "sglang" / "data" / "help_0.5.23.txt", "version": "0.5.23",
               "crash": FIXTURES / "sglang" / "unrecognized_0.5.23.log", "crash_kind": "unrecognized_argument"},
    "vllm": {"help": FIXTURES / "vllm" / "help_0.10.2.txt", "version": "0.10.2",
             "crash": FIXTURES / "vllm" / "unrecognized_0.10.2.log", "crash_kind": "unrecognized_argument"},
}
ENGINES = [pytest.param(e, id=e.name) for e in engines.engines()]


def test_every_engine_has_its_recorded_texts():
    assert sorted(SAMPLES) == sorted(engines.names())


@pytest.mark.parametrize("engine", ENGINES)
def test_its_own_line_passes_its_own_lint_and_a_bad_flag_is_refused(engine):
    sample = SAMPLES[engine.name]
    schema = load_schema(sample["help"])
    schema.version = sample["version"]
    argv = engine.server_argv(LaunchRequest(engine.name, "/models/target", "/ckpt/eagle3", depth=DepthConfig.chain(3), tp=8), "python3")
    assert engine.is_command(argv) and engines.engine_of_command(argv) is engine
    report = engine.lint(argv, sample["version"], schema)
    assert report.ok, [d.message for d in report.errors]
    bad = engine.lint(argv + ["--definitely-not-a-flag", "3"], sample["version"], schema)
    assert not bad.ok and any(d.flag == "--definitely-not-a-flag" for d in bad.errors), [d.message for d in bad.diagnoses]


@pytest.mark.parametrize("engine", ENGINES)
def test_its_depth_round_trips_through_its_command_line(engine):
    argv = engine.server_argv(LaunchRequest(engine.name, "/m", "/d", depth=DepthConfig.chain(16)), "python3")
    assert engine.depth_of_argv(argv) == DepthConfig.chain(16)
    for depth in (DepthConfig.chain(5), DepthConfig()):  # a sweep's run: only the depth changes; the baseline has none
        changed = engine.with_depth(argv, depth)
        assert engine.depth_of_argv(changed) == depth and "/m" in changed


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("depth", [DepthConfig.chain(16), DepthConfig.chain(3), DepthConfig(3, 4, 8)], ids=str)
@pytest.mark.parametrize("extra", [(), ("--trust-remote-code",)], ids=["bare", "extra"])
def test_a_checkpoint_measured_changes_only_the_draft_of_its_line(engine, depth, extra):
    """bench/checkpoints.py serves each checkpoint through the launch step's own line (a fix may have rewritten it):
    only the draft changes; the line stays the engine's own, its lint passes, its depth and every other word stay."""
    sample = SAMPLES[engine.name]
    schema = load_schema(sample["help"])
    schema.version = sample["version"]
    argv = engine.server_argv(LaunchRequest(engine.name, "/m", "/ckpt/epoch_2", depth=depth, tp=8, extra_args=extra), "python3")
    for _ in range(2):  # applied twice: the same line
        argv2 = engine.with_draft(argv, "/ckpt/epoch_0")
        assert engine.with_draft(argv2, "/ckpt/epoch_0") == argv2
    assert "/ckpt/epoch_0" in " ".join(argv2) and "/ckpt/epoch_2" not in " ".join(argv2)
    assert engine.depth_of_argv(argv2) == engine.depth_of_argv(argv) and engine.lint(argv2, sample["version"], schema).ok
    assert engine.with_draft(argv2, "/ckpt/epoch_2") == argv or sorted(engine.with_draft(argv2, "/ckpt/epoch_2")) == sorted(argv)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_recorded_crash_is_read_as_its_log_and_named_with_a_fix(engine):
    sample = SAMPLES[engine.name]
    lines = sample["crash"].read_text().splitlines()
    assert engines.engine_of_log(lines) is engine
    report = diagnose_lines(lines)
    assert report.engine == engine.name and not report.ready
    first = report.diagnoses[0]
    assert first.kind == sample["crash_kind"] and first.severity == "error" and (first.replacement or first.suggestions)
    assert first.line is not None and lines[first.line - 1]  # the line it was read from


@pytest.mark.parametrize("engine", ENGINES)
def test_its_capabilities_are_whole(engine):
    caps = engine.capabilities
    assert caps.bench_api in ("sglang", "openai") and caps.acceptance_source in ("responses", "metrics")
    # a group: launched by the cockpit over SSH (multi_node), or at least handed to a scheduler (plan emit)
    assert caps.metrics_prefix.endswith(":") and (engine.group is not None or not caps.multi_node)
    assert engine.group is None or hasattr(engine.group, "emit")
    assert engine.start_steps and set(engine.start_steps) <= {name for name, _ in engine.milestones}
    assert engines.label(engine.name) == engine.label and engine.version_problem("0.1.2") is None
    assert engine.version_problem("banana")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_its_stand_in_comes_up_and_serves_figures_the_core_reads(engine, tmp_path):
    """The STAND-IN started by the engine's own command line: ready as the core waits for it, milestones in the
    pane's order, and a benchmark's figures read from its log lines and its /metrics the same way for every engine."""
    from cockpit.bench.client import Workload, run_closed_loop
    from cockpit.config import HostConfig
    from cockpit.demo.world import serving_python
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport
    from cockpit.serving.live import LiveServer, opener_for
    from cockpit.serving.server import wait_ready

    port = free_port()
    python = serving_python(tmp_path, sys.executable)
    argv = engine.server_argv(LaunchRequest(engine.name, "/models/target", "/ckpt/eagle3", depth=DepthConfig.chain(3), port=port), python)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    transport = LocalTransport(HostConfig(name="here", local=True), CommandLog())

    async def go():
        ready = await wait_ready(transport, server.pid, port, str(log), timeout=60, poll_s=0.2)
        assert ready.state == "ready", (ready.state, ready.lines[-5:])
        assert ready.report.engine == engine.name
        seen = [name for name, _ in ready.report.milestones if name in engine.start_steps]
        assert seen == [s for s in engine.start_steps if s in seen] and "ready" in seen  # in the pane's order
        live = LiveServer(transport, str(log), f"http://127.0.0.1:{port}")
        await live.poll(catch_up=True)
        workload = Workload([[{"role": "user", "content": "Say something long."}]] * 4, requests=16, concurrency=4, max_tokens=64)
        records, _, _ = await run_closed_loop(f"http://127.0.0.1:{port}", engine.capabilities.bench_api, workload,
                                              opener=opener_for(transport))
        assert records and all(r.ok for r in records)
        for _ in range(40):  # its periodic lines (vLLM logs every few seconds) and its counters
            figures = await live.poll(catch_up=True)
            data = figures.to_json()
            if data["accept_length"]["window"] or data["accept_length"]["counters"]:
                break
            await asyncio.sleep(0.5)
        assert figures.engine == engine.name, figures.engine
        accept = data["accept_length"]["window"] or data["accept_length"]["counters"]
        assert accept is not None and 1.0 < accept <= 4.0, data["accept_length"]  # a chain of 3: at most 4 tokens a step
        assert data["sources"], data

    try:
        asyncio.run(go())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


def test_a_log_of_no_engine_is_the_default_engines_to_read():
    assert engines.engine_of_log(["hello", "world"]) is engines.engine(None)
    assert diagnose_lines(["hello"]).engine == engines.DEFAULT


def test_an_unknown_engine_is_refused_naming_the_registry():
    from cockpit.errors import CockpitError

    with pytest.raises(CockpitError, match="engine must be one of 'sglang', 'vllm', got 'tgi'"):
        engines.engine("tgi")


def test_the_old_step_kind_names_still_load(tmp_path):
    """serve_launch and serve_ready are the kinds' names; runbooks written with sglang_launch/sglang_ready load as they were."""
    from cockpit.config import load_config
    from cockpit.context import parse_runbook

    text = ('[hosts.here]\nlocal = true\n\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "here"\n\n'
            '[[runbook.steps]]\nname = "launch"\nkind = "{launch}"\nhost = "here"\nmodel_path = "/m"\n\n'
            '[[runbook.steps]]\nname = "ready"\nkind = "{ready}"\nhost = "here"\n')
    for launch, ready in (("serve_launch", "serve_ready"), ("sglang_launch", "sglang_ready")):
        path = tmp_path / f"{launch}.toml"
        path.write_text(text.format(launch=launch, ready=ready))
        spec = parse_runbook(load_config(path))
        assert [spec.kind(s).name for s in spec.steps] == ["gpu_clean", "serve_launch", "serve_ready"]


def test_an_installed_engine_that_cannot_be_taken_is_said_not_silent(tmp_path, monkeypatch, capsys):
    """The `cockpit.engines` entry points of an installed package (real dist-info metadata on sys.path): one whose
    module does not import, one that is not an engine, one that takes a built-in's name, and one good engine (a
    re-export of vLLM's under another name).  The good one is registered; each refused one is said, with why, by
    `config check` and by the error of a config that names it; the built-in engines still serve."""
    from cockpit.cli import main

    (tmp_path / "thirdparty_engine.py").write_text(
        "from cockpit.vllm.engine import ENGINE as _vllm\nimport dataclasses\nNOT_AN_ENGINE = object()\nGOOD = _vllm\n")
    info = tmp_path / "thirdparty_engine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[cockpit.engines]\nbroken = no_such_module_here:ENGINE\nhollow = thirdparty_engine:NOT_AN_ENGINE\n"
        "sglang = thirdparty_engine:GOOD\ngood = thirdparty_engine:GOOD\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    engines._all.cache_clear()
    engines._PROBLEMS.clear()
    try:
        refused = engines.load_problems()
        assert set(refused) == {"broken", "hollow", "sglang"}
        assert "ModuleNotFoundError" in refused["broken"] and "no_such_module_here" in refused["broken"]
        assert refused["hollow"].startswith("thirdparty_engine:NOT_AN_ENGINE is not an engine: it has no ")
        assert "already an engine (SGLang)" in refused["sglang"]
        assert engines.names()[:2] == ("sglang", "vllm") and "good" in engines.names()
        assert engines.engine("sglang").label == "SGLang"
        config = tmp_path / "c.toml"
        config.write_text('[hosts.local]\nlocal = true\n')
        assert main(["config", "check", str(config)]) == 0
        out = capsys.readouterr().out
        assert "note: engine 'broken' refused: no_such_module_here:ENGINE could not be loaded" in out
        with pytest.raises(Exception, match="an installed engine of that name was refused: thirdparty_engine:NOT_AN_ENGINE"):
            engines.engine("hollow")
    finally:
        engines._all.cache_clear()
        engines._PROBLEMS.clear()


# --- what an engine declares, and what nobody else decides by its name (issue 49) --------------------------------------


def test_the_launch_parameters_are_the_cores_and_each_engines_own_declaration():
    """A launch step takes the core's parameters and every engine's declared ones; an engine that redeclares one is
    refused at once; a step's request carries only its own engine's, defaulted."""
    from cockpit.runbook.kind import Param
    from cockpit.runbook.model import StepSpec
    from cockpit.serving.request import CORE_PARAMS
    from cockpit.serving.steps import LaunchParams, ServeLaunch

    declared = {key: engine.name for engine in engines.engines() for key in engine.params}
    assert declared and set(ServeLaunch.params) == set(CORE_PARAMS) | set(declared)
    assert not set(declared) & set(CORE_PARAMS)
    assert all(engine.version_key in engine.params for engine in engines.engines())  # its version is its own parameter
    clash = LaunchParams({**CORE_PARAMS, next(iter(declared)): Param(str)})
    with pytest.raises(RuntimeError, match="redeclares"):
        list(clash)
    for engine in engines.engines():
        spec = StepSpec("launch", "serve_launch", "gpu", {"model_path": "/m", "engine": engine.name, "depth": 3})
        request = ServeLaunch.request(spec)
        assert set(request.engine_params) == set(engine.params)
        assert request.depth == DepthConfig.chain(3) and request.hosts == ("gpu",) and request.nodes == 1
        with pytest.raises(AttributeError):
            request.port = 1  # frozen: built once, read everywhere


def test_each_engines_draft_loader_says_what_breaks_which_of_its_releases():
    """The drafter's findings that depend on the loader are each listed by some engine, over its own ranges only; a
    version falls in one of them."""
    from cockpit.drafter.inspect import LOADER_FINDINGS, broken, every

    listed = set()
    for engine in engines.engines():
        loading = engine.draft_loading
        assert loading.label == engine.label and loading.ranges
        for code, ranges in loading.breaks.items():
            assert code in LOADER_FINDINGS and set(ranges) <= set(loading.ranges), (engine.name, code)
            listed.add(code)
        assert {loading.range_of(v) for v in ("0.1.0", "0.5.2", "0.9.1", "0.10.2", "9.0")} <= set(loading.ranges)
    assert listed == set(LOADER_FINDINGS)
    assert all(set(broken(code)) <= set(every()) for code in LOADER_FINDINGS)


def test_no_decision_on_an_engines_name_outside_the_engine_packages():
    """Outside sglang/ and vllm/ (and the demo's stand-ins of them), no comparison, lookup or key is made on an
    engine's config word: the core, the drafter, the runs, the bench, the UI and the CLI ask the registry.  (An HTTP
    API kind the bench speaks, `api == 'sglang'` for SGLang's /generate, is a protocol, not an engine.)"""
    import ast

    root = Path(__file__).resolve().parents[1] / "cockpit"
    words = set(engines.names())
    found = []
    for path in root.rglob("*.py"):
        package = path.relative_to(root).parts[0]
        if package in words or package == "demo":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            constants: list[ast.expr] = []
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Name) and s.id == "api" for s in sides):
                    continue
                constants = [s for s in sides if isinstance(s, ast.Constant)]
                constants += [e for s in sides if isinstance(s, (ast.Tuple, ast.Set, ast.List)) for e in s.elts]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "engine") and node.args:
                constants = [node.args[0]]
            elif isinstance(node, ast.Subscript):
                constants = [node.slice]
            for constant in constants:
                if isinstance(constant, ast.Constant) and constant.value in words:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)[:90]}")
    assert found == []
