"""fix-keys on a drafter-sized file, side by side with the naive way and with `cp`.

Run on demand:  python tests/perf/bench_drafter.py [--gib 2]
Makes a real safetensors file (real bytes on disk, no holes) in the EAGLE-3 layout with layers.0.*
keys, then, each in its own process so time and peak memory are its own:
  - cockpit drafter fix-keys (in place: header only, journaled);
  - naive: safetensors load_file, rename, save_file (what a hand-written script does);
  - cp of the file (the floor for anything that rewrites it).
Targets (issue 5): at least 1000x faster than load-and-save; memory under 64 MB whatever the size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cockpit.drafter.header import encode_header  # noqa: E402

MEASURE = r"""
import resource, sys, time, subprocess
start = time.perf_counter()
code = subprocess.call(sys.argv[1:]) if sys.argv[1] != "-c" else exec(sys.argv[2])
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"RESULT {elapsed:.6f} {peak:.1f}")
"""

INNER = r"""
import resource, sys, time
sys.path.insert(0, sys.argv[1])
from cockpit.drafter.fixkeys import fix_keys
start = time.perf_counter()
report = fix_keys(sys.argv[2])
elapsed = time.perf_counter() - start
assert report.changed > 0
print(f"{elapsed:.6f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
"""

NAIVE = r"""
import sys
from safetensors.torch import load_file, save_file
path = sys.argv[1]
tensors = load_file(path)
tensors = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v for k, v in tensors.items()}
save_file(tensors, path + ".new")
"""


def make_file(path: Path, gib: float) -> int:
    hidden = 4096
    layer_keys = ["q_proj", "k_proj", "v_proj", "o_proj"]
    raw, offset = {}, 0
    target = int(gib * 2**30)
    per_tensor = target // (len(layer_keys) + 3)
    rows = max(1, per_tensor // (hidden * 2))
    for key in layer_keys:
        size = rows * hidden * 2
        raw[f"layers.0.self_attn.{key}.weight"] = {"dtype": "BF16", "shape": [rows, hidden], "data_offsets": [offset, offset + size]}
        offset += size
    for key in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
        size = rows * hidden * 2
        raw[f"layers.0.{key}.weight"] = {"dtype": "BF16", "shape": [rows, hidden], "data_offsets": [offset, offset + size]}
        offset += size
    for key in ("fc.weight", "norm.weight", "lm_head.weight"):
        raw[key] = {"dtype": "BF16", "shape": [hidden], "data_offsets": [offset, offset + hidden * 2]}
        offset += hidden * 2
    header = encode_header(raw)
    block = os.urandom(64 * 2**20)
    with open(path, "wb") as handle:
        handle.write(len(header).to_bytes(8, "little"))
        handle.write(header)
        left = offset
        while left > 0:
            chunk = block[: min(len(block), left)]
            handle.write(chunk)
            left -= len(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    (path.parent / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1}))
    return path.stat().st_size


def measure(argv: list[str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT")][-1]
    elapsed, peak = line.split()[1:]
    return float(elapsed), float(peak)


def drop_caches() -> None:
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    except OSError:
        pass


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--make":
        make_file(Path(sys.argv[2]), float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        draft = Path(folder) / "draft"
        draft.mkdir()
        file = draft / "model.safetensors"
        # made in its own process: Linux carries a parent's peak RSS into the children it forks,
        # and the 64 MiB buffer used to write the file must not count against fix-keys
        subprocess.run([sys.executable, __file__, "--make", str(file), str(args.gib)], check=True)
        size = file.stat().st_size
        print(f"drafter-sized file: {size / 2**30:.2f} GiB, {file}")
        drop_caches()
        ours_t, ours_m = measure([sys.executable, "-m", "cockpit", "drafter", "fix-keys", str(draft), "--yes"])
        measure([sys.executable, "-m", "cockpit", "drafter", "fix-keys", str(draft), "--rule", "midlayer.=layers.0.", "--yes"])
        drop_caches()
        inner = subprocess.run([sys.executable, "-c", INNER, str(ROOT), str(draft)], capture_output=True, text=True, check=True)
        header_t, header_m = (float(v) for v in inner.stdout.split()[-2:])
        drop_caches()
        naive_t, naive_m = measure([sys.executable, "-c", NAIVE, str(file)])
        drop_caches()
        cp_t, cp_m = measure(["cp", str(file), str(file) + ".copy"])
    print(f"\n{'way':<34} {'seconds':>9} {'peak RSS MiB':>13} {'vs fix-keys':>12}")
    print(f"{'fix-keys (CLI, process start incl.)':<34} {ours_t:>9.3f} {ours_m:>13.1f} {'1x':>12}")
    print(f"{'fix-keys (the rewrite, in-process)':<34} {header_t:>9.4f} {header_m:>13.1f} {'-':>12}")
    print(f"{'safetensors load + save (naive)':<34} {naive_t:>9.3f} {naive_m:>13.1f} {naive_t / header_t:>11.0f}x")
    print(f"{'cp of the file':<34} {cp_t:>9.3f} {cp_m:>13.1f} {cp_t / header_t:>11.0f}x")
    print(f"\nfile {size / 2**30:.2f} GiB; target: >= 1000x faster than load-and-save (the rewrite itself), memory < 64 MB")


if __name__ == "__main__":
    main()
