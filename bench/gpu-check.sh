#!/bin/sh
# For a machine with an NVIDIA GPU (none is needed anywhere else): build with CUDA, run the
# fixture logits tests with every layer's projections on the GPU, and benchmark against
# llama.cpp's CUDA build on the same file. Meant to finish within 8 minutes.
#
#   bench/gpu-check.sh [LLAMA_CPP_CUDA_BUILD_DIR]
#
# Environment: FIXTURES (default ../shared/fixtures), MODEL (default: a synthetic
# Llama-3.2-1B-shaped Q4_K_M file made by `llambda synth`), GPU_BW_GBS (the GPU's memory
# bandwidth in GB/s, to print the fraction token generation reaches).
set -eu
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
echo "== build with CUDA"
make -j"$(nproc)" BUILD=build-cuda CUDA=1 >/dev/null
echo "== fixture logits with every projection on the GPU"
LLAMBDA_FIXTURES=${FIXTURES:-../shared/fixtures} LLAMBDA_TEST_BACKEND=cuda ./build-cuda/tests/test_fixture_logits | grep -E '^(PASS|FAIL)|passed|on .*sessions'
MODEL=${MODEL:-/tmp/llambda-gpu-check-l1b-q4km.gguf}
[ -f "$MODEL" ] || ./build-cuda/llambda synth --preset llama-3.2-1b --type Q4_K_M -o "$MODEL" >/dev/null
echo "== projection: CPU vs CUDA"
./build-cuda/llambda bench-proj -m "$MODEL" blk.0.ffn_up.weight --backends cpu,cuda -n 1
./build-cuda/llambda bench-proj -m "$MODEL" blk.0.ffn_up.weight --backends cpu,cuda -n 64
if [ $# -ge 1 ]; then
    echo "== llambda vs llama.cpp, all layers on the GPU"
    LLAMBDA=./build-cuda/llambda BENCH_ARGS="-ngl 99" THREADS=${THREADS:-4} REPS=2 sh bench/compare.sh "$1" "$MODEL" | tee /tmp/llambda-gpu-compare.md
fi
TG=$(./build-cuda/llambda bench -m "$MODEL" -p 0 -n 64 -r 2 -ngl 99 -o json | sed -n 's/.*"n_gen": 64, "avg_ts": \([0-9.]*\).*/\1/p')
SIZE=$(stat -c %s "$MODEL")
echo "llambda tg64 with -ngl 99: $TG t/s, $(awk -v t="$TG" -v s="$SIZE" 'BEGIN { printf "%.1f", t * s / 1e9 }') GB/s of weights"
[ -n "${GPU_BW_GBS:-}" ] && awk -v t="$TG" -v s="$SIZE" -v bw="$GPU_BW_GBS" 'BEGIN { printf "fraction of the GPU memory bandwidth: %.0f%%\n", 100 * t * s / 1e9 / bw }'
