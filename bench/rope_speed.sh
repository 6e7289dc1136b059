#!/usr/bin/env bash
# rope_speed.sh [TINYGPT] [ROUNDS] — decode speed of a bounded cache with re-positioned RoPE (the default) against
# the original positions (--streaming-llm-rope original), for every KV precision: `tinygpt bench` on the bundled
# model, StreamingLLM sink 4 + window 256, 256 tokens generated at depth 300, 2 threads; ROUNDS (default 5) rounds,
# the two schemes interleaved (their order alternating from round to round), medians of tokens/s printed per
# precision with the ratio. BASELINE=/path/to/an/older/tinygpt adds that binary's --streaming-llm-reposition (the
# former scheme) as a third column. THREADS (default 2) sets the threads; METRIC=cpu reports tokens per second of
# the process's CPU time instead of wall time (with THREADS=1, a measure of the work done that other processes on a
# loaded machine disturb far less than the wall clock). Timing on a shared machine is noisy: read the medians.
set -u
bin=${1:-./tinygpt}
rounds=${2:-5}
model=${MODEL:-models/tinygpt-flagship.gguf}
precisions=${PRECISIONS:-fp32 fp16 bf16 int8 int4 int2}
threads=${THREADS:-2}
metric=${METRIC:-wall}
baseline=${BASELINE:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

speed() { # BIN PRECISION EXTRA... -> tokens/s
    local b=$1 p=$2; shift 2
    "$b" bench "$model" --prompt-tokens 0 --tokens 256 --depth 300 --threads "$threads" --bandwidth-mib 0 --json \
        --streaming-llm-sink 4 --streaming-llm-window 256 --kv-quantize "$p" "$@" 2>/dev/null |
        if [ "$metric" = cpu ]; then sed -n 's/.*"tokens": \([0-9]*\), "seconds": [0-9.]*, "cpu_seconds": \([0-9.]*\).*/\1 \2/p' |
            awk '{print $1 / $2}'
        else sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p'; fi
}
median() { sort -g | awk '{a[NR] = $1} END {print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for r in $(seq 1 "$rounds"); do
    for p in $precisions; do
        if [ $((r % 2)) -eq 1 ]; then
            speed "$bin" "$p" --streaming-llm-rope original >>"$tmp/$p.original"
            speed "$bin" "$p" >>"$tmp/$p.reposition"
        else
            speed "$bin" "$p" >>"$tmp/$p.reposition"
            speed "$bin" "$p" --streaming-llm-rope original >>"$tmp/$p.original"
        fi
        [ -n "$baseline" ] && speed "$baseline" "$p" --streaming-llm-reposition >>"$tmp/$p.former"
    done
done
printf '%-6s %12s %12s %8s%s\n' precision original reposition ratio "${baseline:+   former-reposition}"
for p in $precisions; do
    o=$(median <"$tmp/$p.original") n=$(median <"$tmp/$p.reposition")
    f=${baseline:+$(median <"$tmp/$p.former")}
    printf '%-6s %12.1f %12.1f %8.3f%s\n' "$p" "$o" "$n" "$(awk -v a="$n" -v b="$o" 'BEGIN {print a / b}')" \
        "${f:+$(printf '%20.1f' "$f")}"
done
echo "($rounds rounds, medians of tokens per $metric second; tinygpt bench $model, sink 4 + window 256, tg256 at depth 300, $threads threads)"
