#!/usr/bin/env bash
# tinygpt serve (issue 17) on loopback, ephemeral ports, real clients: curl, Python requests (tests/serve/
# requests_client.py) and the official openai npm package (tests/serve/openai_client.mjs). The server is the
# sanitizer build ($TINYGPT; a leak or a sanitizer error makes its exit status non-zero); the references are the
# release `tinygpt sample` / `tinygpt chat` (the same arithmetic). Greedy answers equal sample's, alone, for a
# request's own cache policy, and with 32 clients batched together; every bad request gets OpenAI's error object;
# the budget queues and refuses; dropped clients free their sessions; SIGTERM drains within --grace and exits 0.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-$PWD/build/asan/tinygpt}
R=$PWD/tinygpt
MODEL=models/tinygpt-flagship.gguf
auth=() # curl arguments of the key, for servers that have one
if [ ! -x "$T" ] || [ ! -x "$R" ] || [ ! -f "$MODEL" ]; then
    echo "skip: needs $T, ./tinygpt and $MODEL"
    exit 0
fi
for need in curl python3; do
    command -v $need >/dev/null || { bad "serve: $need is not installed (.ci/run installs it)"; exit 1; }
done
python3 -c 'import requests' 2>/dev/null || { bad "serve: python3-requests is not installed"; exit 1; }

# start NAME ARGS...: a server on a free port; sets SPID, PORT, BASE
start() {
    local name=$1
    shift
    : >"$tmp/$name.err"
    "$T" serve "$MODEL" --port 0 --threads 1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    SPID=$!
    PORT=
    listening() {
        PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/$name.err" | sed 's/.*://')
        [ -n "$PORT" ] || ! kill -0 "$SPID" 2>/dev/null
    }
    wait_for_event 120 listening
    [ -n "$PORT" ] || bad "$name: the server did not start: $(cat "$tmp/$name.err")"
    BASE=http://127.0.0.1:$PORT
}
# stop NAME: SIGTERM, and the server must exit 0 (within 120 s: a bound for a loaded machine; it takes --grace + ~1 s)
stop() {
    kill -TERM "$SPID" 2>/dev/null
    local st
    gone() { ! kill -0 "$SPID" 2>/dev/null; }
    wait_for_event 120 gone
    if kill -0 "$SPID" 2>/dev/null; then
        bad "$1: still running 120 s after SIGTERM"
        kill -KILL "$SPID"
    fi
    wait "$SPID"
    st=$?
    [ "$st" -eq 0 ] && ok || bad "$1: exit $st after SIGTERM: $(tail -20 "$tmp/$1.err")"
}
# until WHAT CMD...: waits for an event (wait_for_event, lib.sh); the bound (180 s) is for a machine under load, not a
# guess at timing: when it passes, bad WHAT and return 1 (the test goes on, failed)
until_() {
    local what=$1
    shift
    wait_for_event 180 "$@" && return 0
    bad "$what: did not happen within 180 s"
    return 1
}
metric_is() { grep -q "^tinygpt_$1 $2\$" <(curl -s "${auth[@]}" "$BASE/metrics"); } # NAME VALUE
# post URL_PATH BODY OUT [CURL ARGS...]: HTTP status on stdout, the body in OUT
post() { curl -s --max-time 60 -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "${@:4}" "$BASE$1"; }
# the text of a completion (or a chat reply) in FILE, written to stdout without a newline
text_of() {
    python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
sys.stdout.write(c["text"] if "text" in c else c["message"]["content"])' "$1"
}
# want FILE ARGS...: the release sample's greedy continuation (no echo)
want() {
    local f=$1
    shift
    "$R" sample "$MODEL" --no-echo --temperature 0 -t 1 "$@" >"$f" 2>/dev/null
}
# expect_error NAME STATUS PARAM PATH BODY [CURL ARGS...]: OpenAI's error object with that status (and param, unless '-')
expect_error() {
    local st
    st=$(post "$4" "$5" "$tmp/err.json" "${@:6}")
    if [ "$st" != "$2" ]; then
        bad "$1: HTTP $st (want $2): $(head -c 300 "$tmp/err.json")"
        return
    fi
    python3 - "$tmp/err.json" "$3" <<'PY' && ok || bad "$1: not OpenAI's error object: $(head -c 300 "$tmp/err.json")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert isinstance(e["message"], str) and e["message"] and isinstance(e["type"], str), e
assert set(e) == {"message", "type", "param", "code"}, e
assert sys.argv[2] == "-" or e["param"] == sys.argv[2], e
PY
}

P1="And the priest shall"
P2="Once upon a time"

# ---- server A: fp32 caches (the default), ChatML, a small body limit --------------------------------------------------
start A --chat-template chatml --max-body 4K --max-tokens 256
# no --host: it listens on 127.0.0.1 only (its listening socket in /proc/net/tcp, address 0100007F)
python3 - "$PORT" <<'PY' && ok || bad "the default bind is not 127.0.0.1 alone: $(grep -i ":$(printf %04X "$PORT") " /proc/net/tcp*)"
import sys
port = "%04X" % int(sys.argv[1])
listen = []
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(f).read().splitlines()[1:]
    except OSError:
        continue
    listen += [l.split()[1] for l in lines if l.split()[3] == "0A" and l.split()[1].endswith(":" + port)]
