#!/usr/bin/env bash
# tinygpt serve continues parked conversations (issue 53): a request whose tokens extend a finished conversation's
# restores its cache (a snapshot) and prefills only the new tokens. Checked against a server started with
# --park-budget 0 (every prompt read whole, from an empty cache): the greedy answers are equal, for a StreamingLLM
# int4 cache whose window the conversation overflows (continuing keeps sinks + window exactly as reading the whole
# transcript through the same bounded cache does), through curl (completions and chat) and the openai npm client
# (chat, whole history re-sent each turn). The usage's cached_tokens and /metrics say how many tokens were reused
# and that only the suffix was prefilled; a reply sent back as other tokens continues from where its prompt ended;
# cache_prompt false reuses nothing. --park-dir: a restarted server continues a conversation parked by the previous
# one; a server killed in the middle of writing a file leaves no file under a snapshot's name, and a damaged file is
# refused. Every wait is on an event (a port, a metric, an exit).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-$PWD/build/asan/tinygpt}
MODEL=models/tinygpt-flagship.gguf
if [ ! -x "$T" ] || [ ! -f "$MODEL" ]; then
    echo "skip: needs $T and $MODEL"
    exit 0
fi
for need in curl python3; do
    command -v $need >/dev/null || { bad "park: $need is not installed (.ci/run installs it)"; exit 1; }
done
POLICY=(--chat-template chatml --kv-quantize int4 --streaming-llm-window 64 --streaming-llm-sink 4 --threads 1)

# start NAME ARGS...: a server on a free port; sets SPID, PORT, BASE (and NAME's pid in $tmp/NAME.pid)
start() {
    local name=$1
    shift
    : >"$tmp/$name.err"
    "$T" serve "$MODEL" --port 0 "${POLICY[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    SPID=$!
    PORT=
    for _ in $(seq 2400); do
        PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/$name.err" | sed 's/.*://')
        [ -n "$PORT" ] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.05
    done
    [ -n "$PORT" ] || bad "$name: the server did not start: $(cat "$tmp/$name.err")"
    BASE=http://127.0.0.1:$PORT
}
# stop PID NAME: SIGTERM, and the server must exit 0
stop() {
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 2400); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$1" 2>/dev/null && { bad "$2: still running 120 s after SIGTERM"; kill -KILL "$1"; }
    wait "$1"
    local st=$?
    [ "$st" -eq 0 ] && ok || bad "$2: exit $st after SIGTERM: $(tail -20 "$tmp/$2.err")"
}
metric() { curl -s "$1/metrics" | sed -n "s/^tinygpt_$2 //p"; } # BASE NAME[{labels}]: its value
# post BASE URL_PATH BODY OUT: the HTTP status on stdout, the body in OUT
post() { curl -s --max-time 300 -o "$4" -w '%{http_code}' -H 'Content-Type: application/json' -d "$3" "$1$2"; }

start R --park-dir "$tmp/park"
RPID=$SPID RBASE=$BASE
start F --park-budget 0
FPID=$SPID FBASE=$BASE

# ---- chat through curl: 4 turns, the whole history each time (python builds the bodies, compares, counts) --------
python3 - "$RBASE" "$FBASE" "$tmp" <<'PY' && ok || bad "curl chat conversation"
import json, subprocess, sys
reuse, fresh, tmp = sys.argv[1:4]
def ask(base, body):
    out = subprocess.run(["curl", "-s", "--max-time", "300", "-H", "Content-Type: application/json", "-d",
                          json.dumps(body), base + "/v1/chat/completions"], capture_output=True, text=True).stdout
    return json.loads(out)
msgs, prev, prefilled, fails = [], None, 0, []
for t, user in enumerate(["Once upon a time there was a king.", "What was his name?", "Where did he live?",
                          "What happened to him in the end?"]):
    msgs.append({"role": "user", "content": user})
    body = {"messages": msgs, "max_tokens": 24, "temperature": 0}
    a, b = ask(reuse, body), ask(fresh, body)
    ta, tb = a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]
    if ta != tb: fails.append(f"turn {t+1}: {ta!r} vs fresh {tb!r}")
    ua, ub = a["usage"], b["usage"]
    want = prev["prompt_tokens"] + prev["completion_tokens"] - 1 if prev else 0
    if ua["prompt_tokens_details"]["cached_tokens"] != want or ub["prompt_tokens_details"]["cached_tokens"] != 0:
        fails.append(f"turn {t+1}: cached {ua} (want {want}), fresh {ub}")
    if a["timings"]["prompt_n"] != ua["prompt_tokens"] - want or a["timings"]["cache_n"] != want:
        fails.append(f"turn {t+1}: timings {a['timings']}")
    prefilled += a["timings"]["prompt_n"]
    prev = ua
    msgs.append({"role": "assistant", "content": ta})
