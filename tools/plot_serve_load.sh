#!/usr/bin/env bash
# Draws docs/serving/load.png (aggregate tokens/s and memory against the number of concurrent clients N, tinygpt
# serve beside llama-server) from the --tsv files of bench/serve-load. Needs gnuplot (Debian: gnuplot-nox).
# Usage: tools/plot_serve_load.sh [DIR]   (DIR default docs/serving; reads DIR/flagship-fp16.tsv and, when present,
# DIR/tinyllama-q8_0.tsv; columns: engine N agg decode stream ttft50 ttft99 cpu rss idle_rss kv refused)
set -eu
dir=${1:-docs/serving}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$dir/flagship-fp16.tsv" ] || { echo "plot_serve_load.sh: no $dir/flagship-fp16.tsv (run bench/serve-load --tsv)" >&2; exit 1; }
split() {  # FILE NAME: one data file per engine, rows sorted by N
    for e in tinygpt llama-server; do
        awk -F'\t' -v e="$e" 'NR > 1 && $1 == e { print $2, $3, $4, $9, $11 }' "$1" | sort -n > "$tmp/$2-$e"
    done
}
split "$dir/flagship-fp16.tsv" flag
plots_tps="\"$tmp/flag-tinygpt\" using 1:2 with linespoints lw 2 pt 7 lc rgb \"#1f77b4\" title \"tinygpt serve, bundled F16\", \
     \"$tmp/flag-llama-server\" using 1:2 with linespoints lw 2 pt 5 lc rgb \"#d62728\" title \"llama-server, bundled F16\""
plots_mem="\"$tmp/flag-tinygpt\" using 1:4 with linespoints lw 2 pt 7 lc rgb \"#1f77b4\" title \"tinygpt, bundled: peak RSS\", \
     \"$tmp/flag-tinygpt\" using 1:5 with linespoints lw 1 pt 6 dt 2 lc rgb \"#1f77b4\" title \"tinygpt, bundled: KV in use\", \
     \"$tmp/flag-llama-server\" using 1:4 with linespoints lw 2 pt 5 lc rgb \"#d62728\" title \"llama-server, bundled: peak RSS\", \
     \"$tmp/flag-llama-server\" using 1:5 with linespoints lw 1 pt 4 dt 2 lc rgb \"#d62728\" title \"llama-server, bundled: KV allocated\""
if [ -f "$dir/tinyllama-q8_0.tsv" ]; then
    split "$dir/tinyllama-q8_0.tsv" tl
    plots_tps="$plots_tps, \
     \"$tmp/tl-tinygpt\" using 1:2 with linespoints lw 2 pt 9 lc rgb \"#2ca02c\" title \"tinygpt serve, TinyLlama-1.1B Q8_0\", \
     \"$tmp/tl-llama-server\" using 1:2 with linespoints lw 2 pt 11 lc rgb \"#ff7f0e\" title \"llama-server, TinyLlama-1.1B Q8_0\""
    plots_mem="$plots_mem, \
     \"$tmp/tl-tinygpt\" using 1:4 with linespoints lw 2 pt 9 lc rgb \"#2ca02c\" title \"tinygpt, TinyLlama Q8_0: peak RSS\", \
     \"$tmp/tl-llama-server\" using 1:4 with linespoints lw 2 pt 11 lc rgb \"#ff7f0e\" title \"llama-server, TinyLlama Q8_0: peak RSS\""
fi
gnuplot <<EOF
set terminal pngcairo size 1200,520 font ",10" noenhanced
set output "$dir/load.png"
set multiplot layout 1,2 title "bench/serve-load: N streaming clients on loopback, 2 threads, medians of 3 interleaved runs"
set logscale x 2
set xtics (1, 4, 16, 64)
set xrange [0.8:80]
set grid
set xlabel "concurrent streaming clients N"
set title "aggregate generated tokens/s"
set ylabel "tokens/s (all clients together)"
set logscale y 10
set key right center
plot $plots_tps
set title "memory"
set ylabel "MiB"
set key bottom right
plot $plots_mem
unset multiplot
EOF
echo "wrote $dir/load.png"
