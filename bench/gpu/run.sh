#!/usr/bin/env bash
# bench/gpu/run.sh — issue 52's rows on the GPU machine (the device tool), run from the repository root with
# .devcarry/ (bench/gpu/pack.sh) and .gl/ carried. Builds llama.cpp with CUDA (sm_90) in the background, makes the
# files (tools/gen_random_gguf: TinyLlama-1.1B shape as Q4_0 / Q8_0 / F16 / Q4_K, Llama-3.1-8B shape as Q4_0), profiles
# tinygpt's Vulkan decode and prefill (TG_VULKAN_PROFILE=1), then runs tinygpt --device vulkan and llama-bench
# (CUDA, flash attention on, f16 cache) on each file in alternating turns. Everything it prints also goes to
# $OUT/gpu_log.txt. GPU_ROUNDS (default 2) sets the turns; none starts past GPU_DEADLINE seconds (default 520: the
# device tool's 600 s limit), and the llama.cpp build is waited for until 100 s before it;
# GPU_FILES a subset of tl-q4_0 tl-q8_0 tl-f16 tl-q4_k l8b-q4_0.
# With models/tinygpt-flagship.gguf and tests/data's fixtures in the tree (the rest left out: the tree that travels
# holds 64 MiB), test_vulkan runs on the GPU first (GPU_TESTS: the test functions, each one a cmocka filter) with the
# validation layer from .gl/ (which also needs libglvnd0 and friends: the NVIDIA driver's Vulkan ICD links them).
set -u
. bench/gpu/setup.sh gpu_log.txt
if [ -n "${GPU_NO_PEER:-}" ]; then echo 1 >/tmp/lbuild.rc; else build_llamacpp llama-bench llama-batched-bench; fi
F=/tmp/files; mkdir -p $F
files=${GPU_FILES:-tl-q4_0 tl-q8_0 tl-f16 tl-q4_k l8b-q4_0}
for f in $files; do
    case $f in tl-*) shape=tinyllama-1.1b ;; l8b-*) shape=llama-3.1-8b ;; esac
    "$G" --shape $shape --type "${f#*-}" --out $F/$f.gguf >/dev/null || echo "gen $f failed"
done
echo "files made at $(($(date +%s) - t0)) s"
"$T" sample $F/tl-q8_0.gguf --device vulkan -p "Once upon a time" -n 16 --temperature 0 2>&1 | tail -14
if [ -f models/tinygpt-flagship.gguf ]; then # the GPU tests of make test (those whose files were sent: not YOCO's)
    for t in ${GPU_TESTS:-test_bundled test_kivi test_weight_types test_fixtures test_random test_refusals}; do
        echo "== test_vulkan $t on the GPU, validation layer on"
        TG_VULKAN_TESTS=$t timeout 120 "$D/test_vulkan" 2>&1 | grep -v -E "^\[ *(RUN|OK) "
    done
    "$T" sample --device vulkan -p "Once upon a time" -n 24 --temperature 0 2>&1 | tail -12
fi
for what in "--prompt-tokens 0 --tokens 128" "--prompt-tokens 512 --tokens 0"; do
    echo "== profile tl-q8_0 $what"
    TG_VULKAN_PROFILE=1 timeout 120 "$T" bench $F/tl-q8_0.gguf --device vulkan $what --kv-quantize fp16 \
        --bandwidth-mib 0 --no-warmup 2>&1 | grep -v "^$"
done
deadline=${GPU_DEADLINE:-520}
echo "== CPU, 16 threads, tl-q4_0 (for scale)"
timeout 60 "$T" bench $F/tl-q4_0.gguf --prompt-tokens 512 --tokens 64 --kv-quantize fp16 --bandwidth-mib 0 2>&1 |
    grep -E "^(pp|tg)[0-9]"
while [ ! -f /tmp/lbuild.rc ] && [ $(($(date +%s) - t0)) -lt $((deadline - 100)) ]; do sleep 5; done
echo "llama.cpp build: rc $(cat /tmp/lbuild.rc 2>/dev/null || echo unfinished) at $(($(date +%s) - t0)) s"
[ -f /tmp/lbuild.rc ] || tail -5 /tmp/lbuild.log
LB=/tmp/lcpp/build/bin/llama-bench
for r in $(seq 1 "${GPU_ROUNDS:-2}"); do
    for f in $files; do
        [ $(($(date +%s) - t0)) -lt "$deadline" ] || { echo "round $r $f: out of time"; continue; }
        echo "== round $r $f tinygpt vulkan"
        timeout 120 "$T" bench $F/$f.gguf --device vulkan --prompt-tokens 512 --tokens 128 --kv-quantize fp16 \
            --bandwidth-mib 0 2>&1 | grep -E "^(pp|tg)[0-9]"
        if [ -x $LB ]; then
            echo "== round $r $f llama.cpp cuda"
            timeout 120 $LB -m $F/$f.gguf -p 512 -n 128 -fa 1 -ngl 99 -r 3 -o md 2>&1 | grep -E "^\|"
        fi
    done
done
if [ -f $F/l8b-q4_0.gguf ] && [ $(($(date +%s) - t0)) -lt "$deadline" ]; then
    # the 8B shape at depth: a window of 4096 (bounded, so no whole-context mirror), our fp16 cache beside llama.cpp's
    echo "== l8b-q4_0 at depth: tinygpt vulkan fp16, window 4096"
    timeout 100 "$T" bench $F/l8b-q4_0.gguf --device vulkan --streaming-llm-window 4096 --prompt-tokens 0 \
        --tokens 32 --depth 0,2048 --kv-quantize fp16 --bandwidth-mib 0 --no-warmup 2>&1 | grep -E "^(tg|tinygpt)"
    for ct in f16 q4_0; do
        [ -x $LB ] || break
        echo "== l8b-q4_0 at depth: llama.cpp cuda $ct"
        timeout 60 $LB -m $F/l8b-q4_0.gguf -p 0 -n 32 -d 0,2048 -fa 1 -ngl 99 -r 2 -ctk $ct -ctv $ct -o md 2>&1 |
            grep -E "^\|"
    done
fi
echo "done at $(($(date +%s) - t0)) s"