# the prompt tokens this server evaluated: only the suffixes
open(tmp + "/prefilled", "w").write(str(prefilled))
open(tmp + "/conv.json", "w").write(json.dumps(msgs))
print("\n".join(fails), file=sys.stderr)
sys.exit(1 if fails else 0)
PY
# the conversation outgrew the window (4 sinks + 64): what was continued was a bounded cache past its first eviction
n=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["total_tokens"])' < <(curl -s -d \
    "{\"messages\": $(cat "$tmp/conv.json"), \"max_tokens\": 1, \"temperature\": 0, \"cache_prompt\": false}" \
    "$RBASE/v1/chat/completions"))
[ "${n:-0}" -gt 100 ] && ok || bad "the conversation is $n tokens: it should overflow the window"
[ "$(metric "$RBASE" prefix_hits_total)" = 3 ] && ok || bad "hits: $(curl -s "$RBASE/metrics" | grep prefix)"
# prompt_tokens_total counts what was prefilled: the suffixes, and the last probe's whole prompt (cache_prompt false)
[ "$(metric "$RBASE" prompt_tokens_total)" = $(($(cat "$tmp/prefilled") + n - 1)) ] && ok ||
    bad "prompt_tokens_total $(metric "$RBASE" prompt_tokens_total), want $(cat "$tmp/prefilled") + $((n - 1))"

# ---- a reply that comes back as other tokens (here: edited by the client): the state where its prompt ended -------
python3 - "$RBASE" "$FBASE" <<'PY' && ok || bad "an edited reply: the prompt's state"
import json, subprocess, sys
reuse, fresh = sys.argv[1:3]
def ask(base, msgs):
    body = json.dumps({"messages": msgs, "max_tokens": 12, "temperature": 0})
    return json.loads(subprocess.run(["curl", "-s", "--max-time", "300", "-d", body, base + "/v1/chat/completions"],
                                     capture_output=True, text=True).stdout)
msgs = [{"role": "user", "content": "A dragon lived on the hill."}]
first = ask(reuse, msgs)
msgs += [{"role": "assistant", "content": "The end."}, {"role": "user", "content": "What did the dragon eat?"}]
a, b = ask(reuse, msgs), ask(fresh, msgs)
assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"], (a, b)
# the whole first prompt reused (not its reply: the client sent another), the rest prefilled
assert a["usage"]["prompt_tokens_details"]["cached_tokens"] == first["usage"]["prompt_tokens"], (first["usage"], a["usage"])
assert a["timings"]["prompt_n"] == a["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"], a["timings"]
PY
[ "$(metric "$RBASE" prefix_prompt_hits_total)" = 1 ] && [ "$(metric "$RBASE" prefix_hits_total)" = 4 ] && ok ||
    bad "prompt-state hit not counted: $(curl -s "$RBASE/metrics" | grep prefix_)"

