#!/usr/bin/env bash
# test_bench.sh — `tinygpt bench`: the JSON report on a fixture model (every test present, speeds and byte counts
# consistent with each other, the roofline fields only with a bandwidth), the table, StreamingLLM checkpoints, and
# one-line usage errors. No timing is asserted, only that the numbers are there and coherent. Uses $TINYGPT (the
# sanitizer build); skipped with a message when the fixture is absent.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
FIXTURE_DIR=${TG_FIXTURE_DIR:-tests/data/fixtures}
MODEL=$FIXTURE_DIR/llama-spm/model-q8_0.gguf
if [ ! -x "$T" ]; then
    echo "test_bench: $T is not built" >&2
    exit 1
fi
if [ ! -f "$MODEL" ]; then
    echo "test_bench: $MODEL is absent; skipped"
    exit 0
fi
. tests/cli/lib.sh

# JSON report: pp, one tg per depth (sorted), fields coherent.
if "$T" bench "$MODEL" --prompt-tokens 16 --tokens 4 --depth 20,0 --threads 2 --bandwidth-mib 4 --json \
    --kv-quantize int8 >"$tmp/out" 2>"$tmp/err"; then
    if python3 - "$tmp/out" <<'EOF'; then ok; else bad "bench --json report: $(cat "$tmp/out")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
assert [x["test"] for x in r] == ["pp16", "tg4", "tg4"], r
assert [x["depth"] for x in r] == [0, 0, 20], r
assert d["kv_keys"] == "int8" and d["kv_values"] == "int8" and d["threads"] == 2
assert d["weight_bytes_per_token"] > 0 and d["peak_rss_bytes"] > 0 and d["read_bandwidth_bytes_per_s"] > 0
for x in r:
    assert x["seconds"] > 0 and x["tokens_per_s"] > 0 and x["kv_bytes_held"] > 0, x
    assert abs(x["tokens_per_s"] * x["seconds"] - x["tokens"]) < 1e-3 * x["tokens"], x
for x in r[1:]:
    assert x["bytes_per_token"] == d["weight_bytes_per_token"] + x["kv_bytes_read_per_token"], x
    # each test's roofline is the bandwidth of the probe's passes during it: one after its last token (4 < 16)
    assert x["bandwidth_passes"] == 1 and x["read_bandwidth_bytes_per_s"] > 0, x
    assert abs(x["roofline_tokens_per_s"] * x["bytes_per_token"] - x["read_bandwidth_bytes_per_s"]) < 1e-3 * x["read_bandwidth_bytes_per_s"], x
    assert abs(x["fraction_of_roofline"] - x["tokens_per_s"] / x["roofline_tokens_per_s"]) < 1e-3, x
assert r[2]["kv_bytes_read_per_token"] > r[1]["kv_bytes_read_per_token"]  # deeper cache, more to read
EOF
else
    bad "bench --json failed: $(cat "$tmp/err")"
fi

# The probe runs in a child: its 256 MiB buffer is not in the peak RSS, and 40 tokens get a pass every 16 and one
# after the last (3). Without generation tests the bandwidth is still measured (three passes at the end).
if "$T" bench "$MODEL" --prompt-tokens 0 --tokens 40 --threads 2 --bandwidth-mib 256 --json --no-warmup >"$tmp/p1" \
    2>"$tmp/err" && "$T" bench "$MODEL" --prompt-tokens 0 --tokens 40 --threads 2 --bandwidth-mib 0 --json --no-warmup \
    >"$tmp/p0" 2>>"$tmp/err" && "$T" bench "$MODEL" --prompt-tokens 8 --tokens 0 --bandwidth-mib 8 --json >"$tmp/p2" \
    2>>"$tmp/err"; then
    if python3 - "$tmp/p1" "$tmp/p0" "$tmp/p2" <<'EOF'; then ok; else bad "bench probe: $(cat "$tmp/p1" "$tmp/p0" "$tmp/p2")"; fi
import json, sys
with_bw, without, pp_only = (json.load(open(f)) for f in sys.argv[1:4])
assert with_bw["results"][0]["bandwidth_passes"] == 3, with_bw
assert with_bw["peak_rss_bytes"] < without["peak_rss_bytes"] + 64 * 2**20, (with_bw["peak_rss_bytes"], without["peak_rss_bytes"])
assert pp_only["read_bandwidth_bytes_per_s"] > 0 and "roofline_tokens_per_s" not in pp_only["results"][0], pp_only
EOF
else
    bad "bench probe runs failed: $(cat "$tmp/err")"
