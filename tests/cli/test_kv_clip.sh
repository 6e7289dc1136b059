#!/usr/bin/env bash
# test_kv_clip.sh — the --kv-clip flag (issue #51): the banner's policy line names the clipped grids (int2: K and V,
# int4, int8: none by default; on: every KIVI store; off: none); clipping changes int2's perplexity and leaves a
# float cache's alone; a bad value is one usage error (exit 2, nothing on stdout); every command that takes the cache
# flags lists it in --help. Uses $TINYGPT (the sanitizer build) and the bundled model.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
[ -x "$T" ] || { echo "test_kv_clip: $T is not built" >&2; exit 1; }
. tests/cli/lib.sh

ppl() { "$T" perplexity models/data/valid.txt --max-tokens 96 --threads 1 --quiet "$@" >"$tmp/o" 2>"$tmp/e"; }
ppl_of() { awk '$1 == "perplexity" { print $2 }' "$tmp/o"; }
# expect FLAGS... -- WORDS: the banner names WORDS ("" = no clip)
banner() {
    local want=$1
    shift
    ppl "$@"
    local rc=$?
    if [ -z "$want" ]; then
        if [ $rc -eq 0 ] && ! grep -q "clipped" "$tmp/o"; then ok; else bad "$* names a clip: $(grep '^cache' "$tmp/o")"; fi
    elif [ $rc -eq 0 ] && grep -q "^cache .*, $want grids clipped" "$tmp/o"; then ok
    else bad "$*: expected '$want grids clipped': $(grep '^cache' "$tmp/o") $(head -c 300 "$tmp/e")"; fi
}
banner "K and V" --kv-quantize int2
a=$(ppl_of)
banner "" --kv-quantize int4
banner "" --kv-quantize int8
banner "K and V" --kv-quantize int8 --kv-clip on
banner "" --kv-quantize int2 --kv-clip off
b=$(ppl_of)
if [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]; then ok; else bad "int2's perplexity with clipped grids '$a' equals without '$b'"; fi
banner "" --kv-quantize fp16 --kv-clip on
c=$(ppl_of)
ppl --kv-quantize fp16
if [ -n "$c" ] && [ "$c" = "$(ppl_of)" ]; then ok; else bad "fp16 perplexity with --kv-clip on '$c' != without"; fi
ppl --kv-quantize int4 --kv-clip maybe
if [ $? -eq 2 ] && [ ! -s "$tmp/o" ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -qF -- "--kv-clip: expected on or off" "$tmp/e"; then ok
else bad "--kv-clip maybe: $(head -c 300 "$tmp/e")"; fi
for cmd in sample chat perplexity bench compare serve; do
    "$T" "$cmd" --help 2>&1 | grep -q -- "--kv-clip" && ok || bad "$cmd --help does not name --kv-clip"
done

echo "test_kv_clip: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
