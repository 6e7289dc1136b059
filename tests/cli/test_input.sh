#!/usr/bin/env bash
# Prompts from files and standard input (issue 15): `sample --prompt-file FILE` and `--prompt-file -` give the same
# text as `--prompt TEXT`; a prompt longer than the context goes through a StreamingLLM window and without one
# fails with the context error; `perplexity -` and `compare --prompts -` read standard input; -c caps the context;
# the short forms -p -f -n -s -t -m; `tinygpt --version`.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
M=tests/data/fixtures/smollm2
G=(--temperature 0 --no-echo --threads 1 --tokens 12)

printf 'The quick brown fox' >"$tmp/p.txt"
"$T" sample "$M" --prompt "The quick brown fox" "${G[@]}" >"$tmp/ref" 2>/dev/null || bad "sample --prompt failed"
[ -s "$tmp/ref" ] && ok || bad "sample --prompt printed nothing"
"$T" sample "$M" --prompt-file "$tmp/p.txt" "${G[@]}" >"$tmp/out" 2>/dev/null || bad "--prompt-file failed"
cmp -s "$tmp/ref" "$tmp/out" && ok || bad "--prompt-file differs from --prompt"
"$T" sample "$M" --prompt-file - "${G[@]}" <"$tmp/p.txt" >"$tmp/out" 2>/dev/null || bad "--prompt-file - failed"
cmp -s "$tmp/ref" "$tmp/out" && ok || bad "--prompt-file - (stdin) differs from --prompt"
"$T" sample -m "$M" -f - -n 12 -t 1 -s 7 --temperature 0 --no-echo <"$tmp/p.txt" >"$tmp/out" 2>/dev/null ||
    bad "short forms failed"
cmp -s "$tmp/ref" "$tmp/out" && ok || bad "-m -f -n -t -s differ from the long forms"
"$T" sample "$M" -p "The quick brown fox" "${G[@]}" >"$tmp/out" 2>/dev/null
cmp -s "$tmp/ref" "$tmp/out" && ok || bad "-p differs from --prompt"

# errors: one line naming the flag, nothing on stdout
check_fail() { # expected-status expected-text args...
    local want=$1 text=$2
    shift 2
    "$T" "$@" >"$tmp/o" 2>"$tmp/e" </dev/null
    local st=$?
    if [ "$st" -ne "$want" ] || ! grep -qF -- "$text" "$tmp/e" || [ "$(wc -l <"$tmp/e")" -ne 1 ] || [ -s "$tmp/o" ]; then
        bad "$* -> exit $st, stderr: $(head -c 300 "$tmp/e")"
    else ok; fi
}
check_fail 2 "--prompt-file $tmp/none.txt: No such file" sample "$M" --prompt-file "$tmp/none.txt"
check_fail 2 "--prompt and --prompt-file" sample "$M" --prompt hi --prompt-file "$tmp/p.txt"
check_fail 2 "--model and a MODEL argument" sample "$M" -m "$M" -p hi
check_fail 2 "--prompt-file: missing value" sample "$M" -f

# a prompt far beyond the fixture's context: through a window it runs, without one the context error
python3 -c 'print(" ".join(["the cat sat on the mat and looked at the dog."] * 400))' >"$tmp/long.txt"
"$T" sample "$M" --prompt-file "$tmp/long.txt" "${G[@]}" --streaming-llm-window 32 >"$tmp/out" 2>"$tmp/err" ||
    bad "long prompt with a window: $(tail -1 "$tmp/err")"
grep -q "StreamingLLM cap" "$tmp/err" && ok || bad "long prompt with a window: no capped cache in the report"
check_fail 1 "--streaming-llm-window M" sample "$M" --prompt-file "$tmp/long.txt" "${G[@]}"

# '-' is standard input for the other commands that read text: perplexity FILE, compare --prompts FILE
"$T" perplexity "$M" "$tmp/long.txt" --max-tokens 200 --quiet >"$tmp/ppl_file" 2>/dev/null || bad "perplexity FILE failed"
"$T" perplexity "$M" - --max-tokens 200 --quiet <"$tmp/long.txt" >"$tmp/ppl_stdin" 2>/dev/null || bad "perplexity - failed"
[ "$(grep '^perplexity ' "$tmp/ppl_file")" = "$(grep '^perplexity ' "$tmp/ppl_stdin")" ] && grep -q '^perplexity ' "$tmp/ppl_file" &&
    ok || bad "perplexity - differs from perplexity FILE"
printf 'The quick brown fox\nOnce upon a time\n' >"$tmp/prompts"
"$T" compare "$M" --prompts "$tmp/prompts" --tokens 8 >"$tmp/cmp_file" 2>/dev/null || bad "compare --prompts FILE failed"
"$T" compare "$M" --prompts - --tokens 8 <"$tmp/prompts" >"$tmp/cmp_stdin" 2>/dev/null || bad "compare --prompts - failed"
cmp -s "$tmp/cmp_file" "$tmp/cmp_stdin" && ok || bad "compare --prompts - differs from --prompts FILE"

# -c / --context caps an unbounded cache
check_fail 1 "the context holds 16" sample "$M" -c 16 --prompt-file "$tmp/long.txt" "${G[@]}"
"$T" sample "$M" --context 300 "${G[@]}" -p hi 2>"$tmp/err" >/dev/null && grep -q "unbounded (context 300)" "$tmp/err" &&
    ok || bad "--context 300: $(cat "$tmp/err")"

"$T" --version >"$tmp/v" 2>&1 && grep -qE '^tinygpt [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/v" && ok || bad "--version: $(cat "$tmp/v")"

echo "input: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
