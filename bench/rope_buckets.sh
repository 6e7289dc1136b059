#!/usr/bin/env bash
# rope_buckets.sh [TINYGPT] [MODEL] — perplexity bucket by bucket of StreamingLLM's RoPE schemes past a model's
# training context (issue 18's table): the model's own text (12 independent samples of 500 tokens, seeds 1..12,
# each generated within the context by an unbounded cache, concatenated: about 6,000 tokens) scored through one
# cache of sink 4 + window 124 with re-positioned RoPE (the default) and with the original positions
# (--streaming-llm-rope original), and through window 128 alone (sink 0), for every KV precision (PRECISIONS, default
# fp32 fp16 bf16 int8 int4 int2). Buckets by the scored token's index: 0-511, 512-1023, 1024-2047, 2048+. The
# in-context reference is bucket 0-511 of an unbounded cache (all within the 512 tokens stories260K was trained on).
# The verdict lines, per precision: the default's worst bucket (its largest increase) against that reference, and
# whether every bucket is within 10 % of it.
set -u
bin=${1:-./tinygpt}
model=${2:-../shared/testdata/models/stories260K/stories260K.gguf}
precisions=${PRECISIONS:-fp32 fp16 bf16 int8 int4 int2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for seed in $(seq 1 12); do
    "$bin" sample "$model" --prompt "Once upon a time" --tokens 500 --ignore-eos --seed "$seed" --threads 1 \
        --no-echo 2>/dev/null || { echo "rope_buckets.sh: sampling failed" >&2; exit 1; }
    echo
done >"$tmp/text.txt"

buckets() { # CSV -> "b0 b1 b2 b3" perplexities (exp of the mean NLL of the tokens whose index is in the bucket)
    awk -F, 'NR > 1 { i = $1; b = i < 512 ? 0 : i < 1024 ? 1 : i < 2048 ? 2 : 3; s[b] += $4; n[b]++ }
             END { for (b = 0; b < 4; b++) printf "%s%.2f", b ? " " : "", n[b] ? exp(s[b] / n[b]) : 0 }' "$1"
}
score() { # NAME ARGS... -> the buckets of that policy
    "$bin" perplexity "$model" "$tmp/text.txt" --threads 1 --quiet --csv "$tmp/$1.csv" "${@:2}" >/dev/null 2>&1 ||
        { echo "rope_buckets.sh: perplexity $* failed" >&2; exit 1; }
    buckets "$tmp/$1.csv"
}
echo "$(basename "$model"): $(wc -w <"$tmp/text.txt") words of the model's own samples ($bin)"
echo
echo "| KV | policy | 0-511 | 512-1023 | 1024-2047 | 2048+ |"
echo "|---|---|---:|---:|---:|---:|"
verdicts=()
for p in $precisions; do
    ref=$(score "unbounded-$p" --kv-quantize "$p" --no-context-limit)
    echo "| $p | unbounded (0-511: the in-context reference) | $(echo "$ref" | tr ' ' '|' | sed 's/|/ | /g') |"
    for pol in "sink 4 + window 124, re-positioned (default)|--streaming-llm-sink 4 --streaming-llm-window 124" \
               "sink 4 + window 124, original positions|--streaming-llm-sink 4 --streaming-llm-window 124 --streaming-llm-rope original" \
               "window 128 only (sink 0)|--streaming-llm-sink 0 --streaming-llm-window 128"; do
        # shellcheck disable=SC2086
        b=$(score "pol-$p" --kv-quantize "$p" ${pol#*|})
        echo "| $p | ${pol%%|*} | $(echo "$b" | sed 's/ / | /g') |"
        if [ "${pol%%|*}" = "sink 4 + window 124, re-positioned (default)" ]; then
            verdicts+=("$(echo "$b" | awk -v r="${ref%% *}" -v p="$p" '{ w = -1; for (i = 1; i <= 4; i++) { d = ($i - r) / r; if (d > w) w = d }
                printf "%s: worst bucket of the default %+.1f %% against the in-context %.2f: %s", p, 100 * w, r,
                       w <= 0.10 ? "within 10 %" : "NOT within 10 %" }')")
        fi
    done
done
echo
echo "scored tokens: $(($(wc -l <"$tmp/unbounded-${precisions%% *}.csv") - 1))"
printf -- '- %s\n' "${verdicts[@]}"
