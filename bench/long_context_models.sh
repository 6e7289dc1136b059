#!/usr/bin/env bash
# long_context_models.sh — the long-context experiment of issue #18 on real models: perplexity per position bucket
# to 8x the training context for each StreamingLLM policy x KV precision, the attention-sink meter beside it, a
# Markdown table and one gnuplot SVG per model (all policies on the same axes).
#
# Models (each with its training context C and a text of at least 8C + 1 tokens):
#   stories260K        ../shared/testdata/models/stories260K/stories260K.gguf (its file says 2048; trained on 512)
#                      on models/data/samples-stories260K.txt, the model's own sample (see --make-texts)
#   TinyStories-656K   ../shared/testdata/models/TinyStories-656K-hf on models/data/samples-tinystories-656k.txt
#   flagship           models/tinygpt-flagship.gguf on models/data/long-heldout.txt (GPL-3, held out from training)
#   yoco               models/tinygpt-yoco.gguf on the same text
# A model whose file is absent is skipped with a message ($TG_SHARED, default ../shared, holds the first two).
#
# Policies, a cache of 128 tokens each (the issue's setting), RoPE always named explicitly:
#   vanilla      StreamingLLM sink 4 + window 124, keys at their original positions
#   reposition   sink 4 + window 124, keys rotated at their cache slot
#   window       window 128 only (sink 0), original positions (with no sink the two RoPE schemes are the same math)
#   in-context   the reference: independent C-token windows, a fresh fp32 cache each
# at every precision of --precisions (the reference at fp32 only). The fp32 runs also run the attention-sink meter
# (`tinygpt perplexity --attention-stats`).
#
# usage: bench/long_context_models.sh [--out DIR] [--tinygpt BIN] [--jobs J] [--precisions "..."] [--quick]
#                                     [--models SPECS] [--make-texts]
#   --jobs J      runs in parallel, one thread each (default 2)
#   --quick       2C + 1 tokens per run, fp32 and int4 only (a smoke run; not the published numbers)
#   --models "NAME|MODEL|TEXT|CONTEXT;..."  these models instead of the four
#   --make-texts  (re)generate the two sample texts (tinygpt sample: independent stories with seeds 1, 2, ..., each
#                 up to its end-of-sequence, one a paragraph, until 4700 tokens; one thread), then exit
# Output in DIR (default build/long_context_models): MODEL/NAME.csv / .txt / .attn.csv per run, MODEL/buckets.md,
# MODEL/meter.md, MODEL/verdict.tsv, MODEL.svg, models.tsv (name, model, text, context of each model run) and
# seconds.txt (the wall time of this invocation), run-cpu-seconds.txt (the runs' CPU seconds summed, and how many
# runs). Runs newer than
# their model, text and binary are re-used (delete DIR to start afresh).
set -u
cd "$(dirname "$0")/.." || exit 2

shared=${TG_SHARED:-../shared}
out=build/long_context_models
bin=./tinygpt
jobs=2
precisions="fp32 fp16 bf16 int8 int4 int2"
quick=0
make_texts=0
custom_models=
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --tinygpt) bin=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --make-texts) make_texts=1; shift ;;
    --models) custom_models=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) echo "long_context_models.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ "$quick" = 1 ] && precisions="fp32 int4"
[ -x "$bin" ] || { echo "long_context_models.sh: $bin not found" >&2; exit 1; }

# name|model|text|context
models=(
    "stories260K|$shared/testdata/models/stories260K/stories260K.gguf|models/data/samples-stories260K.txt|512"
    "TinyStories-656K|$shared/testdata/models/TinyStories-656K-hf|models/data/samples-tinystories-656k.txt|512"
    "flagship|models/tinygpt-flagship.gguf|models/data/long-heldout.txt|512"
    "yoco|models/tinygpt-yoco.gguf|models/data/long-heldout.txt|512"
)
[ -n "$custom_models" ] && IFS=';' read -r -a models <<<"$custom_models"

# rope original|reposition: the flags that name the RoPE scheme of a bounded cache, for this binary (the
# --streaming-llm-rope flag where it has one, else today's --streaming-llm-reposition / nothing)
if "$bin" perplexity --help | grep -q -- '--streaming-llm-rope'; then
    rope() { echo "--streaming-llm-rope $1"; }
