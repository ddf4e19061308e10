#!/bin/bash
# record_vllm.sh: the kit's gpu_run.sh (../shared/docs/real-engines/kit/, vLLM 0.20.2) with what issue 48 asks on top:
# every log line stamped with its arrival time (A-serve.arrivals: "EPOCH_S<TAB>line"), the cockpit's own server watch
# following A and B one look a second (tests/gpu/watch_real_server.py -> A-watch.jsonl, B-watch.jsonl), B stopped the
# way `cockpit plan stop` does (its stop record written first, then the signal), and D: a start under
# --kv-cache-memory-bytes too small (vLLM's own estimate of the longest length that fits), and E: a draft whose hidden
# size does not fit the target.
# Run on the GPU machine from the checkout root with the payload carried (.realengine):
#   BUDGET=500 bash tests/gpu/record_vllm.sh
# (what follows is the kit's text where not said otherwise)
# gpu_run.sh: the GPU machine side of a real-engine recording (vLLM + EAGLE-3 on one H100/H200).
# Built into the payload by build_payload.sh; run from the checkout root with the payload carried:
#   bash .realengine/kit/gpu_run.sh (on the GPU machine, .realengine carried along, 600 s at most)
# Steps (each time-stamped in steps.log): verify + unpack the payload into /tmp/site (skipped when
# a warm machine still has it), record env.txt (nvidia-smi, versions, pip list), self-test the
# pruned kernels, build the tiny target + draft (make_tiny_eagle3.py, 8 target layers by default),
# then A: cold start, traffic (traffic.py), SIGKILL of the EngineCore; B: warm start, traffic,
# Ctrl-C (SIGINT to the server's process group); C: a start that fails for lack of KV-cache memory.
# Everything comes back as $OUT/vllm-eagle3-rec.tar.gz plus steps.log, summary.txt, A-serve.log.
# Parameters (env): BUDGET (seconds this script may use, default 540); MODEL_ARGS (extra
# make_tiny_eagle3.py arguments, e.g. "--layers 4" for the draft/target mismatch crash).
# Written for vLLM 0.20.2 (its module and kernel file names); not tried for other releases.
P=$(pwd)/.realengine                          # the carried payload folder
ENGINE=vllm
SUMMARY_RE="SpecDecoding metrics|Starting vLLM|Application startup complete|Uvicorn running|Available routes|Using .*backend|Capturing CUDA graphs|torch.compile takes|init engine|died|EngineDeadError|Error|Traceback"
. "$(dirname "$0")/record_lib.sh"             # (changed) what record_sglang.sh shares: budget, packing, following a server

# ---- 1. unpack ------------------------------------------------------------------------
unpack
if [ "$UNPACKED" = 1 ]; then
  [ -f "$P/vllm_C.so.xz" ] && unxz "$P/vllm_C.so.xz" > "$S/vllm/_C.abi3.so"  # (changed) vLLM 0.26 has none: its ops are in _C_stable_libtorch
  unxz "$P/vllm_C_stable.so.xz" > "$S/vllm/_C_stable_libtorch.abi3.so"
  [ -f "$P/vllm_fa3_C.so.xz" ] && unxz "$P/vllm_fa3_C.so.xz" > "$S/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"
  unpacked
fi
# (added) vLLM 0.26's model registry imports vllm.vllm_flash_attn, which refuses to load without a FlashAttention
# kernel: a payload built --no-fa3 (to fit 64 MiB) gets an empty STAND-IN module in its place; the server then runs
# with --attention-backend TRITON_ATTN (below), so no FlashAttention op is ever called
if [ ! -f "$S/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so" ] && [ ! -f "$S/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" ]; then
  echo "# STAND-IN (tests/gpu/record_vllm.sh): no FlashAttention kernel in this payload; TRITON_ATTN serves" \
    > "$S/vllm/vllm_flash_attn/_vllm_fa2_C.py"
fi
# Fallback after a failed self-test: the unpruned vllm/_C and vllm/_C_stable_libtorch, carried
# by two earlier calls as /tmp/parts/kernels-full.tar.xz.part-aa/-ab (+ kernels-full.sha256)
if [ -f /tmp/parts/kernels-full.sha256 ]; then
  if [ "$(cat /tmp/parts/kernels-full.tar.xz.part-* | sha256sum | cut -d' ' -f1)" = "$(cat /tmp/parts/kernels-full.sha256)" ]; then
    cat /tmp/parts/kernels-full.tar.xz.part-* | unxz /dev/stdin | tar -x -C "$S" && say "using the UNPRUNED kernels from /tmp/parts"
  else say "/tmp/parts incomplete: $(ls /tmp/parts | tr '\n' ' ')"; fi
