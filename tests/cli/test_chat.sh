#!/usr/bin/env bash
# `tinygpt chat` (issue 15):
#  1. a scripted three-turn conversation on the smollm2 fixture with the ChatML built-in, greedy: the replies equal
#     what `sample` generates from `chat --print-prompt` of the same conversation re-rendered from scratch (so the
#     cache kept across turns holds exactly the conversation), each turn feeds only its new tokens (the report's
#     counts add up, and no turn re-reads the history), and two runs print the same; a template that re-renders a
#     reply differently (trimmed) makes the turn re-read the conversation and say so; 40 turns through a window;
#  2. --print-prompt on the real templates of ../shared/testdata/realmeta (folders without weights) equals jinja2's
#     rendering in tests/data/chat/refs.json, byte for byte, for every conversation with the generation prompt;
#  3. a template the engine cannot render, a model without one, an unknown built-in, bad --messages: one error line.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
M=tests/data/fixtures/smollm2
C=(--chat-template chatml --temperature 0 --tokens 12 --threads 1)
S=(--temperature 0 --tokens 12 --threads 1 --no-echo)

# ---- 1. three scripted turns ------------------------------------------------------------------------------------
printf 'Hello there!\nWhat is the capital of France?\nThank you.\n' >"$tmp/turns"
"$T" chat "$M" "${C[@]}" --system "You are terse." <"$tmp/turns" >"$tmp/chat.out" 2>"$tmp/chat.err" ||
    bad "chat: exit $?: $(tail -1 "$tmp/chat.err")"
"$T" chat "$M" "${C[@]}" --system "You are terse." <"$tmp/turns" >"$tmp/chat2.out" 2>/dev/null
cmp -s "$tmp/chat.out" "$tmp/chat2.out" && ok || bad "chat: two greedy runs differ"
[ "$(grep -c '^turn [123]: prompt ' "$tmp/chat.err")" -eq 3 ] && ok || bad "chat: no report for each of 3 turns"
grep -q "re-reading" "$tmp/chat.err" && bad "chat: a turn re-read the conversation" || ok
# prompt_k + generated_k = position_k - position_{k-1}, and turns 2 and 3 feed fewer tokens than the cache holds
python3 - "$tmp/chat.err" <<'PY' && ok || bad "chat: the turns' token counts do not add up: $(grep '^turn' "$tmp/chat.err")"
import re, sys
pos = 0
for k, line in enumerate(l for l in open(sys.argv[1]) if l.startswith("turn ")):
    m = re.match(r"turn (\d+): prompt (\d+) new tokens .* generated (\d+) tokens .* position (\d+)$", line.strip())
    p, g, at = int(m[2]), int(m[3]), int(m[4])
    assert at == pos + p + g, line
    assert k == 0 or p < pos, line
    pos = at
assert k == 2
PY
# the reference: each reply from `sample` on the conversation rendered from scratch (--print-prompt)
: >"$tmp/ref.out"
for k in 1 2 3; do
    python3 - "$tmp" "$k" <<'PY'
import json, sys
d, k = sys.argv[1], int(sys.argv[2])
turns = open(f"{d}/turns").read().splitlines()
msgs = [{"role": "system", "content": "You are terse."}]
for i in range(k):
    msgs.append({"role": "user", "content": turns[i]})
    if i < k - 1:
        msgs.append({"role": "assistant", "content": open(f"{d}/reply{i + 1}", encoding="utf-8").read()})
json.dump(msgs, open(f"{d}/m.json", "w"), ensure_ascii=False)
PY
    "$T" chat "$M" --chat-template chatml --messages "$tmp/m.json" --print-prompt </dev/null >"$tmp/prompt$k" ||
        bad "chat --print-prompt (turn $k) failed"
    "$T" sample "$M" "${S[@]}" --prompt-file "$tmp/prompt$k" >"$tmp/reply$k" 2>/dev/null || bad "sample (turn $k)"
    cat "$tmp/reply$k" >>"$tmp/ref.out"
    echo >>"$tmp/ref.out"
done
cmp -s "$tmp/chat.out" "$tmp/ref.out" && ok ||
    bad "chat: the replies differ from sample on the re-rendered conversation: $(head -c 400 "$tmp/chat.out") || $(head -c 400 "$tmp/ref.out")"
# --messages ending with a user turn is answered first; /stats reports; a reply stops at <|im_end|> or --tokens
printf '/stats\n' | "$T" chat "$M" "${C[@]}" --messages "$tmp/m.json" >"$tmp/o" 2>"$tmp/e" || bad "--messages run failed"
cmp -s <(head -c "$(stat -c %s "$tmp/reply3")" "$tmp/o") "$tmp/reply3" && ok || bad "--messages: reply differs"
grep -q '^turns 1, position ' "$tmp/e" && ok || bad "/stats printed no report: $(cat "$tmp/e")"

