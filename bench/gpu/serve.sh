#!/usr/bin/env bash
# bench/gpu/serve.sh — serving on the GPU machine (issues 49 and 52), run from the repository root with .devcarry/
# (bench/gpu/pack.sh) and .gl/ carried, and models/tinygpt-flagship.gguf in the tree: test_vulkan's batch and
# bundled-model tests on the GPU (validation layer on), then bench/serve-load on a TinyLlama-1.1B-shape Q4_0 file
# (tools/gen_random_gguf, made there): `tinygpt serve --device vulkan` (fp16 caches) at SERVE_CLIENTS (default
# 1,16,64) streaming clients of SERVE_TOKENS (default 128) tokens each, then llama-server built there with CUDA
# (sm_90; -ngl 99, flash attention, f16 cache, --parallel N) on the same file and clients, unless GPU_NO_PEER is set.
# With .devcarry/tinygpt_base (an earlier build), its decode and prefill beside this build's first (tg128, pp512,
# alternating, two rounds; not with GPU_NO_BENCH) and this build's decode profile, and its serving after this
# one's. Everything it prints also goes to $OUT/gpu_serve_log.txt (bench/gpu/setup.sh); the tables to
# $OUT/serve_*.txt.
set -u
. bench/gpu/setup.sh gpu_serve_log.txt
LS=/tmp/lcpp/build/bin/llama-server
[ -z "${GPU_NO_PEER:-}" ] && [ ! -x $LS ] && build_llamacpp llama-server
F=/tmp/files
mkdir -p $F
[ -f $F/tl-q4_0.gguf ] || "$G" --shape tinyllama-1.1b --type q4_0 --out $F/tl-q4_0.gguf >/dev/null || echo "gen failed"
echo "file made at $(($(date +%s) - t0)) s"
if [ -z "${GPU_NO_TESTS:-}" ]; then
    echo "== test_vulkan test_batch, test_bundled on the GPU, validation layer on"
    TG_VULKAN_TESTS="test_b*" timeout 200 "$D/test_vulkan" 2>&1 | grep -vE "^\[ RUN" | tail -14
fi
if [ -x "$D/tinygpt_base" ] && [ -z "${GPU_NO_BENCH:-}" ]; then # decode: the build before a change beside this one's
    for f in tl-q4_0 tl-q8_0; do
        [ -f $F/$f.gguf ] || "$G" --shape tinyllama-1.1b --type "${f#*-}" --out $F/$f.gguf >/dev/null
    done
    for r in 1 2; do
        for f in tl-q4_0 tl-q8_0; do
            for b in tinygpt_base tinygpt; do
                echo "== round $r $f $b: $("$D/$b" bench $F/$f.gguf --device vulkan --prompt-tokens 512 --tokens 128 \
                    --kv-quantize fp16 --bandwidth-mib 0 2>&1 | grep -E "^(pp|tg)[0-9]" | tr '\n' ' ')"
            done
        done
    done
    TG_VULKAN_PROFILE=1 "$T" bench $F/tl-q8_0.gguf --device vulkan --prompt-tokens 0 --tokens 128 --kv-quantize fp16 \
        --bandwidth-mib 0 --no-warmup 2>&1 | grep -A16 "vulkan profile"
fi
clients=${SERVE_CLIENTS:-1,16,64} tokens=${SERVE_TOKENS:-128}
echo "== tinygpt serve --device vulkan, fp16 caches (at $(($(date +%s) - t0)) s)"
timeout 240 python3 bench/serve-load --tinygpt "$T" --model $F/tl-q4_0.gguf --clients "$clients" --tokens "$tokens" \
    --threads 4 --run-limit 100 -- --device vulkan --kv-quantize fp16 2>&1 | tee "$out/serve_tinygpt.txt" | tail -12
if [ -x "$D/tinygpt_base" ]; then
    echo "== the earlier build: tinygpt_base serve --device vulkan, fp16 caches (at $(($(date +%s) - t0)) s)"
    timeout 200 python3 bench/serve-load --tinygpt "$D/tinygpt_base" --model $F/tl-q4_0.gguf --clients "$clients" \
        --tokens "$tokens" --threads 4 --run-limit 100 -- --device vulkan --kv-quantize fp16 2>&1 |
        tee "$out/serve_tinygpt_base.txt" | tail -5
fi
if [ -z "${GPU_NO_PEER:-}" ]; then
    while [ ! -f /tmp/lbuild.rc ] && [ $(($(date +%s) - t0)) -lt 470 ]; do sleep 5; done
    if [ -x $LS ]; then
        echo "== llama-server CUDA -ngl 99, f16 cache (at $(($(date +%s) - t0)) s)"
        timeout $((580 - ($(date +%s) - t0))) python3 bench/serve-load --engines llama-server --llama-server $LS --tinygpt "$T" \
            --model $F/tl-q4_0.gguf --clients "$clients" --tokens "$tokens" --threads 4 --run-limit 100 \
            --peer-args="-ngl 99" -- --kv-quantize fp16 2>&1 | tee "$out/serve_llama.txt" | tail -12
    else
        echo "llama-server not built by $(($(date +%s) - t0)) s: $(tail -3 /tmp/lbuild.log 2>/dev/null)"
    fi
fi
echo "done at $(($(date +%s) - t0)) s"
