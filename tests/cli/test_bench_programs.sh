#!/usr/bin/env bash
# test_bench_programs.sh — every measuring program of bench/ and every C tool of tools/ runs at tiny sizes, exits 0
# and prints what it should (no timing is asserted): bench/attention.c, bench/kernels.c (its fast kernels checked
# against the reference), bench/read_patterns.c, tools/chat_render.c (a template rendered) and tools/op_check.c (its
# error path: it needs a llama.cpp dump) under the sanitizers ($TINYGPT's folder); bench/decode_ab (both sides this
# tree's release library: `make bench-programs`, which `make test` builds) on the bundled model; the hostile-input
# reproducers of tools/hostile_input_repro.sh each end with a status of their own; every other bench/ and tools/
# script parses.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
B=$(dirname "$T")
. tests/cli/lib.sh

run() { # NAME EXPECTED_REGEX COMMAND...: exit 0 and a line matching the regex on stdout
    local name=$1 want=$2
    shift 2
    if "$@" >"$tmp/out" 2>"$tmp/err"; then
        if grep -Eq "$want" "$tmp/out"; then ok; else bad "$name: no line /$want/: $(head -c 600 "$tmp/out")"; fi
    else
        bad "$name: exit $?: $(tail -c 600 "$tmp/err")"
    fi
}

run attention '^int4 +[0-9.]+ ' "$B/bench/attention" 64 1 2 1 32 1 fp16,int8,int4,int2
run kernels '^Q8_0 +[0-9.e+-]+ ' "$B/bench/kernels" 64 256 2 1 1 q8_0,q4_k,f16
# each fast matvec within 5 % of the reference (the largest relative error over W's rows); a CPU whose kernels repack
# Q8_0 (AVX-512) adds a "Q8_0 rp" row, checked alike
awk '$1 ~ /^(F16|Q8_0|Q4_K)$/ { e = $2 == "rp" ? $3 : $2; if ($2 != "rp") seen[$1] = 1; if (e + 0 > 0.05) bad = 1 }
     END { exit !(length(seen) == 3 && !bad) }' "$tmp/out" && ok ||
    bad "kernels: a fast kernel far from the reference: $(cat "$tmp/out")"
run read_patterns '^stream-L1 +med' "$B/bench/read_patterns" 1152 4 128 64 1

cat >"$tmp/t.jinja" <<'T'
{% for m in messages %}<{{ m.role }}>{{ m.content }}
{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}
T
echo '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}' >"$tmp/vars.json"
run chat_render '^<user>hi$' "$B/tools/chat_render" "$tmp/t.jinja" "$tmp/vars.json"
grep -q '^<assistant>' "$tmp/out" && ok || bad "chat_render: no generation prompt: $(cat "$tmp/out")"

if "$B/tools/op_check" models/tinygpt-flagship.gguf "$tmp/no-dump" 0 >"$tmp/out" 2>"$tmp/err"; then
    bad "op_check without a dump exited 0"
elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'no-dump' "$tmp/err"; then ok
else bad "op_check: not one line naming the dump: $(cat "$tmp/err")"; fi

D=build/release/bench/decode_ab
if [ -x "$D" ]; then
    run decode_ab '^time B / A per pair of turns: median [0-9.]+' "$D" models/tinygpt-flagship.gguf fp16/int4 16 8 1
else
    bad "$D is not built (make bench-programs)"
fi

# tools/hostile_input_repro.sh: every reproducer ends in a status of its own (0 or 1), none killed or timed out (the
# release binary: compare's case takes half a minute under the sanitizers)
if bash tools/hostile_input_repro.sh ./tinygpt >"$tmp/out" 2>"$tmp/err"; then
    grep -o '\[rc=[0-9]*,' "$tmp/out" >"$tmp/rc"
    if [ "$(wc -l <"$tmp/rc")" -eq 11 ] && ! grep -qv '^\[rc=[01],$' "$tmp/rc"; then ok
    else bad "hostile_input_repro: not 11 cases ending in 0 or 1: $(tr '\n' ' ' <"$tmp/rc")"; fi
else
    bad "hostile_input_repro: exit $?: $(tail -c 400 "$tmp/err")"
fi

# the scripts of bench/ and tools/ that drive what the tests cannot run here (llama.cpp, large models, hours) parse
for f in bench/*.sh tools/*.sh; do bash -n "$f" 2>"$tmp/err" && ok || bad "$f does not parse: $(cat "$tmp/err")"; done
for f in bench/compare-llamacpp bench/kquant-speed bench/serve-load bench/*.py tools/*.py; do
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" 2>"$tmp/err" && ok ||
        bad "$f does not parse: $(tail -1 "$tmp/err")"
done

echo "test_bench_programs: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
