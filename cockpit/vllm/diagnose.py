"""vLLM's crash texts turned into named errors with their fix (vllm-facts §1.6 and §2, each version's
own strings as its source has them).  Fed with the lines of a log (the intake has cleaned them);
returns Diagnoses as SGLang's diagnosis does, so that every shell shows them the same way."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT
from cockpit.intake import clean
from cockpit.diagnosis import SHAPE_MISMATCH, Diagnosis, draft_does_not_fit, in_draft
from cockpit.serving.engine import LogReading
from cockpit.vllm import specconfig
from cockpit.format import shell_words
from cockpit.serving.argparse_errors import diagnose_argparse
from cockpit.serving.helpschema import FlagSchema
from cockpit.vllm.fixes import fixes_for_line

# what only vLLM's own server prints (a module path with "vllm" in it is not enough: SGLang 0.4 imported vLLM's
# kernels, and its tracebacks name them)
LOOKS_LIKE_VLLM = re.compile(r"vLLM (?:API )?server version|^usage: vllm|^(?:vllm|vllm serve|api_server\.py): error: |"
                             r"^\(APIServer pid=\d+\)|EngineCore[_ ]|validation errors? for SpeculativeConfig|SpecDecoding metrics: |"
                             r"Avg prompt throughput: |RuntimeError: Failed to infer device type")
# what only SGLang's server prints: with any of it, the log is SGLang's whatever else it says
# argparse's failure line, as each version's entry point names its program
_ERROR_LINE = re.compile(r"^(?:vllm(?: serve)?|\S*api_server\.py): error: (?P<msg>.*)$")
# 0.8/0.9 print the value with repr(): in double quotes when it holds single quotes
_BAD_JSON = re.compile(r"^argument --speculative-config(?:/-sc)?: (?:invalid loads value: (?P<q>['\"])(?P<v1>.*)(?P=q)$|"
                       r"Value (?P<v2>.*) cannot be converted to <function loads)")
# newer versions' own conversion message for a typed flag (not argparse's)
_CONVERT = re.compile(r"^argument (?P<flag>--[\w-]+)(?:/-\w+)?: Value (?P<value>\S+) cannot be converted to <class '(?P<type>\w+)'>")
_METHOD_LITERAL = re.compile(r"Input should be ('ngram'.*?) \[type=literal_error, input_value='(?P<value>[^']*)'")
_METHOD_UNKNOWN = re.compile(r"Unknown speculative method '(?P<value>[^']*)'")
_UNEXPECTED_KEY = re.compile(r"SpeculativeConfig\.__init__\(\) got an unexpected keyword argument '(?P<key>[^']*)'")
_PROCESS = re.compile(r"^\(\w+ pid=\d+\)\s?")  # vLLM's per-process prefix (0.10.2 writes it in ANSI colour)
_PYDANTIC = re.compile(r"\d+ validation errors? for SpeculativeConfig")
# the engine's other configs refusing a value (0.10.2 on: pydantic): the field is the flag, its input the value given
_CONFIG_PYDANTIC = re.compile(r"\d+ validation errors? for (?P<cls>\w*Config)\b")
_OLD_FRACTION = re.compile(r"GPU memory utilization must be less than 1\.0\. Got (?P<value>-?\d+(?:\.\d+)?)")
_NONE_DEPTH = re.compile(r"TypeError: 'NoneType' object cannot be interpreted as an integer")

# the KV cache cannot hold one request of the model's length, in every version's words (the V1 engine's, 0.8.5 on;
# the V0 workers'): facts recorded from each wheel's source (cockpit/vllm/data)
KV_CACHE_TOO_SMALL = (r"To serve at least one request with the models?'s max seq len \(\d+\)|"
                      r"The model's max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV cache|"
                      r"KV cache is needed, which is larger than the available KV cache memory")

# (kind, pattern, message, suggestions): texts that name their own cause
FIXED = [
    ("missing_depth", r"num_speculative_tokens must be provided with speculative model|A speculative model was provided, but "
     r"`num_speculative_tokens` was not provided",
     "--speculative-config has no num_speculative_tokens: the depth of the chain", ('"num_speculative_tokens": N',)),
    ("invalid_value", r"Expected num_speculative_tokens to be greater than zero|num_speculative_tokens\s+Input should be greater than 0",
     "num_speculative_tokens must be 1 or more", ('"num_speculative_tokens": 3',)),
    ("unknown_key", r"'tensor_parallel_size' is not a valid argument in the speculative_config",
     "the draft's tensor parallelism is 'draft_tensor_parallel_size' in --speculative-config", ('"draft_tensor_parallel_size": 1',)),
    ("draft_tp", r"speculative_draft_tensor_parallel_size=\d+ cannot be other value than 1 or target model tensor_parallel_size",
     "draft_tensor_parallel_size must be 1 or the target's --tensor-parallel-size", ('"draft_tensor_parallel_size": 1',)),
    ("method_checkpoint_mismatch", r"speculative_config requested method='[^']*', but the draft model '[^']*' is a '[^']*' checkpoint",
     "the method does not match the draft checkpoint: EAGLE-3 drafts need method eagle3", ('"method": "eagle3"',)),
    ("target_not_supported", r"Eagle3 is only supported for (?:Llama models|\[[^\]]*\] models)",
     "this vLLM runs EAGLE-3 only for the target model types it lists (see the line): upgrade vLLM or serve with SGLang", ()),
    ("target_not_supported", r"Model does not support EAGLE3 interface",
     "the target's model class in this vLLM has no EAGLE-3 interface (aux hidden states): upgrade vLLM or serve with SGLang", ()),
    ("draft_architecture", r"Model architectures \[[^\]]*\] are not supported for now",
     "vLLM has no class for the draft's architectures (config.json 'architectures'; 0.9 to 0.10.1 rename X to Eagle3X and "
     "register only Eagle3LlamaForCausalLM, 0.10.2 on also LlamaForCausalLMEagle3): list both names, or vLLM 0.10.2 or later",
     ('"architectures": ["LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"]',)),
    ("draft_key", r"There is no module or parameter named '[^']*' in Eagle3\w*|KeyError: '(?:layers|midlayer)\.",
     "a key of the draft checkpoint is not one vLLM's EAGLE-3 class has: check `cockpit drafter inspect --engine vllm`", ()),
    ("draft_shape", r"Attempted to load weight \(torch\.Size\(\[[^\]]*\]\)\) into parameter \(torch\.Size",
     "a draft tensor's shape does not match: a draft trained for another target (hidden size, vocabulary)?", ()),
    ("kv_cache_memory", r"No available memory for the cache blocks",
     "no GPU memory left for the KV cache after the weights: raise --gpu-memory-utilization (0.9 default) or free the GPUs "
     "(`cockpit status`: another process?)", ("--gpu-memory-utilization 0.95",)),
    ("kv_cache_too_small", KV_CACHE_TOO_SMALL,
     "out of GPU memory for the KV cache: it cannot hold one request of --max-model-len; lower --max-model-len or raise "
     "--gpu-memory-utilization (0.9 default; or free the GPUs)", ("a smaller --max-model-len", "a larger --gpu-memory-utilization")),
    ("gpu_not_free", r"Free memory on device (?:\S+ )?\([\d.]+/[\d.]+ GiB\) on startup is less than desired GPU memory utilization",
     "another process holds GPU memory: vLLM wants --gpu-memory-utilization of the whole GPU free (`cockpit status` shows who)",
     ("free the GPUs, or lower --gpu-memory-utilization",)),
    ("invalid_value", r"GPU memory utilization must be less than 1\.0|gpu_memory_utilization\s+Input should be",
     "--gpu-memory-utilization is a fraction of the GPU: above 0 and at most 1", ("--gpu-memory-utilization 0.9",)),
    ("oom", CUDA_OOM, "CUDA out of memory: lower --gpu-memory-utilization, --max-num-seqs or --max-model-len, or use more GPUs", ()),
    # after start-up: the engine core gone while serving (a real 0.20.2 on an H100, its EngineCore killed: every request
    # in flight got HTTP 500, then the API server shut itself down with exit status 0; tests/fixtures/gpu-engines)
    ("engine_dead", r"EngineDeadError|EngineCore encountered (?:a fatal error|an issue)|"
                    r"\[shutdown\] MPClient: engine core exited unexpectedly",  # 0.26.0's own word, before the traceback
     "vLLM's engine core died while serving: requests in flight got HTTP 500 and the server shut itself down (exit status "
     "0 all the same); the cause is in the EngineCore's own lines above, and none there means it was killed (OOM killer, "
     "kill -9)", ()),
    ("port_in_use", r"\[Errno 98\] (?:error while attempting to bind on address|Address already in use)",
     "the port is taken (another server?): --port another, or stop the one there", ()),
    ("no_device", r"RuntimeError: Failed to infer device type",
     "vLLM found no GPU to run on (it infers the device while it builds its arguments): run it on a GPU host; check "
     "`nvidia-smi` there, CUDA_VISIBLE_DEVICES, and a container's --gpus / --device nvidia.com/gpu=all",
     ("nvidia-smi", "--gpus all")),
    ("v1_fallback", r"Speculative Decoding is not supported by the V1 Engine\. Falling back to V0",
     "vLLM fell back to its V0 engine: give \"method\" explicitly (eagle3) for V1", ('"method": "eagle3"',)),
]
_FIXED = [(kind, re.compile(pattern), message, tips) for kind, pattern, message, tips in FIXED]
# a running (or starting) server's lines that end it, for the live watch (serving/live.py): its OOMs with vLLM's fix
CRASH_LINES = (
    ("oom", re.compile(CUDA_OOM), "out of memory: lower --gpu-memory-utilization, --max-num-seqs or --max-model-len, or use more GPUs"),
    ("oom", re.compile(KV_CACHE_TOO_SMALL + r"|No available memory for the cache blocks"),
     "out of GPU memory for the KV cache: lower --max-model-len, or raise --gpu-memory-utilization (or free the GPUs)"),
    ("crashed", re.compile(r"EngineCore failed to start|Engine core initialization failed|EngineDeadError|"
                           r"\[shutdown\] MPClient: engine core exited unexpectedly|"
                           r"EngineCore encountered a fatal error|" + NCCL_TIMEOUT),
     "vLLM's engine died: the cause is logged above this line (EngineCore)"),
)
_ENGINE_FAILED = re.compile(r"Engine core initialization failed|EngineCore failed to start")


def _bare(line: str) -> str:
    """A line without colour and vLLM's process prefix (the cheap way: most lines have neither)."""
    if "\x1b" in line:
        line = clean(line)
    return _PROCESS.sub("", line) if line.startswith("(") else line


