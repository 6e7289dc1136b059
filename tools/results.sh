#!/usr/bin/env bash
# results.sh — regenerates docs/RESULTS.md and its plots (docs/results/*.svg): what the KV cache costs in quality on
# the bundled model (issue #5). Every number in RESULTS.md comes from a command this script runs:
#   tinygpt info --cache-table                the cache-bytes tables (the bundled model and its YOCO variant)
#   tinygpt perplexity --kl-base fp32          perplexity, KL and top-1 agreement of each cache policy against an fp32
#                                              unbounded cache, within the 512-token context (valid.txt)
#   tinygpt perplexity (streaming)            sinks in full precision or quantised
#   tinygpt compare                           the greedy-prefix-match table
#   bench/long_context_models.sh              perplexity vs position to 8x the context on four models, every
#                                              precision x StreamingLLM policy, the attention-sink meter, one plot each
#   tinygpt perplexity (YOCO)                 the YOCO variant against the standard model, bytes and perplexity
# A "## Soak" section already in RESULTS.md (another tool's) is kept as it is, at the end.
#
# The section on TinyStories-656K, a model nobody here trained (tools/results_tinystories.sh), comes before Soak.
#
# usage: tools/results.sh [--quick] [--jobs N] [--model M] [--tinygpt BIN] [--only long-context|tinystories]
#   --quick     small token counts (a smoke run of the pipeline; the numbers are not the published ones)
#   --only long-context  run only what the long-context section needs and replace that section (and the StreamingLLM
#               lines of the targets) in the existing RESULTS.md, leaving the rest of the file as it is
#   --only tinystories   run only the TinyStories-656K section's jobs and replace only its block in RESULTS.md
#   --jobs N    perplexity runs in parallel, one thread each (default 2: the two cores of the reference machine)
# Intermediate files go to build/results/ and build/long_context_models/; runs whose output is newer than the model and the
# binary are re-used (delete those folders to start afresh).
set -u
cd "$(dirname "$0")/.." || exit 2

model=models/tinygpt-flagship.gguf
yoco_model=models/tinygpt-yoco.gguf
# the attention-sink experiment's model (not committed: `bash tools/gpu_job.sh sinks` on a GPU machine makes it);
# without it the section from the previous RESULTS.md is kept
bos_model=models/experiments/tinygpt-bos.gguf
# issue #18's training try (a longer context, BOS first, more steps: `bash tools/gpu_job.sh long-sinks`; not committed);
# without it the block from the previous RESULTS.md is kept
long_sinks_model=models/experiments/tinygpt-bos1024.gguf
bin=./tinygpt
jobs=2
quick=0
only=
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --tinygpt) bin=$2; shift 2 ;;
    --only)
        only=$2
        [ "$only" = long-context ] || [ "$only" = tinystories ] ||
            { echo "results.sh: --only: expected long-context or tinystories, got '$only'" >&2; exit 2; }
        shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

valid=models/data/valid.txt
long=models/data/long-heldout.txt
prompts=tools/results_prompts.txt
# tokens per run: 16 context windows of valid.txt for the within-context table, 8192 streamed tokens for the sink
# table, 8x the context (4096) for the long-context experiment (bench/long_context_models.sh; --quick: 2x)
valid_tokens=8193
sink_tokens=8192
lc_tokens=4096
greedy_tokens=60
if [ "$quick" = 1 ]; then
    valid_tokens=1025
    sink_tokens=1024
    lc_tokens=1024
    greedy_tokens=12
fi
work=build/results
lcdir=build/long_context_models
[ "$quick" = 1 ] && work=build/results-quick && lcdir=build/long_context_models-quick
out_md=docs/RESULTS.md
plots=docs/results
[ "$quick" = 1 ] && out_md=$work/RESULTS.md && plots=$work/plots

for f in "$model" "$yoco_model" "$valid" "$long" "$prompts"; do
    [ -e "$f" ] || { echo "results.sh: $f not found" >&2; exit 1; }
done
if [ "$bin" = ./tinygpt ]; then
    make -s -j2 tinygpt >&2 || { echo "results.sh: make tinygpt failed" >&2; exit 1; }
fi
[ -x "$bin" ] || { echo "results.sh: $bin not found" >&2; exit 1; }
mkdir -p "$work" "$plots"
t_start=$SECONDS

# ---- running perplexity jobs, N at a time ----------------------------------------------------------------------------
# job NAME TEXT MAX_TOKENS FLAGS...: runs `tinygpt perplexity` on $job_model (default: $model) in the background into
# $work/NAME.txt (skipped when up to date). Call `wait_all` before reading the results.
job_model=$model
job() {
    local name=$1 text=$2 max=$3
    shift 3
    # --only long-context: only the runs of that section
    [ -z "$only" ] || [ "$only" = tinystories ] || [[ $name =~ ^(sinkneed-|bos-|lc-|ls-) ]] || return 0
    local txt=$work/$name.txt
    if [ -s "$txt" ] && [ "$txt" -nt "$job_model" ] && [ "$txt" -nt "$bin" ]; then return 0; fi
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    (
        t0=$SECONDS
        if "$bin" perplexity "$job_model" "$text" --max-tokens "$max" --threads 1 --quiet "$@" >"$txt.tmp" 2>"$txt.err"; then
            mv "$txt.tmp" "$txt"
            echo "  $name: ppl $(awk '$1 == "perplexity" {print $2}' "$txt") ($((SECONDS - t0)) s)" >&2
        else
            echo "results.sh: tinygpt perplexity failed for $name: $(tail -n 1 "$txt.err")" >&2
            rm -f "$txt.tmp"
        fi
    ) &
}
wait_all() { wait; }

# get NAME KEY: a value from a summary.
get() { awk -v k="$2" '$1 == k {print $2; exit}' "$work/$1.txt" 2>/dev/null; }

# shellcheck source=tools/results_tinystories.sh
. tools/results_tinystories.sh
if [ "$only" = tinystories ]; then
    [ -f "$out_md" ] || { echo "results.sh: --only needs an existing $out_md" >&2; exit 1; }
    ts_jobs || exit 1
    ts_splice "$out_md" || exit 1
    echo "results.sh: replaced the TinyStories section of $out_md ($(((SECONDS - t_start) / 60)) min)" >&2
    exit 0
