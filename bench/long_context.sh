#!/usr/bin/env bash
# long_context.sh — the long-context experiment of issue #5: perplexity per position bucket over a long held-out
# text for each cache policy x KV precision, as a Markdown table and gnuplot SVG plots of perplexity vs position.
#
# Policies (the model's training context C, 512 for the bundled model):
#   in-context   the reference: independent C-token windows, a fresh fp32 cache each (every token sees its window)
#   unbounded    one cache holding everything (--no-context-limit): RoPE positions beyond C were never trained
#   window       StreamingLLM without sinks: sink 0 + window C - 32
#   sink4        StreamingLLM sink 4 + window C - 36, vanilla RoPE (--streaming-llm-rope original: keys keep their
#                absolute positions)
#   sink4-repos  the same, re-positioned (the default: the query sees every key at its cache slot's distance)
#   recompute    sliding window with recomputation: each scored token re-runs its last C tokens from an empty
#                cache (the slow oracle), on a regular subsample (every K-th token)
# Windows leave room for one KIVI group of 32 (stored <= sink + window + 31 <= C) so that no policy ever holds more
# than C tokens. Each policy runs at every precision of --precisions (the in-context reference at fp32 only).
#
# usage: bench/long_context.sh [--model M] [--text FILE] [--tokens N] [--unbounded-tokens U] [--every K]
#                              [--precisions "fp32 int8 int4 int2"] [--out DIR] [--tinygpt BIN] [--jobs J]
#   --jobs J: runs in parallel, one thread each (default 2). The in-context reference covers the whole text (its
#   perplexity over every whole 512-token window is also printed, to compare with training's evaluation).
# Output in DIR (default build/long_context): <policy>-<precision>.csv (per-token NLL) and .txt (summary),
# buckets.md (the table), buckets.tsv, perplexity-vs-position-<precision>.svg and summary.md (the verdict lines).
# The CSVs are re-used when present and newer than the model and the binary (delete DIR to start afresh).
set -u
cd "$(dirname "$0")/.." || exit 2

model=models/tinygpt-flagship.gguf
text=models/data/long-heldout.txt
tokens=50000
unbounded_tokens=4096
every=100
precisions="fp32 int8 int4 int2"
out=build/long_context
bin=./tinygpt
jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --unbounded-tokens) unbounded_tokens=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tinygpt) bin=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) echo "long_context.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for f in "$model" "$text" "$bin"; do
    [ -e "$f" ] || { echo "long_context.sh: $f not found" >&2; exit 1; }
done
command -v gnuplot >/dev/null || echo "long_context.sh: gnuplot not found (apt-get install gnuplot-nox): no plots" >&2
mkdir -p "$out"

ctx=$("$bin" info "$model" | awk '$1 == "context" {print $3}')
[ -n "$ctx" ] || { echo "long_context.sh: cannot read the context length of $model" >&2; exit 1; }
win_nosink=$((ctx - 32))
win_sink=$((ctx - 36))

# run NAME MAX_TOKENS FLAGS...: one perplexity run into $out/NAME.csv / .txt, in the background (at most $jobs at a
# time; skipped when up to date). MAX_TOKENS "all" = the whole text. `wait` before reading the results.
run() {
    local name=$1 max=$2
    shift 2
    local csv=$out/$name.csv txt=$out/$name.txt
    if [ -s "$txt" ] && [ "$txt" -nt "$model" ] && [ "$txt" -nt "$bin" ] && [ "$txt" -nt "$text" ]; then
        echo "  $name: up to date"
        return 0
    fi
    [ "$max" = all ] || set -- --max-tokens "$max" "$@"
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    (
        t0=$SECONDS
        if "$bin" perplexity "$model" "$text" --threads 1 --csv "$csv" --quiet "$@" >"$txt.tmp" 2>"$txt.err"; then
            mv "$txt.tmp" "$txt"
            echo "  $name: ppl $(awk '$1 == "perplexity" {print $2}' "$txt") in $((SECONDS - t0)) s"
        else
            echo "long_context.sh: tinygpt perplexity failed for $name: $(tail -n 1 "$txt.err")" >&2
            rm -f "$txt.tmp"
        fi
    ) &
}

echo "long-context experiment: $model on $text, $tokens tokens (unbounded: $unbounded_tokens), context $ctx"
run in-context-fp32 all
for p in $precisions; do
    q=(--kv-quantize "$p")
    run "recompute-$p" "$tokens" --recompute-window "$ctx" --every "$every" "${q[@]}"
    run "window-$p" "$tokens" --streaming-llm-sink 0 --streaming-llm-window "$win_nosink" "${q[@]}"
    run "sink4-$p" "$tokens" --streaming-llm-sink 4 --streaming-llm-window "$win_sink" --streaming-llm-rope original \
        "${q[@]}"
    run "sink4-repos-$p" "$tokens" --streaming-llm-sink 4 --streaming-llm-window "$win_sink" \
        --streaming-llm-reposition "${q[@]}"
    run "unbounded-$p" "$unbounded_tokens" --no-context-limit "${q[@]}"
