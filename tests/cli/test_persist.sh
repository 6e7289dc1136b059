#!/usr/bin/env bash
# Conversations that persist (issue 53, docs/snapshot-format.md):
#  1. `sample --prompt-cache FILE`: the first run prefills the whole prompt and writes FILE; a second run whose prompt
#     extends the first prefills only the new suffix (the JSON report's reused / prefilled) and prints exactly what a
#     run without the cache prints (greedy), unbounded and with a StreamingLLM int4 window; the same prompt again
#     prefills nothing; a prompt that diverges early is read whole; another cache policy is said in one line and
#     the file replaced; no temporary file is left;
#  2. `chat --session FILE`: a conversation of three turns split over three processes (one turn each, resumed from
#     FILE) prints exactly what one process prints, and each resumed turn feeds only its new tokens; --system with
#     an existing FILE is refused; a damaged FILE is refused with one line, exit 1.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
M=tests/data/fixtures/smollm2
S=(--temperature 0 --tokens 8 --threads 1 --no-echo --json)
P1="The history of the city begins with a small village by the river, where"
P2="$P1 fishermen and traders met every morning to sell what they had"

# the field of the JSON report (stderr) in file $1: prompt_cache.reused / .prefilled
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_cache"][sys.argv[2]])' "$1" "$2"; }

for policy in "" "--kv-quantize int4 --streaming-llm-window 16"; do
    # shellcheck disable=SC2206
    X=($policy)
    pc="$tmp/p.cache"
    rm -f "$pc"
    "$T" sample "$M" "${S[@]}" "${X[@]}" --prompt "$P1" --prompt-cache "$pc" >"$tmp/a.out" 2>"$tmp/a.json" ||
        bad "prompt-cache [$policy]: first run exit $?: $(tail -1 "$tmp/a.json")"
    [ -s "$pc" ] && ok || bad "prompt-cache [$policy]: no file written"
    [ "$(field "$tmp/a.json" reused)" = 0 ] && ok || bad "prompt-cache [$policy]: first run reused something"
    n1=$(field "$tmp/a.json" prefilled)
    "$T" sample "$M" "${S[@]}" "${X[@]}" --prompt "$P2" --prompt-cache "$pc" >"$tmp/b.out" 2>"$tmp/b.json" ||
        bad "prompt-cache [$policy]: second run exit $?: $(tail -1 "$tmp/b.json")"
    "$T" sample "$M" "${S[@]}" "${X[@]}" --prompt "$P2" >"$tmp/ref.out" 2>"$tmp/ref.json"
    reused=$(field "$tmp/b.json" reused)
    prefilled=$(field "$tmp/b.json" prefilled)
    n2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt"]["tokens"])' "$tmp/ref.json")
    [ "$reused" = "$n1" ] && [ $((reused + prefilled)) = "$n2" ] && [ "$prefilled" -lt "$n2" ] && ok ||
        bad "prompt-cache [$policy]: second run reused $reused (expected $n1) and prefilled $prefilled of $n2"
    cmp -s "$tmp/b.out" "$tmp/ref.out" && ok || bad "prompt-cache [$policy]: the text differs from a run without it"
    # the same prompt again: nothing prefilled, the same text
    "$T" sample "$M" "${S[@]}" "${X[@]}" --prompt "$P2" --prompt-cache "$pc" >"$tmp/c.out" 2>"$tmp/c.json"
    [ "$(field "$tmp/c.json" prefilled)" = 0 ] && ok || bad "prompt-cache [$policy]: the same prompt was prefilled"
    cmp -s "$tmp/c.out" "$tmp/ref.out" && ok || bad "prompt-cache [$policy]: the same prompt gave another text"
    # a prompt that diverges early: read whole
    "$T" sample "$M" "${S[@]}" "${X[@]}" --prompt "A different start" --prompt-cache "$pc" >/dev/null 2>"$tmp/d.json"
    [ "$(field "$tmp/d.json" reused)" = 0 ] && ok || bad "prompt-cache [$policy]: a divergent prompt reused tokens"
done
# another cache policy: one line, the prompt read whole, the file replaced (the next run with that policy reuses it)
"$T" sample "$M" "${S[@]}" --kv-quantize int8 --prompt "$P1" --prompt-cache "$pc" >/dev/null 2>"$tmp/e.json" ||
    bad "prompt-cache: another policy failed the run"
grep -q "^tinygpt: --prompt-cache $pc: the snapshot was made under another KV cache policy" "$tmp/e.json" && ok ||
    bad "prompt-cache: another policy not said: $(head -1 "$tmp/e.json")"
"$T" sample "$M" "${S[@]}" --kv-quantize int8 --prompt "$P2" --prompt-cache "$pc" >/dev/null 2>"$tmp/f.json"
[ "$(field "$tmp/f.json" reused)" -gt 0 ] && ok || bad "prompt-cache: the replaced file was not reused"
[ "$(find "$tmp" -name '*.tmp.*' | wc -l)" = 0 ] && ok || bad "prompt-cache: a temporary file was left"

# ---- 2. chat --session -------------------------------------------------------------------------------------------
C=(--chat-template chatml --temperature 0 --tokens 10 --threads 1)
printf 'Hello there!\nWhat is the capital of France?\nThank you.\n' >"$tmp/turns"
"$T" chat "$M" "${C[@]}" --system "You are terse." <"$tmp/turns" >"$tmp/one.out" 2>"$tmp/one.err" ||
    bad "chat: exit $?: $(tail -1 "$tmp/one.err")"
sf="$tmp/chat.session"
: >"$tmp/split.out"
for k in 1 2 3; do
    sys=()
    [ "$k" = 1 ] && sys=(--system "You are terse.")
    sed -n "${k}p" "$tmp/turns" | "$T" chat "$M" "${C[@]}" "${sys[@]}" --session "$sf" >>"$tmp/split.out" \
        2>"$tmp/split$k.err" || bad "chat --session: turn $k exit $?: $(tail -1 "$tmp/split$k.err")"
done
cmp -s "$tmp/one.out" "$tmp/split.out" && ok ||
    bad "chat --session: three resumed processes print other replies than one process"
grep -q "resumed after turn 2" "$tmp/split3.err" && ok || bad "chat --session: turn 3 not resumed"
# the resumed turn feeds only its new tokens: what one process fed for turn 3
t3=$(grep '^turn 3: prompt' "$tmp/one.err" | sed 's/ in .*//')
grep -q "^$t3 in" "$tmp/split3.err" && ok || bad "chat --session: turn 3 fed another count: $(grep '^turn' "$tmp/split3.err")"
echo hi | "$T" chat "$M" "${C[@]}" --system "x" --session "$sf" >/dev/null 2>"$tmp/g.err"
[ $? = 2 ] && grep -q "only start a new conversation" "$tmp/g.err" && ok || bad "chat --session: --system not refused"
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=1; open(p,"wb").write(b)' "$sf"
echo hi | "$T" chat "$M" "${C[@]}" --session "$sf" >/dev/null 2>"$tmp/h.err"
[ $? = 1 ] && [ "$(wc -l <"$tmp/h.err")" = 1 ] && grep -q "checksum does not match" "$tmp/h.err" && ok ||
    bad "chat --session: a damaged file not refused in one line: $(cat "$tmp/h.err")"

echo "test_persist: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
