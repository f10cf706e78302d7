#!/bin/sh
# The non-x86 build: cross-compiles everything for aarch64 (the portable scalar kernels
# only, warnings are errors) and runs the test binaries under qemu-aarch64, then checks
# that the default model tells the same story there as the native build does (the
# scalar kernels give the SIMD kernels' bits). test_inference is left out: under
# emulation it takes four minutes; `LLAMBDA_ISA=scalar` runs it natively.
#
#   sh tests/cross-aarch64.sh [NATIVE_BUILD] [CROSS_BUILD]
#
# Needs gcc-aarch64-linux-gnu, qemu-user and the arm64 -dev packages (.ci/run installs
# them). Prints each result and a closing "N passed, N failed" line.
NATIVE=${1:-build}
BUILD=${2:-build-aarch64}
CROSS_CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
passed=0; failed=0
mkdir -p "$BUILD"
if ! make -j2 ARCH=aarch64 CC="$CROSS_CC" BUILD="$BUILD" >"$BUILD/make.log" 2>&1; then
    grep -E 'error|Error' "$BUILD/make.log" | head -20
    echo "FAIL the aarch64 build"
    echo "0 passed, 1 failed"
    exit 1
fi
passed=1
echo "PASS the aarch64 build (-Wall -Wextra -Werror, scalar kernels)"
for t in kernels quant gguf tokenizer backends concurrency fixture_logits sampling; do
    out=$("$QEMU" "$BUILD/tests/test_$t" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    if [ -z "$line" ] || [ "$rc" -ne 0 ]; then
        printf '%s\n' "$out" | grep -E '^FAIL' | head -20
        echo "FAIL test_$t on aarch64 (exit $rc, ${line:-no summary})"
        passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + 1))
        continue
    fi
    echo "PASS test_$t on aarch64: $line"
    passed=$((passed + p)); failed=$((failed + f))
done
# the same seed, the same story: the default model through the scalar kernels on aarch64
# and through this machine's widest SIMD kernels
want=$("$NATIVE/llambda" run -n 48 --seed 7 2>/dev/null)
got=$("$QEMU" "$BUILD/llambda" run -n 48 --seed 7 2>/dev/null)
if [ -n "$want" ] && [ "$want" = "$got" ]; then
    echo "PASS llambda run on aarch64 tells the native build's story token for token"
    passed=$((passed + 1))
else
    echo "FAIL llambda run on aarch64: '$got' vs native '$want'"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