def owns_line(line: str) -> bool:
    """vLLM's own words on a line (whose log is it: serving/engines.py asks every engine): its process prefix
    (`(APIServer pid=N)`, 0.10 on) or its own texts."""
    if "\x1b" in line:
        line = clean(line)
    if line.startswith(("(APIServer pid=", "(EngineCore", "(Worker")):
        return True
    return LOOKS_LIKE_VLLM.search(_bare(line)) is not None


def diagnose(lines: list[str], first_line: int = 1, version: str | None = None, schema: FlagSchema | None = None) -> list[Diagnosis]:
    """Every named failure in `lines`, with the line it was read from (1-based, from first_line)."""
    out: list[Diagnosis] = []
    seen: set[tuple[str, str]] = set()

    def add(diagnosis: Diagnosis) -> None:
        key = (diagnosis.kind, diagnosis.flag or diagnosis.message)
        if key not in seen:
            seen.add(key)
            out.append(diagnosis)

    lines = [_bare(line) for line in lines]
    skip_to = 0
    for offset, line in enumerate(lines):
        if offset < skip_to:
            continue  # the rest of a pydantic block already read
        number = first_line + offset
        text = line.strip()
        if _PYDANTIC.search(text):
            found = _pydantic(lines[offset + 1:offset + 4], number, version)
            if found is not None:
                add(found)
                skip_to = offset + 4
            continue
        if (m := _CONFIG_PYDANTIC.search(text)):
            found = _config_field(m.group("cls"), lines[offset + 1:offset + 4], number)
            if found is not None:
                add(found)
                skip_to = offset + 4
                continue
        if "mat1 and mat2" in text and (m := SHAPE_MISMATCH.search(text)) and in_draft(lines, offset):
            args = _given_args(lines)
            spec = args.get("speculative_config")
            draft, target = (spec.get("model") if isinstance(spec, dict) else None), args.get("model")
            add(draft_does_not_fit(m, number, draft if isinstance(draft, str) else None, target if isinstance(target, str) else None))
            continue
        if (m := _OLD_FRACTION.search(text)):
            add(_fraction(float(m.group("value")), number))
            continue
        if _NONE_DEPTH.search(text) and any("num_speculative_tokens" in earlier for earlier in lines[max(0, offset - 4):offset]):
            add(Diagnosis("missing_depth", "--speculative-config has no num_speculative_tokens (vLLM 0.10.2 stops with this "
                          "TypeError): the depth of the chain", "--speculative-config", None, ('"num_speculative_tokens": N',), number))
            continue
        if (m := _ERROR_LINE.match(text)):
            for found in _argparse(m.group("msg"), number, version, schema):
                add(found)
            continue
        if (m := _METHOD_LITERAL.search(text)) or (m := _METHOD_UNKNOWN.search(text)):
            value = m.group("value")
            add(Diagnosis("invalid_choice", f"speculative method '{value}' is not one this vLLM runs (eagle3 for an EAGLE-3 draft)",
                          "--speculative-config", value, ('"method": "eagle3"',), number))
            continue
        if (m := _UNEXPECTED_KEY.search(text)):
            add(_unknown_key(m.group("key"), version, number))
            continue
        if (m := _KV_ESTIMATE.search(text)):
            add(_kv_fix(int(m.group(1)), _given_args(lines), number))
            continue
        if "No available memory for the cache blocks" in text and (by_bytes := _given_args(lines).get("kv_cache_memory_bytes")):
            add(Diagnosis("kv_cache_memory", f"no memory for the KV cache: --kv-cache-memory-bytes {by_bytes} sets its size "
                          "(--gpu-memory-utilization no longer does): raise it", "--kv-cache-memory-bytes", str(by_bytes),
                          ("a larger --kv-cache-memory-bytes",), number))
            continue
        for kind, pattern, message, tips in _FIXED:
            if pattern.search(text):
                add(Diagnosis(kind, message, None, None, tips, number))
                break
    given = _given_config(lines)
    if given is not None:
        # what the server was started with (its `non-default args` line), judged by its own version's rules: a key
        # 0.10.2 ignored without a word is the cause of the failure it reports later
        version = version or next((m.group(1) or m.group(2) for line in lines if (m := _VERSION_LINE.search(line))), None)
        for found in specconfig.check(json.dumps(given), version):
            if found.kind == "unknown_key" and not any(d.kind == "unknown_key" for d in out):
                out.insert(0, replace(found, line=next(i + first_line for i, line in enumerate(lines) if "non-default args" in line)))
    if not out:
        for offset, line in enumerate(lines):
            if _ENGINE_FAILED.search(line):
                out.append(Diagnosis("engine_failed", "vLLM's engine did not start: the cause is logged above this line (EngineCore)",
                                     None, None, (), first_line + offset))
                break
    return out