# a template that re-renders a reply differently (trimmed): the turn re-reads the conversation, says so, and the
# reply is still the one of the conversation rendered from scratch
mkdir "$tmp/trim"
cp "$M"/config.json "$M"/tokenizer.json "$M"/tokenizer_config.json "$M"/model.safetensors "$tmp/trim/"
printf '%s' '{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content | trim }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}' >"$tmp/trim/chat_template.jinja"
printf 'Hello there!\nWhat is the capital of France?\n' | "$T" chat "$tmp/trim" --temperature 0 --tokens 12 -t 1 \
    --system-file "$tmp/turns" >"$tmp/trim.out" 2>"$tmp/trim.err" || bad "chat (trim): exit $?: $(tail -1 "$tmp/trim.err")"
grep -q "^tinygpt chat: turn 2: .*re-reading the whole conversation" "$tmp/trim.err" && ok ||
    bad "chat (trim): no re-read on turn 2: $(grep turn "$tmp/trim.err")"
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
json.dump([{"role": "system", "content": open(f"{d}/turns").read()}, {"role": "user", "content": "Hello there!"}],
          open(f"{d}/t1.json", "w"))
PY
"$T" chat "$tmp/trim" --messages "$tmp/t1.json" --print-prompt </dev/null >"$tmp/tp1"
"$T" sample "$tmp/trim" "${S[@]}" --prompt-file "$tmp/tp1" >"$tmp/tr1" 2>/dev/null
cmp -s <(head -c "$(stat -c %s "$tmp/tr1")" "$tmp/trim.out") "$tmp/tr1" && ok ||
    bad "chat (trim): turn 1 differs from sample"
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
r1 = open(f"{d}/tr1", encoding="utf-8").read()
json.dump([{"role": "system", "content": open(f"{d}/turns").read()}, {"role": "user", "content": "Hello there!"},
           {"role": "assistant", "content": r1}, {"role": "user", "content": "What is the capital of France?"}],
          open(f"{d}/t2.json", "w"))
PY
"$T" chat "$tmp/trim" --messages "$tmp/t2.json" --print-prompt </dev/null >"$tmp/tp2"
"$T" sample "$tmp/trim" "${S[@]}" --prompt-file "$tmp/tp2" >"$tmp/tr2" 2>/dev/null
{ cat "$tmp/tr1"; echo; cat "$tmp/tr2"; echo; } | cmp -s - "$tmp/trim.out" && ok ||
    bad "chat (trim): the re-read turn differs from sample on the re-rendered conversation"

# --stop ends a reply before the stop string (never printed); the cache then holds more than the conversation's
# text, so the next turn re-reads it
printf 'Hello there!\nWhat is the capital of France?\n' | "$T" chat "$M" "${C[@]}" --system "You are terse." --stop "sure" \
    >"$tmp/o" 2>"$tmp/e" || bad "chat --stop: exit $?"
"$T" chat "$M" "${C[@]}" --system "You are terse." <<<"Hello there!" >"$tmp/plain" 2>/dev/null
python3 - "$tmp/plain" "$tmp/o" "sure" <<'PY' && ok || bad "chat --stop: turn 1 is not the plain reply cut before the stop"
import sys
plain, got, stop = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
i = plain.find(stop)
assert i > 0 and got.startswith(plain[:i] + "\n") and stop not in got
PY
[ "$(grep -c 'stopped: stop string' "$tmp/e")" -ge 1 ] && grep -q "turn 2: .*re-reading" "$tmp/e" && ok ||
    bad "chat --stop: $(grep turn "$tmp/e")"

# a long conversation through a StreamingLLM window: past the fixture's 256-token context, the cache stays bounded
for i in $(seq 40); do echo "Turn number $i, tell me more."; done >"$tmp/long_turns"
"$T" chat "$M" "${C[@]}" --tokens 8 --streaming-llm-window 48 <"$tmp/long_turns" >"$tmp/o" 2>"$tmp/e" ||
    bad "chat with a window: exit $?: $(tail -1 "$tmp/e")"
python3 - "$tmp/e" <<'PY' && ok || bad "chat with a window: $(grep -E '^(turn 40|cache: stored)' "$tmp/e" | tail -2)"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
turns = [l for l in lines if l.startswith("turn ")]
assert len(turns) == 40 and not any("re-read" in l for l in turns)
assert int(re.search(r"position (\d+)$", turns[-1])[1]) > 256 * 2
stored = [int(m[1]) for l in lines for m in [re.match(r"cache: stored (\d+) of", l)] if m]
assert stored and max(stored) <= 52, stored
PY
# without a window the same conversation ends with the context error, after the turns that fit
"$T" chat "$M" "${C[@]}" --tokens 8 <"$tmp/long_turns" >"$tmp/o" 2>"$tmp/e"
st=$?
[ "$st" -eq 1 ] && grep -q "the context holds .* more; bound the cache with --streaming-llm-window M" "$tmp/e" && ok ||
    bad "chat past the context: exit $st, $(tail -1 "$tmp/e")"

