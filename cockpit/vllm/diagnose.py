"""vLLM's crash texts turned into named errors with their fix (vllm-facts §1.6 and §2, each version's
own strings as its source has them).  Fed with the lines of a log (the intake has cleaned them);
returns Diagnoses as SGLang's diagnosis does, so that every shell shows them the same way."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from cockpit.crashtexts import CUDA_OOM
from cockpit.intake import clean
from cockpit.diagnosis import Diagnosis
from cockpit.serving.engine import LogReading
from cockpit.vllm import specconfig
from cockpit.vllm.versions import LEGACY_FLAGS

# what only vLLM's own server prints (a module path with "vllm" in it is not enough: SGLang 0.4 imported vLLM's
# kernels, and its tracebacks name them)
LOOKS_LIKE_VLLM = re.compile(r"vLLM (?:API )?server version|^usage: vllm|^(?:vllm|vllm serve|api_server\.py): error: |"
                             r"^\(APIServer pid=\d+\)|EngineCore[_ ]|validation errors? for SpeculativeConfig|SpecDecoding metrics: |"
                             r"Avg prompt throughput: ")
# what only SGLang's server prints: with any of it, the log is SGLang's whatever else it says
_UNRECOGNIZED = re.compile(r"^(?:vllm|api_server\.py|vllm serve): error: unrecognized arguments: (?P<args>.*)$")
_BAD_JSON = re.compile(r"error: argument --speculative-config(?:/-sc)?: (?:invalid loads value: '(?P<v1>.*)'|Value (?P<v2>.*) cannot be "
                       r"converted to <function loads)")
_BAD_CHOICE = re.compile(r"error: argument (?P<flag>--[\w-]+)(?:/-\w+)?: invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")
_BAD_NUMBER = re.compile(r"error: argument (?P<flag>--[\w-]+)(?:/-\w+)?: (?:invalid (?P<type>int|float) value: '(?P<v1>[^']*)'|"
                         r"Value (?P<v2>\S+) cannot be converted to <class '(?P<type2>\w+)'>)")
_METHOD_LITERAL = re.compile(r"Input should be ('ngram'.*?) \[type=literal_error, input_value='(?P<value>[^']*)'")
_METHOD_UNKNOWN = re.compile(r"Unknown speculative method '(?P<value>[^']*)'")
_UNEXPECTED_KEY = re.compile(r"SpeculativeConfig\.__init__\(\) got an unexpected keyword argument '(?P<key>[^']*)'")
_PROCESS = re.compile(r"^\(\w+ pid=\d+\)\s?")  # vLLM's per-process prefix (0.10.2 writes it in ANSI colour)
_PYDANTIC = re.compile(r"\d+ validation errors? for SpeculativeConfig")
_NONE_DEPTH = re.compile(r"TypeError: 'NoneType' object cannot be interpreted as an integer")

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
     "vLLM has no class for the draft's architectures (config.json 'architectures': Eagle3 renames X to Eagle3X)",
     ('"architectures": ["LlamaForCausalLMEagle3"]',)),
    ("draft_key", r"There is no module or parameter named '[^']*' in Eagle3\w*|KeyError: '(?:layers|midlayer)\.",
     "a key of the draft checkpoint is not one vLLM's EAGLE-3 class has: check `cockpit drafter inspect --engine vllm`", ()),
    ("draft_shape", r"Attempted to load weight \(torch\.Size\(\[[^\]]*\]\)\) into parameter \(torch\.Size",
     "a draft tensor's shape does not match: a draft trained for another target (hidden size, vocabulary)?", ()),
    ("kv_cache_memory", r"No available memory for the cache blocks",
     "no GPU memory left for the KV cache after the weights: raise --gpu-memory-utilization (0.9 default) or free the GPUs "
     "(`cockpit status`: another process?)", ("--gpu-memory-utilization 0.95",)),
    ("kv_cache_too_small", r"To serve at least one request with the models?'s max seq len \(\d+\)",
     "the KV cache cannot hold one request of --max-model-len: lower --max-model-len or raise --gpu-memory-utilization",
     ("--max-model-len 32768",)),
    ("gpu_not_free", r"Free memory on device (?:\S+ )?\([\d.]+/[\d.]+ GiB\) on startup is less than desired GPU memory utilization",
     "another process holds GPU memory: vLLM wants --gpu-memory-utilization of the whole GPU free (`cockpit status` shows who)",
     ("free the GPUs, or lower --gpu-memory-utilization",)),
    ("invalid_value", r"GPU memory utilization must be less than 1\.0|gpu_memory_utilization\s+Input should be",
     "--gpu-memory-utilization is a fraction of the GPU: above 0 and at most 1", ("--gpu-memory-utilization 0.9",)),
    ("oom", CUDA_OOM, "CUDA out of memory: lower --gpu-memory-utilization, --max-num-seqs or --max-model-len, or use more GPUs", ()),
    ("port_in_use", r"\[Errno 98\] (?:error while attempting to bind on address|Address already in use)",
     "the port is taken (another server?): --port another, or stop the one there", ()),
    ("v1_fallback", r"Speculative Decoding is not supported by the V1 Engine\. Falling back to V0",
     "vLLM fell back to its V0 engine: give \"method\" explicitly (eagle3) for V1", ('"method": "eagle3"',)),
]
_FIXED = [(kind, re.compile(pattern), message, tips) for kind, pattern, message, tips in FIXED]
_ENGINE_FAILED = re.compile(r"Engine core initialization failed|EngineCore failed to start")


def _bare(line: str) -> str:
    """A line without colour and vLLM's process prefix (the cheap way: most lines have neither)."""
    if "\x1b" in line:
        line = clean(line)
    return _PROCESS.sub("", line) if line.startswith("(") else line


