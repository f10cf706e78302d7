#!/bin/sh
# `make install` into a temporary prefix, then build the example against it with
# pkg-config (shared and static) and run both.
BUILD=${1:-build}
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
make -s BUILD="$BUILD" PREFIX="$P" install >/dev/null 2>&1 && [ -f "$P/include/llambda.h" ] && [ -f "$P/lib/libllambda.a" ] \
    && [ -f "$P/lib/libllambda.so.0" ] && [ -f "$P/lib/pkgconfig/llambda.pc" ] && ok "install: library, header, pkg-config file" || bad "install: files missing"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
${CC:-cc} $EXTRA_CFLAGS -std=c11 -Wall -Werror examples/generate.c $(pkg-config --cflags --libs llambda) -o "$P/ex_shared" 2>&1 \
    && out=$(LD_LIBRARY_PATH="$P/lib" "$P/ex_shared" "$P/share/llambda/stories260K.gguf" 2>/dev/null) \
    && echo "$out" | grep -q "Once upon a time, there was a little girl named Lily" && ok "install: example builds with pkg-config (shared) and runs" \
    || bad "install: shared example"
libs=$(pkg-config --static --libs-only-l llambda | sed 's/-lllambda//')
${CC:-cc} $EXTRA_CFLAGS -std=c11 -Wall -Werror examples/generate.c $(pkg-config --cflags llambda) "$(pkg-config --variable=libdir llambda)/libllambda.a" $libs -o "$P/ex_static" 2>&1 \
    && out=$("$P/ex_static" "$P/share/llambda/stories260K.gguf" 2>/dev/null) \
    && echo "$out" | grep -q "there was a little girl" && ok "install: example links the static library and runs" \
    || bad "install: static example"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