assert listen == ["0100007F:" + port], listen
PY
st=$(curl -s -o "$tmp/h" -w '%{http_code}' "$BASE/health")
[ "$st" = 200 ] && grep -q '"status":"ok"' "$tmp/h" && ok || bad "health: $st $(cat "$tmp/h")"
curl -s "$BASE/v1/models" | grep -q '"id":"tinygpt-flagship"' && ok || bad "models: no tinygpt-flagship"

# greedy equality with sample, whole and streamed (curl -N: the SSE chunks concatenated); usage counts the prompt's
# tokens as `tinygpt tokenize` does (this model adds no BOS)
for p in "$P1" "$P2"; do
    want "$tmp/want" --prompt "$p" -n 24
    np=$("$R" tokenize "$MODEL" "$p" | wc -w)
    st=$(post /v1/completions "{\"prompt\": \"$p\", \"max_tokens\": 24, \"temperature\": 0}" "$tmp/r.json")
    text_of "$tmp/r.json" >"$tmp/got"
    [ "$st" = 200 ] && cmp -s "$tmp/got" "$tmp/want" && ok ||
        bad "greedy '$p': HTTP $st, server $(head -c 200 "$tmp/got") vs sample $(head -c 200 "$tmp/want")"
    grep -q "\"usage\":{\"prompt_tokens\":$np,\"completion_tokens\":24,\"total_tokens\":$((np + 24)),\"prompt_tokens_details\":{\"cached_tokens\":0}}" "$tmp/r.json" &&
        ok || bad "usage (prompt $np tokens): $(head -c 400 "$tmp/r.json")"
    curl -sN --max-time 60 -d "{\"prompt\": \"$p\", \"max_tokens\": 24, \"temperature\": 0, \"stream\": true}" \
        "$BASE/v1/completions" >"$tmp/sse"
    python3 - "$tmp/sse" "$tmp/want" <<'PY' && ok || bad "stream '$p': $(head -c 600 "$tmp/sse")"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
assert lines[-1] == "" and lines[-2] == "data: [DONE]", lines[-3:]
chunks = [json.loads(l[len("data: "):]) for l in lines[:-2]]
assert all(c["object"] == "text_completion" for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] == "length"
assert "".join(c["choices"][0]["text"] for c in chunks) == open(sys.argv[2], encoding="utf-8").read()
PY
done
cp "$tmp/want" "$tmp/want_p2_24"
# the usage chunk of a stream (stream_options.include_usage): after the finish_reason chunk, no choices, the same counts
curl -sN --max-time 60 -d "{\"prompt\": \"$P2\", \"max_tokens\": 24, \"temperature\": 0, \"stream\": true,
\"stream_options\": {\"include_usage\": true}}" "$BASE/v1/completions" >"$tmp/sse"
python3 - "$tmp/sse" "$np" <<'PY' && ok || bad "stream usage: $(tail -c 600 "$tmp/sse")"
import json, sys
ev = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
assert ev[-2] == "data: [DONE]", ev[-3:]
last, fin = json.loads(ev[-3][len("data: "):]), json.loads(ev[-4][len("data: "):])
n = int(sys.argv[2])
assert last["choices"] == [] and last["usage"] == {"prompt_tokens": n, "completion_tokens": 24, "total_tokens": n + 24,
                                                  "prompt_tokens_details": {"cached_tokens": 0}}, last
assert fin["choices"][0]["finish_reason"] == "length" and "usage" not in fin, fin
PY

# a stop string: the text before it, finish_reason "stop" (as sample --stop)
want "$tmp/want" --prompt "$P2" -n 24 --stop "captains"
st=$(post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 24, \"temperature\": 0, \"stop\": [\"captains\"]}" \
    "$tmp/r.json")
text_of "$tmp/r.json" >"$tmp/got"
cmp -s "$tmp/got" "$tmp/want" && grep -q '"finish_reason":"stop"' "$tmp/r.json" && ok ||
    bad "stop: $(head -c 300 "$tmp/r.json") vs $(cat "$tmp/want")"
