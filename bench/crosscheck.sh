#!/bin/sh
# Side-by-side logits: llambda and llama.cpp on the same GGUF files, both fed the same
# tokens one at a time, each step's logits compared (per-row NMSE, argmax, byte identity).
#
#   bench/crosscheck.sh LLAMA_CPP_BUILD_DIR [MODEL.gguf ...]
#
# Without models it checks what the fixtures do not hold: the synthesized shapes of
# `llambda synth` (Nemotron-H with another layer pattern, expert groups and the dense
# variant; qwen3next with a 1:3 key/value head ratio, head sizes 48/32 and top-3 of 10
# experts) in F16 and Q4_K_M, and `llambda quantize`'s outputs of the tiny-llama31 fixture
# (which also shows that llama.cpp loads them). Environment: LLAMA_CPP_SRC (default: the
# build directory's parent, for llama.h), TOKENS (default 3,6,...,72), LLAMBDA (default
# build/llambda), FIXTURES (default ../shared/fixtures), LLAMA_NO_REPACK=1 (llama.cpp
# without its repacked weight layouts).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 LLAMA_CPP_BUILD_DIR [MODEL.gguf ...]" >&2; exit 2; }
LCPP=$(cd "$1" && pwd); shift
SRC=${LLAMA_CPP_SRC:-$LCPP/..}
LIB=$LCPP/bin
[ -d "$LIB" ] || LIB=$LCPP
LLAMBDA=${LLAMBDA:-build/llambda}
FIX=${FIXTURES:-../shared/fixtures}
TOKS=${TOKENS:-$(seq -s, 3 3 72)}
N=$(printf '%s\n' "$TOKS" | tr ',' '\n' | wc -l)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cc -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" bench/llama-cpp-logits.c \
    -L"$LIB" -lllama -lggml -lggml-base -Wl,-rpath,"$LIB" -o "$T/lcl"

check() {   # MODEL LABEL
    if ! "$T/lcl" "$1" "$TOKS" "$T/ref.f32" 2>"$T/err"; then
        echo "| $2 | llama.cpp: $(tail -1 "$T/err") |"; return
    fi
    "$LLAMBDA" eval -m "$1" --tokens "$TOKS" --logits-out "$T/our.f32" >/dev/null
    V=$(( $(wc -c < "$T/ref.f32") / 4 / N ))
    echo "| $2 | $("$T/lcl" --compare "$T/our.f32" "$T/ref.f32" "$V") |"
}

echo "llama.cpp: $LCPP; $N tokens fed one at a time, 2 threads; NMSE of llambda against llama.cpp"
echo
echo "| model | result |"
echo "|---|---|"
if [ $# -eq 0 ]; then
    for preset in tiny-nemotron-h-moe tiny-nemotron-h-moe-groups tiny-nemotron-h tiny-qwen3next; do
        for ty in F16 Q4_K_M; do
            "$LLAMBDA" synth --preset $preset --type $ty -o "$T/m.gguf" >/dev/null 2>&1
            check "$T/m.gguf" "synth $preset $ty"
        done
    done
    for ty in Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K; do
        "$LLAMBDA" quantize "$FIX/models/tiny-llama31-F32.gguf" "$T/m.gguf" $ty >/dev/null 2>&1
        check "$T/m.gguf" "tiny-llama31 quantized by llambda to $ty"
    done
fi
for M in "$@"; do check "$M" "$(basename "$M")"; done
