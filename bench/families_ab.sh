#!/usr/bin/env bash
# bench/families_ab.sh — two tinygpt binaries side by side on the model families (issue 50): one random-weight GGUF
# per family with the same shape (tools/gen_random_gguf, default SmolLM2-135M's, Q8_0), then `bench` of each binary on
# each family in interleaved rounds; the table gives each binary's median prompt / generation speed per family and the
# median over rounds of its ratio to a Llama of the same shape measured in the same round by the same binary.
# Built for a change to one family's kernels (the GeGLU of 3bfb023): run it where the cores are idle.
#
# Usage: bench/families_ab.sh OLD_BIN NEW_BIN [--gen GEN_RANDOM_GGUF] [--rounds R] [--threads N] [--archs "a b ..."]
# (defaults: build/release/tools/gen_random_gguf, 5 rounds, 1 thread, every family; 128-token prompt, 64 generated)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/families_ab.sh OLD_BIN NEW_BIN [--gen G] [--rounds R] [--threads N] [--archs A]" >&2; exit 2; }
old=$1 new=$2
shift 2
gen=build/release/tools/gen_random_gguf rounds=5 threads=1 archs="llama qwen2 qwen3 gemma2 gemma3 phi3 smollm3"
while [ $# -gt 0 ]; do
    case $1 in
    --gen) gen=$2 ;; --rounds) rounds=$2 ;; --threads) threads=$2 ;; --archs) archs=$2 ;;
    *) echo "bench/families_ab.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
case " $archs " in *" llama "*) ;; *) archs="llama $archs" ;; esac
for a in $archs; do "$gen" --shape smollm2-135m --type q8_0 --arch "$a" --out "$dir/$a.gguf" >/dev/null; done
for ((r = 1; r <= rounds; r++)); do
    for bin in "$old" "$new"; do
        for a in $archs; do
            "$bin" bench "$dir/$a.gguf" --json --prompt-tokens 128 --tokens 64 --bandwidth-mib 0 --threads "$threads" \
                --kv-quantize fp16 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = {t["test"][:2]: t["tokens_per_s"] for t in d["results"]}
print(sys.argv[1], sys.argv[2], sys.argv[3], r["pp"], r["tg"], d["kernel_isa"])' "$r" "$bin" "$a"
        done
    done
done >"$dir/rows.txt"
python3 - "$dir/rows.txt" "$old" "$new" "$threads" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, b, a, pp, tg, isa in rows:
    by.setdefault((b, a), {})[int(r)] = (float(pp), float(tg))
archs = list(dict.fromkeys(a for _, _, a, *_ in rows))
print(f"SmolLM2-135M shape, Q8_0, fp16 cache, {sys.argv[4]} thread(s), kernels {rows[0][5]}, "
      f"{len(by[(sys.argv[2], 'llama')])} interleaved rounds (medians; ratio: to llama in the same round)")
print("| family | old prompt tok/s | old vs llama | new prompt tok/s | new vs llama | old gen tok/s | old vs llama "
      "| new gen tok/s | new vs llama |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for a in archs:
    cells = []
    for k in (0, 1):
        for b in sys.argv[2:4]:
            v, base = by[(b, a)], by[(b, "llama")]
            cells += [f"{st.median(x[k] for x in v.values()):.1f}",
                      f"{st.median(v[r][k] / base[r][k] for r in v):.3f}"]
    print(f"| {a} | " + " | ".join(cells) + " |")
PY