# ... and streamed: no chunk carries any of the stop string (held back until it cannot be a stop's start)
curl -sN --max-time 60 -d "{\"prompt\": \"$P2\", \"max_tokens\": 24, \"temperature\": 0, \"stop\": \"captains\",
\"stream\": true}" "$BASE/v1/completions" >"$tmp/sse"
python3 - "$tmp/sse" "$tmp/want" <<'PY' && ok || bad "stop streamed: $(head -c 600 "$tmp/sse")"
import json, sys
ev = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
assert ev[-2] == "data: [DONE]", ev[-3:]
chunks = [json.loads(e[len("data: "):]) for e in ev[:-2]]
assert chunks[-1]["choices"][0]["finish_reason"] == "stop", chunks[-1]
assert "".join(c["choices"][0]["text"] for c in chunks) == open(sys.argv[2], encoding="utf-8").read()
PY
# seeded sampling equals sample's with the same settings (both sides spelled out: the defaults differ), and each field
# matters: every variant's text differs from the baseline's, so a field the server ignored would fail here
# sampled NAME FIELDS FLAGS...: the request with FIELDS (JSON members) against sample with FLAGS; its text in $tmp/got
sampled() {
    local name=$1 fields=$2
    shift 2
    "$R" sample "$MODEL" --no-echo -t 1 --prompt "$P2" -n 16 "$@" >"$tmp/want" 2>/dev/null
    st=$(post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 16, $fields}" "$tmp/r.json")
    text_of "$tmp/r.json" >"$tmp/got"
    [ "$st" = 200 ] && cmp -s "$tmp/got" "$tmp/want" && ok ||
        bad "$name: HTTP $st, server $(head -c 200 "$tmp/got") vs sample $(head -c 200 "$tmp/want")"
}
sampled "sampling baseline" '"temperature": 1.5, "seed": 5' --temperature 1.5 --seed 5 --top-k 0 --top-p 1
cp "$tmp/got" "$tmp/base"
sampled "seed" '"temperature": 1.5, "seed": 6' --temperature 1.5 --seed 6 --top-k 0 --top-p 1
cmp -s "$tmp/got" "$tmp/base" && bad "seed 6 gave seed 5's text" || ok
sampled "top_p" '"temperature": 1.5, "seed": 5, "top_p": 0.5' --temperature 1.5 --seed 5 --top-k 0 --top-p 0.5
cmp -s "$tmp/got" "$tmp/base" && bad "top_p 0.5 gave the text of top_p 1" || ok
sampled "top_k" '"temperature": 1.5, "seed": 5, "top_k": 3' --temperature 1.5 --seed 5 --top-k 3 --top-p 1
cmp -s "$tmp/got" "$tmp/base" && bad "top_k 3 gave the text of top_k off" || ok
sampled "min_p" '"temperature": 1.5, "seed": 5, "min_p": 0.2' --temperature 1.5 --seed 5 --top-k 0 --top-p 1 --min-p 0.2
cmp -s "$tmp/got" "$tmp/base" && bad "min_p 0.2 gave the text of min_p off" || ok
sampled "all of them, n = 1" '"temperature": 0.9, "seed": 11, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
"repeat_penalty": 1.2, "n": 1' --temperature 0.9 --seed 11 --top-k 40 --top-p 0.9 --min-p 0.05 --repeat-penalty 1.2
# llama-server's names: n_predict, ignore_eos, top_k, min_p
st=$(post /v1/completions "{\"prompt\": \"$P2\", \"n_predict\": 5, \"ignore_eos\": true, \"top_k\": 40, \"min_p\": 0.05, \
\"temperature\": 0}" "$tmp/r.json")
grep -q '"completion_tokens":5,' "$tmp/r.json" && ok || bad "n_predict: $st $(head -c 300 "$tmp/r.json")"
# a request's own cache policy (int4 on an fp32 server) equals sample --kv-quantize int4
want "$tmp/want" --prompt "$P1" -n 24 --kv-quantize int4
st=$(post /v1/completions "{\"prompt\": \"$P1\", \"max_tokens\": 24, \"temperature\": 0, \"kv_quantize\": \"int4\"}" \
    "$tmp/r.json")
text_of "$tmp/r.json" >"$tmp/got"
cmp -s "$tmp/got" "$tmp/want" && ok || bad "kv_quantize int4: $(cat "$tmp/got") vs $(cat "$tmp/want")"
# chat: rendered with ChatML as `tinygpt chat --chat-template chatml` renders it
printf 'hello there\n' | "$R" chat "$MODEL" --chat-template chatml --temperature 0 -n 16 --quiet -t 1 2>/dev/null |
    python3 -c 'import sys; t = sys.stdin.read(); sys.stdout.write(t[:-1] if t.endswith("\n") else t)' >"$tmp/want"
st=$(post /v1/chat/completions '{"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 16,
"temperature": 0}' "$tmp/r.json")
text_of "$tmp/r.json" >"$tmp/got"
[ "$st" = 200 ] && cmp -s "$tmp/got" "$tmp/want" && grep -q '"object":"chat.completion"' "$tmp/r.json" && ok ||
    bad "chat greedy: $st $(head -c 300 "$tmp/r.json") vs $(cat "$tmp/want")"
