#!/usr/bin/env bash
# make_kquant_llamacpp_fixture.sh — regenerates tests/data/kquant-llamacpp (tests/cli/test_kquant_llamacpp.sh): the
# 1-layer random-weight F16 model `gen_random_gguf --shape kquant-tiny --seed 13` quantised by llama.cpp's own
# llama-quantize to every preset Q2_K ... Q8_0 (and IQ4_NL), with llama.cpp's greedy ids (4 prompts x 64 tokens) and
# perplexity (-c 128, 8 chunks of tests/data/kquant-llamacpp/text.txt) on each, and gguf-py's sha256 per tensor
# (tools/llamacpp_kquant_refs.sh). All 16 files (the F16 source too) are made and compared in build/kquant-tiny
# (table.md there); 11 are committed, about 3 MiB: every block type of the table appears in them (Q3_K_S, Q4_K_S
# and Q5_K_S hold no type that Q3_K_M, Q4_K_M and Q3_K_L / Q5_K_M do not, and Q4_0 is Q2_K's fallback type). The F16
# source is not kept (this script makes it again, deterministically).
#
#   TG_LLAMACPP_DIR=bench/.peer/llama.cpp tools/make_kquant_llamacpp_fixture.sh
set -u
cd "$(dirname "$0")/.." || exit 2
dir=tests/data/kquant-llamacpp
export TG_LLAMACPP_DIR=${TG_LLAMACPP_DIR:-bench/.peer/llama.cpp}
presets=(F16 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_0 Q4_1 Q4_K_S Q4_K_M Q5_0 Q5_1 Q5_K_S Q5_K_M Q6_K Q8_0 IQ4_NL)
kept=(Q2_K Q3_K_M Q3_K_L Q4_1 Q4_K_M Q5_0 Q5_1 Q5_K_M Q6_K Q8_0 IQ4_NL)
work=build/kquant-tiny
rm -rf "$work"
mkdir -p "$work"
make -s -j2 tinygpt build/release/tools/gen_random_gguf build/release/tools/gguf_dequant build/release/tools/greedy_logits ||
    exit 1
build/release/tools/gen_random_gguf --shape kquant-tiny --type f16 --seed 13 --out "$work/source-f16.gguf" >&2 || exit 1
tools/llamacpp_kquant_refs.sh "$work/source-f16.gguf" "$work" 128 8 64 "$dir/prompts.txt" "$dir/text.txt" \
    "${presets[@]}" || exit 1
python3 tools/llamacpp_kquant_table.py "$work" ./tinygpt build/release/tools/greedy_logits "$dir/text.txt" \
    >"$work/table.md" || exit 1
cat "$work/table.md"
rm -f "$dir"/*.gguf
for p in "${kept[@]}"; do cp "$work/$p.gguf" "$dir/"; done
python3 - "$work/refs.json" "$dir/refs.json" "${kept[@]}" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1], encoding="utf-8"))
ref["files"] = {k: v for k, v in ref["files"].items() if k in sys.argv[3:]}
json.dump(ref, open(sys.argv[2], "w", encoding="utf-8"), indent=1, ensure_ascii=False)
PY
du -ch "$dir"/*.gguf | tail -1 >&2