def _argparse(message: str, number: int, version: str | None, schema: FlagSchema | None) -> list[Diagnosis]:
    """vLLM's argparse failure: every flag it names, each with its value and its fix (serving/argparse_errors.py,
    with vLLM's own ranking of fixes), its --speculative-config that is not JSON, its own typed-value message."""
    if (m := _BAD_JSON.match(message)):
        value = m.group("v1") if m.group("v1") is not None else m.group("v2")
        fixed = _as_json(value)
        return [Diagnosis("invalid_json", f"--speculative-config is not JSON: {value} (keys and strings in double quotes)",
                          "--speculative-config", value, (shell_words(["--speculative-config", fixed]),) if fixed else
                          ('{"method": "eagle3", "model": "DRAFT", "num_speculative_tokens": N}',), number,
                          ("--speculative-config", fixed) if fixed else None)]
    if (m := _CONVERT.match(message)):
        message = f"argument {m.group('flag')}: invalid {m.group('type')} value: '{m.group('value')}'"
    if schema is None:
        from cockpit.vllm.lint import shipped_schema

        schema = shipped_schema(version)
    from cockpit.vllm.versions import releases

    words = message[len("unrecognized arguments: "):].split() if message.startswith("unrecognized arguments: ") else []
    return diagnose_argparse(message, schema, number, "vLLM", fixes_for_line(words), releases())