fi

# Without a bandwidth: no roofline fields; the table names every test.
if "$T" bench "$MODEL" --prompt-tokens 0 --tokens 3 --bandwidth-mib 0 --json >"$tmp/out" 2>"$tmp/err" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["results"]; assert len(r) == 1 and "roofline_tokens_per_s" not in r[0], d' "$tmp/out"; then
    ok
else
    bad "bench without bandwidth: $(cat "$tmp/out" "$tmp/err")"
fi
if "$T" bench "$MODEL" --prompt-tokens 8 --tokens 2 --depth 0,4 --bandwidth-mib 1 >"$tmp/out" 2>"$tmp/err" &&
    grep -q '^pp8 ' "$tmp/out" && [ "$(grep -c '^tg2 ' "$tmp/out")" = 2 ] && grep -q '^bandwidth ' "$tmp/out" &&
    grep -q '^peak RSS ' "$tmp/out"; then
    ok
else
    bad "bench table: $(cat "$tmp/out" "$tmp/err")"
fi

# StreamingLLM past the context with checkpoints.
if "$T" bench "$MODEL" --prompt-tokens 0 --tokens 40 --streaming-llm-window 8 --checkpoints 10,40 --bandwidth-mib 0 \
    --json >"$tmp/out" 2>"$tmp/err" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["checkpoints"]; assert [x["token"] for x in c] == [10, 40] and all(x["tokens_per_s"] > 0 for x in c), d' "$tmp/out"; then
    ok
else
    bad "bench checkpoints: $(cat "$tmp/out" "$tmp/err")"
fi

# --side-by-side: one session per precision in one process, the same rounds for each, ratios coherent with the turns'
# times; the sessions at the second depth continue the first's (20 + 8 <= 40). The table has a row per cache and depth.
if "$T" bench "$MODEL" --side-by-side fp16,int4,int2 --tokens 8 --turn 4 --depth 40,20 --threads 2 --json \
    >"$tmp/out" 2>"$tmp/err"; then
    if python3 - "$tmp/out" <<'EOF'; then ok; else bad "bench --side-by-side --json: $(cat "$tmp/out")"; fi
import json, statistics, sys
d = json.load(open(sys.argv[1]))
assert d["turn"] == 4 and d["threads"] == 2 and d["weight_bytes_per_token"] > 0, d
s = d["side_by_side"]
assert [x["depth"] for x in s] == [20, 40] and all(x["rounds"] == 2 for x in s), s
for x in s:
    c = x["caches"]
    assert [y["kv"] for y in c] == ["fp16", "int4", "int2"], c
    ref = c[0]["turn_ms_per_token"]
    for y in c:
        t = y["turn_ms_per_token"]
        assert len(t) == 2 and min(t) > 0, y
        assert abs(y["ms_per_token"] - statistics.median(t)) < 1e-5 and abs(y["tokens_per_s"] * y["ms_per_token"] - 1e3) < 1e-2, y
        assert abs(y["speed_vs_first"] - statistics.median(r / q for r, q in zip(ref, t))) < 1e-3, y
        assert y["speed_vs_first_q1"] <= y["speed_vs_first"] <= y["speed_vs_first_q3"], y
        assert y["bytes_per_token"] == d["weight_bytes_per_token"] + y["kv_bytes_read_per_token"], y
        assert abs(y["byte_ratio_vs_first"] - c[0]["bytes_per_token"] / y["bytes_per_token"]) < 1e-3, y
    assert c[0]["speed_vs_first"] == 1 and c[0]["byte_ratio_vs_first"] == 1, c[0]
    # int4 holds and reads fewer bytes than fp16 (int2's fp16 residual group outweighs its codes at these depths)
    assert c[0]["kv_bytes_held"] > c[1]["kv_bytes_held"] and c[0]["kv_bytes_read_per_token"] > c[1]["kv_bytes_read_per_token"], c
for a, b in zip(s[0]["caches"], s[1]["caches"]):  # each depth its own bytes: 20 + 4 against 40 + 4 tokens read
    assert b["kv_bytes_read_per_token"] > a["kv_bytes_read_per_token"] and b["bytes_per_token"] > a["bytes_per_token"], (a, b)
