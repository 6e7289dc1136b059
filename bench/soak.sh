#!/usr/bin/env bash
# soak.sh — the long-run benchmark (not in CI): generates TOKENS tokens (default 1,000,000) in one `tinygpt sample`
# run per KV precision with StreamingLLM sink 4 + window 256, sampling resident memory, speed and CPU time every
# 10,000 tokens (`--progress`), then checks the run:
#   - it completed: exit 0 and TOKENS generated (tg_session_eval fails on any non-finite logits, so a completed run
#     had none);
#   - memory is flat: max - min of the resident set after the first 10,000 tokens <= 1 MiB;
#   - speed is stable: tokens per second over the last 5 samples within 5 % of the first 5 (after the first, which
#     holds the warm-up), both by wall clock and by CPU time (with --threads 1 the CPU time per token is the work per
#     token, which other processes on a shared machine do not change).
# Writes OUTDIR/soak-<precision>.log (the tool's stderr), .tsv (tokens, tok/s, rss KiB, cached tokens, cpu s),
# OUTDIR/soak-summary.txt and, when gnuplot is installed, OUTDIR/soak-memory.png (resident memory vs tokens).
#
# usage: bench/soak.sh [MODEL] [TOKENS] [OUTDIR]
#   env: PRECISIONS (default "int4 fp16"), THREADS (default 1), PARALLEL=1 runs the precisions at the same time,
#        TINYGPT (default ./tinygpt), EVERY (default 10000), SUMMARY_ONLY=1 re-reads the logs of earlier runs
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/tinygpt-flagship.gguf}
tokens=${2:-1000000}
out=${3:-bench/soak-results}
precisions=${PRECISIONS:-int4 fp16}
threads=${THREADS:-1}
every=${EVERY:-10000}
T=${TINYGPT:-./tinygpt}
[ -x "$T" ] || { echo "soak: $T is not built (make)" >&2; exit 2; }
[ -e "$model" ] || { echo "soak: no model $model" >&2; exit 2; }
mkdir -p "$out"

run_one() {
    local p=$1
    local status=0
    "$T" sample "$model" --prompt "Once upon a time" --tokens "$tokens" --ignore-eos --seed 1 --threads "$threads" \
        --streaming-llm-sink 4 --streaming-llm-window 256 --kv-quantize "$p" --progress "$every" \
        >/dev/null 2>"$out/soak-$p.log" || status=$?
    echo "$status" >"$out/soak-$p.status"
}

echo "soak: $tokens tokens per precision ($precisions) on $model, $threads thread(s), results in $out/"
pids=()
[ "${SUMMARY_ONLY:-0}" = 1 ] && precisions_to_run= || precisions_to_run=$precisions
for p in $precisions_to_run; do
    if [ "${PARALLEL:-0}" = 1 ]; then
        run_one "$p" &
        pids+=($!)
    else
        run_one "$p"
    fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

fail=0
{
    echo "soak: $tokens generated tokens per run, $model, sink 4 + window 256, $threads thread(s), $(date -u +%F)"
    printf '%-9s %-9s %-11s %-26s %-22s %-24s %-16s %s\n' precision exit generated "rss KiB min..max (spread)" \
        "tok/s start -> end" "tok/cpu-s start -> end" "cached tokens" verdict
} >"$out/soak-summary.txt"
for p in $precisions; do
    log=$out/soak-$p.log
    num='([0-9.]+)'
    pat="^progress: $num tokens, $num tokens\/s, rss $num KiB, cache $num tokens, cpu $num s\$"
    sed -nE "s/$pat/\1\t\2\t\3\t\4\t\5/p" "$log" >"$out/soak-$p.tsv"
    # a run still going (SUMMARY_ONLY=1 while it runs) has no status yet: report what its progress lines show
    status=$(cat "$out/soak-$p.status" 2>/dev/null || echo running)
    generated=$(sed -nE 's/^generated: ([0-9]+) tokens.*/\1/p' "$log")
    [ -n "$generated" ] || generated=$(tail -1 "$out/soak-$p.tsv" | cut -f1)
    # awk: rss spread after the first sample; wall and CPU speed of the first 5 samples after the first vs the last 5
    read -r rmin rmax spread w0 w1 c0 c1 cmax < <(awk -F'\t' -v every="$every" '
        { n++; tok[n] = $1; tps[n] = $2; rss[n] = $3; cache[n] = $4; cpu[n] = $5 }
        END {
            rmin = -1; rmax = -1; cmax = 0
            for (i = 2; i <= n; i++) {
                if (rmin < 0 || rss[i] < rmin) rmin = rss[i]
                if (rss[i] > rmax) rmax = rss[i]
            }
            for (i = 1; i <= n; i++) if (cache[i] > cmax) cmax = cache[i]
            k = int((n - 1) / 2); if (k > 5) k = 5; if (k < 1) k = 1
            w0 = 0; w1 = 0
            for (i = 2; i < 2 + k; i++) w0 += tps[i] / k
            for (i = n - k + 1; i <= n; i++) w1 += tps[i] / k
            c0 = (cpu[1 + k] - cpu[1]) > 0 ? every * k / (cpu[1 + k] - cpu[1]) : 0
            c1 = (cpu[n] - cpu[n - k]) > 0 ? every * k / (cpu[n] - cpu[n - k]) : 0
            printf "%d %d %d %.1f %.1f %.1f %.1f %d\n", rmin, rmax, rmax - rmin, w0, w1, c0, c1, cmax
        }' "$out/soak-$p.tsv")
    problems=
    if [ "$status" = running ]; then
        problems="$problems still running;"
    elif [ "$status" != 0 ] || [ "${generated:-0}" != "$tokens" ]; then
        problems="$problems run failed (exit $status);"
    fi
    [ "$spread" -le 1024 ] || problems="$problems rss spread > 1 MiB;"
    wall_ok=$(awk -v a="$w0" -v b="$w1" 'BEGIN { print (a > 0 && b >= 0.95 * a && b <= 1.05 * a) ? 1 : 0 }')
    cpu_ok=$(awk -v a="$c0" -v b="$c1" 'BEGIN { print (a > 0 && b >= 0.95 * a && b <= 1.05 * a) ? 1 : 0 }')
    [ "$cpu_ok" = 1 ] || problems="$problems tokens per CPU-second moved > 5 %;"
    [ "$wall_ok" = 1 ] || problems="$problems wall-clock tok/s moved > 5 % (the machine's load?);"
    [ -z "$problems" ] || fail=1
    printf '%-9s %-9s %-11s %-26s %-22s %-24s %-16s %s\n' "$p" "$status" "${generated:-0}" "$rmin..$rmax ($spread)" \
        "$w0 -> $w1" "$c0 -> $c1" "<= $cmax" "${problems:-ok}" >>"$out/soak-summary.txt"
done
cat "$out/soak-summary.txt"

if command -v gnuplot >/dev/null; then
    plots=
    for p in $precisions; do
        plots="$plots${plots:+, }'$out/soak-$p.tsv' using (\$1/1000):(\$3/1024) with linespoints title '$p KV cache'"
    done
    gnuplot <<EOF
set terminal pngcairo size 900,480 noenhanced
set output '$out/soak-memory.png'
set title 'tinygpt soak: resident memory vs generated tokens (sink 4 + window 256)'
set xlabel 'generated tokens (thousands)'
set ylabel 'resident memory (MiB)'
set grid
set yrange [0:*]
set key bottom right
plot $plots
EOF
    echo "plot: $out/soak-memory.png"
fi
exit $fail
