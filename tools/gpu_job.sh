#!/usr/bin/env bash
# Runs on the GPU machine: trains the bundled model and builds the fixtures side by side, then packs the results
# into $OUT (at most 8 files of 16 MiB). Expects .device/corpus.tar.xz (tools/.corpus/train packed as corpus/train)
# and .device/llama.cpp/{convert_hf_to_gguf.py,conversion,gguf-py} next to the checkout.
# Usage, from the repository root: bash tools/gpu_job.sh smoke|full|flagship|yoco|sinks|long-sinks
# (flagship: only the bundled model, trained twice side by side for --max-epochs 6 and 10; the run with the lower
# final validation loss is packed, the other's metrics.json and loss.csv come back too.
# yoco: only the YOCO variant (issue #7, docs/yoco.md) with the flagship's tokenizer and settings, 6 epochs capped at
# 150 s of training, the whole run capped at $YOCO_LIMIT seconds (default 290); packs yoco-misc.tar.gz, the GGUF in
# 15 MB parts, logs.txt — or, when no GGUF was written, the fp32 safetensors in parts so it can be exported here.)
set -u
mode=${1:?smoke, full, flagship, yoco, sinks or long-sinks}
out=${OUT:?OUT must be set}
work=/tmp/tg
rm -rf "$work" && mkdir -p "$work"
tar -xJf .device/corpus.tar.xz -C "$work" || exit 2
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers, tokenizers, numpy; print("torch", torch.__version__, "transformers",
transformers.__version__, "tokenizers", tokenizers.__version__, "numpy", numpy.__version__)'; } > "$work/env.txt" 2>&1
cat "$work/env.txt"

common=(--corpus "$work/corpus" --valid models/data/valid.txt --long models/data/long-heldout.txt)
if [ "$mode" = sinks ]; then
    # the attention-sink experiment (docs/RESULTS.md, "Does the model need its sinks?"): the flagship's recipe with
    # BOS at the start of every training window; packs the GGUF in 15 MB parts, metrics.json and the log
    s=$work/sinks
    timeout "${SINKS_LIMIT:-400}" python3 tools/train.py "${common[@]}" --name tinygpt-bos --bos-first \
        --tokenizer models/flagship-hf/tokenizer.json --out "$s" --max-epochs 6 --time-budget 240 \
        > "$work/train.log" 2>&1
    echo "train rc=$?" | tee -a "$work/env.txt"
    [ -f "$s/tinygpt-bos.gguf" ] && split -b 15m -d "$s/tinygpt-bos.gguf" "$out/tinygpt-bos.gguf.part" &&
        sha256sum "$s/tinygpt-bos.gguf" | tee -a "$work/env.txt"
    cp "$s/metrics.json" "$out/bos-metrics.json" 2>/dev/null
    cat "$work/env.txt" "$work/train.log" > "$out/logs.txt"
    tail -n 30 "$work/train.log"
    ls -la "$out"
    exit 0
fi
if [ "$mode" = long-sinks ]; then
    # issue #18's try: the flagship's recipe with a longer context (1024; batch 32, so a step is the recipe's 32,768
    # tokens), BOS as every training window's first token and more steps (up to 10 epochs in 360 s); does it grow
    # attention sinks (tinygpt perplexity --attention-stats) and does window-only attention then collapse past the
    # context? Packs the GGUF in 15 MB parts, metrics.json, loss.csv and the log
    s=$work/long-sinks
    timeout "${LONG_SINKS_LIMIT:-520}" python3 tools/train.py "${common[@]}" --name tinygpt-bos1024 --bos-first \
        --ctx 1024 --batch 32 --tokenizer models/flagship-hf/tokenizer.json --out "$s" --max-epochs 10 \
        --time-budget 360 \
        > "$work/train.log" 2>&1
    echo "train rc=$?" | tee -a "$work/env.txt"
    [ -f "$s/tinygpt-bos1024.gguf" ] && split -b 15m -d "$s/tinygpt-bos1024.gguf" "$out/tinygpt-bos1024.gguf.part" &&
        sha256sum "$s/tinygpt-bos1024.gguf" | tee -a "$work/env.txt"
    cp "$s/metrics.json" "$out/long-sinks-metrics.json" 2>/dev/null
    cp "$s/loss.csv" "$out/long-sinks-loss.csv" 2>/dev/null
    cat "$work/env.txt" "$work/train.log" > "$out/logs.txt"
    tail -n 30 "$work/train.log"
    ls -la "$out"
    exit 0
