"""The `cockpit` command: the TUI by default, and every check and action as a subcommand for scripts.

A thin shell: each command loads the Context (cockpit/context.py) and calls the core; what a result
looks like as text lives next to the result.  Exit codes are honest: 0 all good, 1 a check found a
problem, 2 could not check (bad input, unreachable host).  User mistakes print one clear line, never
a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cockpit.cli_args import build_parser
from cockpit.errors import CockpitError
from cockpit.format import clock, shell_words
from cockpit.runtime import settle_heap

EXIT_OK, EXIT_PROBLEM, EXIT_UNREACHABLE = 0, 1, 2
NO_CONFIG_HINT = ("`cockpit init` writes a config (`cockpit init --example` prints an annotated one); "
                  "`cockpit demo` shows the whole flow on this machine")


# --- shared helpers ---------------------------------------------------------------------------------


def ask(question: str, yes: bool, refusal: str) -> bool:
    """The one way the CLI asks before a destructive action: --yes, else a terminal's answer, else no."""
    if yes:
        return True
    if not sys.stdin.isatty():
        print(f"cockpit: {refusal}: run it in a terminal, or pass --yes", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def confirmer(yes: bool, refusal: str, confirmed: list[str] | None = None):
    """An async confirm callback for the engine: prints the plan, then asks (or takes --yes).  Taken by --yes,
    the plan is part of what the command did: printed (stdout), or kept in `confirmed` for a --json result;
    asked, it is the question's (stderr, beside the prompt)."""

    async def confirm(text: str) -> bool:
        if yes:
            if confirmed is not None:
                confirmed.append(text)
            else:
                print(f"{text}\n(confirmed by --yes)", flush=True)
            return True
        print(text, file=sys.stderr)
        return await asyncio.to_thread(ask, "Go ahead?", False, refusal)

    return confirm


def show_plan(plan: str, yes: bool, json_out: bool = False) -> None:
    """What a destructive command will do, before it asks (stderr) or, with --yes, as what it did (stdout;
    with --json, the result says it)."""
    if not (yes and json_out):
        print(plan, file=sys.stdout if yes else sys.stderr, flush=True)


def echo_commands(log, enabled: bool) -> None:
    """--log-commands: every command run on a host, to stderr, as it starts and ends."""
    if not enabled:
        return

    def echo(record):
        if record.finished_at is None:
            print(f"[{record.host}] $ {record.command}", file=sys.stderr)
        else:
            print(f"[{record.host}] exit {record.exit_status}" + (f" ({record.error})" if record.error else "") + f": {record.command}",
                  file=sys.stderr)

    log.events.subscribe(echo)


def context(args, hosts: list[str] | None = None, need_config: bool = False, roles: list[str] | None = None):
    """The Context of the config (`hosts`: only these are watched; `roles`: only hosts with one of them)."""
    from cockpit.context import Context, load_checked

    checked = load_checked(getattr(args, "config", None))
    if roles:
        config = checked.config
        hosts = [h.name for h in config.hosts if set(h.roles) & set(roles) and (not hosts or h.name in hosts)]
        if not hosts:
            known = sorted({r for h in config.hosts for r in h.roles})
            raise CockpitError(f"no host has role {', '.join(roles)}; roles: {', '.join(known) or 'none'}")
    ctx = Context(checked, hosts=hosts)
    if need_config and ctx.config.implicit:
        raise CockpitError(f"no config: {NO_CONFIG_HINT}")
    echo_commands(ctx.log, getattr(args, "log_commands", False))
    return ctx


def runbook_of(ctx):
    if ctx.runbook is None and ctx.config.implicit:
        raise CockpitError(f"no config, so no runbook: {NO_CONFIG_HINT}")
    if ctx.runbook is None:
        raise CockpitError(f"{ctx.config.path} has no runbook: add [[runbook.steps]] tables "
                           "(`cockpit init --example` prints an annotated config with one)")
    return ctx.runbook


def with_context(ctx, work):
    """Run `work(ctx)` on the event loop, and close the context's connections whatever happens."""
    async def go():
        try:
            return await work(ctx)
        finally:
            await ctx.close()

    return asyncio.run(go())


def emit(args, data, text: str) -> None:
    print(json.dumps(data, indent=2) if getattr(args, "json", False) else text)


# --- hosts and telemetry ----------------------------------------------------------------------------


SUMMARY_AT = 16  # beyond this many hosts `status` prints one line per host


def stop_on_signals() -> tuple[asyncio.Event, list[int]]:
    """An event set by SIGINT, SIGTERM or SIGHUP (a watching command's end), and the signals that came."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    stopped_by: list[int] = []

    def stop_on(sig: int) -> None:
        stopped_by.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop_on, sig)
        except (NotImplementedError, RuntimeError):
            pass
    return stop, stopped_by


def cmd_status(args) -> int:
    from cockpit.telemetry.report import render_status_text, render_summary_text, status_exit_code, summarize

    ctx = context(args, hosts=args.host, roles=args.role)
    many = args.summary if args.summary is not None else len(ctx.hub.config.hosts) > SUMMARY_AT

    def render(snapshots, now):
        return render_summary_text(snapshots, now) if many else render_status_text(snapshots, now)

    if args.once:
        snapshots = with_context(ctx, lambda c: c.hub.sample_once(args.timeout))
        now = time.time()
        data = {"hosts": [s.to_json(now) for s in snapshots]}
        if many:
            data["summary"] = [summarize(s, now).to_json() for s in snapshots]
        emit(args, data, render(snapshots, now))
        return status_exit_code(snapshots)

    async def watch(c) -> int:
        stop, stopped_by = stop_on_signals()
        c.hub.start()
        settled = False
        async for snapshots in c.hub.ticks(stop):
            now = time.time()
            if not settled:
                settled = True
                settle_heap()  # start-up's objects out of the collector's walks (runtime.py)
            try:
                if args.json:
                    sys.stdout.write(json.dumps({"time": now, "hosts": [s.to_json(now) for s in snapshots]}) + "\n")
                else:
                    sys.stdout.write(f"--- {time.strftime('%H:%M:%S', time.localtime(now))}\n{render(snapshots, now)}\n")
                sys.stdout.flush()
            except BrokenPipeError:
                break  # the reader went away (| head, a dropped terminal): stop quietly
        # stopped by a signal: the shell's convention, 128 + its number (Ctrl-C: 130), so a script can tell
        return 128 + stopped_by[0] if stopped_by else EXIT_OK

    return with_context(ctx, watch)


def cmd_config(args) -> int:
    from cockpit.context import load_checked
    from cockpit.ui.themes import check_ui_settings

    if args.config_command != "check":
        build_parser().parse_args(["config", "--help"])
    checked = load_checked(args.file)
    check_ui_settings(checked.config)  # the TUI's own settings: refused here exactly as the TUI would
    from cockpit.serving import engines

    refused = engines.load_problems()  # installed engine packages that could not be taken: said, not silent
    launch = checked.launch_problems()  # a known-bad flag left in a launch step: the file is valid, its launch would fail
    text = (f"{args.file}: {'OK' if not launch else 'valid, but a launch would fail'}, {checked.render()}"
            + "".join(f"\nnote: engine '{name}' refused: {why}" for name, why in refused.items())
            + "".join(f"\nwould fail: {problem}" for problem in launch))
    emit(args, {"ok": not launch, "file": args.file, **checked.to_json(), "engines": list(engines.names()), "engines_refused": refused,
                "launch_problems": launch}, text)
    return EXIT_PROBLEM if launch else EXIT_OK


def cmd_trust(args) -> int:
    from cockpit.hosts.ssh import SshTransport, fingerprint, known_hosts_entry_name, trust_host_key

    ctx = context(args)
    host = ctx.config.host(args.host)
    if host.local:
        raise CockpitError(f"host '{host.name}' is local: there is no SSH host key to trust")

    async def go(c) -> int:
        transport = c.pool.get(host)
        assert isinstance(transport, SshTransport)
        key, name, port = await transport.fetch_host_key()
        if key is None:
            print(f"cockpit: could not reach {host.label} to read its host key", file=sys.stderr)
            return EXIT_UNREACHABLE
        print(f"{known_hosts_entry_name(name, port)} offers {fingerprint(key)}")
        print(f"It will be added to {transport.known_hosts_path}.")
        if not ask("Trust this key? Compare the fingerprint with the host's owner first", args.yes,
                   "trusting a host key needs an answer"):
            print("Not trusted.")
            return EXIT_PROBLEM
        entry, fp, path = await trust_host_key(transport)
        print(f"Trusted {entry} ({fp}) in {path}")
        return EXIT_OK

    return with_context(ctx, go)


def cmd_verify(args) -> int:
    from cockpit.runbook.checks import DEFAULT_MAX_USED_MIB, verify_host

    ctx = context(args)
    ctx.config.host(args.host)
    try:
        gpus = None if args.gpus is None else [int(part) for part in args.gpus.split(",") if part.strip()]
    except ValueError:
        raise CockpitError(f"--gpus: '{args.gpus}' is not a comma-separated list of GPU indices") from None
    limit = args.max_used_mib if args.max_used_mib is not None else DEFAULT_MAX_USED_MIB
    report = with_context(ctx, lambda c: verify_host(c.hub, args.host, limit, gpus, timeout=args.timeout))
    emit(args, report.to_json(), report.render(limit))
    return report.exit_code


# --- the runbook ------------------------------------------------------------------------------------


def plan_fix(runbook, step: str, yes: bool, config_path=None) -> int:
    """The CLI's `f`: the first error of the step's diagnosis that has a fix becomes its command line, and the config
    file's step says it."""
    from cockpit.diagnosis import Diagnosis
    from cockpit.serving.steps import apply_diagnosis_fix, fix_note, write_fix_to_config

    spec = runbook.spec.step(step)
    if not runbook.kind(spec).launch:
        raise CockpitError(f"'{step}' is a {spec.kind} step: plan fix takes a launch step")
    result = runbook.result(step)
    diagnoses = Diagnosis.all_from_json((result.evidence or {}).get("diagnoses")) if result else []
    fix = next((d for d in diagnoses if d.replacement and d.severity == "error"), None)
    if fix is None:
        print(f"no fix to apply: {step}'s last run offers none" + (f" ({result.state.value}: {result.message})" if result else
                                                                    " (it has not run)"))
        return EXIT_PROBLEM
    print(f"{step}: {fix.message}\nfix: {shell_words(fix.replacement)}")
    if not yes:
        if not sys.stdin.isatty():
            raise CockpitError("plan fix changes the step's command line: pass --yes to apply it without asking")
        if input("apply it? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing changed")
            return EXIT_PROBLEM
    fixed = apply_diagnosis_fix(runbook, step, fix)
    written = write_fix_to_config(runbook, step, fixed, config_path, fix_note(fix))
    print(f"{step} will run: {shell_words(fixed)}\n{written}\nrun it: cockpit plan run {step}   (cockpit plan reset {step} forgets the fix)")
    return EXIT_OK


def cmd_plan(args) -> int:
    from cockpit.runbook.engine import GateClosed
    from cockpit.runbook.model import StepState
    from cockpit.runbook.report import render_plan_text

    if args.plan_command not in ("show", "run", "reset", "stop", "emit", "fix"):
        build_parser().parse_args(["plan", "--help"])
    ctx = context(args, need_config=True)
    runbook = runbook_of(ctx)
    if args.plan_command == "emit":
        from cockpit.serving.steps import ServeLaunch

        spec = runbook.spec.step(args.step)
        kind = runbook.kind(spec)
        if not isinstance(kind, ServeLaunch):
            raise CockpitError(f"'{args.step}' is a {spec.kind} step: plan emit takes a serve_launch step")
        if len(kind.hosts(spec)) < 2:
            raise CockpitError(f"'{args.step}' launches on one host ({spec.host}): plan emit writes multi-node launches "
                               "(hosts = [...] in the step)")
        emitter = kind.group_of(spec).emit  # the engine's own Slurm and LeaderWorkerSet hand-off
        text = (emitter.slurm(kind, spec, args.python, args.gpus_per_node) if args.format == "slurm"
                else emitter.lws(kind, spec, args.python, gpus_per_node=args.gpus_per_node,
                                 **({"image": args.image} if args.image else {})))  # the engine's own image by default
        if args.out:
            from cockpit.paths import atomic_write

            atomic_write(Path(args.out), text)
            print(f"wrote {args.out}")
        else:
            print(text, end="")
        return EXIT_OK
    if args.plan_command == "reset":
        runbook.reset(args.step)
        print(f"reset {'step ' + args.step if args.step else 'every step'} of runbook {runbook.spec.name}")
        return EXIT_OK
    confirmed: list[str] | None = [] if getattr(args, "json", False) else None
    confirm = confirmer(getattr(args, "yes", False), "this step needs confirmation", confirmed)
    if args.plan_command == "stop":
        print(with_context(ctx, lambda c: runbook.stop_server(args.step, confirm)))
        return EXIT_OK
    if args.plan_command == "fix":
        return plan_fix(runbook, args.step, args.yes, ctx.config.path)
    if args.plan_command == "show":
        with_context(ctx, lambda c: runbook.recheck_gates(timeout=15))  # a pass later telemetry contradicts shows stale
        emit(args, {"runbook": runbook.spec.name, "state_file": str(runbook.store.path),
                    "steps": [v.to_json() for v in runbook.views()]}, render_plan_text(runbook))
        return EXIT_OK
    if bool(args.force) != bool(args.reason):
        raise CockpitError("--force STEP and --reason TEXT go together: say which gate to skip and why")
    force = {args.force: args.reason} if args.force else {}
    if args.force:
        runbook.spec.step(args.force)

    async def go(c):
        await runbook.recheck_gates(timeout=15)
        if args.step:
            return [(args.step, await runbook.run_step(args.step, confirm, force.get(args.step)))]
        return await runbook.run_all(confirm, force)

    try:
        ran = with_context(ctx, go)
    except GateClosed as exc:
        if args.json:
            print(json.dumps({"ran": [], "refused": {"step": exc.step, "reasons": exc.reasons}}, indent=2))
        else:
            print(f"refused: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    lines = [f"{name}: {result.state.value}: {result.message}" for name, result in ran]
    emit(args, {"ran": [{"step": name, **result.to_json()} for name, result in ran], "confirmed_by_yes": confirmed or []},
         "\n".join(lines) or "every step has passed; `cockpit plan reset` starts over")
    return EXIT_OK if all(r.state is StepState.PASSED for _, r in ran) else EXIT_PROBLEM


# --- serving engines ---------------------------------------------------------------------------------


def cmd_parse_log(args) -> int:
    from cockpit.serving.helpschema import load_schema
    from cockpit.serving.logread import diagnose_file, render_log_report

    report = diagnose_file(args.path, load_schema(args.help_text) if args.help_text else None, read_all=args.all)
    emit(args, report.to_json(), render_log_report(report))
    return EXIT_PROBLEM if any(d.severity == "error" for d in report.diagnoses) else EXIT_OK


def whole_fix(engine, words: list[str], version: str | None, schema):
    """The line with every fix applied in turn, each step linted again by the same release and flags (serving/lint)."""
    from cockpit.serving.lint import fix_line

    return fix_line(words, lambda line: engine.lint(line, version, schema), engine.apply_fix)


def cmd_lint_flags(args) -> int:
    import asyncio

    from cockpit.serving import engines

    words = list(args.args)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise CockpitError("lint-flags needs the command line after --, e.g. cockpit lint-flags --help-text help.txt -- --model-path M ...")
    versions = {name: getattr(args, name, None) for name in engines.names()}  # --sglang V, --vllm V
    named = args.engine or next((name for name, version in versions.items() if version), None)
    engine = engines.engine(named) if named else (engines.engine_of_command(words) or engines.engine(None))
    version = versions.get(engine.name) or args.engine_version
    if version and (problem := engine.version_problem(version)):
        raise CockpitError(f"--engine-version: {problem}")
    if args.host:
        ctx = context(args)
        host = ctx.config.host(args.host)
        outcome = with_context(ctx, lambda c: engine.lint_line(words, version=version, transport=c.pool.get(host),
                                                                python=args.python or host.python, deep=args.deep))
    else:
        outcome = asyncio.run(engine.lint_line(words, version=version, help_text=args.help_text, deep=args.deep))
    data, text = outcome.to_json(), outcome.render()
    fixed = whole_fix(engine, words, version, outcome.schema)
    if fixed.applied:
        data["fixed_line"] = fixed.to_json()
        text += (f"\nthe whole line fixed ({'clean' if fixed.clean else 'still refused for what is listed above: yours to decide'}; "
                 f"checked again by the same release):\n  {shell_words(fixed.words)}")
    if args.fix:
        if args.json:
            emit(args, {**data, "fixed_line": fixed.to_json()}, "")
        else:
            print(shell_words(fixed.words))
        return EXIT_OK if fixed.clean else EXIT_PROBLEM
    for other in engines.engines():
        translation = other.foreign_line(words) if other is not engine else None
        if translation is not None:
            data["translation"] = translation
            if fixed.applied and list(translation["line"]) == fixed.words:
                continue  # the fixed line above says it already
            text += (f"\nthis line carries {other.label}'s flags ({', '.join(translation['flags'])}); the {engine.label} line that "
                     "means the same:\n  " + " ".join(shlex.quote(w) for w in translation["line"])
                     + "".join(f"\n  note: {n}" for n in translation["notes"]))
    emit(args, data, text)
    return EXIT_OK if outcome.ok else EXIT_PROBLEM


# --- the drafter ------------------------------------------------------------------------------------


def cmd_drafter(args) -> int:
    if args.drafter_command == "inspect":
        from cockpit.drafter.inspect import inspect_draft, render_report

        if args.sglang and args.vllm:
            raise CockpitError("give --sglang VERSION or --vllm VERSION, not both (--engine both judges every range of each)")
        from cockpit.drafter.inspect import default_loader, loaders

        given = vars(args)  # --ENGINE VERSION: a version of that engine's loader
        engine = args.engine or next((name for name in loaders() if given.get(name)), default_loader())
        version = given.get(engine) if engine in loaders() else None
        report = inspect_draft(args.path)
        said = {}
        if getattr(args, "target", None):
            from cockpit.drafter.target import check_against, read_target

            against = check_against(report, read_target(args.target))
            report.problems.extend(against.problems)
            report.notes.extend(against.notes)
            said = {"target": against.target.to_json()}
        emit(args, {**report.to_json(version, engine), **said}, render_report(report, version, args.keys, engine))
        return EXIT_OK if report.ready(version, engine) else EXIT_PROBLEM
    if args.drafter_command == "fix-keys":
        return cmd_fix_keys(args)
    if args.drafter_command == "convert":
        from cockpit.drafter.convert import converter

        plan, run = converter(args.src, args.dst, args.dtype, args.rule, args.overwrite)
        if plan is not None:  # in place: asks first
            show_plan(plan, args.yes, args.json)
            if not ask("Convert in place?", args.yes, "this rewrites the draft's config and headers"):
                return EXIT_PROBLEM
        result = run()
        emit(args, result, f"{result['dst']}: {result['tensors']} tensors ({result['renamed']} renamed); {result['config']}")
        return EXIT_OK
    build_parser().parse_args(["drafter", "--help"])
    return EXIT_UNREACHABLE


def cmd_fix_keys(args) -> int:
    from cockpit.drafter.fixkeys import describe, parse_rules, summary
    from cockpit.drafter.remote import fixer

    rules = parse_rules(args.rule)
    where = f" on {args.host} over SFTP" if args.host else ""
    run = fixer(args.path, rules, context(args).config if args.host else None, args.host)
    plan = run(True)
    for note in plan.recovered:
        print(f"note: {note}", file=sys.stderr)
    if plan.changed == 0 and not plan.index_renames and (not plan.recovered or args.dry_run):
        message = "nothing to change: no key matches " + ", ".join(f"'{old}'" for old, _ in rules)
        emit(args, {**plan.to_json(), "message": message}, message)
        return EXIT_OK
    if args.dry_run:
        emit(args, plan.to_json(), "would rename:\n" + describe(plan))
        return EXIT_OK
    if plan.changed or plan.index_renames:
        show_plan(f"will rename{where}:\n" + describe(plan), args.yes, args.json)
        if not ask("Rewrite?", args.yes, "this rewrites checkpoint files"):
            print("Nothing was changed.")
            return EXIT_PROBLEM
    report = run(False)
    emit(args, report.to_json(), summary(report, where))
    return EXIT_OK


# --- benchmarks -------------------------------------------------------------------------------------


def cmd_bench(args) -> int:
    from cockpit.bench import report as render

    if args.bench_command == "run":
        from cockpit.bench.client import Workload
        from cockpit.bench.run import benchmark, endpoint_url, exit_code
        from cockpit.bench.workload import load_prompts

        for name in ("requests", "concurrency", "max_tokens"):
            if getattr(args, name) < 1:
                raise CockpitError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
        endpoint = endpoint_url(args.endpoint)
        workload = Workload(load_prompts(args.prompts, args.seed), args.requests, args.concurrency, args.max_tokens,
                            args.temperature, args.warmup)

        shown = not args.json and sys.stderr.isatty()
        progress = (lambda done, total: print(f"\r{done}/{total} requests", end="", file=sys.stderr, flush=True)) if shown else None
        record = asyncio.run(benchmark(endpoint, args.api, workload, args.label, not args.no_save, progress))
        emit(args, record, render.render_summary(record))
        return exit_code(record)
    if args.bench_command == "report":
        return cmd_bench_report(args)
    if args.bench_command == "sweep":
        return cmd_bench_sweep(args)
    if args.bench_command == "checkpoints":
        return cmd_bench_checkpoints(args)
    if args.bench_command == "baseline":
        return cmd_bench_baseline(args)
    if args.bench_command == "schedule":
        from cockpit.bench.steps import depth_schedule, render_schedule

        schedule = depth_schedule(runbook_of(context(args)))
        emit(args, schedule, render_schedule(schedule))
        return EXIT_OK
    build_parser().parse_args(["bench", "--help"])
    return EXIT_UNREACHABLE


def cmd_bench_report(args) -> int:
    from cockpit.bench.sweep import stored_report
    from cockpit.paths import atomic_write

    if getattr(args, "config", None):
        from cockpit import paths
        from cockpit.config import load_config

        paths.use_storage(load_config(args.config).storage_dir)  # the runs of that config's [storage] (a demo's own)
    text = stored_report(args.runs, args.sweep, args.format or ("json" if args.json else "text"), args.last, args.against)
    if args.out:
        atomic_write(Path(args.out).expanduser(), text.rstrip("\n") + "\n")
        print(f"wrote {args.out}")
    else:
        print(text)
    return EXIT_OK


def cmd_bench_sweep(args) -> int:
    from cockpit.bench.sweep import run_sweep

    ctx = context(args, need_config=True)
    runbook, sweep = runbook_of(ctx), ctx.sweep_spec()

    def progress(state: dict) -> None:
        from cockpit.format import time_left

        left = time_left(state["eta_s"], state.get("done"), state.get("total"))
        eta = f", {left}" if left else ""
        print(f"[{state['done']}/{state['total']}{eta}] {state['text']}", file=sys.stderr, flush=True)

    shown = sys.stderr.isatty()  # progress for a person watching; a script gets the result
    result = with_context(ctx, lambda c: run_sweep(runbook, sweep, confirmer(args.yes, "the sweep relaunches the server", [] if args.json else None),
                                                   progress if shown else None, after=args.after))
    print(result.render("json" if args.json else "text"))
    return EXIT_OK if not result.failures else EXIT_PROBLEM


def _measurement(args, *counts: str):
    """What a measurement through the launch step starts from: its counts checked (each at least 1), the context, the
    launch step (--step, else the default one), and where its progress goes (stderr, for a person at a terminal)."""
    for name in counts:
        if getattr(args, name) < 1:
            raise CockpitError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    ctx = context(args, need_config=True)

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    return ctx, ctx.launch_step_for(args.step), progress if sys.stderr.isatty() else None


def cmd_bench_baseline(args) -> int:
    from cockpit.bench.baseline import measure_baseline

    ctx, launch, progress = _measurement(args, "concurrency", "requests", "max_tokens")
    result = with_context(ctx, lambda c: measure_baseline(runbook_of(c), launch, args.concurrency,
                                                          confirmer(args.yes, "the baseline relaunches the server", [] if args.json else None),
                                                          progress, args.requests, args.max_tokens))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        if result.output_throughput_tok_s is not None:
            print(f"baseline without speculation at concurrency {result.concurrency}: {result.output_throughput_tok_s:.1f} tok/s "
                  f"({result.file})")
        print(result.serving)
        if result.failure:
            print(f"! {result.failure}")
    return EXIT_OK if result.failure is None and result.output_throughput_tok_s is not None else EXIT_PROBLEM


def cmd_bench_checkpoints(args) -> int:
    from cockpit.bench.checkpoints import measure_checkpoints
    from cockpit.runs.report import checkpoint_figure
    from cockpit.runs.watch import RunWatcher, look_once

    ctx, launch, progress = _measurement(args, "requests", "max_tokens")
    if args.run not in ctx.runs:
        raise CockpitError(f"no run named '{args.run}'; runs: {', '.join(sorted(ctx.runs)) or 'none ([runs.NAME] in the config)'}")

    async def go(c):
        measured = await measure_checkpoints(runbook_of(c), launch, args.run, lambda: c.checkpoint_candidates(args.run, launch),
                                             confirmer(args.yes, "measuring relaunches the server", [] if args.json else None),
                                             progress, args.requests, args.max_tokens)
        spec = c.runs[args.run]  # the runs pane's choice, from what is now stored: the same words in both shells
        status = await look_once(RunWatcher(spec, c.pool.get(spec.host), own_kills=c.own_kills), no_wait=True)
        return measured, status.per_checkpoint

    measured, choice = with_context(ctx, go)
    if args.json:
        print(json.dumps({**measured.to_json(), "choice": choice}, indent=2))
    else:
        for row in measured.rows:
            figure = f"acceptance {row.accept_length:.2f}, {row.output_throughput_tok_s:.1f} tok/s" if row.accept_length is not None \
                else row.failure
            print(f"{row.checkpoint}: {figure}")
        if choice:
            print(f"by checkpoint: {'  '.join(checkpoint_figure(r) for r in choice['rows'])}\n{choice['words']}")
        print(measured.serving)
        for failure in measured.failures:
            print(f"! {failure}")
    return EXIT_OK if not measured.failures else EXIT_PROBLEM


# --- set-up, the demo, the TUI ----------------------------------------------------------------------


# --- runs, serving, alerts --------------------------------------------------------------------------


def cmd_runs(args) -> int:
    from cockpit.runs.report import exit_code, render_run
    from cockpit.runs.watch import RunWatcher, look_once

    ctx = context(args, need_config=True)
    if not ctx.runs:
        raise CockpitError(f"{ctx.config.path} has no [runs.NAME] table: add one with host and log and/or output_dir")
    if args.name is not None and args.name not in ctx.runs:
        raise CockpitError(f"no run named '{args.name}'; runs: {', '.join(sorted(ctx.runs))}")
    specs = [ctx.runs[args.name]] if args.name else list(ctx.runs.values())

    if args.watch:
        return with_context(ctx, lambda c: watch_runs_lines(args, c, specs))

    async def go(c):
        kills = ctx.own_kills  # the cockpit's own kills (a kill step, the process table's, plan stop) are evidence
        return await asyncio.gather(*(look_once(RunWatcher(spec, c.pool.get(spec.host), own_kills=kills), args.no_wait)
                                      for spec in specs))

    statuses = with_context(ctx, go)
    emit(args, {"runs": [s.to_json() for s in statuses]}, "\n".join(render_run(s) for s in statuses))
    return exit_code(statuses)


async def watch_runs_lines(args, ctx, specs) -> int:
    """`cockpit runs --watch`: the loop the TUI runs, a line each time a run's state changes (or its ETA comes or goes),
    until a signal: text, or one JSON object a line with --json."""
    from cockpit.runs.watch import watch_runs

    stop, stopped_by = stop_on_signals()
    said: dict[str, tuple] = {}

    def publish(statuses, _events) -> None:
        now = time.time()
        try:
            for status in statuses:
                key = (status.state, status.eta_s is None)
                if said.get(status.name) == key:
                    continue
                said[status.name] = key
                if args.json:
                    line = json.dumps({"time": now, **{k: v for k, v in status.to_json().items() if k in WATCHED_KEYS}})
                else:
                    line = (f"{clock(now)} {status.name}: {status.state.upper()}"
                            + (f" ({status.phase})" if status.phase and status.state == "running" else "") + f"  {status.evidence}")
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            stop.set()  # the reader went away: stop quietly

    task = asyncio.ensure_future(watch_runs(specs, ctx.pool.get, publish, own_kills=ctx.own_kills))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    for pending in (task, stopping):
        pending.cancel()
    await asyncio.gather(task, stopping, return_exceptions=True)
    return 128 + stopped_by[0] if stopped_by else EXIT_OK


WATCHED_KEYS = ("name", "host", "state", "phase", "step", "total", "eta_s", "evidence", "ended_between", "looks", "flags")


def cmd_server(args) -> int:
    from cockpit.hosts.http import default_opener, normalize_endpoint
    from cockpit.serving.live import render_live
    from cockpit.serving.target import launched_server, named_server, read_server

    ctx = context(args)
    url = None
    if args.url is not None:
        try:
            url = normalize_endpoint(args.url)
        except ValueError as exc:
            raise CockpitError(f"--url: {exc}") from None
    if args.prometheus is not None and ctx.config.prometheus is None:
        raise CockpitError("--prometheus reads through the config's [prometheus] table: add it (url = ...)")
    placement = placement_of_flags(args)
    if args.step is not None or (args.log is None and url is None and args.prometheus is None and placement is None):
        if ctx.runbook is None:
            why = "no config, so no launched server" if ctx.config.implicit else f"{ctx.config.path} has no runbook"
            raise CockpitError(f"which server? {why}: give --log FILE (its log, read through docker/kubectl/journald prefixes "
                               "too) and/or --url HOST:PORT, or a config whose runbook launched one (-c FILE)")
        target = launched_server(runbook_of(ctx), args.step)
        if args.log is not None:
            target.log = named_server(ctx.config, target.host, args.log, None).log
        target.url = url or target.url
        target.placement = placement or target.placement
    else:
        target = named_server(ctx.config, args.host, args.log, url, placement)
    opener = None if args.host or target.step else default_opener
    live, data = with_context(ctx, lambda c: read_server(target, c.pool.get, opener, ctx.config.prometheus, args.prometheus))
    data = {"step": target.step, "host": target.host, "log": target.log, "url": target.url, "prometheus": args.prometheus, **data}
    unreadable = live.unreachable or (live.log_missing and f"{target.log}: no such file on {target.host}")
    manager_said = (data.get("where") or {}).get("manager") or {}
    if unreadable and not data["sources"] and manager_said.get("phase") in (None, "unknown"):
        data["error"] = unreadable
        emit(args, data, f"cockpit: could not read the server: {unreadable}")
        return EXIT_UNREACHABLE
    from cockpit.bench.steps import live_verdict

    verdict = live_verdict(ctx.runbook, target.step, data)
    data["speculation"] = verdict.to_json() if verdict is not None else None
    emit(args, data, render_live(data) + (f"\nspeculation: {verdict.words}" if verdict is not None else ""))
    return EXIT_PROBLEM if data["flags"] else EXIT_OK


def placement_of_flags(args):
    """--container / --slurm-job / --pod as a placement, checked by the one reader config tables use too."""
    from cockpit.config import Checker
    from cockpit.errors import ConfigError
    from cockpit.where.placement import parse_placement

    flags = {"container": args.container, "container_engine": args.container_engine, "slurm_job": args.slurm_job, "pod": args.pod,
             "pod_container": args.pod_container}
    given = {k: v for k, v in flags.items() if v is not None}
    try:
        return parse_placement(Checker("the command line", ""), (), given)
    except ConfigError as exc:
        flag = "--" + (exc.key or "").replace("_", "-")
        raise CockpitError(f"{flag}: {exc.detail.replace(repr(exc.key), flag) if exc.key else exc.detail}") from None


def cmd_alert(args) -> int:
    from cockpit.alerts import Alert, Alerter, tty_writer

    if args.alert_command != "test":
        build_parser().parse_args(["alert", "--help"])
    ctx = context(args)
    here = _has_terminal()  # run from cron or a script: no terminal to ring, and that is no failure of the others
    alerter = Alerter(ctx.alerts, terminal=tty_writer() if here else None)
    alert = Alert("test", "test", "cockpit test alert", f"a test alert from `cockpit alert test` at {time.strftime('%H:%M:%S')}", "info")
    delivery = asyncio.run(alerter.send(alert, force=True))
    if not here and (ctx.alerts.bell or ctx.alerts.desktop):
        delivery.channels["terminal"] = "skipped: no terminal here (the TUI rings its own; run this from a terminal to try it)"
    lines = [f"{channel}: {result}" for channel, result in delivery.channels.items()] or ["no channel: configure [alerts]"]
    emit(args, delivery.to_json(), "\n".join(lines))
    failed = [r for r in delivery.channels.values() if r != "ok" and not r.startswith("skipped")]
    delivered = [r for r in delivery.channels.values() if r == "ok"]
    return EXIT_PROBLEM if failed or not delivered else EXIT_OK


def _has_terminal() -> bool:
    """A terminal the CLI can ring: its controlling tty, or stdout when that is one."""
    try:
        with open("/dev/tty", "w"):
            return True
    except OSError:
        return sys.stdout.isatty()


def cmd_init(args) -> int:
    from cockpit.init import example_text, questionnaire, write_config, write_text
    from cockpit.paths import default_config_path

    example = args.example or args.sample is not None  # naming a sample asks for it, not for the questions
    sample = args.sample or "deployment"
    if example and not args.path:
        sys.stdout.write(example_text(sample))
        return EXIT_OK
    path = Path(args.path).expanduser() if args.path else default_config_path()
    if path.exists() and not args.force:
        raise CockpitError(f"{path} exists: pass --force to replace it (it is not merged)")
    if example:
        written = write_text(path, example_text(sample), force=args.force)
    else:
        written = write_config(path, questionnaire(), force=args.force)
    print(f"wrote {written}; check it with: cockpit config check {written}")
    return EXIT_OK


def cmd_demo(args) -> int:
    import tempfile

    from cockpit.context import Context
    from cockpit.demo.world import afresh, build
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.terminal import drawn_on_the_terminal
    from cockpit.ui.themes import check_theme_name

    check_theme_name(getattr(args, "theme", None))  # before a world is built for nothing
    root = Path(args.dir).expanduser() if args.dir else Path(tempfile.mkdtemp(prefix="cockpit-demo-"))
    if afresh(root):
        print(f"cockpit DEMO: the earlier demo's files in {root} were removed: the story starts again")
    print(f"cockpit DEMO: building the demo world in {root} ...")
    world = build(root, args.engine)
    reads = f"cockpit --config {shlex.quote(str(root / 'demo.toml'))}"
    print(f"cockpit DEMO: from another shell, `{reads} plan show` (or server, runs, bench report) reads the state this demo shows",
          flush=True)
    try:
        with drawn_on_the_terminal():
            app = CockpitApp(Context.of(world.config), demo=True, **ui_options(args))
            app.run(mouse=app.mouse_on)
    finally:
        world.close()
    print(f"cockpit DEMO ended; its files are in {root}; its state: `{reads} plan show`")
    return EXIT_OK


def ui_options(args) -> dict:
    """The look the command line asks of the TUI (--theme, --ascii: before or after `demo`); None: the config's."""
    return {"theme": getattr(args, "theme", None), "ascii_only": True if getattr(args, "ascii", False) else None,
            "mouse": False if getattr(args, "no_mouse", False) else None}


def cmd_ui(args) -> int:
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.terminal import drawn_on_the_terminal
    from cockpit.ui.themes import check_theme_name

    ctx = context(args)
    check_theme_name(getattr(args, "theme", None))
    app = CockpitApp(ctx, read_only=getattr(args, "read_only", False), **ui_options(args))
    with drawn_on_the_terminal():
        app.run(mouse=app.mouse_on)
    return app.return_code or EXIT_OK


def cmd_procs(args) -> int:
    from cockpit.hosts.proctable import ProcessTable, render_table, sort_rows

    ctx = context(args)
    host = ctx.config.host(args.host) if args.host else ctx.config.hosts[0]

    async def go(c) -> int:
        if args.kill:
            confirmed: list[str] = []
            result = await c.actions.kill_processes(host.name, args.kill, confirmer(args.yes, "killing processes needs an answer",
                                                                                     confirmed if args.json else None))
            ok = result.state.value == "passed"
            emit(args, {"host": host.name, "pids": args.kill, "state": result.state.value, "message": result.message,
                        "evidence": result.evidence, "plan": confirmed[0] if confirmed else None}, result.message)
            return EXIT_OK if ok else EXIT_PROBLEM
        snapshot = await c.hub.gate_sample(host)
        if snapshot.error and not snapshot.gpus:
            print(f"cockpit: {host.name}: {snapshot.error}", file=sys.stderr)
            return EXIT_UNREACHABLE
        compute = [(p.pid, p.gpu_index, p.used_memory_mib) for p in snapshot.processes]
        table = ProcessTable()
        transport = c.pool.get(host)
        rows = await table.poll(transport, compute)
        if args.interval > 0 and rows:
            await asyncio.sleep(args.interval)
            rows = await table.poll(transport, compute)
        from cockpit.where.owners import with_owners

        rows = sort_rows(await with_owners(transport, rows), args.sort, not args.asc)
        emit(args, {"host": host.name, "sort": args.sort, "descending": not args.asc,
                    "processes": [r.to_json() for r in rows]}, f"{host.name}:\n" + render_table(rows, args.sort, not args.asc))
        return EXIT_OK

    return with_context(ctx, go)


COMMANDS = {
    "procs": cmd_procs,
    "status": cmd_status, "config": cmd_config, "trust": cmd_trust, "verify": cmd_verify, "plan": cmd_plan,
    "parse-log": cmd_parse_log, "lint-flags": cmd_lint_flags, "drafter": cmd_drafter, "bench": cmd_bench,
    "init": cmd_init, "demo": cmd_demo, "runs": cmd_runs, "server": cmd_server, "alert": cmd_alert,
}


def main(argv: Sequence[str] | None = None, interrupts_from_now: bool = False) -> int:
    """`interrupts_from_now`: the console script (entry.py) ended the process on Ctrl-C during start-up;
    the command gets Python's KeyboardInterrupt back."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if getattr(args, "command", None) == "lint-flags":
            print(f"cockpit: error: lint-flags reads the command line to check after `--` ({' '.join(extra[:3])} came before it): "
                  "cockpit lint-flags --help-text FILE -- --model-path M ...", file=sys.stderr)
            return 2
        args = parser.parse_args(argv)  # argparse's own message, exit 2
    if interrupts_from_now:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return COMMANDS.get(args.command, cmd_ui)(args)
    except CockpitError as exc:
        print(f"cockpit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        print("cockpit: error: out of memory (a limit such as ulimit -v is lower than this command needs)", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        print(f"cockpit: error: the module '{exc.name}' is missing from this installation; reinstall the cockpit "
              "(pip install .) in this environment", file=sys.stderr)
        return 2
    except (PermissionError, FileNotFoundError, IsADirectoryError) as exc:
        what = ("permission denied" if isinstance(exc, PermissionError) else
                "no such file or directory" if isinstance(exc, FileNotFoundError) else "is a directory")
        print(f"cockpit: error: {what}: {exc.filename or exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
