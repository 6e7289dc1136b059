#!/usr/bin/env bash
# results.sh — regenerates docs/RESULTS.md and its plots (docs/results/*.svg): what the KV cache costs in quality on
# the bundled model (issue #5). Every number in RESULTS.md comes from a command this script runs:
#   tinygpt info --cache-table                the cache-bytes tables (the bundled model and its YOCO variant)
#   tinygpt perplexity --kl-base fp32          perplexity, KL and top-1 agreement of each cache policy against an fp32
#                                              unbounded cache, within the 512-token context (valid.txt)
#   tinygpt perplexity (streaming)            sinks in full precision or quantised
#   tinygpt compare                           the greedy-prefix-match table
#   bench/long_context.sh                     perplexity vs position past the context, table and plots
#   tinygpt perplexity (YOCO)                 the YOCO variant against the standard model, bytes and perplexity
# A "## Soak" section already in RESULTS.md (another tool's) is kept as it is, at the end.
#
# The section on TinyStories-656K, a model nobody here trained (tools/results_tinystories.sh), comes before Soak.
#
# usage: tools/results.sh [--quick] [--jobs N] [--model M] [--tinygpt BIN] [--section tinystories]
#   --section tinystories   run only that section's jobs and replace only its block in RESULTS.md
#   --quick     small token counts (a smoke run of the pipeline; the numbers are not the published ones)
#   --jobs N    perplexity runs in parallel, one thread each (default 2: the two cores of the reference machine)
# Intermediate files go to build/results/ and build/long_context/; runs whose output is newer than the model and the
# binary are re-used (delete those folders to start afresh).
set -u
cd "$(dirname "$0")/.." || exit 2

model=models/tinygpt-flagship.gguf
yoco_model=models/tinygpt-yoco.gguf
# the attention-sink experiment's model (not committed: `bash tools/gpu_job.sh sinks` on a GPU machine makes it);
# without it the section from the previous RESULTS.md is kept
bos_model=models/experiments/tinygpt-bos.gguf
bin=./tinygpt
jobs=2
quick=0
section=""
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --tinygpt) bin=$2; shift 2 ;;
    --section) section=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

valid=models/data/valid.txt
long=models/data/long-heldout.txt
prompts=tools/results_prompts.txt
# tokens per run: 16 context windows of valid.txt for the within-context table, 8192 streamed tokens for the sink
# table, 50,000 for the long-context experiment (unbounded cache: 4096; recomputation oracle: every 500th token)
valid_tokens=8193
sink_tokens=8192
lc_tokens=50000
lc_unbounded=4096
lc_every=500
greedy_tokens=60
if [ "$quick" = 1 ]; then
    valid_tokens=1025
    sink_tokens=1024
    lc_tokens=3000
    lc_unbounded=1024
    lc_every=500
    greedy_tokens=12
fi
work=build/results
lcdir=build/long_context
[ "$quick" = 1 ] && work=build/results-quick && lcdir=build/long_context-quick
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
case $section in
"") ;;
tinystories)
    [ -f "$out_md" ] || { echo "results.sh: $out_md not found (--section needs a RESULTS.md to splice into)" >&2; exit 1; }
    ts_jobs || exit 1
    ts_splice "$out_md" || exit 1
    echo "results.sh: replaced the TinyStories section of $out_md ($(((SECONDS - t_start) / 60)) min)" >&2
    exit 0
    ;;
*) echo "results.sh: unknown section '$section' (known: tinystories)" >&2; exit 2 ;;
esac

# ---- the within-context table: each policy against fp32 unbounded, valid.txt in 512-token windows -----------------
# rows: "name|label|flags"
rows=(
    "fp32|fp32 (the base itself)|--kv-quantize fp32"
    "fp16|fp16|--kv-quantize fp16"
    "bf16|bf16|--kv-quantize bf16"
    "int8|int8 (defaults: G 32, no residual)|--kv-quantize int8"
    "int4|int4 (defaults: G 32, no residual)|--kv-quantize int4"
    "int2|int2 (defaults: G 16, R 16 at fp16)|--kv-quantize int2"
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
echo "results.sh: sink runs ($sink_tokens tokens of $long each)" >&2
stream=(--streaming-llm-sink 4 --streaming-llm-window 476 --streaming-llm-reposition)
for p in int8 int4 int2; do
    job "sink-$p-fp32sinks" "$long" "$sink_tokens" --kl-base fp32 "${stream[@]}" --kv-quantize "$p"
    job "sink-$p-qsinks" "$long" "$sink_tokens" --kl-base fp32 "${stream[@]}" --kv-quantize "$p" --kv-quantize-sinks
    # vanilla RoPE: keys quantised after RoPE (re-positioning stores and quantises them before it)
    job "sink-$p-vanilla" "$long" "$sink_tokens" --kl-base fp32 --streaming-llm-sink 4 --streaming-llm-window 476 \
        --kv-quantize "$p"
done
# does the model lean on its first tokens at all? window only against sink 4 at three window sizes (fp32)
for w in 64 128 480; do
    job "sinkneed-w$w-s0" "$long" "$sink_tokens" --streaming-llm-sink 0 --streaming-llm-window "$w"
    job "sinkneed-w$w-s4" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
        --streaming-llm-reposition
    job "sinkneed-w$w-s4v" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4))
    if [ -e "$bos_model" ]; then
        job_model=$bos_model
        job "bos-w$w-s0" "$long" "$sink_tokens" --streaming-llm-sink 0 --streaming-llm-window "$w"
        job "bos-w$w-s4" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4)) \
            --streaming-llm-reposition
        job "bos-w$w-s4v" "$long" "$sink_tokens" --streaming-llm-sink 4 --streaming-llm-window $((w - 4))
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

