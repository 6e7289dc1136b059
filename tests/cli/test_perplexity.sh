#!/usr/bin/env bash
# test_perplexity.sh — `tinygpt perplexity` and `tinygpt compare` on the fixture models: the per-position NLL and the
# perplexity against values computed here, independently, from the transformers logits of each fixture
# (logits.f32 row t scores prompt_ids[t + 1]); chunked == token by token (identical CSVs) under a bounded KIVI cache;
# segments past the context, --no-context-limit, the recomputation oracle, --every, --kl-base; the greedy-match table;
# usage errors. Uses $TINYGPT (the sanitizer build), od, awk and jq; fixtures that are absent are skipped with a
# message. Exit status is non-zero when any check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
FIXTURE_DIR=${TG_FIXTURE_DIR:-tests/data/fixtures}
if [ ! -x "$T" ]; then
    echo "test_perplexity: $T is not built" >&2
    exit 1
fi

. tests/cli/lib.sh

# run ARGS...: stdout in $tmp/out, stderr in $tmp/err, status in $rc.
run() {
    "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
# field NAME: the value after NAME in the summary on stdout.
field() { awk -v k="$1" '$1 == k {print $2; exit}' "$tmp/out"; }

# expect_fail STATUS PATTERN ARGS...: exit STATUS and one line on stderr containing PATTERN.
expect_fail() {
    local want=$1 pattern=$2
    shift 2
    run "$@"
    if [ "$rc" -ne "$want" ]; then
        bad "tinygpt $* -> exit $rc, want $want; stderr: $(head -c 300 "$tmp/err")"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "tinygpt $* -> stderr is not one line with '$pattern': $(head -c 300 "$tmp/err")"
    else
        ok
    fi
}

# close A B TOL WHAT: |A - B| <= TOL.
close() {
    if awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; then
        ok
    else
        bad "$4: $1 vs $2 (tolerance $3)"
    fi
}

# ---- usage -------------------------------------------------------------------------------------------------------
run perplexity --help
if [ "$rc" -eq 0 ] && grep -qF "usage: tinygpt perplexity" "$tmp/out" && grep -qF -- "--kv-quantize-sinks" "$tmp/out"; then
    ok
else
    bad "perplexity --help -> exit $rc"
fi
run compare --help
if [ "$rc" -eq 0 ] && grep -qF "usage: tinygpt compare" "$tmp/out"; then ok; else bad "compare --help -> exit $rc"; fi
expect_fail 2 "expected [MODEL] FILE" perplexity
expect_fail 1 "m.gguf" perplexity m.gguf
expect_fail 2 "--chunk: expected a positive integer up to 4096, got '0'" perplexity m.gguf f.txt --chunk 0
expect_fail 2 "--every: expected a positive integer" perplexity m.gguf f.txt --every -3
expect_fail 2 "--max-tokens: expected an integer from 2" perplexity m.gguf f.txt --max-tokens 1
expect_fail 2 "--kl-base: expected one of fp32" perplexity m.gguf f.txt --kl-base fp64
expect_fail 2 "--recompute-window re-runs each window" perplexity m.gguf f.txt --recompute-window 8 --streaming-llm-window 8
expect_fail 2 "--kv-quantize: expected one of fp32" perplexity m.gguf f.txt --kv-quantize int3
expect_fail 2 "--prompts FILE is required" compare
expect_fail 2 "--prompts FILE is required" compare m.gguf
expect_fail 2 "--kv-quantize: expected fp32 fp16 bf16 int8 int4 int2 or KEYS/VALUES, got 'int3'" \
    compare m.gguf --prompts p.txt --kv-quantize int8,int3
expect_fail 2 "--kv-quantize-keys: give keys and values as an item KEYS/VALUES" \
    compare m.gguf --prompts p.txt --kv-quantize-keys int8
expect_fail 1 "$tmp/missing.gguf" perplexity "$tmp/missing.gguf" "$tmp/missing.txt"

# ---- against the transformers logits of each fixture --------------------------------------------------------------
# reference_nll DIR: "t nll" per row t of logits.f32 (the NLL of prompt_ids[t + 1]), computed with od and awk.
reference_nll() {
    local dir=$1 vocab
    vocab=$(jq -r '.logits_shape[1]' "$dir/golden.json")
    jq -r '.prompt_ids | map(tostring) | join(" ")' "$dir/golden.json" >"$tmp/ref_ids"
    od -An -v -tf4 -w$((4 * vocab)) "$dir/logits.f32" |
        awk -v ids="$(cat "$tmp/ref_ids")" 'BEGIN { n = split(ids, id, " ") }
            { t = NR - 1; if (t + 1 >= n) exit
              m = $1; for (i = 2; i <= NF; i++) if ($i > m) m = $i
              s = 0; for (i = 1; i <= NF; i++) s += exp($i - m)
              printf "%d %.9f\n", t + 1, m + log(s) - $(id[t + 2] + 1) }'
}

checked=0
for name in smollm2 llama-spm mistral-sw; do
    dir=$FIXTURE_DIR/$name
    if [ ! -f "$dir/golden.json" ] || [ ! -f "$dir/logits.f32" ]; then
        echo "test_perplexity: $dir absent, skipped"
        continue
    fi
    checked=$((checked + 1))
    reference_nll "$dir" >"$tmp/ref.txt"
    tr ' ' '\n' <"$tmp/ref_ids" >"$tmp/ids.txt"
    n_ids=$(wc -l <"$tmp/ids.txt")
    ref_mean=$(awk '{ s += $2 } END { printf "%.9f", s / NR }' "$tmp/ref.txt")
    # the F32 GGUF too, unless the model has a sliding window: llama.cpp's converter writes Mistral as plain llama
    # and drops it (the folder is checked; tests/unit/test_fixtures.c covers what the file can match)
    gguf=
    if [ "$(jq -r ".sliding_window // 0" "$dir/config.json")" = 0 ]; then
        gguf=$(ls "$dir"/model-f32.gguf 2>/dev/null | head -1)
    fi
    for model in "$dir" $gguf; do
        run perplexity "$model" "$tmp/ids.txt" --ids --csv "$tmp/nll.csv" --quiet
        if [ "$rc" -ne 0 ]; then
            bad "perplexity $model -> exit $rc: $(head -c 300 "$tmp/err")"
            continue
        fi
        # every position within 2e-4 nats of the reference (fp32 logits agree to ~1e-5 with transformers)
        worst=$(awk -F, 'NR == FNR { r[$1] = $2; next } FNR > 1 { d = $4 - r[$1]; if (d < 0) d = -d; if (d > w) w = d; c++ }
                         END { if (c != n) print "count " c; else printf "%.3g", w }' n="$((n_ids - 1))" \
                    FS=' ' "$tmp/ref.txt" FS=, "$tmp/nll.csv")
        close "$worst" 0 2e-4 "$name ($model): worst per-position NLL difference against transformers"
        close "$(field scored)" "$((n_ids - 1))" 0 "$name: scored tokens"
        close "$(field mean_nll)" "$ref_mean" 2e-5 "$name ($model): mean NLL against transformers"
        close "$(field perplexity)" "$(awk -v m="$ref_mean" 'BEGIN { printf "%.4f", exp(m) }')" 2e-3 \
            "$name ($model): perplexity against transformers"
    done
done
[ "$checked" -gt 0 ] || echo "test_perplexity: no fixture found in $FIXTURE_DIR: reference checks skipped"

# ---- protocols, on the smollm2 fixture (context 256) -----------------------------------------------------------------
dir=$FIXTURE_DIR/smollm2
if [ -f "$dir/golden.json" ]; then
    ctx=$(jq -r '.max_position_embeddings' "$dir/config.json")
    # 3 * ctx ids: the prompt ids repeated
    jq -r '.prompt_ids[]' "$dir/golden.json" >"$tmp/p.txt"
    : >"$tmp/long.txt"
    while [ "$(wc -l <"$tmp/long.txt")" -lt $((3 * ctx)) ]; do cat "$tmp/p.txt" >>"$tmp/long.txt"; done
    head -n $((3 * ctx)) "$tmp/long.txt" >"$tmp/long3.txt"
    n=$((3 * ctx))

    # chunked == token by token: a bounded int4 cache with re-positioning, KL against fp32, every column identical
    flags=(--ids --quiet --kv-quantize int4 --kv-group-size 16 --kv-residual 16 --streaming-llm-sink 4
           --streaming-llm-window 40 --streaming-llm-reposition --kl-base fp32 --max-tokens 300)
    run perplexity "$dir" "$tmp/long3.txt" "${flags[@]}" --csv "$tmp/c64.csv"
    cp "$tmp/out" "$tmp/out64"
    run perplexity "$dir" "$tmp/long3.txt" "${flags[@]}" --csv "$tmp/c1.csv" --chunk 1
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/c64.csv" "$tmp/c1.csv" && [ "$(wc -l <"$tmp/c1.csv")" -eq 300 ]; then
        ok
    else
        bad "chunk 64 vs chunk 1: CSVs differ (exit $rc): $(diff "$tmp/c64.csv" "$tmp/c1.csv" | head -3)"
    fi
    run perplexity "$dir" "$tmp/long3.txt" "${flags[@]}" --chunk 7
    if [ "$rc" -eq 0 ] && [ "$(grep -E '^(mean_nll|kl_mean|top1_agree)' "$tmp/out")" = \
        "$(grep -E '^(mean_nll|kl_mean|top1_agree)' "$tmp/out64")" ]; then
        ok
    else
        bad "chunk 7 vs chunk 64: summaries differ"
    fi
    # a lossy cache is not the base: some divergence, and the table says so
    kl=$(field kl_mean)
    if awk -v k="$kl" 'BEGIN { exit !(k > 0) }' && grep -q "^protocol        one stream through the bounded cache" "$tmp/out"; then
        ok
    else
        bad "int4 bounded: kl_mean '$kl' should be > 0, protocol one stream"
    fi

    # fp32 against its own base: zero divergence, full agreement, same perplexity
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens 200 --kl-base fp32
    if [ "$rc" -eq 0 ] && [ "$(field kl_mean)" = "0" ] && [ "$(field top1_agree)" = "100.0000" ] &&
        [ "$(field perplexity)" = "$(field base_perplexity)" ]; then
        ok
    else
        bad "fp32 vs fp32 base: $(grep -E 'kl_mean|top1|perplexity' "$tmp/out" | tr '\n' ' ')"
    fi

    # past the context without a bounded cache: independent segments, the context column restarts
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --csv "$tmp/seg.csv"
    seg_ok=$(awk -F, -v c="$ctx" 'NR > 1 { if ($1 <= c && $2 != $1) bad++; if ($1 > c && $1 <= 2 * c && $2 != $1 - c) bad++; n++ }
                                   END { print (bad == 0 && n == 3 * c - 1) }' "$tmp/seg.csv")
    if [ "$rc" -eq 0 ] && [ "$seg_ok" = 1 ] && grep -q "independent segments of $ctx tokens" "$tmp/out"; then
        ok
    else
        bad "segments: exit $rc, context column ok=$seg_ok"
    fi
    # the first segment's NLLs are those of a run over its tokens alone (index ctx is scored by its last row)
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens $((ctx + 1)) --csv "$tmp/first.csv"
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/first.csv" <(head -n $((ctx + 1)) "$tmp/seg.csv"); then
        ok
    else
        bad "first segment differs from a run over its tokens alone"
    fi
    # the same text through one cache without the limit: one stream, contexts up to n - 1
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --no-context-limit --csv "$tmp/nolimit.csv"
    last_ctx=$(tail -n 1 "$tmp/nolimit.csv" | cut -d, -f2)
    if [ "$rc" -eq 0 ] && [ "$last_ctx" = $((n - 1)) ] && cmp -s <(head -n $((ctx + 1)) "$tmp/nolimit.csv") "$tmp/first.csv"; then
        ok
    else
        bad "--no-context-limit: exit $rc, last context '$last_ctx' (want $((n - 1))), first $ctx rows as a fresh run"
    fi
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens $((ctx + 5))
    if [ "$rc" -eq 0 ] && grep -q "independent segments" "$tmp/out"; then ok; else bad "segments for ctx + 5 tokens"; fi

    # the recomputation oracle: the token at index 40 with a window of 16 is the last token of ids[24 .. 40] alone
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens 61 --recompute-window 16 --every 5 \
        --csv "$tmp/rec.csv"
    rec_rows=$(($(wc -l <"$tmp/rec.csv") - 1))
    sed -n '25,41p' "$tmp/long3.txt" >"$tmp/win.txt"
    rec40=$(awk -F, '$1 == 40 {print $4}' "$tmp/rec.csv")
    "$T" perplexity "$dir" "$tmp/win.txt" --ids --quiet --csv "$tmp/win.csv" >/dev/null 2>&1
    alone=$(awk -F, '$1 == 16 {print $4}' "$tmp/win.csv")
    ctx40=$(awk -F, '$1 == 40 {print $2}' "$tmp/rec.csv")
    if [ "$rc" -eq 0 ] && [ "$rec_rows" -eq 12 ] && [ -n "$rec40" ] && [ "$rec40" = "$alone" ] && [ "$ctx40" = 16 ]; then
        ok
    else
        bad "recompute: exit $rc, rows $rec_rows (want 12), index 40: '$rec40' vs alone '$alone', context '$ctx40'"
    fi
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens 101 --every 10
    if [ "$rc" -eq 0 ] && [ "$(field scored)" = 10 ]; then ok; else bad "--every 10 over 101 tokens: scored $(field scored)"; fi

    # text input: the prompt text itself
    jq -r '.prompt_text' "$dir/golden.json" >"$tmp/prompt.txt"
    run perplexity "$dir" "$tmp/prompt.txt" --quiet
    if [ "$rc" -eq 0 ] && [ "$(field scored)" -gt 10 ]; then ok; else bad "text input: exit $rc"; fi
    printf 'x' >"$tmp/one.txt"
    expect_fail 1 "at least 2 are needed" perplexity "$dir" "$tmp/one.txt"
    printf '1 2 99999\n' >"$tmp/badids.txt"
    expect_fail 1 "entry 3 is token id 99999, outside the model's vocabulary [0, 1024)" perplexity "$dir" "$tmp/badids.txt" --ids
    printf '1 2 12x 4\n' >"$tmp/badids2.txt"
    expect_fail 1 "entry 3 ('12x') is not a token id (a decimal integer)" perplexity "$dir" "$tmp/badids2.txt" --ids

    # ---- the attention-sink meter ---------------------------------------------------------------------------------
    # a bounded cache (sink 4 + window 40, every query past position 31 sees >= 32 tokens): the meter's lines and
    # CSV, shares in [0, 1] and nested, the perplexity unchanged by the meter, chunk 1 == chunk 64, threads 1 == 2,
    # and the same numbers through the unbounded segments protocol
    mflags=(--ids --quiet --streaming-llm-sink 4 --streaming-llm-window 40 --streaming-llm-reposition --max-tokens 200)
    run perplexity "$dir" "$tmp/long3.txt" "${mflags[@]}" --threads 1
    cp "$tmp/out" "$tmp/plain"
    run perplexity "$dir" "$tmp/long3.txt" "${mflags[@]}" --threads 1 --attention-stats --attention-csv "$tmp/a1.csv"
    cp "$tmp/out" "$tmp/a1.out"
    heads=$(grep -c '^attn_head  *[0-9]' "$tmp/out")
    summed=$(awk '$1 == "attn_queries" {print $2}' "$tmp/out")
    if [ "$rc" -eq 0 ] && [ "$heads" = 12 ] && [ "$(wc -l <"$tmp/a1.csv")" = 13 ] &&
        head -n 1 "$tmp/a1.csv" | grep -qx 'layer,head,queries,first1,first4,first16,newest16' &&
        grep -q '^attn_summary    mean over 12 heads: first1 ' "$tmp/out" &&
        [ "$summed" = $((3 * (199 - 31))) ] &&
        [ "$(grep -E '^(mean_nll|perplexity)' "$tmp/out")" = "$(grep -E '^(mean_nll|perplexity)' "$tmp/plain")" ] &&
        awk -F, 'NR > 1 { if (!($4 >= 0 && $4 <= $5 && $5 <= $6 && $6 <= 1 && $7 >= 0 && $6 + $7 <= 1.000001 && $3 == 168)) bad = 1 }
                 END { exit bad }' "$tmp/a1.csv"; then
        ok
    else
        bad "--attention-stats: exit $rc, $heads head lines, $summed queries: $(head -c 600 "$tmp/out") $(head -c 300 "$tmp/a1.csv")"
    fi
    run perplexity "$dir" "$tmp/long3.txt" "${mflags[@]}" --threads 2 --chunk 1 --attention-csv "$tmp/a2.csv"
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/a1.csv" "$tmp/a2.csv" &&
        [ "$(grep '^attn_' "$tmp/out")" = "$(grep '^attn_' "$tmp/a1.out")" ]; then
        ok
    else
        bad "--attention-stats: threads 2 / chunk 1 differ from threads 1 / chunk 64: $(diff "$tmp/a1.csv" "$tmp/a2.csv" | head -4)"
    fi
    # unbounded, 2 segments of the context (256): queries summed per layer = 2 * (255 - 31) + (the second segment's)
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens 400 --attention-stats
    q=$(awk '$1 == "attn_queries" {print $2}' "$tmp/out")
    if [ "$rc" -eq 0 ] && [ "$q" = $((3 * ((256 - 31) + (399 - 256 - 31)))) ] &&
        grep -q "independent segments of 256 tokens" "$tmp/out"; then
        ok
    else
        bad "--attention-stats over segments: exit $rc, queries '$q': $(head -c 400 "$tmp/out")"
    fi
    expect_fail 2 "--attention-stats meters one pass" perplexity "$dir" "$tmp/long3.txt" --attention-stats \
        --recompute-window 8
    expect_fail 1 "$tmp/nodir/a.csv" perplexity "$dir" "$tmp/long3.txt" --ids --max-tokens 40 \
        --attention-csv "$tmp/nodir/a.csv"
    if [ ! -s "$tmp/out" ]; then ok; else bad "--attention-csv to a missing folder printed on stdout"; fi
    run perplexity "$dir" "$tmp/long3.txt" --ids --quiet --max-tokens 300 --context 100
    if [ "$rc" -eq 0 ] && grep -q "independent segments of 100 tokens" "$tmp/out"; then
        ok
    else
        bad "--context 100: exit $rc: $(head -c 400 "$tmp/out")"
    fi

    # ---- compare -----------------------------------------------------------------------------------------------
    printf 'It is a truth universally acknowledged\n\nThe weather today\n' >"$tmp/prompts.txt"
    run compare "$dir" --prompts "$tmp/prompts.txt" --tokens 12 --kv-quantize fp32,int8,int2/fp16
    rows=$(grep -c "^It is a truth\|^The weather" "$tmp/out")
    fp32col=$(awk '/^It is a truth|^The weather/ {print $(NF - 2)}' "$tmp/out" | sort -u)
    mean=$(awk '/^mean match/ {print $3}' "$tmp/out")
    if [ "$rc" -eq 0 ] && [ "$rows" = 2 ] && [ "$fp32col" = 12 ] && [ "$mean" = 100.0 ] &&
        grep -q "K int2/V fp16" "$tmp/out"; then
        ok
    else
        bad "compare: exit $rc, rows $rows, fp32 column '$fp32col', mean '$mean': $(cat "$tmp/out" "$tmp/err" | head -c 600)"
    fi
    run compare "$dir" --prompts "$tmp/prompts.txt" --tokens 12 --kv-quantize int4 --markdown \
        --streaming-llm-window 8 --kv-residual 0
    if [ "$rc" -eq 0 ] && grep -q "^| prompt | int4 |" "$tmp/out" && grep -q "^| \*\*mean match\*\* |" "$tmp/out" &&
        grep -q "StreamingLLM sink 4 + window 8" "$tmp/out"; then
        ok
    else
        bad "compare --markdown with a window: exit $rc: $(head -c 400 "$tmp/out")"
    fi
else
    echo "test_perplexity: $dir absent: protocol checks skipped"
fi

echo "test_perplexity: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