def _as_json(value: str) -> str | None:
    """A Python-literal speculative config (single quotes, True/None) as the JSON that means the same; None when it
    is not one."""
    import ast

    try:
        data = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return specconfig.dumps(data) if isinstance(data, dict) else None


# the KV cache too small for one request, with vLLM's own estimate of the longest length that fits (0.10.2 on)
_KV_ESTIMATE = re.compile(r"estimated maximum model length is (\d+)")


def _given_args(lines: list[str]) -> dict:
    """The `non-default args: {...}` vLLM logs at start (a Python literal), or {}."""
    import ast

    for line in lines:
        if "non-default args: " in line:
            try:
                args = ast.literal_eval(line.split("non-default args: ", 1)[1].strip())
            except (ValueError, SyntaxError):
                return {}
            return args if isinstance(args, dict) else {}
    return {}


def _kv_fix(longest: int, args: dict, number: int) -> Diagnosis:
    """The KV cache cannot hold one request of --max-model-len: vLLM's own estimate of what fits is the fix; with
    --kv-cache-memory-bytes set, --gpu-memory-utilization no longer sizes the cache (that flag does)."""
    by_bytes = args.get("kv_cache_memory_bytes")
    governs = (f"--kv-cache-memory-bytes {by_bytes} sets the cache's size (--gpu-memory-utilization no longer does): raise it, "
               if by_bytes else "raise --gpu-memory-utilization (or free the GPUs), ")
    if longest <= 0:
        return Diagnosis("kv_cache_too_small", f"the KV cache cannot hold a single token: {governs}", "--max-model-len", None,
                         (), number)
    return Diagnosis("kv_cache_too_small", f"the KV cache cannot hold one request of --max-model-len: vLLM estimates "
                     f"{longest} as the longest length that fits; serve with --max-model-len {longest}, or {governs}to keep "
                     "the length", "--max-model-len", str(args.get("max_model_len") or "") or None,
                     (f"--max-model-len {longest}",), number, ("--max-model-len", str(longest)))