ts_jobs

# ---- the greedy-match table ---------------------------------------------------------------------------------------
echo "results.sh: greedy-match tables" >&2
greedy_md=$work/greedy.md
greedy_whole_md=$work/greedy-whole.md
greedy_r0_md=$work/greedy-r0.md
if ! [ -s "$greedy_md" ] || ! [ "$greedy_md" -nt "$bin" ] || ! [ "$greedy_md" -nt "$model" ]; then
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
echo "results.sh: long-context experiment" >&2
bash bench/long_context.sh --model "$model" --text "$long" --tokens "$lc_tokens" --unbounded-tokens "$lc_unbounded" \
    --every "$lc_every" --out "$lcdir" --tinygpt "$bin" --jobs "$jobs" >&2 ||
    { echo "results.sh: bench/long_context.sh failed" >&2; exit 1; }
cp "$lcdir"/perplexity-vs-position-*.svg "$plots"/

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
    echo "| KV storage | RoPE (keys quantised) | sinks | perplexity | fp32 same policy | vs fp32 | mean KL (nats) | top-1 agreement |"
    echo "|---|---|---|---:|---:|---:|---:|---:|"
    local p s
    for p in int8 int4 int2; do
        for s in fp32sinks qsinks vanilla; do
            local n=sink-$p-$s
            [ -s "$work/$n.txt" ] || continue
            printf '| %s | %s | %s | %s | %s | %s %% | %s | %s %% |\n' "$p" \
                "$([ $s = vanilla ] && echo "vanilla (after RoPE)" || echo "re-positioned (before RoPE)")" \
                "$([ $s = qsinks ] && echo "quantised ($p)" || echo fp32)" \
                "$(get "$n" perplexity)" "$(get "$n" base_perplexity)" "$(get "$n" ppl_increase)" "$(get "$n" kl_mean)" \
                "$(get "$n" top1_agree)"
        done
    done
}

