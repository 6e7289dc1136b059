#!/usr/bin/env bash
# The Vulkan backend from the command line (`--device`), on whatever Vulkan device is there (lavapipe in CI) with the
# validation layer on (TG_VULKAN_VALIDATE=1: any message it reports fails the command):
#  1. greedy `sample --device vulkan` on the bundled model prints the CPU's text (fp32 unbounded, fp16 StreamingLLM);
#  2. `perplexity --device vulkan` is the CPU's within 0.1 %;
#  3. `--device auto` runs; a wrong device name, a device that does not exist and a cache precision the backend does
#     not take yet each fail with one message.
# Skips without a Vulkan device unless CI is set. Runs the release binary (the GPU does the work; tests/unit/
# test_vulkan.c runs the same backend under ASan+UBSan).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=$PWD/tinygpt
MODEL=models/tinygpt-flagship.gguf
export TG_VULKAN_VALIDATE=1

if ! "$T" sample "$MODEL" --device vulkan --prompt hi --tokens 1 --temperature 0 >"$tmp/probe" 2>&1; then
    if grep -qE "no Vulkan device|cannot load libvulkan|built without Vulkan" "$tmp/probe" && [ -z "${CI:-}" ]; then
        echo "skip: no Vulkan device ($(tail -1 "$tmp/probe")); CI unset"
        exit 0
    fi
    echo "FAIL: the Vulkan device does not run the bundled model: $(tail -3 "$tmp/probe")"
    exit 1
fi

PROMPT="It is a truth universally acknowledged, that"
# 1. greedy text: the same as the CPU's (its plain reference kernels: TG_ISA=scalar; test_vulkan.c's KIVI_TOL says
#    why they are the reference for a KIVI cache)
for cache in "" "--streaming-llm-window 6 --streaming-llm-sink 2 --kv-quantize fp16" "--kv-quantize int4"; do
    # shellcheck disable=SC2086
    TG_ISA=scalar "$T" sample "$MODEL" --prompt "$PROMPT" --tokens 8 --temperature 0 $cache >"$tmp/cpu.txt" 2>/dev/null
    # shellcheck disable=SC2086
    if "$T" sample "$MODEL" --prompt "$PROMPT" --tokens 8 --temperature 0 $cache --device vulkan >"$tmp/gpu.txt" \
        2>"$tmp/gpu.err" && cmp -s "$tmp/cpu.txt" "$tmp/gpu.txt"; then ok; else
        bad "sample --device vulkan $cache: $(cat "$tmp/gpu.txt") | cpu: $(cat "$tmp/cpu.txt") |" \
            "$(tail -2 "$tmp/gpu.err")"
    fi
done

# 2. perplexity within 0.1 %
"$T" perplexity "$MODEL" models/data/valid.txt --max-tokens 32 >"$tmp/ppl-cpu" 2>&1
if "$T" perplexity "$MODEL" models/data/valid.txt --max-tokens 32 --device vulkan >"$tmp/ppl-gpu" 2>&1; then
    c=$(awk '$1 == "perplexity" {print $2}' "$tmp/ppl-cpu")
    g=$(awk '$1 == "perplexity" {print $2}' "$tmp/ppl-gpu")
    if awk -v c="$c" -v g="$g" 'BEGIN { d = g / c - 1; exit !(c > 0 && d < 0.001 && d > -0.001) }'; then ok; else
        bad "perplexity on the GPU $g, on the CPU $c"
    fi
else
    bad "perplexity --device vulkan: $(tail -2 "$tmp/ppl-gpu")"
fi

# 3. auto runs; refusals are one message each
if "$T" sample "$MODEL" --prompt hi --tokens 2 --temperature 0 --device auto >/dev/null 2>&1; then ok; else
    bad "--device auto failed"
fi
refused() { # refused MESSAGE ARGS...: the command fails and its last line says MESSAGE
    local want=$1
    shift
    if "$T" "$@" >"$tmp/out" 2>&1; then bad "$* succeeded"; return; fi
    if grep -qF -- "$want" "$tmp/out"; then ok; else bad "$*: expected '$want', got: $(tail -2 "$tmp/out")"; fi
}
refused "unknown device 'gpu'" sample "$MODEL" --prompt hi --tokens 1 --device gpu
refused "device 99 does not exist" sample "$MODEL" --prompt hi --tokens 1 --device vulkan:99
# the device's stores count against --max-memory: the unbounded cache's for the whole context, allocated up front
refused "KV cache needs 6.0 MiB on device" sample "$MODEL" --prompt hi --tokens 1 --device vulkan --max-memory 1M

# 4. the report names the device and its bytes: the KIVI cache's device stores within 1 % of the host cache's bytes
"$T" sample "$MODEL" --prompt hi --tokens 2 --temperature 0 --device vulkan --kv-quantize int4 \
    --streaming-llm-window 64 --json 2>"$tmp/rep.json" >/dev/null
if python3 - "$tmp/rep.json" <<'PY'; then ok; else bad "the report's device bytes: $(head -c 600 "$tmp/rep.json")"; fi
import json, sys
rep = json.load(open(sys.argv[1]))
c = rep["cache"]
d = c["device"]
assert d["name"].startswith("vulkan:0 ("), d
assert abs(d["kv_bytes"] / c["bytes_total"] - 1) < 0.01, (d, c["bytes_total"])
assert d["weight_bytes"] > 20 << 20 and d["other_bytes"] > 0, d
PY

echo "test_vulkan.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