def _given_config(lines: list[str]) -> dict | None:
    """The speculative config of the `non-default args: {...}` line vLLM logs at start."""
    config = _given_args(lines).get("speculative_config")
    return config if isinstance(config, dict) else None


def _unknown_key(key: str, version: str | None, number: int) -> Diagnosis:
    """A key the version's SpeculativeConfig does not have, with the key of its own meant (ranked as a bad choice is)."""
    from cockpit.serving.suggest import most_likely, rank_values
    from cockpit.vllm.versions import era

    keys = tuple(sorted(era(version).keys))
    meant = most_likely(key, keys)
    ranked = ([meant] if meant else []) + [k for k in rank_values(key, keys)[:3] if k != meant][: 2 if meant else 0]
    hint = f"; did you mean '{meant}'?" if meant else ""
    return Diagnosis("unknown_key", f"--speculative-config has a key this vLLM does not know: '{key}'{hint}", "--speculative-config",
                     key, tuple(f'"{k}"' for k in ranked), number)


def _fraction(value: float, number: int | None) -> Diagnosis:
    """--gpu-memory-utilization refused: a percentage written for the fraction is offered as the fraction."""
    from cockpit.serving.lint import out_of_range
    from cockpit.vllm.versions import RANGES

    [found] = out_of_range("--gpu-memory-utilization", value, RANGES["--gpu-memory-utilization"]) or [Diagnosis(
        "invalid_value", "--gpu-memory-utilization is a fraction of the GPU: above 0 and at most 1", "--gpu-memory-utilization",
        None, ("--gpu-memory-utilization 0.9",))]
    return replace(found, line=number)


def _config_field(cls: str, following: list[str], number: int) -> Diagnosis | None:
    """pydantic's block after `1 validation error for CacheConfig` (any of the engine's configs): the field is the flag
    (gpu_memory_utilization: --gpu-memory-utilization), its input_value the value it was given."""
    field = next((line.strip() for line in following if line.strip() and not line.startswith(" ")), None)
    message = next((line.strip() for line in following if line.startswith("  ") and line.strip()
                    and not line.strip().startswith("For further information")), None)
    if not field or not message or not re.fullmatch(r"\w+", field):
        return None
    flag = "--" + field.replace("_", "-")
    given = re.search(r"input_value=(?P<q>['\"]?)(?P<v>[^,'\"\]]*)(?P=q)", message)
    if field == "gpu_memory_utilization" and given:
        try:
            return _fraction(float(given.group("v")), number)
        except ValueError:
            pass
    detail = re.sub(r"\s*\[type=.*$", "", message)
    return Diagnosis("invalid_value", f"{flag} refused by vLLM's {cls}: {detail}", flag, given.group("v") if given else None,
                     (), number)


