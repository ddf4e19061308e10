#!/bin/bash
# record_sglang.sh: a real SGLang serving EAGLE-3 on the GPU machine, recorded as record_vllm.sh records vLLM (issue 48).
# Run once on an H100 (2026-12-07: tests/fixtures/gpu-engines/sglang-0.5.11-h100, 461 s), before step 8 was added.
# What was checked on CPU before that run: the payload (tests/gpu/build_sglang_payload.sh .realengine-sglang --check) imports SGLang 0.5.11's
# whole serving path with torch 2.11 and Python 3.12, as the GPU machine has them; 37 MiB, with the checkout under the
# 64 MiB one call carries; the shell of record_lib.sh's scenarios, run against a stand-in server (A killed and read, B
# read "stopped by you").  Run there from the checkout root, the payload carried (carry [".realengine-sglang"]):
#   BUDGET=520 bash tests/gpu/record_sglang.sh
# Steps (time-stamped in steps.log): unpack into /tmp/site, env.txt, a kernel self-test (sgl_kernel's rmsnorm against
# torch's), the kit's tiny echo Llama and its EAGLE-3 draft (LlamaForCausalLMEagle3: SGLang's own architecture name),
# then A: cold start, traffic, SIGKILL of the scheduler process (sglang::scheduler); B: warm start, traffic, stopped as
# `cockpit plan stop` stops it; E: a draft whose hidden size does not fit the target; C: a start with too little memory
# for the KV cache.  Each server's lines with their arrival times and the cockpit's own watch beside it
# (tests/gpu/record_lib.sh).  Served with the triton attention backend (the payload leaves out FlashAttention-3), the
# PyTorch sampler and no grammar backend (xgrammar is left out: nothing here asks for structured output).
# Everything comes back as $OUT/sglang-eagle3-rec.tar.gz plus steps.log, summary.txt, A-serve.log, watch.jsonl.
P=$(pwd)/.realengine-sglang
ENGINE=sglang
SUMMARY_RE="The server is fired up|Uvicorn running|Load weight|KV Cache is allocated|Capture cuda graph|Decode batch|accept len|Traceback|Error|Exception|Received sigquit|exit code|Killed"
. "$(dirname "$0")/record_lib.sh"

# ---- 1. unpack, the environment ----------------------------------------------------------------------------------------
unpack
[ "$UNPACKED" = 1 ] && unpacked
export PYTHONPATH="$S" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
       SGLANG_DISABLE_REQUEST_LOGGING=0
record_env

# ---- 2. self-test: the (trimmed) kernel library loads on this GPU and one op agrees with torch --------------------------
if [ -z "${SKIP_SELFTEST:-}" ]; then  # SKIP_SELFTEST=1: a machine already shown to run the payload's kernels
say "self-test"
cat > /tmp/selftest.py <<'PY'
import torch
torch.cuda.init()
import sgl_kernel
x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16); w = torch.rand(256, device="cuda", dtype=torch.bfloat16)
out = sgl_kernel.rmsnorm(x, w, 1e-5); torch.cuda.synchronize()
ref = torch.nn.functional.rms_norm(x.float(), (256,), w.float(), 1e-5)
print("SELFTEST OK", torch.cuda.get_device_name(), sgl_kernel.__version__, (out.float() - ref).abs().max().item())
PY
timeout 120 python3 /tmp/selftest.py > "$R/selftest.log" 2>&1
tail -n 3 "$R/selftest.log"
grep -q "SELFTEST OK" "$R/selftest.log" || { say "self-test FAILED (see selftest.log)"; finish 5; }
fi

# ---- 3. tiny target + EAGLE-3 draft --------------------------------------------------------------------------------------
say "make model"; python3 "$P/kit/make_tiny_eagle3.py" "$M" ${MODEL_ARGS:-} > "$R/make_model.log" 2>&1 || { say "model build FAILED"; finish 6; }

serve() {  # serve TAG EXTRA_ARGS... ; starts the server in its own session, echoes its pid
  local tag=$1; shift
  setsid python3 -m sglang.launch_server --model-path "$M/target" --served-model-name tiny-llama-eagle3 \
     --host 127.0.0.1 --port $PORT --context-length 1024 --max-running-requests 32 --mem-fraction-static 0.25 \
     --speculative-algorithm EAGLE3 --speculative-draft-model-path "${DRAFT:-$M/draft}" \
     --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
     --attention-backend triton --sampling-backend pytorch --grammar-backend none --enable-metrics \
     "$@" > "$R/$tag-serve.log" 2>&1 < /dev/null &
  local pid=$!
  follow "$tag" $pid
  echo $pid
}

# ---- 4-7. the scenarios (tests/gpu/record_lib.sh): A cold start, traffic, the scheduler killed; B warm start, stopped
#           as the cockpit stops it; E a draft of another hidden size; C too little memory for the KV cache
ENGINE_PROC="sglang::scheduler"
scenario_a
scenario_b
scenario_e
failing_start C 60 1 "mem-fraction-static" --mem-fraction-static 0.001
# ---- 8. the live test: the watch's looks read back (tests/gpu/test_real_engine.py; SGLang's figure rule: its gauges) ----
want A && sleep 2 && COCKPIT_REAL_ENGINE=sglang COCKPIT_REAL_ENGINE_REC="$R" timeout 60 python3 -m pytest -c /dev/null --noconftest \
    -p no:cacheprovider -q -rA "$REPO/tests/gpu/test_real_engine.py" > "$R/live-test.txt" 2>&1
say "live test: exit $? ($(tail -1 "$R/live-test.txt"))"; cp "$R/live-test.txt" "$OUT/" 2>/dev/null
finish 0
