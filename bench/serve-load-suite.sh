#!/usr/bin/env bash
# Every load measurement of issue 17 that docs/SERVING.md quotes, in one command, each part bounded in time:
#   flagship   bench/serve-load, bundled model (F16), fp16 caches, N = 1,4,16,64, tinygpt beside llama-server
#   tinyllama  the same on a TinyLlama-1.1B-shape Q8_0 file (made here when missing), N = 1,4,16, 32 tokens a client
#   steady     tinygpt alone on that file, N = 1 and 16, 128 tokens a client: the N = 16 / N = 1 ratio once the
#              decode dominates (at 32 tokens a client the 16 prompts' prefill is a large share of the run)
#   rss        64 sessions x 2,000 tokens, int4 + window 256, a budget of exactly 64 such caches; then the same
#              load with fp32 unbounded caches (--context 2048) under the same budget and --queue 8: queued or 503
# then tools/plot_serve_load.sh. Each part writes OUT/NAME.txt (the table), OUT/NAME.runs (every run with the load
# average) and OUT/NAME.tsv (for the plot).
#
# usage: bench/serve-load-suite.sh [flagship] [tinyllama] [steady] [rss]      (none named: all four; ~30 min on 2 cores)
# env:   TG_LLAMACPP_DIR (default bench/.peer/llama.cpp, built by bench/build-llamacpp.sh), TG_BENCH_MODELS_DIR
#        (where the TinyLlama Q8_0 file is kept, default bench/.models), OUT (default docs/serving), REPEAT (3)
set -eu
cd "$(dirname "$0")/.."
export TG_LLAMACPP_DIR=${TG_LLAMACPP_DIR:-bench/.peer/llama.cpp}
models=${TG_BENCH_MODELS_DIR:-bench/.models}
out=${OUT:-docs/serving}
repeat=${REPEAT:-3}
parts=${*:-flagship tinyllama steady rss}
for p in $parts; do
    case $p in flagship|tinyllama|steady|rss) ;; *) echo "serve-load-suite.sh: unknown part '$p' (flagship, tinyllama, steady, rss)" >&2; exit 2 ;; esac
done
mkdir -p "$out" "$models"
make -j2 tinygpt build/release/tools/gen_random_gguf >/dev/null

# run NAME TIME-LIMIT SERVE-LOAD-ARGS...: the table to NAME.txt, the runs to NAME.runs
run() {
    local name=$1 limit=$2
    shift 2
    echo "== $name: bench/serve-load $*" >&2
    timeout "$limit" bench/serve-load "$@" >"$out/$name.txt" 2> >(tee "$out/$name.runs" >&2)
    cat "$out/$name.txt"
}

for p in $parts; do
    case $p in
    flagship)
        run flagship-fp16 2400 --engines tinygpt,llama-server --clients 1,4,16,64 --tokens 128 --repeat "$repeat" \
            --tsv "$out/flagship-fp16.tsv" -- --kv-quantize fp16 ;;
    tinyllama)
        q8=$models/tinyllama-1.1b-q8_0.gguf
        [ -f "$q8" ] || build/release/tools/gen_random_gguf --shape tinyllama-1.1b --type q8_0 --out "$q8"
        run tinyllama-q8_0 3000 --engines tinygpt,llama-server --model "$q8" --clients 1,4,16 --tokens 32 \
            --repeat "$repeat" --tsv "$out/tinyllama-q8_0.tsv" -- --kv-quantize fp16 ;;
    steady)
        q8=$models/tinyllama-1.1b-q8_0.gguf
        [ -f "$q8" ] || build/release/tools/gen_random_gguf --shape tinyllama-1.1b --type q8_0 --out "$q8"
        run tinyllama-q8_0-steady 900 --engines tinygpt --model "$q8" --clients 1,16 --tokens 128 \
            --repeat "$repeat" --tsv "$out/tinyllama-q8_0-steady.tsv" -- --kv-quantize fp16 ;;
    rss)
        # 577536 bytes a session (int4 keys and values, 4 sinks + 256 window, the bundled model): 64 of them
        run rss-int4-w256 1500 --clients 64 --tokens 2000 --run-limit 1200 --tsv "$out/rss-int4-w256.tsv" -- \
            --kv-quantize int4 --streaming-llm-window 256 --kv-budget 36962304
        run rss-fp32-unbounded 1500 --clients 64 --tokens 2000 --run-limit 1200 --allow-refusals \
            --tsv "$out/rss-fp32-unbounded.tsv" -- --kv-quantize fp32 --context 2048 --kv-budget 36962304 --queue 8 ;;
    esac
done
tools/plot_serve_load.sh "$out"