done
wait
for f in in-context-fp32 $(for p in $precisions; do echo recompute-$p window-$p sink4-$p sink4-repos-$p unbounded-$p; done); do
    [ -s "$out/$f.txt" ] || { echo "long_context.sh: $out/$f.txt missing: a run failed" >&2; exit 1; }
done

# the reference over every whole window of the text, as training's evaluation (which drops the last partial one)
n_text=$(awk '$1 == "text" {sub(/^\(/, "", $3); print $3}' "$out/in-context-fp32.txt")
awk -F, -v last=$((ctx * ((n_text - 1) / ctx))) -v n="$n_text" -v c="$ctx" \
    'NR > 1 && $1 <= last { s += $4; k++ } END { printf "in-context fp32 over the %d tokens of %d whole %d-token windows (of %d): mean NLL %.4f, perplexity %.3f\n", k, k / c, c, n, s / k, exp(s / k) }' \
    "$out/in-context-fp32.csv" >"$out/reference.txt"

# ---- buckets ---------------------------------------------------------------------------------------------------
# Table buckets of the scored token's index (= tokens before it in the text): [1, C), [C, 2C), [2C, 4C), ... and
# the last one up to the end. Each cell: exp(mean NLL) over the bucket. The recompute rows average only the scored
# subsample; the "@sub" rows give the in-context reference and sink4-repos on exactly those tokens.
edges="1 $ctx"
e=$((2 * ctx))
while [ "$e" -lt "$tokens" ]; do edges="$edges $e"; e=$((2 * e)); done
edges="$edges $tokens"

# bucket_row FILE [EVERY]: tab-separated perplexities per table bucket (empty when the bucket has no token).
bucket_row() {
    awk -F, -v edges="$edges" -v every="${2:-1}" '
        BEGIN { n = split(edges, E, " ") }
        NR > 1 && $1 % every == 0 {
            for (b = 1; b < n; b++) if ($1 >= E[b] && ($1 < E[b + 1] || (b == n - 1 && $1 <= E[n]))) { s[b] += $4; c[b]++; break }
        }
        END { for (b = 1; b < n; b++) printf "%s%s", (b > 1 ? "\t" : ""), (c[b] ? sprintf("%.3f", exp(s[b] / c[b])) : ""); print "" }' "$1"
}

header=$(awk -v edges="$edges" 'BEGIN { n = split(edges, E, " "); for (b = 1; b < n; b++) printf "%s%d-%d", (b > 1 ? "\t" : ""), E[b], E[b + 1] - (b < n - 1); print "" }')
{
    printf 'policy\tprecision\t%s\n' "$header"
    printf 'in-context\tfp32\t%s\n' "$(bucket_row "$out/in-context-fp32.csv")"
    for pol in unbounded window sink4 sink4-repos recompute; do
        for p in $precisions; do
            printf '%s\t%s\t%s\n' "$pol" "$p" "$(bucket_row "$out/$pol-$p.csv")"
        done
    done
    printf 'in-context@sub\tfp32\t%s\n' "$(bucket_row "$out/in-context-fp32.csv" "$every")"
    for p in $precisions; do printf 'sink4-repos@sub\t%s\t%s\n' "$p" "$(bucket_row "$out/sink4-repos-$p.csv" "$every")"; done
} >"$out/buckets.tsv"

awk -F'\t' '
    NR == 1 { printf "| policy | KV |"; for (i = 3; i <= NF; i++) printf " %s |", $i; printf "\n|---|---|"; for (i = 3; i <= NF; i++) printf "---:|"; print ""; next }
    { printf "| %s | %s |", $1, $2; for (i = 3; i <= NF; i++) printf " %s |", ($i == "" ? "–" : $i); print "" }' \
    "$out/buckets.tsv" >"$out/buckets.md"

# ---- the verdict: each streaming policy against the in-context reference, bucket by bucket past the context -------
{
    ref=$(awk -F'\t' '$1 == "in-context" {print; exit}' "$out/buckets.tsv")
    for pol in window sink4 sink4-repos; do
        for p in $precisions; do
            row=$(awk -F'\t' -v a="$pol" -v b="$p" '$1 == a && $2 == b {print; exit}' "$out/buckets.tsv")
            printf '%s\n%s\n%s\n' "$(head -n 1 "$out/buckets.tsv")" "$ref" "$row" | awk -F'\t' -v pol="$pol" -v p="$p" '
                NR == 1 { for (i = 4; i <= NF; i++) H[i] = $i; next }
                NR == 2 { for (i = 4; i <= NF; i++) r[i] = $i; next }
                { worst = -1e9; for (i = 4; i <= NF; i++) if (r[i] != "" && $i != "") { d = $i / r[i] - 1; if (d > worst) { worst = d; at = i } }
                  if (worst == -1e9) { printf "- %s %s: no bucket past the context\n", pol, p; next }
                  printf "- %s %s: worst bucket past the context (%s) is %+.1f %% against in-context: %s\n", pol, p,
                         H[at], 100 * worst, (worst <= 0.10 ? "within 10 %" : "NOT within 10 %") }'
        done
    done
} >"$out/summary.md"

