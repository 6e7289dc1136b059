# results_tinystories.sh — sourced by tools/results.sh: RESULTS.md's section on a model nobody here trained, the real
# TinyStories-656K folder (../shared/testdata/models/TinyStories-656K-hf, issue 13 item 6). Uses results.sh's `job`,
# `wait_all`, `get`, $bin, $work, $jobs, $valid, $long, $valid_tokens, $sink_tokens, $quick.
#
#   ts_jobs     runs the perplexity jobs (named ts-*) and makes the story text they need
#   ts_block    prints the section, between <!-- TINYSTORIES BEGIN --> and <!-- TINYSTORIES END -->
#   ts_splice F replaces that block in F (or puts it before "## Soak", or at the end): `results.sh --only tinystories`
#
# Texts: models/data/valid.txt (the flagship's held-out text: Austen, out of TinyStories' domain, so both models are
# judged on the same tokens) and a story text in the model's own domain: stories the model samples itself (seeds
# 1..N, temperature 1, no top-k / top-p, each from BOS to its end-of-story token), joined by newlines — made by this
# script, not committed. (No TinyStories text written by people is in this checkout or in ../shared.)
ts_model=../shared/testdata/models/TinyStories-656K-hf
ts_stories=$work/ts-stories.txt
ts_n_stories=160
[ "$quick" = 1 ] && ts_n_stories=24
# rows: "name|label|flags" — every cache precision under its defaults, KIVI's published setting, K/V mixes
ts_rows=(
    "fp32|fp32 (the base itself)|--kv-quantize fp32"
    "fp16|fp16|--kv-quantize fp16"
    "bf16|bf16|--kv-quantize bf16"
    "int8|int8 (defaults)|--kv-quantize int8"
    "int4|int4 (defaults)|--kv-quantize int4"
    "int2|int2 (defaults)|--kv-quantize int2"
    "int8-kivi|int8, KIVI's setting (G 32, R 128, fp32 residual)|--kv-quantize int8 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "int4-kivi|int4, KIVI's setting|--kv-quantize int4 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "int2-kivi|int2, KIVI's setting|--kv-quantize int2 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "k8v4|K int8 / V int4|--kv-quantize-keys int8 --kv-quantize-values int4"
    "k4v8|K int4 / V int8|--kv-quantize-keys int4 --kv-quantize-values int8"
)
ts_sink_precisions=(fp32 fp16 bf16 int8 int4 int2)
ts_stream=(--streaming-llm-sink 4 --streaming-llm-window 256 --streaming-llm-reposition)

ts_mib() { awk -v b="$1" 'BEGIN { if (b == "") print "–"; else printf "%.1f KiB", b / 1024 }'; }
# ts_verdict VALUE LIMIT: "met" when VALUE <= LIMIT
ts_verdict() { awk -v v="$1" -v l="$2" 'BEGIN { if (v == "" || v == "–") print "no data"; else print (v + 0 <= l ? "**met**" : "**missed**") }'; }

# ts_make_stories: $ts_stories from the model's own samples (re-used while newer than the binary)
ts_make_stories() {
    if [ -s "$ts_stories" ] && [ "$ts_stories" -nt "$bin" ]; then return 0; fi
    local s
    for s in $(seq 1 "$ts_n_stories"); do
        "$bin" sample "$ts_model" --prompt "" --tokens 500 --seed "$s" --temperature 1 --top-k 0 --top-p 1 --no-echo \
            --threads 1 --kv-quantize fp32 2>/dev/null || return 1
        echo
    done >"$ts_stories.tmp" && mv "$ts_stories.tmp" "$ts_stories"
}

ts_jobs() {
    [ -d "$ts_model" ] || { echo "results.sh: $ts_model not found (TinyStories section skipped)" >&2; return 1; }
    ts_make_stories || { echo "results.sh: sampling the TinyStories text failed" >&2; return 1; }
    echo "results.sh: TinyStories-656K runs" >&2
    local saved=$job_model r name label flags p
    job_model=$ts_model
    for r in "${ts_rows[@]}"; do
        IFS='|' read -r name label flags <<<"$r"
        # shellcheck disable=SC2086
        job "ts-ctx-valid-$name" "$valid" "$valid_tokens" --kl-base fp32 $flags
        # shellcheck disable=SC2086
        job "ts-ctx-stories-$name" "$ts_stories" "$valid_tokens" --kl-base fp32 $flags
    done
    for p in "${ts_sink_precisions[@]}"; do
        job "ts-sink-stories-$p" "$ts_stories" "$sink_tokens" --kl-base fp32 "${ts_stream[@]}" --kv-quantize "$p"
        job "ts-sink-long-$p" "$long" "$sink_tokens" --kl-base fp32 "${ts_stream[@]}" --kv-quantize "$p"
    done
    job_model=$saved
    wait_all
}

# ts_ctx_table TEXT: the within-context table of one text (valid | stories)
ts_ctx_table() {
    echo "| cache (K/V storage) | KV bytes at 512 tokens | perplexity | vs fp32 | mean KL (nats) | top-1 agreement |"
    echo "|---|---:|---:|---:|---:|---:|"
    local r name label flags n
    for r in "${ts_rows[@]}"; do
        IFS='|' read -r name label flags <<<"$r"
        n=ts-ctx-$1-$name
        [ -s "$work/$n.txt" ] || { echo "| $label | – | – | – | – | – |"; continue; }
        printf '| %s | %s | %s | %s %% | %s | %s %% |\n' "$label" "$(ts_mib "$(get "$n" cache_bytes)")" \
            "$(get "$n" perplexity)" "$(get "$n" ppl_increase)" "$(get "$n" kl_mean)" "$(get "$n" top1_agree)"
    done
}