def _pydantic(following: list[str], number: int, version: str | None = None) -> Diagnosis | None:
    """pydantic's block after `1 validation error for SpeculativeConfig`: the field (a bare name, absent
    for a model-level error) and its message (vLLM 0.10.2 and later)."""
    field, message = None, None
    for line in following:
        if line.startswith("  ") and line.strip() and not line.strip().startswith("For further information"):
            message = line.strip()
            break
        if line.strip() and not line.startswith(" "):
            field = line.strip()
    if message is None:
        return None
    if (m := re.search(r"input_value='([^']*)'", message)) and field == "method" or "Unknown speculative method" in message:
        unknown = _METHOD_UNKNOWN.search(message)
        value = m.group(1) if m and field == "method" else (unknown.group("value") if unknown else None)
        return Diagnosis("invalid_choice", f"speculative method '{value}' is not one this vLLM runs (eagle3 for an EAGLE-3 draft)",
                         "--speculative-config", value, ('"method": "eagle3"',), number)
    if ("Unexpected keyword argument" in message or "Extra inputs are not permitted" in message) and field:
        return _unknown_key(field, version, number)
    for kind, pattern, said, tips in _FIXED:
        if pattern.search(message):
            return Diagnosis(kind, said, "--speculative-config", None, tips, number)
    if field == "num_speculative_tokens" and "greater than 0" in message:
        return Diagnosis("invalid_value", "num_speculative_tokens must be 1 or more", "--speculative-config", None,
                         ('"num_speculative_tokens": 3',), number)
    detail = re.sub(r"\s*\[type=.*$", "", message)
    return Diagnosis("invalid_speculative_config", f"--speculative-config refused: {field + ': ' if field else ''}{detail}",
                     "--speculative-config", field, (), number)


READY = re.compile(r"Application startup complete\.|Starting vLLM (?:API )?server(?: \d+)? on http")
from cockpit.vllm.logs import SHUTDOWN  # noqa: E402  (a stop's own words, as a SIGINT or SIGTERM leaves them)
# vLLM's start-up, under the names SGLang's milestones have where they mean the same (vllm-facts §4.3)
MILESTONES = (
    ("weights loaded", re.compile(r"Loading weights took|Model loading took")),
    ("KV cache", re.compile(r"KV cache size: ")),
    ("CUDA graphs captured", re.compile(r"Graph capturing finished")),
    ("HTTP server up", re.compile(r"Starting vLLM (?:API )?server")),
    ("ready", re.compile(r"Application startup complete")),
)
STEPS = tuple(name for name, _ in MILESTONES if name != "HTTP server up")


# the version a log's start says: its server line, or (0.11 on) the banner's "version X" beside the art
_VERSION_LINE = re.compile(r"vLLM (?:API )?server version (\d[\w.+]*?),?(?:\s|$)|[█▄▀]\s+version (\d[\w.+]*?)\s*$")
RUN_START = re.compile(r"vLLM API server version|vLLM server version|^usage: vllm|[█▄▀]\s+version \d")


def read_log(lines: list[str], numbers: list[int], schema: FlagSchema | None = None) -> LogReading:
    """The last run of a vLLM log (its lines as the intake gave them, with their numbers): its diagnoses,
    whether it came up, its start-up milestones."""
    start = max((i for i, line in enumerate(lines) if RUN_START.search(line)), default=0)
    run = lines[start:]

    def number(offset: int) -> int | None:  # a 1-based line of the run -> the log's own number
        index = start + offset - 1
        return numbers[index] if 0 <= index < len(numbers) else None

    version = next((m.group(1) or m.group(2) for line in run[:200] if (m := _VERSION_LINE.search(line))), None)
    found = [replace(d, line=number(d.line)) if d.line else d for d in diagnose(run, version=version, schema=schema)]
    ready_at = next((i + 1 for i, line in enumerate(run) if READY.search(line)), None)
    if ready_at is not None:  # what was said before it came up did not stop it
        found = [d for d in found if d.line is None or d.line > (number(ready_at) or 0)]
    milestones = [(name, number(i + 1)) for i, line in enumerate(run) for name, pattern in MILESTONES if pattern.search(line)]
    stopped_at = None
    if ready_at is not None:  # its own shutdown words after it came up: a graceful stop (a crash shuts down the same way)
        stopped_at = next((number(i + 1) for i, line in enumerate(run) if i >= ready_at and SHUTDOWN.search(line.rstrip())), None)
    return LogReading(found, ready_at is not None, [(n, at) for n, at in milestones if at is not None],
                      numbers[start] if start < len(numbers) else None, stopped_at)