else
    rope() { [ "$1" = reposition ] && echo "--streaming-llm-reposition"; }
fi

if [ "$make_texts" = 1 ]; then
    for m in "${models[@]:0:2}"; do
        IFS='|' read -r name model text ctx <<<"$m"
        [ -e "$model" ] || { echo "long_context_models.sh: $model not found" >&2; exit 1; }
        # independent stories, each from BOS to the model's end-of-sequence (seeds 1, 2, ...), one a paragraph,
        # until the text holds 4700 tokens
        : >"$text.tmp"
        seed=1
        while [ "$("$bin" tokenize "$model" "$(cat "$text.tmp")" | wc -w)" -lt 4700 ]; do
            # shellcheck disable=SC2046
            "$bin" sample "$model" -n 1000 --seed "$seed" --streaming-llm-sink 4 --streaming-llm-window 508 \
                $(rope reposition) --threads 1 2>/dev/null >>"$text.tmp" || exit 1
            echo >>"$text.tmp"
            seed=$((seed + 1))
        done
        mv "$text.tmp" "$text"
        echo "long_context_models.sh: wrote $text ($(wc -c <"$text") bytes, $((seed - 1)) stories)"
    done
    exit 0
fi
command -v gnuplot >/dev/null || echo "long_context_models.sh: gnuplot not found (apt-get install gnuplot-nox): no plots" >&2
mkdir -p "$out"
t_start=$SECONDS

# run DIR NAME MODEL TEXT TOKENS FLAGS...: one perplexity run into DIR/NAME.csv / .txt, in the background (at most
# $jobs at a time; skipped when up to date). `wait` before reading the results.
run() {
    local dir=$1 name=$2 model=$3 text=$4 tokens=$5
    shift 5
    local txt=$dir/$name.txt
    if [ -s "$txt" ] && [ "$txt" -nt "$model" ] && [ "$txt" -nt "$bin" ] && [ "$txt" -nt "$text" ]; then return 0; fi
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    (
        TIMEFORMAT='%U %S' # the run's CPU seconds (user, system) into NAME.cpu
        if { time "$bin" perplexity "$model" "$text" --max-tokens "$tokens" --threads 1 --quiet --csv "$dir/$name.csv" \
            "$@" >"$txt.tmp" 2>"$txt.err"; } 2>"$dir/$name.cpu"; then
            mv "$txt.tmp" "$txt"
        else
            echo "long_context_models.sh: tinygpt perplexity failed for $dir/$name: $(tail -n 1 "$txt.err")" >&2
            rm -f "$txt.tmp"
        fi
    ) &
}

# policy_flags POLICY: the cache flags of a policy
policy_flags() {
    case $1 in
    vanilla) echo "--streaming-llm-sink 4 --streaming-llm-window 124 $(rope original)" ;;
    reposition) echo "--streaming-llm-sink 4 --streaming-llm-window 124 $(rope reposition)" ;;
    window) echo "--streaming-llm-sink 0 --streaming-llm-window 128 $(rope original)" ;;
    esac
}
policies="vanilla reposition window"
policy_label() {
    case $1 in
    in-context) echo "in-context (fresh C-token windows)" ;;
    vanilla) echo "sink 4 + window 124, original positions (vanilla)" ;;
    reposition) echo "sink 4 + window 124, re-positioned" ;;
    window) echo "window 128 only (sink 0)" ;;
    esac
}

present=()
for m in "${models[@]}"; do
    IFS='|' read -r name model text ctx <<<"$m"
    if [ ! -e "$model" ] || [ ! -e "$text" ]; then
        echo "long_context_models.sh: $name skipped: $model or $text not found" >&2
        continue
    fi
    present+=("$m")
    tokens=$(((quick ? 2 : 8) * ctx + 1))
    dir=$out/$name
    mkdir -p "$dir"
    echo "long_context_models.sh: $name (context $ctx) on $text, $tokens tokens" >&2
    run "$dir" in-context-fp32 "$model" "$text" "$tokens" --context "$ctx" --attention-csv "$dir/in-context-fp32.attn.csv"
    for p in $precisions; do
        for pol in $policies; do
            meter=()
            [ "$p" = fp32 ] && meter=(--attention-csv "$dir/$pol-$p.attn.csv")
            # shellcheck disable=SC2046
            run "$dir" "$pol-$p" "$model" "$text" "$tokens" $(policy_flags "$pol") --kv-quantize "$p" "${meter[@]}"
        done
    done
