#!/usr/bin/env bash
# The Vulkan backend from the command line (`--device`), on whatever Vulkan device is there (lavapipe in CI) with the
# validation layer on (TG_VULKAN_VALIDATE=1: any message it reports fails the command):
#  1. greedy `sample --device vulkan` on the bundled model prints the CPU's text (fp32 unbounded, fp16 StreamingLLM);
#  2. `perplexity --device vulkan` is the CPU's within 0.1 %;
#  3. `--device auto` runs; a wrong device name, a device that does not exist and a cache precision the backend does
#     not take yet each fail with one message;
#  4. the report's device bytes;
#  5. a conversation saved by `chat --session` and resumed on the device continues as on the CPU (the restored cache
#     uploaded to the device);
#  6. `serve --device vulkan`: concurrent clients batched on the device each get what `sample --device vulkan` alone
#     gives; a conversation continued from a parked cache (uploaded to the device) answers what a fresh prefill on the
#     device answers; a request for another cache policy is a 400; an int4 server turns conversation reuse off.
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

# 5. chat --session: turn 2 resumes a saved cache (no prompt re-read) on the device; the CPU's text (TG_ISA=scalar)
for dev in cpu vulkan; do
    rm -f "$tmp/s.tgsnap"
    for turn in "Tell me a story." "And then?"; do
        echo "$turn" | TG_ISA=scalar "$T" chat "$MODEL" --chat-template chatml --session "$tmp/s.tgsnap" -n 8 \
            --temperature 0 --device $dev --kv-quantize fp16 >"$tmp/chat-$dev.txt" 2>"$tmp/chat-$dev.err" ||
            bad "chat --session --device $dev: $(tail -2 "$tmp/chat-$dev.err")"
    done
done
cmp -s "$tmp/chat-cpu.txt" "$tmp/chat-vulkan.txt" && ok ||
    bad "chat --session resumed on the device: $(cat "$tmp/chat-vulkan.txt") | cpu: $(cat "$tmp/chat-cpu.txt")"

# 6. serve --device vulkan
command -v curl >/dev/null && python3 -c 'import requests' 2>/dev/null || {
    bad "serve: curl and python3-requests are needed (.ci/run installs them)"
    echo "test_vulkan.sh: $passed passed, $failed failed"
    exit 1
}
serve_start() { # serve_start NAME ARGS...: a server on the device on a free port; sets SPID, BASE
    local name=$1
    shift
    "$T" serve "$MODEL" --port 0 --threads 1 --device vulkan --chat-template chatml "$@" >/dev/null \
        2>"$tmp/$name.err" &
    SPID=$!
    BASE=
    listening() {
        BASE=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/$name.err")
        [ -n "$BASE" ] || ! kill -0 "$SPID" 2>/dev/null
    }
    wait_for_event 120 listening
    [ -n "$BASE" ] || bad "serve --device vulkan $*: did not start: $(tail -3 "$tmp/$name.err")"
}
serve_stop() {
    kill -TERM "$SPID" 2>/dev/null
    wait "$SPID" && ok || bad "serve --device vulkan: exit $? after SIGTERM: $(tail -5 "$tmp/$1.err")"
    grep -q "validation" "$tmp/$1.err" && bad "serve $1: validation messages: $(grep -m3 validation "$tmp/$1.err")"
}
clients() { # clients ARGS...: 4 concurrent clients, each's text == sample --device vulkan ARGS alone (lavapipe's
    # products take most of a second a step whatever the rows: few steps)
    mkdir -p "$tmp/w"
    for i in $(seq 0 3); do echo "Client $i:"; done >"$tmp/prompts"
    i=0
    while IFS= read -r p; do
        "$T" sample "$MODEL" --no-echo --temperature 0 --prompt "$p" -n 4 --device vulkan "$@" >"$tmp/w/$i.txt" \
            2>/dev/null
        i=$((i + 1))
    done <"$tmp/prompts"
    python3 tests/serve/requests_client.py concurrent "$BASE" "$tmp/prompts" "$tmp/w" 4 >"$tmp/py.out" 2>&1 && ok ||
        bad "serve --device vulkan $*: $(cat "$tmp/py.out")"
}
POLICY=(--kv-quantize fp16 --streaming-llm-window 40 --streaming-llm-sink 4)
serve_start fp16 "${POLICY[@]}"
clients "${POLICY[@]}"
# a conversation past the window (4 + 40): each turn's reply with the parked cache restored (and uploaded) == with
# cache_prompt false (the two requests side by side: batched)
python3 - "$BASE" <<'PY' && ok || bad "serve --device vulkan: a continued conversation"
import concurrent.futures, sys, requests
base = sys.argv[1]
msgs, fails, reused = [], [], []
pool = concurrent.futures.ThreadPoolExecutor(2)
ask = lambda body: requests.post(base + "/v1/chat/completions", json=body, timeout=300).json()
for user in ["Once upon a time there was a king.", "What was his name?", "Where did he live?"]:
    msgs.append({"role": "user", "content": user})
    body = {"messages": msgs, "max_tokens": 8, "temperature": 0}
    a, b = pool.map(ask, [body, dict(body, cache_prompt=False)])
    ta, tb = a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]
    if ta != tb: fails.append(f"{ta!r} vs fresh {tb!r}")
    reused.append(a["usage"]["prompt_tokens_details"]["cached_tokens"])
    msgs.append({"role": "assistant", "content": ta})
if reused[0] != 0 or min(reused[1:]) <= 0: fails.append(f"cached tokens per turn: {reused}")
print("\n".join(fails) or f"continued conversation: cached tokens per turn {reused}", file=sys.stderr)
sys.exit(1 if fails else 0)
PY
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' -d '{"prompt": "x", "max_tokens": 2, "kv_quantize": "int8"}' \
    "$BASE/v1/completions")
[ "$st" = 400 ] && grep -q "on a GPU in its own cache policy" "$tmp/err.json" && ok ||
    bad "another cache policy on a device server: HTTP $st $(cat "$tmp/err.json")"
serve_stop fp16
# a KIVI server (its batching: test_vulkan.c's test_batch) says that it does not reuse conversations
serve_start int4 --kv-quantize int4
grep -q "conversation reuse is off" "$tmp/int4.err" && ok || bad "int4 on the device: $(cat "$tmp/int4.err")"
serve_stop int4

echo "test_vulkan.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