curl -sN --max-time 60 -d '{"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 16,
"temperature": 0, "stream": true}' "$BASE/v1/chat/completions" >"$tmp/sse"
python3 - "$tmp/sse" "$tmp/want" <<'PY' && ok || bad "chat stream: $(head -c 600 "$tmp/sse")"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
assert lines[-2] == "data: [DONE]"
chunks = [json.loads(l[len("data: "):]) for l in lines[:-2]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == open(sys.argv[2], encoding="utf-8").read()
PY

# every bad request: 400 (404, 405, 413) with OpenAI's error object
expect_error "malformed JSON" 400 - /v1/completions '{"prompt": "x",'
expect_error "not an object" 400 - /v1/completions '[1, 2]'
expect_error "duplicate key" 400 - /v1/completions '{"prompt": "a", "prompt": "b"}'
expect_error "invalid UTF-8" 400 - /v1/completions "$(printf '{"prompt": "\377"}')"
expect_error "prompt type" 400 prompt /v1/completions '{"prompt": 5}'
expect_error "temperature type" 400 temperature /v1/completions '{"prompt": "x", "temperature": "hot"}'
expect_error "top_p range" 400 top_p /v1/completions '{"prompt": "x", "top_p": 2}'
expect_error "max_tokens 0" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": 0}'
expect_error "max_tokens negative" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": -5}'
expect_error "max_tokens fraction" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": 1.5}'
expect_error "max_tokens over the server's" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": 100000}'
expect_error "n_predict 0" 400 n_predict /v1/completions '{"prompt": "x", "n_predict": 0}'
expect_error "n = 2" 400 n /v1/completions '{"prompt": "x", "n": 2}'
expect_error "stream type" 400 stream /v1/completions '{"prompt": "x", "stream": "yes"}'
expect_error "ignore_eos type" 400 ignore_eos /v1/completions '{"prompt": "x", "ignore_eos": 1}'
expect_error "seed type" 400 seed /v1/completions '{"prompt": "x", "seed": "x"}'
expect_error "top_k negative" 400 top_k /v1/completions '{"prompt": "x", "top_k": -1}'
expect_error "min_p range" 400 min_p /v1/completions '{"prompt": "x", "min_p": 1.5}'
expect_error "stop type" 400 stop /v1/completions '{"prompt": "x", "stop": [1]}'
expect_error "kv_quantize" 400 kv_quantize /v1/completions '{"prompt": "x", "kv_quantize": "int3"}'
expect_error "unknown model" 400 model /v1/completions '{"prompt": "x", "model": "gpt-4"}'
grep -q '"code":"model_not_found"' "$tmp/err.json" && ok || bad "unknown model: no model_not_found code"
expect_error "messages type" 400 messages /v1/chat/completions '{"messages": "hi"}'
expect_error "message without content" 400 messages /v1/chat/completions '{"messages": [{"role": "user"}]}'
expect_error "no route" 404 - /v1/nothing '{}'
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' "$BASE/v1/completions")
[ "$st" = 405 ] && ok || bad "GET /v1/completions: $st"
head -c 5000 /dev/zero | tr '\0' 'a' >"$tmp/big"
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' --data-binary @"$tmp/big" "$BASE/v1/completions")
[ "$st" = 413 ] && grep -q '"error"' "$tmp/err.json" && ok || bad "body over --max-body: $st $(cat "$tmp/err.json")"
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/big" \
    "$BASE/v1/completions")
[ "$st" = 413 ] && ok || bad "chunked body over --max-body: $st $(cat "$tmp/err.json")"

# 32 concurrent clients, distinct prompts, half streamed: each its own greedy text (batched together)
mkdir -p "$tmp/w32"
for i in $(seq 0 31); do echo "Client $i:"; done >"$tmp/prompts32"
i=0
while IFS= read -r p; do
    want "$tmp/w32/$i.txt" --prompt "$p" -n 8
    i=$((i + 1))
done <"$tmp/prompts32"
steps0=$(curl -s "$BASE/metrics" | sed -n 's/^tinygpt_batch_steps_total //p')
python3 tests/serve/requests_client.py concurrent "$BASE" "$tmp/prompts32" "$tmp/w32" 8 >"$tmp/py.out" 2>&1 && ok ||
    bad "python requests: $(cat "$tmp/py.out")"
cat "$tmp/py.out"
curl -s "$BASE/metrics" >"$tmp/metrics"
# batched: 32 x 8 tokens in far fewer forward passes than 256 (one per token and session would be)
steps=$(( $(sed -n 's/^tinygpt_batch_steps_total //p' "$tmp/metrics") - steps0 ))
[ "$steps" -lt 128 ] && ok || bad "32 clients x 8 tokens took $steps forward passes: not batched"
echo "32 clients x (prompt + 8 tokens): $steps batched forward passes"
grep -q '^tinygpt_generated_tokens_total [1-9]' "$tmp/metrics" && grep -q '^tinygpt_sessions_active 0$' "$tmp/metrics" &&
    grep -q '^tinygpt_time_to_first_token_seconds_count [1-9]' "$tmp/metrics" && ok ||
    bad "metrics after the load: $(head -40 "$tmp/metrics")"
# the gauges and the histogram are well formed: the budget (1 GiB, the default), a tokens/s number, TTFT buckets
# cumulative up to +Inf = the count, every response of the load counted as a 200
python3 - "$tmp/metrics" <<'PY' && ok || bad "metrics: $(grep -v '^#' "$tmp/metrics" | head -40)"
import sys
m = {}
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    k, v = line.rsplit(" ", 1)
    m[k] = float(v)
assert m["tinygpt_kv_bytes_budget"] == 1 << 30 and m["tinygpt_kv_bytes_in_use"] == 0, m
assert m["tinygpt_sessions_queued"] == 0 and m["tinygpt_tokens_per_second"] >= 0, m
b = [(k, v) for k, v in m.items() if k.startswith("tinygpt_time_to_first_token_seconds_bucket")]
assert len(b) >= 5 and b[-1][0].endswith('le="+Inf"}') and b[-1][1] == m["tinygpt_time_to_first_token_seconds_count"], b
assert all(x[1] <= y[1] for x, y in zip(b, b[1:])), b
assert m["tinygpt_time_to_first_token_seconds_count"] >= 32 and m['tinygpt_http_responses_total{code="200"}'] >= 32, m
PY

# the official openai client
if command -v node >/dev/null && [ -d tests/serve/node_modules/openai ]; then
    want "$tmp/want16" --prompt "$P2" -n 16
    node tests/serve/openai_client.mjs "$BASE/v1" tinygpt-flagship "$P2" "$tmp/want16" >"$tmp/node.out" 2>&1 && ok ||
        bad "openai client: $(cat "$tmp/node.out")"
    cat "$tmp/node.out"
elif [ "${CI:-}" = true ]; then
    bad "openai client: needs node and tests/serve/node_modules (.ci/run installs them)"
else
    echo "SKIP openai client: needs node and tests/serve/node_modules (cd tests/serve && npm install)"
fi

# SIGTERM while a request runs (--grace 10): it finishes whole, then the server exits 0
curl -s --max-time 60 -o "$tmp/late.json" -d "{\"prompt\": \"$P2\", \"max_tokens\": 24, \"temperature\": 0}" \
    "$BASE/v1/completions" &
CPID=$!
until_ "SIGTERM: the request running" metric_is sessions_active 1
stop A
wait "$CPID"
text_of "$tmp/late.json" >"$tmp/got" 2>/dev/null
cmp -s "$tmp/got" "$tmp/want_p2_24" && ok || bad "SIGTERM: the running request did not finish: $(cat "$tmp/late.json")"
grep -q 'SIGTERM: no longer admitting' "$tmp/A.err" && ok || bad "SIGTERM: no message: $(tail -3 "$tmp/A.err")"

# ---- server B: int4 keys and values in a StreamingLLM window of 32 (evicting), a key, a short grace ---------------------
start B --kv-quantize int4 --streaming-llm-window 32 --api-key sekrit --grace 0.3 --prefill-chunk 16 \
    --max-prompt-tokens 20000 --max-body 8M
auth=(-H 'Authorization: Bearer sekrit')
# tokenising stops at the cap: a 7 MB prompt of one letter (few enough bytes for the byte check: a token of the
# bundled model may stand for hundreds of bytes) is refused at 20,000 tokens; the server's peak memory (VmHWM, kB: a
# count, not a time) grows by less than 150 MB, where encoding the whole prompt first takes several times that
hwm() { sed -n 's/^VmHWM: *\([0-9]*\) kB/\1/p' "/proc/$SPID/status"; }
python3 -c 'import json; print(json.dumps({"prompt": "a" * 7000000}))' >"$tmp/letter.json"
hwm_before=$(hwm)
expect_error "a 7 MB prompt of one letter" 400 prompt /v1/completions @"$tmp/letter.json" "${auth[@]}"
hwm_after=$(hwm)
grep -q 'more than 20000 tokens' "$tmp/err.json" && [ $((hwm_after - hwm_before)) -lt 150000 ] && ok ||
    bad "one letter over the cap: VmHWM $hwm_before -> $hwm_after kB: $(head -c 300 "$tmp/err.json")"
want "$tmp/want" --prompt "$P1" -n 60 --kv-quantize int4 --streaming-llm-window 32
curl -s --max-time 60 "${auth[@]}" -d "{\"prompt\": \"$P1\", \"max_tokens\": 60, \"temperature\": 0}" \
    "$BASE/v1/completions" >"$tmp/r.json"
text_of "$tmp/r.json" >"$tmp/got"
cmp -s "$tmp/got" "$tmp/want" && ok || bad "int4 window 32 greedy: $(cat "$tmp/got") vs $(cat "$tmp/want")"
# a long prompt prefilled 16 tokens a step (evicting as it goes) beside a running decode: both equal sample's
head -c 600 models/data/valid.txt >"$tmp/long.txt"
want "$tmp/want_long" --prompt-file "$tmp/long.txt" -n 20 --kv-quantize int4 --streaming-llm-window 32
python3 -c 'import json, sys; print(json.dumps({"prompt": open(sys.argv[1]).read(), "max_tokens": 20, "temperature": 0}))' \
    "$tmp/long.txt" >"$tmp/long.json"
curl -s --max-time 60 "${auth[@]}" -d "{\"prompt\": \"$P1\", \"max_tokens\": 60, \"temperature\": 0, \"stream\": true}" \
    "$BASE/v1/completions" >"$tmp/sse" &
CPID=$!
until_ "the decode running" metric_is sessions_active 1
curl -s --max-time 60 "${auth[@]}" -d @"$tmp/long.json" "$BASE/v1/completions" >"$tmp/r.json"
wait "$CPID"
text_of "$tmp/r.json" >"$tmp/got"
cmp -s "$tmp/got" "$tmp/want_long" && ok || bad "long prompt in chunks: $(cat "$tmp/got") vs $(cat "$tmp/want_long")"
python3 - "$tmp/sse" "$tmp/want" <<'PY' && ok || bad "the decode beside the long prompt: $(head -c 300 "$tmp/sse")"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
chunks = [json.loads(l[len("data: "):]) for l in lines[:-2]]
assert "".join(c["choices"][0]["text"] for c in chunks) == open(sys.argv[2], encoding="utf-8").read()
PY
# fairness: a short request beside a long prompt (16 prompt tokens a step shared between them) finishes while the long
# one is still prefilling; in session order it waited for the long prompt's every chunk. Counted in prompt tokens
# evaluated, not in time.
head -c 40000 models/data/valid.txt | python3 -c 'import json, sys; print(json.dumps({"prompt": sys.stdin.read(),
"max_tokens": 1, "stream": True}))' >"$tmp/vlong.json"
n_vlong=$("$R" tokenize "$MODEL" "$(head -c 40000 models/data/valid.txt)" 2>/dev/null | wc -w)
prompt_total() { curl -s "${auth[@]}" "$BASE/metrics" | sed -n 's/^tinygpt_prompt_tokens_total //p'; }
before=$(prompt_total)
curl -sN --max-time 120 "${auth[@]}" -d @"$tmp/vlong.json" "$BASE/v1/completions" >/dev/null &
CPID=$!
prefilling() { [ "$(prompt_total)" -gt "$before" ]; }
until_ "fair prefill: the long prompt started" prefilling
st=$(curl -s -o "$tmp/r.json" -w '%{http_code}' --max-time 120 "${auth[@]}" -d '{"prompt": "x", "max_tokens": 2}' \
    "$BASE/v1/completions")
