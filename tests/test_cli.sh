#!/bin/sh
# The command line as a user runs it: exit codes, output formats, error messages.
BUILD=${1:-build}
L="$BUILD/llambda"
F=${LLAMBDA_FIXTURES:-../shared/fixtures}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "$2" ] && echo "  $2"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

# default model tells a story with no arguments at all
out=$("$L" run -n 24 --temp 0 2>"$T/err")
check "cli: 'llambda run' with no -m tells the stories260K story" \
    sh -c "echo \"\$1\" | grep -q 'Once upon a time, there was a little girl named Lily'" _ "$out"
check "cli: run prints load time and tokens/s to stderr" grep -q "tok/s" "$T/err"

# eval writes the fixture logits layout, bit-identical to llama.cpp's reference file
toks=$(sed 's/.*"tokens": \[\([^]]*\)\].*/\1/' "$F/ref/tiny-qwen25-Q4_K_M.p1.json" | tr -d ' ' | cut -d, -f1-22)
"$L" eval -m "$F/models/tiny-qwen25-Q4_K_M.gguf" --tokens "$toks" -n 16 --logits-out "$T/l.f32" > "$T/eval.json"
check "cli: eval logits are byte-identical to llama.cpp's (qwen2 Q4_K_M, 22 prompt + 16 generated rows)" \
    cmp -s "$T/l.f32" "$F/ref/tiny-qwen25-Q4_K_M.p1.logits.f32"
check "cli: eval prints n_vocab, n_prompt and tokens as JSON" grep -q '"n_vocab":1024,"n_prompt":22,"tokens":\[' "$T/eval.json"

# the same on every ISA path
for isa in scalar avx2 avx2-vnni; do
    LLAMBDA_ISA=$isa "$L" eval -m "$F/models/tiny-llama31-Q6_K.gguf" --tokens "$toks" --logits-out "$T/isa_$isa.f32" >/dev/null 2>&1
done
check "cli: scalar, avx2 and avx2-vnni kernels give byte-identical logits" \
    sh -c "cmp -s \"$T/isa_scalar.f32\" \"$T/isa_avx2.f32\" && cmp -s \"$T/isa_scalar.f32\" \"$T/isa_avx2-vnni.f32\""

# LLAMBDA_ISA: a named set where the CPU has it, else the next one down with a note; an
# unknown name is said and the default used
S="models/stories260K.gguf"
isa_of() { sed -n 's/.*"isa": "\([^"]*\)".*/\1/p' "$1" | head -1; }
"$L" bench -m "$S" -p 0 -n 1 -r 1 -o json > "$T/isa_default.json" 2>/dev/null
LLAMBDA_ISA=scalar "$L" bench -m "$S" -p 0 -n 1 -r 1 -o json > "$T/isa_s.json" 2>/dev/null
LLAMBDA_ISA=bogus "$L" bench -m "$S" -p 0 -n 1 -r 1 -o json > "$T/isa_b.json" 2> "$T/isa_b.err"
check "cli: LLAMBDA_ISA=scalar runs the scalar kernels" test "$(isa_of "$T/isa_s.json")" = scalar
check "cli: an unknown LLAMBDA_ISA is named and the default set runs" \
    sh -c 'grep -q "LLAMBDA_ISA=bogus unknown" "$1" && test "$2" = "$3"' _ "$T/isa_b.err" "$(isa_of "$T/isa_b.json")" \
    "$(isa_of "$T/isa_default.json")"
isa_ok=1
for want in avx512 avx512-base avx2-vnni avx2; do
    LLAMBDA_ISA=$want "$L" bench -m "$S" -p 0 -n 1 -r 1 -o json > "$T/isa_w.json" 2> "$T/isa_w.err"
    got=$(isa_of "$T/isa_w.json")
    if [ "$got" = "$want" ]; then grep -q lacks "$T/isa_w.err" && isa_ok=0
    else grep -q "lacks .*; using $got kernels" "$T/isa_w.err" || isa_ok=0; fi
done
check "cli: each LLAMBDA_ISA set runs where the CPU has it, else the next down with a note" test $isa_ok = 1

# tokenize with and without BOS
check "cli: tokenize adds BOS for Llama 3" sh -c "\"$L\" tokenize -m \"$F/models/tiny-llama31-F16.gguf\" -p 'Hello world' | grep -q '^1016 '"
check "cli: tokenize --no-bos" sh -c "! \"$L\" tokenize -m \"$F/models/tiny-llama31-F16.gguf\" -p 'Hello world' --no-bos | grep -q '^1016 '"

