"""The `cockpit` command line: every subcommand, its flags and their help (cli.py dispatches them)."""

from __future__ import annotations

import argparse

from cockpit import __version__



def _vllm_version(text: str) -> str:
    from cockpit.serving.engines import engine

    problem = engine("vllm").version_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _sglang_version(text: str) -> str:
    from cockpit.config import version_problem

    problem = version_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text.strip().lstrip("v")

def _add_config(parser: argparse.ArgumentParser, top: bool = False) -> None:
    # Subcommands take --config too; SUPPRESS keeps them from resetting a value given before the command.
    parser.add_argument("--config", "-c", metavar="FILE", default=None if top else argparse.SUPPRESS, help="config file (default: $XDG_CONFIG_HOME/cockpit/config.toml, else this machine only)")
    parser.add_argument("--log-commands", action="store_true", default=False if top else argparse.SUPPRESS, help="print every command run on a host to stderr")


def _command(sub, name: str, help: str, config: bool = False, json: bool = False, yes: str | None = None, **kw):
    parser = sub.add_parser(name, help=help, **kw)
    if config:
        _add_config(parser)
    if json:
        parser.add_argument("--json", action="store_true", help="JSON output")
    if yes:
        parser.add_argument("--yes", action="store_true", help=yes)
    return parser


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
    parser.add_argument("--ascii", action="store_true", help="every glyph ASCII: borders, bars, sparklines, charts, "
                        "scrollbars, marks (also [ui] ascii = true, or COCKPIT_ASCII=1)")
    parser.add_argument("--no-mouse", action="store_true", help="leave the mouse to the terminal (tmux selects text with it; "
                        "also [ui] mouse = false; m switches it in the cockpit)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = _command(sub, "status", "every host and GPU, once or streaming (no TUI)", config=True, json=True)
    status.add_argument("--once", action="store_true", help="sample every host once and exit")
    status.add_argument("--watch", action="store_true", help="stream the status every interval (the default without --once; --json: one object per line)")
    status.add_argument("--timeout", type=float, default=None, metavar="S", help="give up on a host after S seconds (default: its connect timeout + 15)")
    status.add_argument("--host", action="append", metavar="NAME", help="only these hosts (repeatable)")
    status.add_argument("--role", action="append", metavar="ROLE", help="only hosts with this role (repeatable)")
    status.add_argument("--summary", action="store_true", default=None,
                        help="one line per host (the default beyond 16 hosts; --no-summary for every GPU)")
    status.add_argument("--no-summary", dest="summary", action="store_false", help="every GPU of every host, however many")

    procs = _command(sub, "procs", "a host's compute processes as nvitop shows them (pid, user, GPU, memory, CPU, run time, "
                     "command), or kill some of them", config=True, json=True, yes="kill without asking (the plan is printed)")
    procs.add_argument("host", nargs="?", metavar="HOST", help="the host (default: the first configured)")
    procs.add_argument("--sort", default="gpu_mib", choices=("pid", "user", "gpu", "gpu_mib", "cpu", "rss", "time", "command"),
                       help="the column to sort by (default: gpu_mib)")
    procs.add_argument("--asc", action="store_true", help="ascending (default: descending)")
    procs.add_argument("--interval", type=float, default=1.0, metavar="S",
                       help="CPU %% is measured over S seconds between two polls (default 1; 0: not measured)")
    procs.add_argument("--kill", type=int, nargs="+", metavar="PID",
                       help="kill these processes: SIGTERM, then SIGKILL after 10 s; your own only unless the host sets "
                       "kill_any_user = true; shows exactly what first and asks (or --yes)")

    config_sub = sub.add_parser("config", help="check a config file").add_subparsers(dest="config_command", metavar="ACTION")
    _command(config_sub, "check", "parse and validate a config; exit 0 when it is good", json=True).add_argument("file", metavar="FILE")

    _command(sub, "trust", "show a host's SSH key fingerprint and add it to known_hosts (trust on first use)", config=True,
             yes="do not ask").add_argument("host", metavar="HOST")

    verify = _command(sub, "verify", "is every GPU of HOST clean? exit 0 clean, 1 not clean, 2 could not verify", config=True, json=True)
    verify.add_argument("host", metavar="HOST")
    verify.add_argument("--max-used-mib", type=int, default=None, metavar="MIB", help="used memory allowed per GPU (default 256)")
    verify.add_argument("--gpus", default=None, metavar="LIST", help="only these GPU indices, e.g. 0,1,2,3")
    verify.add_argument("--timeout", type=float, default=None, metavar="S")

    plan_sub = sub.add_parser("plan", help="the runbook: show, run or reset its steps").add_subparsers(dest="plan_command", metavar="ACTION")
    _command(plan_sub, "show", "every step with its state and evidence", config=True, json=True)
    run = _command(plan_sub, "run", "run STEP, or every step from the first not yet passed", config=True, json=True,
                   yes="confirm destructive steps without asking (the plan is still printed)")
    run.add_argument("step", nargs="?", metavar="STEP")
    run.add_argument("--force", metavar="STEP", help="skip the gate of STEP (needs --reason; recorded in the audit log)")
    run.add_argument("--reason", metavar="TEXT", help="why the gate is skipped")
    _command(plan_sub, "stop", "stop the server a launch step started (asks, or --yes)", config=True,
             yes="stop without asking").add_argument("step", metavar="STEP")
    _command(plan_sub, "fix", "apply the fix a launch's crash diagnosis offers to its command line (what f does in the TUI)",
             config=True, yes="apply without asking").add_argument("step", metavar="STEP")
    _command(plan_sub, "reset", "forget the recorded results (of STEP, or of every step)", config=True).add_argument(
        "step", nargs="?", metavar="STEP")
    emit_cmd = _command(plan_sub, "emit", "a launch step as a Slurm sbatch script or a Kubernetes LeaderWorkerSet manifest "
                        "(for nodes the cockpit cannot reach by SSH)", config=True)
    emit_cmd.add_argument("step", metavar="STEP")
    emit_cmd.add_argument("--format", choices=("slurm", "lws"), required=True)
    emit_cmd.add_argument("--python", default="python3", help="the interpreter with SGLang on the nodes / in the image")
    emit_cmd.add_argument("--image", default=None, help="lws: the container image (default: the engine's own image, "
                          "lmsysorg/sglang:latest or vllm/vllm-openai:latest)")
    emit_cmd.add_argument("--gpus-per-node", type=int, default=None, help="default: tp / nodes")
    emit_cmd.add_argument("--out", metavar="FILE", help="write it to FILE instead of printing it")

    parse_log = _command(sub, "parse-log", "diagnose an SGLang server log: named flag errors and crash causes, with the fix", json=True)
    parse_log.add_argument("path", metavar="PATH", help="the log file, or - for standard input (kubectl logs POD | cockpit parse-log -)")
    parse_log.add_argument("--all", action="store_true", help="read the whole log, streamed (default: its last 8 MiB)")
    parse_log.add_argument("--help-text", metavar="FILE", help="SGLang --help output (or a cockpit schema JSON) for better suggestions")

    lint = _command(sub, "lint-flags", "check an SGLang or vLLM command line before launch: exit 0 accepted, 1 it would fail",
                    config=True, json=True, usage="cockpit lint-flags [--host H | --help-text FILE] [--engine E] [--engine-version V] [--fix] [--json] "
                    "-- ARGS...")
    source = lint.add_mutually_exclusive_group()
    source.add_argument("--host", metavar="H", help="use the flags of the SGLang installed on host H")
    source.add_argument("--help-text", "--schema", dest="help_text", metavar="FILE", help="SGLang --help output or a schema JSON")
    lint.add_argument("--python", default=None, help="the interpreter on the host (default: the host's 'python' setting)")
    lint.add_argument("--deep", action="store_true", help="with --host: also run SGLang's own parser there (prepare_server_args, no server started)")
    lint.add_argument("--engine", metavar="ENGINE", default=None, help="whose line it is: an engine of the registry, sglang or vllm "
                      "(default: vllm for `vllm serve ...`, "
                      "else sglang)")
    lint.add_argument("--engine-version", metavar="VERSION", type=_sglang_version, help="judge the line for this release of "
                      "its engine (e.g. 0.5.2, 0.10.1.1; default: the newest recorded); offline, from the flags recorded from "
                      "its wheel; --host asks the installed engine instead, and wins")
    lint.add_argument("--vllm", metavar="VERSION", type=_vllm_version, help="the same as --engine vllm --engine-version VERSION")
    lint.add_argument("--sglang", metavar="VERSION", type=_sglang_version, help="the same as --engine sglang --engine-version VERSION")
    lint.add_argument("--fix", action="store_true", help="print the whole fixed line (shell-quoted), every fix applied and the "
                      "line checked again by the same release: exit 0 when it is clean, 1 when something is left to you")
    lint.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")

    drafter_sub = sub.add_parser("drafter", help="EAGLE-3 draft checkpoints: inspect, fix key names, convert").add_subparsers(
        dest="drafter_command", metavar="ACTION")
    inspect = _command(drafter_sub, "inspect", "is a draft ready for SGLang (or vLLM: --engine vllm)? exit 0 ready, 1 problems, "
                       "2 unreadable", json=True)
    inspect.add_argument("path", metavar="PATH")
    inspect.add_argument("--sglang", metavar="VERSION", type=_sglang_version, help="judge for this SGLang version only (e.g. 0.5.2)")
    inspect.add_argument("--vllm", metavar="VERSION", type=_vllm_version, help="judge for this vLLM version only (e.g. 0.10.2)")
    inspect.add_argument("--engine", choices=("sglang", "vllm", "both"), default=None,
                         help="whose loader judges it (default: sglang; vllm with --vllm; both: every range of each)")
    inspect.add_argument("--keys", action="store_true", help="list every key with dtype and shape")
    inspect.add_argument("--target", metavar="MODEL", help="check it against the target it will serve with: the target's folder "
                         "or config.json (hidden size, vocabulary, the layers it reads, MLA; a mismatch is a problem for every engine)")
    fix = _command(drafter_sub, "fix-keys", "rename keys (default layers.0. to midlayer.) in place, crash-safe", config=True, json=True,
                   yes="rewrite without asking")
    fix.add_argument("path", metavar="PATH")
    fix.add_argument("--rule", action="append", metavar="OLD=NEW", help="a prefix rename (repeatable); default layers.0.=midlayer.")
    fix.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")
    fix.add_argument("--host", metavar="H", help="PATH is on host H: fixed over SFTP, header bytes only")
    conv = _command(drafter_sub, "convert", "a training checkpoint (.bin/.pt) to SGLang-ready safetensors; a vLLM speculators "
                    "draft to SGLang's layout in place", json=True, yes="convert in place without asking")
    conv.add_argument("src", metavar="SRC")
    conv.add_argument("dst", metavar="DST", nargs="?")
    conv.add_argument("--dtype", help="cast floating tensors: bf16, fp16, fp32 (default: keep)")
    conv.add_argument("--rule", action="append", metavar="OLD=NEW", help="key prefix renames (default: strip draft_model. and module., layers.0. to midlayer.)")
    conv.add_argument("--overwrite", action="store_true", help="replace DST if it exists (default: refuse)")

    bench_sub = sub.add_parser("bench", help="benchmarks against SGLang: one run, a depth sweep, reports").add_subparsers(
        dest="bench_command", metavar="ACTION")
    brun = _command(bench_sub, "run", "one benchmark against a running server", json=True)
    brun.add_argument("--endpoint", required=True, metavar="URL", help="e.g. http://127.0.0.1:30000 (or 127.0.0.1:30000)")
    brun.add_argument("--api", choices=("sglang", "openai"), default="sglang")
    brun.add_argument("--prompts", metavar="FILE", help="JSONL of chat messages (default: the shipped sample)")
    for name, default, what in (("--requests", 64, "requests measured (after the warm-up)"),
                                ("--concurrency", 8, "requests in flight at once"),
                                ("--max-tokens", 256, "tokens generated per request")):
        brun.add_argument(name, type=int, default=default, metavar="N", help=f"{what} (default: {default})")
    brun.add_argument("--temperature", type=float, default=0.0)
    brun.add_argument("--warmup", type=int, default=None, help="warm-up requests (default: one per concurrent stream)")
    brun.add_argument("--seed", type=int, default=None, help="shuffle the prompts with this seed (default: file order)")
    brun.add_argument("--label", default=None, help="a name for the stored run, shown by `bench report` (default: API-cCONCURRENCY, e.g. sglang-c8)")
    brun.add_argument("--no-save", action="store_true", help="print the result, store nothing")
    report = _command(bench_sub, "report", "the latest sweep's decision, or stored runs side by side", json=True, config=True)
    report.add_argument("runs", nargs="*", metavar="RUN", help="runs to compare side by side (default: the latest sweep)")
    report.add_argument("--last", type=int, default=10, help="without a sweep: this many latest runs")
    report.add_argument("--sweep", metavar="ID", help="the sweep to report (default: the latest)")
    report.add_argument("--against", metavar="ID", help="another sweep side by side with it (an SGLang and a vLLM sweep of one drafter)")
    report.add_argument("--format", choices=("text", "md", "csv", "json"), default=None, help="md: a shareable Markdown report")
    report.add_argument("--out", metavar="FILE", help="write the report to FILE instead of printing it")
    _command(bench_sub, "schedule", "the depth to serve at each load, from the runbook's last sweep, as the engine's own "
             "command line per concurrency (and where speculation should be off)", json=True, config=True)
    _command(bench_sub, "sweep", "relaunch the server per depth config and benchmark each (see [bench] in the config)", config=True,
             json=True, yes="relaunch without asking").add_argument(
        "--after", choices=("recommended", "original", "stop"), help="what runs when it is done (default: [bench] after, recommended)")

    base = _command(bench_sub, "baseline", "a short baseline without speculation at one concurrency: the launch step's server "
                    "relaunched without its draft, measured, then its own config again; what `server` judges paying against",
                    config=True, json=True, yes="relaunch the server without asking")
    base.add_argument("--concurrency", type=int, default=8, metavar="N", help="requests in flight at once: the load to judge (default: 8)")
    base.add_argument("--step", metavar="STEP", help="the launch step (default: [bench] launch_step, or the only one)")
    base.add_argument("--requests", type=int, default=32, metavar="N", help="requests measured (default: 32)")
    base.add_argument("--max-tokens", type=int, default=64, metavar="N", help="tokens generated per request (default: 64)")
    ckpt = _command(bench_sub, "checkpoints", "serve each complete checkpoint of a training run through the runbook's launch step "
                    "(its flags; only the draft changes) and measure the acceptance the engine reports: which checkpoint to ship; "
                    "exit 0 each measured, 1 one was not", config=True, json=True, yes="relaunch the server without asking")
    ckpt.add_argument("run", metavar="RUN", help="a training run of the config ([runs.NAME], with its output_dir)")
    ckpt.add_argument("--step", metavar="STEP", help="the launch step that serves them (default: [bench] launch_step, or the only one)")
    ckpt.add_argument("--requests", type=int, default=8, metavar="N", help="requests per checkpoint, one at a time, the same prompts for each (default: 8)")
    ckpt.add_argument("--max-tokens", type=int, default=64, metavar="N", help="tokens generated per request (default: 64)")

    runs = _command(sub, "runs", "training runs of [runs.NAME]: progress, accuracy per position, estimated acceptance length, "
                    "checkpoints, flags; exit 0 healthy, 1 something flagged, 2 could not read", config=True, json=True)
    runs.add_argument("name", nargs="?", metavar="NAME", help="only this run")
    runs.add_argument("--no-wait", action="store_true",
                      help="one look only: no second look (at most 3 s) to confirm an ending; the state says it is from one look")
    runs.add_argument("--watch", action="store_true",
                      help="keep watching (the TUI's loop): a line each time a run's state changes, until Ctrl-C (--json: JSON lines)")
    server = _command(sub, "server", "live figures of a serving SGLang (throughput, requests, acceptance, flags): of the server "
                      "a launch STEP started, or of --log FILE / --url URL; exit 0 healthy, 1 flagged, 2 could not read",
                      config=True, json=True)
    server.add_argument("step", nargs="?", metavar="STEP", help="a launch step of the runbook (default: the last one that started a server)")
    server.add_argument("--log", metavar="FILE", help="a server log to read (on --host, default this machine)")
    server.add_argument("--url", metavar="URL", help="the server's base URL: /metrics (--enable-metrics) and /server_info")
    server.add_argument("--host", metavar="H", help="the host --log is on, and --url is reached from")
    server.add_argument("--prometheus", metavar="SELECTOR", help="read SGLang's series from [prometheus], e.g. 'instance=\"10.0.0.1:30000\"'")
    where = server.add_argument_group("where it runs (its manager is asked on --host; its log read from it when --log is not given)")
    where.add_argument("--container", metavar="NAME", help="a Docker container (or Podman's, with --container-engine podman)")
    where.add_argument("--container-engine", metavar="ENGINE", help="docker (default) or podman")
    where.add_argument("--slurm-job", metavar="ID", help="a Slurm job (its StdOut is its log)")
    where.add_argument("--pod", metavar="[NAMESPACE/]NAME", help="a Kubernetes pod, through kubectl on --host")
    where.add_argument("--pod-container", metavar="NAME", help="the pod's container (default: its first)")
    alert_sub = sub.add_parser("alert", help="alerts: bell, desktop notification, command, notification URLs ([alerts])").add_subparsers(
        dest="alert_command", metavar="ACTION")
    _command(alert_sub, "test", "send a test alert through every configured channel; exit 0 delivered, 1 a channel failed",
             config=True, json=True)

    demo = _command(sub, "demo", "the whole deployment of the story on this machine: no GPU, no network beyond loopback")
    demo.add_argument("--dir", metavar="DIR", help="where the demo's world lives (default: a new temporary folder); an earlier "
                      "demo's world there is replaced, a folder of other files refused")
    demo.add_argument("--theme", default=argparse.SUPPRESS, metavar="NAME", help="as `cockpit --theme` (written before or after demo)")
    demo.add_argument("--engine", choices=("sglang", "vllm"), default="sglang", help="the server the story launches: SGLang "
                      "0.5.2 or vLLM 0.10.2, both stand-ins")
    demo.add_argument("--ascii", action="store_true", default=argparse.SUPPRESS, help="as `cockpit --ascii` (written before or after demo)")
    demo.add_argument("--no-mouse", action="store_true", default=argparse.SUPPRESS, help="as `cockpit --no-mouse` (written before or after demo)")

    init = _command(sub, "init", "a short questionnaire that writes a commented config")
    init.add_argument("path", nargs="?", metavar="FILE", help="where to write it (default: the XDG config file)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--example", action="store_true", help="the annotated example config instead of questions (printed, or written to FILE)")
    init.add_argument("--sample", choices=("deployment", "two-node"), default=None,
                      help="the annotated example of the story's deployment (the default of --example), or of one server "
                           "over two nodes (implies --example)")

    _command(sub, "ui", "open the cockpit (the same as no command)", config=True).add_argument(
        "--read-only", action="store_true", default=argparse.SUPPRESS, help="monitoring only: no step or action can run")
    return parser
