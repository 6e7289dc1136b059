#!/usr/bin/env bash
# The bundled model end to end (issues #3 and #4):
#  1. `tinygpt sample models/tinygpt-flagship.gguf --temperature 0` with an fp32 cache reproduces, token for token,
#     the four 64-token greedy continuations that transformers computed in fp32 (models/golden/flagship-greedy.json);
#  2. an int8 KIVI cache reproduces the fp32-cache greedy output of the same four prompts for 60 tokens;
#  3. every cache precision x {unbounded, StreamingLLM sink 4 + window 64} generates finite logits (the session
#     fails the run otherwise) and non-degenerate text: up to the context when unbounded, 300 tokens past the
#     512-token context when bounded.
# Runs the release binary (the same code is exercised under ASan+UBSan by the unit tests on small models; the
# bundled model under ASan would take minutes).
set -u
cd "$(dirname "$0")/../.." || exit 2
T=$PWD/tinygpt
MODEL=models/tinygpt-flagship.gguf
GREEDY=models/golden/flagship-greedy.json
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if [ ! -x "$T" ] || [ ! -f "$MODEL" ] || [ ! -f "$GREEDY" ]; then
    echo "skip: needs ./tinygpt, $MODEL and $GREEDY"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prompt i and its golden continuation text, from the JSON file (python3 is installed by .ci/run).
python3 - "$GREEDY" "$tmp" <<'EOF'
import json, sys
cases = json.load(open(sys.argv[1]))
for i, c in enumerate(cases):
    open(f"{sys.argv[2]}/prompt{i}", "w").write(c["prompt"])
    open(f"{sys.argv[2]}/golden{i}", "w").write(c["text"])
print(len(cases), file=open(f"{sys.argv[2]}/count", "w"))
EOF
n=$(cat "$tmp/count")
[ "$n" -eq 4 ] && ok || bad "expected 4 golden prompts, found $n"

for i in $(seq 0 $((n - 1))); do
    prompt=$(cat "$tmp/prompt$i")
    "$T" sample "$MODEL" --prompt "$prompt" --tokens 64 --temperature 0 --ignore-eos --no-echo --threads 1 \
        >"$tmp/out$i" 2>"$tmp/err$i" || bad "prompt $i: exit $?: $(tail -1 "$tmp/err$i")"
    if cmp -s "$tmp/out$i" "$tmp/golden$i"; then ok; else bad "prompt $i: fp32 greedy differs from transformers"; fi
    "$T" sample "$MODEL" --prompt "$prompt" --tokens 60 --temperature 0 --ignore-eos --no-echo --threads 1 \
        >"$tmp/fp32_$i" 2>/dev/null
    "$T" sample "$MODEL" --prompt "$prompt" --tokens 60 --temperature 0 --ignore-eos --no-echo --threads 1 \
        --kv-quantize int8 >"$tmp/int8_$i" 2>"$tmp/err$i"
    if cmp -s "$tmp/fp32_$i" "$tmp/int8_$i"; then ok; else bad "prompt $i: int8 greedy differs from fp32 in 60 tokens"; fi
done

# Non-degenerate: at least 40 distinct words among the generated text, and no word making up over a third of it.
degenerate() {
    python3 - "$1" <<'EOF'
import collections, sys
words = open(sys.argv[1], encoding="utf-8", errors="replace").read().split()
top = collections.Counter(words).most_common(1)
ok = len(set(words)) >= 40 and top and top[0][1] * 3 <= len(words)
sys.exit(0 if ok else 1)
EOF
}

for p in fp32 fp16 bf16 int8 int4 int2; do
    # unbounded: fills the 512-token context and stops with a note
    "$T" sample "$MODEL" --prompt "Once upon a time" --tokens 600 --temperature 0.8 --seed 7 --ignore-eos \
        --no-echo --threads 1 --kv-quantize "$p" >"$tmp/u.txt" 2>"$tmp/u.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "streaming-llm-window" "$tmp/u.err" && degenerate "$tmp/u.txt"; then ok
    else bad "$p unbounded: rc $rc, $(tail -1 "$tmp/u.err")"; fi
    # bounded: 300 tokens past the context
    "$T" sample "$MODEL" --prompt "Once upon a time" --tokens 812 --temperature 0.8 --seed 7 --ignore-eos \
        --no-echo --threads 1 --kv-quantize "$p" --streaming-llm-sink 4 --streaming-llm-window 64 \
        >"$tmp/b.txt" 2>"$tmp/b.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "stored .* of 816 tokens" "$tmp/b.err" && degenerate "$tmp/b.txt"; then ok
    else bad "$p sink 4 + window 64: rc $rc, $(grep cache: "$tmp/b.err" | head -1)"; fi
done

echo "test_bundled: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