fi
if [ "$mode" = yoco ]; then
    y=$work/yoco
    timeout "${YOCO_LIMIT:-290}" python3 tools/train.py "${common[@]}" --arch yoco --name tinygpt-yoco \
        --tokenizer models/flagship-hf/tokenizer.json --out "$y" --max-epochs 6 --time-budget 150 \
        > "$work/train.log" 2>&1
    echo "train rc=$?" | tee -a "$work/env.txt"
    (cd "$y" && tar -czf "$out/yoco-misc.tar.gz" --ignore-failed-read loss.csv metrics.json samples.json \
        tinygpt-yoco-golden.json tinygpt-yoco-greedy.json tinygpt-yoco-logits-fp32.f32 tinygpt-yoco-logits-f16w.f32 \
        hf/config.json hf/generation_config.json hf/tokenizer.json hf/tokenizer_config.json)
    if [ -f "$y/tinygpt-yoco.gguf" ]; then
        split -b 15m -d "$y/tinygpt-yoco.gguf" "$out/tinygpt-yoco.gguf.part"
        sha256sum "$y/tinygpt-yoco.gguf" | tee -a "$work/env.txt"
    elif [ -f "$y/hf/model.safetensors" ]; then
        split -b 15m -d "$y/hf/model.safetensors" "$out/model.safetensors.part"
    fi
    cat "$work/env.txt" "$work/train.log" > "$out/logs.txt"
    tail -n 60 "$work/train.log"
    ls -la "$out"
    exit 0
fi
if [ "$mode" = flagship ]; then
    # two processes share the 16 cores: without a thread limit their CPU-side golden generation crawls
    export OMP_NUM_THREADS=8
    for e in 6 10; do
        python3 tools/train.py "${common[@]}" --out "$work/flagship-e$e" --max-epochs $e --time-budget 420 \
            > "$work/train-e$e.log" 2>&1 &
    done
    wait
    best=$(python3 -c 'import json, sys
runs = {e: json.load(open(f"/tmp/tg/flagship-e{e}/metrics.json"))["final_fp32"]["val_loss"] for e in (6, 10)}
print(min(runs, key=runs.get))')
    echo "val losses: $(grep -h '"val_loss"' $work/flagship-e*/metrics.json | tr -d '\n'); kept e$best" \
        | tee -a "$work/env.txt"
    mv "$work/flagship-e$best" "$work/flagship"
    cp "$work/train-e$best.log" "$work/train.log"
    other=$((16 - best))
    (cd "$work/flagship-e$other" && tar -czf "$out/flagship-e$other-metrics.tar.gz" metrics.json loss.csv)
    cat "$work/train-e$other.log" >> "$work/train.log"
    : > "$work/fixtures.log"
else
    if [ "$mode" = smoke ]; then
        python3 tools/train.py "${common[@]}" --out "$work/flagship" --time-budget 30 --corpus-chars 400000 \
            --eval-every 100 --warmup 50 --eval-windows 64 > "$work/train.log" 2>&1 &
        fix_args=(--seconds 6 --corpus-chars 150000)
    else
        python3 tools/train.py "${common[@]}" --out "$work/flagship" > "$work/train.log" 2>&1 &
        fix_args=(--seconds 30)
    fi
    train_pid=$!
    python3 tools/make_fixtures.py --corpus "$work/corpus" --out "$work/fixtures" --converter .device/llama.cpp \
        "${fix_args[@]}" > "$work/fixtures.log" 2>&1
    fix_rc=$?
    wait "$train_pid"
    train_rc=$?
    echo "fixtures rc=$fix_rc train rc=$train_rc" | tee -a "$work/env.txt"
fi

[ -d "$work/fixtures" ] && tar -czf "$out/fixtures.tar.gz" -C "$work" fixtures
f=$work/flagship
(cd "$f" && tar -czf "$out/flagship-misc.tar.gz" loss.csv metrics.json flagship-greedy.json \
    flagship-tokenization.json samples.json hf/config.json hf/generation_config.json hf/tokenizer.json hf/tokenizer_config.json)
if [ -f "$f/tinygpt-flagship.gguf" ]; then
    split -b 15m -d "$f/tinygpt-flagship.gguf" "$out/tinygpt-flagship.gguf.part"
    sha256sum "$f/tinygpt-flagship.gguf" | tee -a "$work/env.txt"
fi
cat "$work/env.txt" "$work/train.log" "$work/fixtures.log" > "$out/logs.txt"
tail -n 40 "$work/train.log"
tail -n 30 "$work/fixtures.log"
ls -la "$out"