fi

# ---- the within-context table: each policy against fp32 unbounded, valid.txt in 512-token windows -----------------
# rows: "name|label|flags"
rows=(
    "fp32|fp32 (the base itself)|--kv-quantize fp32"
    "fp16|fp16|--kv-quantize fp16"
    "bf16|bf16|--kv-quantize bf16"
    "int8|int8 (defaults: G 32, no residual)|--kv-quantize int8"
    "int4|int4 (defaults: G 32, no residual)|--kv-quantize int4"
    "int2|int2 (defaults: G 32, R 32 at fp16)|--kv-quantize int2"
    "int8-kivi|int8, KIVI's setting (G 32, R 128, fp32 residual)|--kv-quantize int8 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "int4-kivi|int4, KIVI's setting (G 32, R 128, fp32 residual)|--kv-quantize int4 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "int2-kivi|int2, KIVI's setting (G 32, R 128, fp32 residual)|--kv-quantize int2 --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32"
    "int8-rfp16|int8, G 32, R 128 at fp16|--kv-quantize int8 --kv-residual 128"
    "int4-rfp16|int4, G 32, R 128 at fp16|--kv-quantize int4 --kv-residual 128"
    "int2-rfp16|int2, G 32, R 128 at fp16|--kv-quantize int2 --kv-residual 128"
    "int8-r32|int8, G 32, R 32 at fp16|--kv-quantize int8 --kv-residual 32"
    "int4-r32|int4, G 32, R 32 at fp16|--kv-quantize int4 --kv-residual 32"
    "int2-r32|int2, G 32, R 32 at fp16|--kv-quantize int2 --kv-residual 32"
    "int2-r0|int2, G 32, no residual|--kv-quantize int2 --kv-residual 0"
    "int2-g16r0|int2, G 16, no residual|--kv-quantize int2 --kv-group-size 16 --kv-residual 0"
    "int2-g16r16|int2, G 16, R 16 at fp16 (the default before issue 16)|--kv-quantize int2 --kv-group-size 16 --kv-residual 16"
    "int2-g8r8|int2, G 8, R 8 at fp16|--kv-quantize int2 --kv-group-size 8 --kv-residual 8"
    "int4-g16r0|int4, G 16, no residual|--kv-quantize int4 --kv-group-size 16 --kv-residual 0"
    "int4-g16|int4, G 16, R 32 at fp16|--kv-quantize int4 --kv-group-size 16 --kv-residual 32"
    "int2-g16|int2, G 16, R 32 at fp16|--kv-quantize int2 --kv-group-size 16 --kv-residual 32"
    "int8-whole|int8, whole-history key scales (design note, G 0)|--kv-quantize int8 --kv-group-size 0"
    "int4-whole|int4, whole-history key scales (design note, G 0)|--kv-quantize int4 --kv-group-size 0"
    "int2-whole|int2, whole-history key scales (design note, G 0)|--kv-quantize int2 --kv-group-size 0"
    "k8v4|K int8 / V int4|--kv-quantize-keys int8 --kv-quantize-values int4"
    "k4v8|K int4 / V int8|--kv-quantize-keys int4 --kv-quantize-values int8"
    "k8v2|K int8 / V int2|--kv-quantize-keys int8 --kv-quantize-values int2"
    "k2v8|K int2 / V int8|--kv-quantize-keys int2 --kv-quantize-values int8"
    "k4v2|K int4 / V int2|--kv-quantize-keys int4 --kv-quantize-values int2"
)
echo "results.sh: within-context runs ($valid_tokens tokens of $valid each, against fp32)" >&2
for r in "${rows[@]}"; do
    IFS='|' read -r name label flags <<<"$r"
    # shellcheck disable=SC2086
    job "ctx-$name" "$valid" "$valid_tokens" --kl-base fp32 $flags
done

# ---- sinks: StreamingLLM sink 4 + window 476, re-positioned, over the long text; sinks fp32 or quantised ----------
# rope original|reposition: the flags that name the RoPE scheme of a bounded cache for this binary (the
# --streaming-llm-rope flag where it has one, else --streaming-llm-reposition / nothing), so that every run of the
# long-context section says which scheme it uses
if "$bin" perplexity --help | grep -q -- '--streaming-llm-rope'; then
    rope() { echo "--streaming-llm-rope $1"; }
else
    rope() { [ "$1" = reposition ] && echo "--streaming-llm-reposition"; }
fi
echo "results.sh: sink runs ($sink_tokens tokens of $long each)" >&2
stream=(--streaming-llm-sink 4 --streaming-llm-window 476 --streaming-llm-reposition)
for p in int8 int4 int2; do
    job "sink-$p-fp32sinks" "$long" "$sink_tokens" --kl-base fp32 "${stream[@]}" --kv-quantize "$p"
    job "sink-$p-qsinks" "$long" "$sink_tokens" --kl-base fp32 "${stream[@]}" --kv-quantize "$p" --kv-quantize-sinks
    # vanilla RoPE: every key at its original position (re-positioning keeps only its sinks before RoPE)
    # shellcheck disable=SC2046
    job "sink-$p-vanilla" "$long" "$sink_tokens" --kl-base fp32 --streaming-llm-sink 4 --streaming-llm-window 476 \
        $(rope original) --kv-quantize "$p"
done
# does the model lean on its first tokens at all? window only against sink 4 at three window sizes (fp32)
# shellcheck disable=SC2046
for w in 64 128 480; do
    job "sinkneed-w$w-s0" "$long" "$sink_tokens" --streaming-llm-sink 0 --streaming-llm-window "$w" $(rope original)
    job "sinkneed-w$w-s4" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
        $(rope reposition)
    job "sinkneed-w$w-s4v" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
        $(rope original)
    if [ -e "$bos_model" ]; then
        job_model=$bos_model
        job "bos-w$w-s0" "$long" "$sink_tokens" --streaming-llm-sink 0 --streaming-llm-window "$w" $(rope original)
        job "bos-w$w-s4" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
            $(rope reposition)
        job "bos-w$w-s4v" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
            $(rope original)
        job_model=$model
    fi
done
wait_all