# info and tensor
"$L" info "$F/models/tiny-llama31-Q4_K_M.gguf" > "$T/info.txt"
check "cli: info lists 31 tensors with types and bits per weight" sh -c "grep -q 'total: 31 tensors' \"$T/info.txt\" && grep -q 'blk.2.ffn_down.weight *Q6_K *768 x 256' \"$T/info.txt\" && grep -q 'bits per weight' \"$T/info.txt\""
"$L" tensor "$F/models/tiny-llama31-F32.gguf" blk.0.attn_norm.weight -o "$T/t.f32"
check "cli: tensor -o writes ne0*ne1 float32 values" test "$(wc -c < "$T/t.f32")" -eq 1024
check "cli: tensor summary" sh -c "\"$L\" tensor \"$F/models/tiny-llama31-Q8_0.gguf\" output.weight | grep -q 'min .* max .* mean'"

# errors: stderr message and non-zero exit
"$L" info /nonexistent.gguf 2>"$T/e1"; rc=$?
check "cli: missing file is an error naming it" sh -c "[ $rc -ne 0 ] && grep -q 'nonexistent.gguf: cannot open' \"$T/e1\""
printf 'GGUF\003\000\000\000' > "$T/short.gguf"
"$L" info "$T/short.gguf" 2>"$T/e2"; rc=$?
check "cli: truncated GGUF is an error" sh -c "[ $rc -ne 0 ] && grep -q 'too short' \"$T/e2\""
"$L" tensor "$F/models/tiny-llama31-F32.gguf" no.such.tensor 2>"$T/e3"; rc=$?
check "cli: unknown tensor name is an error" sh -c "[ $rc -ne 0 ] && grep -q \"no tensor named 'no.such.tensor'\" \"$T/e3\""
"$L" run -m "$F/tokenizer/ggml-vocab-gpt-2.gguf" 2>"$T/e4"; rc=$?
check "cli: a vocabulary-only file is refused with the reason" sh -c "[ $rc -ne 0 ] && grep -q \"unknown architecture 'gpt2'\" \"$T/e4\""
"$L" run -p "Once upon a time there was a very long story" -c 8 2>"$T/e5" >/dev/null; rc=$?
check "cli: a prompt longer than the context is a clear error" sh -c "[ $rc -ne 0 ] && grep -q 'more than the context' \"$T/e5\""
"$L" run -n 100 -c 24 --temp 0 2>"$T/e6" >/dev/null; rc=$?
check "cli: generation past the context stops with a message" sh -c "[ $rc -eq 0 ] && grep -q 'context of 24 tokens is full' \"$T/e6\""
"$L" frobnicate 2>/dev/null; rc=$?
check "cli: unknown command exits 2" test $rc -eq 2

# models generated here, with other shapes: invariance across batch sizes and ISAs
toks40=$(seq -s, 3 3 120)
for preset in tiny tiny-qwen2 tiny-gemma4 tiny-gemma4-moe tiny-nemotron-h-moe tiny-nemotron-h-moe-groups tiny-nemotron-h tiny-qwen3next; do
    for ty in F32 Q4_K_M Q8_0; do
        "$L" synth --preset $preset --type $ty -o "$T/s.gguf" 2>/dev/null
        "$L" eval -m "$T/s.gguf" --tokens "$toks40" -n 8 --logits-out "$T/a.f32" > "$T/a.json"
        "$L" eval -m "$T/s.gguf" --tokens "$toks40" -n 8 -b 7 -t 1 --logits-out "$T/b.f32" > /dev/null
        LLAMBDA_ISA=scalar "$L" eval -m "$T/s.gguf" --tokens "$toks40" -n 8 -b 3 --logits-out "$T/c.f32" > /dev/null
        check "cli: synthesized $preset $ty: logits identical for batch 512/7/3, 2/1 threads, avx2/scalar" \
            sh -c "cmp -s \"$T/a.f32\" \"$T/b.f32\" && cmp -s \"$T/a.f32\" \"$T/c.f32\" && [ \$(wc -c < \"$T/a.f32\") -gt 100000 ]"
    done
