#!/bin/bash
# build_sglang_payload.sh: the offline SGLang + EAGLE-3 payload for the GPU machine (issue 48), made the way the kit's
# build_payload.sh makes vLLM's (../shared/docs/real-engines/kit/): the release's wheel, sglang-kernel and the pinned
# dependencies downloaded with no resolution, installed flat (pip install --target), trimmed to what a dense Llama with
# an EAGLE-3 draft on Hopper loads, xz-compressed, the kit's model and traffic scripts beside it, MANIFEST.sha256.
#
# usage: bash tests/gpu/build_sglang_payload.sh DEST_DIR [--check]
#   DEST_DIR: an IGNORED folder in the checkout root (.realengine-sglang: add "/.realengine-sglang/" to .git/info/exclude)
#   --check:  then import SGLang's whole serving path from the payload on this CPU machine, in a Python 3.12 venv that
#             holds what the GPU machine has (torch 2.11.0+cu130, torchvision 0.26.0, triton 3.6.0, ...): a STAND-IN
#             libcuda.so.1 (every cu* symbol sgl_kernel's sm90 ops link to, each returning an error) lets the kernel
#             library load, and torch is told an H100 is there (so the `if is_cuda():` imports run).  Imports only:
#             nothing runs a kernel.  Prints the GPU packages the serving path imported.
# Only SGLang 0.5.11 (sglang-kernel 0.4.2) is pinned: the range that fits the GPU machine's torch 2.11 is 0.5.11-0.5.17,
# and 0.5.11 has the fewest hard dependencies.  Rebuilding is cheap: wheels stay in /tmp/realengine-build/sgl-0.5.11.
# Needs: python3 with pip, xz, strip, sha256sum, gcc and nm (--check), and Python 3.12 (--check: /root/.pyenv or PATH).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
KIT=${KIT:-$ROOT/../shared/docs/real-engines/kit}
VERSION=0.5.11; KERNEL=0.4.2; PINS=$HERE/deps-pins-sglang-$VERSION.txt
[ $# -ge 1 ] || { echo "usage: bash $0 DEST_DIR [--check]" >&2; exit 2; }
mkdir -p "$1"; DEST=$(cd "$1" && pwd); CHECK=${2:-}
W=/tmp/realengine-build; WH=$W/sgl-$VERSION; SITE=$W/sgl-site
mkdir -p "$WH"; rm -rf "$SITE"; mkdir -p "$SITE"
PIPX=(env PIP_CONSTRAINT=/dev/null python3 -m pip)
TAGS=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
      --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
      --platform manylinux1_x86_64 --platform any)
echo "== download (sglang $VERSION, sglang-kernel $KERNEL, $(grep -c '^[^#]' "$PINS") pinned deps, no resolution)"
"${PIPX[@]}" download -q --no-deps "${TAGS[@]}" -d "$WH" "sglang==$VERSION" "sglang-kernel==$KERNEL" -r "$PINS"
echo "== install into a flat site dir"
"${PIPX[@]}" install -q --no-deps --no-compile --no-index "${TAGS[@]}" --target "$SITE" "$WH"/*.whl
cd "$SITE"
echo "== trim: $(du -sh . | cut -f1) before"
# FlashAttention-3 (1 GiB: imported only by sgl_kernel.flash_attn, which the triton attention backend never imports),
# FlashMLA, the Blackwell build of the ops, DeepGEMM (FP8 GEMMs only), MSCCL++ (multi-GPU all-reduce) and its static
# libraries, console scripts, bytecode
rm -f sgl_kernel/flash_ops.abi3.so sgl_kernel/flashmla_ops.abi3.so
rm -rf sgl_kernel/sm100 deep_gemm lib/libmscclpp*.a bin
find . -name __pycache__ -type d -prune -exec rm -rf {} +
find . -name "*.so*" -type f ! -path "./sgl_kernel/*" -exec strip --strip-debug {} + 2>/dev/null || true
echo "== $(du -sh . | cut -f1) after; compress"
rm -f "$DEST/site-py.tar.xz"
tar -cf - . | xz -T2 -9 > "$DEST/site-py.tar.xz"
mkdir -p "$DEST/kit"
cp "$KIT/make_tiny_eagle3.py" "$KIT/traffic.py" "$DEST/kit/"
(cd "$DEST" && find . -type f ! -name MANIFEST.sha256 | sort | xargs sha256sum > MANIFEST.sha256)
payload=$(du -sm "$DEST" | cut -f1)
checkout=$(( $(cd "$ROOT" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) >> 20 ))
echo "== payload $payload MiB, with the checkout about $((payload + checkout)) MiB (64 MiB travel in one call)"

[ "$CHECK" = "--check" ] || exit 0
echo "== check: SGLang's serving path imported from the payload (Python 3.12, the GPU machine's packages)"
PY312=$(ls /root/.pyenv/versions/3.12*/bin/python3 2>/dev/null | head -1 || true); PY312=${PY312:-$(command -v python3.12)}
V=$W/sgl-check-venv; C=$W/sgl-check
if [ ! -x "$V/bin/python" ]; then
  "$PY312" -m venv "$V"
