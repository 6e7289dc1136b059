#!/usr/bin/env bash
# kv_quality.sh — issue #51's quality table: how far each quantised KV cache's predictions are from an fp32 cache's
# on the real models we hold (stories260K, TinyStories-656K, each on its own samples) and the bundled ones (flagship,
# YOCO, on the held-out Austen text), with `tinygpt perplexity MODEL TEXT --max-tokens N --kv-quantize P
# --kl-base fp32`: |Δppl| (perplexity against the fp32 cache's, either direction), mean KL(fp32 ‖ cache), top-1
# agreement.
#
#   in-context   the model's own context (the perplexity command's independent segments, a fresh cache each)
#   past         StreamingLLM sink 4 + window 124, re-positioned RoPE, through 4096 tokens (8x the trained context
#                of 512): the whole run, and per position bucket 1–511, 512–1023, 1024–2047, 2048–4095 (Δppl of the
#                bucket against the fp32 cache with the same policy, from the two runs' per-token CSVs)
#
# usage: bench/kv_quality.sh [--mode in-context|past] [--tinygpt BIN] [--tokens N] [--models "a b"]
#                            [--rows "NAME|FLAGS;..."] [--jobs J] [-- EXTRA FLAGS FOR EVERY ROW]
#   default rows: int8, int4, int2 at the defaults, int4 / int2 at KIVI's setting (G 32, R 128)
#   default models: stories260K TinyStories-656K flagship yoco (--models picks some)
# Prints one Markdown row per model x row: model | row | Δppl % | mean KL | top-1 % (past: then the four buckets'
# Δppl %). Runs go to build/kv_quality/ (named by every flag, re-used while newer than the binary).
set -u
cd "$(dirname "$0")/.." || exit 2
shared=${TG_SHARED:-../shared}
bin=./tinygpt
mode=in-context
tokens=4096
jobs=2
models="stories260K TinyStories-656K flagship yoco"
rows="int8|--kv-quantize int8;int4|--kv-quantize int4;int2|--kv-quantize int2;int4 KIVI|--kv-quantize int4 --kv-group-size 32 --kv-residual 128;int2 KIVI|--kv-quantize int2 --kv-group-size 32 --kv-residual 128"
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --mode) mode=$2; shift 2 ;;
    --tinygpt) bin=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) echo "kv_quality.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "kv_quality.sh: $bin not found" >&2; exit 1; }
out=${TG_KVQ_OUT:-build/kv_quality}
mkdir -p "$out"

model_of() {
    case "$1" in
    stories260K) echo "$shared/testdata/models/stories260K/stories260K.gguf|models/data/samples-stories260K.txt" ;;
    TinyStories-656K) echo "$shared/testdata/models/TinyStories-656K-hf|models/data/samples-tinystories-656k.txt" ;;
    flagship) echo "models/tinygpt-flagship.gguf|models/data/valid.txt" ;;
    yoco) echo "models/tinygpt-yoco.gguf|models/data/valid.txt" ;;
    *) echo "kv_quality.sh: unknown model $1" >&2; return 1 ;;
    esac
}

past_flags=(--streaming-llm-sink 4 --streaming-llm-window 124 --streaming-llm-rope reposition)
# run NAME MODEL TEXT FLAGS...: one perplexity run into $out/NAME.{txt,csv}, skipped when newer than the binary
run() {
    local name=$1 model=$2 text=$3
    shift 3
    if [ -s "$out/$name.txt" ] && [ "$out/$name.txt" -nt "$bin" ]; then return 0; fi
    local csv=()
    [ "$mode" = past ] && csv=(--csv "$out/$name.csv")
    "$bin" perplexity "$model" "$text" --max-tokens "$tokens" --threads 1 --quiet "${csv[@]}" "$@" \
        >"$out/$name.tmp" 2>"$out/$name.err" && mv "$out/$name.tmp" "$out/$name.txt"
}
get() { awk -v k="$2" '$1 == k { print $2; exit }' "$out/$1.txt" 2>/dev/null; }
key() { echo "$*" | tr -c 'A-Za-z0-9\n' '_'; }
# bucket Δppl % of run $1 against run $2 over indices [lo, hi]
bucket() {
    awk -F, -v lo="$3" -v hi="$4" 'FNR == 1 { next } NR == FNR { if ($1 >= lo && $1 <= hi) b += $4; next }
        { if ($1 >= lo && $1 <= hi) { a += $4; n++ } }
        END { if (n) printf "%.2f", (exp((a - b) / n) - 1) * 100; else printf "–" }' "$out/$2.csv" "$out/$1.csv"
}

declare -a names labels mdls
IFS=';' read -r -a row_list <<<"$rows"
running=0
for m in $models; do
    spec=$(model_of "$m") || continue
    IFS='|' read -r model text <<<"$spec"
    [ -e "$model" ] || { echo "kv_quality.sh: $model not found ($m skipped)" >&2; continue; }
    mflags=()
    [ "$mode" = past ] && mflags=("${past_flags[@]}")
    if [ "$mode" = past ]; then
        bname=$(key "$m-$mode-fp32-base")
        run "$bname" "$model" "$text" "${mflags[@]}" --kv-quantize fp32 &
        running=$((running + 1))
    fi
    for r in "${row_list[@]}"; do
        IFS='|' read -r label flags <<<"$r"
        # shellcheck disable=SC2206
        fl=($flags "${extra[@]}")
        name=$(key "$m-$mode-${fl[*]}")
        names+=("$name")
        labels+=("$label")
        mdls+=("$m")
        run "$name" "$model" "$text" "${mflags[@]}" "${fl[@]}" --kl-base fp32 &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
    done
done
wait
if [ "$mode" = past ]; then
    echo "| model | cache (${extra[*]:-no extra flags}) | Δppl | mean KL | top-1 | 1–511 | 512–1023 | 1024–2047 | 2048–4095 |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
else
    echo "| model | cache (${extra[*]:-no extra flags}) | Δppl | mean KL | top-1 |"
    echo "|---|---|---:|---:|---:|"
fi
for i in "${!names[@]}"; do
    n=${names[$i]}
    if [ ! -s "$out/$n.txt" ]; then
        echo "| ${mdls[$i]} | ${labels[$i]} | failed: $(head -c 200 "$out/$n.err" | tr '\n' ' ') | | |"
        continue
    fi
    line="| ${mdls[$i]} | ${labels[$i]} | $(get "$n" ppl_increase) % | $(get "$n" kl_mean) | $(get "$n" top1_agree) % |"
    if [ "$mode" = past ]; then
        b=$(key "${mdls[$i]}-$mode-fp32-base")
        line="$line $(bucket "$n" "$b" 1 511) % | $(bucket "$n" "$b" 512 1023) % | $(bucket "$n" "$b" 1024 2047) % | $(bucket "$n" "$b" 2048 4095) % |"
    fi
    echo "$line"
done