done
# Nemotron-H shapes beyond the fixtures (pattern, expert groups, the dense variant): the
# bytes llama.cpp gives for them (tests/ref/README.md)
for preset in tiny-nemotron-h-moe tiny-nemotron-h-moe-groups tiny-nemotron-h; do
    for ty in F16 Q4_K_M; do
        "$L" synth --preset $preset --type $ty -o "$T/s.gguf" 2>/dev/null
        "$L" eval -m "$T/s.gguf" --tokens "$(seq -s, 3 3 72)" --logits-out "$T/r.f32" > /dev/null
        check "cli: synthesized $preset $ty: logits byte-identical to llama.cpp's" cmp -s "$T/r.f32" "tests/ref/$preset-$ty.llama-cpp.f32"
    done
done
# Gemma 4 with experts on a shape beyond the fixture's (16 experts, top 4, K = V on the
# global layer, head sizes 32 / 64): the bytes llama.cpp 80fb11a gives (tests/ref/README.md)
"$L" synth --preset tiny-gemma4-moe --type F16 -o "$T/s.gguf" 2>/dev/null
"$L" eval -m "$T/s.gguf" --tokens "$(seq -s, 3 3 72)" --logits-out "$T/r.f32" > /dev/null
check "cli: synthesized tiny-gemma4-moe F16: logits byte-identical to llama.cpp's" cmp -s "$T/r.f32" tests/ref/tiny-gemma4-moe-F16.llama-cpp.f32
"$L" synth --preset tiny-gemma4 --layers 4 -o "$T/s.gguf" 2>"$T/e7"; rc=$?
check "cli: synth --layers refuses to cut into a preset's shared-KV layers" sh -c "[ $rc -eq 2 ] && grep -q 'shared-KV' \"$T/e7\""
"$L" synth --preset tiny --layers 1 --type Q8_0 -o "$T/s.gguf" 2>/dev/null
check "cli: synth --layers cuts a dense preset's depth" sh -c "\"$L\" info \"$T/s.gguf\" | grep -q 'block_count .* 1\$'"
"$L" synth --preset nope -o "$T/x.gguf" 2>/dev/null; rc=$?
check "cli: synth rejects an unknown preset" test $rc -eq 2

# quantize: llama.cpp's per-tensor type choices, and the result runs
for ty in Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0; do
    "$L" quantize "$F/models/tiny-qwen25-F32.gguf" "$T/q.gguf" $ty 2>/dev/null
    a=$("$L" info "$T/q.gguf" | awk '/^  (blk|tok|out)/{print $1, $2}' | sort | md5sum)
    b=$("$L" info "$F/models/tiny-qwen25-$ty.gguf" | awk '/^  (blk|tok|out)/{print $1, $2}' | sort | md5sum)
    check "cli: quantize $ty picks llama.cpp's type for every tensor" test "$a" = "$b"
done
"$L" quantize "$F/models/tiny-llama31-F32.gguf" "$T/q8.gguf" Q8_0 2>/dev/null
"$L" tensor "$T/q8.gguf" blk.1.ffn_up.weight -o "$T/m.f32"; "$L" tensor "$F/models/tiny-llama31-Q8_0.gguf" blk.1.ffn_up.weight -o "$T/r.f32"
check "cli: quantize Q8_0 output is byte-identical to llama.cpp's" cmp -s "$T/m.f32" "$T/r.f32"
"$L" quantize "$F/models/tiny-llama31-Q8_0.gguf" "$T/qq.gguf" Q4_0 2>"$T/qe"; rc=$?
check "cli: quantize refuses an already quantized input" sh -c "[ $rc -ne 0 ] && grep -q 'must be F32, F16 or BF16' \"$T/qe\""
"$L" run -m "$T/q.gguf" -n 4 --temp 0 >/dev/null 2>&1
check "cli: a quantized model runs" test $? -eq 0

# bench prints a table and llama-bench-style JSON
"$L" bench -m "$F/models/tiny-llama31-Q4_K_M.gguf" -p 16 -n 8 -r 2 -o json > "$T/bench.json"
check "cli: bench -o json has n_prompt, n_gen, avg_ts, stddev_ts" sh -c "grep -q '\"n_prompt\": 16' \"$T/bench.json\" && grep -q '\"n_gen\": 8' \"$T/bench.json\" && grep -q avg_ts \"$T/bench.json\" && grep -q stddev_ts \"$T/bench.json\""
check "cli: bench table" sh -c "\"$L\" bench -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" -p 8 -n 4 -r 1 | grep -q '| pp8 |'"
# -d: the tests start with that many tokens in the context (rewound to for an attention
# model, evaluated again for a recurrent one), as llama-bench's -d
"$L" bench -m "$F/models/tiny-llama31-Q4_K_M.gguf" -p 8 -n 4 -d 40 -r 2 -o json > "$T/bench_d.json"
check "cli: bench -d runs at depth (JSON n_depth, table label)" sh -c "grep -q '\"n_depth\": 40' \"$T/bench_d.json\" &&
    \"$L\" bench -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" -p 8 -n 4 -d 40 -r 1 | grep -q '| tg4 @ d40 |'"
