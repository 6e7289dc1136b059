#!/usr/bin/env bash
# Where `tinygpt serve` spends its time while N clients decode together: starts a release server, sends N greedy
# requests of TOKENS tokens (curl), waits SETTLE seconds for their prompts to be prefilled, records the server with
# `perf record` for SECONDS seconds, stops it, and prints perf's top symbols (self time). Bounded: the server is
# killed at the end, every curl has a time limit. Needs perf (Debian: linux-perf) and curl.
# usage: bench/serve-load-profile.sh MODEL [N=16] [TOKENS=120] [SETTLE=25] [SECONDS=25] [-- SERVER FLAGS...]
#        (server flags default: --kv-quantize fp16)
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/serve-load-profile.sh MODEL [N] [TOKENS] [SETTLE] [SECONDS] [-- FLAGS...]" >&2; exit 2; }
model=$1
shift
n=16 tokens=120 settle=25 secs=25
for v in n tokens settle secs; do
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then
        printf -v "$v" '%s' "$1"
        shift
    fi
done
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--kv-quantize fp16)
command -v perf >/dev/null || { echo "serve-load-profile.sh: no perf (Debian: linux-perf)" >&2; exit 1; }
tmp=$(mktemp -d)
make -j2 tinygpt >/dev/null
./tinygpt serve "$model" --port 0 --threads 2 --max-sessions "$n" --queue "$n" --context $((tokens + 64)) \
    "${flags[@]}" 2>"$tmp/server.log" &
server=$!
trap 'kill $server 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/server.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "serve-load-profile.sh: the server did not start:" >&2; cat "$tmp/server.log" >&2; exit 1; }
curl -s -m 300 "http://127.0.0.1:$port/v1/completions" -d '{"prompt": "warm up", "max_tokens": 2}' >/dev/null
for i in $(seq 1 "$n"); do
    curl -s -m $((settle + secs + 600)) "http://127.0.0.1:$port/v1/completions" -d "{\"prompt\": \"Client $i: Once upon a time\", \"max_tokens\": $tokens, \"temperature\": 0, \"ignore_eos\": true}" >/dev/null &
done
sleep "$settle"
perf record -F 499 -g -p "$server" -o "$tmp/perf.data" -- sleep "$secs" 2>/dev/null >/dev/null
echo "# bench/serve-load-profile.sh $model $n $tokens $settle $secs -- ${flags[*]} (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
perf report -i "$tmp/perf.data" --no-children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]+\.[0-9]+%' | head -20
