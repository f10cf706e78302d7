#!/bin/sh
# Side-by-side benchmark: llambda and llama.cpp on the same GGUF files, the same thread
# count, in one run, alternating engines per file so that both see the same machine state.
#
#   bench/compare.sh LLAMA_CPP_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#
# Environment: THREADS (default 2), REPS (default 3), PP (default 512), TG (default 128),
# LLAMBDA (default build/llambda), BENCH_ARGS (passed to both engines, e.g. "-ngl 99"). Writes a Markdown table to stdout:
#   ratio = llambda t/s / llama.cpp t/s; roofline = tg t/s x bytes of weights read per token
#   / read bandwidth (the bandwidth measured by `llambda bench-mem` in the same run; the bytes
#   per token as `llambda bench` reports them: routed experts count for the share a token
#   uses, an embedding table that is not the output head for one row); paired = llambda's
#   tokens each set against a read pass made right before it (`llambda bench --roofline`:
#   median ratio, quartiles), which the host's drift does not blur.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 LLAMA_CPP_BUILD_DIR MODEL.gguf [MODEL.gguf ...]" >&2; exit 2; }
LCPP=$1; shift
BENCH=$LCPP/bin/llama-bench
[ -x "$BENCH" ] || BENCH=$LCPP/llama-bench
[ -x "$BENCH" ] || { echo "no llama-bench in $LCPP/bin or $LCPP" >&2; exit 2; }
LLAMBDA=${LLAMBDA:-build/llambda}
T=${THREADS:-2}; R=${REPS:-3}; PP=${PP:-512}; TG=${TG:-128}; EXTRA=${BENCH_ARGS:-}

# the value of "key": in one JSON object per line
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\)\"\{0,1\}[,}].*/\1/p"; }

# read bandwidth: the best of a measurement before each file and one at the end (this
# host's bandwidth drifts by tens of percent within minutes; the best is the strict roofline)
mem() { "$LLAMBDA" bench-mem -t "$T" | sed -n 's/read bandwidth: \([0-9.]*\) GB\/s.*/\1/p'; }
BW=0
best_bw() { b=$(mem); BW=$(awk -v a="$BW" -v b="$b" 'BEGIN { print (b > a ? b : a) }'); }
COMMIT=""
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
RAW=""
for M in "$@"; do
    best_bw
    size=$(stat -c %s "$M")
    # llama.cpp: one JSON object per line (pp first, then tg)
    # shellcheck disable=SC2086
    L=$("$BENCH" -m "$M" -p "$PP" -n "$TG" -t "$T" -r "$R" $EXTRA -o jsonl 2>/dev/null)
    COMMIT=$(printf '%s\n' "$L" | field build_commit | head -1)
    lpp=$(printf '%s\n' "$L" | grep "\"n_prompt\": $PP, \"n_gen\": 0" | field avg_ts)
    ltg=$(printf '%s\n' "$L" | grep "\"n_prompt\": 0, \"n_gen\": $TG" | field avg_ts)
    # llambda: its JSON array has one object per line too
    # shellcheck disable=SC2086
    O=$("$LLAMBDA" bench -m "$M" -p "$PP" -n "$TG" -t "$T" -r "$R" $EXTRA --roofline -o json)
    opp=$(printf '%s\n' "$O" | grep "\"n_prompt\": $PP, \"n_gen\": 0" | field avg_ts)
    otg=$(printf '%s\n' "$O" | grep "\"n_prompt\": 0, \"n_gen\": $TG" | field avg_ts)
    isa=$(printf '%s\n' "$O" | field isa | head -1)
    act=$(printf '%s\n' "$O" | field active_bytes | head -1)
    pr=$(printf '%s\n' "$O" | field roofline_ratio | head -1)
    p25=$(printf '%s\n' "$O" | field roofline_p25 | head -1)
    p75=$(printf '%s\n' "$O" | field roofline_p75 | head -1)
    RAW="$RAW$(basename "$M") $size $lpp $ltg $opp $otg $act $pr $p25 $p75
"
done
best_bw
echo "CPU: $CPU; $T threads; read bandwidth $BW GB/s (llambda bench-mem, best of $(( $# + 1 )) in this run); $(date -u +%Y-%m-%d)"
ROWS=$(printf '%s' "$RAW" | while read -r name size lpp ltg opp otg act pr p25 p75; do
    awk -v m="$name" -v s="$size" -v bw="$BW" -v lpp="$lpp" -v ltg="$ltg" -v opp="$opp" -v otg="$otg" \
        -v pp="$PP" -v tg="$TG" -v isa="$isa" -v act="$act" -v pr="$pr" -v p25="$p25" -v p75="$p75" 'BEGIN {
        roof = sprintf("%.0f%% / %.0f%% (%.0f MB/token)", 100 * otg * act / (bw * 1e9), 100 * ltg * act / (bw * 1e9), act / 1e6);
        paired = sprintf("%.0f%% (%.0f-%.0f%%)", 100 * pr, 100 * p25, 100 * p75);
        printf "| %s | %.0f MB | pp%d | %.2f | %.2f | %.2fx | | |\n", m, s / 1e6, pp, opp, lpp, opp / lpp;
        printf "| %s | %.0f MB | tg%d | %.2f | %.2f | %.2fx | %s | %s |\n", m, s / 1e6, tg, otg, ltg, otg / ltg, roof, paired;
    }'
done)
echo "llama.cpp build $COMMIT; llambda kernels: ${isa:-?}"
echo
echo "| model | size | test | llambda t/s | llama.cpp t/s | ratio | roofline llambda / llama.cpp | paired roofline llambda (quartiles) |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
printf '%s\n' "$ROWS"