# ---- YOCO against the standard model: the same runs on both (issue #7) ------------------------------------------------
# rows: "name|label|flags"; each runs as yoco-NAME on the YOCO model and std-NAME on the standard one
yoco_rows=(
    "fp32|fp32, unbounded (within the context)|--kv-quantize fp32"
    "int4|int4, unbounded (within the context)|--kv-quantize int4"
    "sllm-fp16|fp16, StreamingLLM 4+256 re-positioned|--kv-quantize fp16 --streaming-llm-sink 4 --streaming-llm-window 256 --streaming-llm-reposition"
    "sllm-int4|int4, StreamingLLM 4+256 re-positioned|--kv-quantize int4 --streaming-llm-sink 4 --streaming-llm-window 256 --streaming-llm-reposition"
)
# yoco_input NAME: the text and token count of a YOCO row (the StreamingLLM rows stream the long text)
yoco_input() { case $1 in sllm-*) echo "$long $sink_tokens" ;; *) echo "$valid $valid_tokens" ;; esac; }
echo "results.sh: YOCO runs (both models)" >&2
for r in "${yoco_rows[@]}"; do
    IFS='|' read -r name label flags <<<"$r"
    read -r text max < <(yoco_input "$name")
    job_model=$yoco_model
    # shellcheck disable=SC2086
    job "yoco-$name" "$text" "$max" $flags
    job_model=$model
    # shellcheck disable=SC2086
    job "std-$name" "$text" "$max" $flags
done
wait_all

[ -n "$only" ] || ts_jobs

# ---- the greedy-match table ---------------------------------------------------------------------------------------
echo "results.sh: greedy-match tables" >&2
greedy_md=$work/greedy.md
greedy_whole_md=$work/greedy-whole.md
greedy_r0_md=$work/greedy-r0.md
if [ -z "$only" ] && { ! [ -s "$greedy_md" ] || ! [ "$greedy_md" -nt "$bin" ] || ! [ "$greedy_md" -nt "$model" ]; }; then
    "$bin" compare "$model" --prompts "$prompts" --tokens "$greedy_tokens" --threads 1 --markdown \
        --kv-quantize fp16,bf16,int8,int4,int2,int8/int4,int4/int8 >"$greedy_md.tmp" && mv "$greedy_md.tmp" "$greedy_md" &
    "$bin" compare "$model" --prompts "$prompts" --tokens "$greedy_tokens" --threads 1 --markdown \
        --kv-quantize int8,int4,int2 --kv-group-size 0 >"$greedy_whole_md.tmp" &&
        mv "$greedy_whole_md.tmp" "$greedy_whole_md" &
    wait
    "$bin" compare "$model" --prompts "$prompts" --tokens "$greedy_tokens" --threads 1 --markdown \
        --kv-quantize int8,int4,int2,int8/int4,int4/int8 --kv-group-size 32 --kv-residual 128 \
        --kv-residual-precision fp32 >"$greedy_r0_md.tmp" &&
        mv "$greedy_r0_md.tmp" "$greedy_r0_md"
fi

# ---- the long-context experiment ------------------------------------------------------------------------------------
# four models x every precision x {vanilla, re-positioned, window only} to 8x the context, the meter beside it; and the
# in-context reference over the whole long text (the cross-check against training's own evaluation)
echo "results.sh: long-context experiment (bench/long_context_models.sh)" >&2
lc_quick=()
[ "$quick" = 1 ] && lc_quick=(--quick)
bash bench/long_context_models.sh --out "$lcdir" --tinygpt "$bin" --jobs "$jobs" "${lc_quick[@]}" >&2 ||
    { echo "results.sh: bench/long_context_models.sh failed" >&2; exit 1; }
job lc-reference "$long" "$([ "$quick" = 1 ] && echo 5121 || echo 1000000)" --csv "$work/lc-reference.csv"
if [ -e "$long_sinks_model" ]; then
    # the try's model: the long-context experiment at fp32 to 8x its context of 1024, and the quality measures of the
    # bundled model (valid.txt and the long text in 512-token windows, as ctx-fp32 and lc-reference score them)
    job_model=$long_sinks_model
    job ls-valid "$valid" "$valid_tokens" --context 512
    job ls-long "$long" 1000000 --context 512
    job_model=$model
    bash bench/long_context_models.sh --out "$lcdir-long-sinks" --tinygpt "$bin" --jobs "$jobs" --precisions fp32 \
        --models "bos1024|$long_sinks_model|$long|1024" >&2 ||
        { echo "results.sh: bench/long_context_models.sh failed for $long_sinks_model" >&2; exit 1; }
