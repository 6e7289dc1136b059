#!/usr/bin/env bash
# check_identical.sh BEFORE AFTER [MODELS_DIR] — runs two tinygpt binaries over the same cases and diffs what they
# print on stdout (the numbers and the text; stderr's banner may change and is not compared, timing lines are cut):
#   - `perplexity` on models/data/valid.txt (first 300 tokens) for every KV precision x {unbounded,
#     sink 4 + window 64, sink 4 + window 64 + --streaming-llm-reposition}, on both bundled models, plus KIVI
#     variants (group 0 = whole history, fp16 residual, quantised sinks, a byte budget, chunk 1);
#   - greedy `sample` (64 tokens) on both bundled models under the same policies;
#   - `info --cache-table` (the cache's closed-form byte counts) of both models;
#   - `bench --json` (a pp64 and tg16 at depths 0 and 128, every precision, unbounded and window 64) without the keys
#     that hold wall-clock figures, memory sizes of the process or the kernels' instruction set: the token counts,
#     depths and the bytes each token reads.
# Prints one line per case (same / DIFFERENT) and a summary; exit status 1 when anything differs.
set -u
if [ $# -lt 2 ]; then echo "usage: $0 BEFORE AFTER [MODELS_DIR]" >&2; exit 2; fi
before=$1 after=$2
models=${3:-$(cd "$(dirname "$0")/.." && pwd)/models}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
text=$models/data/valid.txt
n_same=0 n_diff=0

# stdout of one run without the lines that hold wall-clock figures
run_case() { # BIN ARGS... -> stdout
    local bin=$1; shift
    if [ "$1" = bench ]; then # its JSON, less the keys whose values are measured, not computed
        "$bin" "$@" 2>/dev/null | python3 -c '
import json, sys
drop = {"seconds", "cpu_seconds", "tokens_per_s", "peak_rss_bytes", "read_bandwidth_bytes_per_s", "kernel_isa"}
def strip(o):
    if isinstance(o, dict): return {k: strip(v) for k, v in o.items() if k not in drop}
    if isinstance(o, list): return [strip(v) for v in o]
    return o
print(json.dumps(strip(json.load(sys.stdin)), indent=1, sort_keys=True))'
        echo "exit ${PIPESTATUS[0]}"
        return
    fi
    "$bin" "$@" 2>/dev/null | grep -v -e '^tokens_per_s' -e '^seconds' -e '^tokens/s'
    echo "exit ${PIPESTATUS[0]}"
}

check() { # NAME ARGS...
    local name=$1; shift
    run_case "$before" "$@" >"$tmp/a"
    run_case "$after" "$@" >"$tmp/b"
    if cmp -s "$tmp/a" "$tmp/b"; then
        n_same=$((n_same + 1)); printf 'same       %s\n' "$name"
    else
        n_diff=$((n_diff + 1)); printf 'DIFFERENT  %s\n' "$name"; diff "$tmp/a" "$tmp/b" | head -10
    fi
}

policies=("unbounded|" "sink4+window64|--streaming-llm-sink 4 --streaming-llm-window 64"
          "sink4+window64+reposition|--streaming-llm-sink 4 --streaming-llm-window 64 --streaming-llm-reposition")
for m in tinygpt-flagship tinygpt-yoco; do
    model=$models/$m.gguf
    for p in fp32 fp16 bf16 int8 int4 int2; do
        for pol in "${policies[@]}"; do
            # shellcheck disable=SC2086
            check "perplexity $m $p ${pol%%|*}" perplexity "$model" "$text" --max-tokens 300 --threads 1 --quiet \
                --kv-quantize "$p" ${pol#*|}
        done
    done
    for extra in "--kv-quantize int4 --kv-group-size 0" "--kv-quantize int2 --kv-group-size 0 --streaming-llm-window 64" \
                 "--kv-quantize int4 --kv-residual-precision fp16" \
                 "--kv-quantize int8 --kv-group-size 16 --kv-residual 32 --streaming-llm-window 48 --kv-quantize-sinks" \
                 "--kv-quantize-keys int4 --kv-quantize-values fp16 --streaming-llm-window 64" \
                 "--kv-quantize int4 --kv-budget 256K" "--kv-quantize int4 --streaming-llm-window 64 --chunk 1" \
                 "--kv-quantize int4 --streaming-llm-window 64 --threads 2"; do
        # shellcheck disable=SC2086
        check "perplexity $m $extra" perplexity "$model" "$text" --max-tokens 300 --threads 1 --quiet $extra
    done
    for p in fp32 fp16 bf16 int8 int4 int2; do
        for pol in "${policies[@]}"; do
            # shellcheck disable=SC2086
            check "sample $m $p ${pol%%|*}" sample "$model" --prompt "Once upon a time" --temperature 0 --tokens 64 \
                --ignore-eos --threads 1 --kv-quantize "$p" ${pol#*|}
        done
    done
    check "info --cache-table $m" info "$model" --cache-table
    for p in fp32 fp16 bf16 int8 int4 int2; do
        for pol in "unbounded|" "window64|--streaming-llm-window 64"; do
            # shellcheck disable=SC2086
            check "bench --json $m $p ${pol%%|*}" bench "$model" --json --prompt-tokens 64 --tokens 16 --depth 0,128 \
                --bandwidth-mib 0 --threads 1 --kv-quantize "$p" ${pol#*|}
        done
    done
done
echo "identical: $n_same same, $n_diff different"
[ "$n_diff" -eq 0 ]