done
wait

# ---- per model: buckets, meter, verdict, plot ------------------------------------------------------------------
# bucket_row FILE EDGES: tab-separated perplexities per bucket [E1, E2), ..., [E(n-1), En] of the scored token's index
bucket_row() {
    awk -F, -v edges="$2" '
        BEGIN { n = split(edges, E, " ") }
        NR > 1 { for (b = 1; b < n; b++) if ($1 >= E[b] && ($1 < E[b + 1] || (b == n - 1 && $1 <= E[n]))) { s[b] += $4; c[b]++; break } }
        END { for (b = 1; b < n; b++) printf "%s%s", (b > 1 ? "\t" : ""), (c[b] ? sprintf("%.3f", exp(s[b] / c[b])) : ""); print "" }' "$1"
}
# meter_row FILE: the attn_summary line of a run as table cells: first 1, 4, 16, newest 16, sink heads of heads
meter_row() {
    awk '$1 == "attn_summary" { sub(/;$/, "", $13); printf "%s | %s | %s | %s | %s of %s", $7, $9, $11, $13, $(NF - 2), $NF }' "$1"
}
failed=0
: >"$out/models.tsv.tmp"
for m in "${present[@]}"; do
    IFS='|' read -r name model text ctx <<<"$m"
    dir=$out/$name
    tokens=$(((quick ? 2 : 8) * ctx + 1))
    for f in in-context-fp32 $(for p in $precisions; do for pol in $policies; do echo "$pol-$p"; done; done); do
        [ -s "$dir/$f.txt" ] || { echo "long_context_models.sh: $dir/$f.txt missing: a run failed" >&2; failed=1; }
    done
    [ "$failed" = 0 ] || continue
    edges="1 $ctx"
    e=$((2 * ctx))
    while [ "$e" -lt $((tokens - 1)) ]; do edges="$edges $e"; e=$((2 * e)); done
    edges="$edges $((tokens - 1))"
    header=$(awk -v edges="$edges" 'BEGIN { n = split(edges, E, " "); for (b = 1; b < n; b++) printf "%s%d–%d", (b > 1 ? "\t" : ""), E[b], E[b + 1] - (b < n - 1); print "" }')
    {
        printf 'policy\tKV\t%s\n' "$header"
        printf '%s\tfp32\t%s\n' "$(policy_label in-context)" "$(bucket_row "$dir/in-context-fp32.csv" "$edges")"
        for pol in $policies; do
            for p in $precisions; do
                printf '%s\t%s\t%s\n' "$(policy_label "$pol")" "$p" "$(bucket_row "$dir/$pol-$p.csv" "$edges")"
            done
        done
    } >"$dir/buckets.tsv"
    awk -F'\t' '
        NR == 1 { printf "| policy | KV |"; for (i = 3; i <= NF; i++) printf " %s |", $i; printf "\n|---|---|"; for (i = 3; i <= NF; i++) printf "---:|"; print ""; next }
        { printf "| %s | %s |", $1, $2; for (i = 3; i <= NF; i++) printf " %s |", ($i == "" ? "–" : $i); print "" }' \
        "$dir/buckets.tsv" >"$dir/buckets.md"
    # the verdict: "policy KV worst verdict", the worst bucket of each row against the in-context reference (the
    # 10 % target)
    awk -F'\t' '
        NR == 1 { next }
        NR == 2 { for (i = 3; i <= NF; i++) r[i] = $i; next }
        { worst = -1e9; for (i = 3; i <= NF; i++) if (r[i] != "" && $i != "") { d = $i / r[i] - 1; if (d > worst) worst = d }
          printf "%s\t%s\t%+.1f %%\t%s\n", $1, $2, 100 * worst, (worst <= 0.10 ? "within 10 %" : "**not** within 10 %") }' \
        "$dir/buckets.tsv" >"$dir/verdict.tsv"
    printf '%s\t%s\t%s\t%s\n' "$name" "$model" "$text" "$ctx" >>"$out/models.tsv.tmp"
    {
        echo "| cache (fp32) | first 1 | first 4 | first 16 | newest 16 | heads > 50 % on the first 4 | most on the first 4 (one head) |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        for pol in in-context $policies; do
            printf '| %s | %s | %s |\n' "$(policy_label "$pol")" "$(meter_row "$dir/$pol-fp32.txt")" \
                "$(awk -F, 'NR > 1 && $5 > x { x = $5; l = $1; h = $2 } END { printf "%.3f (layer %d head %d)", x, l, h }' "$dir/$pol-fp32.attn.csv")"
        done
    } >"$dir/meter.md"

    if command -v gnuplot >/dev/null; then
        # plot buckets of 256 tokens: "center perplexity" (and the in-context reference's band: ref, 1.1 ref)
        plot_data() {
            awk -F, 'NR > 1 { b = int(($1 - 1) / 256); s[b] += $4; c[b]++; if (b > m) m = b }
                     END { for (b = 0; b <= m; b++) if (c[b] >= 16) printf "%d %.5f %.5f\n", b * 256 + 128, exp(s[b] / c[b]), 1.1 * exp(s[b] / c[b]) }' "$1"
        }
        plot_data "$dir/in-context-fp32.csv" >"$dir/plot-in-context.dat"
        for pol in $policies; do for p in $precisions; do plot_data "$dir/$pol-$p.csv" >"$dir/plot-$pol-$p.dat"; done; done
        colour() { case $1 in vanilla) echo "#e69f00" ;; reposition) echo "#cc0000" ;; window) echo "#0072b2" ;; esac; }
        style() { case $1 in vanilla) echo "pt 7 ps 0.6" ;; reposition) echo "pt 5 ps 0.9 dashtype 2" ;; window) echo "pt 9 ps 0.9" ;; esac; }
        {
            printf '"%s" using 1:2:3 with filledcurves fc rgb "#c8e6c9" fs solid 0.6 title "target band: within 10 %% of in-context", \\\n' "$dir/plot-in-context.dat"
            printf '"%s" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#000000" title "%s, fp32"' "$dir/plot-in-context.dat" "$(policy_label in-context)"
            for pol in $policies; do
                for p in $precisions; do
                    if [ "$p" = fp32 ]; then
                        printf ', \\\n"%s" using 1:2 with linespoints lw 2.5 %s lc rgb "%s" title "%s (fp32; thin: %s)"' \
                            "$dir/plot-$pol-$p.dat" "$(style "$pol")" "$(colour "$pol")" "$(policy_label "$pol")" \
                            "$(echo "$precisions" | sed 's/fp32 *//')"
                    else
                        printf ', \\\n"%s" using 1:2 with lines lw 1 lc rgb "%s" notitle' "$dir/plot-$pol-$p.dat" "$(colour "$pol")"
                    fi
                done
            done
            echo
        } >"$dir/plot-lines.gp"
        gnuplot <<EOF || echo "long_context_models.sh: gnuplot failed for $name" >&2