def owns_line(line: str) -> bool:
    """vLLM's own words on a line (whose log is it: serving/engines.py asks every engine)."""
    return LOOKS_LIKE_VLLM.search(_bare(line)) is not None


def diagnose(lines: list[str], first_line: int = 1, version: str | None = None) -> list[Diagnosis]:
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
            found = _pydantic(lines[offset + 1:offset + 4], number)
            if found is not None:
                add(found)
                skip_to = offset + 4
            continue
        if _NONE_DEPTH.search(text) and any("num_speculative_tokens" in earlier for earlier in lines[max(0, offset - 4):offset]):
            add(Diagnosis("missing_depth", "--speculative-config has no num_speculative_tokens (vLLM 0.10.2 stops with this "
                          "TypeError): the depth of the chain", "--speculative-config", None, ('"num_speculative_tokens": N',), number))
            continue
        if (m := _UNRECOGNIZED.search(text)):
            words = m.group("args").split()
            legacy = [w for w in words if w.split("=", 1)[0].replace("_", "-") in LEGACY_FLAGS]
            if legacy:
                config, _ = specconfig.legacy_config(words)
                fixed = specconfig.dumps(config)
                add(Diagnosis("unrecognized_argument", f"{', '.join(legacy)}: vLLM 0.8.3 and later take none of these (0.8.2's "
                              f"separate flags); one flag says it all: --speculative-config '{fixed}'", legacy[0], None,
                              (f"--speculative-config '{fixed}'",), number, ("--speculative-config", fixed)))
            else:
                add(Diagnosis("unrecognized_argument", f"not vLLM flags: {m.group('args')}", words[0] if words else None, None,
                              (), number))
            continue
        if (m := _BAD_JSON.search(text)):
            value = m.group("v1") or m.group("v2")
            add(Diagnosis("invalid_json", f"--speculative-config is not JSON: {value} (keys and strings in double quotes)",
                          "--speculative-config", value, ('{"method": "eagle3", "model": "DRAFT", "num_speculative_tokens": N}',), number))
            continue
        if (m := _BAD_CHOICE.search(text)):
            add(Diagnosis("invalid_choice", f"{m.group('flag')} '{m.group('value')}' is not one of {m.group('choices')}",
                          m.group("flag"), m.group("value"), (), number))
            continue
        if (m := _BAD_NUMBER.search(text)):
            value = m.group("v1") or m.group("v2")
            add(Diagnosis("invalid_value", f"{m.group('flag')} needs a number, got '{value}'", m.group("flag"), value, (), number))
            continue
        if (m := _METHOD_LITERAL.search(text)) or (m := _METHOD_UNKNOWN.search(text)):
            value = m.group("value")
            add(Diagnosis("invalid_choice", f"speculative method '{value}' is not one this vLLM runs (eagle3 for an EAGLE-3 draft)",
                          "--speculative-config", value, ('"method": "eagle3"',), number))
            continue
        if (m := _UNEXPECTED_KEY.search(text)):
            add(Diagnosis("unknown_key", f"--speculative-config has a key this vLLM does not know: '{m.group('key')}'",
                          "--speculative-config", m.group("key"), (), number))
            continue
        for kind, pattern, message, tips in _FIXED:
            if pattern.search(text):
                add(Diagnosis(kind, message, None, None, tips, number))
                break
    given = _given_config(lines)
    if given is not None:
        # what the server was started with (its `non-default args` line), judged by its own version's rules: a key
        # 0.10.2 ignored without a word is the cause of the failure it reports later
        version = next((m.group(1) for line in lines if (m := re.search(r"vLLM (?:API )?server version (\S+?),?(?:\s|$)", line))), None)
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


