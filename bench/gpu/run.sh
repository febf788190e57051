#!/usr/bin/env bash
# On the lent GPU machine (NVIDIA driver, PyTorch; no Node), after bench/gpu/prepare.sh here:
#   run(command="bash bench/gpu/run.sh", carry=[".gpu"], timeout_s=590)
# Tokens/s at batch 1 and 8 and ms per forward at 0 / 1k / 4k context: the bundled model and a
# mid-size random checkpoint on the WebGPU provider (Vulkan) and the CPU provider, and the
# checkpoint in PyTorch on CUDA. Results: $OUT/results.jsonl, the table last in the output.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=$PWD/.gpu
W=/tmp/tessera-gpu
OUT=${OUT:-/tmp/tessera-gpu-out}
mkdir -p "$W" "$OUT"
R=$OUT/results.jsonl
: >"$R"

for f in "$G"/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES=$icd
nvidia-smi -L
xz -dc "$G"/node-*.xz >"$W/node" && chmod +x "$W/node"
tar -C "$W" -xJf "$G/ort.tar.xz"
xz -dc "$G/provider-bench.mjs.xz" >"$W/provider-bench.mjs"
node=$W/node
"$node" --version

echo "== mid-size random checkpoint (PyTorch on the CPU, then converted)"
python3 bench/gpu/make_checkpoint.py "$W/mid" --hidden 1024 --layers 12 --intermediate 3072 2>&1 | tail -2

bench() { # model-dir provider contexts max-tokens seconds
  echo "== $1 on $2"
  BENCH_MAX_TOKENS=$4 timeout "$5" "$node" "$W/provider-bench.mjs" "$1" "$2" "$3" 2>"$OUT/stderr-$2-$(basename "$1").txt" |
    tee -a "$R" || echo "(failed or timed out: $OUT/stderr-$2-$(basename "$1").txt)"
}
bench "$PWD/models/tessera-bd-small" webgpu 0,1024,4096 128 90
bench "$PWD/models/tessera-bd-small" cpu 0,1024,4096 128 90
bench "$W/mid/model" webgpu 0,1024,4096 128 120
bench "$W/mid/model" cpu 0,1024 32 150

echo "== PyTorch CUDA, mid-size checkpoint"
python3 bench/gpu/torch_bench.py "$W/mid/ckpt" | tee -a "$R"

python3 bench/gpu/table.py "$R"
