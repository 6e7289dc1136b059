#!/usr/bin/env bash
# Draws models/training/loss.png (train and validation loss against epochs) from the loss-*.csv files that
# tools/train.py writes. Needs gnuplot (Debian: gnuplot-nox). Usage: tools/plot_loss.sh [models/training]
set -eu
dir=${1:-models/training}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in 6 10 20; do
    # columns: step,tokens,epoch,lr,train_loss,val_loss,seconds
    awk -F, 'NR > 1 && $5 != "" { print $3, $5 }' "$dir/loss-$run-epochs.csv" > "$tmp/train$run"
    awk -F, 'NR > 1 && $6 != "" { print $3, $6 }' "$dir/loss-$run-epochs.csv" > "$tmp/val$run"
done
gnuplot <<EOF
set terminal pngcairo size 900,560 font ",11"
set output "$dir/loss.png"
set title "tinygpt-flagship (11.5 M parameters, 8.25 M training tokens)"
set xlabel "epochs over the training corpus"
set ylabel "cross-entropy (nats per token)"
set yrange [1.8:6]
set grid
set key top right
plot "$tmp/train6" with lines lw 2 lc rgb "#1f77b4" title "6 epochs (shipped): train", \
     "$tmp/val6" with linespoints lw 2 pt 7 lc rgb "#1f77b4" dt 2 title "6 epochs (shipped): validation", \
     "$tmp/train10" with lines lw 1 lc rgb "#2ca02c" title "10 epochs: train", \
     "$tmp/val10" with linespoints lw 1 pt 5 lc rgb "#2ca02c" dt 2 title "10 epochs: validation", \
     "$tmp/train20" with lines lw 1 lc rgb "#d62728" title "20 epochs: train", \
     "$tmp/val20" with linespoints lw 1 pt 9 lc rgb "#d62728" dt 2 title "20 epochs: validation (first 43% of valid.txt)"
EOF
echo "wrote $dir/loss.png"