after=$(prompt_total)
[ "$st" = 200 ] && [ $((after - before)) -lt $((n_vlong / 2)) ] && ok ||
    bad "fair prefill: HTTP $st; $((after - before)) of the long prompt's $n_vlong tokens were in before the short answer"
kill "$CPID" 2>/dev/null
wait "$CPID" 2>/dev/null
st=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")
[ "$st" = 200 ] && ok || bad "health needs no key: $st"
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' "$BASE/v1/models")
[ "$st" = 401 ] && grep -q '"type":"authentication_error"' "$tmp/err.json" && ok || bad "no key: $st"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$BASE/v1/models")
[ "$st" = 401 ] && ok || bad "wrong key: $st"
# the key is checked as soon as the headers are in: a keyless request declaring a 3 MB body that never comes gets 401
python3 tests/serve/hostile_client.py keyfirst 127.0.0.1 "$PORT" >"$tmp/py.out" 2>&1 && ok ||
    bad "key before body: $(cat "$tmp/py.out")"
st=$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" -d '{"prompt": "x", "max_tokens": 2}' "$BASE/v1/completions")
[ "$st" = 200 ] && ok || bad "right key: $st"
st=$(curl -s -o "$tmp/err.json" -w '%{http_code}' "${auth[@]}" -d '{"prompt": "x", "streaming_llm_window": 1000}' \
    "$BASE/v1/completions")
