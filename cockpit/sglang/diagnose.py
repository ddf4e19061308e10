"""SGLang's log read: its argparse failures and crash texts named, with the fix.

Argparse failures (the usage synopsis then `PROG: error: MESSAGE`) become one diagnosis per bad
flag; SGLang's crash signatures (sglang-facts §6) each get a kind and a one-line hint; a
`Received sigquit` wrapper is traced back to the exception before it.  Only the last run in the
log is diagnosed (serving/logread.py reads the log and asks the engine whose log it is).  Never raises
on odd input.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.hosts.procs import LAUNCH_MARKER  # written by the cockpit before a launched server starts
from cockpit.serving.engine import LogReading
from cockpit.serving.helpschema import FlagSchema, parse_argparse_text
from cockpit.serving.argparse_errors import ARG_PREFIX, diagnose_argparse, split_unknown  # noqa: F401  (re-exported)
from cockpit.serving.suggest import most_likely
from cockpit.diagnosis import SHAPE_MISMATCH, Diagnosis, draft_does_not_fit, in_draft
from cockpit.sglang.flags import reference_schema

READY_LINE = "The server is fired up and ready to roll!"

# --- argparse errors ------------------------------------------------------------------------------

ERROR_LINE = re.compile(r"^(?P<prog>\S+(?: serve)?): error: (?P<msg>.*)$")


# --- crash signatures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    kind: str
    pattern: re.Pattern[str]
    hint: str  # may name groups of the match ({port}) and facts of the log ({mem_fraction})
    flag: str | None = None
    cause: bool = True  # a root cause; False: a consequence of one (a scheduler died, a child failed)


def _sig(kind: str, pattern: str, hint: str, flag: str | None = None, cause: bool = True) -> Signature:
    return Signature(kind, re.compile(pattern), hint, flag, cause)


# Every wording of every SGLang version from 0.4.6 to 0.5.23 (read from each version's source:
# cockpit/sglang/data/versions.json, tests/fixtures/record/sglang_versions.py), matched by meaning.
SIGNATURES = (
    _sig("gpus_not_clean", r"The memory capacity is unbalanced\. Some GPUs may be occupied by other processes",
         "GPUs of the launch host hold memory of other processes: run the gpu_clean (and kill_stale) steps, then relaunch"),
    _sig("not_enough_memory", r"Not enough memory\. Please try to increase --mem-fraction-static",
         "no room for the KV cache after the weights{at_fraction}: raise --mem-fraction-static or use more GPUs (--tp-size)",
         "--mem-fraction-static"),
    _sig("cuda_oom", r"(torch\.(cuda\.)?OutOfMemoryError|CUDA out of memory)(?:.*?Tried to allocate (?P<need>[\d.]+ [KMGT]iB))?"
         r"(?:.*?GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+ [KMGT]iB) of which (?P<free>[\d.]+ [KMGT]iB) is free)?",
         "CUDA out of memory{on_gpu}{wanted}{at_fraction}: lower --mem-fraction-static, or check that the GPUs were clean",
         "--mem-fraction-static"),
    _sig("cuda_graph_capture_failed", r"Capture (?:piecewise )?cuda graph failed",
         "CUDA graph capture failed (often memory): lower --cuda-graph-max-bs or --mem-fraction-static", "--cuda-graph-max-bs"),
    _sig("nccl_error", r"NCCL error|NCCL WARN|ncclInternalError|ncclUnhandledCudaError|ncclSystemError",
         "NCCL could not start: check shared memory (--shm-size / ipc=host), InfiniBand and NCCL_* settings"),
    _sig("port_in_use", r"(?:(?:\[Errno 98\] )?error while attempting to bind on address \('(?P<bind>[^']*)', (?P<port>\d+)\)|"
         r"metrics_port at (?P<mport>\d+) is not available|Port is already in use\. dist_init_port=(?P<dport>\d+)|"
         r"engine_info_bootstrap_port (?P<bport>\d+) is already in use|address already in use|\[Errno 98\])",
         "port {port} is taken (an old server still running?): stop it, or choose another --port", "--port"),
    _sig("draft_wrong_architecture", r"KeyError: 'midlayer\.self_attn\.qkv_proj\.weight'",
         "the draft's config.json names a normal model: set architectures to [\"LlamaForCausalLMEagle3\"]"),
    _sig("draft_layers_keys", r"(KeyError: 'model\.layers\.0|Parameter \S+ not found in params_dict)",
         "the draft's weights are named layers.0.*: rename them to midlayer.* (cockpit drafter fix-keys)"),
    _sig("draft_unrecognized_config", r"Unrecognized model in \S+\. Should have a `model_type` key",
         "the draft's config.json has no model_type (a vLLM speculators export): `cockpit drafter convert` rewrites it for SGLang"),
    _sig("draft_too_many_layers", r"EAGLE3 currently only supports 1 layer",
         "this SGLang needs num_hidden_layers = 1 in the draft's config.json"),
    _sig("vocab_mismatch", r"index out of bounds",
         "draft and target vocabularies disagree (d2t/t2d): the draft was trained for another target"),
    _sig("illegal_memory_access", r"CUDA error: an illegal memory access was encountered",
         "a kernel or CUDA graph bug: try --disable-cuda-graph to isolate it", "--disable-cuda-graph"),
    _sig("trust_remote_code", r"(requires you to execute the configuration file|trust_remote_code=True)",
         "the model ships its own code: add --trust-remote-code", "--trust-remote-code"),
    _sig("no_accelerator", r"No accelerators? (?:\([^)]*\) )?(?:or platform plugin )?(?:is |are )?available",
         "no GPU is visible to the server process: check CUDA_VISIBLE_DEVICES and the driver on the launch host"),
    _sig("unknown_speculative_algorithm", r"Unknown speculative algorithm(?: name:| id)? '?(?P<value>[^'\s]+)'?",
         "--speculative-algorithm {value} is not one this SGLang knows; it takes {algorithms}", "--speculative-algorithm"),
    _sig("partial_depth_flags", r"TypeError: '>' not supported between instances of 'NoneType' and 'int'",
         "give all three depth flags: --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens"),
    _sig("warmup_failed", r"Initialization failed\. warmup error:", "the first generation failed: its error is above", cause=False),
    _sig("scheduler_died", r"(Scheduler hit an exception|(?:Rank \d+ )?scheduler is dead)",
         "a scheduler process died: read the traceback above it (the OOM killer leaves none: check dmesg)", cause=False),
)
CONSEQUENCES = {s.kind for s in SIGNATURES if not s.cause} | {"child_failed", "python_exception", "subprocess_failed"}
ANY_SIGNATURE = re.compile("|".join(f"(?:{sig.pattern.pattern})" for sig in SIGNATURES))
# the wrapper of a child's failure: before 0.5.x's subprocess watchdog, and its own word since (0.5.11, recorded)
SIGQUIT = re.compile(r"Received sigquit from a child process|SIGQUIT received\. .*It usually means one child failed")
# 0.5.11's subprocess watchdog (sglang/srt/utils/watchdog.py): a server process that ended, with its exit code (negative:
# the signal that ended it); the server then sends itself SIGQUIT (a real one, its scheduler killed with SIGKILL:
# tests/fixtures/gpu-engines/sglang-0.5.11-h100/A-serve.log)
SUBPROCESS_ENDED = re.compile(r"Subprocess (?P<name>\S+) \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+)")
# its own words of a graceful stop (0.5.11's SIGTERM handler drains and shuts down; uvicorn's lines on a Ctrl-C): after
# it came up, what ends then is the stop's teardown (a SIGTERM to its process group ends its children with -15)
SHUTDOWN = re.compile(r"SIGTERM received\. .*shutting down|INFO:     Shutting down$|Application shutdown complete\.|"
                      r"Finished server process \[\d+\]")
# its stamp, `[2026-12-07 22:03:58]`, after a Ray actor's prefix where there is one (the time: group 1)
STAMP = re.compile(r"^(?:\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*)?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
# its capacity, logged once it is up: a KV cache smaller than one request of its context length still starts (a real
# 0.5.11 at --mem-fraction-static 0.001 served with 117 tokens), and then refuses every longer input
CAPACITY = re.compile(r"max_total_num_tokens=(?P<tokens>\d+), .*?\bcontext_len=(?P<context>\d+)")
EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|AssertionError|KeyError|Exception)(?::.*)?$")
DECODE_LINE = re.compile(r"Decode batch[.,].*?accept len: (?P<len>\d+(?:\.\d+)?)")
MILESTONES = (
    ("load weights", re.compile(r"Load weight begin")),
    ("weights loaded", re.compile(r"Load weight end")),
    ("KV cache", re.compile(r"KV Cache is allocated")),
    ("CUDA graph capture", re.compile(r"Capture cuda graph begin")),
    ("CUDA graphs captured", re.compile(r"Capture cuda graph end")),
    ("draft CUDA graphs", re.compile(r"Capture draft cuda graph end")),
    ("HTTP server up", re.compile(r"Uvicorn running on")),
    ("ready", re.compile(re.escape(READY_LINE))),
)
ANY_MILESTONE = re.compile("|".join(f"(?:{p.pattern})" for _, p in MILESTONES))
RUN_START = re.compile(r"^(usage: \S|" + re.escape(LAUNCH_MARKER) + r"|.*server_args=ServerArgs\()")


def _last_run_start(lines: list[str]) -> int:
    """Index of the line where the last run starts (a launch marker, a usage block or ServerArgs)."""
    start = 0
    for index, line in enumerate(lines):
        if RUN_START.match(line):
            # what follows our own launch marker closely belongs to the same run
            if start < index and lines[start].startswith(LAUNCH_MARKER) and index - start <= 5 and not line.startswith(LAUNCH_MARKER):
                continue
            start = index
    return start


def _traceback_cause(lines: list[str], end: int) -> tuple[str, int] | None:
    """The exception line closest before `end` (the cause a sigquit wrapper hides)."""
    for index in range(end - 1, -1, -1):
        text = lines[index].strip()
        text = re.sub(r"^\[[^\]]*\]\s*", "", text)
        if EXCEPTION_LINE.match(text) and not SIGQUIT.search(text):
            return text, index
    return None


ARGPARSE_MESSAGE = re.compile(r"^(?:unrecognized arguments: |argument -|the following arguments are required: |ambiguous option: )")


def _argparse_error(line: str, usage_seen: bool) -> re.Match | None:
    """`prog: error: message`: argparse's last line.  With its usage text above it, any prog; alone
    (a `tail`, a line pasted into a chat), a launcher's prog or one of argparse's own message forms."""
    error = ERROR_LINE.match(line)
    if error is None:
        return None
    if usage_seen or "launch_server" in error.group("prog") or "sglang" in error.group("prog") or ARGPARSE_MESSAGE.match(error.group("msg")):
        return error
    return None


def read_log(lines: list[str], numbers: list[int], schema: FlagSchema | None = None) -> LogReading:
    """The last run of an SGLang log (its lines as the intake gave them, with their numbers) diagnosed."""
    reading = LogReading()
    start = _last_run_start(lines)
    run = lines[start:]
    run_numbers = numbers[start:]
    reading.run_start_line = run_numbers[0] if run_numbers else None
    report = reading
    usage_in_run = any(line.startswith("usage:") for line in run)
    if schema is None:
        try:
            schema = parse_argparse_text("\n".join(run)) if usage_in_run else None
        except CockpitError:
            schema = None
        if schema is not None:
            schema = schema.enriched(reference_schema())
        elif any(_argparse_error(line, False) for line in run):
            schema = reference_schema()  # no usage text (a tail, a pasted line): the recorded flags of SGLang
    seen_kinds: set[str] = set()
    decode_lens: list[float] = []
    facts = _facts(run)
    quoted = _quoted_source(run)
    usage_seen = False
    for offset, line in enumerate(run):
        number = run_numbers[offset]
        usage_seen = usage_seen or line.startswith("usage:")
        error = _argparse_error(line, usage_seen) if ": error: " in line else None
        if error:
            report.diagnoses.extend(diagnose_argparse(error.group("msg"), schema, number))
            continue
        decode = DECODE_LINE.search(line)
        if decode:
            decode_lens.append(float(decode.group("len")))
        if ANY_MILESTONE.search(line):
            for name, pattern in MILESTONES:
                # each once, where first reached: the draft loads its weights and its KV cache again (0.5.11, recorded)
                if pattern.search(line) and all(name != seen for seen, _ in report.milestones):
                    report.milestones.append((name, number))
        if READY_LINE in line:
            report.ready = True
        if offset not in quoted and "mat1 and mat2" in line and "draft_does_not_fit" not in seen_kinds:
            shape = SHAPE_MISMATCH.search(line)
            if shape is not None and in_draft(run, offset):  # not memory, whatever the capture's own advice says
                seen_kinds.update(("draft_does_not_fit", "cuda_graph_capture_failed"))
                report.diagnoses.append(draft_does_not_fit(shape, number, facts.get("draft"), facts.get("model")))
                continue
        if "max_total_num_tokens=" in line and "kv_cache_below_context" not in seen_kinds and (cap := CAPACITY.search(line)):
            seen_kinds.add("kv_cache_below_context")
            if int(cap.group("tokens")) < int(cap.group("context")):
                report.diagnoses.append(_below_context(int(cap.group("tokens")), int(cap.group("context")), facts.get("mem_fraction"),
                                                       number))
        if "crashed with exit code" in line and "subprocess_ended" not in seen_kinds and (ended := SUBPROCESS_ENDED.search(line)):
            seen_kinds.add("subprocess_ended")
            report.diagnoses.append(_subprocess_ended(ended, number))
        if offset not in quoted and ANY_SIGNATURE.search(line):
            for signature in SIGNATURES:
                match = signature.pattern.search(line)
                if match and signature.kind not in seen_kinds:
                    seen_kinds.add(signature.kind)
                    report.diagnoses.append(_from_signature(signature, match, facts, number, schema))
        if SIGQUIT.search(line) and "child_failed" not in seen_kinds:
            seen_kinds.add("child_failed")
            if not any(d.kind not in CONSEQUENCES and d.severity == "error" for d in report.diagnoses):
                cause = _traceback_cause(run, offset)
                if cause is not None:
                    text, index = cause
                    report.diagnoses.append(Diagnosis("child_failed", f"a server process failed: {text}", None, None, (),
                                                      run_numbers[index]))
                else:
                    report.diagnoses.append(Diagnosis("child_failed", "a server process failed; no traceback before it",
                                                      None, None, (), number))
    if len(decode_lens) >= 3 and all(abs(v - 1.0) < 1e-9 for v in decode_lens):
        report.diagnoses.append(Diagnosis(
            "draft_weights_not_loaded",
            f"accept len 1.00 on all {len(decode_lens)} decode lines: the draft is not used (layers.0.* keys skipped by "
            "SGLang 0.4.9-0.5.11, or wrong aux layers): run cockpit drafter inspect",
            None, None, ("cockpit drafter fix-keys DRAFT_DIR",), report.run_start_line, severity="error"))
    if not any(d.severity == "error" for d in report.diagnoses) and not report.ready:
        tail_exc = _traceback_cause(run, len(run)) if any("Traceback (most recent call last)" in l for l in run) else None
        # the server's last word only: a traceback it logged and went on after (a route it could not set up, then
        # "Application startup complete") is no end (a real 0.5.11 without openai_harmony, read before it was ready)
        if tail_exc is not None and not any(STAMP.match(later) for later in run[tail_exc[1] + 1:]) and not _logged(run, tail_exc[1]):
            text, index = tail_exc
            report.diagnoses.append(Diagnosis("python_exception", text, None, None, (), run_numbers[index]))
    if report.ready:
        ready_at = max(n for m, n in report.milestones if m == "ready")
        report.stopped_at = next((n for line, n in zip(run, run_numbers) if n > ready_at and SHUTDOWN.search(line.rstrip())), None)
        # errors before the ready line belong to start-up noise only when the server still came up
        report.diagnoses = [d for d in report.diagnoses if d.kind in ("draft_weights_not_loaded", "kv_cache_below_context") or d.line is None
                            or d.line > ready_at]
    # the root cause first, what followed from it after, a warning last
    report.diagnoses.sort(key=lambda d: (d.severity != "error", d.kind in CONSEQUENCES))
    seen: set = set()
    unique = []
    for d in report.diagnoses:  # several ranks print the same error: said once, at its first line
        if (d.kind, d.flag, d.value, d.message) not in seen:
            seen.add((d.kind, d.flag, d.value, d.message))
            unique.append(d)
    report.diagnoses = unique
    return report


SERVER_ARGS_FACTS = {"port": r"\bport=(\d+)", "mem_fraction": r"\bmem_fraction_static=([\d.]+)", "tp": r"\btp_size=(\d+)",
                     "model": r"\bmodel_path='([^']*)'", "draft": r"\bspeculative_draft_model_path='([^']*)'"}
TRACEBACK_FILE = re.compile(r'^\s*File "[^"]*", line \d+')


def _below_context(tokens: int, context: int, fraction: str | None, line: int) -> Diagnosis:
    """A server up with a KV cache smaller than one request of its context length: SGLang refuses inputs of
    min(context_len, pool) - 6 tokens or more (its scheduler's max_req_input_len) and cuts outputs at the pool."""
    now = f" (now {fraction})" if fraction else ""
    return Diagnosis("kv_cache_below_context",
                     f"its KV cache holds {tokens} tokens, fewer than one request of its context length {context}: SGLang "
                     f"refuses inputs of about {max(tokens - 6, 1)} tokens or more and cuts outputs short; raise "
                     f"--mem-fraction-static{now} or use more GPUs", "--mem-fraction-static", fraction,
                     ("a larger --mem-fraction-static", "more GPUs (--tp-size)"), line, severity="warning")


def _logged(run: list[str], exception_at: int) -> bool:
    """Whether the traceback that ends at `exception_at` is one SGLang logged in a message and handled (`[stamp] Can not
    initialize OpenAIServingResponses, error: Traceback (most recent call last):`), not one that ended a process (a bare
    `Traceback (most recent call last):` line)."""
    for index in range(exception_at, max(-1, exception_at - 400), -1):
        line = run[index]
        if "Traceback (most recent call last)" in line:
            return bool(STAMP.match(line)) and not line.rstrip().endswith("] Traceback (most recent call last):")
    return False


def _subprocess_ended(match: re.Match, line: int) -> Diagnosis:
    """A server process that ended, as SGLang's watchdog says it: a signal is the cause (SIGKILL: the OOM killer, a
    scheduler, kill -9), an exit code a consequence of the error logged above it."""
    name, pid, code = match.group("name"), match.group("pid"), int(match.group("code"))
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        why = " (the OOM killer, a scheduler or kill -9? check dmesg)" if sig == "SIGKILL" else ""
        return Diagnosis("subprocess_killed", f"SGLang's {name} process (pid {pid}) was killed by {sig}{why}; the server "
                         "shut itself down", None, None, (), line)
    return Diagnosis("subprocess_failed", f"SGLang's {name} process (pid {pid}) exited with code {code}: its error is "
                     "logged above this line", None, None, (), line)


def _facts(run: list[str]) -> dict[str, str]:
    """What the log says of the server's settings (its ServerArgs line): the port, the memory fraction."""
    facts: dict[str, str] = {}
    for line in run:
        if "ServerArgs(" in line:
            for name, pattern in SERVER_ARGS_FACTS.items():
                match = re.search(pattern, line)
                if match:
                    facts[name] = match.group(1)
    return facts


def _quoted_source(run: list[str]) -> set[int]:
    """Lines a traceback quotes from the source (`raise ValueError(f"... {name}")`), and its caret
    lines: never an error, and never where a value is read from."""
    quoted = set()
    for index, line in enumerate(run):
        if TRACEBACK_FILE.match(line):
            for after in range(index + 1, min(index + 6, len(run))):
                text = run[after]
                if TRACEBACK_FILE.match(text) or not text.startswith("    ") and not re.match(r"^\s*[\^~]+\s*$", text):
                    break
                quoted.add(after)
    return quoted


def _from_signature(signature: Signature, match: re.Match, facts: dict[str, str], line: int, schema: FlagSchema | None) -> Diagnosis:
    """The diagnosis of a signature, with the concrete values the log names (the port, the GPU, the
    memory fraction, the algorithm and what this version accepts)."""
    from cockpit.sglang import versions

    groups = {k: v for k, v in match.groupdict().items() if v}
    port = next((groups[k] for k in ("port", "mport", "dport", "bport") if k in groups), facts.get("port", "(see the log)"))
    fraction = facts.get("mem_fraction")
    algorithms = versions.algorithms(schema.version if schema is not None else None)
    value = groups.get("value")
    words = {
        "port": port, "value": value or "", "algorithms": ", ".join(algorithms),
        "at_fraction": f" at --mem-fraction-static {fraction}" if fraction else "",
        "on_gpu": f" on GPU {groups['gpu']}" if "gpu" in groups else "",
        "wanted": (f" (tried to allocate {groups['need']}" + (f"; {groups['free']} free of {groups['total']}" if "free" in groups else "")
                   + ")") if "need" in groups else "",
    }
    message = signature.hint.format(**words)
    replacement = None
    flag_value = value
    if signature.kind == "unknown_speculative_algorithm" and value:
        meant = most_likely(value, tuple(algorithms))
        if meant:
            message += f"; did you mean {meant}?"
            replacement = ("--speculative-algorithm", meant)
    elif signature.kind == "port_in_use":
        flag_value = port if port.isdigit() else None
    return Diagnosis(signature.kind, message, signature.flag, flag_value, (message,), line, replacement)