check "cli: bench -d on a recurrent model (no rewind: the depth evaluated again)" sh -c "\"$L\" bench -m \"$F/archs/qwen3next/models/tiny-qwen3next-F16.gguf\" -p 8 -n 4 -d 70 -r 2 | grep -q '| tg4 @ d70 | [0-9.]* ± [0-9.]* |'"
check "cli: bench -d refuses a negative depth" sh -c "! \"$L\" bench -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" -d -3 2>/dev/null"

check "cli: bench-proj times one projection" sh -c "\"$L\" bench-proj -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" blk.0.ffn_up.weight -r 3 | grep -q '^| cpu | [0-9.]* | [0-9.]* | [0-9.]* | 1.00x | 0 |'"
# one row per backend; an unavailable one carries its error and the others still run
"$L" bench-proj -m "$F/models/tiny-llama31-Q4_K_M.gguf" blk.0.ffn_up.weight -r 3 -n 4 --backends cpu,test,testnpu:fail=load,cuda -o json > "$T/bpj" 2>/dev/null; rc=$?
check "cli: bench-proj --backends: JSON row per backend, drift 0 for the reference backend" sh -c "[ $rc -eq 0 ] &&
  grep -q '\"backend\": \"cpu\".*\"speedup\": 1.0000, \"max_drift\": 0, \"error\": null' \"$T/bpj\" &&
  grep -q '\"backend\": \"test\", .*\"ms\": [0-9.]*, \"gflops\": [0-9.]*, \"gbps\": [0-9.]*, \"speedup\": [0-9.]*, \"max_drift\": 0, \"error\": null' \"$T/bpj\" &&
  grep -q '\"backend\": \"testnpu:fail=load\".*\"ms\": null.*\"error\": \"backend .testnpu. is not available' \"$T/bpj\" &&
  grep -q '\"backend\": \"cuda\".*\"error\": \"unknown backend .cuda.' \"$T/bpj\""
# offloaded projections give the CPU's text (the reference backend computes the same bits)
"$L" run -m "$F/models/tiny-llama31-Q8_0.gguf" -p "hello" -n 12 --temp 0 > "$T/cpu.txt" 2>/dev/null
LLAMBDA_CACHE_DIR="$T/cache" "$L" run -m "$F/models/tiny-llama31-Q8_0.gguf" -p "hello" -n 12 --temp 0 --backend test --offload-layers all > "$T/off.txt" 2>"$T/off.err"; rc=$?
check "cli: --backend test --offload-layers all gives the CPU's text" sh -c "[ $rc -eq 0 ] && cmp -s \"$T/cpu.txt\" \"$T/off.txt\" && ls \"$T/cache\" | grep -q '[0-9a-f]\{64\}.art'"
"$L" run -m "$F/models/tiny-llama31-Q8_0.gguf" -p "hello" -n 12 --temp 0 --backend test:fail=load --offload-layers 0 --offload-roles q,k > "$T/warn.txt" 2>"$T/warn.err"; rc=$?
check "cli: an unavailable backend warns once and the CPU answers" sh -c "[ $rc -eq 0 ] && cmp -s \"$T/cpu.txt\" \"$T/warn.txt\" && [ \$(grep -c 'warning: backend .test. is not available' \"$T/warn.err\") -eq 1 ]"
"$L" run -m "$F/models/tiny-llama31-Q8_0.gguf" -n 4 --backend test --offload-layers 0-999 2>"$T/range.err"; rc=$?
check "cli: a layer out of range is an error" sh -c "[ $rc -ne 0 ] && grep -q 'out of range' \"$T/range.err\""
"$L" run -m "$F/models/tiny-llama31-Q8_0.gguf" -n 4 -ngl 99 2>"$T/ngl.err"; rc=$?
check "cli: -ngl without a CUDA build says so" sh -c "[ $rc -ne 0 ] && grep -q \"unknown backend 'cuda'\" \"$T/ngl.err\""
"$L" bench -m "$F/models/tiny-llama31-Q4_K_M.gguf" -p 0 -n 6 -r 1 -t 2 --roofline -o json > "$T/bench_roof.json"
check "cli: bench --roofline pairs each token with a read pass (JSON ratio, quartiles, 6 pairs)" sh -c "grep -q '\"roofline_pairs\": 6' \"$T/bench_roof.json\" &&
    grep -q '\"roofline_ratio\": [0-9]*\.[0-9]*[1-9]' \"$T/bench_roof.json\" && grep -q '\"roofline_p25\"' \"$T/bench_roof.json\" && grep -q '\"roofline_pass_gbs\": [1-9]' \"$T/bench_roof.json\""