[ "$st" = 400 ] && grep -q '"param":"streaming_llm_window"' "$tmp/err.json" && ok ||
    bad "a window beyond the server's: $st $(cat "$tmp/err.json")"
# fp32 values on an int4 server, or more sinks than its window: more bytes than the server's policy -> 400
expect_error "kv_quantize above the server's" 400 kv_quantize /v1/completions '{"prompt": "x", "kv_quantize": "fp32"}' \
    -H 'Authorization: Bearer sekrit'
expect_error "streaming_llm_sink above the server's" 400 streaming_llm_sink /v1/completions \
    '{"prompt": "x", "streaming_llm_sink": 64}' -H 'Authorization: Bearer sekrit'
# SIGTERM with a stream running past the grace: the stream ends (an error event, then [DONE]), exit 0; and a stream
# still prefilling a ~10,000-token prompt (16 prompt tokens a step) ends the same way. The long prompt goes first and
# the stop comes as soon as the second stream's first bytes are in, so that both run when it comes whatever the
# machine's load (curl's bound only decides how long a broken run takes to fail; 512 tokens, the server's cap).
until_ "SIGTERM: the earlier sessions ended" metric_is sessions_active 0
head -c 40000 models/data/valid.txt | python3 -c 'import json, sys; print(json.dumps({"prompt": sys.stdin.read(),
"max_tokens": 256, "ignore_eos": True, "stream": True}))' >"$tmp/prefill.json"
curl -sN --max-time 600 "${auth[@]}" -d @"$tmp/prefill.json" "$BASE/v1/completions" >"$tmp/prefill.sse" &
PREFILL_PID=$!
until_ "SIGTERM in prefill: the long prompt admitted" metric_is sessions_active 1
curl -sN --max-time 600 "${auth[@]}" -d '{"prompt": "x", "max_tokens": 512, "ignore_eos": true, "stream": true}' \
    "$BASE/v1/completions" >"$tmp/sse" &
CPID=$!
until_ "SIGTERM past the grace: the stream started" test -s "$tmp/sse"
stop B
wait "$CPID" "$PREFILL_PID"
# (an error event then [DONE]; or, had the stop come before its session started, OpenAI's error object alone; the
# short stream may only have finished first on a machine stalled for the whole grace: then it ended whole)
for f in sse prefill.sse; do
    tail -c 200 "$tmp/$f" | grep -q 'shutting down' &&
        { tail -c 20 "$tmp/$f" | grep -q 'data: \[DONE\]' || grep -q '^{"error"' "$tmp/$f"; } && ok ||
        { [ "$f" = sse ] && grep -q '"finish_reason":"length"' "$tmp/$f" &&
            tail -c 20 "$tmp/$f" | grep -q 'data: \[DONE\]' && ok; } ||
        bad "SIGTERM past the grace: the stream ($f) did not end with an error: $(tail -c 300 "$tmp/$f")"
done

