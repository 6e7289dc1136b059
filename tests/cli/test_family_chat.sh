#!/usr/bin/env bash
# `tinygpt chat` on every model family of issue 50 with the chat template of the real model it stands for: each tiny
# random-weight fixture of tests/data/families/ (transformers' folder layout) beside the real template from
# ../shared/testdata/realmeta (Qwen2.5-0.5B-Instruct, Qwen3-0.6B, Gemma 2 2B it, Gemma 3 4B it, Phi-3.5-mini
# instruct, SmolLM3-3B), two user turns, greedy: the conversation runs (exit 0, a report for each turn, two runs
# print the same), and its replies equal what `sample` generates from the conversation so far rendered from scratch
# (`chat --print-prompt`), so the cache kept across turns holds exactly the conversation the template renders (or
# the turn re-reads it, as with Gemma's trimmed replies); `serve` on the same folder answers turn 1 as `sample` does. (The weights are random: the replies are not language; the templates'
# rendering itself is checked against Jinja2 in tests/cli/test_chat.sh and tests/unit/test_chat_template.c.)
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
R=../shared/testdata/realmeta
F=tests/data/families
C=(--temperature 0 --tokens 6 --threads 1 --context 1024)
S=(--temperature 0 --tokens 6 --threads 1 --context 1024 --no-echo)

# family fixture -> the real model whose template it gets (a .jinja file, or a JSON file with "chat_template")
templates=(
    "qwen2-tiny $R/Qwen2.5-0.5B-Instruct__resaved-tf4.49/tokenizer_config.json"
    "qwen3-tiny $R/Qwen3-0.6B__llamacpp-template/chat_template.jinja"
    "gemma2-tiny $R/gemma-2-2b-it__llamacpp-template/chat_template.jinja"
    "gemma3-tiny $R/gemma-3-4b-it__sophgo-LLM-TPU/chat_template.json"
    "phi3-tiny $R/Phi-3.5-mini-instruct__llamacpp-template/chat_template.jinja"
    "smollm3-tiny $R/SmolLM3-3B__fetchwiki-hfmirror/chat_template.jinja"
)
printf 'Tell me a story.\nWhat is the capital of France?\n' >"$tmp/turns"
for row in "${templates[@]}"; do
    read -r fam src <<<"$row"
    d=$tmp/$fam
    mkdir -p "$d"
    for f in "$F/$fam"/config.json "$F/$fam"/model.safetensors "$F/$fam"/tokenizer.json "$F/$fam"/tokenizer_config.json; do
        cp "$f" "$d/"
    done
    python3 - "$src" "$d/chat_template.jinja" <<'PY' || { bad "$fam: no template in $src"; continue; }
import json, sys
src, dst = sys.argv[1], sys.argv[2]
text = open(src).read() if src.endswith(".jinja") else json.load(open(src))["chat_template"]
open(dst, "w").write(text)
PY
    "$T" chat "$d" "${C[@]}" <"$tmp/turns" >"$d.out" 2>"$d.err" || bad "$fam: chat exit $?: $(tail -1 "$d.err")"
    "$T" chat "$d" "${C[@]}" <"$tmp/turns" >"$d.out2" 2>/dev/null
    cmp -s "$d.out" "$d.out2" && ok || bad "$fam: two greedy runs differ"
    [ "$(grep -c '^turn [12]: prompt ' "$d.err")" -eq 2 ] && ok || bad "$fam: no report for each of 2 turns"
    # the reference: each reply from `sample` on the conversation so far rendered from scratch (--print-prompt)
    : >"$d.ref"
    for k in 1 2; do
        python3 - "$tmp/turns" "$d" "$k" <<'PY' || break
import json, sys
turns = open(sys.argv[1]).read().splitlines()
d, k = sys.argv[2], int(sys.argv[3])
msgs = [{"role": "user", "content": turns[0]}]
if k == 2:
    reply = open(d + ".reply1", "rb").read()
    text = reply.decode("utf-8", errors="replace")
    if "\ufffd" in text:  # random weights: bytes that are no character print as U+FFFD, which re-renders otherwise
        sys.exit(1)
    msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": turns[1]}]
json.dump(msgs, open(d + ".msgs", "w"), ensure_ascii=False)
PY
        "$T" chat "$d" --messages "$d.msgs" --print-prompt </dev/null >"$d.prompt$k" 2>"$d.perr" ||
            bad "$fam: --print-prompt exit $?: $(tail -1 "$d.perr")"
        "$T" sample "$d" "${S[@]}" --prompt-file "$d.prompt$k" >"$d.reply$k" 2>"$d.serr" ||
            bad "$fam: sample exit $?: $(tail -1 "$d.serr")"
        cat "$d.reply$k" >>"$d.ref"
        echo >>"$d.ref"
    done
    if [ -s "$d.reply2" ]; then
        cmp -s "$d.out" "$d.ref" && ok || bad "$fam: chat's replies differ from sample on the re-rendered conversation: $(head -c 200 "$d.out" | od -c | head -3) || $(head -c 200 "$d.ref" | od -c | head -3)"
    else
        echo "$fam: turn 1's reply holds bytes that are no UTF-8 text (random weights): turn 2 not compared"
    fi
    # serve: the same folder behind the OpenAI chat endpoint answers turn 1 as `sample` does (greedy, same template)
    "$T" serve "$d" --port 0 --threads 1 --context 1024 >"$d.sout" 2>"$d.slog" &
    spid=$!
    port_of() { port=$(grep -o 'http://127.0.0.1:[0-9]*' "$d.slog" | sed 's/.*://') && [ -n "$port" ]; }
    if wait_for_event 120 port_of; then
        python3 -c 'import json,sys; print(json.dumps({"messages": json.load(open(sys.argv[1]))[:1], "max_tokens": 6,
            "temperature": 0}))' "$d.msgs" >"$d.body"
        code=$(curl -s --max-time 120 -o "$d.resp" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary @"$d.body" "http://127.0.0.1:$port/v1/chat/completions")
        python3 - "$d.resp" "$d.reply1" "$code" <<'PY' && ok || bad "$fam: serve: HTTP $code $(head -c 300 "$d.resp")"
import json, sys
resp, want, code = json.load(open(sys.argv[1])), open(sys.argv[2], "rb").read(), sys.argv[3]
got = resp["choices"][0]["message"]["content"]
assert code == "200" and resp["usage"]["completion_tokens"] == 6, (code, resp["usage"])
text = want.decode("utf-8", errors="replace")
assert "\ufffd" in text or got == text, (got, text)  # bytes that are no text come back as U+FFFD: not compared
PY
    else
        bad "$fam: serve did not start: $(tail -3 "$d.slog")"
    fi
    kill -TERM "$spid" 2>/dev/null
    wait "$spid" && ok || bad "$fam: serve exit $? after SIGTERM: $(tail -3 "$d.slog")"
    echo "--- $fam (template of $(basename "$(dirname "$src")")):"
    paste -d '\n' <(sed 's/^/user: /' "$tmp/turns") <(sed 's/^/assistant: /' "$d.out" | head -2)
done
echo "family chat: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
