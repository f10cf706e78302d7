#!/bin/sh
# Runs every test binary in BUILD/tests and the CLI tests; prints each result and a
# closing "N passed, N failed" line. Exit status is non-zero if anything failed.
BUILD=${1:-build}
passed=0; failed=0
# ONNX Runtime for the onnx backend's tests: the library onnxruntime-node ships (see .ci/run)
ORT=tests/onnx/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1
if [ -z "$LLAMBDA_ORT_LIB" ] && [ -f "$ORT" ]; then LLAMBDA_ORT_LIB=$(pwd)/$ORT; export LLAMBDA_ORT_LIB; fi
run() {
    t0=$(date +%s)
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out"
    echo "($(( $(date +%s) - t0 )) s)"
    p=$(printf '%s\n' "$out" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p' | tail -1)
    if [ -z "$p" ]; then p=0; f=1; echo "FAIL $* (no summary, exit $rc)"; fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $* (exit $rc)"; fi
    passed=$((passed + p)); failed=$((failed + f))
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $t"
    run "$t"
done
echo "== tests/test_cli.sh"
run sh tests/test_cli.sh "$BUILD"
echo "== tests/test_server.sh"
run sh tests/test_server.sh "$BUILD"
echo "== tests/test_install.sh"
run sh tests/test_install.sh "$BUILD"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
