#!/bin/sh
# Seeds for the fuzzer: the header region of real fixtures plus the malformed files in
# fuzz/corpus (checked in). Usage: fuzz/make_corpus.sh OUTDIR
out=$1; F=${LLAMBDA_FIXTURES:-../shared/fixtures}
mkdir -p "$out"
cp fuzz/corpus/* "$out"/ 2>/dev/null
for f in "$F"/models/tiny-llama31-Q4_K_M.gguf "$F"/models/tiny-qwen25-Q8_0.gguf "$F"/real/tinyllamas-stories-260k-f32.gguf; do
    head -c 40000 "$f" > "$out/seed_$(basename "$f")"
done
