#!/usr/bin/env bash
# test_yoco.sh — the YOCO model (docs/yoco.md) through the command-line tool: `info` and the `sample` report count
# the layers that hold K/V, the report's bytes are half the standard model's under the same policy, the four greedy
# goldens of models/golden/tinygpt-yoco-greedy.json (PyTorch, fp32) come out exactly, the issue's done-means command
# (shortened to 300 tokens under the sanitizers) works, and the tiny YOCO Hugging Face folder samples. Uses $TINYGPT
# (the sanitizer build) and python3 for the JSON; absent models are skipped with a message. Exit status is non-zero
# when any check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
YOCO=models/tinygpt-yoco.gguf
STANDARD=models/tinygpt-flagship.gguf
GREEDY=models/golden/tinygpt-yoco-greedy.json
TINY=tests/data/yoco-tiny
if [ ! -x "$T" ]; then
    echo "test_yoco: $T is not built" >&2
    exit 1
fi

. tests/cli/lib.sh
run() {
    "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
# has FILE TEXT: FILE contains the fixed string TEXT
has() { grep -qF -- "$2" "$1"; }

# ---- the tiny YOCO Hugging Face folder and GGUF ----
run info "$TINY"
[ "$rc" -eq 0 ] && has "$tmp/out" "layers           4 (2 hold their own K/V)" && ok ||
    bad "info $TINY: $(cat "$tmp/out" "$tmp/err" | head -c 400)"
run info "$TINY/model-f32.gguf" --cache-table
[ "$rc" -eq 0 ] && has "$tmp/out" "KV cache bytes (2 of 4 layers hold K/V" && ok ||
    bad "info --cache-table $TINY/model-f32.gguf: $(head -c 400 "$tmp/err")"
run sample "$TINY" --prompt "Hello" --tokens 60 --streaming-llm-sink 4 --streaming-llm-window 16 --kv-quantize int2 \
    --kv-group-size 8 --kv-residual 8 --ignore-eos --seed 3 --threads 1
[ "$rc" -eq 0 ] && has "$tmp/err" "stored 22 of 62 tokens (StreamingLLM cap) · 4 layers, 2 hold K/V" && ok ||
    bad "sample $TINY with StreamingLLM + int2 (exit $rc): $(tail -c 400 "$tmp/err")"

if [ ! -f "$YOCO" ]; then
    echo "skip: $YOCO is absent"
    echo "test_yoco: $passed checks passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

# ---- info ----
run info "$YOCO" --cache-table
if [ "$rc" -eq 0 ] && has "$tmp/out" "layers           12 (6 hold their own K/V)" &&
    has "$tmp/out" "KV cache bytes (6 of 12 layers hold K/V, 4 KV heads x 32 dims" &&
    has "$tmp/out" "StreamingLLM 4+256  int4   132.00 KiB  0.34x  240.00 KiB  0.31x  282.00 KiB  0.18x"; then
    ok
else
    bad "info $YOCO --cache-table (exit $rc): $(head -c 600 "$tmp/out") $(head -c 200 "$tmp/err")"
fi

# ---- the done-means command, shortened: the report counts the layers holding K/V and the bytes, half of what the
# standard model's table gives for the same policy (tests/unit/test_yoco.c asserts the half exactly) ----
flags=(--streaming-llm-sink 4 --streaming-llm-window 256 --kv-quantize int4 --tokens 300 --seed 1 --threads 2)
run sample "$YOCO" "${flags[@]}"
if [ "$rc" -eq 0 ] && has "$tmp/err" "cache: stored 268 of 300 tokens (StreamingLLM cap) · 12 layers, 6 hold K/V" &&
    has "$tmp/err" "cache: 282.00 KiB allocated for 291 tokens" &&
    has "$tmp/err" "bf16 would be 780.00 KiB (0.36x), fp32 1.52 MiB" &&
    has "$tmp/err" "cache: in use 268 of 291 tokens = 270.00 KiB"; then
    ok
else
    bad "sample $YOCO ${flags[*]} (exit $rc): $(tail -c 600 "$tmp/err")"
fi
if [ -f "$STANDARD" ]; then
    run info "$STANDARD" --cache-table
    [ "$rc" -eq 0 ] && has "$tmp/out" "StreamingLLM 4+256  int4   264.00 KiB  0.34x  480.00 KiB  0.31x  564.00 KiB" &&
        ok || bad "info $STANDARD --cache-table (exit $rc): $(tail -c 600 "$tmp/out")"
else
    echo "skip: $STANDARD is absent"
fi

# ---- greedy goldens: 64 tokens per prompt, PyTorch fp32; leading spaces not compared (transformers decodes the
# continuation alone, the tool as a continuation of the prompt) ----
if [ -f "$GREEDY" ]; then
    n=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$GREEDY")
    for i in $(seq 0 $((n - 1))); do
        python3 -c 'import json, sys; g = json.load(open(sys.argv[1]))[int(sys.argv[2])]
open(sys.argv[3] + "/prompt", "w").write(g["prompt"]); open(sys.argv[3] + "/want", "w").write(g["text"])' \
            "$GREEDY" "$i" "$tmp"
        run sample "$YOCO" --prompt "$(cat "$tmp/prompt")" --tokens 64 --temperature 0 --ignore-eos --no-echo \
            --threads 2
        got=$(cat "$tmp/out")
        want=$(cat "$tmp/want")
        if [ "$rc" -eq 0 ] && [ "${got# }" == "${want# }" ]; then
            ok
        else
            bad "greedy text $i of $YOCO (exit $rc): got '$got', want '$want'; $(tail -c 200 "$tmp/err")"
        fi
    done
else
    echo "skip: $GREEDY is absent"
fi

echo "test_yoco: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
