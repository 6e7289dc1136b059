#!/usr/bin/env bash
# bench/kv_speed.sh — decode speed of each KV cache precision at depth, several tinygpt binaries interleaved
# (A B A B ... per cache type and repetition), medians of wall tokens/s and of tokens per CPU second (what a shared
# machine distorts least).
#   bench/kv_speed.sh MODEL "fp16 int8 int4 int2" "2048,4096" REPS BIN... [-- extra tinygpt bench flags]
# Env: THREADS (default 1), TOKENS (default 128). Prints one row per (binary, type, depth).
set -euo pipefail
model=$1 types=$2 depths=$3 reps=$4
shift 4
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
extra=("$@")
threads=${THREADS:-1} tokens=${TOKENS:-128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < reps; r++)); do
    for t in $types; do
        for ((b = 0; b < ${#bins[@]}; b++)); do
            "${bins[$b]}" bench "$model" --prompt-tokens 0 --tokens "$tokens" --depth "$depths" --kv-quantize "$t" \
                --threads "$threads" --bandwidth-mib 0 --json "${extra[@]}" >"$tmp/$b.$t.$r.json"
        done
    done
done
python3 - "$tmp" "$types" "$reps" "${bins[@]}" <<'PY'
import json, statistics, sys
tmp, types, reps, bins = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4:]
print(f"{'binary':40s} {'kv':5s} {'depth':>6s} {'tok/s':>8s} {'tok/cpu-s':>10s}  (medians of {reps})")
for t in types:
    for b, name in enumerate(bins):
        rows = {}
        for r in range(reps):
            for x in json.load(open(f"{tmp}/{b}.{t}.{r}.json"))["results"]:
                rows.setdefault(x["depth"], []).append((x["tokens_per_s"], x["tokens"] / x["cpu_seconds"]))
        for d, v in sorted(rows.items()):
            print(f"{name[-40:]:40s} {t:5s} {d:6d} {statistics.median(a for a, _ in v):8.1f} "
                  f"{statistics.median(c for _, c in v):10.1f}")
PY