# ---- server C: a budget of one fp32 session, a queue of one ----------------------------------------------------------
bytes=$((512 * 12 * 1024)) # the fp32 cache of the bundled model: 512 tokens x 12 KiB
st=0
"$T" serve "$MODEL" --port 0 --kv-budget $((bytes - 1)) >/dev/null 2>"$tmp/small.err" || st=$?
[ "$st" = 2 ] && grep -q 'kv-budget' "$tmp/small.err" && ok || bad "a budget below one session: $st $(cat "$tmp/small.err")"
start C --kv-budget "$bytes" --queue 1
long='{"prompt": "x", "max_tokens": 256, "ignore_eos": true, "stream": true}'
curl -sN --max-time 60 -d "$long" "$BASE/v1/completions" >/dev/null &
C1=$!
until_ "one active" metric_is sessions_active 1
curl -sN --max-time 60 -d "$long" "$BASE/v1/completions" >/dev/null &
C2=$!
until_ "one queued" metric_is sessions_queued 1
curl -s "$BASE/metrics" >"$tmp/metrics"
grep -q "^tinygpt_kv_bytes_in_use $bytes\$" "$tmp/metrics" && grep -q '^tinygpt_sessions_queued 1$' "$tmp/metrics" &&
    grep -q "^tinygpt_kv_bytes_budget $bytes\$" "$tmp/metrics" && ok ||
    bad "one active, one queued: $(grep -E '^tinygpt_(sessions|kv)' "$tmp/metrics")"
# a session decoding: tokens/s over the last second is above 0 (polled: the first second may not be over yet)
rate_up() { grep -q '^tinygpt_tokens_per_second [0-9]*[1-9]' <(curl -s "$BASE/metrics"); }
until_ "tokens/s above 0 while decoding" rate_up && ok
st=$(curl -s -D "$tmp/hdr" -o "$tmp/err.json" -w '%{http_code}' -d "$long" "$BASE/v1/completions")
[ "$st" = 503 ] && grep -qi '^Retry-After: 1' "$tmp/hdr" && grep -q '"error"' "$tmp/err.json" && ok ||
    bad "the queue full: $st $(cat "$tmp/hdr" "$tmp/err.json")"
kill "$C1" "$C2"
wait "$C1" "$C2" 2>/dev/null
all_free() { metric_is sessions_active 0 && metric_is sessions_queued 0; }
until_ "dropped clients freed" all_free
curl -s "$BASE/metrics" >"$tmp/metrics"
grep -q '^tinygpt_sessions_active 0$' "$tmp/metrics" && grep -q '^tinygpt_kv_bytes_in_use 0$' "$tmp/metrics" &&
    grep -q '^tinygpt_sessions_queued 0$' "$tmp/metrics" && ok ||
    bad "dropped clients (running and queued) did not free their sessions: $(grep -E '^tinygpt_(sessions|kv)' "$tmp/metrics")"
python3 tests/serve/requests_client.py disconnect "$BASE" >"$tmp/py.out" 2>&1 && ok || bad "python disconnect: $(cat "$tmp/py.out")"
cat "$tmp/py.out"
stop C

# ---- server D: the YOCO model (shared layers: under eviction its caches take one token per step) ---------------------
MODEL=models/tinygpt-yoco.gguf
start D --kv-quantize int8 --streaming-llm-window 32
head -c 300 models/data/valid.txt >"$tmp/long.txt"
want "$tmp/want" --prompt-file "$tmp/long.txt" -n 12 --kv-quantize int8 --streaming-llm-window 32
python3 -c 'import json, sys; print(json.dumps({"prompt": open(sys.argv[1]).read(), "max_tokens": 12, "temperature": 0}))' \
    "$tmp/long.txt" >"$tmp/long.json"
curl -s --max-time 60 -d @"$tmp/long.json" "$BASE/v1/completions" >"$tmp/r.json"
text_of "$tmp/r.json" >"$tmp/got"
cmp -s "$tmp/got" "$tmp/want" && ok || bad "YOCO int8 window 32: $(cat "$tmp/got") vs $(cat "$tmp/want")"
# int4 in a window of 48 needs fewer bytes than the server's int8 window of 32 but holds more tokens than the batch's
# attention work space was sized for -> 400 (not an overrun)
expect_error "a window holding more tokens" 400 - /v1/completions \
    '{"prompt": "x", "kv_quantize": "int4", "streaming_llm_window": 48}'
grep -q 'holds more tokens' "$tmp/err.json" && ok || bad "a window holding more tokens: $(cat "$tmp/err.json")"
# a bounded cache does not mean an unbounded prompt: over --max-prompt-tokens (default: the context, 512) -> 400; a
# prompt too many bytes for the cap is refused before it is tokenised
head -c 6000 models/data/valid.txt | python3 -c 'import json, sys; print(json.dumps({"prompt": sys.stdin.read()}))' \
    >"$tmp/over.json"
expect_error "a prompt over the cap in a window" 400 prompt /v1/completions @"$tmp/over.json"
grep -q 'at most 512 (--max-prompt-tokens)' "$tmp/err.json" && ok || bad "prompt cap: $(cat "$tmp/err.json")"
python3 -c 'import json; print(json.dumps({"prompt": "a" * 3000000}))' >"$tmp/huge.json"
expect_error "a 3 MB prompt in a window" 400 prompt /v1/completions @"$tmp/huge.json"
grep -q 'bytes: more than the 512 tokens' "$tmp/err.json" && ok || bad "prompt bytes: $(cat "$tmp/err.json")"
stop D

