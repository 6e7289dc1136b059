#!/usr/bin/env bash
# test_ggml_types.sh — models whose weights are the GGUF block types tinygpt reads but does not write (Q4_1, Q5_0,
# Q5_1, Q2_K..Q6_K, IQ4_NL): tools/gen_random_gguf writes a 2-layer random-weight model (tiny-256) in each type;
# `info` names the type, greedy `sample` runs and gives the same tokens with 1 and 2 threads, and `perplexity`
# (teacher-forced, every logit used) is a finite number. (A K-quant tensor whose rows are not whole 256-blocks:
# test_errors.sh's qblock case.)
source tests/cli/lib.sh
gen="$(dirname "$TINYGPT")/tools/gen_random_gguf"
[ -x "$gen" ] || { echo "FAIL: $gen not built (make unit-tests)"; exit 1; }
printf 'Once upon a time there was a little dog. The dog liked to run and play in the park.\n' >"$tmp/text.txt"

for t in q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl; do
    m="$tmp/$t.gguf"
    if ! "$gen" --shape tiny-256 --type "$t" --out "$m" >/dev/null 2>"$tmp/err"; then
        bad "$t: generator failed: $(cat "$tmp/err")"
        continue
    fi
    T=$(echo "$t" | tr a-z A-Z)
    if "$TINYGPT" info "$m" >"$tmp/info" 2>&1 && grep -q "$T" "$tmp/info"; then ok; else
        bad "$t: info does not name $T"
    fi
    if "$TINYGPT" sample "$m" --prompt "Once upon" --tokens 12 --temperature 0 --threads 1 >"$tmp/s1" 2>"$tmp/e1" &&
        "$TINYGPT" sample "$m" --prompt "Once upon" --tokens 12 --temperature 0 --threads 2 >"$tmp/s2" 2>"$tmp/e2"; then
        if cmp -s "$tmp/s1" "$tmp/s2" && [ -s "$tmp/s1" ]; then ok; else
            bad "$t: greedy text differs between 1 and 2 threads"
        fi
    else
        bad "$t: sample failed: $(cat "$tmp/e1" "$tmp/e2" 2>/dev/null | tail -1)"
    fi
    if "$TINYGPT" perplexity "$m" "$tmp/text.txt" >"$tmp/ppl" 2>&1; then
        p=$(grep -o '^perplexity *[0-9][0-9.e+]*' "$tmp/ppl" | head -1 | grep -o '[0-9][0-9.e+]*$')
        if [ -n "$p" ] && awk -v p="$p" 'BEGIN { exit !(p > 1 && p < 1e9) }'; then ok; else
            bad "$t: perplexity not a finite number: $(tail -2 "$tmp/ppl")"
        fi
    else
        bad "$t: perplexity failed: $(tail -1 "$tmp/ppl")"
    fi
done

echo "test_ggml_types: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