fi
export PYTHONPATH="$S"
python3 -c "import xgrammar" 2>/dev/null || export PYTHONPATH="$S:$P/kit/stubs"
# (changed) VLLM_USE_FLASHINFER_SAMPLER=0: vLLM 0.26 imports FlashInfer for its sampler unless told not to (the payload has none)
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       PYTHONUNBUFFERED=1 VLLM_LOG_STATS_INTERVAL=10 TOKENIZERS_PARALLELISM=false
record_env

# ---- 2. self-test of the (pruned) kernels: two _C ops, default lazy loading; then the
#         same with every module loaded eagerly (informational only) -------------------------
say "self-test"
cat > /tmp/selftest.py <<'PY'
import torch
torch.cuda.init()
import importlib.util
for name in ("vllm._C", "vllm._C_stable_libtorch"):  # (changed) 0.20.2 has both, 0.26.0 the second only
    if importlib.util.find_spec(name):
        importlib.import_module(name)
try:  # (changed) vLLM 0.26's vllm_flash_attn package raises ImportError without its kernels (a payload built --no-fa3)
    import vllm.vllm_flash_attn._vllm_fa3_C  # noqa: F401
except ImportError:
    pass
x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16); w = torch.rand(256, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(x); torch.ops._C.rms_norm(out, x, w, 1e-5)
ref = torch.nn.functional.rms_norm(x.float(), (256,), w.float(), 1e-5)
g = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16); o2 = torch.empty(8, 256, device="cuda", dtype=torch.bfloat16)
torch.ops._C.silu_and_mul(o2, g); torch.cuda.synchronize()
ref2 = torch.nn.functional.silu(g[:, :256].float()) * g[:, 256:].float()
print("SELFTEST OK", torch.cuda.get_device_name(), (out.float() - ref).abs().max().item(), (o2.float() - ref2).abs().max().item())
PY
timeout 120 python3 /tmp/selftest.py > "$R/selftest.log" 2>&1
[ -n "${EAGER_SELFTEST:-}" ] && CUDA_MODULE_LOADING=EAGER timeout 120 python3 /tmp/selftest.py > "$R/selftest-eager.log" 2>&1  # (changed) informational; 128 s
tail -n 3 "$R/selftest.log" "$R/selftest-eager.log"
grep -q "SELFTEST OK" "$R/selftest.log" || { say "self-test FAILED (see selftest.log)"; finish 5; }

# ---- 3. tiny target + EAGLE-3 draft ------------------------------------------------------
say "make model"; python3 "$P/kit/make_tiny_eagle3.py" "$M" ${MODEL_ARGS:-} > "$R/make_model.log" 2>&1 || { say "model build FAILED"; finish 6; }

ATTN=(); [ -f "$S/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so" ] || ATTN=(--attention-backend TRITON_ATTN)
# `python3 -m vllm.entrypoints.cli.main` ends in `if __name__ == "__main__": main()`. A home-made
# launcher must have that guard too: the EngineCore is a spawned process that re-imports the
# launcher, and without the guard it fails with "An attempt has been made to start a new process
# before the current process has finished its bootstrapping phase".
serve() {  # serve TAG EXTRA_ARGS... ; starts the server in its own session, echoes its pid
  local tag=$1; shift
  setsid python3 -m vllm.entrypoints.cli.main serve "$M/target" --served-model-name tiny-llama-eagle3 \
     --host 127.0.0.1 --port $PORT --max-model-len 1024 --max-num-seqs 32 --gpu-memory-utilization 0.25 \
     --speculative-config '{"method":"eagle3","model":"'"${DRAFT:-$M/draft}"'","num_speculative_tokens":3}' \
     "${ATTN[@]}" "$@" > "$R/$tag-serve.log" 2>&1 < /dev/null &
  local pid=$!
  follow "$tag" $pid                          # (added) arrival times and the cockpit's own watch
  echo $pid
}
# ---- 4-7. the scenarios (tests/gpu/record_lib.sh): A cold start, traffic, the EngineCore killed; B warm start, stopped
#           as `cockpit plan stop` stops it; E (added, not yet run there) a draft of another hidden size; C too little
#           memory for the KV cache; D (added) --kv-cache-memory-bytes too small: vLLM's own estimate of what fits
ENGINE_PROC=enginecore
scenario_a
scenario_b
scenario_e
failing_start C 90 "${C_SHARE:-1}" "gpu-memory-utilization" --gpu-memory-utilization 0.0005
failing_start D 60 1 "kv-cache-memory-bytes" --kv-cache-memory-bytes 1048576
# ---- 8. (added) the live test: the watch's looks read back (tests/gpu/test_real_engine.py) -----------------------
want A && sleep 2 && COCKPIT_REAL_ENGINE_REC="$R" timeout 60 python3 -m pytest -c /dev/null --noconftest -p no:cacheprovider -q -rA \
    "$REPO/tests/gpu/test_real_engine.py" > "$R/live-test.txt" 2>&1; say "live test: exit $? ($(tail -1 "$R/live-test.txt"))"
cp "$R/live-test.txt" "$OUT/" 2>/dev/null
finish 0