# ---- completions through curl: a prompt, then the prompt + its answer + more text --------------------------------
body1='{"prompt": "The old lighthouse keeper", "max_tokens": 20, "temperature": 0}'
[ "$(post "$RBASE" /v1/completions "$body1" "$tmp/c1")" = 200 ] && ok || bad "completion 1: $(cat "$tmp/c1")"
body2=$(python3 -c 'import json,sys
c = json.load(open(sys.argv[1]))
print(json.dumps({"prompt": "The old lighthouse keeper" + c["choices"][0]["text"] + " Then the storm came,",
                  "max_tokens": 20, "temperature": 0}))' "$tmp/c1")
post "$RBASE" /v1/completions "$body2" "$tmp/c2r" >/dev/null
post "$FBASE" /v1/completions "$body2" "$tmp/c2f" >/dev/null
python3 - "$tmp/c1" "$tmp/c2r" "$tmp/c2f" <<'PY' && ok || bad "completion continued: $(cat "$tmp/c2r") vs $(cat "$tmp/c2f")"
import json, sys
c1, r, f = (json.load(open(p)) for p in sys.argv[1:4])
assert r["choices"][0]["text"] == f["choices"][0]["text"]
# the prompt and its answer were re-tokenised as generated (this model's tokens at a word's end), so the whole held
# conversation was reused: the prompt, the answer less its last token
assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == c1["usage"]["total_tokens"] - 1, r["usage"]
assert f["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
PY
# cache_prompt false: nothing reused, the same answer
body3=$(python3 -c 'import json,sys; b = json.loads(sys.argv[1]); b["prompt"] += " And"; b["cache_prompt"] = False
print(json.dumps(b))' "$body2")
post "$RBASE" /v1/completions "$body3" "$tmp/c3r" >/dev/null
post "$FBASE" /v1/completions "$body3" "$tmp/c3f" >/dev/null
python3 - "$tmp/c3r" "$tmp/c3f" <<'PY' && ok || bad "cache_prompt false: $(cat "$tmp/c3r")"
import json, sys
r, f = (json.load(open(p)) for p in sys.argv[1:3])
assert r["choices"][0]["text"] == f["choices"][0]["text"]
assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 and r["timings"]["prompt_n"] == r["usage"]["prompt_tokens"]
PY
expect='"cache_prompt" must be true or false'
st=$(post "$RBASE" /v1/completions '{"prompt": "x", "cache_prompt": "yes"}' "$tmp/e")
[ "$st" = 400 ] && grep -q "cache_prompt" "$tmp/e" && ok || bad "cache_prompt \"yes\": $st $(cat "$tmp/e") ($expect)"

# ---- the openai npm client: 3 turns, the last streamed ----------------------------------------------------------
if command -v node >/dev/null && [ -d tests/serve/node_modules/openai ]; then
    node tests/serve/openai_park.mjs "$RBASE/v1" "$FBASE/v1" tinygpt-flagship 3 >"$tmp/node.out" 2>&1 && ok ||
        bad "openai client: $(grep -v '^ok' "$tmp/node.out" | head -20)"
elif [ -n "${CI:-}" ]; then
    bad "openai client: needs node and tests/serve/node_modules (.ci/run installs them)"
else
    echo "SKIP openai client: needs node and tests/serve/node_modules (cd tests/serve && npm install)"
fi

# ---- --park-dir across a restart -------------------------------------------------------------------------------
parked=$(metric "$RBASE" 'parked_conversations{tier="ram"}')
[ "${parked:-0}" -ge 2 ] && ok || bad "parked in RAM: $parked"
# two states a conversation (where it ended, where its prompt ended) but where nothing was generated after the prompt
states=$(metric "$RBASE" 'parked_states{tier="ram"}')
[ "${states:-0}" -gt "$parked" ] && [ "$states" -le $((2 * parked)) ] && ok || bad "states $states, conversations $parked"
# no prompt state is held once every request is answered
[ "$(metric "$RBASE" park_held_bytes)" = 0 ] && ok || bad "held bytes left: $(metric "$RBASE" park_held_bytes)"
stop "$RPID" R # SIGTERM: the conversations in RAM are written to --park-dir
files=$(find "$tmp/park" -name '*.tgsnap' | wc -l)
[ "$files" = "$states" ] && ok || bad "$files files in --park-dir after SIGTERM, $states states were parked"
[ -z "$(find "$tmp/park" -name '*.tmp.*')" ] && ok || bad "temporary files left: $(ls "$tmp/park")"
start R2 --park-dir "$tmp/park"
R2PID=$SPID R2BASE=$BASE
grep -q "$states snapshots found, 0 files refused" "$tmp/R2.err" && ok || bad "restart: $(cat "$tmp/R2.err")"
# after a restart every file is a conversation of its own
[ "$(metric "$R2BASE" 'parked_conversations{tier="disk"}')" = "$states" ] && ok || bad "disk tier after restart"
python3 - "$R2BASE" "$FBASE" "$tmp/conv.json" <<'PY' && ok || bad "continued after a restart"
import json, subprocess, sys
reuse, fresh, conv = sys.argv[1:4]
msgs = json.load(open(conv)) + [{"role": "user", "content": "Tell me more."}]
def ask(base):
    body = json.dumps({"messages": msgs, "max_tokens": 24, "temperature": 0})
    return json.loads(subprocess.run(["curl", "-s", "--max-time", "300", "-d", body, base + "/v1/chat/completions"],
                                     capture_output=True, text=True).stdout)
a, b = ask(reuse), ask(fresh)
assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"], (a, b)
assert a["usage"]["prompt_tokens_details"]["cached_tokens"] > 100, a["usage"]
PY
[ "$(metric "$R2BASE" prefix_hits_total)" = 1 ] && ok || bad "restart: no hit"
cp "$(find "$tmp/park" -name '*.tgsnap' | head -1)" "$tmp/good.snap"
stop "$R2PID" R2

# ---- killed while writing a file: no file under a snapshot's name; a damaged file refused -------------------------
# --park-budget 1: every parked conversation goes to --park-dir at once; the test hook makes the first write stop
# half-way through its temporary file and the process kill itself (SIGKILL), as a crash in mid-write would
mkdir -p "$tmp/park2"
: >"$tmp/K.err"
TINYGPT_TEST_PARK_KILL_IN_WRITE=1000 "$T" serve "$MODEL" --port 0 "${POLICY[@]}" --park-budget 1 \
    --park-dir "$tmp/park2" 2>"$tmp/K.err" &
KPID=$!
for _ in $(seq 2400); do grep -q 'http://' "$tmp/K.err" && break; kill -0 $KPID 2>/dev/null || break; sleep 0.05; done
KBASE=http://127.0.0.1:$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/K.err" | sed 's/.*://')
curl -s --max-time 300 -d "$body1" "$KBASE/v1/completions" >/dev/null
wait $KPID 2>/dev/null
st=$?
[ "$st" = 137 ] && ok || bad "the hook did not kill the server (exit $st): $(tail -5 "$tmp/K.err")"
[ -z "$(find "$tmp/park2" -name '*.tgsnap')" ] && ok || bad "a snapshot name after a kill: $(ls -l "$tmp/park2")"
[ -n "$(find "$tmp/park2" -name '*.tgsnap.tmp.*' -size +0)" ] && ok || bad "no partial temporary file: the kill came too late"
# a damaged snapshot (cut in half) beside it, as a writer that was not atomic would leave
head -c $(($(stat -c %s "$tmp/good.snap") / 2)) "$tmp/good.snap" >"$tmp/park2/0000000000000bad.tgsnap"
start K2 --park-dir "$tmp/park2"
K2PID=$SPID K2BASE=$BASE
grep -q "0 snapshots found, 1 files refused" "$tmp/K2.err" && ok || bad "after the kill: $(cat "$tmp/K2.err")"
[ -z "$(find "$tmp/park2" -name '*.tmp.*')" ] && ok || bad "the partial temporary file was not removed at start"
post "$K2BASE" /v1/completions "$body2" "$tmp/k2" >/dev/null
python3 - "$tmp/k2" "$tmp/c2f" <<'PY' && ok || bad "after the kill: $(cat "$tmp/k2")"
import json, sys
k, f = (json.load(open(p)) for p in sys.argv[1:3])
assert k["choices"][0]["text"] == f["choices"][0]["text"] and k["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
PY
stop "$K2PID" K2

# ---- a --park-budget too small to hold a prompt state beside the running session: the conversation parks its end only
start H --park-budget 1 --park-dir "$tmp/park3"
HPID=$SPID HBASE=$BASE
post "$HBASE" /v1/completions "$body1" "$tmp/h1" >/dev/null
[ "$(metric "$HBASE" 'parked_states{tier="disk"}')" = 1 ] && [ "$(metric "$HBASE" 'parked_states{tier="ram"}')" = 0 ] &&
    [ "$(metric "$HBASE" park_held_bytes)" = 0 ] && ok ||
    bad "park budget 1: $(curl -s "$HBASE/metrics" | grep -E 'parked_states|held')"
stop "$HPID" H
stop "$FPID" F

echo "park: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