fi
wait_all
rm -f "$plots"/perplexity-vs-position-*.svg # the four per-precision plots of before, replaced by one plot per model
for f in "$lcdir"/*.svg "$lcdir-long-sinks"/*.svg; do [ -f "$f" ] && cp "$f" "$plots/long-context-$(basename "$f")"; done
lc_models=$(cut -f1 "$lcdir/models.tsv" 2>/dev/null) # in the experiment's order
read -r lc_cpu lc_runs <"$lcdir/run-cpu-seconds.txt" 2>/dev/null
# the reference over every whole 512-token window of the long text, as training's evaluation (which drops the last
# partial one)
n_long=$(awk '$1 == "text" {sub(/^\(/, "", $3); print $3}' "$work/lc-reference.txt" 2>/dev/null)
ref_line=$(awk -F, -v last=$((512 * ((${n_long:-1} - 1) / 512))) -v n="${n_long:-0}" \
    'NR > 1 && $1 <= last { s += $4; k++ } END { if (k) printf "in-context fp32 over the %d tokens of %d whole 512-token windows (of %d): mean NLL %.4f, perplexity %.3f", k, k / 512, n, s / k, exp(s / k) }' \
    "$work/lc-reference.csv" 2>/dev/null)

# ---- RESULTS.md ------------------------------------------------------------------------------------------------------
# pct A B: 100 * (A / B - 1)
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "–"; else printf "%+.3f %%", 100 * (a / b - 1) }'; }
mib() { awk -v b="$1" 'BEGIN { if (b == "") print "–"; else printf "%.2f MiB", b / 1048576 }'; }
# verdict VALUE LIMIT: "yes" when VALUE <= LIMIT
verdict() { awk -v v="$1" -v l="$2" 'BEGIN { if (v == "" || v == "–") print "no data"; else print (v + 0 <= l ? "**met**" : "**missed**") }'; }

ctx_table() {
    echo "| cache (K/V storage) | KV bytes at 512 tokens | perplexity | vs fp32 | mean KL (nats) | top-1 agreement |"
    echo "|---|---:|---:|---:|---:|---:|"
    local r name label flags
    for r in "${rows[@]}"; do
        IFS='|' read -r name label flags <<<"$r"
        [ -s "$work/ctx-$name.txt" ] || { echo "| $label | – | – | – | – | – |"; continue; }
        printf '| %s | %s | %s | %s | %s | %s %% |\n' "$label" "$(mib "$(get "ctx-$name" cache_bytes)")" \
            "$(get "ctx-$name" perplexity)" "$(get "ctx-$name" ppl_increase) %" "$(get "ctx-$name" kl_mean)" \
            "$(get "ctx-$name" top1_agree)"
    done
}

yoco_table() {
    echo "| cache | text, tokens | standard: KV bytes | YOCO: KV bytes | YOCO / standard | standard: perplexity | YOCO: perplexity | YOCO vs standard |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    local r name label flags
    for r in "${yoco_rows[@]}"; do
        IFS='|' read -r name label flags <<<"$r"
        local text max
        read -r text max < <(yoco_input "$name")
        local sb yb
        sb=$(get "std-$name" cache_bytes)
        yb=$(get "yoco-$name" cache_bytes)
        printf '| %s | `%s`, %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(basename "$text")" "$max" "$(mib "$sb")" "$(mib "$yb")" \
            "$(awk -v a="$yb" -v b="$sb" 'BEGIN { if (a == "" || b == "" || b == 0) print "–"; else printf "%.3f", a / b }')" \
            "$(get "std-$name" perplexity)" "$(get "yoco-$name" perplexity)" \
            "$(pct "$(get "yoco-$name" perplexity)" "$(get "std-$name" perplexity)")"
    done
}

sink_table() {
    echo "| KV storage | RoPE positions | sinks | perplexity | fp32 same policy | vs fp32 | mean KL (nats) | top-1 agreement |"
    echo "|---|---|---|---:|---:|---:|---:|---:|"
    local p s
    for p in int8 int4 int2; do
        for s in fp32sinks qsinks vanilla; do
            local n=sink-$p-$s
            [ -s "$work/$n.txt" ] || continue
            printf '| %s | %s | %s | %s | %s | %s %% | %s | %s %% |\n' "$p" \
                "$([ $s = vanilla ] && echo "vanilla" || echo "re-positioned")" \
                "$([ $s = qsinks ] && echo "quantised ($p)" || echo "full precision (fp16)")" \
                "$(get "$n" perplexity)" "$(get "$n" base_perplexity)" "$(get "$n" ppl_increase)" "$(get "$n" kl_mean)" \
                "$(get "$n" top1_agree)"
        done
    done
}

# bytes_ratio MODEL PRECISION TOKENS [FLAGS...]: the report's ratio to bf16 ("bf16 would be ... (0.36x)") of a
# cache after a run of TOKENS generated tokens (an unbounded cache grows as tokens arrive)
bytes_ratio() {
    local m=$1 p=$2 n=$3
    shift 3
    "$bin" sample "$m" --prompt x --tokens "$n" --threads 1 --seed 1 --kv-quantize "$p" "$@" 2>&1 >/dev/null |
        sed -n 's/.*bf16 would be [^(]*(\([0-9.]*\)x).*/\1/p'
}
# the issue-14 byte targets: int8 <= 0.65, int4 <= 0.42, int2 <= 0.32 of bf16 at sink 4 + window 256 and at the full
# context, on both models, under the default flags (both settings' cells)
bytes_targets() {
    local p lim cells worst r kcells kworst m pol
    for p in int8:0.65 int4:0.42 int2:0.32; do
        lim=${p#*:} p=${p%%:*} cells="" worst=0 kcells="" kworst=0
        for m in "$model" "$yoco_model"; do
            # a bounded cache is allocated whole at once; an unbounded one is filled to its context (512, the
            # prompt included: the run reserves all of it)
            local n_full
            n_full=$(("$("$bin" info "$m" | awk '$1 == "context" {print $3}')" - 8))
            for pol in window full; do
                local f=() n=1
                [ $pol = window ] && f=(--streaming-llm-sink 4 --streaming-llm-window 256)
                [ $pol = full ] && n=$n_full
                r=$(bytes_ratio "$m" "$p" "$n" "${f[@]}")
                cells="$cells${cells:+ · }$(basename "$m" .gguf | sed 's/tinygpt-//') $pol ${r}x"
                worst=$(awk -v a="$worst" -v b="${r:-9}" 'BEGIN { print (b > a ? b : a) }')
                r=$(bytes_ratio "$m" "$p" "$n" "${f[@]}" --kv-group-size 32 --kv-residual 128 \
                    --kv-residual-precision fp32)
                kcells="$kcells${kcells:+ · }$(basename "$m" .gguf | sed 's/tinygpt-//') $pol ${r}x"
                kworst=$(awk -v a="$kworst" -v b="${r:-9}" 'BEGIN { print (b > a ? b : a) }')
            done
        done
        printf '| %s bytes ≤ %s× bf16 (sink 4 + window 256, and unbounded at the full context 512; flagship and YOCO) | %s | %s | %s | %s |\n' \
            "$p" "$lim" "$cells" "$(verdict "$worst" "$lim")" "$kcells" "$(verdict "$kworst" "$lim")"
    done
}

int8_inc=$(get ctx-int8 ppl_increase)
int4_inc=$(get ctx-int4 ppl_increase)
int2_inc=$(get ctx-int2 ppl_increase)
int8_inc32=$(get ctx-int8-kivi ppl_increase)
int4_inc32=$(get ctx-int4-kivi ppl_increase)
int2_inc32=$(get ctx-int2-kivi ppl_increase)
greedy_int8=$(awk -F'|' '/mean match/ {gsub(/[ %*]/, "", $5); print $5}' "$greedy_md" 2>/dev/null)
greedy_int8_r0=$(awk -F'|' '/mean match/ {gsub(/[ %*]/, "", $3); print $3}' "$greedy_r0_md" 2>/dev/null)
# lc_model_block NAME: the long-context experiment's subsection for one model (table, verdicts, meter, plot)
lc_model_block() {
    local d=$lcdir/$1 model text ctx
    IFS=$'\t' read -r model text ctx < <(awk -F'\t' -v n="$1" '$1 == n { print $2 "\t" $3 "\t" $4 }' "$lcdir/models.tsv")
    echo "### $1"
    echo
    echo "\`$model\` (context $ctx) on \`$text\`, $(awk '$1 == "scored" {print $2; exit}' "$d/in-context-fp32.txt") tokens scored."
    echo
    cat "$d/buckets.md"
    echo
    echo "Worst bucket against in-context (every precision):"
    echo
    awk -F'\t' '{ p[$1] = p[$1] (p[$1] == "" ? "" : ", ") $2 " " $3; if ($4 !~ /^within/) miss[$1] = 1; if (!($1 in o)) { o[$1] = ++n; k[n] = $1 } }
        END { for (j = 1; j <= n; j++) printf "- %s: %s — %s\n", k[j], p[k[j]], (k[j] in miss ? "**not** within 10 %" : "within 10 %") }' "$d/verdict.tsv"
    echo
    echo "Attention-sink meter (fp32):"
    echo
    cat "$d/meter.md"
    echo
    [ -f "$plots/long-context-$1.svg" ] && printf '![%s: perplexity vs position, every policy and precision](results/long-context-%s.svg)\n\n' "$1" "$1"
}

# the bundled model's verdicts (fp32) for the targets: each policy's worst bucket against the in-context reference
lc_verdict=$(awk -F'\t' '$2 == "fp32" { printf "- %s, fp32: worst bucket %s against in-context: %s\n", $1, $3, $4 }' "$lcdir/flagship/verdict.tsv" 2>/dev/null)
gpu_ppl=$(jq -r '.final_fp32.long_heldout_ppl // empty' models/training/metrics.json 2>/dev/null)
gpu_tokens=$(jq -r '.long_tokens // empty' models/training/metrics.json 2>/dev/null)
int4_resid=$(awk -v a="$(get ctx-int4-kivi cache_bytes)" -v b="$(get ctx-int4-rfp16 cache_bytes)" 'BEGIN { if (a != "" && b != "") print 2 * (a - b) }')
elapsed=$((SECONDS - t_start))
run_min=$(cat "$work"/*.txt "$lcdir"/*/*-*.txt 2>/dev/null | awk '$1 == "seconds" { s += $2 } END { printf "%.0f", s / 60 }')

# the BOS experiment's block: made from the runs when its model is here, else kept from the previous RESULTS.md
bos_block=""
if [ -e "$bos_model" ] && [ -s "$work/bos-w480-s4v.txt" ]; then
    bos_block=$(
        echo "<!-- BOS BEGIN -->"
        echo "Is it the training? \`tools/train.py\` cuts its 512-token windows at random offsets of the token stream"
        echo "(\`lm_common.Batches\`) with no BOS at a window's start, so no token is reliably first, while the models in"
        echo "which the paper finds attention sinks start every training sequence the same way. To test that, the same"
        echo "recipe was trained again with BOS as every window's first token and BOS added to prompts"
        echo "(\`bash tools/gpu_job.sh sinks\` on a GPU machine, \`tools/train.py --bos-first\`; $(sha256sum "$bos_model" | cut -c1-12)…,"
        echo "validation perplexity $(jq -r '.final_fp32.val_ppl' models/training/bos-metrics.json 2>/dev/null) on the GPU, windows without BOS;"
        echo "\`models/training/bos-metrics.json\`). Same runs (fp32, the first $sink_tokens tokens of \`$long\`, which the tool starts with BOS):"
        echo
        echo "| tokens held | sink 0 (window only) | sink 4, re-positioned | sink 4, vanilla RoPE | window only vs sink 4 re-positioned |"
        echo "|---:|---:|---:|---:|---:|"
        for w in 64 128 480; do
            printf '| %s | %s | %s | %s | %s |\n' "$w" "$(get "bos-w$w-s0" perplexity)" "$(get "bos-w$w-s4" perplexity)" \
                "$(get "bos-w$w-s4v" perplexity)" "$(pct "$(get "bos-w$w-s0" perplexity)" "$(get "bos-w$w-s4" perplexity)")"
        done
        echo
        echo "With BOS first in training the sinks start to matter — evicting them costs more the smaller the window —"
        echo "but window-only attention loses at most a few percent against sink 4, not the collapse the paper reports for"
        echo "multi-billion-parameter models with 4k contexts. So the random-offset training is part of the reason, not"
        echo "all of it; the model's size and short context are the untested rest."
        echo "<!-- BOS END -->"
    )
elif [ -f "$out_md" ]; then
    bos_block=$(awk '/^<!-- BOS BEGIN -->/ {on = 1} on; /^<!-- BOS END -->/ {on = 0}' "$out_md")
fi

# the training try's block (issue #18): made from the runs when its model is here, else kept from the previous RESULTS.md
ls_block=""
ls_metrics=models/training/long-sinks-metrics.json
if [ -e "$long_sinks_model" ] && [ -s "$work/ls-valid.txt" ] && [ -s "$lcdir-long-sinks/bos1024/buckets.md" ]; then
    ls_block=$(
        lsd=$lcdir-long-sinks/bos1024
        echo "<!-- LONGSINKS BEGIN -->"
        echo "### The try: a longer context, BOS first, more steps (issue #18)"
        echo
        echo "Does a model trained the way the paper's models are grow sinks, and does window-only attention then collapse?"
        echo "\`bash tools/gpu_job.sh long-sinks\` on one H200 trained the flagship's recipe with context 1024, BOS as every"
        echo "training window's first token (\`--bos-first\`) and up to 10 epochs in 360 s: $(jq -r '"\(.steps) steps, \(.epochs) epochs in \(.seconds) s"' "$ls_metrics" 2>/dev/null)"
        echo "(\`$ls_metrics\`; the GGUF, $(sha256sum "$long_sinks_model" | cut -c1-12)…, is not committed). Quality against"
        echo "the bundled model on the existing measures, through tinygpt in 512-token windows (fp32):"
        echo
        echo "| measure | bundled model | the try |"
        echo "|---|---:|---:|"
        echo "| \`$valid\`, first $valid_tokens tokens, perplexity | $(get ctx-fp32 perplexity) | $(get ls-valid perplexity) |"
        echo "| \`$long\`, whole, perplexity | $(get lc-reference perplexity) | $(get ls-long perplexity) |"
        echo
        echo "Its long-context run (fp32, to 8 × 1024 tokens of \`$long\`, the same cache of 128 tokens):"
        echo
        cat "$lsd/buckets.md"
        echo
        awk -F'\t' '{ printf "- %s: worst bucket %s — %s\n", $1, $3, $4 }' "$lsd/verdict.tsv"
        echo
        echo "Attention-sink meter (fp32):"
        echo
        cat "$lsd/meter.md"
        echo
        [ -f "$plots/long-context-bos1024.svg" ] && echo "![the try: perplexity vs position](results/long-context-bos1024.svg)"
        echo "<!-- LONGSINKS END -->"
    )
elif [ -f "$out_md" ]; then
    ls_block=$(awk '/^<!-- LONGSINKS BEGIN -->/ {on = 1} on; /^<!-- LONGSINKS END -->/ {on = 0}' "$out_md")
fi

soak=""
if [ -f "$out_md" ]; then
    soak=$(awk '/^## Soak/ {on = 1} on && /^## / && !/^## Soak/ {on = 0} on' "$out_md")
fi

{
cat <<EOF
# Results: what the KV cache costs in quality

Generated by \`make results\` (\`tools/results.sh\`) — do not edit by hand: every number below comes from a command
that script runs, and rerunning it regenerates this file and \`docs/results/*.svg\`.$( [ "$quick" = 1 ] && echo " **QUICK RUN: small token counts, not the published numbers.**")

- model: \`$model\` — $("$bin" info "$model" | awk '$1 == "parameters" {print $2}') parameters, $("$bin" info "$model" | awk '$1 == "layers" {print $2}') layers, $("$bin" info "$model" | awk '$1 == "heads" {print $2 " query / " $4 " KV heads of " $8}'), context $("$bin" info "$model" | awk '$1 == "context" {print $3}'), weights $("$bin" info "$model" | awk '$1 == "weight" {print $3}')
- texts: \`$valid\` (held out from training; within-context numbers), \`$long\` ($n_long tokens; long-context and sink numbers)
- protocol: teacher-forced through the cached decode path (\`tinygpt perplexity\`): token t is scored by the logits
  computed against the cache as it stands after tokens < t were appended — quantised, evicted and re-positioned
  exactly as in generation. "vs fp32" and KL compare against an fp32 cache with the same length policy run in
  lockstep over the same tokens (\`--kl-base fp32\`): KL(fp32 ‖ policy) averaged over the scored tokens, top-1 = how
  often both put the same token first.
- RoPE: each StreamingLLM row names its scheme: re-positioned = \`--streaming-llm-reposition\` (keys rotated at their
  cache slot); vanilla = no re-positioning flag (keys at their original positions: the default for a bounded cache at
  the commit below); unbounded caches have nothing to re-position.
- subsampling (to keep the run under ~30 minutes on 2 cores): within-context table on the first $valid_tokens tokens
  of \`$valid\` (independent 512-token windows, a fresh cache each, as in training's evaluation); sink table on the
  first $sink_tokens tokens of \`$long\`; long-context experiment on the first $lc_tokens tokens of each model's text; greedy
  match: $(grep -c . "$prompts") prompts x $greedy_tokens tokens.
- this run: $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)"), $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $((elapsed / 60)) min $((elapsed % 60)) s for this invocation; the
  perplexity runs behind this file took $run_min min of one core in all (\`--jobs 2\` runs two at a time; the greedy tables
  are not counted).

## Targets

| target (issues #5, #14) | defaults (int8 / int4: G 32, no residual; int2: G 32, R 32, under 512 tokens G 16, R 16; residual and sinks fp16) | | KIVI's setting (G 32, R 128, fp32 residual; \`--kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32\`) | |
|---|---:|---|---:|---|
| int8 perplexity increase ≤ 0.1 % (within context, vs fp32 unbounded) | ${int8_inc:-–} % | $(verdict "$(echo "$int8_inc" | tr -d '+')" 0.1) | ${int8_inc32:-–} % | $(verdict "$(echo "$int8_inc32" | tr -d '+')" 0.1) |
| int4 perplexity increase ≤ 1 % | ${int4_inc:-–} % | $(verdict "$(echo "$int4_inc" | tr -d '+')" 1) | ${int4_inc32:-–} % | $(verdict "$(echo "$int4_inc32" | tr -d '+')" 1) |
| int2 perplexity increase ≤ 5 % | ${int2_inc:-–} % | $(verdict "$(echo "$int2_inc" | tr -d '+')" 5) | ${int2_inc32:-–} % | $(verdict "$(echo "$int2_inc32" | tr -d '+')" 5) |
| greedy match 100 % at int8 ($greedy_tokens tokens; \`tinygpt compare\` runs without a residual unless given one) | ${greedy_int8:-–} % | $(verdict "$(awk -v g="${greedy_int8:-0}" 'BEGIN { print 100 - g }')" 0) | ${greedy_int8_r0:-–} % (never leaves the residual) | $(verdict "$(awk -v g="${greedy_int8_r0:-0}" 'BEGIN { print 100 - g }')" 0) |
$(bytes_targets)

Bytes allocated, from the report of \`tinygpt sample MODEL --prompt x --kv-quantize P\` with \`--streaming-llm-sink 4
--streaming-llm-window 256 --tokens 1\`, or unbounded with \`--tokens 504\` (the run reserves its whole context: an
unbounded cache grows in chunks as tokens arrive) ("bf16 would be": a bf16 cache with the same sinks, window and
context holding the same tokens, from the same geometry code).
\`tests/unit/test_cache_sizes.c\` (in \`make test\`) checks that every quantised cache under the default flags is
smaller than bf16 at every window 16, 32, …, 65536 and every unbounded cache of 16 … 65536 tokens, on both models.

StreamingLLM (sink 4) within 10 % of the in-context perplexity out to $lc_tokens tokens, 8x the context (bucket by
bucket, fp32 cache of 128 tokens; every precision and three more models in the long-context section). StreamingLLM as
the paper defines it assigns positions within the cache ("rather than those in the original text", Xiao et al. 2023,
section 3.2): that is "re-positioned". "Vanilla" keeps every key at its original RoPE position, as the design note's
implementation did; past the context its sinks sit further away than any distance the model was trained on.
"Window only" is sink 0, window 128:

$(echo "$lc_verdict")

## Cache bytes

\`tinygpt info $model --cache-table\` (bytes allocated, all K/V layers; T beyond the context is extrapolated):

\`\`\`
$("$bin" info "$model" --cache-table | sed -n '/^KV cache bytes/,$p')
\`\`\`

The YOCO variant (\`docs/yoco.md\`; layers 6–11 read layer 5's K/V), \`tinygpt info $yoco_model --cache-table\`:

\`\`\`
$("$bin" info "$yoco_model" --cache-table | sed -n '/^KV cache bytes/,$p')
\`\`\`

## Within the context: perplexity and KL against fp32

$valid_tokens tokens of \`$valid\` in 512-token windows; KIVI keys per channel in groups of G tokens, values per token,
the newest R tokens in full precision. The defaults (issue 14) keep no residual for int8 / int4 (every token is
quantised as it arrives; the keys of the group being filled sit on provisional per-channel scales, widened and
re-coded as the group fills) and one group at fp16 for int2 (G 32, R 32 here; G 16, R 16 for a cache of 256..511
tokens), with the sinks at fp16: a cache smaller than bf16
at every size. KIVI's published setting (G 32, R 128, fp32 residual) keeps a quarter of a 512-token window in fp32:
its fp32 residual is most of its bytes (int4: $(mib "$int4_resid") of $(mib "$(get ctx-int4-kivi cache_bytes)"), the
difference between the int4 rows with an fp32 and an fp16 residual of 128, doubled). "KV bytes" is the cache allocated
for the whole 512-token context.

Alternatives measured for the defaults (issue 14): no residual at all for int2 (\`int2, G 32, no residual\`, and G 16)
misses its 5 % target, so int2 keeps one group; its default of one group of 32 (issue 16: $(get ctx-int2 ppl_increase) %, fewer bytes
and half the groups to attend) against the former default of one group of 16 (\`G 16, R 16\`: $(get ctx-int2-g16r16 ppl_increase) %) and one of 8;
a cache under 512 tokens keeps G 16, R 16 (at window 256 one group of 32 would be 0.33× of bf16, over the 0.32× target); int4 with G 16 and no
residual against G 32 (more scale bytes for little gain).

$(ctx_table)

## Sinks in full precision or quantised

StreamingLLM sink 4 + window 476, re-positioned, over the first $sink_tokens tokens of \`$long\`, against an fp32 cache with the
same policy. By default the cache keeps the 4 sink tokens at the residual precision (fp16);
\`--kv-quantize-sinks\` quantises them like the rest (keys per channel over the 4 sinks, values
per token; they keep fp32 slots).

$(sink_table)

## Remedies

Issue #5 asks for the remedies the literature reports where int4 or int2 miss their targets. With KIVI's groups none
is needed to pass (see Targets); their measured effect, from the tables above:

- smaller key groups (G 16 against G 32, both R 32): perplexity increase int4 $(get ctx-int4-r32 ppl_increase) % → $(get ctx-int4-g16 ppl_increase) %,
  int2 $(get ctx-int2-r32 ppl_increase) % → $(get ctx-int2-g16 ppl_increase) %; the design note's whole-history key scales (G 0) are the
  scheme that misses: int2 $(get ctx-int2-whole ppl_increase) %, int4 $(get ctx-int4-whole ppl_increase) %.
- re-positioned RoPE against the original positions (vanilla; both quantise the window's keys after RoPE), sink 4 + window
  476, mean KL against fp32 with the same policy: int4 $(get sink-int4-fp32sinks kl_mean) vs $(get sink-int4-vanilla kl_mean), int2
  $(get sink-int2-fp32sinks kl_mean) vs $(get sink-int2-vanilla kl_mean) nats.
- sinks kept in full precision (fp16, the default) against quantised: mean KL int2 $(get sink-int2-fp32sinks kl_mean) vs $(get sink-int2-qsinks kl_mean), int4
  $(get sink-int4-fp32sinks kl_mean) vs $(get sink-int4-qsinks kl_mean) nats.
- the residual at fp16 instead of fp32 (a memory remedy; R 128): int4 $(mib "$(get ctx-int4-kivi cache_bytes)") → $(mib "$(get ctx-int4-rfp16 cache_bytes)") at 512 tokens
  (bf16: $(mib "$(get ctx-bf16 cache_bytes)"); the default, no residual: $(mib "$(get ctx-int4 cache_bytes)")), mean KL $(get ctx-int4-kivi kl_mean) → $(get ctx-int4-rfp16 kl_mean) nats (default: $(get ctx-int4 kl_mean)).
- a Hadamard rotation of K and Q per head before quantising: not implemented, as every target is met without it.

## YOCO against the standard model

\`$yoco_model\` holds K/V in 6 of its 12 layers; \`$model\` in all 12. Same runs on both (\`tinygpt perplexity\`,
the first $valid_tokens tokens of \`$valid\` in 512-token windows, or the first $sink_tokens tokens of \`$long\` streamed;
"KV bytes" is the cache allocated for the run):

$(yoco_table)

## Greedy prefix match

\`tinygpt compare $model --prompts $prompts --tokens $greedy_tokens\`: the greedy continuation with an fp32 cache is the reference;
each cell is how many of its tokens the same greedy decode reproduces before the first divergence.

$(cat "$greedy_md" 2>/dev/null)

\`tinygpt compare\` keeps no residual unless \`--kv-residual\` is given (its header says so), so the table above measures
what the quantisation costs. With KIVI's published setting (G 32, R 128, fp32 residual) a prompt and $greedy_tokens
generated tokens never leave the fp32 residual, and compare's note says so: that table measures nothing of KIVI.

$(cat "$greedy_r0_md" 2>/dev/null)

The design note's whole-history key scales (\`--kv-group-size 0\`: every token quantised at once):

$(cat "$greedy_whole_md" 2>/dev/null)

## Long context: perplexity vs position

\`bench/long_context_models.sh\` (docs/kvcache.md has the meter's definitions): four models, each on a text of
8 × its training context C + 1 tokens, through a bounded cache of 128 tokens — StreamingLLM sink 4 + window 124 with
keys at their original RoPE positions (**vanilla**) or rotated at their cache slot (**re-positioned**), and window
128 only (**window only**, sink 0) — at every KV precision; the **in-context** reference scores every token with a
fresh fp32 cache per C-token window. Cells: perplexity over the tokens whose position falls in the bucket; "worst
bucket" is each policy's largest excess over the in-context reference, bucket by bucket (the target: within 10 %).
Texts: the GPL-3 text for the bundled models; for stories260K and TinyStories-656K their own samples
(\`bash bench/long_context_models.sh --make-texts\`: independent stories, \`tinygpt sample\` with seeds 1, 2, …, each
to its end-of-sequence, until 4700 tokens). The plots bucket by 256 tokens; thick lines fp32, thin lines of the
same colour the other precisions; the green band is the target.
The meter (\`tinygpt perplexity --attention-stats\`, fp32) gives the mean share of the attention mass on the first 1,
4 and 16 tokens each query sees (sinks first) and on the newest 16, over all heads, and how many heads put more than
half of it on the first 4. The experiment's ${lc_runs:-–} runs took ${lc_cpu:-–} s of CPU in all, one thread each
(\`--jobs 2\` runs two at a time: about half that in wall time on two idle cores).

$(for name in $lc_models; do lc_model_block "$name"; done)

What the four models say. Vanilla (keys at their original positions) is the one policy that fails: on stories260K
it collapses once its sinks sit more than four contexts behind the query (the last bucket), on the other three it
costs 12 to 32 %, and the meter shows why — sinks at distances never trained on draw up to 45 % of a head's attention,
re-positioned sinks at most 10 %. Re-positioned holds within 10 % of in-context on all four models at every
precision. No model has a sink head: within the context no head gives more than 3 % of its attention to the first
four tokens, so window-only attention (sink 0) holds as well, except stories260K at int2, where window-only has no
full-precision tokens at all (KIVI keeps the sinks at fp16). TinyStories-656K is the odd one: on its own samples
(short stories, one after another) every 128-token cache beats fresh 512-token windows — probably because it was
trained on single short stories, so that more history hurts it — and it is the one model where keeping the sinks
helps (re-positioned below window-only in every bucket), with the largest share on the first token (the text's BOS).

Does the bundled model need its sinks? StreamingLLM's central observation is that window-only attention collapses once
the first tokens are evicted, because the model parks attention on them. On this model it does not (the flagship rows
above, and at other windows here, fp32, the first $sink_tokens tokens of \`$long\`):

| tokens held | sink 0 (window only) | sink 4, re-positioned | sink 4, vanilla RoPE |
|---:|---:|---:|---:|
$(for w in 64 128 480; do printf '| %s | %s | %s | %s |\n' "$w" "$(get "sinkneed-w$w-s0" perplexity)" "$(get "sinkneed-w$w-s4" perplexity)" "$(get "sinkneed-w$w-s4v" perplexity)"; done)

The sinks are attended to — kept at their original positions (vanilla) they hurt once their distance exceeds the
trained 512 — but keeping them buys nothing here, so the "window-only degrades" half of the expected result does not
reproduce on our model, while "sink 4 + re-positioning holds" does. The meter says why: no head of the bundled models
puts much of its attention on the first tokens.

${bos_block:-(the BOS-trained model of the sink experiment is not in this checkout: \`bash tools/gpu_job.sh sinks\` makes it)}

${ls_block:-(issue #18, the training try: its model is not in this checkout and has not been trained yet; \`bash tools/gpu_job.sh long-sinks\` on a GPU machine makes it)}

Cross-check of the reference against training's own evaluation (PyTorch, fp32 on the GPU, non-overlapping 512-token
windows of the same text, $gpu_tokens tokens as its tokenizer counted them): ours, ${ref_line:-–}; training's, perplexity
${gpu_ppl:-–}.
EOF
[ -s "$work/ts-ctx-valid-fp32.txt" ] && { echo; ts_block; }
if [ -n "$soak" ]; then
    echo
    echo "$soak"
fi
} >"$out_md.tmp" || exit 1
if [ -n "$only" ]; then
    # splice: the new long-context section (up to the next "## ") and the targets' StreamingLLM paragraph (from its
    # first line to the next "## ") replace theirs in the existing file
    [ -f "$out_md" ] || { echo "results.sh: --only needs an existing $out_md" >&2; exit 1; }
    grep -q '^## Long context' "$out_md.tmp" && grep -q '^StreamingLLM (sink 4) within 10 %' "$out_md.tmp" ||
        { echo "results.sh: the generated text lacks the long-context section: $out_md left as it was" >&2; exit 1; }
    awk -v new="$out_md.tmp" '
        function block(file, start,    line, on, out) {
            on = 0; out = ""
            while ((getline line < file) > 0) {
                if (on && line ~ /^## /) break
                if (line ~ start) on = 1
                if (on) out = out line "\n"
            }
            close(file)
            return out
        }
        BEGIN { lc = block(new, "^## Long context"); tg = block(new, "^StreamingLLM \\(sink 4\\) within 10 %") }
        /^## / { skip = 0 }
        /^## Long context/ { printf "%s", lc; skip = 1; next }
        /^StreamingLLM \(sink 4\) within 10 %/ { printf "%s", tg; skip = 1; next }
        !skip' "$out_md" >"$out_md.spliced" && mv "$out_md.spliced" "$out_md" && rm -f "$out_md.tmp"
else
    mv "$out_md.tmp" "$out_md"
fi
echo "results.sh: wrote $out_md ($(((SECONDS - t_start) / 60)) min)" >&2
