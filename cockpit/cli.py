"""The `cockpit` command: the TUI by default, and every check and action as a subcommand for scripts.

Exit codes are honest: 0 all good, 1 a check found a problem, 2 could not check (bad input,
unreachable host).  User mistakes print one clear line, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Sequence

from cockpit import __version__
from cockpit.config import Config, load_config
from cockpit.errors import CockpitError
from cockpit.hosts.state import HostState
from cockpit.telemetry.model import HostSnapshot

EXIT_OK, EXIT_PROBLEM, EXIT_UNREACHABLE = 0, 1, 2


def _add_config(parser: argparse.ArgumentParser, top: bool = False) -> None:
    # Subcommands take --config too; SUPPRESS keeps them from resetting a value given before the command.
    parser.add_argument("--config", "-c", metavar="FILE", default=None if top else argparse.SUPPRESS, help="config file (default: $XDG_CONFIG_HOME/cockpit/config.toml, else this machine only)")
    parser.add_argument("--log-commands", action="store_true", default=False if top else argparse.SUPPRESS, help="print every command run on a host to stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cockpit",
        description="A terminal cockpit for deploying EAGLE-3 drafters with SGLang on GPU hosts. "
        "With no command, opens the cockpit (the TUI) on the configured hosts, or on this machine.",
    )
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    _add_config(parser, top=True)
    parser.add_argument("--read-only", action="store_true", help="open the cockpit for monitoring only: no step or action can run")
    parser.add_argument("--theme", metavar="NAME", help="cockpit-dark, cockpit-light, cockpit-contrast, cockpit-terminal (follows the terminal's palette), or a file in ~/.config/cockpit/themes")
    parser.add_argument("--ascii", action="store_true", help="ASCII borders and glyphs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = sub.add_parser("status", help="every host and GPU, once or streaming (no TUI)")
    _add_config(status)
    status.add_argument("--once", action="store_true", help="sample every host once and exit")
    status.add_argument("--watch", action="store_true", help="stream the status every interval (the default without --once)")
    status.add_argument("--json", action="store_true", help="JSON output (with --watch: one object per line)")
    status.add_argument("--timeout", type=float, default=None, metavar="S", help="give up on a host after S seconds (default: its connect timeout + 15)")
    status.add_argument("--host", action="append", metavar="NAME", help="only these hosts (repeatable)")

    config = sub.add_parser("config", help="check a config file")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION")
    check = config_sub.add_parser("check", help="parse and validate a config; exit 0 when it is good")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--json", action="store_true")

    trust = sub.add_parser("trust", help="show a host's SSH key fingerprint and add it to known_hosts (trust on first use)")
    _add_config(trust)
    trust.add_argument("host", metavar="HOST")
    trust.add_argument("--yes", action="store_true", help="do not ask")

    verify = sub.add_parser("verify", help="are every GPU of HOST clean? exit 0 clean, 1 not clean, 2 could not verify")
    _add_config(verify)
    verify.add_argument("host", metavar="HOST")
    verify.add_argument("--json", action="store_true")
    verify.add_argument("--max-used-mib", type=int, default=None, metavar="MIB", help="used memory allowed per GPU (default 256)")
    verify.add_argument("--gpus", default=None, metavar="LIST", help="only these GPU indices, e.g. 0,1,2,3")
    verify.add_argument("--timeout", type=float, default=None, metavar="S")

    plan = sub.add_parser("plan", help="the runbook: show, run or reset its steps")
    plan_sub = plan.add_subparsers(dest="plan_command", metavar="ACTION")
    show = plan_sub.add_parser("show", help="every step with its state and evidence")
    _add_config(show)
    show.add_argument("--json", action="store_true")
    run = plan_sub.add_parser("run", help="run STEP, or every step from the first not yet passed")
    _add_config(run)
    run.add_argument("step", nargs="?", metavar="STEP")
    run.add_argument("--yes", action="store_true", help="confirm destructive steps without asking (the plan is still printed)")
    run.add_argument("--json", action="store_true")
    run.add_argument("--force", metavar="STEP", help="skip the gate of STEP (needs --reason; recorded in the audit log)")
    run.add_argument("--reason", metavar="TEXT", help="why the gate is skipped")
    stop = plan_sub.add_parser("stop", help="stop the server a launch step started (asks, or --yes)")
    _add_config(stop)
    stop.add_argument("step", metavar="STEP")
    stop.add_argument("--yes", action="store_true")
    reset = plan_sub.add_parser("reset", help="forget the recorded results (of STEP, or of every step)")
    _add_config(reset)
    reset.add_argument("step", nargs="?", metavar="STEP")

    parse_log = sub.add_parser("parse-log", help="diagnose an SGLang server log: named flag errors and crash causes, with the fix")
    parse_log.add_argument("path", metavar="PATH")
    parse_log.add_argument("--json", action="store_true")
    parse_log.add_argument("--help-text", metavar="FILE", help="SGLang --help output (or a cockpit schema JSON) for better suggestions")

    lint = sub.add_parser("lint-flags", help="check an SGLang command line before launch: exit 0 accepted, 1 it would fail",
                          usage="cockpit lint-flags [--host H | --help-text FILE] [--json] -- ARGS...")
    _add_config(lint)
    source = lint.add_mutually_exclusive_group()
    source.add_argument("--host", metavar="H", help="use the flags of the SGLang installed on host H")
    source.add_argument("--help-text", "--schema", dest="help_text", metavar="FILE", help="SGLang --help output or a schema JSON")
    lint.add_argument("--python", default=None, help="the interpreter on the host (default: the host's 'python' setting)")
    lint.add_argument("--json", action="store_true")
    lint.add_argument("--deep", action="store_true", help="with --host: also run SGLang's own parser there (prepare_server_args, no server started)")
    lint.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")

    drafter = sub.add_parser("drafter", help="EAGLE-3 draft checkpoints: inspect, fix key names, convert")
    drafter_sub = drafter.add_subparsers(dest="drafter_command", metavar="ACTION")
    inspect = drafter_sub.add_parser("inspect", help="is a draft ready for SGLang? exit 0 ready, 1 problems, 2 unreadable")
    inspect.add_argument("path", metavar="PATH")
    inspect.add_argument("--sglang", metavar="VERSION", help="judge for this SGLang version only")
    inspect.add_argument("--keys", action="store_true", help="list every key with dtype and shape")
    inspect.add_argument("--json", action="store_true")
    fix = drafter_sub.add_parser("fix-keys", help="rename keys (default layers.0. to midlayer.) in place, crash-safe")
    _add_config(fix)
    fix.add_argument("path", metavar="PATH")
    fix.add_argument("--rule", action="append", metavar="OLD=NEW", help="a prefix rename (repeatable); default layers.0.=midlayer.")
    fix.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")
    fix.add_argument("--yes", action="store_true", help="rewrite without asking")
    fix.add_argument("--host", metavar="H", help="PATH is on host H: fixed over SFTP, header bytes only")
    fix.add_argument("--json", action="store_true")
    conv = drafter_sub.add_parser("convert", help="a training checkpoint (.bin/.pt or a directory) to SGLang-ready safetensors")
    conv.add_argument("src", metavar="SRC")
    conv.add_argument("dst", metavar="DST")
    conv.add_argument("--dtype", help="cast floating tensors: bf16, fp16, fp32 (default: keep)")
    conv.add_argument("--rule", action="append", metavar="OLD=NEW", help="key prefix renames (default: strip draft_model. and module., layers.0. to midlayer.)")
    conv.add_argument("--overwrite", action="store_true")
    conv.add_argument("--json", action="store_true")

    bench = sub.add_parser("bench", help="benchmarks against SGLang: one run, a depth sweep, reports")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="ACTION")
    brun = bench_sub.add_parser("run", help="one benchmark against a running server")
    brun.add_argument("--endpoint", required=True, metavar="URL", help="e.g. http://127.0.0.1:30000")
    brun.add_argument("--api", choices=("sglang", "openai"), default="sglang")
    brun.add_argument("--prompts", metavar="FILE", help="JSONL of chat messages (default: the shipped sample)")
    brun.add_argument("--requests", type=int, default=64)
    brun.add_argument("--concurrency", type=int, default=8)
    brun.add_argument("--max-tokens", type=int, default=256)
    brun.add_argument("--temperature", type=float, default=0.0)
    brun.add_argument("--warmup", type=int, default=None, help="warm-up requests (default: one per concurrent stream)")
    brun.add_argument("--seed", type=int, default=None, help="shuffle the prompts with this seed (default: file order)")
    brun.add_argument("--label", default=None)
    brun.add_argument("--no-save", action="store_true")
    brun.add_argument("--json", action="store_true")
    report = bench_sub.add_parser("report", help="compare stored runs side by side (default: the latest runs)")
    report.add_argument("runs", nargs="*", metavar="RUN")
    report.add_argument("--json", action="store_true")
    report.add_argument("--last", type=int, default=10)
    sweep = bench_sub.add_parser("sweep", help="relaunch the server per depth config and benchmark each (see [bench] in the config)")
    _add_config(sweep)
    sweep.add_argument("--yes", action="store_true", help="relaunch without asking")
    sweep.add_argument("--json", action="store_true")

    demo = sub.add_parser("demo", help="the whole deployment of the story on this machine: no GPU, no network beyond loopback")
    demo.add_argument("--dir", metavar="DIR", help="where the demo's world lives (default: a new temporary folder)")
    demo.add_argument("--theme", default=argparse.SUPPRESS, metavar="NAME")

    init = sub.add_parser("init", help="a short questionnaire that writes a commented config")
    init.add_argument("path", nargs="?", metavar="FILE", help="where to write it (default: the XDG config file)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--example", action="store_true", help="the annotated example config instead of questions (printed, or written to FILE)")

    ui = sub.add_parser("ui", help="open the cockpit (the same as no command)")
    _add_config(ui)
    ui.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS, help="monitoring only: no step or action can run")
    return parser


# --- status ---------------------------------------------------------------------------------------


def _fmt(value, unit: str = "", width: int = 0, digits: int = 0) -> str:
    if value is None:
        text = "n/a"
    elif isinstance(value, float):
        text = f"{value:.{digits}f}{unit}"
    else:
        text = f"{value}{unit}"
    return text.rjust(width)


def render_status_text(snapshots: Sequence[HostSnapshot], now: float) -> str:
    lines: list[str] = []
    for snap in snapshots:
        age = snap.age(now)
        age_text = f", last sample {age:.1f} s ago" if age is not None else ""
        header = f"{snap.name}: {snap.state.value}{age_text}"
        if snap.error:
            header += f" - {snap.error}"
        lines.append(header)
        for gpu in snap.gpus:
            if gpu.lost:
                lines.append(f"  GPU {gpu.index:>2}  LOST  {gpu.bus_id or ''}  {'; '.join(gpu.problems)}")
                continue
            mem = f"{_fmt(gpu.memory_used_mib)}/{_fmt(gpu.memory_total_mib)} MiB"
            power = f"{_fmt(gpu.power_w, ' W', 0, 0)}/{_fmt(gpu.power_limit_w, ' W', 0, 0)}"
            lines.append(
                f"  GPU {gpu.index:>2}  {(gpu.name or '?')[:22]:<22} {mem:>22}  {power:>13}  "
                f"util {_fmt(gpu.utilization_pct, '%', 4)}  {_fmt(gpu.temperature_c, ' C', 5)}"
                + (f"  ! {'; '.join(gpu.problems)}" if gpu.problems else "")
            )
        if snap.processes:
            for proc in snap.processes:
                where = f"GPU {proc.gpu_index}" if proc.gpu_index is not None else (proc.gpu_uuid or "GPU ?")
                lines.append(f"  pid {proc.pid:>7}  {(proc.name or '?')[:30]:<30} {_fmt(proc.used_memory_mib, ' MiB', 10)}  {where}")
        elif snap.state.reached and snap.gpus:
            lines.append("  no compute processes")
    return "\n".join(lines)


def status_exit_code(snapshots: Sequence[HostSnapshot]) -> int:
    if any(not s.state.reached for s in snapshots):
        return EXIT_UNREACHABLE
    if any(s.state is HostState.DRIVER_ERROR for s in snapshots):
        return EXIT_PROBLEM
    return EXIT_OK


def ask(question: str, yes: bool, refusal: str) -> bool:
    """The one way the CLI asks before a destructive action: --yes, else a terminal's answer, else no."""
    if yes:
        return True
    if not sys.stdin.isatty():
        print(f"cockpit: {refusal}: run it in a terminal, or pass --yes", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def confirmer(args, refusal: str):
    """An async confirm callback for the engine: prints the plan, then asks (or takes --yes)."""

    async def confirm(text: str) -> bool:
        print(text, file=sys.stderr)
        if args.yes:
            print("(confirmed by --yes)", file=sys.stderr)
            return True
        return await asyncio.to_thread(ask, "Go ahead?", False, refusal)

    return confirm


def _select_hosts(config: Config, names: list[str] | None) -> Config:
    if not names:
        return config
    from dataclasses import replace

    return replace(config, hosts=tuple(config.host(n) for n in names))


async def _status_once(config: Config, args) -> int:
    from cockpit.telemetry.hub import TelemetryHub

    hub = TelemetryHub(config)
    _attach_command_echo(hub.log, args)
    try:
        snapshots = await hub.sample_once(args.timeout)
    finally:
        await hub.stop()
    now = time.time()
    if args.json:
        print(json.dumps({"hosts": [s.to_json(now) for s in snapshots]}, indent=2))
    else:
        print(render_status_text(snapshots, now))
    return status_exit_code(snapshots)


async def _status_watch(config: Config, args) -> int:
    from cockpit.telemetry.hub import TelemetryHub

    hub = TelemetryHub(config)
    _attach_command_echo(hub.log, args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    hub.start()
    interval = config.telemetry.interval_ms / 1000.0
    try:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
            now = time.time()
            snapshots = [hub.latest[h.name] for h in config.hosts]
            try:
                if args.json:
                    sys.stdout.write(json.dumps({"time": now, "hosts": [s.to_json(now) for s in snapshots]}) + "\n")
                else:
                    stamp = time.strftime("%H:%M:%S", time.localtime(now))
                    sys.stdout.write(f"--- {stamp}\n{render_status_text(snapshots, now)}\n")
                sys.stdout.flush()
            except BrokenPipeError:
                break  # the reader went away (| head, a dropped terminal): stop quietly
    finally:
        await hub.stop()
    return EXIT_OK


def _attach_command_echo(log, args) -> None:
    if getattr(args, "log_commands", False):
        def echo(record):
            if record.finished_at is None:
                print(f"[{record.host}] $ {record.command}", file=sys.stderr)
            else:
                print(f"[{record.host}] exit {record.exit_status}" + (f" ({record.error})" if record.error else "") + f": {record.command}", file=sys.stderr)
        log.subscribe(echo)


def cmd_status(args) -> int:
    config = _select_hosts(load_config(args.config), args.host)
    if args.once:
        return asyncio.run(_status_once(config, args))
    return asyncio.run(_status_watch(config, args))


def cmd_config_check(args) -> int:
    from cockpit.context import load_checked

    checked = load_checked(args.file)
    config, runbook, sweep = checked.config, checked.runbook, checked.sweep
    if args.json:
        print(json.dumps({"ok": True, "file": args.file, "hosts": [
            {"name": h.name, "local": h.local, "address": h.address, "user": h.user, "port": h.port,
             "jump_host": h.jump_host, "roles": list(h.roles), "connect_timeout": h.connect_timeout}
            for h in config.hosts],
            "runbook": {"name": runbook.name, "steps": [{"name": s.name, "kind": s.kind, "host": s.host} for s in runbook.steps]},
            "sweep": None if sweep is None else {"launch_step": sweep.launch_step, "configs": [c.label for c in sweep.configs()],
                                                 "concurrency": list(sweep.concurrency)}}, indent=2))
    else:
        print(f"{args.file}: OK, {len(config.hosts)} host(s), {len(runbook.steps)} runbook step(s)")
        for host in config.hosts:
            roles = f" [{', '.join(host.roles)}]" if host.roles else ""
            via = f" via {host.jump_host}" if host.jump_host else ""
            print(f"  {host.label}{via}{roles}")
        for number, step in enumerate(runbook.steps, start=1):
            print(f"  step {number}. {step.name}: {step.kind} on {step.host}")
        if sweep is not None:
            print(f"  sweep: relaunch '{sweep.launch_step}' for {', '.join(c.label for c in sweep.configs())}; "
                  f"concurrency {', '.join(map(str, sweep.concurrency))}")
    return EXIT_OK


def cmd_trust(args) -> int:
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.pool import TransportPool
    from cockpit.hosts.ssh import SshTransport, fingerprint, known_hosts_entry_name, trust_host_key

    config = load_config(args.config)
    host = config.host(args.host)
    if host.local:
        raise CockpitError(f"host '{host.name}' is local: there is no SSH host key to trust")

    async def go() -> int:
        pool = TransportPool(config, CommandLog())
        transport = pool.get(host)
        assert isinstance(transport, SshTransport)
        try:
            key, name, port = await transport.fetch_host_key()
            if key is None:
                print(f"cockpit: could not reach {host.label} to read its host key", file=sys.stderr)
                return EXIT_UNREACHABLE
            entry = known_hosts_entry_name(name, port)
            print(f"{entry} offers {fingerprint(key)}")
            print(f"It will be added to {transport.known_hosts_path}.")
            if not ask("Trust this key? Compare the fingerprint with the host's owner first", args.yes,
                       "trusting a host key needs an answer"):
                print("Not trusted.")
                return EXIT_PROBLEM
            entry, fp, path = await trust_host_key(transport)
            print(f"Trusted {entry} ({fp}) in {path}")
            return EXIT_OK
        finally:
            await pool.close()

    return asyncio.run(go())


def _parse_gpu_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CockpitError(f"--gpus: '{text}' is not a comma-separated list of GPU indices") from None


def cmd_verify(args) -> int:
    from cockpit.runbook.checks import DEFAULT_MAX_USED_MIB, verify_host
    from cockpit.telemetry.hub import TelemetryHub

    config = load_config(args.config)
    config.host(args.host)
    gpus = _parse_gpu_list(args.gpus)
    limit = args.max_used_mib if args.max_used_mib is not None else DEFAULT_MAX_USED_MIB

    async def go():
        hub = TelemetryHub(config)
        _attach_command_echo(hub.log, args)
        try:
            return await verify_host(hub, args.host, limit, gpus, timeout=args.timeout)
        finally:
            await hub.stop()

    report = asyncio.run(go())
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    elif report.error:
        print(f"{args.host}: could not verify: {report.error}")
    elif report.clean:
        print(f"{args.host}: clean: {len(report.evidence['gpus'])} GPU(s) at or below {limit} MiB, no compute processes")
    else:
        print(f"{args.host}: NOT clean:")
        for reason in report.reasons:
            print(f"  {reason}")
    return report.exit_code


NO_CONFIG_HINT = ("`cockpit init` writes a config (`cockpit init --example` prints an annotated one); "
                  "`cockpit demo` shows the whole flow on this machine")


def _load_checked(args):
    from cockpit.context import load_checked

    checked = load_checked(args.config)
    if checked.config.implicit:
        raise CockpitError(f"no config: {NO_CONFIG_HINT}")
    return checked


def _load_runbook(args, checked=None):
    from cockpit.runbook.engine import Runbook
    from cockpit.telemetry.hub import TelemetryHub

    checked = checked or _load_checked(args)
    if not checked.runbook.steps:
        raise CockpitError(f"{checked.config.path} has no runbook: add [[runbook.steps]] tables "
                           "(`cockpit init --example` prints an annotated config with one)")
    hub = TelemetryHub(checked.config)
    _attach_command_echo(hub.log, args)
    return Runbook(checked.runbook, hub)


def _age(ts: float | None) -> str:
    if ts is None:
        return ""
    seconds = time.time() - ts
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def render_plan_text(runbook) -> str:
    marks = {"passed": "[x]", "failed": "[!]", "running": "[~]", "blocked": "[ ]", "pending": "[ ]", "stale": "[?]"}
    lines = [f"runbook {runbook.spec.name} (state: {runbook.store.path})"]
    for number, view in enumerate(runbook.views(), start=1):
        lock = " LOCKED" if view.locked else ""
        lines.append(f"{marks[view.state.value]} {number}. {view.spec.name} on {view.spec.host}: {view.state.value}{lock}  - {view.title}")
        lines.append(f"      {view.why}")
        for warning in view.warnings:
            lines.append(f"      warning: {warning}")
        if view.result is not None:
            when = _age(view.result.finished_at or view.result.started_at)
            lines.append(f"      {view.result.message}" + (f" ({when})" if when else ""))
            if view.result.forced_reason:
                lines.append(f"      gate skipped on purpose: {view.result.forced_reason}")
    return "\n".join(lines)


def cmd_plan(args) -> int:
    from cockpit.runbook.engine import GateClosed
    from cockpit.runbook.model import StepState

    action = args.plan_command
    if action not in ("show", "run", "reset", "stop"):
        build_parser().parse_args(["plan", "--help"])
    runbook = _load_runbook(args)

    confirm = confirmer(args, "this step needs confirmation")

    if action == "show":
        if args.json:
            print(json.dumps({"runbook": runbook.spec.name, "state_file": str(runbook.store.path),
                              "steps": [v.to_json() for v in runbook.views()]}, indent=2))
        else:
            print(render_plan_text(runbook))
        return EXIT_OK
    if action == "stop":
        async def stop() -> str:
            try:
                return await runbook.stop_server(args.step, confirm)
            finally:
                await runbook.hub.stop()

        print(asyncio.run(stop()))
        return EXIT_OK
    if action == "reset":
        runbook.reset(args.step)
        print(f"reset {'step ' + args.step if args.step else 'every step'} of runbook {runbook.spec.name}")
        return EXIT_OK

    if bool(args.force) != bool(args.reason):
        raise CockpitError("--force STEP and --reason TEXT go together: say which gate to skip and why")
    force = {args.force: args.reason} if args.force else {}
    if args.force:
        runbook.spec.step(args.force)

    async def go():
        try:
            if args.step:
                return [(args.step, await runbook.run_step(args.step, confirm, force.get(args.step)))]
            return await runbook.run_all(confirm, force)
        finally:
            await runbook.hub.stop()

    try:
        ran = asyncio.run(go())
    except GateClosed as exc:
        if args.json:
            print(json.dumps({"ran": [], "refused": {"step": exc.step, "reasons": exc.reasons}}, indent=2))
        else:
            print(f"refused: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    if args.json:
        print(json.dumps({"ran": [{"step": name, **result.to_json()} for name, result in ran]}, indent=2))
    else:
        for name, result in ran:
            print(f"{name}: {result.state.value}: {result.message}")
        if not ran:
            print("every step has passed; `cockpit plan reset` starts over")
    return EXIT_OK if all(r.state is StepState.PASSED for _, r in ran) else EXIT_PROBLEM


def _print_diagnoses(diagnoses) -> None:
    marks = {"error": "error", "warning": "warning", "info": "note"}
    for d in diagnoses:
        where = f"line {d.line}: " if d.line else ""
        print(f"{marks.get(d.severity, d.severity)}: {where}[{d.kind}] {d.message}")
        for suggestion in d.suggestions[:3]:
            if suggestion and suggestion not in d.message:
                print(f"    try: {suggestion}")


def cmd_parse_log(args) -> int:
    from cockpit.sglang.diagnose import diagnose_file
    from cockpit.sglang.schema import load_schema

    schema = load_schema(args.help_text) if args.help_text else None
    report = diagnose_file(args.path, schema)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _print_diagnoses(report.diagnoses)
        if report.ready:
            print("ready: the server is up")
        for note in report.notes:
            print(f"note: {note}")
    errors = [d for d in report.diagnoses if d.severity == "error"]
    return EXIT_PROBLEM if errors else EXIT_OK


def cmd_lint_flags(args) -> int:
    from cockpit.sglang.lint import lint_args, strip_launcher
    from cockpit.sglang.schema import load_schema

    words = list(args.args)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise CockpitError("lint-flags needs the command line after --, e.g. cockpit lint-flags --help-text help.txt -- --model-path M ...")
    deep_lines: list[str] | None = None
    deep_ok = True
    if args.deep and not args.host:
        raise CockpitError("--deep runs SGLang's parser on a host: give --host H")
    if args.host:
        from cockpit.hosts.pool import TransportPool
        from cockpit.sglang.hostschema import dry_run, host_schema

        config = load_config(args.config)
        host = config.host(args.host)

        async def fetch():
            pool = TransportPool(config)
            try:
                python = args.python or host.python
                schema = await host_schema(pool.get(host), python)
                deep = await dry_run(pool.get(host), strip_launcher(words), python) if args.deep else None
                return schema, deep
            finally:
                await pool.close()

        try:
            schema, deep = asyncio.run(fetch())
        except CockpitError:
            raise
        except Exception as exc:  # noqa: BLE001 - transport errors: could not check
            raise CockpitError(str(exc)) from None
        if deep is not None:
            deep_ok, deep_lines = deep
    elif args.help_text:
        schema = load_schema(args.help_text)
    else:
        raise CockpitError("lint-flags needs the flags to check against: --host H (runs SGLang's --help there) or --help-text FILE")
    report = lint_args(strip_launcher(words), schema)
    if deep_lines is not None and not deep_ok:
        from cockpit.sglang.diagnose import Diagnosis, diagnose_lines

        found = diagnose_lines(deep_lines).diagnoses
        known = {(d.kind, d.flag) for d in report.diagnoses}
        extra = [d for d in found if (d.kind, d.flag) not in known]
        if not extra:
            tail = deep_lines[-1] if deep_lines else "no output"
            extra = [Diagnosis("dry_run_failed", f"SGLang's own parser refused the line on {args.host}: {tail[:300]}")]
        report.diagnoses.extend(extra)
    if args.json:
        print(json.dumps({**report.to_json(), "deep": None if deep_lines is None else {"accepted": deep_ok, "output_tail": deep_lines[-20:]},
                          "schema": {"prog": schema.prog, "version": schema.version, "flags": len(schema.flags)}}, indent=2))
    else:
        _print_diagnoses(report.diagnoses)
        if deep_lines is not None:
            print(f"SGLang's own parser on {args.host}: {'accepted' if deep_ok else 'refused'}")
        print("OK: SGLang would accept this command line" if report.ok else "SGLang would refuse this command line")
    return EXIT_OK if report.ok else EXIT_PROBLEM


def cmd_drafter(args) -> int:
    action = args.drafter_command
    if action == "inspect":
        from cockpit.drafter.inspect import inspect_draft, render_report

        report = inspect_draft(args.path)
        if args.json:
            print(json.dumps(report.to_json(args.sglang), indent=2))
        else:
            print(render_report(report, args.sglang, args.keys))
        return EXIT_OK if report.ready(args.sglang) else EXIT_PROBLEM
    if action == "fix-keys":
        return _cmd_fix_keys(args)
    if action == "convert":
        from cockpit.drafter.convert import convert
        from cockpit.drafter.fixkeys import parse_rules

        rules = parse_rules(args.rule) if args.rule else None
        result = convert(args.src, args.dst, args.dtype, **({"rules": rules} if rules else {}), overwrite=args.overwrite)
        print(json.dumps(result, indent=2) if args.json else f"{result['dst']}: {result['tensors']} tensors ({result['renamed']} renamed); {result['config']}")
        return EXIT_OK
    build_parser().parse_args(["drafter", "--help"])
    return EXIT_UNREACHABLE


def _describe_fix(report) -> str:
    lines = []
    for plan in report.files:
        if not plan.renames:
            continue
        how = "header rewritten in place" if plan.in_place else "header grows: file copied and renamed"
        lines.append(f"{plan.path}: {len(plan.renames)} key(s), {how}")
        for old, new in plan.renames[:5]:
            lines.append(f"    {old} -> {new}")
        if len(plan.renames) > 5:
            lines.append(f"    ... and {len(plan.renames) - 5} more")
    if report.index_renames:
        lines.append(f"index: {report.index_renames} entr(ies) renamed")
    return "\n".join(lines)


def _cmd_fix_keys(args) -> int:
    from cockpit.drafter.fixkeys import fix_keys, parse_rules

    rules = parse_rules(args.rule)
    where = ""
    if args.host:
        from cockpit.drafter.remote import fix_on_host

        config = load_config(args.config)

        def run(dry_run: bool):
            return fix_on_host(config, args.host, args.path, rules, dry_run)

        where = f" on {args.host} over SFTP"
    else:
        def run(dry_run: bool):
            return fix_keys(args.path, rules, dry_run=dry_run)

    plan = run(True)
    for note in plan.recovered:
        print(f"note: {note}", file=sys.stderr)
    if plan.changed == 0 and not plan.index_renames and (not plan.recovered or args.dry_run):
        message = "nothing to change: no key matches " + ", ".join(f"'{old}'" for old, _ in rules)
        print(json.dumps({**plan.to_json(), "message": message}, indent=2) if args.json else message)
        return EXIT_OK
    if args.dry_run:
        print(json.dumps(plan.to_json(), indent=2) if args.json else "would rename:\n" + _describe_fix(plan))
        return EXIT_OK
    if plan.changed or plan.index_renames:
        print(f"will rename{where}:\n" + _describe_fix(plan), file=sys.stderr)
        if not ask("Rewrite?", args.yes, "this rewrites checkpoint files"):
            print("Nothing was changed.")
            return EXIT_PROBLEM
    report = run(False)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for note in report.recovered:
            print(f"repaired: {note}")
        print(f"renamed {report.changed} key(s) in {sum(1 for f in report.files if f.renames)} file(s){where}"
              + (f", {report.index_renames} in the index" if report.index_renames else "") + "; verified")
    return EXIT_OK


def cmd_bench_sweep(args) -> int:
    from cockpit.bench.sweep import parse_sweep, render_sweep, run_sweep

    checked = _load_checked(args)
    runbook = _load_runbook(args, checked)
    sweep = checked.sweep or parse_sweep(checked.config, checked.runbook)

    def progress(state: dict) -> None:
        eta = "" if state["eta_s"] is None else f", about {state['eta_s']:.0f} s left"
        print(f"[{state['done']}/{state['total']}{eta}] {state['text']}", file=sys.stderr, flush=True)

    async def go():
        try:
            return await run_sweep(runbook, sweep, confirmer(args, "the sweep relaunches the server"), progress)
        finally:
            await runbook.hub.stop()

    result = asyncio.run(go())
    rows = result.table()
    if args.json:
        print(json.dumps({"rows": rows, "failures": result.failures, "runs": [r["file"] for r in result.runs]}, indent=2))
    else:
        print(render_sweep(rows))
        for failure in result.failures:
            print(f"failed: {failure}")
    return EXIT_OK if not result.failures else EXIT_PROBLEM


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise CockpitError(f"--{name} must be at least 1, got {value}")


def cmd_bench(args) -> int:
    from cockpit.bench import store

    action = args.bench_command
    if action == "run":
        from cockpit.bench.client import Workload, run_closed_loop
        from cockpit.bench.stats import summarize
        from cockpit.bench.workload import load_prompts

        from cockpit.bench.client import probe_endpoint
        from cockpit.bench.http import normalize_endpoint

        for name in ("requests", "concurrency", "max_tokens"):
            _check_positive(name.replace("_", "-"), getattr(args, name))
        try:
            args.endpoint = normalize_endpoint(args.endpoint)
        except ValueError as exc:
            raise CockpitError(f"--endpoint {exc}") from None
        workload = Workload(load_prompts(args.prompts, args.seed), args.requests, args.concurrency, args.max_tokens,
                            args.temperature, args.warmup)
        asyncio.run(probe_endpoint(args.endpoint))

        def progress(done: int, total: int) -> None:
            if not args.json and sys.stderr.isatty():
                print(f"\r{done}/{total} requests", end="", file=sys.stderr, flush=True)

        try:
            records, start, end = asyncio.run(run_closed_loop(args.endpoint, args.api, workload, progress=progress))
        except ValueError as exc:
            raise CockpitError(str(exc)) from None
        summary = summarize(records, start, end)
        summary.update(label=args.label or f"{args.api}-c{args.concurrency}", endpoint=args.endpoint, api=args.api,
                       concurrency=args.concurrency, max_tokens=args.max_tokens, temperature=args.temperature,
                       speculative=summary["accept_length"] is not None, time=time.time())
        if not args.no_save:
            summary["file"] = str(store.save_run(summary, [r.to_json() for r in records]))
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(render_bench_summary(summary))
        if summary["requests"] and summary["failed"] == summary["requests"]:
            return EXIT_UNREACHABLE
        return EXIT_PROBLEM if summary["failed"] else EXIT_OK
    if action == "report":
        paths = args.runs or [str(p) for p in store.list_runs()[-args.last:]]
        if not paths:
            raise CockpitError(f"no stored benchmark runs in {store.runs_dir()}")
        rows = store.compare([store.load_run(p) for p in paths])
        if args.json:
            print(json.dumps({"runs": rows}, indent=2))
        else:
            print(render_bench_table(rows))
        return EXIT_OK
    if action == "sweep":
        return cmd_bench_sweep(args)
    build_parser().parse_args(["bench", "--help"])
    return EXIT_UNREACHABLE


def _f(value, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def render_bench_summary(s: dict) -> str:
    lines = [f"{s['label']}: {s['requests']} requests ({s['failed']} failed) in {s['duration_s']:.2f} s at concurrency {s['concurrency']}",
             f"  output throughput {s['output_throughput_tok_s']:.1f} tok/s, {s['request_throughput_req_s']:.2f} req/s"
             + (f", acceptance length {s['accept_length']:.2f}" if s.get("accept_length") else "")]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        p = s[key]
        lines.append(f"  {key[:-3].upper():<5} p50 {_f(p['p50'])} ms  p90 {_f(p['p90'])} ms  p99 {_f(p['p99'])} ms")
    for error in s.get("errors") or []:
        lines.append(f"  error: {error}")
    if s.get("file"):
        lines.append(f"  saved: {s['file']}")
    return "\n".join(lines)


def render_bench_table(rows: list[dict]) -> str:
    head = f"{'run':<28} {'conc':>4} {'tok/s':>9} {'speedup':>8} {'accept':>7} {'TTFT p50':>9} {'ITL p50':>8} {'ITL p99':>8} {'fail':>5}"
    lines = [head]
    for r in rows:
        lines.append(f"{(r['label'] or '?')[:28]:<28} {r['concurrency'] or 0:>4} {_f(r['output_throughput_tok_s']):>9} "
                     f"{_f(r['speedup'], '{:.2f}x'):>8} {_f(r['accept_length'], '{:.2f}'):>7} {_f(r['ttft_p50_ms']):>9} "
                     f"{_f(r['itl_p50_ms']):>8} {_f(r['itl_p99_ms']):>8} {r['failed'] or 0:>5}")
    return "\n".join(lines)


def cmd_init(args) -> int:
    from pathlib import Path

    from cockpit.init import example_text, questionnaire, write_config, write_text
    from cockpit.paths import default_config_path

    if args.example and not args.path:
        sys.stdout.write(example_text())
        return EXIT_OK
    path = Path(args.path).expanduser() if args.path else default_config_path()
    if path.exists() and not args.force:
        raise CockpitError(f"{path} exists: pass --force to replace it (it is not merged)")
    if args.example:
        written = write_text(path, example_text(), force=args.force)
    else:
        written = write_config(path, questionnaire(), force=args.force)
    print(f"wrote {written}; check it with: cockpit config check {written}")
    return EXIT_OK


def cmd_demo(args) -> int:
    import tempfile
    from pathlib import Path

    from cockpit.demo.world import build
    from cockpit.ui.app import CockpitApp

    root = Path(args.dir).expanduser() if args.dir else Path(tempfile.mkdtemp(prefix="cockpit-demo-"))
    print(f"cockpit DEMO: building the demo world in {root} ...", file=sys.stderr)
    # the demo's runbook state, benchmark runs and caches live in its own world, never in the user's
    for var, sub in (("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")):
        os.environ[var] = str((root / sub).resolve())
    world = build(root)
    try:
        app = CockpitApp(world.config, theme=getattr(args, "theme", None), demo=True)
        app.run()
    finally:
        world.close()
    print(f"cockpit DEMO ended; its files are in {root} (config: {root / 'demo.toml'})", file=sys.stderr)
    return EXIT_OK


def cmd_ui(args) -> int:
    from cockpit.context import load_checked
    from cockpit.ui.app import CockpitApp

    config = load_checked(args.config).config

    from cockpit.ui.themes import available_themes

    theme = getattr(args, "theme", None)
    if theme:
        from textual.theme import BUILTIN_THEMES

        names = set(available_themes()) | set(BUILTIN_THEMES)
        if theme not in names:
            raise CockpitError(f"--theme {theme}: no such theme; themes: {', '.join(sorted(names))}")
    app = CockpitApp(config, read_only=getattr(args, "read_only", False), theme=theme,
                     ascii_only=True if getattr(args, "ascii", False) else None)
    app.run()
    return app.return_code or EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "status":
            return cmd_status(args)
        if args.command == "config":
            if args.config_command != "check":
                parser.parse_args(["config", "--help"])
            return cmd_config_check(args)
        if args.command == "trust":
            return cmd_trust(args)
        if args.command == "verify":
            return cmd_verify(args)
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "parse-log":
            return cmd_parse_log(args)
        if args.command == "lint-flags":
            return cmd_lint_flags(args)
        if args.command == "drafter":
            return cmd_drafter(args)
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "init":
            return cmd_init(args)
        if args.command == "demo":
            return cmd_demo(args)
        return cmd_ui(args)
    except CockpitError as exc:
        print(f"cockpit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        print(f"cockpit: error: the module '{exc.name}' is missing from this installation; reinstall the cockpit "
              "(pip install .) in this environment", file=sys.stderr)
        return 2
    except PermissionError as exc:
        print(f"cockpit: error: permission denied: {exc.filename or exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"cockpit: error: no such file or directory: {exc.filename or exc}", file=sys.stderr)
        return 2
    except IsADirectoryError as exc:
        print(f"cockpit: error: is a directory: {exc.filename or exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
