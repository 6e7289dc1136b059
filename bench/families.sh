#!/usr/bin/env bash
# bench/families.sh — every model family of issue 50 against a Llama of the same shape: tools/gen_random_gguf writes
# one random-weight GGUF per family with the same tensor shapes (default: SmolLM2-135M's, Q8_0; each family's own
# tensors: Qwen2's biases, Qwen3's and Gemma 3's q/k norms, Gemma's post-norms and soft-caps, Phi-3's fused qkv and
# gate_up, SmolLM3's no-RoPE layers), then `tinygpt bench` runs them in interleaved rounds (the order rotating each
# round) and the table gives each family's median prompt and generation speed and its ratio to Llama's.
#
# Usage: bench/families.sh [--shape S] [--type T] [--rounds R] [--threads N] [--kv P] [--tokens N] [--prompt P]
# (defaults: smollm2-135m, q8_0, 5 rounds, 1 thread, fp16 cache, 64 generated tokens after a 128-token prompt)
set -euo pipefail
cd "$(dirname "$0")/.."
shape=smollm2-135m type=q8_0 rounds=5 threads=1 kv=fp16 tokens=64 prompt=128
while [ $# -gt 0 ]; do
    case $1 in
    --shape) shape=$2 ;; --type) type=$2 ;; --rounds) rounds=$2 ;; --threads) threads=$2 ;; --kv) kv=$2 ;;
    --tokens) tokens=$2 ;; --prompt) prompt=$2 ;;
    *) echo "usage: bench/families.sh [--shape S] [--type T] [--rounds R] [--threads N] [--kv P] [--tokens N] [--prompt P]" >&2; exit 2 ;;
    esac
    shift 2
done
make -j2 tinygpt build/release/tools/gen_random_gguf >/dev/null
dir=build/bench-families
mkdir -p "$dir"
archs=(llama qwen2 qwen3 gemma2 gemma3 phi3 smollm3)
for a in "${archs[@]}"; do
    f=$dir/$shape-$type-$a.gguf
    [ -f "$f" ] || build/release/tools/gen_random_gguf --shape "$shape" --type "$type" --arch "$a" --out "$f" >/dev/null
done
out=$dir/results.jsonl
: >"$out"
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#archs[@]}; i++)); do
        a=${archs[$(((i + r) % ${#archs[@]}))]}
        ./tinygpt bench "$dir/$shape-$type-$a.gguf" --json --prompt-tokens "$prompt" --tokens "$tokens" \
            --bandwidth-mib 0 --threads "$threads" --kv-quantize "$kv" 2>/dev/null |
            python3 -c 'import json,sys; d=json.load(sys.stdin); d["arch"]=sys.argv[1]; print(json.dumps(d))' "$a" >>"$out"
    done
done
python3 - "$out" "$shape" "$type" "$kv" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
order, by = [], {}
for d in rows:
    if d["arch"] not in by:
        order.append(d["arch"])
    for t in d["results"]:
        by.setdefault(d["arch"], {}).setdefault(t["test"][:2], []).append(t["tokens_per_s"])
    by[d["arch"]]["isa"] = d["kernel_isa"]
    by[d["arch"]]["params"] = d["n_params"]
base = {k: statistics.median(by["llama"][k]) for k in ("pp", "tg")}
print(f"shape {sys.argv[2]}, {sys.argv[3]} weights, {sys.argv[4]} cache, {sys.argv[5]} thread(s), "
      f"{len(by['llama']['tg'])} interleaved rounds (medians), kernels {by['llama']['isa']}")
print(f"| family | parameters | prompt tok/s | vs llama | generation tok/s | vs llama |")
print(f"|---|---:|---:|---:|---:|---:|")
for a in order:
    pp, tg = statistics.median(by[a]["pp"]), statistics.median(by[a]["tg"])
    print(f"| {a} | {by[a]['params']:,} | {pp:.1f} | {pp / base['pp']:.3f} | {tg:.1f} | {tg / base['tg']:.3f} |")
PY