fi
# the GPU machine's versions where its pip list names them (the device tool's KINDS.md), the rest as resolved
"$V/bin/pip" install -q "torch==2.11.0" "torchvision==0.26.0" "triton==3.6.0" "numpy==2.5.2" "safetensors==0.8.0" \
    "sentencepiece==0.2.2" "huggingface_hub==1.33.0" pillow pyyaml regex requests tqdm packaging psutil scipy jinja2
rm -rf "$C"; mkdir -p "$C/site" "$C/fake"
xz -dc "$DEST/site-py.tar.xz" | tar -x -C "$C/site"
# STAND-IN libcuda.so.1: the driver's symbols the kernel library links to, each returning an error (no GPU here)
nm -D --undefined-only "$C/site/sgl_kernel/sm90/common_ops.abi3.so" | awk '{print $2}' | sed 's/@.*//' | grep -E '^cu[A-Z]' \
  | sort -u | awk '{print "int " $1 "(void){return 999;}"}' > "$C/fake/stub.c"
gcc -shared -fPIC -o "$C/fake/libcuda.so.1" "$C/fake/stub.c" -Wl,-soname,libcuda.so.1
cat > "$C/fake/sitecustomize.py" <<'EOF'
# STAND-IN (the import check only): torch says an H100 is there, so SGLang's `if is_cuda():` imports run
import types
import torch
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
torch.cuda.get_device_name = lambda *a, **k: "NVIDIA H100 80GB HBM3"
torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
    major=9, minor=0, name="NVIDIA H100 80GB HBM3", total_memory=80 << 30, multi_processor_count=132,
    L2_cache_size=50 << 20, warp_size=32, gcnArchName="")
EOF
cd "$C"
LD_LIBRARY_PATH=$C/fake PYTHONPATH=$C/fake:$C/site "$V/bin/python" - <<'EOF'
import importlib, sys
path = ["sglang.launch_server", "sglang.srt.entrypoints.http_server", "sglang.srt.managers.scheduler",
        "sglang.srt.managers.tokenizer_manager", "sglang.srt.managers.detokenizer_manager",
        "sglang.srt.model_executor.model_runner", "sglang.srt.models.llama", "sglang.srt.models.llama_eagle3",
        "sglang.srt.speculative.eagle_worker", "sglang.srt.layers.attention.triton_backend", "sglang.srt.layers.sampler"]
for name in path:
    importlib.import_module(name)
gpu = ["flashinfer", "sgl_kernel", "tvm_ffi", "triton", "xgrammar", "torch_memory_saver", "flash_attn", "cutlass",
       "deep_gemm", "torchao", "quack", "sgl_kernel.flash_attn"]
print("imports: OK (%d modules of the serving path); GPU packages loaded: %s"
      % (len(path), ", ".join(g for g in gpu if g in sys.modules)))
EOF