for x in s:  # no probe unless --bandwidth-mib is given
    assert "read_bandwidth_bytes_per_s" not in x and all("fraction_of_roofline" not in y for y in x["caches"]), x
EOF
else
    bad "bench --side-by-side failed: $(cat "$tmp/err")"
fi
# --side-by-side --bandwidth-mib: each depth's bandwidth from its passes (two before its rounds, two after) and each
# cache's roofline (the bandwidth over its bytes a token) and its tokens/s as a fraction of it.
if "$T" bench "$MODEL" --side-by-side fp16,int8 --tokens 4 --depth 0,6 --threads 2 --bandwidth-mib 8 --json \
    >"$tmp/out" 2>"$tmp/err"; then
    if python3 - "$tmp/out" <<'EOF'; then ok; else bad "bench --side-by-side --bandwidth-mib --json: $(cat "$tmp/out")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
s = d["side_by_side"]
assert [x["depth"] for x in s] == [0, 6], s
for x in s:
    bw = x["read_bandwidth_bytes_per_s"]
    assert bw > 0 and x["bandwidth_passes"] == 4, x
    for y in x["caches"]:
        roof = y["roofline_tokens_per_s"]
        assert abs(roof - bw / y["bytes_per_token"]) <= 1e-6 * roof, y
        assert abs(y["fraction_of_roofline"] - y["tokens_per_s"] / roof) <= 1e-6 * y["fraction_of_roofline"], y
EOF
else
    bad "bench --side-by-side --bandwidth-mib failed: $(cat "$tmp/err")"
fi
if "$T" bench "$MODEL" --side-by-side fp16,int8 --tokens 4 --depth 0,6 --bandwidth-mib 8 >"$tmp/out" 2>"$tmp/err" &&
    [ "$(grep -cE '^bandwidth  [0-9.]+ GB/s at depth (0|6) ' "$tmp/out")" = 2 ] &&
    [ "$(grep -cE '^ +(0|6) (fp16|int8) .* [0-9.]+%$' "$tmp/out")" = 4 ]; then
    ok
else
    bad "bench --side-by-side --bandwidth-mib table: $(cat "$tmp/out" "$tmp/err")"
fi
if "$T" bench "$MODEL" --side-by-side int8,fp32 --tokens 6 --turn 3 --depth 0,5 >"$tmp/out" 2>"$tmp/err" &&
    [ "$(grep -cE '^ +(0|5) (int8|fp32) .* -$' "$tmp/out")" = 4 ] && grep -q '^turns  .* 2 rounds' "$tmp/out" &&
    ! grep -q '^bandwidth' "$tmp/out"; then
    ok
else
    bad "bench --side-by-side table: $(cat "$tmp/out" "$tmp/err")"
fi

# Usage errors: one line, exit 2.
usage() {
    "$T" bench "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "tinygpt bench" "$tmp/err"; then ok; else bad "bench $* -> $rc: $(cat "$tmp/err")"; fi
}
usage "$MODEL" --kv-budget lots
usage "$MODEL" --depth 1,x
usage "$MODEL" --depth ""
usage "$MODEL" --tokens 5 --checkpoints 6
usage "$MODEL" --repetitions 0
usage "$MODEL" --kv-quantize int3
usage "$MODEL" --side-by-side fp16
usage "$MODEL" --side-by-side fp16,fp16
usage "$MODEL" --side-by-side fp16,int3
usage "$MODEL" --side-by-side fp16,,int4
usage "$MODEL" --side-by-side fp16,int4 --kv-quantize int8
usage "$MODEL" --side-by-side fp16,int4 --kv-quantize-keys int8
usage "$MODEL" --side-by-side fp16,int4 --repetitions 3
usage "$MODEL" --side-by-side fp16,int4 --checkpoints 1
usage "$MODEL" --side-by-side fp16,int4 --prompt-tokens 8
usage "$MODEL" --side-by-side fp16,int4 --tokens 3
usage "$MODEL" --side-by-side fp16,int4 --tokens 10
usage "$MODEL" --side-by-side fp16,int4 --no-warmup
usage "$MODEL" --depth 2000000000000
usage "$MODEL" --side-by-side fp16,int4 --turn 1
usage "$MODEL" --turn 4
"$T" bench --help >"$tmp/out" 2>&1 && grep -q "usage: tinygpt bench" "$tmp/out" && ok || bad "bench --help"

echo "test_bench: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