# ---- 2. --print-prompt against jinja2 on the real templates (no weights in these folders) -----------------------
python3 - "$tmp" <<'PY'
import json, os, sys
d = sys.argv[1]
refs = json.load(open("tests/data/chat/refs.json"))
n = 0
for c in refs["cases"]:
    t = c.get("template")
    if not os.path.isdir(f"../shared/testdata/realmeta/{t}") or "expected" not in c: continue
    # the CLI renders a folder's tokenizer_config.json template with the conversation's variables only
    if not refs["templates"][t]["source"].endswith("tokenizer_config.json") or "enable_thinking" in c["vars"]: continue
    v = c["vars"]
    if not v["add_generation_prompt"] or v.get("tools") or v.get("documents"): continue
    if not all(isinstance(m.get("content"), str) for m in v["messages"]): continue
    json.dump(v["messages"], open(f"{d}/case{n}.json", "w"), ensure_ascii=False)
    open(f"{d}/case{n}.model", "w").write(f"../shared/testdata/realmeta/{t}")
    open(f"{d}/case{n}.want", "w", encoding="utf-8").write(c["expected"])
    n += 1
open(f"{d}/ncases", "w").write(str(n))
PY
n=$(cat "$tmp/ncases")
if [ "$n" -ge 15 ]; then ok; else bad "expected at least 15 jinja2 cases with real templates, found $n"; fi
same=0
for i in $(seq 0 $((n - 1))); do
    "$T" chat "$(cat "$tmp/case$i.model")" --messages "$tmp/case$i.json" --print-prompt </dev/null >"$tmp/got" 2>"$tmp/e"
    if cmp -s "$tmp/got" "$tmp/case$i.want"; then same=$((same + 1)); else
        bad "--print-prompt case $i ($(cat "$tmp/case$i.model")) differs from jinja2: $(head -c 300 "$tmp/e")"; fi
done
[ "$same" -eq "$n" ] && ok
echo "chat: --print-prompt equals jinja2 in $same of $n cases"
tl=../shared/testdata/realmeta/TinyLlama-1.1B-Chat-v1.0
printf 'Hi\n' | "$T" chat "$tl" --system "Be brief." --print-prompt >"$tmp/got" 2>&1
printf '<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n' | cmp -s - "$tmp/got" && ok ||
    bad "--print-prompt with --system and a stdin line: $(cat "$tmp/got")"

# ---- 3. errors ----------------------------------------------------------------------------------------------------
check_fail() { # expected-status expected-text args...
    local want=$1 text=$2
    shift 2
    "$T" "$@" >"$tmp/o" 2>"$tmp/e" </dev/null
    local st=$?
    if [ "$st" -ne "$want" ] || ! grep -qF -- "$text" "$tmp/e" || [ "$(wc -l <"$tmp/e")" -ne 1 ] || [ -s "$tmp/o" ]; then
        bad "$* -> exit $st, stderr: $(head -c 300 "$tmp/e")"
    else ok; fi
}
mkdir "$tmp/macro"
cp "$M"/config.json "$M"/tokenizer.json "$M"/tokenizer_config.json "$tmp/macro/"
printf '{%% macro turn(m) %%}{{ m.content }}{%% endmacro %%}{%% for m in messages %%}{{ turn(m) }}{%% endfor %%}' \
    >"$tmp/macro/chat_template.jinja"
check_fail 1 "--chat-template NAME" chat "$tmp/macro" --print-prompt
check_fail 1 "unsupported Jinja feature 'macro'" chat "$tmp/macro"
# a model's template that would scan 100 GB (strip with a 100 KB set, a million times) fails with one line (the work
# limit or the render's deadline, whichever comes first)
printf '%s' "{% set s = 'a' * 100000 %}{% for i in range(1000) %}{% for j in range(1000) %}{{ s.strip('x' * 100000 ~ 'a') }}{% endfor %}{% endfor %}" \
    >"$tmp/macro/chat_template.jinja"
check_fail 1 "chat template: " chat "$tmp/macro" --print-prompt
check_fail 1 "carries no chat template; choose a built-in with --chat-template NAME" chat "$M"
check_fail 2 "--chat-template: no built-in template 'nope'" chat "$M" --chat-template nope
printf '[{"role": "user"}]' >"$tmp/bad.json"
check_fail 2 "--messages $tmp/bad.json: message 0" chat "$M" --chat-template chatml --messages "$tmp/bad.json"
printf '[{"role": ' >"$tmp/bad.json"
check_fail 2 "--messages $tmp/bad.json: bad JSON" chat "$M" --chat-template chatml --messages "$tmp/bad.json"
check_fail 1 "carries no chat template; choose a built-in" chat
check_fail 1 "no weights" chat "$tl"

echo "chat: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
