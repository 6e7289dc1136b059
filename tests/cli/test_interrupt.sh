#!/usr/bin/env bash
# Ctrl-C in the measuring commands (issue 15): `perplexity` and `compare` interrupted by SIGINT print what they
# measured so far (a summary / table saying it was interrupted) and exit 130; and `sample ... 2>&1` starts its
# report on a new line instead of gluing it to the generated text. Release binary on the bundled model (the run must
# last long enough to be interrupted).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=$PWD/tinygpt
MODEL=models/tinygpt-flagship.gguf
if [ ! -x "$T" ] || [ ! -f "$MODEL" ]; then
    echo "skip: needs ./tinygpt and $MODEL"
    exit 0
fi

timeout -s INT --preserve-status 3 "$T" perplexity "$MODEL" models/data/valid.txt --threads 1 >"$tmp/o" 2>"$tmp/e"
st=$?
[ "$st" -eq 130 ] && ok || bad "perplexity interrupted: exit $st (want 130): $(tail -2 "$tmp/e")"
grep -q '^interrupted     Ctrl-C after [1-9][0-9]* of 303803 tokens' "$tmp/o" && ok ||
    bad "perplexity interrupted: no 'interrupted' line: $(cat "$tmp/o")"
grep -qE '^perplexity      [0-9]+\.[0-9]{4}$' "$tmp/o" && ok || bad "perplexity interrupted: no perplexity"

for i in $(seq 40); do printf 'Prompt number %d: And the priest shall\n' "$i"; done >"$tmp/prompts"
# the interrupt must come after the first prompt is measured: on a loaded machine (an ASan build, shared cores) that
# can take longer than 3 s, so wait longer until it has
for wait_s in 3 8 20; do
    timeout -s INT --preserve-status "$wait_s" "$T" compare "$MODEL" --prompts "$tmp/prompts" --threads 1 >"$tmp/o" 2>"$tmp/e"
    st=$?
    grep -q 'interrupted before a prompt was measured' "$tmp/e" || break
done
[ "$st" -eq 130 ] && ok || bad "compare interrupted: exit $st (want 130): $(tail -2 "$tmp/e")"
grep -q '^# interrupted: Ctrl-C after [1-9][0-9]* of 40 prompts' "$tmp/o" && ok ||
    bad "compare interrupted: no 'interrupted' line: $(head -3 "$tmp/o")"
grep -q '^mean match' "$tmp/o" && ok || bad "compare interrupted: no table"

# 2>&1: the report on its own line; stdout alone keeps the text as it was (no newline added)
"$T" sample "$MODEL" -p "And the priest shall" -n 10 --temperature 0 -t 1 >"$tmp/both" 2>&1
grep -q '^prompt: 4 tokens' "$tmp/both" && ok || bad "2>&1: the report is glued to the text: $(cat "$tmp/both")"
"$T" sample "$MODEL" -p "And the priest shall" -n 10 --temperature 0 -t 1 2>/dev/null >"$tmp/alone"
[ "$(tail -c 1 "$tmp/alone" | od -An -c | tr -d ' ')" != '\n' ] && ok || bad "stdout alone gained a newline"

echo "interrupt: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
