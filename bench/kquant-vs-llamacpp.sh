#!/usr/bin/env bash
# kquant-vs-llamacpp.sh — tinygpt against llama.cpp on the bundled model quantised by llama.cpp's own llama-quantize
# (issue 13): for F32, F16, Q8_0 and the presets Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL (CHUNKS=N, PRESETS="..."
# in the environment change them), the
# table of tools/llamacpp_kquant_table.py — gguf-py's check of every block, greedy ids of four prompts x 64 tokens
# (f32 KV cache, no flash attention, temperature 0) against llama-completion's, perplexity against
# llama-perplexity's (-c 512, the first CHUNKS = 4 chunks of the first 90 KB of models/data/valid.txt: 1020 scored
# tokens, the same tokens for both, so their difference is the implementations', not sampling noise; 4 keeps the run
# near half an hour on a loaded 2-core machine).
#
#   bench/kquant-vs-llamacpp.sh [MODEL] [OUT_DIR]     (default: models/tinygpt-flagship.gguf, build/kquant-bundled)
#
# Needs the peer built by bench/build-llamacpp.sh (TG_LLAMACPP_DIR, default bench/.peer/llama.cpp) and
# /usr/bin/python3 with numpy (Debian's python3-numpy) for gguf-py. The GGUF files (4-25 MB each) stay in OUT_DIR;
# OUT_DIR/refs.json is llama.cpp's side (tests/data/kquant-llamacpp/bundled-refs.json is a copy of it) and
# OUT_DIR/table.md the table. Runs whose files are newer than the model are re-used.
set -u
cd "$(dirname "$0")/.." || exit 2
model=${1:-models/tinygpt-flagship.gguf}
out=${2:-build/kquant-bundled}
export TG_LLAMACPP_DIR=${TG_LLAMACPP_DIR:-bench/.peer/llama.cpp}
read -r -a presets <<<"${PRESETS:-F32 F16 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K Q4_1 Q5_0 Q5_1 IQ4_NL}"
chunks=${CHUNKS:-4}
mkdir -p "$out"
head -n 4 tools/results_prompts.txt >"$out/prompts.txt"
LC_ALL=C awk '{ n += length($0) + 1; print; if (n > 90000) exit }' models/data/valid.txt >"$out/valid-90k.txt"
make -s -j2 tinygpt build/release/tools/greedy_logits build/release/tools/gguf_dequant || exit 1
tools/llamacpp_kquant_refs.sh "$model" "$out" 512 "$chunks" 64 "$out/prompts.txt" "$out/valid-90k.txt" "${presets[@]}" ||
    exit 1
{
    echo "\`bench/kquant-vs-llamacpp.sh $model\` ($(date -u +%Y-%m-%d), tinygpt $(git rev-parse --short HEAD 2>/dev/null),"
    echo "llama.cpp $(git -C "$TG_LLAMACPP_DIR" describe --tags --always 2>/dev/null || echo '?')):"
    echo
    python3 tools/llamacpp_kquant_table.py "$out" ./tinygpt build/release/tools/greedy_logits "$out/valid-90k.txt"
} >"$out/table.md"
cat "$out/table.md"