# ---- plots: one SVG per precision, two panels ------------------------------------------------------------------------
# Buckets of the scored token's index: [1, 256), then edges 256 * 2^(j/2) (about 1.41x wider each), up to --tokens.
# Top: perplexity per bucket. Bottom: the ratio to the in-context reference over the same tokens (which takes out how
# hard each stretch of text is): 1 = as good as fresh 512-token windows, the dashed line is the 10 % target.
# plot_data FILE [REF]: "center value" per bucket with at least 4 tokens; with REF, value = exp(mean NLL - mean NLL
# of REF over the same indices), else the bucket's perplexity.
plot_data() {
    awk -F, -v max="$tokens" -v with_ref="$([ $# -gt 1 ] && echo 1 || echo 0)" '
        function bucket(i) { return i < 256 ? -1 : int(2 * log(i / 256) / log(2)) }
        with_ref && FILENAME == ARGV[1] { if (FNR > 1) ref[$1] = $4; next }
        FNR > 1 && $1 <= max && (!with_ref || ($1 in ref)) {
            b = bucket($1); s[b] += $4 - (with_ref ? ref[$1] : 0); c[b]++; if (b > m) m = b }
        END { for (b = -1; b <= m; b++) if (c[b] >= 4) {
                  lo = (b < 0 ? 1 : 256 * 2 ^ (b / 2)); hi = 256 * 2 ^ ((b + 1) / 2); if (hi > max) hi = max
                  printf "%.1f %.5f\n", sqrt(lo * hi), exp(s[b] / c[b]) } }' ${2:+"$2"} "$1"
}
if command -v gnuplot >/dev/null; then
    ref_csv=$out/in-context-fp32.csv
    plot_data "$ref_csv" >"$out/plot-in-context-fp32.dat"
    for p in $precisions; do
        for pol in unbounded-$p window-$p sink4-$p sink4-repos-$p recompute-$p; do
            plot_data "$out/$pol.csv" >"$out/plot-$pol.dat"
            plot_data "$out/$pol.csv" "$ref_csv" >"$out/ratio-$pol.dat"
        done
        gnuplot <<EOF || echo "long_context.sh: gnuplot failed for $p" >&2
set terminal svg size 960,860 dynamic font "sans,12"
set output "$out/perplexity-vs-position-$p.svg"
set multiplot layout 2,1 title "KV cache $p: $(basename "$model") (context $ctx) on $(basename "$text")"
set logscale x
set xrange [1:$tokens * 1.2]
set grid
set key top left font ",10"
set arrow 1 from $ctx, graph 0 to $ctx, graph 1 nohead dashtype 2 lc rgb "#888888"
set ylabel "perplexity (bucket)"
set logscale y
plot "$out/plot-in-context-fp32.dat" with linespoints lw 2 lc rgb "#000000" title "in-context (fresh $ctx-token windows, fp32)", \\
     "$out/plot-unbounded-$p.dat" with linespoints lw 2 lc rgb "#009e73" title "unbounded (no context limit)", \\
     "$out/plot-window-$p.dat" with linespoints lw 2 lc rgb "#56b4e9" title "window only (sink 0 + $win_nosink)", \\
     "$out/plot-sink4-$p.dat" with linespoints lw 2 lc rgb "#e69f00" title "StreamingLLM sink 4 + $win_sink, vanilla RoPE", \\
     "$out/plot-sink4-repos-$p.dat" with linespoints lw 2 dashtype 3 lc rgb "#cc0000" title "StreamingLLM sink 4 + $win_sink, re-positioned", \\
     "$out/plot-recompute-$p.dat" with points pt 7 ps 0.8 lc rgb "#7f3fbf" title "recompute the last $ctx (every ${every}th token)"
set xlabel "position of the scored token in the text (log scale)"
set ylabel "perplexity / in-context, same tokens"
set logscale y
set yrange [0.8:6]
set arrow 2 from graph 0, first 1.1 to graph 1, first 1.1 nohead dashtype 2 lc rgb "#cc0000"
plot 1 with lines lc rgb "#000000" notitle, \\
     "$out/ratio-unbounded-$p.dat" with linespoints lw 2 lc rgb "#009e73" title "unbounded", \\
     "$out/ratio-window-$p.dat" with linespoints lw 2 lc rgb "#56b4e9" title "window only", \\
     "$out/ratio-sink4-$p.dat" with linespoints lw 2 lc rgb "#e69f00" title "sink 4, vanilla", \\
     "$out/ratio-sink4-repos-$p.dat" with linespoints lw 2 dashtype 3 lc rgb "#cc0000" title "sink 4, re-positioned", \\
     "$out/ratio-recompute-$p.dat" with points pt 7 ps 0.8 lc rgb "#7f3fbf" title "recompute"
unset multiplot
EOF
    done
fi
echo "long_context.sh: $out/buckets.md, $out/summary.md, $out/perplexity-vs-position-*.svg"
cat "$out/buckets.md" "$out/summary.md"
