#!/bin/sh
# Side-by-side benchmark: llambda and llama.cpp on the same GGUF files, the same thread
# count, in one run, alternating engines every repetition so that both see the same
# machine state.
#
#   bench/compare.sh LLAMA_CPP_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#
# Environment: THREADS (default 2), REPS (default 3), PP (default 512), TG (default 128),
# LLAMBDA (default build/llambda), BENCH_ARGS (passed to both engines, e.g. "-ngl 99"). Writes a Markdown table to stdout:
#   t/s = each engine's median over REPS rounds (a round: one repetition of llama.cpp, then
#   one of llambda); ratio = the median of the rounds' llambda t/s / llama.cpp t/s, their
#   range in parentheses; roofline = tg t/s x bytes of weights read per token
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
# median of the numbers on stdin, one a line
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# lowest-highest of the numbers on stdin
span() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }'; }
for M in "$@"; do
    best_bw
    size=$(stat -c %s "$M")
    # R rounds, each one repetition of llama.cpp then one of llambda, so that the two
    # engines of a round see the same state of the host (it changes within minutes); the
    # ratio is the median of the rounds' ratios, the t/s each engine's median
    LPP=""; LTG=""; OPP=""; OTG=""; RPP=""; RTG=""
    for _ in $(seq "$R"); do
        # llama.cpp: one JSON object per line (pp first, then tg)
        # shellcheck disable=SC2086
        L=$("$BENCH" -m "$M" -p "$PP" -n "$TG" -t "$T" -r 1 $EXTRA -o jsonl 2>/dev/null) || true
        COMMIT=$(printf '%s\n' "$L" | field build_commit | head -1)
        lpp=$(printf '%s\n' "$L" | grep "\"n_prompt\": $PP, \"n_gen\": 0" | field avg_ts)
        ltg=$(printf '%s\n' "$L" | grep "\"n_prompt\": 0, \"n_gen\": $TG" | field avg_ts)
        # llambda: its JSON array has one object per line too
        # shellcheck disable=SC2086
        O=$("$LLAMBDA" bench -m "$M" -p "$PP" -n "$TG" -t "$T" -r 1 $EXTRA -o json)
        opp=$(printf '%s\n' "$O" | grep "\"n_prompt\": $PP, \"n_gen\": 0" | field avg_ts)
        otg=$(printf '%s\n' "$O" | grep "\"n_prompt\": 0, \"n_gen\": $TG" | field avg_ts)
        if [ -z "$lpp" ] || [ -z "$ltg" ]; then echo "$0: llama-bench gave no pp$PP/tg$TG result for $M" >&2; exit 1; fi
        if [ -z "$opp" ] || [ -z "$otg" ]; then echo "$0: llambda bench gave no pp$PP/tg$TG result for $M" >&2; exit 1; fi
        LPP="$LPP$lpp
"; LTG="$LTG$ltg
"; OPP="$OPP$opp
"; OTG="$OTG$otg
"
        RPP="$RPP$(awk -v a="$opp" -v b="$lpp" 'BEGIN { print a / b }')
"; RTG="$RTG$(awk -v a="$otg" -v b="$ltg" 'BEGIN { print a / b }')
"
    done
    # llambda's generated tokens each against a read pass made just before it
    # shellcheck disable=SC2086
    O=$("$LLAMBDA" bench -m "$M" -p 0 -n "$TG" -t "$T" -r 1 $EXTRA --roofline -o json)
    isa=$(printf '%s\n' "$O" | field isa | head -1)
    act=$(printf '%s\n' "$O" | field active_bytes | head -1)
    pr=$(printf '%s\n' "$O" | field roofline_ratio | head -1)
    p25=$(printf '%s\n' "$O" | field roofline_p25 | head -1)
    p75=$(printf '%s\n' "$O" | field roofline_p75 | head -1)
    RAW="$RAW$(basename "$M") $size $(printf '%s' "$LPP" | median) $(printf '%s' "$LTG" | median) \
$(printf '%s' "$OPP" | median) $(printf '%s' "$OTG" | median) $(printf '%s' "$RPP" | median) $(printf '%s' "$RPP" | span) \
$(printf '%s' "$RTG" | median) $(printf '%s' "$RTG" | span) $act $pr $p25 $p75
"
done
best_bw
echo "CPU: $CPU; $T threads; read bandwidth $BW GB/s (llambda bench-mem, best of $(( $# + 1 )) in this run); $(date -u +%Y-%m-%d)"
ROWS=$(printf '%s' "$RAW" | while read -r name size lpp ltg opp otg rpp rpps rtg rtgs act pr p25 p75; do
    awk -v m="$name" -v s="$size" -v bw="$BW" -v lpp="$lpp" -v ltg="$ltg" -v opp="$opp" -v otg="$otg" -v rpp="$rpp" \
        -v rpps="$rpps" -v rtg="$rtg" -v rtgs="$rtgs" -v pp="$PP" -v tg="$TG" -v act="$act" -v pr="$pr" -v p25="$p25" \
        -v p75="$p75" 'BEGIN {
        roof = sprintf("%.0f%% / %.0f%% (%.0f MB/token)", 100 * otg * act / (bw * 1e9), 100 * ltg * act / (bw * 1e9), act / 1e6);
        paired = sprintf("%.0f%% (%.0f-%.0f%%)", 100 * pr, 100 * p25, 100 * p75);
        printf "| %s | %.0f MB | pp%d | %.2f | %.2f | %.2fx (%s) | | |\n", m, s / 1e6, pp, opp, lpp, rpp, rpps;
        printf "| %s | %.0f MB | tg%d | %.2f | %.2f | %.2fx (%s) | %s | %s |\n", m, s / 1e6, tg, otg, ltg, rtg, rtgs, roof, paired;
    }'
done)
echo "llama.cpp build $COMMIT; llambda kernels: ${isa:-?}"
echo
echo "| model | size | test | llambda t/s | llama.cpp t/s | ratio (rounds) | roofline llambda / llama.cpp | paired roofline llambda (quartiles) |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
printf '%s\n' "$ROWS"