# ---- server E: a tiny random model that does sample its end-of-sequence token (temperature 2, seed 30: after 91
# tokens; at temperature 1 its EOS is drawn with probability ~1e-7 a step, so an ulp decided it: seed 6's draw at 142
# tokens went the other way when RMSNorm's scale took llama.cpp's fp32 rounding) --------------------------------------
MODEL=tests/data/fixtures/smollm2/model-f32.gguf
start E --request-timeout 300 # the bulk body below is left unfinished while it is checked
# the thread receiving a body past 64 KiB gives way (a nice value 10 above the server's), and /health is answered
python3 tests/serve/hostile_client.py bulk 127.0.0.1 "$PORT" "$SPID" >"$tmp/py.out" 2>&1 && ok ||
    bad "hostile connections (bulk): $(cat "$tmp/py.out")"
# a refused body (past the JSON value cap) is still answered, its rest read at a bounded rate
python3 tests/serve/hostile_client.py paced 127.0.0.1 "$PORT" >"$tmp/py.out" 2>&1 && ok ||
    bad "hostile connections (paced): $(cat "$tmp/py.out")"
eos=(--no-echo -t 1 --prompt hi -n 200 --temperature 2 --seed 30 --top-k 0 --top-p 1)
"$R" sample "$MODEL" "${eos[@]}" >"$tmp/want" 2>/dev/null
"$R" sample "$MODEL" "${eos[@]}" --ignore-eos >"$tmp/want_all" 2>/dev/null
# eos_case NAME FIELDS WANT FINISH TOKENS: a request with FIELDS gets WANT's text, FINISH and TOKENS generated
eos_case() {
    st=$(post /v1/completions "{\"prompt\": \"hi\", \"temperature\": 2, \"seed\": 30, $2}" "$tmp/r.json")
    python3 - "$tmp/r.json" "$3" "$4" "$5" <<'PY' && ok || bad "$1: HTTP $st $(head -c 300 "$tmp/r.json")"
import json, sys
c = json.load(open(sys.argv[1]))
want = open(sys.argv[2], encoding="utf-8").read()
assert c["choices"][0]["text"] == want and c["choices"][0]["finish_reason"] == sys.argv[3], c["choices"][0]
assert c["usage"]["completion_tokens"] == int(sys.argv[4]), c["usage"]
PY
}
eos_case "the end-of-sequence token ends it" '"max_tokens": 200' "$tmp/want" stop 91
eos_case "ignore_eos" '"max_tokens": 200, "ignore_eos": true' "$tmp/want_all" length 200
eos_case "n_predict with ignore_eos" '"n_predict": 200, "ignore_eos": true' "$tmp/want_all" length 200
stop E
MODEL=models/tinygpt-flagship.gguf
auth=() # curl arguments of the key, for servers that have one

# ---- server F: hostile connections (tests/serve/hostile_client.py: raw sockets, each check waits on an event) -------
# a request whose headers never end is closed by --request-timeout (and /health answered meanwhile); connections over
# --max-connections-per-ip from one address are closed unanswered while another address is served; a client that
# shuts down its sending half after the request still gets the answer
# The model is a folder whose chat template would scan 100 GB: a chat request gets one clear 400 (the work limit or
# the render's deadline), and the others are served meanwhile (the render holds no lock).
M=tests/data/fixtures/smollm2
mkdir "$tmp/evil"
cp "$M"/config.json "$M"/tokenizer.json "$M"/tokenizer_config.json "$M"/model.safetensors "$tmp/evil/"
printf '%s' "{% set s = 'a' * 100000 %}{% for i in range(1000) %}{% for j in range(1000) %}{{ s.strip('x' * 100000 ~ 'a') }}{% endfor %}{% endfor %}" \
    >"$tmp/evil/chat_template.jinja"
MODEL=$tmp/evil
start F --request-timeout 1 --max-connections-per-ip 3
expect_error "a hostile chat template" 400 messages /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}'
grep -q 'chat template: ' "$tmp/err.json" && ok || bad "a hostile chat template: $(cat "$tmp/err.json")"
grep -q 'connections: 1024, 3 from one address' "$tmp/F.err" && ok || bad "connection limits: $(cat "$tmp/F.err")"
hostile() { # CHECK [ARGS...]
    python3 tests/serve/hostile_client.py "$1" 127.0.0.1 "$PORT" "${@:2}" >"$tmp/py.out" 2>&1 && ok ||
        bad "hostile connections ($1): $(cat "$tmp/py.out")"
}
hostile slowloris
hostile perip 3
hostile halfclose
hostile framing
stop F
MODEL=models/tinygpt-flagship.gguf

# bad flags
st=0
"$T" serve "$MODEL" --port 70000 >/dev/null 2>"$tmp/e" || st=$?
[ "$st" = 2 ] && [ "$(wc -l <"$tmp/e")" = 1 ] && ok || bad "--port 70000: $st $(cat "$tmp/e")"
st=0
"$T" serve "$MODEL" --port 0 --host nowhere >/dev/null 2>"$tmp/e" || st=$?
[ "$st" = 2 ] && grep -q -- '--host nowhere' "$tmp/e" && [ "$(wc -l <"$tmp/e")" = 1 ] && ok ||
    bad "--host nowhere: $st $(cat "$tmp/e")"

echo "serve: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
