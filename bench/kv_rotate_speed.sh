#!/usr/bin/env bash
# kv_rotate_speed.sh BEFORE AFTER [ROUNDS [DEPTH [TOKENS]]] — issue #51's speed check: `tinygpt bench
# --side-by-side fp16,int8,int4,int2` at depth DEPTH (default 2048; TOKENS generated per cache, default 64, one
# thread) on the bundled model, run ROUNDS times (default 3) for each of: BEFORE, AFTER, AFTER --kv-rotate values,
# AFTER --kv-rotate on, interleaved (the order of the four rotating each round), and the median ms/token of each
# precision per variant. Separate processes compare different seconds of a shared, noisy machine: the medians of
# interleaved runs are what this can say; the side-by-side ratios within one run are steadier.
set -u
cd "$(dirname "$0")/.." || exit 2
before=$1 after=$2 rounds=${3:-3} depth=${4:-2048} tokens=${5:-64}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
variants=("before|$before|" "after|$after|" "after values|$after|--kv-rotate values" "after on|$after|--kv-rotate on")
for r in $(seq 1 "$rounds"); do
    for i in 0 1 2 3; do
        v=${variants[$(((i + r) % 4))]}
        IFS='|' read -r name bin flags <<<"$v"
        # shellcheck disable=SC2086
        "$bin" bench models/tinygpt-flagship.gguf --side-by-side fp16,int8,int4,int2 --depth "$depth" --tokens "$tokens" --threads 1 $flags 2>&1 |
            awk -v n="$name" '$1 ~ /^[0-9]+$/ && $2 ~ /^(fp16|int8|int4|int2)$/ { print n "|" $2 "|" $4 }' >>"$out/all"
    done
done
echo "| variant | fp16 ms/token | int8 | int4 | int2 |"
echo "|---|---:|---:|---:|---:|"
for v in "${variants[@]}"; do
    name=${v%%|*}
    printf '| %s |' "$name"
    for p in fp16 int8 int4 int2; do
        awk -F'|' -v n="$name" -v p="$p" '$1 == n && $2 == p { print $3 }' "$out/all" | sort -g |
            awk '{ a[NR] = $1 } END { printf " %s |", NR ? a[int((NR + 1) / 2)] : "–" }'
    done
    echo
done