# bytes_ratio MODEL PRECISION [FLAGS...]: the report's ratio to bf16 ("bf16 would be ... (0.36x)") of a cache
bytes_ratio() {
    local m=$1 p=$2
    shift 2
    "$bin" sample "$m" --prompt x --tokens 1 --threads 1 --seed 1 --kv-quantize "$p" "$@" 2>&1 >/dev/null |
        sed -n 's/.*bf16 would be [^(]*(\([0-9.]*\)x).*/\1/p'
}
# the issue-14 byte targets: int8 <= 0.65, int4 <= 0.42, int2 <= 0.32 of bf16 at sink 4 + window 256 and at the full
# context, on both models, under the default flags (both settings' cells)
bytes_targets() {
    local p lim cells worst r kcells kworst m pol
    for p in int8:0.65 int4:0.42 int2:0.32; do
        lim=${p#*:} p=${p%%:*} cells="" worst=0 kcells="" kworst=0
        for m in "$model" "$yoco_model"; do
            for pol in window full; do
                local f=()
                [ $pol = window ] && f=(--streaming-llm-sink 4 --streaming-llm-window 256)
                r=$(bytes_ratio "$m" "$p" "${f[@]}")
                cells="$cells${cells:+ · }$(basename "$m" .gguf | sed 's/tinygpt-//') $pol ${r}x"
                worst=$(awk -v a="$worst" -v b="${r:-9}" 'BEGIN { print (b > a ? b : a) }')
                r=$(bytes_ratio "$m" "$p" "${f[@]}" --kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32)
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
lc_verdict=$(grep -E "^- (window|sink4|sink4-repos) fp32:" "$lcdir/summary.md" 2>/dev/null)
n_long=$(awk '$1 == "text" {sub(/^\(/, "", $3); print $3}' "$lcdir/in-context-fp32.txt")
ref_line=$(cat "$lcdir/reference.txt" 2>/dev/null)
gpu_ppl=$(jq -r '.final_fp32.long_heldout_ppl // empty' models/training/metrics.json 2>/dev/null)
gpu_tokens=$(jq -r '.long_tokens // empty' models/training/metrics.json 2>/dev/null)
int4_resid=$(awk -v a="$(get ctx-int4-kivi cache_bytes)" -v b="$(get ctx-int4-rfp16 cache_bytes)" 'BEGIN { if (a != "" && b != "") print 2 * (a - b) }')
elapsed=$((SECONDS - t_start))
run_min=$(cat "$work"/*.txt "$lcdir"/*-*.txt 2>/dev/null | awk '$1 == "seconds" { s += $2 } END { printf "%.0f", s / 60 }')

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
- subsampling (to keep the run under ~30 minutes on 2 cores): within-context table on the first $valid_tokens tokens
  of \`$valid\` (independent 512-token windows, a fresh cache each, as in training's evaluation); sink table on the
  first $sink_tokens tokens of \`$long\`; long-context experiment on the first $lc_tokens tokens (unbounded cache: the first
  $lc_unbounded; recomputation oracle: every ${lc_every}th token); greedy match: $(grep -c . "$prompts") prompts x $greedy_tokens tokens.
- this run: $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)"), $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $((elapsed / 60)) min $((elapsed % 60)) s for this invocation; the
  perplexity runs behind this file took $run_min min of one core in all (\`--jobs 2\` runs two at a time; the greedy tables
  are not counted).

## Targets

| target (issues #5, #14) | defaults (int8 / int4: G 32, no residual; int2: G 16, R 16; residual and sinks fp16) | | KIVI's setting (G 32, R 128, fp32 residual; \`--kv-group-size 32 --kv-residual 128 --kv-residual-precision fp32\`) | |
|---|---:|---|---:|---|
| int8 perplexity increase ≤ 0.1 % (within context, vs fp32 unbounded) | ${int8_inc:-–} % | $(verdict "$(echo "$int8_inc" | tr -d '+')" 0.1) | ${int8_inc32:-–} % | $(verdict "$(echo "$int8_inc32" | tr -d '+')" 0.1) |
| int4 perplexity increase ≤ 1 % | ${int4_inc:-–} % | $(verdict "$(echo "$int4_inc" | tr -d '+')" 1) | ${int4_inc32:-–} % | $(verdict "$(echo "$int4_inc32" | tr -d '+')" 1) |
| int2 perplexity increase ≤ 5 % | ${int2_inc:-–} % | $(verdict "$(echo "$int2_inc" | tr -d '+')" 5) | ${int2_inc32:-–} % | $(verdict "$(echo "$int2_inc32" | tr -d '+')" 5) |
| greedy match 100 % at int8 ($greedy_tokens tokens; \`tinygpt compare\` runs without a residual unless given one) | ${greedy_int8:-–} % | $(verdict "$(awk -v g="${greedy_int8:-0}" 'BEGIN { print 100 - g }')" 0) | ${greedy_int8_r0:-–} % (never leaves the residual) | $(verdict "$(awk -v g="${greedy_int8_r0:-0}" 'BEGIN { print 100 - g }')" 0) |
$(bytes_targets)

Bytes allocated, from the report of \`tinygpt sample MODEL --kv-quantize P [--streaming-llm-window 256] --tokens 1\`
("bf16 would be": a bf16 cache with the same sinks, window and context, from the same geometry code).
\`tests/unit/test_cache_sizes.c\` (in \`make test\`) checks that every quantised cache under the default flags is
smaller than bf16 at every window 16, 32, …, 65536 and every unbounded cache of 16 … 65536 tokens, on both models.

StreamingLLM (sink 4) within 10 % of the in-context perplexity out to $lc_tokens tokens (bucket by bucket, fp32 cache; all
precisions in the long-context section). StreamingLLM as the paper defines it assigns positions within the cache
("rather than those in the original text", Xiao et al. 2023, section 3.2): that is \`sink4-repos\`
(\`--streaming-llm-reposition\`). \`sink4\` keeps every key at its original RoPE position, as the design note's
implementation did; past the context its sinks sit further away than any distance the model was trained on, and it
misses the target. \`window\` is window-only attention (sink 0, window 480):

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
re-coded as the group fills) and one group of 16 at fp16 for int2, with the sinks at fp16: a cache smaller than bf16
at every size. KIVI's published setting (G 32, R 128, fp32 residual) keeps a quarter of a 512-token window in fp32:
its fp32 residual is most of its bytes (int4: $(mib "$int4_resid") of $(mib "$(get ctx-int4-kivi cache_bytes)"), the
difference between the int4 rows with an fp32 and an fp16 residual of 128, doubled). "KV bytes" is the cache allocated
for the whole 512-token context.

Alternatives measured for the defaults (issue 14): no residual at all for int2 (\`int2, G 32, no residual\`, and G 16)
misses its 5 % target, so int2 keeps one group; a residual of one group of 16 (the default) against one of 8 or of 32
(\`R 32\`: the same quality, but 0.33× of bf16 at window 256, over the 0.32× target); int4 with G 16 and no
residual against G 32 (more scale bytes for little gain).

$(ctx_table)

## Sinks in full precision or quantised

StreamingLLM sink 4 + window 476, re-positioned, over the first $sink_tokens tokens of \`$long\`, against an fp32 cache with the
same policy. By default the cache keeps the 4 sink tokens at the residual precision (fp16; "fp32" in the table's sink column is that
full-precision default); \`--kv-quantize-sinks\` quantises them like the rest (keys per channel over the 4 sinks, values
per token; they keep fp32 slots).

$(sink_table)

## Remedies

Issue #5 asks for the remedies the literature reports where int4 or int2 miss their targets. With KIVI's groups none
is needed to pass (see Targets); their measured effect, from the tables above:

- smaller key groups (G 16 against G 32, both R 32): perplexity increase int4 $(get ctx-int4-r32 ppl_increase) % → $(get ctx-int4-g16 ppl_increase) %,
  int2 $(get ctx-int2-r32 ppl_increase) % → $(get ctx-int2-g16 ppl_increase) %; the design note's whole-history key scales (G 0) are the
  scheme that misses: int2 $(get ctx-int2-whole ppl_increase) %, int4 $(get ctx-int4-whole ppl_increase) %.
- keys quantised before RoPE (re-positioned StreamingLLM stores them so) against after it (vanilla), sink 4 + window
  476, mean KL against fp32 with the same policy: int4 $(get sink-int4-fp32sinks kl_mean) vs $(get sink-int4-vanilla kl_mean), int2
  $(get sink-int2-fp32sinks kl_mean) vs $(get sink-int2-vanilla kl_mean) nats.
- sinks kept in fp32 against quantised: mean KL int2 $(get sink-int2-fp32sinks kl_mean) vs $(get sink-int2-qsinks kl_mean), int4
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

\`bench/long_context.sh\` on \`$long\`. Cells: perplexity over the tokens whose position falls in the bucket.
The in-context reference scores every token with a fresh fp32 cache per 512-token window (on average 256 tokens of
context); the recomputation rows (\`recompute\`) re-run the last 512 tokens for every scored token (every ${lc_every}th
token only: noisy in the first buckets, which hold few of them); the \`@sub\` rows give the in-context reference and
StreamingLLM re-positioned on exactly those tokens, for a like-for-like comparison with the oracle.

$(cat "$lcdir/buckets.md" 2>/dev/null)

Does the model need its sinks? StreamingLLM's central observation is that window-only attention collapses once the first
tokens are evicted, because the model parks attention on them. On this model it does not (rows above, and at smaller
windows here, fp32, the first $sink_tokens tokens of \`$long\`):

| tokens held | sink 0 (window only) | sink 4, re-positioned | sink 4, vanilla RoPE |
|---:|---:|---:|---:|
$(for w in 64 128 480; do printf '| %s | %s | %s | %s |\n' "$w" "$(get "sinkneed-w$w-s0" perplexity)" "$(get "sinkneed-w$w-s4" perplexity)" "$(get "sinkneed-w$w-s4v" perplexity)"; done)

The sinks are attended to — kept at their original positions (vanilla) they hurt once their distance exceeds the
trained 512 — but keeping them buys nothing here, so the "window-only degrades" half of the expected result does not
reproduce on our model, while "unbounded degrades past the context" and "sink 4 + re-positioning holds" do.

${bos_block:-(the BOS-trained model of the sink experiment is not in this checkout: \`bash tools/gpu_job.sh sinks\` makes it)}

Verdicts (each streaming policy against the in-context reference, bucket by bucket past the context):

$(cat "$lcdir/summary.md" 2>/dev/null)

Cross-check of the reference against training's own evaluation (PyTorch, fp32 on the GPU, non-overlapping 512-token
windows of the same text, $gpu_tokens tokens as its tokenizer counted them): ours, ${ref_line:-–}; training's, perplexity
${gpu_ppl:-–}.

$(for p in fp32 int8 int4 int2; do [ -f "$plots/perplexity-vs-position-$p.svg" ] && printf '![perplexity vs position, %s](results/perplexity-vs-position-%s.svg)\n\n' "$p" "$p"; done)
EOF
[ -s "$work/ts-ctx-valid-fp32.txt" ] && { echo; ts_block; }
if [ -n "$soak" ]; then
    echo
    echo "$soak"
fi
} >"$out_md.tmp" && mv "$out_md.tmp" "$out_md"
echo "results.sh: wrote $out_md ($(((SECONDS - t_start) / 60)) min)" >&2