def _given_config(lines: list[str]) -> dict | None:
    """The speculative config of the `non-default args: {...}` line vLLM logs at start (a Python literal)."""
    import ast

    for line in lines:
        if "non-default args: " in line and "speculative_config" in line:
            try:
                args = ast.literal_eval(line.split("non-default args: ", 1)[1].strip())
            except (ValueError, SyntaxError):
                return None
            config = args.get("speculative_config") if isinstance(args, dict) else None
            return config if isinstance(config, dict) else None
    return None


def _pydantic(following: list[str], number: int) -> Diagnosis | None:
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
    if "Unexpected keyword argument" in message and field:
        return Diagnosis("unknown_key", f"--speculative-config has a key this vLLM does not know: '{field}'", "--speculative-config",
                         field, (), number)
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
# vLLM's start-up, under the names SGLang's milestones have where they mean the same (vllm-facts §4.3)
MILESTONES = (
    ("weights loaded", re.compile(r"Loading weights took|Model loading took")),
    ("KV cache", re.compile(r"KV cache size: ")),
    ("CUDA graphs captured", re.compile(r"Graph capturing finished")),
    ("HTTP server up", re.compile(r"Starting vLLM (?:API )?server")),
    ("ready", re.compile(r"Application startup complete")),
)
STEPS = tuple(name for name, _ in MILESTONES if name != "HTTP server up")


RUN_START = re.compile(r"vLLM API server version|vLLM server version|^usage: vllm")


def read_log(lines: list[str], numbers: list[int]) -> LogReading:
    """The last run of a vLLM log (its lines as the intake gave them, with their numbers): its diagnoses,
    whether it came up, its start-up milestones."""
    start = max((i for i, line in enumerate(lines) if RUN_START.search(line)), default=0)
    run = lines[start:]

    def number(offset: int) -> int | None:  # a 1-based line of the run -> the log's own number
        index = start + offset - 1
        return numbers[index] if 0 <= index < len(numbers) else None

    found = [replace(d, line=number(d.line)) if d.line else d for d in diagnose(run)]
    ready_at = next((i + 1 for i, line in enumerate(run) if READY.search(line)), None)
    if ready_at is not None:  # what was said before it came up did not stop it
        found = [d for d in found if d.line is None or d.line > (number(ready_at) or 0)]
    milestones = [(name, number(i + 1)) for i, line in enumerate(run) for name, pattern in MILESTONES if pattern.search(line)]
    return LogReading(found, ready_at is not None, [(n, at) for n, at in milestones if at is not None],
                      numbers[start] if start < len(numbers) else None)