ts_sink_table() {
    echo "| KV storage | text | perplexity | fp32, same policy | vs fp32 | mean KL (nats) | top-1 agreement | KV bytes |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    local p t n
    for t in stories long; do
        for p in "${ts_sink_precisions[@]}"; do
            n=ts-sink-$t-$p
            [ -s "$work/$n.txt" ] || continue
            printf '| %s | %s | %s | %s | %s %% | %s | %s %% | %s |\n' "$p" \
                "$([ $t = stories ] && echo "sampled stories" || basename "$long")" "$(get "$n" perplexity)" \
                "$(get "$n" base_perplexity)" "$(get "$n" ppl_increase)" "$(get "$n" kl_mean)" "$(get "$n" top1_agree)" \
                "$(ts_mib "$(get "$n" cache_bytes)")"
        done
    done
}

# ts_target_rows: the within-context perplexity targets of RESULTS.md on this model, both texts, both settings
ts_target_rows() {
    local p lim t v vk
    for p in int8:0.1 int4:1 int2:5; do
        lim=${p#*:} p=${p%%:*}
        for t in valid stories; do
            v=$(get "ts-ctx-$t-$p" ppl_increase)
            vk=$(get "ts-ctx-$t-$p-kivi" ppl_increase)
            printf '| %s perplexity increase ≤ %s %% | %s | %s %% | %s | %s %% | %s |\n' "$p" "$lim" \
                "$([ $t = valid ] && basename "$valid" || echo "sampled stories")" "${v:-–}" \
                "$(ts_verdict "$(echo "$v" | tr -d '+')" "$lim")" "${vk:-–}" "$(ts_verdict "$(echo "$vk" | tr -d '+')" "$lim")"
        done
    done
}

ts_block() {
    local ntok
    # "text ... (N tokens in its first B bytes, U used)" or "(N tokens, U used)": N of the part read
    ntok=$(awk '$1 == "text" {sub(/^\(/, "", $3); print $3}' "$work/ts-ctx-stories-fp32.txt" 2>/dev/null)
    echo "<!-- TINYSTORIES BEGIN -->"
    cat <<EOF
## A model nobody here trained: TinyStories-656K

The same measurements on the real TinyStories-656K folder (\`$ts_model\`, unedited; Apache-2.0, provenance beside
it): $("$bin" info "$ts_model" | awk '$1 == "parameters" {print $2}') parameters, $("$bin" info "$ts_model" | awk '$1 == "layers" {print $2}') layers, $("$bin" info "$ts_model" | awk '$1 == "heads" {print $2 " query / " $4 " KV heads of " $8}'), context $("$bin" info "$ts_model" | awk '$1 == "context" {print $3}'), F32 weights, its own
2048-token BPE vocabulary. Generated by \`tools/results.sh\` (\`tools/results_tinystories.sh\`; this section alone:
\`tools/results.sh --only tinystories\`), commit $(git rev-parse --short HEAD 2>/dev/null || echo "?"), $(date -u +%Y-%m-%d).

Texts: \`$valid\` (the flagship's held-out text, Austen: far from the children's stories this model was trained on,
hence its perplexity in the hundreds; the same tokens as the tables above) and, in its own domain, $ts_n_stories stories the
model sampled itself (\`tinygpt sample $ts_model --prompt "" --seed S --temperature 1 --top-k 0 --top-p 1\`, S = 1 …
$ts_n_stories, joined by newlines: ${ntok:-?} tokens; no TinyStories text written by people is in this checkout). Same protocol
as above: teacher-forced through the cached decode path, against an fp32 cache with the same length policy in
lockstep (\`--kl-base fp32\`).

**Targets on this model** (within the context, the first $valid_tokens tokens of each text in 512-token windows):

| target | text | defaults | | KIVI's setting (G 32, R 128, fp32 residual) | |
|---|---|---:|---|---:|---|
$(ts_target_rows)

**Within the context**, \`$valid\`, the first $valid_tokens tokens:

$(ts_ctx_table valid)

**Within the context**, the sampled stories, the first $valid_tokens tokens:

$(ts_ctx_table stories)

**StreamingLLM sink 4 + window 256, re-positioned**, streamed over the first $sink_tokens tokens of each text (the
sampled stories; \`$long\`, a novel), against an fp32 cache with the same policy; "fp32" rows are that base itself.
The sinks stay at the residual precision (fp16) by default:

$(ts_sink_table)
EOF
    echo "<!-- TINYSTORIES END -->"
}

# ts_splice FILE: FILE with its TinyStories block replaced by a fresh one (inserted before "## Soak" or at the end)
ts_splice() {
    local f=$1 blk=$work/ts-block.md
    ts_block >"$blk" || return 1
    if grep -q '^<!-- TINYSTORIES BEGIN -->' "$f"; then
        awk -v blk="$blk" '/^<!-- TINYSTORIES BEGIN -->/ { while ((getline l < blk) > 0) print l; skip = 1; next }
            skip && /^<!-- TINYSTORIES END -->/ { skip = 0; next } !skip' "$f" >"$f.tmp"
    elif grep -q '^## Soak' "$f"; then
        awk -v blk="$blk" '/^## Soak/ && !done { while ((getline l < blk) > 0) print l; print ""; done = 1 } 1' \
            "$f" >"$f.tmp"
    else
        { cat "$f"; echo; cat "$blk"; } >"$f.tmp"
    fi
    mv "$f.tmp" "$f"
}