check "cli: bench --roofline table line" sh -c "\"$L\" bench -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" -p 0 -n 4 -r 1 -t 2 --roofline | grep -q '^roofline: 4 read passes (.*), each followed by an untimed token and a timed one: .* ratio median [0-9.]*, quartiles'"
check "cli: bench-mem with several threads" sh -c "\"$L\" bench-mem -t 3 -r 1 --size 64 | grep -q 'read bandwidth: [1-9][0-9.]* GB/s (3 threads'"
check "cli: bench-mem measures the read bandwidth, the fastest of its ways" sh -c "\"$L\" bench-mem -t 1 -r 1 --size 64 | grep -q 'read bandwidth: [0-9.]* GB/s (1 threads, 64 MiB, best of 1 passes each of [0-9] ways: [0-9]*-byte loads'"
check "cli: bench-proj --roofline sets each run against a read pass made just before it" sh -c "\"$L\" bench-proj -m \"$F/models/tiny-llama31-Q4_K_M.gguf\" blk.0.ffn_up.weight -r 5 -t 2 --roofline |
    grep -q '^roofline: 5 read passes (.*), each followed by one timed CPU run: the run.s 0.1 MB of weights at [0-9.]* GB/s against the pass.s [1-9][0-9.]* (medians); ratio median [0-9.]*, quartiles'"
"$L" bench-proj -m "$F/models/tiny-llama31-Q4_K_M.gguf" blk.0.ffn_up.weight -r 4 -t 2 --roofline --backends cpu,test -o json > "$T/bpr" 2>/dev/null; rc=$?
check "cli: bench-proj --roofline -o json: the CPU row carries the ratio, quartiles and pairs" sh -c "[ $rc -eq 0 ] &&
  grep -q '\"backend\": \"cpu\".*\"roofline_ratio\": [0-9]*\.[0-9]*[1-9].*\"roofline_p25\".*\"roofline_pass_gbs\": [1-9].*\"roofline_pairs\": 4}' \"$T/bpr\" &&
  ! grep '\"backend\": \"test\"' \"$T/bpr\" | grep -q roofline"
"$L" bench-proj -m "$F/models/tiny-llama31-Q4_K_M.gguf" blk.0.attn_norm.weight 2>"$T/bp"; rc=$?
check "cli: bench-proj refuses a vector" sh -c "[ $rc -ne 0 ] && grep -q 'not a 2-D weight' \"$T/bp\""

# chat keeps the conversation: two turns through the REPL
printf 'Hello\nTell me more\n' | "$L" chat -m "$F/models/tiny-qwen25-Q8_0.gguf" -n 8 --temp 0 > "$T/chat.txt" 2>"$T/chat.err"; rc=$?
check "cli: chat answers two turns from stdin" sh -c "[ $rc -eq 0 ] && [ \$(wc -l < \"$T/chat.txt\") -ge 2 ]"

printf 'Hello\nAnd then?\n' | "$L" chat -m "$F/archs/nemotron_h_moe/models/tiny-nemotron-h-moe-Q8_0.gguf" -n 6 --temp 0 > "$T/chat2.txt" 2>"$T/chat2.err"; rc=$?
check "cli: chat with a recurrent model (restarts instead of rewinding)" sh -c "[ $rc -eq 0 ] && [ \$(wc -l < \"$T/chat2.txt\") -ge 2 ]"
printf 'Hi\nMore\n' | "$L" chat -m "$F/archs/gemma4/models/tiny-gemma4-Q8_0.gguf" -n 6 --temp 0 > "$T/chat3.txt" 2>&1; rc=$?
check "cli: chat with gemma4 turns" test $rc -eq 0

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