set terminal svg size 960,720 dynamic font "sans,12"
set output "$out/$name.svg"
set title "$name (context $ctx) on $(basename "$text"): perplexity per 256 tokens, cache of 128 tokens"
set xlabel "position of the scored token"
set ylabel "perplexity (log scale)"
set logscale y
set xrange [0:$((tokens - 1))]
set grid
set key outside bottom center vertical maxrows 5 font ",10"
set arrow 1 from $ctx, graph 0 to $ctx, graph 1 nohead dashtype 2 lw 1.5 lc rgb "#555555"
set label 1 "context $ctx" at $ctx, graph 0.96 offset 0.5, 0 font ",10"
plot $(cat "$dir/plot-lines.gp")
EOF
    fi
done
mv "$out/models.tsv.tmp" "$out/models.tsv"
echo "$((SECONDS - t_start))" >"$out/seconds.txt"
# the runs' own CPU seconds (one thread each), summed over the models of this invocation
for m in "${present[@]}"; do IFS='|' read -r name _ <<<"$m"; cat "$out/$name"/*.cpu; done 2>/dev/null |
    awk '{ s += $1 + $2; n++ } END { printf "%.0f %d\n", s, n }' >"$out/run-cpu-seconds.txt"
[ "$failed" = 0 ] || exit 1
echo "long_context_models.sh: done in $((SECONDS - t_start)) s ($out)" >&2
