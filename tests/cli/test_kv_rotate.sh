#!/usr/bin/env bash
# test_kv_rotate.sh — the --kv-rotate flag (issue #51): on / values name the rotation in the banner's policy line
# only for KIVI stores; off and the default print what they printed before; a float cache's perplexity is the same
# with rotation on; a bad value is one usage error (exit 2, nothing on stdout); every command that takes the cache
# flags lists it in --help. Uses $TINYGPT (the sanitizer build) and the bundled model.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
[ -x "$T" ] || { echo "test_kv_rotate: $T is not built" >&2; exit 1; }
. tests/cli/lib.sh

ppl() { "$T" perplexity models/data/valid.txt --max-tokens 64 --threads 1 --quiet "$@" >"$tmp/o" 2>"$tmp/e"; }
ppl --kv-quantize int4 --kv-rotate on
if [ $? -eq 0 ] && grep -q "^cache .*K and V rotated (Hadamard 32)" "$tmp/o"; then ok; else bad "int4 --kv-rotate on: $(head -c 300 "$tmp/e")"; fi
ppl --kv-quantize int4 --kv-rotate values
if [ $? -eq 0 ] && grep -q "^cache .*V rotated (Hadamard 32)" "$tmp/o"; then ok; else bad "int4 --kv-rotate values"; fi
ppl --kv-quantize int4 --kv-rotate off
if [ $? -eq 0 ] && ! grep -q "rotated" "$tmp/o"; then ok; else bad "int4 --kv-rotate off names a rotation"; fi
ppl --kv-quantize int4
if [ $? -eq 0 ] && ! grep -q "rotated" "$tmp/o"; then ok; else bad "the default names a rotation"; fi
ppl --kv-quantize fp16 --kv-rotate on
a=$(awk '$1 == "perplexity" { print $2 }' "$tmp/o")
grep -q "rotated" "$tmp/o" && bad "an fp16 cache is rotated"
ppl --kv-quantize fp16
b=$(awk '$1 == "perplexity" { print $2 }' "$tmp/o")
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "fp16 perplexity with --kv-rotate on '$a' != without '$b'"; fi
ppl --kv-quantize int4 --kv-rotate sideways
if [ $? -eq 2 ] && [ ! -s "$tmp/o" ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -qF -- "--kv-rotate: expected on, values or off" "$tmp/e"; then ok
else bad "--kv-rotate sideways: $(head -c 300 "$tmp/e")"; fi
for cmd in sample chat perplexity bench compare serve; do
    "$T" "$cmd" --help 2>&1 | grep -q -- "--kv-rotate" && ok || bad "$cmd --help does not name --kv-rotate"
done

echo "test_kv_rotate: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
